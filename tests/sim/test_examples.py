"""Every scenario in ``examples/`` runs through ``kctl sim`` with exit 0, and tells the story it claims:
the key outcomes are read back from its JSON report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kctl.cli import main
from kctl.sim.scenario import ACTIONS

EXAMPLES = Path(__file__).parents[2] / "examples"
SCENARIOS = sorted(p for p in EXAMPLES.glob("*.toml") if not p.name.startswith("fleet-"))
"""The examples for ``kctl sim``; ``fleet-*.toml`` are ``kctl fleet`` grids (tests/fleet)."""
KCTL_SCRIPT = Path(sys.executable).with_name("kctl")
Report = dict[str, Any]


def faults(report: Report, action: str) -> list[Report]:
    return [f for f in report["faults"] if f["action"] == action]


def partition(report: Report, name: str) -> Report:
    return next(p for p in report["partitions"] if f"{p['topic']}-{p['partition']}" == name)


def rolling_restart(report: Report) -> None:
    controlled, crashes = faults(report, "rolling_restart")
    # Controlled shutdowns move every leader first; crashes leave partitions leaderless for a moment.
    assert controlled["lost_leader"] == 0 and controlled["unavailable_partition_seconds"] == 0
    assert crashes["lost_leader"] > 0 and 0 < crashes["all_led_after"] < 1
    assert next(s for s in report["steps"] if s["action"] == "rolling_restart")["leaders_moved"] > 0
    assert report["unclean_elections"] == 0


def broker_failure_storm(report: Report) -> None:
    rack, also_rack, second, restart_after_disk_failure = faults(report, "kill_broker")
    assert rack["all_led_after"] < 1 and also_rack["all_led_after"] < 1
    # logs-1 waited for its last ISR member, broker 3, to return 50 s after it crashed.
    assert second["all_led_after"] == pytest.approx(50.0, abs=1.0)
    (disk,) = faults(report, "fail_log_dir")
    assert disk["lost_leader"] > 0 and disk["all_led_after"] < 1
    assert restart_after_disk_failure["lost_leader"] == 0  # it led nothing any more
    assert report["partitions_without_leader_at_end"] == 0
    assert report["unclean_elections"] == 0
    assert report["metrics"]["PreferredReplicaImbalanceCount"] == 0


def large_reassignment(report: Report) -> None:
    big = [p for p in report["partitions"] if p["topic"] == "big"]
    assert len(big) == 60 and {b for p in big for b in p["replicas"]} == {1, 2, 3, 4, 5, 6}
    assert partition(report, "pinned-0")["replicas"] == [1, 2, 3]
    assert report["metrics"]["ControllerEpoch"] == 2
    assert report["requests_by_type"]["StopReplica"] > 0  # the replicas moved away were stopped and deleted


def deletion_with_broker_down(report: Report) -> None:
    assert {p["topic"] for p in report["partitions"]} == {"keep"}
    assert report["metrics"]["TopicsToDeleteCount"] == 0
    assert report["unavailable_partition_seconds"] < 1  # deletion never counts as unavailability


def unclean_election(report: Report) -> None:
    assert report["unclean_elections"] == 2
    assert partition(report, "ledger-0")["leader"] == 2
    assert report["metrics"]["UncleanLeaderElections"] == 2
    (leader_crash,) = [f for f in faults(report, "kill_broker") if f["lost_leader"]]
    assert leader_crash["lost_leader"] == 2 and leader_crash["all_led_after"] > 10


CHECKS: dict[str, Callable[[Report], None]] = {
    "rolling-restart": rolling_restart,
    "broker-failure-storm": broker_failure_storm,
    "large-reassignment": large_reassignment,
    "deletion-with-broker-down": deletion_with_broker_down,
    "unclean-election": unclean_election,
}


def test_every_example_has_its_checks() -> None:
    assert sorted(p.stem for p in SCENARIOS) == sorted(CHECKS)


def test_the_examples_use_every_action() -> None:
    used = {step["action"] for path in SCENARIOS for step in tomllib.loads(path.read_text())["steps"]}
    assert used == set(ACTIONS)


@pytest.mark.parametrize("example", SCENARIOS, ids=lambda p: p.stem)
def test_example_runs_and_tells_its_story(example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report_path = tmp_path / "report.json"
    status = main(["sim", str(example), "--json", str(report_path), "--no-color"])
    out = capsys.readouterr().out
    assert status == 0, out
    report = json.loads(report_path.read_text())
    assert report["ok"] and report["failures"] == [] and report["invariant_violations"] == []
    assert report["name"] == example.stem
    for step in report["steps"]:
        assert f"{step['number']:>2} {step['action']}" in out
    assert out.rstrip().endswith("OK: every expectation held and invariants I1-I8 held after every step")
    CHECKS[example.stem](report)


def test_a_run_is_reproducible_and_the_seed_can_be_overridden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = str(EXAMPLES / "unclean-election.toml")
    paths = [tmp_path / f"{n}.json" for n in range(3)]
    for path, seed in zip(paths, ("2", "2", "8")):
        main(["sim", example, "--json", str(path), "--seed", seed])
    first, again, other = (json.loads(p.read_text()) for p in paths)
    assert first == again
    assert first["seed"] == 2 and other["seed"] == 8
    capsys.readouterr()


def test_a_failed_expectation_exits_1_and_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "wrong.toml"
    scenario.write_text((EXAMPLES / "unclean-election.toml").read_text().replace(
        'unclean_elections = 2', 'unclean_elections = 1'))
    report_path = tmp_path / "wrong.json"
    assert main(["sim", str(scenario), "--json", str(report_path)]) == 1
    out = capsys.readouterr().out
    assert "             FAILED: unclean elections: expected 1, got 2" in out.splitlines()
    assert out.rstrip().endswith("FAILED: 1 failed expectations or errors, 0 invariant violations")
    report = json.loads(report_path.read_text())
    assert not report["ok"]
    assert report["failures"] == [{"step": 11, "message": "unclean elections: expected 1, got 2"}]


def test_an_action_that_fails_stops_the_run_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "doomed.toml"
    scenario.write_text("""
