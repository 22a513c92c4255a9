"""The engine as a fixture: a test whose result goes through the engine runs on each engine, in one
pytest run, and every other test runs once.

kctl reads its default engine from ``KCTL_ENGINE`` at each call (``kctl.engine_api.default_engine``),
so setting the variable for a test's duration switches every ``engine=`` default in this process and
in the processes the test starts.

Suites whose every test goes through the engine import :func:`on_each_engine` into their conftest;
a module of a mixed suite says ``pytestmark = pytest.mark.usefixtures("engine")``; a test that needs
the engine's name takes ``engine``. ``tests/conftest.py`` marks all of them ``engine``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kctl.engine_api import ENGINES

ENGINES_UNDER_TEST: tuple[str, ...] = (os.environ["KCTL_ENGINE"],) if os.environ.get("KCTL_ENGINE") else ENGINES
"""Every engine, or only the one ``KCTL_ENGINE`` names (``./scripts/test --quick``)."""


@contextmanager
def switched_engine(engine: str) -> Iterator[str]:
    """kctl's default engine is ``engine`` inside (in this process and for the processes it starts)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; engines: {', '.join(ENGINES)}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KCTL_ENGINE", engine)
        yield engine


@pytest.fixture(params=ENGINES_UNDER_TEST)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The engine this test runs on, and kctl's default engine meanwhile: the test runs once per
    engine of ``ENGINES_UNDER_TEST``."""
    with switched_engine(request.param) as name:
        yield name


@pytest.fixture(scope="module", params=ENGINES_UNDER_TEST, name="engine")
def module_engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """``engine`` for a module whose tests share processes (``tests/kafka``, the operating tests of
    ``tests/process``): the module runs on each engine in turn."""
    with switched_engine(request.param) as name:
        yield name


@pytest.fixture(autouse=True)
def on_each_engine(engine: str) -> str:
    """Every test of a conftest that imports this runs on each engine."""
    return engine
