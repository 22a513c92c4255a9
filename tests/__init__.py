"""kctl's test suites: a package, so that ``tests.support`` is this repository's and nothing else's."""
