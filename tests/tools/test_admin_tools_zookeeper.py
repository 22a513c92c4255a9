"""``kctl topics / reassign / elect-leaders`` on a real ZooKeeper server, without a controller: the
znodes each command writes (Kafka's paths and JSON), and the requests it refuses before writing.
The controller's side is covered by ``tests/process/test_admin_tools_processes.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kctl.cli import main
from kctl.model import BrokerInfo, EndPoint, ReplicaAssignment, TopicPartition
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.zookeeper import ZooKeeperEnsemble

T0 = TopicPartition("orders", 0)


@pytest.fixture
def zk(zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str) -> str:
    return zookeeper_server.hosts + zookeeper_chroot


@pytest.fixture
def brokers(zk: str) -> Iterator[ZooKeeperStore]:
    """A session holding the registrations of brokers 1–3 (racks a, b, c), and used to look."""
    store = ZooKeeperStore(zk)
    for b, rack in ((1, "a"), (2, "b"), (3, "c")):
        store.register_broker(BrokerInfo(b, (EndPoint("127.0.0.1", 9090 + b),), rack))
    yield store
    store.close()


def kctl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def write(path: Path, document: Any) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def test_topics_commands_write_kafkas_znodes(zk: str, brokers: ZooKeeperStore, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = kctl(capsys, "topics", "create", "--zk", zk, "--topic", "orders", "--partitions", "3",
                          "--replication-factor", "3", "--config", "retention.ms=1000")
    assert (status, out) == (0, "Created topic orders.\n")
    placed = brokers.get_topic_assignments(["orders"]).values["orders"]
    assert sorted(placed.partitions) == [0, 1, 2] and placed.topic_id is None  # the controller gives it one
    assert all(sorted(a.replicas) == [1, 2, 3] for a in placed.partitions.values())
    assert brokers.get_topic_configs(["orders"]).values["orders"] == {"retention.ms": "1000"}

    status, out, _ = kctl(capsys, "topics", "create", "--zk", zk, "--topic", "my.audit", "--replica-assignment", "1:2,2:3")
    assert status == 0 and out.endswith("Created topic my.audit.\n") and out.startswith("WARNING: Due to limitations")
    assert dict(brokers.get_topic_assignments(["my.audit"]).values["my.audit"].partitions) == {
        0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))}
    status, _, err = kctl(capsys, "topics", "create", "--zk", zk, "--topic", "orders", "--partitions", "1",
                          "--replication-factor", "1")
    assert (status, err) == (1, "kctl: error: Topic 'orders' already exists.\n")
    assert kctl(capsys, "topics", "create", "--zk", zk, "--topic", "orders", "--partitions", "1",
                "--replication-factor", "1", "--if-not-exists")[0] == 0
    status, _, err = kctl(capsys, "topics", "create", "--zk", zk, "--topic", "big", "--partitions", "1",
                          "--replication-factor", "4")
    assert status == 1 and "Replication factor: 4 larger than available brokers: 3." in err
    assert "big" not in brokers.get_all_topics()

    # No controller runs: no topic id and no partition state yet, so no leader and an empty ISR.
    status, out, _ = kctl(capsys, "topics", "describe", "--zk", zk, "--topic", "my.audit")
    assert out.splitlines() == [
        "Topic: my.audit\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: ",
        "\tTopic: my.audit\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: ",
        "\tTopic: my.audit\tPartition: 1\tLeader: none\tReplicas: 2,3\tIsr: ",
    ]
    status, _, err = kctl(capsys, "topics", "describe", "--zk", zk, "--topic", "nope")
    assert (status, err) == (1, "kctl: error: Topic 'nope' does not exist as expected\n")

    status, out, _ = kctl(capsys, "topics", "alter", "--zk", zk, "--topic", "my.audit", "--partitions", "3",
                          "--replica-assignment", "1:2,2:3,3:1")
    assert status == 0 and out.splitlines()[-1] == "Adding partitions succeeded!"
    assert brokers.get_topic_assignments(["my.audit"]).values["my.audit"].partitions[2] == ReplicaAssignment((3, 1))
    status, _, err = kctl(capsys, "topics", "alter", "--zk", zk, "--topic", "my.audit", "--partitions", "2")
    assert status == 1 and "error:" in err

    status, out, _ = kctl(capsys, "topics", "delete", "--zk", zk, "--topic", "orders")
    assert out.splitlines() == ["Topic orders is marked for deletion.",
                                "Note: This will have no impact if delete.topic.enable is not set to true."]
    assert brokers.get_topic_deletions() == ["orders"]
    assert kctl(capsys, "topics", "delete", "--zk", zk, "--topic", "orders")[1] == "Topic orders is already marked for deletion.\n"
    assert kctl(capsys, "topics", "list", "--zk", zk)[1].splitlines() == ["my.audit", "orders - marked for deletion"]


def test_bad_replica_assignment_is_a_usage_error(zk: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = kctl(capsys, "topics", "create", "--zk", zk, "--topic", "t", "--replica-assignment", "1:2,3")
    assert status == 2 and "partition 1 has different replication factor: [3]" in err
    status, _, err = kctl(capsys, "topics", "create", "--zk", zk, "--topic", "t", "--replica-assignment", "1:1")
    assert status == 2 and "may not contain duplicate entries: 1" in err


def test_reassign_writes_the_admin_znode_and_refuses_bad_files(
    zk: str, brokers: ZooKeeperStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    brokers.create_topic("orders", {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))})
    bad = write(tmp_path / "bad.json", {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": "3"}]})
    status, _, err = kctl(capsys, "reassign", "--zk", zk, "--execute", bad)
    assert status == 1 and err == f'kctl: error: {bad}: partitions[0].replicas: expected a non-empty list of broker ids (integers from 0 to 2147483647), got "3"\n'
    unknown = write(tmp_path / "unknown.json", {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [3, 1]}, {"topic": "orders", "partition": 9, "replicas": [1]}]})
    status, _, err = kctl(capsys, "reassign", "--zk", zk, "--execute", unknown)
    assert (status, err) == (1, "kctl: error: The proposed assignment contains non-existent partitions: orders-9\n")
    assert brokers.get_partition_reassignments() is None  # nothing written

    plan = write(tmp_path / "plan.json", {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [3, 1], "log_dirs": ["any", "any"]}]})
    status, out, _ = kctl(capsys, "reassign", "--zk", zk, "--execute", plan)
    assert status == 0
    assert out.splitlines() == [
        "Current partition replica assignment", "",
        '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}', "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignment for orders-0",
    ]
    assert brokers.get_partition_reassignments() == {T0: [3, 1]}
    status, _, err = kctl(capsys, "reassign", "--zk", zk, "--execute", plan)
    assert status == 1 and "Cannot execute because there is an existing partition assignment" in err
    status, out, _ = kctl(capsys, "reassign", "--zk", zk, "--verify", plan)
    assert (status, out) == (0, "Status of partition reassignment:\nReassignment of partition orders-0 is still in progress.\n")

    # Not yet picked up by a controller: cancelling withdraws the request.
    status, out, _ = kctl(capsys, "reassign", "--zk", zk, "--cancel", plan)
    assert (status, out) == (0, "Successfully cancelled partition reassignment for: orders-0\n")
    assert brokers.get_partition_reassignments() is None
    status, out, _ = kctl(capsys, "reassign", "--zk", zk, "--verify", plan)
    assert status == 1 and out.splitlines()[-1] == (
        "There is no active reassignment of partition orders-0, but replica set is 1,2 rather than 3,1.")


def test_elect_leaders_arguments_and_timeout(
    zk: str, brokers: ZooKeeperStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    brokers.create_topic("orders", {0: ReplicaAssignment((1, 2))})
    status, _, err = kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "preferred", "--topic", "orders")
    assert (status, err) == (1, "kctl: error: --partition is required with --topic\n")
    bad = write(tmp_path / "e.json", {"partitions": [{"topic": "orders", "partition": "0"}]})
    status, _, err = kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "preferred", "--path-to-json-file", bad)
    assert status == 1 and f"{bad}: partitions[0].partition: expected a partition id" in err

    status, out, _ = kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "PREFERRED", "--topic", "orders",
                          "--partition", "3")
    assert (status, out) == (1, "Error completing leader election (PREFERRED) for partition: orders-3: "
                                "UNKNOWN_TOPIC_OR_PARTITION: The partition does not exist.\n")
    status, _, err = kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "preferred", "--all-topic-partitions",
                          "--timeout", "0.3")
    assert status == 1 and "did not process the preferred replica election within 0.3s" in err
    assert brokers.get_preferred_replica_election() == {T0}
