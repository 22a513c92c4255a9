"""The replica state machine (reference §4), in the style of Kafka's ReplicaStateMachineTest.

Each test sets up the context and the store a transition starts from, runs
``handle_state_changes`` and asserts the final states, the state-change log, the returned
results, what every broker was sent and what the store holds afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from kctl.errors import ControllerMovedError, StateChangeFailedError
from kctl.model import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from kctl.reference.replica_state_machine import kafka_broker_order

from tests.support.statemachine_harness import (
    TP,
    ConcurrentWriterStore,
    Harness,
    lai_state,
    make_harness,
    prefix,
    um_state,
)

pytestmark = pytest.mark.usefixtures("engine")  # every test here runs on each engine

R = ReplicaState
NEW, ONLINE, OFFLINE = R.NEW, R.ONLINE, R.OFFLINE
STARTED, SUCCESSFUL, INELIGIBLE, NON_EXISTENT = (
    R.DELETION_STARTED, R.DELETION_SUCCESSFUL, R.DELETION_INELIGIBLE, R.NON_EXISTENT
)
TP1 = TopicPartition("t", 1)
PREFIX = prefix()
REPLICA = PartitionReplica(TP, 2)  # a follower in the ISR of t-0

# Reference §4.1, transcribed (not read from kctl.model).
VALID_PREVIOUS = {
    NEW: {NON_EXISTENT},
    ONLINE: {NEW, ONLINE, OFFLINE, INELIGIBLE},
    OFFLINE: {NEW, ONLINE, OFFLINE, INELIGIBLE},
    STARTED: {OFFLINE},
    SUCCESSFUL: {STARTED},
    INELIGIBLE: {OFFLINE, STARTED},
    NON_EXISTENT: {SUCCESSFUL},
}
KAFKA_NAMES = {
    NEW: "NewReplica", ONLINE: "OnlineReplica", OFFLINE: "OfflineReplica", STARTED: "ReplicaDeletionStarted",
    SUCCESSFUL: "ReplicaDeletionSuccessful", INELIGIBLE: "ReplicaDeletionIneligible",
    NON_EXISTENT: "NonExistentReplica",
}
IDS = {NEW: "new", ONLINE: "online", OFFLINE: "offline", STARTED: "deletion_started",
       SUCCESSFUL: "deletion_successful", INELIGIBLE: "deletion_ineligible", NON_EXISTENT: "non_existent"}


def lice(leader: int, isr: Sequence[int], leader_epoch: int, version: int,
         controller_epoch: int = 1) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, tuple(isr), leader_epoch, version), controller_epoch)


def no_requests(h: Harness) -> None:
    assert h.channel.sent == []
    pending = h.batch.pending()
    assert (pending.leader_and_isr, pending.stop_replica, pending.update_metadata_brokers) == ({}, {}, set())


def trace(replica: PartitionReplica, from_state: ReplicaState, to_state: ReplicaState) -> str:
    return (f"TRACE {PREFIX} Changed state of replica {replica.broker} for partition {replica.tp} from "
            f"{KAFKA_NAMES[from_state]} to {KAFKA_NAMES[to_state]}")


# --- The transition matrix ------------------------------------------------------------------------


def matrix() -> list[object]:
    return [
        pytest.param(f, t, id=("" if f in VALID_PREVIOUS[t] else "invalid_") + f"{IDS[f]}_to_{IDS[t]}")
        for f in R
        for t in R
    ]


def test_matrix_covers_every_pair() -> None:
    ids = [p.id for p in matrix()]  # type: ignore[attr-defined]
    assert len(ids) == 49 == len(set(ids))
    assert sum(not i.startswith("invalid_") for i in ids) == 14
    assert "new_to_online" in ids and "invalid_online_to_new" in ids


@pytest.mark.parametrize(("from_state", "to_state"), matrix())
def test_transition(from_state: ReplicaState, to_state: ReplicaState) -> None:
    # t-0 on [1, 2, 3], led by 1 with ISR [1, 2, 3]; the replica under test is broker 2's.
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    if from_state is not NON_EXISTENT:
        h.set_replica_states({REPLICA: from_state})
    h.reset_observations()

    result = h.replica_sm.handle_state_changes([REPLICA], to_state)

    pending = h.batch.pending()
    assert (pending.leader_and_isr, pending.stop_replica, pending.update_metadata_brokers) == ({}, {}, set())
    from_name, to_name = KAFKA_NAMES[from_state], KAFKA_NAMES[to_state]
    cached = lai_state(TP, 1, [1, 2, 3], leader_epoch=5, partition_epoch=2, replicas=[1, 2, 3], is_new=False)
    cached_um = um_state(TP, 1, [1, 2, 3], leader_epoch=5, partition_epoch=2, replicas=[1, 2, 3])

    if from_state not in VALID_PREVIOUS[to_state]:
        assert h.context.has_replica_state(REPLICA)  # unknown replicas are registered as NonExistentReplica
        assert h.context.replica_state(REPLICA) is from_state
        assert result == {}
        assert h.channel.sent == []
        assert h.stored(TP) == lice(1, [1, 2, 3], 5, 2)
        assert h.context.partition_replica_assignment(TP) == (1, 2, 3)
        [line] = h.log
        m = re.fullmatch(
            rf"ERROR {re.escape(PREFIX)} Controller 0 epoch 1 initiated state change of replica 2 for partition t-0 "
            rf"from {from_name} to {to_name} failed: IllegalStateError: Replica \[Topic=t,Partition=0,Replica=2\] "
            rf"should be in the (\S+) states before moving to {to_name} state\. Instead it is in {from_name} state",
            line,
        )
        assert m is not None, line
        assert set(m.group(1).split(",")) == {KAFKA_NAMES[s] for s in VALID_PREVIOUS[to_state]}
        return

    assert result == {REPLICA: to_state}
    if to_state is NON_EXISTENT:
        assert not h.context.has_replica_state(REPLICA)
        assert h.context.partition_replica_assignment(TP) == (1, 3)
    else:
        assert h.context.replica_state(REPLICA) is to_state
        assert h.context.partition_replica_assignment(TP) == (1, 2, 3)

    if to_state is OFFLINE:
        # ISR shrink: 2 leaves the ISR, epoch + 1; the others learn it; 2 is told to stop.
        assert h.stored(TP) == lice(1, [1, 3], 6, 3)
        assert h.context.partition_leadership(TP) == lice(1, [1, 3], 6, 3)
        assert h.channel.order() == [("LeaderAndIsr", 1), ("LeaderAndIsr", 3), ("UpdateMetadata", 1),
                                     ("UpdateMetadata", 2), ("UpdateMetadata", 3), ("StopReplica", 2)]
        shrunk = lai_state(TP, 1, [1, 3], leader_epoch=6, partition_epoch=3, replicas=[1, 2, 3], is_new=False)
        assert h.channel.leader_and_isr() == {1: {TP: shrunk}, 3: {TP: shrunk}}
        shrunk_um = um_state(TP, 1, [1, 3], leader_epoch=6, partition_epoch=3, replicas=[1, 2, 3])
        assert h.channel.update_metadata() == {b: {TP: shrunk_um} for b in (1, 2, 3)}
        assert h.channel.stop_replica() == {2: {TP: (5, False)}}  # epoch cached when it was queued
        assert h.log == [
            f"INFO {PREFIX} Partition t-0 state changed to (Leader:1,ISR:1,3,LeaderEpoch:6,ControllerEpoch:1) "
            "after removing replica 2 from the ISR as part of transition to OfflineReplica",
            trace(REPLICA, from_state, to_state),
        ]
        return

    assert h.stored(TP) == lice(1, [1, 2, 3], 5, 2)
    assert h.log == [trace(REPLICA, from_state, to_state)]
    if to_state is NEW:
        assert h.channel.order() == [("LeaderAndIsr", 2), ("UpdateMetadata", 1), ("UpdateMetadata", 2),
                                     ("UpdateMetadata", 3)]
        assert h.channel.leader_and_isr() == {2: {TP: lai_state(TP, 1, [1, 2, 3], leader_epoch=5, partition_epoch=2,
                                                                 replicas=[1, 2, 3], is_new=True)}}
        assert h.channel.update_metadata() == {b: {TP: cached_um} for b in (1, 2, 3)}
    elif to_state is ONLINE and from_state is not NEW:
        assert h.channel.order() == [("LeaderAndIsr", 2), ("UpdateMetadata", 1), ("UpdateMetadata", 2),
                                     ("UpdateMetadata", 3)]
        assert h.channel.leader_and_isr() == {2: {TP: cached}}
        assert h.channel.update_metadata() == {b: {TP: cached_um} for b in (1, 2, 3)}
    elif to_state is STARTED:
        assert h.channel.order() == [("StopReplica", 2)]
        assert h.channel.stop_replica() == {2: {TP: (5, True)}}
    else:  # New → Online, → DeletionSuccessful, → DeletionIneligible, → NonExistent
        assert h.channel.sent == []


def test_replicas_are_processed_broker_by_broker() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [3, 1, 2]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    replicas = [PartitionReplica(TP1, 3), PartitionReplica(TP, 2), PartitionReplica(TP, 3), PartitionReplica(TP1, 2)]
    h.set_replica_states(dict.fromkeys(replicas, OFFLINE))
    result = h.replica_sm.handle_state_changes(replicas, ONLINE)
    assert result == dict.fromkeys(replicas, ONLINE)
    assert h.log == [trace(r, OFFLINE, ONLINE) for r in (replicas[1], replicas[3], replicas[0], replicas[2])]
    # t-1 has no leadership: nothing to send for it.
    assert set(h.channel.leader_and_isr()) == {2, 3}
    assert all(set(states) == {TP} for states in h.channel.leader_and_isr().values())


def test_brokers_are_visited_in_kafkas_order_and_the_last_visit_leaves_the_isr() -> None:
    # Kafka iterates the replicas grouped by broker in a Scala HashMap: brokers 3, 4, 5 go 5, 3, 4.
    h = make_harness(brokers=(3, 4, 5), topics={"t": {0: [3, 5, 4]}})
    h.write_state(TP, 3, [3, 5, 4], leader_epoch=5, version=2)
    replicas = [PartitionReplica(TP, b) for b in (3, 4, 5)]
    h.set_replica_states(dict.fromkeys(replicas, ONLINE))
    assert h.replica_sm.handle_state_changes(replicas, OFFLINE) == dict.fromkeys(replicas, OFFLINE)
    # 5 leaves the ISR, then 3 (the leader) leaves the partition leaderless, and 4, the last, stays in it
    assert h.stored(TP) == lice(-1, [4], 8, 5)
    changes = [line for line in h.log if line.startswith("TRACE")]
    assert changes == [trace(PartitionReplica(TP, b), ONLINE, OFFLINE) for b in (5, 3, 4)]


@pytest.mark.parametrize("brokers, order", [
    ((1, 2, 3), [1, 2, 3]),
    ((3, 4, 5), [5, 3, 4]),
    (range(12), [0, 5, 10, 1, 6, 9, 2, 7, 3, 11, 8, 4]),
    ((1, 33, 65, 97, 7, 1000, 1001, 1002, 1003), [1001, 1, 33, 1002, 7, 1000, 1003, 65, 97]),  # slots shared
])
def test_kafka_broker_order_is_scalas_hash_map_order(brokers: Sequence[int], order: list[int]) -> None:
    # as scala-library 2.13.15's immutable.HashMap iterates these Int keys (checked on the JVM)
    assert kafka_broker_order(brokers) == order
    assert kafka_broker_order(reversed(list(brokers))) == order


def test_empty_input_does_nothing() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.batch.add_update_metadata_request_for_brokers([1])
    assert h.replica_sm.handle_state_changes([], ONLINE) == {}
    assert h.channel.sent == [] and h.log == []


# --- → NewReplica ----------------------------------------------------------------------------------


def test_new_replica_refused_when_the_broker_is_the_cached_leader() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    leader = PartitionReplica(TP, 1)
    result = h.replica_sm.handle_state_changes([leader], NEW)
    assert isinstance(result[leader], StateChangeFailedError)
    assert str(result[leader]) == (
        "Replica 1 for partition t-0 cannot be moved to NewReplica state as it is being requested to become leader"
    )
    assert h.context.replica_state(leader) is NON_EXISTENT
    [error] = h.errors()
    assert error.startswith(f"ERROR {PREFIX} Controller 0 epoch 1 initiated state change of replica 1 for "
                            "partition t-0 from NonExistentReplica to ")
    assert error.endswith(f"failed: StateChangeFailedError: {result[leader]}")
    no_requests(h)


def test_new_replica_without_leadership_only_records_the_state() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    assert h.replica_sm.handle_state_changes([REPLICA], NEW) == {REPLICA: NEW}
    assert h.context.replica_state(REPLICA) is NEW
    no_requests(h)


def test_new_replica_to_online_appends_a_replica_missing_from_the_assignment() -> None:
    h = make_harness(topics={"t": {0: ReplicaAssignment((1, 3), (3,), (1,))}})
    h.write_state(TP, 1, [1, 3], leader_epoch=5, version=2)
    h.set_replica_states({REPLICA: NEW})
    assert h.replica_sm.handle_state_changes([REPLICA], ONLINE) == {REPLICA: ONLINE}
    assert h.context.partition_full_replica_assignment(TP) == ReplicaAssignment((1, 3, 2), (3,), (1,))
    assert h.context.replica_state(REPLICA) is ONLINE
    no_requests(h)


def test_new_replica_to_online_keeps_an_assigned_replica_in_place() -> None:
    h = make_harness(topics={"t": {0: [2, 1, 3]}})
    h.set_replica_states({REPLICA: NEW})
    h.replica_sm.handle_state_changes([REPLICA], ONLINE)
    assert h.context.partition_replica_assignment(TP) == (2, 1, 3)



def test_update_metadata_made_after_a_new_replica_grew_the_assignment() -> None:
    # Brokers 1, 2, 3 are visited in that order: broker 1's LeaderAndIsr adds t-0's UpdateMetadata
    # entry, broker 2's NewReplica then grows the assignment, and broker 3's LeaderAndIsr makes the
    # entry again from the grown one (the entry reads the assignment, as Kafka's does).
    h = make_harness((1, 2, 3), topics={"t": {0: [1, 3]}})
    h.write_state(TP, 1, [1, 3], leader_epoch=5, version=2)
    replicas = [PartitionReplica(TP, b) for b in (1, 2, 3)]
    h.set_replica_states({replicas[0]: ONLINE, replicas[1]: NEW, replicas[2]: ONLINE})
    assert h.replica_sm.handle_state_changes(replicas, ONLINE) == dict.fromkeys(replicas, ONLINE)
    grown = um_state(TP, 1, [1, 3], leader_epoch=5, partition_epoch=2, replicas=[1, 3, 2])
    um = {s.broker: s.request.partition_states for s in h.channel.sent if s.request.api == "UpdateMetadata"}
    assert um == dict.fromkeys((1, 2, 3), (grown,))
    lai = {s.broker: s.request.partition_states for s in h.channel.sent if s.request.api == "LeaderAndIsr"}
    assert lai == {
        1: (lai_state(TP, 1, [1, 3], leader_epoch=5, partition_epoch=2, replicas=[1, 3], is_new=False),),
        3: (lai_state(TP, 1, [1, 3], leader_epoch=5, partition_epoch=2, replicas=[1, 3, 2], is_new=False),),
    }

# --- → OfflineReplica ------------------------------------------------------------------------------


def offline_harness(leader: int, isr: Sequence[int], **kwargs: object) -> Harness:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, leader, isr, leader_epoch=5, version=2, **kwargs)  # type: ignore[arg-type]
    h.set_replica_states({PartitionReplica(TP, b): ONLINE for b in (1, 2, 3)})
    return h


def test_offline_leader_replica_leaves_the_partition_leaderless() -> None:
    h = offline_harness(2, [2, 1, 3])
    h.context.remove_live_brokers([2])
    result = h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert result == {REPLICA: OFFLINE}
    assert h.stored(TP) == lice(-1, [1, 3], 6, 3)
    expected = lai_state(TP, -1, [1, 3], leader_epoch=6, partition_epoch=3, replicas=[1, 2, 3], is_new=False)
    assert h.channel.leader_and_isr() == {1: {TP: expected}, 3: {TP: expected}}
    # Broker 2 is dead: its StopReplica and UpdateMetadata are dropped at send time.
    assert h.channel.order() == [("LeaderAndIsr", 1), ("LeaderAndIsr", 3), ("UpdateMetadata", 1),
                                 ("UpdateMetadata", 3)]
    um = um_state(TP, -1, [1, 3], leader_epoch=6, partition_epoch=3, replicas=[1, 2, 3], offline=[2])
    assert h.channel.update_metadata() == {1: {TP: um}, 3: {TP: um}}


def test_single_member_isr_is_never_emptied() -> None:
    h = offline_harness(2, [2])
    result = h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert result == {REPLICA: OFFLINE}
    assert h.stored(TP) == lice(-1, [2], 6, 3)
    assert h.context.partition_leadership(TP) == lice(-1, [2], 6, 3)
    assert set(h.channel.leader_and_isr()) == {1, 3}


def test_replica_not_in_isr_writes_nothing_but_still_sends_leader_and_isr() -> None:
    h = offline_harness(1, [1, 3], controller_epoch=0)  # written by an older controller
    result = h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert result == {REPLICA: OFFLINE}
    assert h.stored(TP) == lice(1, [1, 3], 5, 2, controller_epoch=0)  # no write
    # The current state is re-cached stamped with this controller's epoch.
    assert h.context.partition_leadership(TP) == lice(1, [1, 3], 5, 2, controller_epoch=1)
    expected = lai_state(TP, 1, [1, 3], leader_epoch=5, partition_epoch=2, replicas=[1, 2, 3], is_new=False)
    assert h.channel.leader_and_isr() == {1: {TP: expected}, 3: {TP: expected}}
    assert h.channel.stop_replica() == {2: {TP: (5, False)}}


def test_topic_queued_for_deletion_gets_no_leader_and_isr() -> None:
    h = offline_harness(1, [1, 2, 3])
    h.context.queue_topic_deletion(["t"])
    result = h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert result == {REPLICA: OFFLINE}
    assert h.stored(TP) == lice(1, [1, 3], 6, 3)  # the ISR shrink still happens
    assert h.channel.order() == [("StopReplica", 2)]
    assert h.channel.stop_replica() == {2: {TP: (EPOCH_DURING_DELETE, False)}}


def test_missing_state_of_a_topic_queued_for_deletion_is_skipped_silently() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.context.put_partition_leadership(TP, lice(1, [1, 2, 3], 5, 2))  # cached, but the znode is gone
    h.context.queue_topic_deletion(["t"])
    h.set_replica_states({REPLICA: ONLINE})
    result = h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert result == {}
    assert h.context.replica_state(REPLICA) is ONLINE
    assert h.log == []
    assert h.channel.order() == [("StopReplica", 2)]


def test_missing_state_fails_the_replica() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.context.put_partition_leadership(TP, lice(1, [1, 2, 3], 5, 2))
    h.set_replica_states({REPLICA: ONLINE})
    result = h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert isinstance(result[REPLICA], StateChangeFailedError)
    assert h.context.replica_state(REPLICA) is ONLINE
    assert h.errors() == [
        f"ERROR {PREFIX} Controller 0 epoch 1 initiated state change of replica 2 for partition t-0 from "
        f"OnlineReplica to OfflineReplica failed: StateChangeFailedError: {result[REPLICA]}"
    ]
    assert "leader and isr path in zookeeper is empty" in str(result[REPLICA])
    # The StopReplica of step 1 is still sent.
    assert h.channel.order() == [("StopReplica", 2)]
    assert h.channel.stop_replica() == {2: {TP: (5, False)}}


def test_state_written_by_a_newer_controller_fails_the_replica() -> None:
    h = offline_harness(1, [1, 2, 3], controller_epoch=2)
    result = h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert isinstance(result[REPLICA], StateChangeFailedError)
    assert "another controller was elected with epoch 2" in str(result[REPLICA])
    assert h.stored(TP) == lice(1, [1, 2, 3], 5, 2, controller_epoch=2)
    assert h.context.replica_state(REPLICA) is ONLINE
    assert len(h.errors()) == 1
    assert h.channel.order() == [("StopReplica", 2)]


def test_partitions_without_leadership_get_update_metadata_only() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.set_replica_states({REPLICA: NEW})
    result = h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert result == {REPLICA: OFFLINE}
    assert h.stored(TP) is None
    assert h.channel.order() == [("UpdateMetadata", 1), ("UpdateMetadata", 2), ("UpdateMetadata", 3),
                                 ("StopReplica", 2)]
    assert h.channel.update_metadata() == {1: {}, 2: {}, 3: {}}
    assert h.channel.stop_replica() == {2: {TP: (NO_EPOCH, False)}}
    assert h.log == [trace(REPLICA, NEW, OFFLINE)]


def test_several_partitions_of_one_broker_go_offline_in_one_write() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [2, 3]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.write_state(TP1, 2, [2, 3], leader_epoch=1, version=0)
    r0, r1 = PartitionReplica(TP, 2), PartitionReplica(TP1, 2)
    h.set_replica_states({r0: ONLINE, r1: ONLINE})
    result = h.replica_sm.handle_state_changes([r0, r1], OFFLINE)
    assert result == {r0: OFFLINE, r1: OFFLINE}
    assert h.stored_states([TP, TP1]) == {TP: lice(1, [1, 3], 6, 3), TP1: lice(-1, [3], 2, 1)}
    assert h.channel.leader_and_isr() == {
        1: {TP: lai_state(TP, 1, [1, 3], leader_epoch=6, partition_epoch=3, replicas=[1, 2, 3], is_new=False)},
        3: {TP: lai_state(TP, 1, [1, 3], leader_epoch=6, partition_epoch=3, replicas=[1, 2, 3], is_new=False),
            TP1: lai_state(TP1, -1, [3], leader_epoch=2, partition_epoch=1, replicas=[2, 3], is_new=False)},
    }
    assert h.channel.stop_replica() == {2: {TP: (5, False), TP1: (1, False)}}


def test_isr_shrink_retries_on_badversion() -> None:
    h = offline_harness(1, [1, 2, 3])
    # The leader shrinks the ISR to [1, 2] concurrently (3 fell behind).
    store = ConcurrentWriterStore(h.store, h.concurrent_state_write(TP, 1, [1, 2]))
    h.replica_sm.store = store
    result = h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert [r.to_retry for r in store.update_results] == [[TP], []]
    assert result == {REPLICA: OFFLINE}
    assert h.stored(TP) == lice(1, [1], 6, 4)
    assert h.context.partition_leadership(TP) == lice(1, [1], 6, 4)
    assert h.errors() == []
    expected = lai_state(TP, 1, [1], leader_epoch=6, partition_epoch=4, replicas=[1, 2, 3], is_new=False)
    assert h.channel.leader_and_isr() == {1: {TP: expected}, 3: {TP: expected}}


def test_fenced_isr_shrink_raises_controller_moved() -> None:
    h = offline_harness(1, [1, 2, 3])
    h.another_controller_takes_over()
    with pytest.raises(ControllerMovedError):
        h.replica_sm.handle_state_changes([REPLICA], OFFLINE)
    assert h.stored(TP) == lice(1, [1, 2, 3], 5, 2)
    assert h.context.replica_state(REPLICA) is ONLINE
    assert h.channel.sent == []


# --- Deletion states ---------------------------------------------------------------------------------


def test_deletion_started_for_a_topic_queued_for_deletion() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.context.queue_topic_deletion(["t"])
    replicas = [PartitionReplica(TP, b) for b in (1, 2, 3)]
    h.set_replica_states(dict.fromkeys(replicas, OFFLINE))
    assert h.replica_sm.handle_state_changes(replicas, STARTED) == dict.fromkeys(replicas, STARTED)
    assert h.channel.stop_replica() == {b: {TP: (EPOCH_DURING_DELETE, True)} for b in (1, 2, 3)}
    assert h.channel.order() == [("StopReplica", 1), ("StopReplica", 2), ("StopReplica", 3)]


def test_non_existent_replica_is_removed_from_rs_ar_and_rr() -> None:
    ra = ReplicaAssignment((1, 2, 3)).reassign_to((4, 2, 3))
    assert (ra.replicas, ra.adding_replicas, ra.removing_replicas) == ((4, 2, 3, 1), (4,), (1,))
    h = make_harness((1, 2, 3, 4), topics={"t": {0: ra}})
    removing, adding = PartitionReplica(TP, 1), PartitionReplica(TP, 4)
    h.set_replica_states({removing: SUCCESSFUL, adding: SUCCESSFUL})
    assert h.replica_sm.handle_state_changes([removing], NON_EXISTENT) == {removing: NON_EXISTENT}
    assert h.context.partition_full_replica_assignment(TP) == ReplicaAssignment((4, 2, 3), (4,), ())
    assert h.replica_sm.handle_state_changes([adding], NON_EXISTENT) == {adding: NON_EXISTENT}
    assert h.context.partition_full_replica_assignment(TP) == ReplicaAssignment((2, 3), (), ())
    assert not h.context.has_replica_state(removing) and not h.context.has_replica_state(adding)
    no_requests(h)


# --- startup (§4.4) ---------------------------------------------------------------------------------


def test_startup() -> None:
    h = make_harness((1, 2, 3), topics={"t": {0: [1, 2, 3], 1: [2, 3]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.context.remove_live_brokers([3])  # broker 3 is dead at failover
    h.context.add_replicas_on_offline_dirs(2, [TP1])  # and broker 2 lost t-1's log dir

    h.replica_sm.startup()

    assert h.replica_states(h.context.replicas_for_partitions([TP, TP1])) == {
        PartitionReplica(TP, 1): ONLINE,
        PartitionReplica(TP, 2): ONLINE,
        PartitionReplica(TP, 3): OFFLINE,
        PartitionReplica(TP1, 2): OFFLINE,
        PartitionReplica(TP1, 3): OFFLINE,
    }
    # The ISR of t-0 loses the dead broker; t-1 has no leadership and nothing to shrink.
    assert h.stored_states([TP, TP1]) == {TP: lice(1, [1, 2], 6, 3), TP1: None}
    before = lai_state(TP, 1, [1, 2, 3], leader_epoch=5, partition_epoch=2, replicas=[1, 2, 3], is_new=False)
    after = lai_state(TP, 1, [1, 2], leader_epoch=6, partition_epoch=3, replicas=[1, 2, 3], is_new=False)
    lai = [(s.broker, s.request.partition_states) for s in h.channel.sent if s.request.api == "LeaderAndIsr"]
    assert lai == [(1, (before,)), (2, (before,)), (1, (after,)), (2, (after,))]
    # Online flush, then one flush for all offline replicas (broker 2 group, then broker 3 group).
    assert h.channel.order() == [
        ("LeaderAndIsr", 1), ("LeaderAndIsr", 2), ("UpdateMetadata", 1), ("UpdateMetadata", 2),
        ("LeaderAndIsr", 1), ("LeaderAndIsr", 2), ("UpdateMetadata", 1), ("UpdateMetadata", 2),
        ("StopReplica", 2),
    ]


def test_startup_makes_the_index_of_each_brokers_partitions() -> None:
    """The rust engine's startup reads its replicas, grouped by broker, from the index of each
    broker's partitions, so the first broker failure after a failover does not make it: finding
    a broker's partitions afterwards adds nothing to the engine's heap."""
    h = make_harness((1, 2, 3), engine="rust", topics={"t": {0: [1, 2, 3], 1: [3, 1], 2: [2, 1]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    native = h.context.native  # type: ignore[attr-defined]
    h.replica_sm.startup()
    made = native.heap_bytes()
    assert list(h.context.partitions_on_broker(1)) == [TP, TP1, TopicPartition("t", 2)]
    assert native.heap_bytes() == made


def test_unread_results_change_and_send_as_read_ones() -> None:
    """``results=False`` (what the rust engine's startup asks for) keeps none, and changes nothing
    else: the same states, store, requests and log lines, whatever the replicas' order and
    repeats (the engine groups them by broker itself)."""
    runs = []
    for results in (True, False):
        h = make_harness((1, 2, 3), engine="rust", topics={"t": {0: [1, 2, 3], 1: [3, 1], 2: [2, 1]}})
        h.write_state(TP, 1, [1, 2], leader_epoch=4, version=2)
        h.write_state(TP1, 3, [3, 1], leader_epoch=1, version=1)
        h.context.remove_live_brokers([2])
        replicas = [PartitionReplica(TopicPartition("t", p), b) for p, b in
                    ((1, 3), (0, 2), (0, 1), (1, 3), (2, 2), (0, 3), (2, 1), (1, 1), (0, 2))]
        for target in (NEW, ONLINE, OFFLINE):
            outcome = h.replica_sm.handle_state_changes(replicas, target, results=results)  # type: ignore[call-arg]
            assert len(outcome) > 0 if results else len(outcome) == 0
        states = h.replica_states([PartitionReplica(r.tp, r.broker) for r in replicas])
        runs.append((states, h.stored_states([TP, TP1]), [(s.broker, s.request) for s in h.channel.sent], h.log, h.batch_log))
    assert runs[0] == runs[1]
    assert runs[0][2] and runs[0][3]


def test_startup_marks_offline_replicas_ineligible_before_going_offline() -> None:
    h = make_harness((1, 2), topics={"t": {0: [1, 2]}})
    replica = PartitionReplica(TP, 2)
    h.context.remove_live_brokers([2])
    seen: list[ReplicaState] = []
    original = h.replica_sm.handle_state_changes

    def spy(replicas, target, election=None, **options):  # type: ignore[no-untyped-def]
        replicas = list(replicas)
        if replica in replicas:
            seen.append(h.context.replica_state(replica))
        return original(replicas, target, **options)

    h.replica_sm.handle_state_changes = spy  # type: ignore[method-assign]
    h.replica_sm.startup()
    assert seen == [INELIGIBLE]
    assert h.context.replica_state(replica) is OFFLINE
    assert h.context.replica_state(PartitionReplica(TP, 1)) is ONLINE
