"""The admin tools end to end: ``kctl topics / reassign / elect-leaders --zk`` against real
``kctl controller`` and ``kctl broker`` processes, observed through ZooKeeper."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from process_harness import KCTL, ProcessCluster

from kctl import admin
from kctl.cli import main
from kctl.model import ReplicaAssignment, TopicPartition

T0, T1, U0 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("u", 0)


def kctl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    status = main(list(args))
    out, err = capsys.readouterr()
    assert not err, err
    return status, out.splitlines()


def plan(path: Path, targets: dict[TopicPartition, list[int]]) -> str:
    entries = [{"topic": tp.topic, "partition": tp.partition, "replicas": r} for tp, r in targets.items()]
    path.write_text(json.dumps({"version": 1, "partitions": entries}))
    return str(path)


def isr(cluster: ProcessCluster, tp: TopicPartition) -> tuple[int, ...]:
    state = cluster.state(tp)
    return () if state is None else state.leader_and_isr.isr


def test_admin_tools_against_controller_and_broker_processes(
    cluster: ProcessCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    controller = cluster.start_controller(1)
    for broker in (1, 2, 3):
        cluster.start_broker(broker)
    zk = cluster.zk

    created = subprocess.run([KCTL, "topics", "create", "--zk", zk, "--topic", "orders", "--replica-assignment",
                              "1:2,2:3"], capture_output=True, text=True, timeout=60)
    assert (created.returncode, created.stdout, created.stderr) == (0, "Created topic orders.\n", "")
    cluster.wait_until(lambda: cluster.leaders("orders") == {0: 1, 1: 2} and isr(cluster, T0) == (1, 2)
                       and isr(cluster, T1) == (2, 3), 30, "orders to be online with full ISRs", watch=controller)
    status, lines = kctl(capsys, "topics", "describe", "--zk", zk, "--topic", "orders")
    assert status == 0 and lines[1:] == ["\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
                                         "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2,3"]
    assert lines[0].startswith("Topic: orders\tTopicId: ")  # the controller gave the topic its id

    # A reassignment the controller completes.
    moved = plan(tmp_path / "move.json", {T0: [2, 3]})
    assert kctl(capsys, "reassign", "--zk", zk, "--execute", moved)[0] == 0
    cluster.wait_for_reassignments({T0: [2, 3]}, 30)
    assert kctl(capsys, "reassign", "--zk", zk, "--verify", moved) == (
        0, ["Status of partition reassignment:", "Reassignment of partition orders-0 is complete."])

    # A reassignment stuck on broker 4, which is not running, cancelled back to its origin replicas.
    admin.request_reassignment(cluster.admin, {T1: [3, 4]})
    cluster.wait_until(lambda: cluster.assignment("orders")[1].adding_replicas == (4,), 30, "the reassignment to start")
    stuck = plan(tmp_path / "stuck.json", {T1: [3, 4]})
    assert kctl(capsys, "reassign", "--zk", zk, "--verify", stuck)[1][1] == "Reassignment of partition orders-1 is still in progress."
    assert kctl(capsys, "reassign", "--zk", zk, "--cancel", stuck) == (
        0, ["Successfully cancelled partition reassignment for: orders-1"])
    # Kafka's ORS is RS less the adding replicas, and RS lists the target first: back to {2, 3},
    # with broker 3 now the preferred replica.
    cluster.wait_until(lambda: cluster.assignment("orders")[1] == ReplicaAssignment((3, 2))
                       and cluster.admin.get_partition_reassignments() is None, 30, "the cancellation to complete")

    # A preferred election after the preferred leader came back.
    cluster.brokers[3].kill()
    cluster.wait_until(lambda: cluster.leaders("orders") == {0: 2, 1: 2}, 30, "orders-0 and orders-1 to move to broker 2")
    cluster.start_broker(3)
    cluster.wait_until(lambda: isr(cluster, T0) == (2, 3) and isr(cluster, T1) == (2, 3), 30, "broker 3 to rejoin the ISRs")
    assert kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "preferred", "--all-topic-partitions") == (
        0, ["Successfully completed leader election (PREFERRED) for partitions orders-1",
            "Valid replica already elected for partitions orders-0"])
    assert cluster.leaders("orders") == {0: 2, 1: 3}

    # An unclean election: u-0's last ISR member dies, the out-of-sync replica is elected on request.
    assert kctl(capsys, "topics", "create", "--zk", zk, "--topic", "u", "--replica-assignment", "1:3")[0] == 0
    cluster.wait_until(lambda: isr(cluster, U0) == (1, 3), 30, "u-0 to have a full ISR")
    cluster.brokers[3].kill()
    cluster.wait_until(lambda: isr(cluster, U0) == (1,), 30, "broker 3 to leave u-0's ISR")
    cluster.brokers[1].kill()
    cluster.start_broker(3)
    cluster.wait_until(lambda: cluster.leaders("u") == {0: -1} and 1 not in cluster.admin.get_all_brokers(), 30,
                       "u-0 to be offline")
    assert kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "unclean", "--topic", "u", "--partition", "0") == (
        0, ["Successfully completed leader election (UNCLEAN) for partitions u-0"])
    assert cluster.leaders("u") == {0: 3}
    assert cluster.admin.get_topic_configs(["u"]).values["u"] == {}
