"""``scripts/test``: the pytest commands it runs for each way of calling it (``--dry-run`` prints
them), the marker ``--quick`` deselects the Spark standalone tests by, and the one it always
deselects the whole differential catalogue by (``scripts/kafka-diff`` runs that)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test"


def commands(*args: str, engine: str | None = None) -> list[list[str]]:
    """The commands ``scripts/test --dry-run ARGS`` prints: each as its words."""
    env = {k: v for k, v in os.environ.items() if k != "KCTL_ENGINE"} | ({"KCTL_ENGINE": engine} if engine else {})
    done = subprocess.run([str(SCRIPT), "--dry-run", *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [shlex.split(line) for line in done.stdout.splitlines() if line.startswith("env ")]


def pytest_runs(printed: list[list[str]]) -> list[tuple[str, list[str]]]:
    """Each printed command as (its environment assignment, pytest's arguments)."""
    runs = []
    for words in printed:
        assert words[0] == "env" and words[2:5] == [str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest"], words
        runs.append((words[1], words[5:]))
    return runs


def test_everything_runs_both_engines_then_the_benchmarks() -> None:
    runs = pytest_runs(commands())
    assert runs[:2] == [("KCTL_ENGINE=rust", ["-m", "not kafka_full"]), ("KCTL_ENGINE=reference", ["-m", "not kafka_full"])]
    assert [env for env, _ in runs[2:]] == ["KCTL_BENCH_SCALE=smoke"] and "--benchmark-disable" in runs[2][1]


def test_arguments_go_to_pytest_on_both_engines_and_skip_the_benchmarks() -> None:
    args = ["tests/test_cli.py", "-k", "plugins and not json", "-x"]
    expected = ["-m", "not kafka_full", *args]
    assert pytest_runs(commands(*args)) == [("KCTL_ENGINE=rust", expected), ("KCTL_ENGINE=reference", expected)]
    # a marker expression given joins the deselection, and is still no reason for the benchmarks
    assert pytest_runs(commands("-m", "kafka", "tests/kafka")) == [
        (env, ["-m", "(kafka) and not kafka_full", "tests/kafka"]) for env in ("KCTL_ENGINE=rust", "KCTL_ENGINE=reference")]


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
