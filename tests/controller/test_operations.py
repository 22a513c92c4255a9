"""Controller operations end to end on an EmbeddedCluster (reference §6): topic and partition
creation, broker failure, startup and bounce, controlled shutdown, ISR changes through
AlterPartition and through ZooKeeper notifications, and log-directory failures.

Reassignment, elections, deletion and failover have files of their own.
"""

from __future__ import annotations

import base64
import logging
import time
from collections import Counter
from dataclasses import replace

import pytest

from kctl.broker import ReplicaRole
from kctl.cluster import EmbeddedCluster
from kctl.errors import InvalidRequestError
from kctl.model import BrokerInfo, EndPoint, LeaderAndIsr, LeaderRecoveryState, TopicPartition
from kctl.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

from tests.support.controller import TP, FaultySessions, active, core_metrics, healthy, leaders, partition, stored_state, wait_for_isr


# --- Topic and partition creation (§6.7) ----------------------------------------------------------


def test_new_topic_partitions_are_online_with_the_first_replica_leading_and_all_in_the_isr() -> None:
    with EmbeddedCluster(5, seed=3) as cluster:
        assignment = cluster.create_topic("t", partitions=5, replication_factor=3)

        assert sorted(assignment) == [0, 1, 2, 3, 4]
        for p in cluster.describe("t"):
            assert len(set(p.replicas)) == 3 and set(p.replicas) <= {1, 2, 3, 4, 5}
            assert p.replicas == assignment[p.partition]
            assert (p.leader, p.isr, p.leader_epoch, p.state) == (p.replicas[0], p.replicas, 0, "OnlinePartition")
            assert p.adding_replicas == p.removing_replicas == ()
        # The initialising LeaderAndIsr goes to the ISR members with isNew=true.
        initial = [s for r in cluster.sent_requests if isinstance(r.request, LeaderAndIsrRequest)
                   for s in r.request.partition_states if s.topic == "t" and s.leader_epoch == 0]
        assert initial and all(s.is_new for s in initial)
        assert core_metrics(cluster) == healthy(topics=1, partitions=5)
        assert cluster.check_invariants() == []


def test_rack_aware_placement_puts_every_replica_of_a_partition_on_another_rack() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    with EmbeddedCluster(6, racks=racks, seed=11) as cluster:
        cluster.create_topic("t", partitions=6, replication_factor=3)

        described = cluster.describe("t")
        for p in described:
            assert sorted(racks[b] for b in p.replicas) == ["a", "b", "c"]
        # Equal-sized racks: leaders and replicas are spread evenly (reference §9.4).
        assert sorted(p.leader for p in described) == [1, 2, 3, 4, 5, 6]
        assert set(Counter(b for p in described for b in p.replicas).values()) == {3}


def test_an_explicit_assignment_is_used_as_given() -> None:
    with EmbeddedCluster(4) as cluster:
        cluster.create_topic("t", assignment={0: [3, 1], 1: [2, 4], 2: [4, 3]})

        assert [(p.replicas, p.leader, p.isr) for p in cluster.describe("t")] == [
            ((3, 1), 3, (3, 1)), ((2, 4), 2, (2, 4)), ((4, 3), 4, (4, 3)),
        ]


def test_topics_get_ids_that_travel_in_requests_and_survive_failover() -> None:
    with EmbeddedCluster(3, seed=5) as cluster:
        cluster.create_topic("t", partitions=2, replication_factor=2)
        cluster.create_topic("u", partitions=1, replication_factor=3)

        ids = dict(active(cluster).context.topic_ids)
        assert set(ids) == {"t", "u"} and ids["t"] != ids["u"]
        for topic, topic_id in ids.items():
            assert len(topic_id) == 22 and len(base64.urlsafe_b64decode(topic_id + "==")) == 16
            assert cluster.store.get_topic_assignments([topic]).values[topic].topic_id == topic_id
        sent_ids = {t: i for r in cluster.sent_requests if isinstance(r.request, LeaderAndIsrRequest)
                    for t, i in r.request.topic_ids.items()}
        assert sent_ids == ids

        cluster.kill_controller()
        assert active(cluster).context.topic_ids == ids


