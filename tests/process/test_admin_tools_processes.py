"""The admin tools end to end: ``kctl topics / reassign / elect-leaders --zk`` against real
``kctl controller`` and ``kctl broker`` processes, observed through ZooKeeper."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kctl import admin
from kctl.cli import main
from kctl.model import ReplicaAssignment, TopicPartition

from tests.support.process_harness import KCTL, ProcessCluster

T0, T1, U0, U1 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("u", 0), TopicPartition("u", 1)


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
    assert status == 0 and lines[1:] == [
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\tElr: N/A\tLastKnownElr: N/A",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2,3\tElr: N/A\tLastKnownElr: N/A"]
    assert lines[0].startswith("Topic: orders\tTopicId: ")  # the controller gave the topic its id

    # A reassignment the controller completes.
    moved = plan(tmp_path / "move.json", {T0: [2, 3]})
    assert kctl(capsys, "reassign", "--zk", zk, "--execute", moved)[0] == 0
    cluster.wait_for_reassignments({T0: [2, 3]}, 30)
    assert kctl(capsys, "reassign", "--zk", zk, "--verify", moved) == (
        0, ["Status of partition reassignment:", "Reassignment of partition orders-0 is completed."])

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
    cluster.brokers[3].kill()  # orders-1 is led by 2 already: wait for the controller to see 3 go
    cluster.wait_until(lambda: 3 not in cluster.admin.get_all_brokers() and cluster.leaders("orders") == {0: 2, 1: 2},
                       30, "broker 3 to be gone and orders-0 and orders-1 led by broker 2")
    cluster.start_broker(3)
    cluster.wait_until(lambda: isr(cluster, T0) == (2, 3) and isr(cluster, T1) == (2, 3), 30, "broker 3 to rejoin the ISRs")
    # over all partitions, as Kafka's: orders-0, already led by its preferred replica, is not listed
    assert kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "preferred", "--all-topic-partitions") == (
        0, ["Successfully completed leader election (PREFERRED) for partitions orders-1"])
    assert cluster.leaders("orders") == {0: 2, 1: 3}

    # Kafka's options: --generate a move of orders onto brokers 1 and 3, --execute it with
    # --reassignment-json-file, then roll it back with the file --execute printed.
    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"orders"}]}')
    status, lines = kctl(capsys, "reassign", "--zookeeper", zk, "--generate", "--topics-to-move-json-file", str(topics),
                         "--broker-list", "1,3")
    assert status == 0 and lines[3] == "Proposed partition reassignment configuration"
    proposal = tmp_path / "proposal.json"
    proposal.write_text(lines[4])
    targets = {TopicPartition("orders", e["partition"]): e["replicas"] for e in json.loads(lines[4])["partitions"]}
    assert sorted(map(sorted, targets.values())) == [[1, 3], [1, 3]]
    status, lines = kctl(capsys, "reassign", "--zookeeper", zk, "--reassignment-json-file", str(proposal), "--execute")
    assert status == 0 and lines[4] == "Save this to use as the --reassignment-json-file option during rollback"
    rollback = tmp_path / "rollback.json"
    rollback.write_text(lines[2])
    cluster.wait_for_reassignments(targets, 30)
    assert kctl(capsys, "reassign", "--zookeeper", zk, "--reassignment-json-file", str(proposal), "--verify") == (
        0, ["Status of partition reassignment:", "Reassignment of partition orders-0 is completed.",
            "Reassignment of partition orders-1 is completed."])
    assert kctl(capsys, "reassign", "--zookeeper", zk, "--reassignment-json-file", str(rollback), "--execute")[0] == 0
    cluster.wait_for_reassignments({T0: [2, 3], T1: [3, 2]}, 30)
    assert kctl(capsys, "reassign", "--zookeeper", zk, "--list") == (0, ["No partition reassignments found."])

    # An unclean election: the last ISR member of u-0 and u-1 dies, the out-of-sync replica is
    # elected on request for u-0, and for u-1 too: the tool reports both.
    assert kctl(capsys, "topics", "create", "--zk", zk, "--topic", "u", "--replica-assignment", "1:3,1:3")[0] == 0
    cluster.wait_until(lambda: isr(cluster, U0) == isr(cluster, U1) == (1, 3), 30, "u to have full ISRs")
    cluster.brokers[3].kill()
    cluster.wait_until(lambda: isr(cluster, U0) == isr(cluster, U1) == (1,), 30, "broker 3 to leave u's ISRs")
    cluster.brokers[1].kill()
    cluster.start_broker(3)
    cluster.wait_until(lambda: cluster.leaders("u") == {0: -1, 1: -1} and 1 not in cluster.admin.get_all_brokers(), 30,
                       "u to be offline")
    assert kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "unclean", "--topic", "u", "--partition", "0") == (
        0, ["Successfully completed leader election (UNCLEAN) for partitions u-0, u-1"])
    assert cluster.leaders("u") == {0: 3, 1: 3}
    assert cluster.admin.get_topic_configs(["u"]).values["u"] == {}

    # Kafka 3.9's --delete prints nothing and returns once the controller has deleted the topic
    # (orders: its replicas are on the live brokers 2 and 3).
    deleted = subprocess.run([KCTL, "topics", "delete", "--zookeeper", zk, "--topic", "orders"], capture_output=True,
                             text=True, timeout=60)
    assert (deleted.returncode, deleted.stdout, deleted.stderr) == (0, "", "")
    assert cluster.admin.get_all_topics() == {"u"} and cluster.admin.get_topic_deletions() == []
