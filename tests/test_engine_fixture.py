"""The ``engine`` fixture (:mod:`tests.support.engines`): a test that takes it really runs on that
engine, in this process and in the processes it starts, and nothing of the switch outlives it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kctl.engine_api
from kctl.cluster import EmbeddedCluster
from kctl.context import ControllerContext
from kctl.controller import KafkaController
from kctl.errors import InvalidConfigurationError
from kctl.scheduler import SimulatedScheduler
from kctl.stores.memory import MemoryStore
from kctl.transports.inprocess import InProcessTransport

from tests.support.engines import ENGINES_UNDER_TEST, switched_engine


def test_a_test_taking_the_engine_runs_on_it(engine: str) -> None:
    assert engine in ENGINES_UNDER_TEST
    assert ControllerContext().engine == engine
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", 2, 2)
        assert cluster.engine == engine
        assert {c.context.engine for c in cluster.controllers.values()} == {engine}
    scheduler = SimulatedScheduler()
    controller = KafkaController(1, MemoryStore(), InProcessTransport(scheduler=scheduler), clock=scheduler)
    assert controller.context.engine == engine
    child = subprocess.run([sys.executable, "-c", "from kctl.context import ControllerContext; print(ControllerContext().engine)"],
                           capture_output=True, text=True, check=True, timeout=120)
    assert child.stdout.strip() == engine


def test_the_switch_is_undone_afterwards() -> None:
    default, environment = kctl.engine_api.default_engine(), os.environ.get("KCTL_ENGINE")
    other = next(e for e in kctl.engine_api.ENGINES if e != default)
    with switched_engine(other):
        assert ControllerContext().engine == other
    assert ControllerContext().engine == default
    assert os.environ.get("KCTL_ENGINE") == environment


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown engine 'turbo'"), switched_engine("turbo"):
        pass


def test_kctl_engine_naming_no_engine_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KCTL_ENGINE", "turbo")
    with pytest.raises(InvalidConfigurationError, match="KCTL_ENGINE='turbo' is not an engine; choose one of reference, rust"):
        ControllerContext()
    demo = subprocess.run([str(Path(sys.executable).with_name("kctl")), "demo"], capture_output=True, text=True, timeout=120)
    assert demo.returncode == 1 and demo.stdout == ""
    assert demo.stderr == "kctl: error: KCTL_ENGINE='turbo' is not an engine; choose one of reference, rust\n"