def test_adding_partitions_places_them_like_kafka_and_brings_them_online() -> None:
    with EmbeddedCluster(4) as cluster:
        cluster.create_topic("t", assignment={0: [3, 4, 1, 2]})
        cluster.create_partitions("t", 7)

        # AddPartitionsTest's example (brokers 0..3 there, 1..4 here): RF and start come from partition 0.
        assert [p.replicas for p in cluster.describe("t")] == [
            (3, 4, 1, 2), (4, 3, 1, 2), (1, 4, 2, 3), (2, 1, 3, 4), (3, 4, 1, 2), (4, 1, 2, 3), (1, 2, 3, 4),
        ]
        cluster.create_partitions("t", 8, assignment={7: [2, 1, 4, 3]})
        last = cluster.describe("t")[7]
        assert (last.replicas, last.leader, last.state) == ((2, 1, 4, 3), 2, "OnlinePartition")
        assert all(p.state == "OnlinePartition" and p.isr == p.replicas for p in cluster.describe("t"))
        assert core_metrics(cluster)["GlobalPartitionCount"] == 8
        assert cluster.check_invariants() == []


# --- Broker failure, startup and bounce (§6.4–§6.6) -------------------------------------------------


def test_broker_failure_moves_leaders_to_live_isr_members_and_shrinks_isrs() -> None:
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 1, 3], 2: [1, 3, 2]})
        cluster.create_topic("single", assignment={0: [1]})

        cluster.kill_broker(1)
        cluster.run_until_stable()

        assert [(p.leader, p.isr, p.leader_epoch) for p in cluster.describe("t")] == [
            (2, (2, 3), 1), (2, (2, 3), 1), (3, (3, 2), 1),
        ]
        offline = partition(cluster, TopicPartition("single", 0))
        assert (offline.leader, offline.isr, offline.state) == (-1, (1,), "OfflinePartition")  # never emptied
        metrics = core_metrics(cluster)
        assert metrics["OfflinePartitionsCount"] == 1
        assert metrics["PreferredReplicaImbalanceCount"] == 3  # t-0, t-2 and single-0 lost their preferred leader
        assert cluster.check_invariants() == []


def test_broker_startup_brings_its_replicas_back_and_offline_partitions_online() -> None:
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.create_topic("single", assignment={0: [1]})
        first_epoch = active(cluster).context.live_broker_epoch(1)
        cluster.kill_broker(1)
        cluster.run_until_stable()

        cluster.start_broker(1)
        assert cluster.run_until_stable()

        assert active(cluster).context.live_broker_epoch(1) > first_epoch
        assert set(partition(cluster).isr) == {1, 2, 3} and partition(cluster).leader == 2
        single = partition(cluster, TopicPartition("single", 0))
        assert (single.leader, single.isr, single.state) == (1, (1,), "OnlinePartition")
        assert core_metrics(cluster) == {**healthy(topics=2, partitions=2), "PreferredReplicaImbalanceCount": 1}
        # The new broker learnt every partition's metadata.
        assert cluster.metadata_mismatches() == []
        assert cluster.check_invariants() == []


def test_a_bounced_broker_is_handled_as_a_failure_then_a_startup(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kctl.controller.controller")
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [2, 3, 1], 1: [1, 3, 2]})
        old_epoch = active(cluster).context.live_broker_epoch(2)

        # Crash and restart before the controller sees the crash: same id, larger epoch.
        cluster.kill_broker(2)
        cluster.start_broker(2)
        assert cluster.run_until_stable()

        # Kafka's lines, its collections written with mkString(",").
        messages = [r.getMessage() for r in caplog.records]
        assert "Newly added brokers: , deleted brokers: , bounced brokers: 2, all live brokers: 1,2,3" in messages
        assert ["Broker failure callback for 2", "New broker startup callback for 2"] == [
            m for m in messages if " callback for " in m
        ][-2:]
        new_epoch = active(cluster).context.live_broker_epoch(2)
        assert new_epoch == cluster.brokers[2].broker_epoch > old_epoch
        # Failure handling moved its leadership away (epoch bump); startup brought it back in the ISR.
        t0 = partition(cluster)
        assert (t0.leader, t0.leader_epoch, set(t0.isr)) == (3, 1, {1, 2, 3})
        # Requests to it now carry its new epoch (the broker would reject older ones).
        assert [r.request for r in cluster.sent_requests if r.broker == 2][-1].broker_epoch == new_epoch
        assert cluster.check_invariants() == []


