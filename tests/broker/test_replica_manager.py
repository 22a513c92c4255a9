"""SimulatedReplicaManager and DataPlaneLedger: replication, ISR changes (reference §6.13), I8;
each test on the Python reference and on the native data plane (``kctl.broker.native_data_plane``)."""

from __future__ import annotations

import gc

import pytest

from kctl.broker import DataLossViolation, DataPlaneLedger, ReplicaRole, ReplicaSnapshot, SimulatedReplicaManager
from kctl.broker import replica_manager
from kctl.broker.replica_manager import ALTER_PARTITION_RETRY_BACKOFF
from kctl.errors import Errors, IllegalArgumentError, IllegalStateError
from kctl.model import EPOCH_DURING_DELETE, LeaderAndIsr, TopicPartition
from kctl.requests import AlterPartitionRequest

from tests.support.broker_harness import LATENCY, SimCluster, stop_replica

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
LAG = {"replica.lag.time.max.ms": 10000}  # ISR checks every 5 s
OLD_IBP = {**LAG, "inter.broker.protocol.version": "2.6"}  # before AlterPartition


@pytest.fixture(autouse=True, params=["python", "native"])
def data_plane(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The data plane every ``SimCluster`` of the test runs."""
    monkeypatch.setenv("KCTL_DATA_PLANE", request.param)
    return str(request.param)


def leo(cluster: SimCluster, broker: int, tp: TopicPartition = T0) -> int:
    state = cluster.manager(broker).replica_state(tp)
    assert state is not None
    return state.log_end_offset


def state(cluster: SimCluster, broker: int, tp: TopicPartition = T0) -> ReplicaSnapshot:
    snapshot = cluster.manager(broker).replica_state(tp)
    assert snapshot is not None
    return snapshot


# --- Roles and replication ---------------------------------------------------------------------------


def test_followers_fetch_from_the_leader_and_the_high_watermark_follows() -> None:
    cluster = SimCluster().start()
    cluster.controller.create_topic("t", {0: [1, 2, 3]})
    cluster.run(1)
    assert state(cluster, 1).role is ReplicaRole.LEADER
    assert [(state(cluster, b).role, state(cluster, b).leader) for b in (2, 3)] == [(ReplicaRole.FOLLOWER, 1)] * 2
    assert cluster.manager(1).produce(T0, 10) is Errors.NONE
    assert state(cluster, 1).high_watermark == 0  # the followers have not fetched yet
    cluster.run(0.5)  # round at 1.5: followers copy the records
    assert [leo(cluster, b) for b in (1, 2, 3)] == [10, 10, 10] and state(cluster, 1).high_watermark == 0
    cluster.run(0.5)  # round at 2.0: the leader learns they have them
    assert state(cluster, 1).high_watermark == 10
    cluster.run(0.5)
    assert [state(cluster, b).high_watermark for b in (2, 3)] == [10, 10]
    assert cluster.ledger.committed_offset(T0) == 10 and cluster.ledger.violations == []


def test_produce_answers_like_a_broker() -> None:
    cluster = SimCluster().start()
    cluster.controller.create_topic("t", {0: [1, 2]})
    cluster.run(1)
    assert cluster.manager(2).produce(T0, 1) is Errors.NOT_LEADER_OR_FOLLOWER
    assert cluster.manager(3).produce(T0, 1) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(IllegalArgumentError, match="cannot produce 0 records"):
        cluster.manager(1).produce(T0, 0)


def test_a_slow_follower_copies_a_bounded_number_of_records_per_round() -> None:
    cluster = SimCluster(max_fetch_records=3).start()
    cluster.controller.create_topic("t", {0: [1, 2]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 8)
    progress = []
    for _ in range(4):
        cluster.run(0.5)
        progress.append(leo(cluster, 2))
    assert progress == [3, 6, 8, 8]
    assert state(cluster, 1).high_watermark == 8


def test_a_new_follower_truncates_what_the_new_leader_does_not_have() -> None:
    cluster = SimCluster().start()
    cluster.controller.create_topic("t", {0: [1, 2]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 5)
    cluster.run(2)
    cluster.manager(2).pause_fetching()
    cluster.manager(1).produce(T0, 3)  # offsets 5-7 never reach broker 2: not committed
    assert state(cluster, 1).high_watermark == 5
    cluster.controller.elect(T0, 2, [2])
    cluster.run(0.1)
    cluster.manager(2).produce(T0, 2)  # offsets 5-6 of the new leader epoch
    cluster.run(2)
    # Broker 1 dropped its own offsets 5-7 before copying the new leader's 5-6.
    assert (leo(cluster, 1), leo(cluster, 2)) == (7, 7)
    assert state(cluster, 1).role is ReplicaRole.FOLLOWER and state(cluster, 1).high_watermark == 7
    assert cluster.ledger.violations == [] and cluster.ledger.unclean_elections == 0


def test_followers_fetch_into_a_leadership_renewed_at_the_same_epoch() -> None:
    """A leader that restarts and leads again at the same leader epoch (the state sent again before
    the controller noticed the crash) knows its followers anew: a follower that fetched from the
    leadership before must fetch into the new one, not where its earlier fetches went."""
    cluster = SimCluster(config=LAG).start()
    cluster.controller.create_topic("t", {0: [1, 2]})
    cluster.run(1)
    cluster.agents[1].kill()
    cluster.agents[1].restart()
    cluster.controller.publish([T0])  # epoch 0 again: broker 1 leads anew, broker 2 refuses it as stale
    cluster.run(1)
    assert state(cluster, 1).leader_epoch == state(cluster, 2).leader_epoch == 0
    cluster.manager(1).produce(T0, 3)
    cluster.run(2)
    assert leo(cluster, 2) == 3 and state(cluster, 1).high_watermark == 3
    cluster.manager(2).pause_fetching()  # caught up, it stops: the new leadership learns it
    cluster.run(20)
    cluster.manager(1).produce(T0, 1)
    produced = cluster.scheduler.now()
    # Lagging since it stopped (not since the record, as if still fetching): out at the next check.
    assert cluster.run_until(lambda: cluster.stored_isr(T0) == (1,)) < produced + 6


def test_stop_replica_stops_fetching_and_deletes_the_log() -> None:
    cluster = SimCluster().start()
    cluster.controller.create_topic("t", {0: [1, 2]})
    cluster.run(1)
    cluster.agents[2].handle_request(stop_replica((T0, 0, False)))
    cluster.manager(1).produce(T0, 4)
    cluster.run(2)
    assert state(cluster, 2).role is ReplicaRole.STOPPED and leo(cluster, 2) == 0
    cluster.agents[2].handle_request(stop_replica((T0, 0, True)))
    assert cluster.manager(2).replica_state(T0) is None and cluster.manager(2).hosted_partitions() == []


@pytest.mark.parametrize("data_plane", ["python"], indirect=True)  # the native plane's replicas are no Python objects
def test_a_deleted_partitions_replicas_are_freed_without_the_collector(data_plane: str) -> None:
    """Followers keep the leader's replica they last fetched from across leaderships, but these
    references form no cycle: once deleted, the replicas of brokers that led in turn and fetched
    from each other are freed by their reference counts (a simulation collects only young objects)."""
    gc.collect()
    gc.disable()
    try:
        cluster = SimCluster().start()
        cluster.controller.create_topic("t", {0: [1, 2]})
        cluster.run(1)
        cluster.controller.elect(T0, 2, [2, 1])  # broker 1 fetches from broker 2
        cluster.run(1)
        cluster.controller.elect(T0, 1, [1, 2])  # and broker 2 from broker 1 again
        cluster.run(1)
        assert leo(cluster, 1) == leo(cluster, 2) == 0 and state(cluster, 2).leader == 1
        for broker in (1, 2):
            cluster.agents[broker].handle_request(stop_replica((T0, EPOCH_DURING_DELETE, True)))
        assert [r for r in gc.get_objects() if isinstance(r, replica_manager._Replica) and r.tp == T0] == []
    finally:
        gc.enable()


def test_the_replica_manager_runs_once() -> None:
    cluster = SimCluster().start()
    with pytest.raises(IllegalStateError, match="already running"):
        cluster.manager(1).startup(cluster.agents[1])
    cluster.agents[1].kill()
    with pytest.raises(IllegalStateError, match="not running"):
        cluster.manager(1).pause_fetching()
    with pytest.raises(IllegalArgumentError, match="fetch_interval must be > 0"):
        SimulatedReplicaManager(fetch_interval=0)


# --- ISR changes through AlterPartition --------------------------------------------------------------


def test_the_isr_expands_then_shrinks_through_alter_partition() -> None:
    cluster = SimCluster(config=LAG).start()
    controller = cluster.controller
    controller.create_topic("t", {0: [1, 2, 3]}, isr={0: [1, 2]})
    epoch1 = cluster.agents[1].broker_epoch
    # Broker 3's first fetch (round at 0.5) finds it caught up: the leader proposes it at once.
    cluster.run_until(lambda: cluster.stored_isr(T0) == (1, 2, 3))
    [expand] = controller.alter_partition_requests()
    assert expand.time == pytest.approx(0.5 + LATENCY)
    assert expand.request == AlterPartitionRequest(1, epoch1, {T0: LeaderAndIsr(1, (1, 2, 3), 0, 0)})
    cluster.run(0.01)
    assert (state(cluster, 1).isr, state(cluster, 1).partition_epoch, state(cluster, 1).pending_isr) == ((1, 2, 3), 1, None)

    cluster.scheduler.run_until(3.0)
    cluster.manager(3).pause_fetching()  # at 3.0, caught up
    cluster.manager(1).produce(T0, 10)
    cluster.run(2)
    assert state(cluster, 1).high_watermark == 0 and leo(cluster, 2) == 10  # broker 3 holds it back
    # Out of the ISR at the first check (every 5 s) more than replica.lag.time.max.ms after 3.0.
    cluster.run_until(lambda: state(cluster, 1).pending_isr is not None)
    assert cluster.scheduler.now() == pytest.approx(15)
    assert state(cluster, 1).high_watermark == 0  # KIP-497: the proposed-out member still counts
    cluster.run(0.01)
    shrink = controller.alter_partition_requests()[-1]
    assert shrink.request.changes == {T0: LeaderAndIsr(1, (1, 2), 0, 1)}
    assert cluster.stored_isr(T0) == (1, 2) and cluster.stored_state(T0).leader_and_isr.partition_epoch == 2
    assert (state(cluster, 1).isr, state(cluster, 1).partition_epoch, state(cluster, 1).high_watermark) == ((1, 2), 2, 10)
    assert cluster.ledger.committed_offset(T0) == 10


def test_the_ledger_follows_isr_changes_committed_through_alter_partition() -> None:
    """An expansion committed as proposed leaves the ledger's ISR as reported with the proposal; a
    shrink reaches it once committed: electing the added replica is clean, the removed one unclean."""
    cluster = SimCluster(config=LAG).start()
    controller = cluster.controller
    controller.create_topic("t", {0: [1, 2, 3], 1: [1, 2, 3]}, isr={0: [1, 2]})
    cluster.run_until(lambda: cluster.stored_isr(T0) == (1, 2, 3))
    cluster.run(1)
    cluster.manager(3).pause_fetching()
    cluster.manager(1).produce(T1, 4)
    cluster.run_until(lambda: cluster.stored_isr(T1) == (1, 2))
    cluster.run(0.01)
    assert (state(cluster, 1).isr, state(cluster, 1, T1).isr) == ((1, 2, 3), (1, 2))
    controller.elect(T0, 3, [3])
    cluster.run(0.1)
    assert cluster.ledger.unclean_elections == 0
    controller.elect(T1, 3, [3])
    cluster.run(0.1)
    assert (cluster.ledger.unclean_elections, cluster.ledger.truncated_records) == (1, 4)


def test_isr_changes_of_one_round_leave_in_one_request() -> None:
    cluster = SimCluster(config=LAG).start()
    cluster.controller.create_topic("t", {0: [1, 2, 3], 1: [1, 3, 2]}, isr={0: [1, 2], 1: [1, 2]})
    cluster.run(1)
    [request] = cluster.controller.alter_partition_requests()
    assert request.request.changes == {T0: LeaderAndIsr(1, (1, 2, 3), 0, 0), T1: LeaderAndIsr(1, (1, 2, 3), 0, 0)}
    assert cluster.stored_isr(T0) == cluster.stored_isr(T1) == (1, 2, 3)


def test_a_dead_follower_leaves_the_isr_only_once_the_log_moves_on() -> None:
    cluster = SimCluster(config=LAG).start()
    cluster.controller.create_topic("t", {0: [1, 2, 3]})
    cluster.run(1)
    cluster.agents[3].kill()
    cluster.run(60)
    assert cluster.stored_isr(T0) == (1, 2, 3)  # caught up, like Kafka's isFollowerOutOfSync
    cluster.manager(1).produce(T0, 1)
    cluster.run(20)
    assert cluster.stored_isr(T0) == (1, 2) and state(cluster, 1).high_watermark == 1


def test_alter_partition_without_a_controller_is_retried() -> None:
    cluster = SimCluster(config=LAG).start()
    controller = cluster.controller
    controller.create_topic("t", {0: [1, 2, 3]}, isr={0: [1, 2]})
    cluster.run(0.1)
    cluster.transport.unbind_controller(controller.controller_id)
    cluster.run(3)
    assert controller.alter_partition_requests() == [] and state(cluster, 1).pending_isr == (1, 2, 3)
    cluster.transport.bind_controller(controller.controller_id, controller.handle)
    cluster.run(0.2)
    assert cluster.stored_isr(T0) == (1, 2, 3) and state(cluster, 1).isr == (1, 2, 3)


def test_an_unanswered_alter_partition_is_sent_again_after_the_request_timeout() -> None:
    cluster = SimCluster(config={**LAG, "request.timeout.ms": 2000}).start()
    controller = cluster.controller
    controller.unanswered_alter_partitions = 1  # e.g. the controller resigned with it in its queue
    controller.create_topic("t", {0: [1, 2, 3]}, isr={0: [1, 2]})
    cluster.run(5)
    first, second = controller.alter_partition_requests()
    assert second.request == first.request
    assert second.time == pytest.approx(first.time - LATENCY + 2 + ALTER_PARTITION_RETRY_BACKOFF + LATENCY)
    assert cluster.stored_isr(T0) == (1, 2, 3) and state(cluster, 1).isr == (1, 2, 3)


def test_a_fenced_proposal_waits_for_the_next_leader_and_isr() -> None:
    cluster = SimCluster(config=LAG).start()
    controller = cluster.controller
    controller.alter_partition_errors[T0] = Errors.FENCED_LEADER_EPOCH
    controller.create_topic("t", {0: [1, 2, 3]}, isr={0: [1, 2]})
    cluster.run(30)
    assert len(controller.alter_partition_requests()) == 1  # no retry: the leader waits
    assert state(cluster, 1).pending_isr == (1, 2, 3) and cluster.stored_isr(T0) == (1, 2)
    controller.elect(T0, 1, [1, 2])  # the next LeaderAndIsr resets the partition
    cluster.run(1)
    assert len(controller.alter_partition_requests()) == 2 and cluster.stored_isr(T0) == (1, 2, 3)


def test_an_unexpected_error_drops_the_proposal_until_the_next_check() -> None:
    cluster = SimCluster(config=LAG).start()
    controller = cluster.controller
    controller.alter_partition_errors[T0] = Errors.INELIGIBLE_REPLICA
    controller.create_topic("t", {0: [1, 2, 3]}, isr={0: [1, 2]})
    cluster.run(1)
    assert state(cluster, 1).pending_isr is None and cluster.stored_isr(T0) == (1, 2)
    cluster.run(5)  # the ISR check at 5.0 proposes broker 3 again
    assert [round(r.time, 6) for r in controller.alter_partition_requests()] == [0.501, 5.001]
    assert cluster.stored_isr(T0) == (1, 2, 3)


# --- ISR changes before AlterPartition: the leader writes ZooKeeper ----------------------------------


def test_before_alter_partition_the_leader_writes_the_state_and_notifies_later() -> None:
    cluster = SimCluster(config=OLD_IBP).start()
    cluster.controller.create_topic("t", {0: [1, 2, 3]}, isr={0: [1, 2]})
    cluster.run_until(lambda: cluster.stored_isr(T0) == (1, 2, 3))
    assert cluster.scheduler.now() == pytest.approx(0.5)  # written by the leader, no request sent
    assert cluster.controller.alter_partition_requests() == []
    stored = cluster.stored_state(T0)
    assert (stored.leader_and_isr.partition_epoch, stored.controller_epoch) == (1, cluster.controller.epoch)
    assert state(cluster, 1).partition_epoch == 1
    # Checked every 2.5 s; sent once no change happened for 5 s: at 7.5 for a change at 0.5.
    cluster.run_until(lambda: bool(cluster.admin.get_isr_change_notifications()))
    assert cluster.scheduler.now() == pytest.approx(7.5)
    names = cluster.admin.get_isr_change_notifications()
    assert cluster.admin.get_isr_change_notification_partitions(names) == [T0]


def test_isr_changes_within_the_linger_time_share_one_notification() -> None:
    cluster = SimCluster(config={"replica.lag.time.max.ms": 4000, "inter.broker.protocol.version": "2.6"}).start()
    cluster.controller.create_topic("t", {0: [1, 2, 3], 1: [1, 2]}, isr={0: [1, 2]})
    cluster.run(1)  # T0 expanded at 0.5
    cluster.manager(2).pause_fetching()
    for tp in (T0, T1):
        cluster.manager(1).produce(tp, 1)
    cluster.run_until(lambda: cluster.stored_isr(T1) == (1,))
    assert cluster.scheduler.now() == pytest.approx(6) and cluster.stored_isr(T0) == (1, 3)
    # The change at 6.0 holds back the one at 0.5: both go at 12.5, the first check after 11.0.
    cluster.run_until(lambda: bool(cluster.admin.get_isr_change_notifications()))
    assert cluster.scheduler.now() == pytest.approx(12.5)
    names = cluster.admin.get_isr_change_notifications()
    assert cluster.admin.get_isr_change_notification_partitions(names) == [T0, T1]


def test_isr_changes_that_never_settle_are_sent_after_60_seconds() -> None:
    cluster = SimCluster(config={"replica.lag.time.max.ms": 1000, "inter.broker.protocol.version": "2.6"}).start()
    cluster.controller.create_topic("t", {0: [1, 2, 3]})
    follower, leader = cluster.manager(3), cluster.manager(1)

    def flap(at: float) -> None:  # out of the ISR at at+1.5, back at at+3.0, every 4 s
        def lag() -> None:
            follower.pause_fetching()
            leader.produce(T0, 1)
        cluster.scheduler.schedule(at - cluster.scheduler.now(), lag)
        cluster.scheduler.schedule(at + 2 - cluster.scheduler.now(), follower.resume_fetching)

    for k in range(18):
        flap(1 + 4 * k)
    cluster.run_until(lambda: bool(cluster.admin.get_isr_change_notifications()), timeout=80)
    assert cluster.scheduler.now() == pytest.approx(62.5)
    assert cluster.admin.get_isr_change_notification_partitions(cluster.admin.get_isr_change_notifications()) == [T0]


def test_a_write_at_a_stale_version_waits_for_the_next_leader_and_isr() -> None:
    cluster = SimCluster(config=OLD_IBP).start()
    controller = cluster.controller
    controller.create_topic("t", {0: [1, 2, 3]}, isr={0: [1, 2]})
    # The controller changes the state without telling the leader yet.
    controller.store.update_partition_states({T0: LeaderAndIsr(1, (1, 2), 0, 0)}, controller.epoch,
                                             controller.epoch_version)
    cluster.run(12)
    assert cluster.stored_isr(T0) == (1, 2) and state(cluster, 1).isr == (1, 2)
    assert cluster.stored_state(T0).leader_and_isr.partition_epoch == 1
    controller.elect(T0, 1, [1, 2])
    cluster.run(6)
    assert cluster.stored_isr(T0) == (1, 2, 3) and state(cluster, 1).partition_epoch == 3


# --- The ledger: invariant I8 --------------------------------------------------------------------------


def test_an_unclean_election_is_counted_with_the_records_it_loses() -> None:
    cluster = SimCluster(config=LAG).start()
    cluster.manager(3).pause_fetching()
    cluster.controller.create_topic("t", {0: [1, 2, 3]}, isr={0: [1, 2]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 10)
    cluster.run(2)
    assert cluster.ledger.committed_offset(T0) == 10
    cluster.agents[1].kill()
    cluster.agents[2].kill()
    cluster.controller.elect(T0, 3, [3])
    cluster.run(1)
    ledger = cluster.ledger
    assert (ledger.unclean_elections, ledger.truncated_records, ledger.violations) == (1, 10, [])
    assert ledger.committed_offset(T0) == 0


def test_a_clean_election_of_a_replica_that_lost_committed_records_is_a_violation() -> None:
    cluster = SimCluster(config=LAG).start()
    cluster.controller.create_topic("t", {0: [1, 2]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 10)
    cluster.run(2)
    cluster.agents[2].fail_log_dir([T0])
    cluster.agents[2].kill()
    cluster.agents[2].restart()  # the disk was replaced: broker 2's copy is gone
    cluster.agents[1].kill()
    cluster.controller.elect(T0, 2, [2])  # a controller that left 2 in the ISR
    cluster.run(1)
    [violation] = cluster.ledger.violations
    assert violation == DataLossViolation(T0, 2, 1, 0, 10)
    assert str(violation) == ("t-0: broker 2 became leader (epoch 1) from the ISR with log end offset 0, "
                              "below the committed offset 10")


def test_the_ledger_judges_elections_against_the_last_leaders_isr() -> None:
    ledger = DataPlaneLedger()
    record = ledger.leader_elected(T0, 1, 0, 0, (1, 2, 3))  # what the leader reports its ISR changes to
    ledger.high_watermark_advanced(T1, 9)  # no leadership recorded (deleted): ignored
    ledger.high_watermark_advanced(T0, 7)
    ledger.isr_changed(record, 0, (1, 2))
    ledger.isr_changed(record, 5, (1,))  # from an older or future leadership: ignored
    assert ledger.leader_elected(T0, 2, 1, 7, (2,)) is record  # clean, has everything
    assert ledger.leader_elected(T0, 3, 1, 0, (3,)) is record  # a late report of the same epoch: ignored
    assert (ledger.violations, ledger.unclean_elections) == ([], 0)
    ledger.leader_elected(T0, 3, 2, 4, (3,))  # unclean: 3 records lost
    assert (ledger.unclean_elections, ledger.truncated_records, ledger.committed_offset(T0)) == (1, 3, 4)
    ledger.partition_deleted(T0)  # a topic re-created under the same name starts from scratch
    ledger.leader_elected(T0, 1, 0, 0, (1,))
    assert ledger.committed_offset(T0) == 0 and ledger.committed_offset(T1) == 0 and ledger.violations == []


def test_deleting_a_topic_resets_its_committed_offset() -> None:
    cluster = SimCluster().start()
    cluster.controller.create_topic("t", {0: [1]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 3)
    assert cluster.ledger.committed_offset(T0) == 3
    cluster.agents[1].handle_request(stop_replica((T0, 0, True)))  # a reassignment's removal: kept
    assert cluster.ledger.committed_offset(T0) == 3
    cluster.agents[1].handle_request(stop_replica((T0, -2, True)))  # topic deletion
    assert cluster.ledger.committed_offset(T0) == 0


# --- Scale --------------------------------------------------------------------------------------------


def test_ten_thousand_partitions_on_ten_brokers_all_catch_up() -> None:
    brokers = range(1, 11)
    cluster = SimCluster(brokers=brokers).start()
    partitions = 10_000
    assignment = {p: [1 + (p + i) % 10 for i in range(3)] for p in range(partitions)}
    cluster.controller.create_topic("big", assignment)
    cluster.run(1)
    tps = [TopicPartition("big", p) for p in range(partitions)]
    for tp in tps:
        assert cluster.manager(assignment[tp.partition][0]).produce(tp, 3) is Errors.NONE
    cluster.run(3)
    for tp in tps:
        assert [leo(cluster, b, tp) for b in assignment[tp.partition]] == [3, 3, 3]
    assert all(cluster.ledger.committed_offset(tp) == 3 for tp in tps)


def test_simulated_followers_read_their_leaders_logs_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulated follower reads its leader's log where it is: its fetches build no
    ``LeaderLogView`` (one per partition and round, two when truncating, was the bulk of a fetch
    in a cluster of 100K partitions), and replicate as before: truncation to the common prefix,
    copying, the high watermark."""
    views: list[object] = []
    view = replica_manager.LeaderLogView
    monkeypatch.setattr(replica_manager, "LeaderLogView", lambda *fields: views.append(fields) or view(*fields))
    cluster = SimCluster().start()
    cluster.controller.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 5)
    cluster.manager(2).produce(T1, 2)
    cluster.run(2)
    cluster.manager(3).pause_fetching()
    cluster.manager(1).produce(T0, 3)  # offsets 5-7 never reach broker 3
    cluster.run(2)
    cluster.controller.elect(T0, 3, [3, 2])  # broker 3 leads from offset 5: brokers 1 and 2 truncate
    cluster.run(0.1)
    cluster.manager(3).produce(T0, 1)
    cluster.run(2)
    assert [leo(cluster, b) for b in (1, 2, 3)] == [6, 6, 6] and state(cluster, 3).high_watermark == 6
    assert [leo(cluster, b, T1) for b in (1, 2, 3)] == [2, 2, 2]
    assert [state(cluster, b, T1).high_watermark for b in (1, 2, 3)] == [2, 2, 2]
    assert views == []
