"""``kctl topics / reassign / elect-leaders`` on a real ZooKeeper server, without a controller: the
znodes each command writes (Kafka's paths and JSON), what it prints (Kafka 3.9's tools' lines),
and the requests it refuses before writing. The controller's side is covered by
``tests/process/test_admin_tools_processes.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kctl.cli import main
from kctl.model import BrokerInfo, EndPoint, LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.stores.base import MATCH_ANY_VERSION
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
        "\tTopic: my.audit\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: \tElr: N/A\tLastKnownElr: N/A",
        "\tTopic: my.audit\tPartition: 1\tLeader: none\tReplicas: 2,3\tIsr: \tElr: N/A\tLastKnownElr: N/A",
    ]
    status, _, err = kctl(capsys, "topics", "describe", "--zk", zk, "--topic", "nope")
    assert (status, err) == (1, "kctl: error: Topic 'nope' does not exist as expected\n")

    status, out, _ = kctl(capsys, "topics", "alter", "--zk", zk, "--topic", "my.audit", "--partitions", "3",
                          "--replica-assignment", "1:2,2:3,3:1")
    assert status == 0 and out.splitlines()[-1] == "Adding partitions succeeded!"
    assert brokers.get_topic_assignments(["my.audit"]).values["my.audit"].partitions[2] == ReplicaAssignment((3, 1))
    status, _, err = kctl(capsys, "topics", "alter", "--zk", zk, "--topic", "my.audit", "--partitions", "2")
    assert status == 1 and "error:" in err

    # Kafka 3.9's --delete prints nothing and waits for the deletion: no controller deletes it here.
    for _ in range(2):  # a topic marked already is no error
        status, out, err = kctl(capsys, "topics", "delete", "--zookeeper", zk, "--topic", "orders", "--timeout", "0.3")
        assert (status, out) == (1, "")
        assert err == ("kctl: error: Topic 'orders' was not deleted within 0.3s (is a controller running? a deletion "
                       "waits for every broker holding a replica); it stays marked for deletion in "
                       "/admin/delete_topics/orders\n")
        assert brokers.get_topic_deletions() == ["orders"]
    assert kctl(capsys, "topics", "delete", "--zk", zk, "--topic", "nope") == (
        1, "", "kctl: error: Topic 'nope' does not exist as expected\n")
    assert kctl(capsys, "topics", "delete", "--zk", zk, "--topic", "nope", "--if-exists") == (0, "", "")
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
    assert (status, err) == (1, "kctl: error: Unable to find partition: orders-9\n")
    assert brokers.get_partition_reassignments() is None  # nothing written

    plan = write(tmp_path / "plan.json", {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [3, 1], "log_dirs": ["any", "any"]}]})
    # Kafka's form; the rollback hint names the option that takes the file back.
    status, out, _ = kctl(capsys, "reassign", "--zookeeper", zk, "--reassignment-json-file", plan, "--execute")
    assert status == 0
    assert out.splitlines() == [
        "Current partition replica assignment", "",
        '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}', "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignment for orders-0",
    ]
    assert brokers.get_partition_reassignments() == {T0: [3, 1]}
    status, _, err = kctl(capsys, "reassign", "--zk", zk, "--execute", plan)  # kctl's form
    assert (status, err) == (1, "kctl: error: Cannot execute because there is an existing partition assignment. Wait "
                                "for it to complete (--verify) or cancel it (--cancel).\n")
    status, out, _ = kctl(capsys, "reassign", "--zk", zk, "--verify", "--reassignment-json-file", plan)
    assert (status, out) == (0, "Status of partition reassignment:\nReassignment of partition orders-0 is still in progress.\n")

    # Not yet picked up by a controller: cancelling withdraws the request.
    status, out, _ = kctl(capsys, "reassign", "--zk", zk, "--reassignment-json-file", plan, "--cancel")
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


def test_elect_leaders_over_all_partitions_prints_nothing_when_none_needed_an_election(
    zk: str, brokers: ZooKeeperStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kafka's ElectLeaders over all partitions leaves out those that need none: no line at all
    brokers.create_topic("orders", {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))})
    led = {TopicPartition("orders", p): LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, (1, 2)), 1)
           for p, leader in ((0, 1), (1, 2))}
    assert set(brokers.create_partition_states(led, MATCH_ANY_VERSION).values()) == {None}
    assert kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "preferred", "--all-topic-partitions") == (
        0, "", "")
    status, out, _ = kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "preferred", "--topic", "orders",
                          "--partition", "1")
    assert (status, out) == (0, "Valid replica already elected for partitions orders-1\n")
    assert brokers.get_preferred_replica_election() is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--execute", "--broker-list", "1,2", "--reassignment-json-file", "f"],
         'Option "[broker-list]" can\'t be used with action "[execute]"'),
        (["--verify"], 'Missing required argument "[reassignment-json-file]"'),
        (["--generate", "--topics-to-move-json-file", "t"], 'Missing required argument "[broker-list]"'),
        (["--generate", "--broker-list", "1", "--topics-to-move-json-file", "t", "--reassignment-json-file", "f"],
         'Option "[reassignment-json-file]" can\'t be used with action "[generate]"'),
        (["--list", "--disable-rack-aware"], 'Option "[disable-rack-aware]" can\'t be used with action "[list]"'),
        (["--cancel", "a.json", "--reassignment-json-file", "b.json"],
         "--cancel a.json and --reassignment-json-file b.json name different files"),
    ],
)
def test_reassign_options_are_checked_per_action_as_kafka_does(
    zk: str, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert kctl(capsys, "reassign", "--zk", zk, *args) == (1, "", f"kctl: error: {message}\n")


def test_reassign_usage_errors(zk: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = kctl(capsys, "reassign", "--zk", zk, "--generate", "--list")
    assert status == 2 and "not allowed with argument" in err
    status, _, err = kctl(capsys, "reassign", "--zk", zk, "--generate", "--broker-list", "1,2,1")
    assert status == 2 and "Broker list contains duplicate entries: [1]" in err


def test_generate_prints_the_current_and_a_proposed_assignment(
    zk: str, brokers: ZooKeeperStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    brokers.create_topic("orders", {p: ReplicaAssignment((1, 2)) for p in range(4)})
    brokers.create_topic("audit", {0: ReplicaAssignment((3, 1))})
    topics = write(tmp_path / "topics.json", {"version": 1, "topics": [{"topic": "orders"}, {"topic": "audit"}]})
    generate = ["reassign", "--zookeeper", zk, "--generate", "--topics-to-move-json-file", topics, "--broker-list"]
    status, out, _ = kctl(capsys, *generate, "2,3,7")
    assert status == 0
    lines = out.splitlines()
    assert lines[:4] == [
        "Current partition replica assignment",
        '{"version":1,"partitions":[{"topic":"audit","partition":0,"replicas":[3,1],"log_dirs":["any","any"]},'
        + ",".join(f'{{"topic":"orders","partition":{p},"replicas":[1,2],"log_dirs":["any","any"]}}' for p in range(4))
        + "]}",
        "",
        "Proposed partition reassignment configuration",
    ]
    assert len(lines) == 5
    proposal = json.loads(lines[4])
    assert proposal["version"] == 1
    assert [(e["topic"], e["partition"]) for e in proposal["partitions"]] == [("audit", 0)] + [("orders", p) for p in range(4)]
    for entry in proposal["partitions"]:  # broker 7 is not registered: left out, as Kafka's tool does
        assert sorted(entry["replicas"]) == [2, 3] and entry["log_dirs"] == ["any", "any"]
    assert sorted(e["replicas"][0] for e in proposal["partitions"][1:]) == [2, 2, 3, 3]  # leaders spread evenly
    assert brokers.get_partition_reassignments() is None  # --generate writes nothing

    # The proposal is a reassignment file.
    plan = tmp_path / "plan.json"
    plan.write_text(lines[4])
    assert kctl(capsys, "reassign", "--zk", zk, "--reassignment-json-file", str(plan), "--execute")[0] == 0
    assert brokers.get_partition_reassignments() == {
        TopicPartition(e["topic"], e["partition"]): e["replicas"] for e in proposal["partitions"]}

    assert kctl(capsys, *generate, "2") == (1, "", "kctl: error: Replication factor: 2 larger than available brokers: 1.\n")
    brokers.register_broker(BrokerInfo(4, (EndPoint("127.0.0.1", 9094),)))  # no rack
    status, _, err = kctl(capsys, *generate, "2,3,4")
    assert (status, err) == (1, "kctl: error: Not all brokers have rack information. Add --disable-rack-aware in "
                                "command line to make replica assignment without rack information.\n")
    status, out, _ = kctl(capsys, *generate, "2,3,4", "--disable-rack-aware")
    assert status == 0 and all(set(e["replicas"]) <= {2, 3, 4} for e in json.loads(out.splitlines()[4])["partitions"])
    missing = write(tmp_path / "missing.json", {"version": 1, "topics": [{"topic": "nope"}]})
    assert kctl(capsys, "reassign", "--zk", zk, "--generate", "--topics-to-move-json-file", missing,
                "--broker-list", "1,2") == (1, "", "kctl: error: Topic nope not found.\n")


def test_describe_filters_on_the_stored_states(zk: str, brokers: ZooKeeperStore, capsys: pytest.CaptureFixture[str]) -> None:
    """Kafka 3.9's rules on partition states written as a controller would (brokers 1–3 live):
    a leader that is not a live broker is unavailable, a partition without a state has no leader,
    and a reassignment's adding replicas do not count in the replication factor."""
    brokers.create_topic("t", {p: ReplicaAssignment(r) for p, r in
                               enumerate([(1, 2, 3), (1, 2, 3), (1, 2, 4), (2, 3, 1)])}, config={"min.insync.replicas": "2"})
    brokers.create_topic("r", {0: ReplicaAssignment((2, 3, 1), adding_replicas=(3,), removing_replicas=(1,))})

    def state(leader: int, isr: tuple[int, ...]) -> LeaderIsrAndControllerEpoch:
        return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, isr), 1)

    t0, t1, t2 = (TopicPartition("t", p) for p in range(3))  # t-3 has no state: no leader, no ISR
    written = brokers.create_partition_states({t0: state(1, (1, 2, 3)), t1: state(2, (2, 3)), t2: state(4, (4,)),
                                              TopicPartition("r", 0): state(2, (2, 1))}, MATCH_ANY_VERSION)
    assert set(written.values()) == {None}

    def describe(*args: str) -> list[str]:
        status, out, err = kctl(capsys, "topics", "describe", "--zookeeper", zk, *args)
        assert (status, err) == (0, "")
        return out.splitlines()

    def shown(*args: str) -> list[str]:
        return [f"{line.split(chr(9))[1][7:]}-{line.split(chr(9))[2][11:]}" for line in describe(*args)]

    assert describe("--topic", "t", "--unavailable-partitions") == [
        "\tTopic: t\tPartition: 2\tLeader: 4\tReplicas: 1,2,4\tIsr: 4\tElr: N/A\tLastKnownElr: N/A",
        "\tTopic: t\tPartition: 3\tLeader: none\tReplicas: 2,3,1\tIsr: \tElr: N/A\tLastKnownElr: N/A",
    ]
    assert shown("--under-replicated-partitions") == ["t-1", "t-2", "t-3"]  # r-0: 2 in sync of 2
    assert shown("--under-min-isr-partitions") == ["t-2", "t-3"]  # r-0: min.insync.replicas 1 (the default)
    assert shown("--at-min-isr-partitions") == ["t-1"]
    assert shown("--at-min-isr-partitions", "--min-insync-replicas", "2") == ["r-0", "t-1"]
    assert shown("--at-min-isr-partitions", "--unavailable-partitions") == ["t-1", "t-2", "t-3"]
    assert describe("--topic", "r", "--topic", "nope", "--if-exists") == [
        "Topic: r\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: ",
        "\tTopic: r\tPartition: 0\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,1\tAdding Replicas: 3\tRemoving Replicas: 1"
        "\tElr: N/A\tLastKnownElr: N/A",
    ]
