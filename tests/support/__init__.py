"""Helpers shared by kctl's test suites (``tests.support.x``; the repository is on ``sys.path`` by
pyproject's pytest ``pythonpath``). What plugin authors need too lives in :mod:`kctl.testing`."""