def test_topic_changes_are_logged_with_kafkas_message(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kctl.controller.controller")
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [2, 3, 1], 1: [1, 3, 2]})
        cluster.delete_topic("t")
        assert cluster.run_until_stable()
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("New topics:")] == [
        "New topics: [t], deleted topics: [], new partition replica assignment ["
        "t-0 -> ReplicaAssignment(replicas=2,3,1, addingReplicas=, removingReplicas=), "
        "t-1 -> ReplicaAssignment(replicas=1,3,2, addingReplicas=, removingReplicas=)]",
        # The deletion removed t from the controller's view before its znode went, as in Kafka.
        "New topics: [], deleted topics: [], new partition replica assignment []",
    ]


def test_a_new_topics_lines_are_written_after_its_partition_states_with_the_times_they_were_made() -> None:
    """The lines listing every new partition (controller.log's "New topics" and "New partition
    creation callback") are made text and written once the partitions' states are written, as the
    state-change lines are, each keeping the time it was logged: at 20K partitions making them
    took as long as a tenth of the states' writes."""
    seen: list[tuple[str, bool, float]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message.startswith(("New topics: [t]", "New partition creation callback")):
                written = cluster.store.get_partition_states([TopicPartition("t", 0)]).values
                seen.append((message, TopicPartition("t", 0) in written, record.created))

    logger = logging.getLogger("kctl.controller.controller")
    collect = Collect(logging.INFO)
    logger.addHandler(collect)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        with EmbeddedCluster(3) as cluster:
            before = time.time()
            cluster.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1]})
            assert cluster.run_until_stable()
    finally:
        logger.removeHandler(collect)
        logger.setLevel(previous)
    assert [(message[:20], written) for message, written, _ in seen] == [
        ("New topics: [t], del", True), ("New partition creati", True)]
    assert seen[0][0].endswith("t-1 -> ReplicaAssignment(replicas=2,3,1, addingReplicas=, removingReplicas=)]")
    assert seen[1][0] == "New partition creation callback for t-0, t-1"
    assert before <= seen[0][2] <= seen[1][2]


def test_a_broker_with_a_new_endpoint_is_announced_to_every_broker() -> None:
    """BrokerModifications (reference §6.4): a registration whose endpoints (or features) changed in
    place becomes UpdateMetadata, without partitions, to every live broker; another change (the
    rack) is ignored, and neither is a bounce."""
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        broker = cluster.brokers[2]
        epoch = broker.broker_epoch
        moved = BrokerInfo(2, (EndPoint("broker2.example", 19092),), broker.info.rack)

        sent = len(cluster.sent_requests)
        broker.store.update_broker_info(moved)
        assert cluster.run_until_stable()

        announced = cluster.sent_requests[sent:]
        assert sorted(r.broker for r in announced) == [1, 2, 3]
        for record in announced:
            assert isinstance(record.request, UpdateMetadataRequest) and list(record.request.partition_states) == []
            assert [b for b in record.request.live_brokers if b.id == 2] == [moved]
        assert [cluster.brokers[b].metadata_cache.broker(2) for b in (1, 2, 3)] == [moved] * 3
        assert active(cluster).context.live_broker_epoch(2) == epoch

        sent = len(cluster.sent_requests)
        broker.store.update_broker_info(replace(moved, rack="elsewhere"))
        cluster.run_until(cluster.is_quiet, what="the change handled")
        assert cluster.sent_requests[sent:] == []


# --- Controlled shutdown (§6.12) --------------------------------------------------------------------


def test_controlled_shutdown_shrinks_the_isr_then_reports_partitions_it_cannot_move() -> None:
    """Kafka's ControllerIntegrationTest example with brokers [1, 2, 3] and leader 1."""
    with EmbeddedCluster(4, controllers=[4]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})

        cluster.shutdown_broker(3)
        assert (partition(cluster).leader, partition(cluster).isr) == (1, (1, 2))
        cluster.shutdown_broker(2)
        assert (partition(cluster).leader, partition(cluster).isr) == (1, (1,))

        remaining = cluster.wait(active(cluster).controlled_shutdown(1, cluster.brokers[1].broker_epoch))
        assert remaining == [TP]
        assert (partition(cluster).leader, partition(cluster).isr, partition(cluster).leader_epoch) == (1, (1,), 2)
        assert 1 in active(cluster).context.shutting_down_broker_ids
        assert cluster.check_invariants() == []


