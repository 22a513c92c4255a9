"""Controller election, failover and epoch fencing (reference §6.2, §6.3; invariants I1, I5, I6).

The crash tests expire the active controller's store session right after its k-th write, for every
k until the operation completes without a crash: each run stops the controller between two of its
writes, and the next controller must finish the job.
"""

from __future__ import annotations

import logging
from itertools import count

import pytest

from kctl import admin
from kctl.broker import ReplicaRole
from kctl.cluster import EmbeddedCluster
from kctl.controller import events as ev
from kctl.controller.controller import FAILED_FAILOVER_BACKOFF
from kctl.errors import IllegalStateError, KctlError
from kctl.model import ReplicaAssignment, TopicPartition
from kctl.stores.base import MATCH_ANY_VERSION

from tests.support.controller import (
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


# --- A failover that fails (Kafka's elect(): triggerControllerMove) ---------------------------------


def test_a_candidate_whose_failover_fails_resigns_and_a_standby_becomes_the_ready_controller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Candidate 1 wins the first election but cannot read the topics: it deletes ``/controller``
    with its resignation and candidate 2 takes over; once the fault clears, 1 can win again."""
    caplog.set_level(logging.INFO, logger="kctl")
    sessions = FaultySessions(failing={1: {"get_all_topics"}})
    with EmbeddedCluster(3, controllers=[1, 2], controller_session=sessions) as cluster:
        assert "Error while electing or becoming controller on broker 1" in caplog.text
        assert (active(cluster).broker_id, active(cluster).epoch) == (2, 2)  # epoch 1 was candidate 1's
        assert not cluster.controllers[1].is_active and cluster.controllers[1].epoch == 0
        assert cluster.store.get_controller_id() == 2
        cluster.create_topic("t", partitions=3, replication_factor=2)
        assert all(p.leader in p.isr for p in cluster.describe("t"))

        sessions[1].failing.clear()
        assert cluster.kill_controller() == 1
        assert cluster.run_until_stable(what="controller 1 to serve")
        assert (active(cluster).broker_id, active(cluster).epoch) == (1, 3)
        cluster.create_topic("u", partitions=2, replication_factor=3)
        assert all(p.leader in p.isr for t in ("t", "u") for p in cluster.describe(t))
        assert cluster.check_invariants() == []


def test_when_every_candidates_failover_fails_they_retry_at_a_bounded_rate_until_the_fault_clears() -> None:
    """No controller can take over while the fault lasts; each candidate runs again every
    FAILED_FAILOVER_BACKOFF seconds (Kafka would retry at once, forever, at one instant of a
    simulation), and the first to run once the fault clears serves."""
    sessions = FaultySessions()
    with EmbeddedCluster(3, controllers=[1, 2], controller_session=sessions) as cluster:
        cluster.create_topic("t", partitions=2, replication_factor=2)
        epoch = active(cluster).epoch
        for controller_id in (1, 2):
            sessions[controller_id].failing.add("get_all_brokers")
        cluster.store.delete_controller(MATCH_ANY_VERSION)  # an operator forces a re-election

        window = 10 * FAILED_FAILOVER_BACKOFF
        steps = cluster.scheduler.steps
        cluster.scheduler.run_until(cluster.now() + window, until=lambda: cluster.scheduler.steps > steps + 100_000)
        assert cluster.scheduler.steps <= steps + 100_000, "an election loop without pause"
        assert cluster.active_controller is None and cluster.store.get_controller_id() is None
        attempts = cluster.store.get_controller_epoch()[0] - epoch  # type: ignore[index]
        assert 2 <= attempts <= 2 * (window / FAILED_FAILOVER_BACKOFF + 1)

        for controller_id in (1, 2):
            sessions[controller_id].failing.clear()
        assert cluster.run_until_stable(what="a controller to serve again")
        assert all(p.leader in p.isr for p in cluster.describe("t"))
        assert cluster.check_invariants() == []


def test_a_controller_that_cannot_read_controller_keeps_its_role() -> None:
    """Kafka's ``maybeResign``: when ``/controller`` cannot be read the event ends with the read's
    error and nothing changes. Resigning would leave ``/controller`` registered to a controller
    that no longer acts, and no candidate could take over."""
    sessions = FaultySessions()
    with EmbeddedCluster(3, controllers=[1, 2], controller_session=sessions) as cluster:
        controller = active(cluster)
        sessions[controller.broker_id].failing.add("get_controller_id")
        controller.event_manager.put(ev.ControllerChange())  # what a change of /controller's data enqueues
        cluster.run_until(controller.event_manager.is_empty, what="the event to be processed")
        assert controller.is_active and controller.metrics()["GlobalTopicCount"] == 0

        sessions[controller.broker_id].failing.clear()
        cluster.create_topic("t", partitions=2, replication_factor=2)
        assert (active(cluster), active(cluster).epoch) == (controller, 1)
        assert cluster.check_invariants() == []


def test_an_error_escaping_an_event_is_logged_and_the_controller_stays_active(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's ``process``: only ControllerMovedException resigns; anything else is logged, and
    the controller keeps serving (here the next topic change loads what the failed one missed)."""
    caplog.set_level(logging.INFO, logger="kctl")
    sessions = FaultySessions()
    with EmbeddedCluster(3, controller_session=sessions) as cluster:
        controller = active(cluster)
        sessions[controller.broker_id].failing.add("get_all_topics")
        admin.create_topic(cluster.store, "t", broker_racks=dict.fromkeys(cluster.broker_ids), partitions=2,
                           replication_factor=2)
        cluster.run_until(lambda: "error processing event TopicChange" in caplog.text, what="the failed event")
        assert active(cluster) is controller and cluster.store.get_controller_id() == controller.broker_id

        sessions[controller.broker_id].failing.clear()
        cluster.create_topic("u", partitions=1, replication_factor=3)
        assert cluster.run_until_stable(what="both topics to be served")
        assert (active(cluster), active(cluster).epoch) == (controller, 1)
        assert all(p.leader in p.isr for t in ("t", "u") for p in cluster.describe(t))
        assert cluster.check_invariants() == []


def test_a_controller_that_cannot_send_its_own_requests_resigns(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's ``handleIllegalState``: a failed send of the controller's own batch (an
    IllegalStateException) clears the batch and moves the controller away."""
    caplog.set_level(logging.INFO, logger="kctl")
    with EmbeddedCluster(3, controllers=[1, 2]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 3]})
        failing = active(cluster)

        def refuse(broker_id: int, request: object, callback: object) -> None:
            raise ConnectionError("the network is down")

        failing.channel.send_request = refuse  # type: ignore[method-assign]
        failing.channel.send_requests = lambda outgoing: refuse(*outgoing[0])  # a fan-out, in one call
        cluster.kill_broker(3)
        cluster.start_broker(3)  # the new controller's UpdateMetadata to brokers 1 and 2 fails
        cluster.run_until(lambda: cluster.active_controller not in (None, failing), what="another controller")
        assert "Forcing the controller to resign" in caplog.text
        assert not failing.is_active and cluster.store.get_controller_id() == 2
        assert cluster.run_until_stable(what="controller 2 to serve")
        assert partition(cluster).isr == (1, 3)
        assert cluster.check_invariants() == []
