"""kctl: the Apache Kafka cluster controller as a Python framework."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from kctl.hookspecs import hookimpl

try:
    __version__ = version("kctl")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["hookimpl", "__version__"]
