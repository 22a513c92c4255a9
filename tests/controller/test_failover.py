"""Controller election, failover and epoch fencing (reference §6.2, §6.3; invariants I1, I5, I6).

The crash tests expire the active controller's store session right after its k-th write, for every
k until the operation completes without a crash: each run stops the controller between two of its
writes, and the next controller must finish the job.
"""

from __future__ import annotations

from itertools import count

import pytest
from helpers import (
    SEED_002_ROWS,
    TP,
    FaultySessions,
    active,
    core_metrics,
    healthy,
    history_rows,
    is_ordered_subsequence,
    leaders,
    matches_seed_002,
    partition,
    stored_assignment,
    stored_state,
)

from kctl import admin
from kctl.broker import ReplicaRole
from kctl.cluster import EmbeddedCluster
from kctl.errors import IllegalStateError, KctlError
from kctl.model import ReplicaAssignment, TopicPartition
from kctl.stores.base import MATCH_ANY_VERSION


def reassignment_done(cluster: EmbeddedCluster) -> bool:
    return stored_assignment(cluster) == ReplicaAssignment((4, 5, 6)) and set(stored_state(cluster).isr) == {4, 5, 6}


@pytest.mark.parametrize("path", ["api", "admin"])
def test_a_reassignment_survives_a_controller_crash_between_any_two_of_its_writes(path: str) -> None:
    crashes = 0
    for k in count(1):
        sessions = FaultySessions()
        with EmbeddedCluster(6, controller_session=sessions) as cluster:
            cluster.create_topic("t", assignment={0: [1, 2, 3]})
            first = active(cluster)
            sessions[first.broker_id].expire_after(k)
            if path == "api":
                first.alter_partition_reassignments({TP: [4, 5, 6]})
            else:
                admin.request_reassignment(cluster.store, {TP: [4, 5, 6]})

            cluster.run_until(lambda: reassignment_done(cluster), what=f"the reassignment (crash after write {k})")
            assert cluster.run_until_stable()

            crashed = sessions[first.broker_id].expired
            successor = active(cluster)
            assert (successor.broker_id != first.broker_id, successor.epoch) == ((True, 2) if crashed else (False, 1))
            assert stored_assignment(cluster) == ReplicaAssignment((4, 5, 6))
            assert partition(cluster).leader in (4, 5, 6)
            assert cluster.list_reassignments() == {}
            assert cluster.store.get_partition_reassignments() is None
            assert is_ordered_subsequence(SEED_002_ROWS, history_rows(cluster), matches_seed_002), k
            assert cluster.check_invariants() == [], k
        if not crashed:
            break
        crashes += 1
    # U1, A1, the ISR expansions, B3, B4 (×3), B6 (and B7 on the admin path): one crash after each.
    assert crashes >= 9


def test_each_failover_increments_the_epoch_and_keeps_the_cluster_as_it_was() -> None:
    with EmbeddedCluster(5, seed=7) as cluster:
        cluster.create_topic("t", partitions=6, replication_factor=3)
        cluster.create_topic("u", assignment={0: [4, 5]})
        described = {t: cluster.describe(t) for t in ("t", "u")}
        assert core_metrics(cluster) == healthy(topics=2, partitions=7)
        assert cluster.metrics()["ControllerEpoch"] == 1

        for epoch in (2, 3):
            old = active(cluster).broker_id
            new = cluster.kill_controller()
            assert new != old and active(cluster).epoch == epoch
            assert cluster.store.get_controller_epoch()[0] == epoch
            assert cluster.run_until_stable()
            assert {t: cluster.describe(t) for t in ("t", "u")} == described  # no leader moved
            assert core_metrics(cluster) == healthy(topics=2, partitions=7)
            assert cluster.metrics()["ControllerEpoch"] == epoch
            # The replaced candidate is back, inactive, reporting Kafka's zero metrics.
            assert cluster.controllers[old].metrics()["ActiveControllerCount"] == 0
            assert sum(c.is_active for c in cluster.controllers.values()) == 1
        assert cluster.check_invariants() == []


def test_the_new_controller_elects_leaders_for_partitions_the_crash_left_offline() -> None:
    with EmbeddedCluster(3, controllers=[1, 2]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 3], 1: [3, 2]})
        # Broker 1 hosts the controller: both go down at once.
        assert active(cluster).broker_id == 1
        cluster.kill_broker(1)
        cluster.run_until(lambda: cluster.active_controller is not None and active(cluster).broker_id == 2,
                          what="broker 2 to take over")
        assert cluster.run_until_stable()

        assert active(cluster).epoch == 2
        assert (partition(cluster).leader, partition(cluster).isr) == (3, (3,))
        assert leaders(cluster, "t")[1] == 3
        assert cluster.metrics()["OfflinePartitionsCount"] == 0
        assert cluster.check_invariants() == []


