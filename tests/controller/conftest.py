"""Fixtures of the controller tests (builders and readers are in ``helpers.py``)."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """``caplog`` recording kctl's log from INFO up."""
    caplog.set_level(logging.INFO, logger="kctl")
    return caplog
