"""Configuration shared by every kctl test.

Fixtures for plugins come from :mod:`kctl.testing`, the same helpers plugin authors use; add
fixtures of other areas below, each under its own banner.
"""

from __future__ import annotations

import sys

import pytest

pytest_plugins = ["kctl.testing", "kctl.testing.hardening"]  # the latter only with --hardening-report


def pytest_configure(config: pytest.Config) -> None:
    """Mark the process as a test run: the default plugin host then never loads entry points."""
    sys._called_from_test = True  # type: ignore[attr-defined]