def test_failover_resumes_a_pending_preferred_replica_election() -> None:
    with EmbeddedCluster(3, controllers=[2, 3], config={"auto.leader.rebalance.enable": False}) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2], 1: [2, 1]})
        cluster.kill_broker(1)
        cluster.start_broker(1)
        assert cluster.run_until_stable() and leaders(cluster, "t") == {0: 2, 1: 2}

        admin.request_preferred_replica_election(cluster.store, [TP, TopicPartition("t", 1)])
        cluster.kill_controller()  # before the old controller processed the request

        cluster.run_until(lambda: cluster.store.get_preferred_replica_election() is None, what="the election")
        assert leaders(cluster, "t") == {0: 1, 1: 2}
        assert cluster.check_invariants() == []


# --- Epoch fencing --------------------------------------------------------------------------------


def deposed_controller(cluster: EmbeddedCluster, sessions: FaultySessions) -> int:
    """Make the active controller miss its own deposition: it stops hearing watch events and an
    operator deletes ``/controller``; another candidate takes over. Returns the deposed one's id."""
    deposed = active(cluster)
    sessions[deposed.broker_id].deaf = True
    cluster.store.delete_controller(MATCH_ANY_VERSION)
    cluster.run_until(lambda: active(cluster) is not deposed, what="another controller to take over")
    assert deposed.is_active and active(cluster).epoch == deposed.epoch + 1  # it still thinks it leads
    return deposed.broker_id


def test_a_deposed_controllers_writes_never_land() -> None:
    sessions = FaultySessions()
    with EmbeddedCluster(3, controller_session=sessions) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        deposed = cluster.controllers[deposed_controller(cluster, sessions)]
        zxid, history = cluster.store.tree.zxid, cluster.partition_history(TP)

        # Its reassignment starts with a fenced write of the topic znode.
        deposed.alter_partition_reassignments({TP: [3, 2, 1]})
        cluster.run_until(lambda: not deposed.is_active, what="the deposed controller to resign")

        assert cluster.store.tree.zxid == zxid and cluster.partition_history(TP) == history
        assert stored_assignment(cluster) == ReplicaAssignment((1, 2, 3))
        sessions[deposed.broker_id].deaf = False
        results = cluster.wait(deposed.elect_leaders([TP], "preferred"))
        assert {tp: r.error.name for tp, r in results.items() if isinstance(r, KctlError)} == {TP: "NOT_CONTROLLER"}
        assert cluster.check_invariants() == []


def test_brokers_reject_requests_of_a_deposed_controller() -> None:
    sessions = FaultySessions()
    with EmbeddedCluster(3, controller_session=sessions) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        deposed_id = deposed_controller(cluster, sessions)
        deposed = cluster.controllers[deposed_id]
        assert cluster.run_until_stable()  # every broker has heard from the new controller
        sent = len(cluster.sent_requests)

        # A controlled shutdown of follower 3 sends StopReplica before its (fenced) ISR write.
        shutdown = deposed.controlled_shutdown(3, cluster.brokers[3].broker_epoch)
        cluster.run_until(shutdown.done, what="the answer")

        assert isinstance(shutdown.exception(), KctlError)
        assert shutdown.exception().error.name == "STALE_CONTROLLER_EPOCH"  # Kafka's ControllerMovedException
        stale = [r.request for r in cluster.sent_requests[sent:] if r.controller == deposed_id]
        assert [(type(r).__name__, r.controller_epoch) for r in stale] == [("StopReplicaRequest", 1)]
        # Its resignation dropped the request; delivered late anyway, the broker refuses it.
        response = cluster.brokers[3].handle_request(stale[0])
        assert response.error.name == "STALE_CONTROLLER_EPOCH"
        assert cluster.brokers[3].replica_manager.replica_state(TP).role is ReplicaRole.FOLLOWER
        assert set(stored_state(cluster).isr) == {1, 2, 3}
        assert cluster.check_invariants() == []


def test_with_every_controller_candidate_down_asking_for_the_controller_fails_at_once() -> None:
    """No waiting for an election that cannot happen: the error names the candidates, and a
    candidate's restart brings a controller back."""
    with EmbeddedCluster(4, controllers=[1, 2]) as cluster:
        cluster.kill_broker(1)
        cluster.kill_broker(2)
        started = cluster.now()
        with pytest.raises(IllegalStateError, match=r"every controller candidate \(brokers \[1, 2\]\) is down"):
            cluster.metrics()
        assert cluster.now() == started
        cluster.start_broker(2)
        assert cluster.metrics()["ActiveControllerCount"] == 1
