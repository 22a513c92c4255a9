"""``kctl demo``: its progress lines, final tables and exit status."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kctl.cli import main
from kctl.cluster import EmbeddedCluster
from kctl.context import ENGINES
from kctl.sim.report import use_color

KCTL_SCRIPT = Path(sys.executable).with_name("kctl")
STEP = re.compile(r" *(?P<time>\d+\.\d{3})s +(?P<number>\d+) (?P<action>\w+) +(?P<moved>\d+) +(?P<offline>\d+) "
                  r"+(?P<requests>\d+)  (?P<what>.*)")
ACTIONS = ["create_topic", "create_topic", "kill_broker", "start_broker", "reassign", "elect_leaders",
           "shutdown_broker", "start_broker", "delete_topic", "kill_controller", "expect"]


def run_demo(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(["demo", "--brokers", "4", "--partitions", "4", "--no-color", *args])
    return status, capsys.readouterr().out


def progress(out: str) -> list[dict[str, str]]:
    return [m.groupdict() for line in out.splitlines() if (m := STEP.fullmatch(line))]


def test_the_demo_walks_through_every_operation_and_exits_0(capsys: pytest.CaptureFixture[str], engine: str) -> None:
    status, out = run_demo(capsys)
    assert status == 0
    assert out.splitlines()[0] == "kctl demo: 4 brokers on 3 racks, topics of 4 partitions, seed 0"
    assert out.splitlines()[1] == (
        f"engine {engine}, store memory, transport inprocess, leader selectors offline=offline, "
        "reassign=reassign, preferred=preferred, controlled_shutdown=controlled_shutdown"
    )
    steps = progress(out)
    assert [s["action"] for s in steps] == ACTIONS
    assert [int(s["number"]) for s in steps] == list(range(1, len(ACTIONS) + 1))
    times = [float(s["time"]) for s in steps]
    assert times == sorted(times) and times[-1] > 0
    by_action = {s["action"]: s for s in steps}
    assert by_action["kill_broker"]["what"].startswith("broker 4 crashed")
    assert by_action["shutdown_broker"]["what"].startswith("broker 3 shut down")
    # A controlled shutdown moves leaders away first: no partition is left without a leader.
    assert int(by_action["shutdown_broker"]["moved"]) > 0 and "without a leader" not in by_action["shutdown_broker"]["what"]
    assert int(by_action["create_topic"]["requests"]) > 0
    assert re.fullmatch(r"controller 1 crashed; broker \d took over in \d\.\d{3} s \(epoch 2\)",
                        by_action["kill_controller"]["what"])
    assert all(s["offline"] == "0" for s in steps)
    assert out.rstrip().endswith("OK: every expectation held and invariants I1-I8 held after every step")


def test_the_demo_ends_with_the_partition_table_and_kafkas_metric_names(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run_demo(capsys)
    tables = out.split("\n\n")
    partitions = next(t for t in tables if t.startswith("TOPIC")).splitlines()
    assert partitions[0].split() == ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR"]
    rows = [line.split() for line in partitions[1:]]
    assert [(r[0], r[1]) for r in rows] == [("orders", str(p)) for p in range(4)]  # audit was deleted
    for _, _, leader, _, replicas, isr in rows:
        assert leader in replicas.split(",") and sorted(isr.split(",")) == sorted(replicas.split(","))
    metrics = dict(line.split() for line in next(t for t in tables if t.startswith("METRIC")).splitlines()[1:])
    assert metrics["ActiveControllerCount"] == "1"
    assert metrics["OfflinePartitionsCount"] == "0"
    assert metrics["GlobalTopicCount"] == "1" and metrics["GlobalPartitionCount"] == "4"
    assert metrics["ControllerEpoch"] == "2"
    assert metrics["UncleanLeaderElections"] == "0"


def test_the_demo_is_reproducible_from_its_seed(capsys: pytest.CaptureFixture[str]) -> None:
    first = run_demo(capsys, "--seed", "5")
    assert run_demo(capsys, "--seed", "5") == first


def test_an_invariant_violation_is_printed_and_exits_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[int] = []

    def violated(cluster: EmbeddedCluster) -> list[str]:
        checked.append(1)
        return ["I2: leader epoch of orders-0 went back from 3 to 2"] if len(checked) == 4 else []

    monkeypatch.setattr(EmbeddedCluster, "check_invariants", violated)
    status, out = run_demo(capsys)
    assert status == 1
    assert len(checked) >= len(ACTIONS)  # once after the setup and once after every step
    assert "             INVARIANT VIOLATED: I2: leader epoch of orders-0 went back from 3 to 2" in out.splitlines()
    assert "invariant violated after step 3: I2: leader epoch of orders-0 went back from 3 to 2" in out
    assert out.rstrip().endswith("FAILED: 0 failed expectations or errors, 1 invariant violations")


def test_bad_sizes_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--brokers", "2"]) == 2
    assert "argument --brokers: must be at least 3, got 2" in capsys.readouterr().err


def test_the_console_script_prints_no_colour_codes_without_a_terminal() -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_") and k != "NO_COLOR"}
    result = subprocess.run([str(KCTL_SCRIPT), "demo", "--brokers", "3", "--partitions", "2"],
                            capture_output=True, text=True, env=environ, check=False)
    assert result.returncode == 0, result.stderr
    assert "\033[" not in result.stdout and result.stderr == ""
    assert len(progress(result.stdout)) == len(ACTIONS)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_when_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(Terminal(), no_color=False)
    assert not use_color(Terminal(), no_color=True)
    assert not use_color(io.StringIO(), no_color=False)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Terminal(), no_color=False)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_demo_runs_on_every_engine_the_build_provides(capsys: pytest.CaptureFixture[str], engine: str) -> None:
    status, out = run_demo(capsys, "--engine", engine)
    assert status == 0 and f"engine {engine}," in out.splitlines()[1]
