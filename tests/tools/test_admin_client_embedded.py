"""The admin tools' Python API on an embedded cluster: each command, through the store the
controller watches, with the controller's work observed after the cluster has run."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from kctl.assignment import assign_replicas_to_brokers, broker_metadatas
from kctl.cluster import EmbeddedCluster
from kctl.errors import (
    AdminCommandFailedError,
    AdminOperationError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidReplicaAssignmentError,
    PreferredLeaderNotAvailableError,
    RequestTimedOutError,
    TopicDeletionDisabledError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kctl.model import TopicPartition
from kctl.tools.client import AdminClient, ElectionType, PartitionFilter, ReassignmentStatus
from kctl.tools.commands import (
    format_cancellation,
    format_description,
    format_election,
    format_reassignments,
    format_verification,
)

pytestmark = pytest.mark.usefixtures("engine")  # every test here runs on each engine

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
U0, U1 = TopicPartition("u", 0), TopicPartition("u", 1)


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
                        f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
                        "Elr: N/A\tLastKnownElr: N/A")
    assert [t.name for t in tools.describe_topics()] == ["audit", "orders"]
    with pytest.raises(UnknownTopicOrPartitionError, match="Topic 'nope' does not exist as expected"):
        tools.describe_topics(["nope"])

    assert tools.create_partitions("audit", 3, {2: [4, 1]}) == {2: [4, 1]}
    cluster.run_until_stable()
    assert [(p.partition, p.replicas) for p in cluster.describe("audit")] == [(0, (1, 2)), (1, (2, 3)), (2, (4, 1))]

    tools.delete_topic("audit", timeout=None)  # only marked
    assert format_description(tools.describe_topics(["audit"])[0])[0].endswith("\tMarkedForDeletion: true")
    tools.delete_topic("audit")  # marked already: no error, as Kafka 3.9; waits until deleted
    assert tools.list_topics() == ["orders"]
    assert cluster.check_invariants() == []


def test_reassignment_execute_verify_and_failed_status(cluster: EmbeddedCluster, tools: AdminClient) -> None:
    tools.create_topic("orders", assignment={0: [1, 2], 1: [2, 3]})
    cluster.run_until_stable()
    with pytest.raises(UnknownTopicOrPartitionError, match="^Unable to find partition: orders-7, orders-8$"):
        tools.execute_reassignment({TopicPartition("orders", 7): [1], TopicPartition("orders", 8): [1], T0: [1, 2]})
    with pytest.raises(UnknownTopicOrPartitionError, match="^Topic nope not found.$"):
        tools.execute_reassignment({TopicPartition("nope", 0): [1]})
    with pytest.raises(AdminCommandFailedError, match="^Unknown broker id 9$"):
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
        "Reassignment of partition orders-0 is completed.",
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
    assert format_reassignments(tools.list_reassignments()) == [
        "Current partition reassignments:", "orders-0: replicas: 3,4,1,2. adding: 3,4. removing: 1,2."]
    assert format_cancellation(tools.cancel_reassignment([T0, T1])) == [
        "Successfully cancelled partition reassignment for: orders-0"]
    cluster.run_until_stable()
    assert cluster.describe("orders")[0].replicas == (1, 2) and not cluster.describe("orders")[0].adding_replicas
    assert format_reassignments(tools.list_reassignments()) == ["No partition reassignments found."]
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
    # over all partitions, as Kafka's ElectLeaders: the partitions that need no election are left out
    assert tools.elect_leaders("preferred") == {}

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


def test_unclean_election_reports_every_partition_it_made_leader(cluster: EmbeddedCluster, tools: AdminClient) -> None:
    """Enabling unclean election on ``u`` makes the controller elect every leaderless partition of
    it (Kafka's TopicUncleanLeaderElectionEnable): the tool reports them all, not only u-0."""
    tools.create_topic("u", assignment={0: [1, 2], 1: [1, 2], 2: [3, 4]})
    cluster.run_until_stable()
    cluster.kill_broker(2)  # out of the ISRs of u-0 and u-1
    cluster.run_until_stable()
    cluster.kill_broker(1)  # their last ISR member: both go offline
    cluster.start_broker(2)
    cluster.run_until_stable()
    assert [p.leader for p in cluster.describe("u")] == [-1, -1, 3]

    results = tools.elect_leaders("unclean", [U0])
    assert results == {U0: 2, U1: 2}
    assert format_election(ElectionType.UNCLEAN, results) == [
        "Successfully completed leader election (UNCLEAN) for partitions u-0, u-1"]
    assert [p.leader for p in cluster.describe("u")] == [2, 2, 3]
    assert cluster.metrics()["UncleanLeaderElections"] == 2
    assert cluster.store.get_topic_configs(["u"]).values["u"] == {}


def test_describe_filters_follow_kafkas_rules() -> None:
    """``--under-replicated-partitions``, ``--under-min-isr-partitions``, ``--at-min-isr-partitions``
    and ``--unavailable-partitions`` on ISRs the controller shrank, with ``min.insync.replicas`` from
    the topic's override or else the brokers' default."""
    config = {"auto.leader.rebalance.enable": False, "min.insync.replicas": 2}
    with EmbeddedCluster(brokers=4, seed=5, config=config) as cluster:
        tools = AdminClient.for_cluster(cluster)
        tools.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 4], 2: [1, 2, 4]})
        tools.create_topic("v", assignment={0: [3, 4], 1: [1, 2]}, config={"min.insync.replicas": 1})
        cluster.run_until_stable()
        cluster.kill_broker(4)
        cluster.run_until_stable()
        cluster.kill_broker(3)
        cluster.run_until_stable()
        assert [(p.leader, p.isr) for p in cluster.describe("t")] == [(1, (1, 2)), (2, (2,)), (1, (1, 2))]
        assert [(p.leader, p.isr) for p in cluster.describe("v")] == [(-1, (3,)), (1, (1, 2))]

        t, v = tools.describe_topics()
        assert (t.min_insync_replicas, v.min_insync_replicas) == (2, 1)
        live = tools.live_brokers()

        def shown(*filters: PartitionFilter) -> list[str]:
            lines = [line for topic in (t, v) for line in format_description(topic, filters, live)]
            assert not any(line.startswith("Topic:") for line in lines)  # no topic lines when filtering
            return [f"{line.split(chr(9))[1][7:]}-{line.split(chr(9))[2][11:]}" for line in lines]

        assert shown(PartitionFilter.UNDER_REPLICATED) == ["t-0", "t-1", "t-2", "v-0"]
        assert shown(PartitionFilter.UNDER_MIN_ISR) == ["t-1", "v-0"]  # v-0: no leader
        assert shown(PartitionFilter.AT_MIN_ISR) == ["t-0", "t-2", "v-0"]  # v-0: one in-sync replica, leader or not
        assert shown(PartitionFilter.UNAVAILABLE) == ["v-0"]
        assert shown(PartitionFilter.UNDER_MIN_ISR, PartitionFilter.UNAVAILABLE) == ["t-1", "v-0"]
        assert format_description(v, [PartitionFilter.UNAVAILABLE], live) == [
            "\tTopic: v\tPartition: 0\tLeader: none\tReplicas: 3,4\tIsr: 3\tElr: N/A\tLastKnownElr: N/A"]