[cluster]
brokers = 3

[[steps]]
action = "kill_broker"
broker = 3

[[steps]]
action = "create_topic"
name = "wide"
partitions = 1
replication_factor = 3

[[steps]]
action = "expect"
topics = ["wide"]
""")
    assert main(["sim", str(scenario), "--no-color"]) == 1
    out = capsys.readouterr().out
    assert "ERROR: InvalidReplicationFactorError: Replication factor: 3 larger than available brokers: 2.; " \
           "the remaining steps were not run" in out
    assert " 3 expect" not in out
    assert "  step 2: InvalidReplicationFactorError: Replication factor: 3 larger than available brokers: 2." in out


def run_console_script(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")}
    return subprocess.run([str(KCTL_SCRIPT), *args], capture_output=True, text=True, env=environ, check=False)


def test_logs_stay_quiet_unless_asked_for() -> None:
    # The storm has elections that fail (offline partitions waiting for their ISR): ERROR lines.
    quiet = run_console_script("sim", str(EXAMPLES / "broker-failure-storm.toml"))
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = run_console_script("sim", str(EXAMPLES / "broker-failure-storm.toml"), "--log-level", "INFO")
    assert loud.returncode == 0 and loud.stdout == quiet.stdout
    lines = loud.stderr.splitlines()
    assert "INFO kctl.state_change: [Controller id=1 epoch=1] Changed partition events-0 from NewPartition to " \
           "OnlinePartition with state LeaderAndIsr(leader=6, leaderEpoch=0, isr=List(6, 7, 8), zkVersion=0)" in lines
    assert any(line.startswith("ERROR kctl.state_change: [Controller id=1 epoch=1] Controller 1 epoch 1 failed to "
                               "change state for partition logs-1") for line in lines)
    assert not any(line.startswith("TRACE ") for line in lines)
