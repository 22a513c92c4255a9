"""Partition reassignment (reference §6.8, seeds 000 and 002) through the AlterPartitionReassignments
API and through ``/admin/reassign_partitions``: the documented transitions, Kafka's leader-epoch
arithmetic, cancellation, re-targeting, and a target broker that is down when the request arrives.
"""

from __future__ import annotations

import pytest

from kctl import admin
from kctl.cluster import EmbeddedCluster
from kctl.model import PartitionReplica, ReplicaAssignment, ReplicaState, TopicPartition
from kctl.requests import LeaderAndIsrRequest, StopReplicaRequest

from tests.support.controller import (
    SEED_000_ROWS,
    SEED_002_ROWS,
    TP,
    active,
    error_names,
    history_rows,
    is_ordered_subsequence,
    matches_seed_000,
    matches_seed_002,
    partition,
    stored_assignment,
    stored_state,
)

def assert_completed(cluster: EmbeddedCluster, target: tuple[int, ...], tp: TopicPartition = TP) -> None:
    assert stored_assignment(cluster, tp) == ReplicaAssignment(target)
    described = partition(cluster, tp)
    assert (described.replicas, described.adding_replicas, described.removing_replicas) == (target, (), ())
    assert described.leader in target and set(described.isr) == set(target)
    assert tp not in active(cluster).context.partitions_being_reassigned
    assert cluster.list_reassignments() == {}
    assert cluster.check_invariants() == []


EpochRow = tuple[int, int, set[int], tuple[int, ...], tuple[int, ...], tuple[int, ...]]
"""(leader epoch, leader, ISR, RS, AR, RR) of a partition's first stored version at that epoch."""

SEED_EXAMPLE_EPOCHS: list[EpochRow] = [
    # epoch, leader, ISR, RS, AR, RR (reference §6.8)
    (0, 1, {1, 2, 3}, (1, 2, 3), (), ()),  # created
    (1, 1, {1, 2, 3}, (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)),  # A1: same leader and ISR, epoch + 1
    (2, 4, {1, 2, 3, 4, 5, 6}, (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)),  # B3: the ISR grew at epoch 1
    (3, 4, {2, 3, 4, 5, 6}, (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)),  # B4: one ISR write per RR broker,
    (4, 4, {3, 4, 5, 6}, (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)),  # each epoch + 1
    (5, 4, {4, 5, 6}, (4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)),
]


def epoch_bumps(cluster: EmbeddedCluster) -> list[EpochRow]:
    """The first stored version of t-0 at each leader epoch: (epoch, leader, ISR, RS, AR, RR)."""
    bumps = []
    for s in cluster.partition_history(TP):
        if s.leader_epoch >= 0 and (not bumps or bumps[-1][0] != s.leader_epoch):
            bumps.append((s.leader_epoch, s.leader, set(s.isr), s.replicas, s.adding_replicas, s.removing_replicas))
    return bumps


@pytest.mark.parametrize("path", ["api", "admin"])
def test_the_seed_example_passes_through_every_documented_state(path: str) -> None:
    """Seeds 000/002's rows in order, with Kafka's leader-epoch bumps: A1 +1, B3 +1 and one per
    replica B4 removes from the ISR (ReplicaStateMachine shrinks the ISR broker by broker) → 5."""
    with EmbeddedCluster(6) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})

        if path == "api":
            assert error_names(cluster.reassign({TP: [4, 5, 6]})) == {TP: "NONE"}
        else:
            admin.request_reassignment(cluster.store, {TP: [4, 5, 6]})
            assert cluster.run_until_stable()
            assert cluster.store.get_partition_reassignments() is None  # B7 removed it

        assert_completed(cluster, (4, 5, 6))
        rows = history_rows(cluster)
        assert is_ordered_subsequence(SEED_002_ROWS, rows, matches_seed_002), rows
        assert is_ordered_subsequence(SEED_000_ROWS, rows, matches_seed_000), rows
        # KIP-455 order inside RS: target first, then the origin replicas (reference §1.3).
        assert ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3)) in [row[:3] for row in rows]
        assert epoch_bumps(cluster) == SEED_EXAMPLE_EPOCHS
        final = cluster.partition_history(TP)[-1]
        assert (final.replicas, final.leader, final.leader_epoch) == ((4, 5, 6), 4, 5)  # B6 keeps epoch 5
        # The removed replicas were told to delete their logs.
        deleted = {r.broker for r in cluster.sent_requests if isinstance(r.request, StopReplicaRequest)
                   for s in r.request.partition_states if s.delete_partition and s.tp == TP}
        assert deleted == {1, 2, 3}
        assert all(cluster.brokers[b].replica_manager.replica_state(TP) is None for b in (1, 2, 3))