def test_generate_proposes_kafkas_assignment_onto_the_broker_list() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    with EmbeddedCluster(brokers=6, racks=racks, seed=2, config={"auto.leader.rebalance.enable": False}) as cluster:
        tools = AdminClient.for_cluster(cluster)
        tools.create_topic("orders", assignment={p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(6)})
        tools.create_topic("audit", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
        cluster.run_until_stable()
        with pytest.raises(UnknownTopicOrPartitionError, match="^Topic nope not found.$"):
            tools.generate_reassignment(["orders", "nope"], [1, 2])

        current, proposed = tools.generate_reassignment(["orders", "audit"], [2, 3, 4, 5, 6, 9], rng=random.Random(7))
        assert current == {TopicPartition(t, p.partition): p.replicas
                           for t in ("audit", "orders") for p in cluster.describe(t)}
        # Broker 9 is not registered: left out, as Kafka's tool leaves it out.
        metadata = broker_metadatas({b: racks[b] for b in (2, 3, 4, 5, 6)})
        rng = random.Random(7)
        expected = {TopicPartition(topic, p): r for topic, n, rf in (("audit", 3, 3), ("orders", 6, 2))
                    for p, r in assign_replicas_to_brokers(metadata, n, rf, rng=rng).items()}
        assert proposed == expected
        for replicas in proposed.values():
            assert len({racks[b] for b in replicas}) == len(replicas)  # one replica per rack

        tools.execute_reassignment(proposed)
        cluster.run_until_stable()
        assert {tp: cluster.describe(tp.topic)[tp.partition].replicas for tp in proposed} == {
            tp: tuple(r) for tp, r in proposed.items()}
        assert cluster.check_invariants() == []

    with EmbeddedCluster(brokers=3, racks={1: "a", 2: "b"}, seed=2) as cluster:
        tools = AdminClient.for_cluster(cluster)
        tools.create_topic("orders", assignment={0: [1, 2]})
        cluster.run_until_stable()
        with pytest.raises(AdminOperationError, match="^Not all brokers have rack information. Add --disable-rack-aware"):
            tools.generate_reassignment(["orders"], [1, 2, 3])
        _, proposed = tools.generate_reassignment(["orders"], [1, 2, 3], rack_aware=False)
        assert len(set(proposed[T0])) == 2 and set(proposed[T0]) <= {1, 2, 3}
        assert tools.generate_reassignment(["orders"], [1, 2])[1][T0] in ([1, 2], [2, 1])  # the racked ones only


def test_delete_waits_for_the_deletion_and_says_why_it_did_not_finish(cluster: EmbeddedCluster, tools: AdminClient) -> None:
    tools.create_topic("orders", assignment={0: [1, 2]})
    cluster.run_until_stable()
    cluster.kill_broker(2)  # holds a replica: the deletion halts until it returns
    with pytest.raises(RequestTimedOutError, match="^Topic 'orders' was not deleted within 5s"):
        tools.delete_topic("orders", timeout=5)
    assert cluster.store.get_topic_deletions() == ["orders"]
    cluster.start_broker(2)
    tools.delete_topic("orders")  # marked already: waits for the rest of the deletion
    assert tools.list_topics() == [] and cluster.store.get_topic_deletions() == []

    with EmbeddedCluster(brokers=3, seed=1, config={"delete.topic.enable": False}) as disabled:
        tools = AdminClient.for_cluster(disabled)
        tools.create_topic("orders", assignment={0: [1, 2]})
        disabled.run_until_stable()
        with pytest.raises(TopicDeletionDisabledError, match="^Topic deletion is disabled.$"):
            tools.delete_topic("orders")
        assert tools.list_topics() == ["orders"] and disabled.store.get_topic_deletions() == []
