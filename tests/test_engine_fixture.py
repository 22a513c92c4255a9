"""The ``engine`` fixture (:mod:`tests.support.engines`): a test that takes it really runs on that
engine, in this process and in the processes it starts, and nothing of the switch outlives it."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
import types

import pytest

import kctl.engine_api
from kctl.cluster import EmbeddedCluster
from kctl.context import ControllerContext
from kctl.controller import KafkaController
from kctl.sim.runner import run_scenario

from tests.support.engines import ENGINES_UNDER_TEST, bindings, default_engine, defaulting_functions


def defaults() -> dict[str, str]:
    """The default of every ``engine`` parameter bound to ``DEFAULT_ENGINE``, by function."""
    found = {}
    for _, functions in bindings():
        for function, params in functions:
            signature = inspect.signature(function)
            found |= {f"{function.__qualname__}({param})": signature.parameters[param].default for param in params}
    return found


def test_the_switch_reaches_every_engine_default_of_kctl() -> None:
    found = defaults()
    assert {"EmbeddedCluster.__init__(engine)", "KafkaController.__init__(engine)", "run_scenario(engine)"} <= set(found)
    assert set(found.values()) == {kctl.engine_api.DEFAULT_ENGINE}


def test_a_test_taking_the_engine_runs_on_it(engine: str) -> None:
    assert engine in ENGINES_UNDER_TEST
    assert ControllerContext().engine == engine
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", 2, 2)
        assert cluster.engine == engine
        assert {c.context.engine for c in cluster.controllers.values()} == {engine}
    for signature in map(inspect.signature, (KafkaController, run_scenario)):
        assert signature.parameters["engine"].default == engine
    assert set(defaults().values()) == {engine}
    child = subprocess.run([sys.executable, "-c", "from kctl.context import ControllerContext; print(ControllerContext().engine)"],
                           capture_output=True, text=True, check=True, timeout=120)
    assert child.stdout.strip() == engine


def test_the_switch_is_undone_afterwards() -> None:
    default, environment = kctl.engine_api.DEFAULT_ENGINE, os.environ.get("KCTL_ENGINE")
    other = next(e for e in kctl.engine_api.ENGINES if e != default)
    with default_engine(other):
        assert ControllerContext().engine == other and set(defaults().values()) == {other}
    assert ControllerContext().engine == default and set(defaults().values()) == {default}
    assert os.environ.get("KCTL_ENGINE") == environment


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown engine 'turbo'"), default_engine("turbo"):
        pass


def test_a_default_engine_read_at_import_cannot_be_switched_and_says_so() -> None:
    """A module binding ``DEFAULT_ENGINE`` where the switch cannot reach it (a module constant)
    makes every engine test fail, rather than leave them on the other engine."""
    source = "from kctl.engine_api import DEFAULT_ENGINE\n\nENGINE = DEFAULT_ENGINE\n"
    module = types.ModuleType("kctl.imaginary")
    exec(compile(source, "imaginary.py", "exec"), module.__dict__)
    with pytest.raises(ValueError, match="kctl.imaginary, line 3: DEFAULT_ENGINE is read at import"):
        list(defaulting_functions(module, ast.parse(source)))