def test_controlled_shutdown_moves_leadership_off_the_broker_before_it_stops() -> None:
    with EmbeddedCluster(4, controllers=[4]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 1, 3], 2: [3, 2, 1]})
        cluster.create_topic("single", assignment={0: [1]})
        epoch = cluster.brokers[1].broker_epoch

        assert cluster.wait(cluster.brokers[1].shutdown()) is True  # clean: nothing remained

        assert [(p.leader, p.isr) for p in cluster.describe("t")] == [(2, (2, 3)), (2, (2, 3)), (3, (3, 2))]
        # The follower replicas were stopped without deletion (StopReplica, delete=false).
        stops = [s for r in cluster.sent_requests if r.broker == 1 and isinstance(r.request, StopReplicaRequest)
                 and r.request.broker_epoch == epoch for s in r.request.partition_states]
        assert {(s.topic, s.partition) for s in stops} == {("t", 1), ("t", 2)}
        assert not any(s.delete_partition for s in stops)
        # RF 1 partitions are not acted on: they go offline when the broker stops.
        assert cluster.run_until_stable()
        assert partition(cluster, TopicPartition("single", 0)).leader == -1
        cluster.start_broker(1)
        assert cluster.run_until_stable()
        assert cluster.check_invariants() == []


# --- ISR changes (§6.13) ----------------------------------------------------------------------------