def test_adding_replicas_get_leader_and_isr_with_is_new_and_the_full_replica_set() -> None:
    with EmbeddedCluster(6) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.reassign({TP: [4, 5, 6]})

        first = {}
        for record in cluster.sent_requests:
            if isinstance(record.request, LeaderAndIsrRequest):
                for s in record.request.partition_states:
                    if s.tp == TP and s.adding_replicas and record.broker not in first:
                        first[record.broker] = s
        # Phase A1: ORS with isNew=false, AR with isNew=true, all with RS/AR/RR and the bumped epoch.
        assert {b: s.is_new for b, s in first.items()} == {1: False, 2: False, 3: False, 4: True, 5: True, 6: True}
        assert {(s.replicas, s.adding_replicas, s.removing_replicas, s.leader_epoch) for s in first.values()} == {
            ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 1)
        }


def test_reassignment_bumps_the_leader_epoch_as_kafka_does() -> None:
    """ControllerIntegrationTest: [c] → [o] is A1 +1, B3 +1, B4 +1 → leader epoch 3."""
    with EmbeddedCluster(2, controllers=[1]) as cluster:
        cluster.create_topic("t", assignment={0: [1]})
        cluster.reassign({TP: [2]})

        assert_completed(cluster, (2,))
        assert (stored_state(cluster).leader, stored_state(cluster).leader_epoch) == (2, 3)


def test_a_target_broker_down_at_submission_gets_its_replica_when_it_starts() -> None:
    """ControllerIntegrationTest: the same reassignment submitted (through the admin path) while o is
    down; the startup resumption adds another A1 bump → leader epoch 4."""
    with EmbeddedCluster(2, controllers=[1]) as cluster:
        cluster.create_topic("t", assignment={0: [1]})
        cluster.kill_broker(2)
        cluster.run_until_stable()

        admin.request_reassignment(cluster.store, {TP: [2]})
        cluster.run_until(lambda: stored_state(cluster).leader_epoch == 1, what="phase A")
        cluster.advance(30)
        assert stored_assignment(cluster) == ReplicaAssignment((2, 1), (2,), (1,))
        assert (stored_state(cluster).leader, stored_state(cluster).leader_epoch) == (1, 1)
        assert cluster.list_reassignments() == {TP: ReplicaAssignment((2, 1), (2,), (1,))}

        cluster.start_broker(2)
        assert cluster.run_until_stable()
        assert_completed(cluster, (2,))
        assert (stored_state(cluster).leader, stored_state(cluster).leader_epoch) == (2, 4)
        assert cluster.store.get_partition_reassignments() is None


