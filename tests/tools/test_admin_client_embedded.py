"""The admin tools' Python API on an embedded cluster: each command, through the store the
controller watches, with the controller's work observed after the cluster has run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.errors import (
    AdminCommandFailedError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidReplicaAssignmentError,
    PreferredLeaderNotAvailableError,
    RequestTimedOutError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kctl.model import TopicPartition
from kctl.tools.client import AdminClient, ElectionType, ReassignmentStatus
from kctl.tools.commands import format_cancellation, format_description, format_election, format_verification

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=4, seed=3, config={"auto.leader.rebalance.enable": False}) as c:
        yield c


@pytest.fixture
def tools(cluster: EmbeddedCluster) -> AdminClient:
    return AdminClient.for_cluster(cluster)


def test_create_describe_alter_delete(cluster: EmbeddedCluster, tools: AdminClient) -> None:
    placed = tools.create_topic("orders", 3, 2, config={"retention.ms": 1000})
    assert sorted(placed) == [0, 1, 2] and all(len(set(r)) == 2 for r in placed.values())
    tools.create_topic("audit", assignment={0: [1, 2], 1: [2, 3]})
    with pytest.raises(TopicExistsError, match="Topic 'orders' already exists."):
        tools.create_topic("orders", 1, 1)
    with pytest.raises(InvalidReplicaAssignmentError):
        tools.create_topic("bad", assignment={0: [1, 1]})
    cluster.run_until_stable()

    orders, = tools.describe_topics(["orders"])
    assert orders.config == {"retention.ms": "1000"} and orders.replication_factor == 2
    lines = format_description(orders)
    assert lines[0] == (f"Topic: orders\tTopicId: {orders.topic_id}\tPartitionCount: 3\tReplicationFactor: 2\t"
                        "Configs: retention.ms=1000")
    for p, line in zip(cluster.describe("orders"), lines[1:]):
        assert line == (f"\tTopic: orders\tPartition: {p.partition}\tLeader: {p.leader}\t"
                        f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
    assert [t.name for t in tools.describe_topics()] == ["audit", "orders"]
    with pytest.raises(UnknownTopicOrPartitionError, match="Topic 'nope' does not exist as expected"):
        tools.describe_topics(["nope"])

    assert tools.create_partitions("audit", 3, {2: [4, 1]}) == {2: [4, 1]}
    cluster.run_until_stable()
    assert [(p.partition, p.replicas) for p in cluster.describe("audit")] == [(0, (1, 2)), (1, (2, 3)), (2, (4, 1))]

    assert tools.delete_topic("audit") is True
    assert format_description(tools.describe_topics(["audit"])[0])[0].endswith("\tMarkedForDeletion: true")
    assert tools.delete_topic("audit") is False  # already marked
    cluster.run_until_stable()
    assert tools.list_topics() == ["orders"]
    assert cluster.check_invariants() == []


def test_reassignment_execute_verify_and_failed_status(cluster: EmbeddedCluster, tools: AdminClient) -> None:
    tools.create_topic("orders", assignment={0: [1, 2], 1: [2, 3]})
    cluster.run_until_stable()
    with pytest.raises(AdminCommandFailedError, match="non-existent partitions: orders-7"):
        tools.execute_reassignment({TopicPartition("orders", 7): [1]})
    with pytest.raises(AdminCommandFailedError, match="non-existent brokerIDs: 9"):
        tools.execute_reassignment({T0: [3, 9]})
    assert cluster.store.get_partition_reassignments() is None  # nothing was written

    assert tools.execute_reassignment({T0: [3, 4]}) == {T0: (1, 2)}
    assert tools.verify_reassignment({T0: [3, 4]})[T0].status is ReassignmentStatus.IN_PROGRESS
    with pytest.raises(AdminCommandFailedError, match="existing partition assignment"):
        tools.execute_reassignment({T1: [1, 4]})
    cluster.run_until_stable()
    statuses = tools.verify_reassignment({T0: [3, 4], T1: [1, 4]})
    assert format_verification(statuses) == [
        "Status of partition reassignment:",
        "Reassignment of partition orders-0 is complete.",
        "There is no active reassignment of partition orders-1, but replica set is 2,3 rather than 1,4.",
    ]
    assert cluster.describe("orders")[0].replicas == (3, 4)
    assert cluster.check_invariants() == []


def test_cancel_takes_a_running_reassignment_back(cluster: EmbeddedCluster, tools: AdminClient) -> None:
    tools.create_topic("orders", assignment={0: [1, 2], 1: [2, 3]})
    cluster.run_until_stable()
    tools.execute_reassignment({T0: [3, 4]})
    cluster.kill_broker(4)  # the new replica cannot catch up: the reassignment stays in progress
    cluster.run_until(lambda: cluster.describe("orders")[0].adding_replicas == (3, 4), what="the reassignment to start")
    assert format_cancellation(tools.cancel_reassignment([T0, T1])) == [
        "Successfully cancelled partition reassignment for: orders-0"]
    cluster.run_until_stable()
    assert cluster.describe("orders")[0].replicas == (1, 2) and not cluster.describe("orders")[0].adding_replicas
    assert format_cancellation(tools.cancel_reassignment([T0])) == [
        "None of the specified partition reassignments are active."]
    assert tools.verify_reassignment({T0: [3, 4]})[T0].status is ReassignmentStatus.FAILED
    assert cluster.check_invariants() == []


def test_preferred_election_results(cluster: EmbeddedCluster, tools: AdminClient) -> None:
    tools.create_topic("orders", assignment={0: [1, 2], 1: [2, 3]})
    cluster.run_until_stable()
    cluster.kill_broker(1)
    cluster.run_until_stable()
    cluster.start_broker(1)
    cluster.run_until_stable()
    assert cluster.describe("orders")[0].leader == 2  # leadership moved and did not come back
    results = tools.elect_leaders("preferred", [T0, T1, TopicPartition("orders", 5)])
    assert results[T0] == 1 and cluster.describe("orders")[0].leader == 1
    assert isinstance(results[T1], ElectionNotNeededError)
    assert isinstance(results[TopicPartition("orders", 5)], UnknownTopicOrPartitionError)
    assert format_election(ElectionType.PREFERRED, results) == [
        "Successfully completed leader election (PREFERRED) for partitions orders-0",
        "Valid replica already elected for partitions orders-1",
        "Error completing leader election (PREFERRED) for partition: orders-5: UNKNOWN_TOPIC_OR_PARTITION: "
        "The partition does not exist.",
    ]

    cluster.kill_broker(2)  # orders-1's preferred replica is gone: broker 3 leads, 2 cannot
    cluster.run_until_stable()
    failed = tools.elect_leaders(ElectionType.PREFERRED, [T1])[T1]
    assert isinstance(failed, PreferredLeaderNotAvailableError) and cluster.describe("orders")[1].leader == 3
    assert cluster.store.get_preferred_replica_election() is None
    assert cluster.check_invariants() == []


def test_unclean_election_elects_an_out_of_sync_replica(cluster: EmbeddedCluster, tools: AdminClient) -> None:
    tools.create_topic("orders", assignment={0: [1, 2], 1: [2, 3]})
    cluster.run_until_stable()
    cluster.kill_broker(2)  # out of orders-0's ISR
    cluster.run_until_stable()
    cluster.kill_broker(1)  # the last ISR member: orders-0 goes offline
    cluster.start_broker(2)
    cluster.run_until_stable()
    assert cluster.describe("orders")[0].leader == -1

    results = tools.elect_leaders("unclean", [T0, T1])
    assert results[T0] == 2 and cluster.describe("orders")[0].leader == 2
    assert isinstance(results[T1], ElectionNotNeededError)
    assert cluster.store.get_topic_configs(["orders"]).values["orders"] == {}  # the config is restored
    assert cluster.metrics()["UncleanLeaderElections"] == 1

    cluster.kill_broker(2)
    cluster.kill_broker(3)
    cluster.run_until_stable()
    none_alive = tools.elect_leaders("unclean", [T0])[T0]
    assert isinstance(none_alive, EligibleLeadersNotAvailableError)
    assert "No replica of partition orders-0 is alive" in str(none_alive)


def test_preferred_election_without_a_controller_times_out() -> None:
    with EmbeddedCluster(brokers=3, seed=1, controllers=[3]) as cluster:
        tools = AdminClient.for_cluster(cluster)
        tools.create_topic("orders", assignment={0: [1, 2]})
        cluster.run_until_stable()
        cluster.kill_broker(1)
        cluster.run_until_stable()
        cluster.start_broker(1)
        cluster.run_until_stable()
        cluster.kill_broker(3)  # the only controller candidate
        with pytest.raises(RequestTimedOutError, match="did not process the preferred replica election within 5s"):
            tools.elect_leaders("preferred", [T0], timeout=5)
        assert cluster.store.get_preferred_replica_election() == {T0}  # left for the next controller
