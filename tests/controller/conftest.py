"""Fixtures of the controller tests (builders and readers are in :mod:`tests.support.controller`).

Every test here goes through the engine, so it runs on each (``on_each_engine``)."""

from __future__ import annotations

import logging

import pytest

from tests.support.engines import on_each_engine

__all__ = ["on_each_engine"]


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """``caplog`` recording kctl's log from INFO up."""
    caplog.set_level(logging.INFO, logger="kctl")
    return caplog