def test_cancelling_returns_to_the_origin_replicas_and_stops_the_adding_ones() -> None:
    with EmbeddedCluster(6) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.brokers[4].replica_manager.pause_fetching()  # 4 cannot catch up: the reassignment stays
        cluster.reassign({TP: [4, 5, 6]}, wait=False)
        cluster.run_until(lambda: {5, 6} <= set(stored_state(cluster).isr), what="5 and 6 to join the ISR")
        assert cluster.list_reassignments() == {TP: ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))}

        assert error_names(cluster.cancel_reassignment([TP])) == {TP: "NONE"}

        assert_completed(cluster, (1, 2, 3))
        assert stored_state(cluster).leader == 1
        ctx = active(cluster).context
        for broker in (4, 5, 6):
            assert ctx.replica_state(PartitionReplica(TP, broker)) is ReplicaState.NON_EXISTENT
            assert cluster.brokers[broker].replica_manager.replica_state(TP) is None  # log deleted
        # Cancelling what is not being reassigned is refused.
        assert error_names(cluster.cancel_reassignment([TP])) == {TP: "NO_REASSIGNMENT_IN_PROGRESS"}


def test_retargeting_an_inflight_reassignment_starts_from_the_origin_replicas() -> None:
    with EmbeddedCluster(6) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.brokers[4].replica_manager.pause_fetching()
        cluster.reassign({TP: [4, 5, 6]}, wait=False)
        cluster.run_until(lambda: {5, 6} <= set(stored_state(cluster).isr), what="5 and 6 to join the ISR")

        cluster.reassign({TP: [1, 2, 5]}, wait=False)
        assert cluster.run_until_stable()

        assert_completed(cluster, (1, 2, 5))
        # reassignTo is computed from ORS [1, 2, 3]: 4 and 6 are no longer wanted (reference §1.3) …
        assert ((1, 2, 5, 3), (5,), (3,)) in [row[:3] for row in history_rows(cluster)]
        # … and are stopped, their logs deleted.
        for broker in (4, 6):
            assert active(cluster).context.replica_state(PartitionReplica(TP, broker)) is ReplicaState.NON_EXISTENT
            assert cluster.brokers[broker].replica_manager.replica_state(TP) is None


def test_a_pure_reorder_is_not_a_reassignment() -> None:
    with EmbeddedCluster(3, controllers=[1]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        assert error_names(cluster.reassign({TP: [3, 1, 2]})) == {TP: "NONE"}

        assert [row[:3] for row in history_rows(cluster)][-1] == ((3, 1, 2), (), ())
        assert_completed(cluster, (3, 1, 2))
        assert cluster.metrics()["PreferredReplicaImbalanceCount"] == 1  # 3 now preferred, 1 still leads


def test_an_api_request_supersedes_the_same_partition_in_the_admin_path() -> None:
    with EmbeddedCluster(6) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3], 1: [1, 2, 3]})
        t1 = TopicPartition("t", 1)
        for broker in (4, 5):
            cluster.brokers[broker].replica_manager.pause_fetching()
        admin.request_reassignment(cluster.store, {TP: [4, 5, 6], t1: [4, 5, 6]})
        cluster.run_until(lambda: len(cluster.list_reassignments()) == 2, what="both reassignments to start")

        cluster.reassign({TP: [1, 2, 6]}, wait=False)
        assert cluster.store.get_partition_reassignments() == {t1: [4, 5, 6]}  # the latest request wins

        for broker in (4, 5):
            cluster.brokers[broker].replica_manager.resume_fetching()
        assert cluster.run_until_stable()
        assert_completed(cluster, (1, 2, 6))
        assert_completed(cluster, (4, 5, 6), t1)
        assert cluster.store.get_partition_reassignments() is None


def test_several_partitions_and_topics_in_one_request() -> None:
    with EmbeddedCluster(4) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2], 1: [2, 3]})
        cluster.create_topic("u", assignment={0: [3, 4]})
        targets = {TP: [3, 4], TopicPartition("t", 1): [1, 4], TopicPartition("u", 0): [1, 2]}

        assert error_names(cluster.reassign(targets)) == dict.fromkeys(targets, "NONE")
        for tp, target in targets.items():
            assert_completed(cluster, tuple(target), tp)
        assert cluster.metrics()["GlobalPartitionCount"] == 3
