"""``kctl fleet import-logs``: Kafka's log lines parsed (hostile ones counted, never fatal), a
cluster's timeline rebuilt, the Spark job's counts, the CLI's errors, and grids of recorded incidents.

The lines are Kafka 3.9's own (from a real cluster's ``controller.log`` and ``state-change.log``,
see tests/kafka/test_replayed_incident.py), trimmed to what each test needs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

from pathlib import Path
from typing import Any

import pytest

from kctl.bench.grid import GridError, load_grid
from kctl.bench.importer import LogImportError, Source, read_logs, write
from kctl.bench.incidents import MAX_LINE_BYTES, Event, parse_line, reconstruct
from kctl.bench.runner import run_one
from kctl.bench.scenarios import generate, scenario_toml
from kctl.limits import load_toml
from kctl.sim import load_scenario, parse_scenario

from tests.support.process_harness import KCTL

C = "(kafka.controller.KafkaController)"
S = "(state.change.logger)"


def line(ms: int, text: str, logger: str = C, level: str = "INFO") -> str:
    return f"[2026-11-26 01:25:{ms // 1000:02d},{ms % 1000:03d}] {level} {text} {logger}"


STARTUP = [
    line(1000, "[Controller id=3] 3 successfully elected as the controller. Epoch incremented to 1 and epoch zk version is now 1"),
    line(1100, "[Controller id=3] Currently active brokers in the cluster: Set(1, 3)"),
    line(1200, "[Controller id=3] Newly added brokers: 2, deleted brokers: , bounced brokers: , all live brokers: 1,2,3"),
    line(1300, "[RequestSendThread controllerId=3] Controller 3 connected to 127.0.0.1:49409 (id: 1 rack: rack-a) for "
               "sending state change requests", "(kafka.controller.RequestSendThread)"),
]
CREATED = [line(2000, f"[Controller id=3 epoch=1] Changed partition orders-{p} state from NonExistentPartition to "
                      f"NewPartition with assigned replicas {r}", S) for p, r in enumerate(["1,2,3", "2,3,1"])]


def leader(ms: int, partition: int, leader_id: int, epoch: int, controller_epoch: int = 1) -> str:
    return line(ms, f"[Controller id=3 epoch={controller_epoch}] Changed partition orders-{partition} from "
                    f"OfflinePartition to OnlinePartition with state LeaderAndIsr(leader={leader_id}, "
                    f"leaderEpoch={epoch}, isrWithBrokerEpoch=List(BrokerState(brokerId={leader_id}, brokerEpoch=-1)), "
                    "leaderRecoveryState=RECOVERED, partitionEpoch=1)", S)


def events(*lines: str) -> list[Event]:
    parsed = [parse_line(text, 0, i) for i, text in enumerate(lines)]
    return [p for p in parsed if isinstance(p, Event)]


# --- Lines -----------------------------------------------------------------------------------------


def test_each_message_of_interest_becomes_an_event_with_its_fields() -> None:
    kinds = {e.kind: e.fields for e in events(*STARTUP, *CREATED, leader(3000, 0, 2, 1))}
    assert kinds["elected"] == (3, 1)
    assert kinds["live"] == ((1, 3),)
    assert kinds["brokers"] == ((2,), (), (), (1, 2, 3))
    assert kinds["racks"] == ((1, "rack-a"),)
    assert kinds["created"] == (("orders", 1), (2, 3, 1))
    assert kinds["leader"] == (("orders", 0), 2, 1)
    isr = parse_line(line(4000, "[Controller id=3 epoch=1] Partition orders-2 state changed to (Leader:-1,ISR:3,"
                                "LeaderRecoveryState:RECOVERED,LeaderEpoch:4,ZkVersion:3,ControllerEpoch:1) after "
                                "removing replica 3 from the ISR as part of transition to OfflineReplica", S))
    assert isinstance(isr, Event) and (isr.kind, isr.fields, isr.epoch) == ("leader", (("orders", 2), -1, 4), 1)


@pytest.mark.parametrize("text, kind", [
    (line(1, "[Controller id=3] Newly added brokers: 2, deleted brokers"), "malformed brokers"),  # truncated
    (line(1, "[Controller id=3] Shutting down broker x"), "malformed shutdown"),
    (line(1, "[Controller id=3] Successfully updated assignment of partition orders-0 to Replica"), "malformed assignment"),
    (line(1, "[Controller id=3 epoch=1] Changed partition bad/topic-0 state from NonExistentPartition to NewPartition "
             "with assigned replicas 1", S), "malformed created"),  # not a topic's name
    (line(1, "[Controller id=3 epoch=1] Changed partition orders-0 from NewPartition to OnlinePartition with state "
             "LeaderAndIsr(leader=9999999999, leaderEpoch=0,", S), "malformed leader"),  # beyond Kafka's Int
    (line(1, "[Controller id=3] Starting replica leader election (PREFERRED) for partitions a-b-c triggered by "
             "ZkTriggered"), "malformed election"),
    ("[2026-13-45 99:99:99,000] INFO [Controller id=3] Shutting down broker 1 " + C, "malformed timestamp"),
    ("\tat kafka.controller.RequestSendThread.doWork(ControllerChannelManager.scala:252)", "continuation"),
    ("java.io.IOException: Connection to 2 was disconnected before the response was read", "continuation"),
    ("Newly added brokers: 2, deleted brokers: , bounced brokers: , all live brokers: 2", "not a log line"),
    (line(1, "[Controller id=3] Shutting down broker 1").replace("]", "\x00", 1), "not UTF-8"),
    ("", "blank"),
    (line(1, "[Controller id=3] Ready to serve as the new controller with epoch 1"), "other"),
])
def test_lines_that_are_not_events_are_counted_by_kind(text: str, kind: str) -> None:
    assert parse_line(text) == kind


def test_hostile_bytes_are_counted_without_being_decoded_or_matched() -> None:
    assert parse_line(b"\xff\xfe" + line(1, "[Controller id=3] Shutting down broker 1").encode()) == "not UTF-8"
    huge = b"[2026-11-26 01:25:00,000] INFO [Controller id=3] Newly added brokers: " + b"1," * MAX_LINE_BYTES
    assert parse_line(huge) == "oversized"
    assert parse_line(huge.decode()) == "oversized"
    # a long line under the limit is matched in linear time (no backtracking blow-up)
    near = "[Controller id=3] Newly added brokers: " + "1, " * (MAX_LINE_BYTES // 8)
    assert parse_line(line(1, near)) == "malformed brokers"


# --- The timeline --------------------------------------------------------------------------------------


def test_a_crash_a_controlled_shutdown_a_bounce_and_a_reassignment_become_steps() -> None:
    timeline = events(
        *STARTUP, *CREATED,
        line(5000, "[Controller id=3] Newly added brokers: , deleted brokers: 1, bounced brokers: , all live brokers: 2,3"),
        line(8000, "[Controller id=3] Newly added brokers: 1, deleted brokers: , bounced brokers: , all live brokers: 1,2,3"),
        line(10000, "[Controller id=3] Shutting down broker 2"),
        line(10500, "[Controller id=3] Shutting down broker 2"),  # a retry: one shutdown
        line(11000, "[Controller id=3] Newly added brokers: , deleted brokers: 2, bounced brokers: , all live brokers: 1,3"),
        line(11500, "[Controller id=3] Newly added brokers: 2, deleted brokers: , bounced brokers: , all live brokers: 1,2,3"),
        line(12000, "[Controller id=3] Newly added brokers: , deleted brokers: , bounced brokers: 2, all live brokers: 1,2,3"),
        line(14000, "[Controller id=3] Successfully updated assignment of partition orders-0 to ReplicaAssignment("
                    "replicas=3,2,1, addingReplicas=, removingReplicas=1)"),
        line(14001, "[Controller id=3] Successfully updated assignment of partition orders-0 to ReplicaAssignment("
                    "replicas=3,2, addingReplicas=, removingReplicas=)"),
        line(14002, "[Controller id=3] Successfully updated assignment of partition orders-1 to ReplicaAssignment("
                    "replicas=1,3,2, addingReplicas=, removingReplicas=2)"),
        line(15000, "[Controller id=3] Starting replica leader election (PREFERRED) for partitions orders-0,orders-1 "
                    "triggered by ZkTriggered"),
    )
    incident = reconstruct("c", timeline)
    data = incident.scenario
    assert data["cluster"] == {"brokers": [1, 2, 3], "controllers": [3],
                               "config": {"auto.leader.rebalance.enable": False}}  # rack of broker 1 only: none
    assert incident.skipped == {"skipped racks (not every broker's rack is logged)": 1}
    assert data["topics"] == [{"name": "orders", "assignment": [[1, 2, 3], [2, 3, 1]]}]
    assert [(s["at"], s["action"], s.get("broker")) for s in data["steps"]] == [
        (0.0, "kill_broker", 1), (3.0, "start_broker", 1), (5.0, "shutdown_broker", 2), (6.5, "start_broker", 2),
        (7.0, "kill_broker", 2), (7.0, "start_broker", 2), (9.0, "reassign", None), (10.0, "elect_leaders", None)]
    assert data["steps"][6]["partitions"] == {"orders-0": [3, 2], "orders-1": [1, 3]}
    assert data["steps"][7] == {"at": 10.0, "action": "elect_leaders", "kind": "preferred",
                                "partitions": ["orders-0", "orders-1"]}
    parse_scenario(load_toml(scenario_toml(data).encode()), "<imported>")  # kctl sim accepts it


def test_a_failover_finds_the_dead_controller_broker_and_auto_rebalancing_is_kept() -> None:
    timeline = events(
        *STARTUP, *CREATED,
        line(6000, "[Controller id=3] Checking need to trigger auto leader balancing", level="TRACE"),
        line(9000, "[Controller id=1] 1 successfully elected as the controller. Epoch incremented to 2 and epoch zk "
                   "version is now 2"),
        line(9001, "[Controller id=1] Currently active brokers in the cluster: Set(1, 2)"),
        line(9500, "[Controller id=1] Newly added brokers: 3, deleted brokers: , bounced brokers: , all live brokers: 1,2,3"),
    )
    data = reconstruct("c", timeline).scenario
    assert data["cluster"]["controllers"] == [3, 1]
    assert data["cluster"]["config"] == {"auto.leader.rebalance.enable": True}
    assert [(s["action"], s["broker"]) for s in data["steps"]] == [("kill_broker", 3), ("start_broker", 3)]


def test_leader_changes_keep_each_controllers_order_and_skip_repeats() -> None:
    incident = reconstruct("c", events(*CREATED, leader(3000, 0, 1, 0), leader(3001, 1, 2, 0), leader(4000, 0, 2, 1),
                                       leader(4000, 0, 2, 1), leader(1000, 0, 3, 2, controller_epoch=2)))
    # the epoch-2 controller's line comes last though its clock is earlier; the repeated state counts once
    assert incident.leaders == [("orders-0", 1, 0), ("orders-1", 2, 0), ("orders-0", 2, 1), ("orders-0", 3, 2)]


def test_partitions_added_later_are_counted_as_not_replayed() -> None:
    late = line(9000, "[Controller id=3 epoch=1] Changed partition orders-2 state from NonExistentPartition to "
                      "NewPartition with assigned replicas 3,1", S)
    fault = line(5000, "[Controller id=3] Newly added brokers: , deleted brokers: 1, bounced brokers: , all live brokers: 2,3")
    incident = reconstruct("c", events(*STARTUP, *CREATED, fault, late))
    assert incident.skipped == {"skipped partitions added to an existing topic": 1,
                                "skipped racks (not every broker's rack is logged)": 1}


# --- The Spark job and the CLI ---------------------------------------------------------------------


def test_the_job_counts_every_line_per_file_even_a_100mb_line_and_a_binary_file(spark_local: Any, tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "broker-3"
    logs.mkdir(parents=True)
    with (logs / "controller.log").open("wb") as f:
        f.write("\n".join(STARTUP).encode() + b"\n")
        chunk = b"y" * (1 << 20)
        for _ in range(100):  # a 100 MB line, never held by the reader
            f.write(chunk)
        f.write(b"\n" + line(5000, "[Controller id=3] Newly added brokers: , deleted brokers: 1, bounced brokers: , "
                                   "all live brokers: 2,3").encode() + b"\n")
        f.write(line(6000, "[Controller id=3] Shutting down broker one").encode() + b"\n")
        f.write(b"z" * (MAX_LINE_BYTES + 10))  # a last line too long, without a newline
    (logs / "state-change.log").write_text("\n".join(CREATED) + "\n")
    binary = bytes(range(256)) * 64
    (logs / "controller.log.1").write_bytes(binary)
    (logs / "server.log").write_text("not read\n")

    imported = read_logs(spark_local, [Source.parse(str(tmp_path / "logs"))])
    files = {Path(path).name: dict(counts) for path, counts in imported.lines["logs"].items()}
    assert set(files) == {"controller.log", "controller.log.1", "state-change.log"}
    assert files["controller.log"] == {"elected": 1, "live": 1, "brokers": 2, "racks": 1, "oversized": 2,
                                       "malformed shutdown": 1}
    assert files["state-change.log"] == {"created": 2}
    assert set(files["controller.log.1"]) <= {"not UTF-8", "not a log line", "blank"}
    assert sum(files["controller.log.1"].values()) == len(re.split(rb"\r\n|\r|\n", binary))  # Hadoop's line ends
    # the events around the hostile lines still make the incident
    steps = imported.incidents["logs"].scenario["steps"]
    assert [(s["action"], s["broker"]) for s in steps] == [("kill_broker", 1)]

    written = write(spark_local, imported, str(tmp_path / "out"))
    assert [Path(w).name for w in written] == ["logs.toml", "import-report.json"]
    report = json.loads((tmp_path / "out" / "import-report.json").read_text())
    assert report["clusters"]["logs"]["lines"]["oversized"] == 2
    assert load_scenario(tmp_path / "out" / "logs.toml").cluster.brokers == (1, 2, 3)


def test_the_job_refuses_a_source_without_logs_and_a_name_given_twice(spark_local: Any, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(LogImportError, match=r"no controller.log or state-change.log there \(cluster empty\)"):
        read_logs(spark_local, [Source.parse(str(tmp_path / "empty"))])
    with pytest.raises(LogImportError, match="cluster 'a' is named twice"):
        read_logs(spark_local, [Source.parse(f"a={tmp_path}"), Source.parse(f"a={tmp_path}/x")])


def test_a_source_is_named_after_its_last_component_or_its_name() -> None:
    assert Source.parse("/var/log/kafka/prod-eu/") == Source("prod-eu", "/var/log/kafka/prod-eu/")
    assert Source.parse("s3a://bucket/logs/*/controller.log*") == Source("controller.log_", "s3a://bucket/logs/*/controller.log*")
    assert Source.parse("prod=s3a://bucket/logs") == Source("prod", "s3a://bucket/logs")
    with pytest.raises(LogImportError, match="cluster name 'b d'"):
        Source.parse("b d=/logs")


def test_the_cli_rejects_a_bad_cluster_name_before_spark_starts(tmp_path: Path) -> None:
    done = subprocess.run([KCTL, "fleet", "import-logs", "bad name!=/x", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=os.environ | {"KCTL_SPARK_MASTER": "bogus"})
    assert done.returncode == 2, done.stderr
    assert "the cluster name 'bad name!' must be" in done.stderr
    assert not any(tmp_path.iterdir())


# --- Grids of recorded incidents -------------------------------------------------------------------------


def recorded_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "incidents"
    directory.mkdir()
    timeline = events(*STARTUP, *CREATED, line(5000, "[Controller id=3] Newly added brokers: , deleted brokers: 1, "
                                                     "bounced brokers: , all live brokers: 2,3"))
    for name in ("b-cluster", "a-cluster"):
        (directory / f"{name}.toml").write_text(scenario_toml(reconstruct(name, timeline).scenario))
    (directory / "import-report.json").write_text("{}")
    return directory


def test_a_grid_replays_each_recorded_scenario_as_a_seed_under_each_variant(tmp_path: Path,
                                                                           installed_plugins: Any) -> None:
    recorded_dir(tmp_path)
    (tmp_path / "grid.toml").write_text('name = "incidents"\nscenarios = "incidents"\n[grid]\n'
                                        'selector = ["offline", "least-loaded"]\n')
    grid = load_grid(tmp_path / "grid.toml")
    assert grid.seeds == range(2)
    variants = grid.variants()
    first = generate(grid, 0, variants[1])
    assert first["name"] == "a-cluster"  # file name order
    assert first["cluster"]["config"] == {"auto.leader.rebalance.enable": False,
                                          "kctl.leader.selector.offline": "least-loaded"}
    assert generate(grid, 1, variants[0])["name"] == "b-cluster"
    row = run_one(grid, 0, variants[0])
    assert row["error"] is None, row["error"]
    assert (row["brokers"], row["topics"], row["partitions"], row["rf"], row["faults"]) == (3, 1, 2, 3, 1)
    assert row["lost_leader"] == 1  # broker 1 led orders-0


def test_a_grid_of_recorded_scenarios_takes_no_drawn_fields_and_needs_valid_files(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.toml").write_text('[cluster]\nbrokers = [1]\n[[steps]]\naction = "kill_broker"\nbroker = 7\n')
    (tmp_path / "grid.toml").write_text('scenarios = "bad"\nseeds = 3\n[faults]\ncount = 1\n')
    with pytest.raises(GridError) as caught:
        load_grid(tmp_path / "grid.toml")
    text = "\n".join(caught.value.problems)
    assert "seeds: a grid of recorded scenarios" in text and "faults: a grid of recorded scenarios" in text
    assert "unknown broker 7" in text
    (tmp_path / "grid.toml").write_text('scenarios = "nowhere"\n')
    with pytest.raises(GridError, match="no scenario files"):
        load_grid(tmp_path / "grid.toml")
