"""``scripts/test``: the pytest commands it runs for each way of calling it (``--dry-run`` prints
them), the marker ``--quick`` deselects the Spark standalone tests by, the one it always
deselects the whole differential catalogue by (``scripts/kafka-diff`` runs that), and the one run
that covers both engines (``tests.support.engines``)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kctl.engine_api import ENGINES

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test"


def commands(*args: str, engine: str | None = None) -> list[list[str]]:
    """The commands ``scripts/test --dry-run ARGS`` prints: each as its words."""
    env = {k: v for k, v in os.environ.items() if k != "KCTL_ENGINE"} | ({"KCTL_ENGINE": engine} if engine else {})
    done = subprocess.run([str(SCRIPT), "--dry-run", *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [shlex.split(line) for line in done.stdout.splitlines() if line.startswith("env ")]


def pytest_runs(printed: list[list[str]]) -> list[tuple[str, list[str]]]:
    """Each printed command as (what it does to the environment, pytest's arguments)."""
    runs = []
    for words in printed:
        environment = words[1:3] if words[1] == "-u" else words[1:2]
        command = words[1 + len(environment):]
        assert words[0] == "env" and command[:3] == [str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest"], words
        runs.append((" ".join(environment), command[3:]))
    return runs


def test_everything_is_one_run_on_every_engine_then_the_benchmarks() -> None:
    runs = pytest_runs(commands(engine="reference"))
    assert runs[0] == ("-u KCTL_ENGINE", ["-m", "not kafka_full"])  # each engine, even with KCTL_ENGINE set
    assert [env for env, _ in runs[1:]] == ["KCTL_BENCH_SCALE=smoke"] and "--benchmark-disable" in runs[1][1]


def test_arguments_go_to_pytest_and_skip_the_benchmarks() -> None:
    args = ["tests/test_cli.py", "-k", "plugins and not json", "-x"]
    assert pytest_runs(commands(*args)) == [("-u KCTL_ENGINE", ["-m", "not kafka_full", *args])]
    # a marker expression given joins the deselection, and is still no reason for the benchmarks
    assert pytest_runs(commands("-m", "kafka", "tests/kafka")) == [
        ("-u KCTL_ENGINE", ["-m", "(kafka) and not kafka_full", "tests/kafka"])]


def test_quick_runs_one_engine_without_spark_standalone_or_benchmarks() -> None:
    quick = ["-m", "not spark_standalone and not kafka_full"]
    assert pytest_runs(commands("--quick")) == [("KCTL_ENGINE=rust", quick)]
    assert pytest_runs(commands("tests/fleet", "--quick", "-x", engine="reference")) == [
        ("KCTL_ENGINE=reference", [*quick, "tests/fleet", "-x"])]


@pytest.mark.parametrize("marker", [["-m", "not slow"], ["-mnot slow"]])
def test_quick_combines_a_marker_expression_given(marker: list[str]) -> None:
    assert pytest_runs(commands("--quick", *marker, "tests/sim")) == [
        ("KCTL_ENGINE=rust", ["-m", "(not slow) and not spark_standalone and not kafka_full", "tests/sim"])]


def collected(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]  # 5: nothing selected
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_the_standalone_tests_and_no_others_carry_the_marker_quick_deselects() -> None:
    standalone = collected("-m", "spark_standalone", "tests/fleet")
    assert standalone == collected("tests/fleet/test_standalone.py") != set()
    assert not standalone & collected("-m", "not spark_standalone", "tests/fleet")


def test_the_kafka_catalogue_beyond_the_small_set_carries_the_marker_scripts_test_leaves_out() -> None:
    full = collected("-m", "kafka_full", "tests/kafka")
    assert full == collected("tests/kafka/test_catalogue.py", "tests/kafka/test_auto_rebalance.py",
                             "tests/kafka/test_broker_order.py") != set()
    small = collected("-m", "kafka and not kafka_full", "tests/kafka")
    assert small and not small & full and small | full == collected("-m", "kafka", "tests/kafka")


def engine_runs(*args: str, engine: str | None = None) -> dict[str, set[str]]:
    """The tests ``args`` collect, by engine (``""``: those that run once), with ``KCTL_ENGINE`` as given."""
    env = {k: v for k, v in os.environ.items() if k != "KCTL_ENGINE"} | ({"KCTL_ENGINE": engine} if engine else {})
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        if "::" in line:
            test, _, params = line.partition("[")
            engines = [p for p in params.rstrip("]").split("-") if p in ENGINES]
            runs.setdefault(engines[0] if engines else "", set()).add(test)
    return runs


def test_the_engine_tests_run_on_each_engine_and_the_others_once() -> None:
    """A suite that goes through the engine (tests/controller, a state machine's tests) collects each
    test once per engine; a pure CLI or codec suite once; ``KCTL_ENGINE`` keeps one engine."""
    runs = engine_runs("tests/controller/test_elections.py", "tests/engine/test_replica_state_machine.py",
                       "tests/test_int32.py", "tests/test_scripts_test.py")
    assert set(runs) == {"", *ENGINES}
    assert runs["rust"] == runs["reference"] and {Path(t.partition("::")[0]).name for t in runs["rust"]} == {
        "test_elections.py", "test_replica_state_machine.py"}
    assert {Path(t.partition("::")[0]).name for t in runs[""]} == {"test_int32.py", "test_scripts_test.py"}
    quick = engine_runs("tests/controller/test_elections.py", "tests/test_int32.py", engine="reference")
    assert quick == {"": {t for t in runs[""] if "test_int32" in t},
                     "reference": {t for t in runs["reference"] if "test_elections" in t}}