def test_isr_expansion_goes_through_alter_partition_by_default() -> None:
    with EmbeddedCluster(3, controllers=[1]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.kill_broker(3)
        cluster.run_until_stable()
        cluster.start_broker(3)

        wait_for_isr(cluster, {1, 2, 3})
        # The controller made the write itself, so its cache already holds the stored state.
        cached = active(cluster).context.partition_leadership(TP)
        assert cached is not None and cached.leader_and_isr == stored_state(cluster)
        assert cluster.store.get_isr_change_notifications() == []
        assert cluster.run_until_stable()
        assert cluster.brokers[2].metadata_cache.partition_state(TP).isr == stored_state(cluster).isr
        assert cluster.check_invariants() == []


@pytest.mark.parametrize("resent", [True, False], ids=["resent-after-reconnect", "given-up"])
def test_an_isr_expansion_whose_store_answer_was_lost_still_reaches_the_leader_and_every_broker(resent: bool) -> None:
    # The controller's write of the expanded ISR lands, but the answer is lost with the connection:
    # the client either sends the write again once reconnected (BADVERSION: it landed already) or
    # gives up. Either way the controller's cache is behind the store; it reads the state znode
    # back, answers the leader's (retried) proposal with the stored state and tells every broker.
    sessions = FaultySessions()
    with EmbeddedCluster(3, controllers=[1], controller_session=sessions) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.kill_broker(3)
        cluster.run_until_stable()
        sessions[1].lose_answer("update_partition_states", resent)
        cluster.start_broker(3)

        wait_for_isr(cluster, {1, 2, 3})
        [((written, *_), _)] = sessions[1].lost
        assert written[TP].isr == (1, 2, 3)  # the lost answer was the ISR expansion's
        stored = stored_state(cluster)
        assert cluster.run_until_stable(), cluster.metadata_mismatches()
        leader = cluster.brokers[1].inspect(lambda a: a.replica_manager.replica_state(TP))
        assert (leader.isr, leader.pending_isr, leader.partition_epoch) == ((1, 2, 3), None, stored.partition_epoch)
        assert stored_state(cluster) == stored  # answered from the store, not written twice
        cached = active(cluster).context.partition_leadership(TP)
        assert cached is not None and cached.leader_and_isr == stored
        assert {b: cluster.brokers[b].metadata_cache.partition_state(TP).isr for b in (1, 2, 3)} == dict.fromkeys((1, 2, 3), (1, 2, 3))
        assert cluster.check_invariants() == []


def test_an_unclean_leader_is_recovering_until_its_isr_grows_and_alter_partition_guards_the_recovery() -> None:
    # Kafka 3.9 (IBP >= 3.2, KIP-704): an unclean election writes RECOVERING; the leader's next
    # AlterPartition says RECOVERED; a recovering leader alone in its ISR, and never back to RECOVERING
    config = {"inter.broker.protocol.version": "3.9-IV0", "unclean.leader.election.enable": True,
              "auto.leader.rebalance.enable": False}
    with EmbeddedCluster(3, controllers=[3], config=config) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        cluster.kill_broker(2)
        wait_for_isr(cluster, {1})
        cluster.kill_broker(1)
        cluster.start_broker(2)  # out of sync: elected only because unclean election is enabled
        assert cluster.run_until_stable()
        recovering = stored_state(cluster)
        assert (recovering.leader, recovering.isr) == (2, (2,))
        assert recovering.leader_recovery_state is LeaderRecoveryState.RECOVERING

        controller, epoch = active(cluster), cluster.brokers[2].broker_epoch
        grown = LeaderAndIsr(2, (2, 1), recovering.leader_epoch, recovering.partition_epoch, LeaderRecoveryState.RECOVERING)
        refused = cluster.wait(controller.alter_partition(2, epoch, {TP: grown}))
        assert isinstance(refused[TP], InvalidRequestError) and "ISR is greater than 1" in str(refused[TP])

        cluster.start_broker(1)
        wait_for_isr(cluster, {1, 2})
        recovered = stored_state(cluster)
        assert recovered.leader == 2 and recovered.leader_recovery_state is LeaderRecoveryState.RECOVERED
        back = LeaderAndIsr(2, (2,), recovered.leader_epoch, recovered.partition_epoch, LeaderRecoveryState.RECOVERING)
        refused = cluster.wait(controller.alter_partition(2, epoch, {TP: back}))
        assert isinstance(refused[TP], InvalidRequestError) and "RECOVERED to RECOVERING" in str(refused[TP])
        assert stored_state(cluster) == recovered
        assert cluster.check_invariants() == []


def test_isr_changes_before_alter_partition_are_written_by_leaders_and_notified_to_the_controller() -> None:
    with EmbeddedCluster(3, controllers=[1], config={"inter.broker.protocol.version": "2.6"}) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.kill_broker(3)
        cluster.run_until_stable()
        cluster.start_broker(3)

        wait_for_isr(cluster, {1, 2, 3})
        # The leader wrote the state znode; the controller does not know yet.
        cached = active(cluster).context.partition_leadership(TP)
        assert cached is not None and 3 not in cached.leader_and_isr.isr
        cluster.run_until(lambda: cluster.store.get_isr_change_notifications() != [], what="an ISR change notification")
        cluster.run_until(lambda: cluster.store.get_isr_change_notifications() == [], what="the notification processed")
        cached = active(cluster).context.partition_leadership(TP)
        assert cached is not None and cached.leader_and_isr == stored_state(cluster)
        assert cluster.run_until_stable()
        for broker in (1, 2, 3):
            assert set(cluster.brokers[broker].metadata_cache.partition_state(TP).isr) == {1, 2, 3}
        assert cluster.check_invariants() == []


# --- Log directory failures (§6.14) -----------------------------------------------------------------


def test_a_failed_log_dir_takes_its_replicas_offline_and_moves_their_leadership() -> None:
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3], 1: [1, 3, 2]})

        cluster.fail_log_dir(1, [TP])
        assert cluster.run_until_stable()

        ctx = active(cluster).context
        assert not ctx.is_replica_online(1, TP) and ctx.is_replica_online(1, TopicPartition("t", 1))
        assert (partition(cluster).leader, partition(cluster).isr) == (2, (2, 3))
        assert leaders(cluster, "t")[1] == 1  # the other log directory is fine
        assert cluster.brokers[1].replica_manager.replica_state(TP).role is ReplicaRole.OFFLINE
        assert cluster.brokers[2].metadata_cache.partition_state(TP).offline_replicas == (1,)
        assert core_metrics(cluster)["OfflinePartitionsCount"] == 0

        # A restart (the directory replaced) brings the replica back, empty, and it catches up.
        cluster.kill_broker(1)
        cluster.start_broker(1)
        assert cluster.run_until_stable()
        assert set(partition(cluster).isr) == {1, 2, 3}
        assert cluster.check_invariants() == []


def test_a_creations_state_change_lines_come_after_its_state_writes() -> None:
    """The lines of a creation's transitions are held until its partition states are written (at
    20K partitions, 60K lines before the first write): the NewPartition lines reach the log with
    the states already in the store."""
    stored_when_logged: list[object] = []

    class Check(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "to NewPartition" in record.getMessage() and not stored_when_logged:
                stored_when_logged.append(cluster.store.get_partition_states([TP]).values.get(TP))

    state_change = logging.getLogger("kctl.state_change")
    saved = state_change.level
    check = Check()
    state_change.addHandler(check)
    state_change.setLevel(logging.INFO)  # (setLevel drops the logger's cached answers)
    try:
        with EmbeddedCluster(3, seed=3) as cluster:
            cluster.create_topic(TP.topic, assignment={TP.partition: [1, 2]})
    finally:
        state_change.removeHandler(check)
        state_change.setLevel(saved)
    assert len(stored_when_logged) == 1 and stored_when_logged[0] is not None
