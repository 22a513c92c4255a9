"""Configuration shared by every kctl test.

Fixtures for plugins come from :mod:`kctl.testing`, the same helpers plugin authors use; ``engine``
(a test that goes through the engine runs on each) from :mod:`tests.support.engines`; add fixtures
of other areas below, each under its own banner.
"""

from __future__ import annotations

import sys

import pytest

from tests.support.engines import engine

__all__ = ["engine"]

pytest_plugins = ["kctl.testing", "kctl.testing.hardening"]  # the latter only with --hardening-report


def pytest_configure(config: pytest.Config) -> None:
    """Mark the process as a test run: the default plugin host then never loads entry points."""
    sys._called_from_test = True  # type: ignore[attr-defined]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``engine`` every test that runs once per engine (``-m "not engine"`` selects the rest)."""
    for item in items:
        if "engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.engine)
