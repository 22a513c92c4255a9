"""The partition state machine (reference §3), in the style of Kafka's PartitionStateMachineTest.

Each test sets up the context and the store a transition starts from, runs
``handle_state_changes`` and asserts the final states, the state-change log, the returned
results, what every broker was sent and what the store holds afterwards. The store is a real
MemoryStore, so versions, conditional writes and controller-epoch fencing are ZooKeeper's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from kctl.election import (
    ControlledShutdownElection,
    OfflineElection,
    PreferredElection,
    ReassignElection,
)
from kctl.errors import (
    ControllerMovedError,
    CorruptDataError,
    IllegalArgumentError,
    IllegalStateError,
    NoNodeError,
    StateChangeFailedError,
    StoreUnavailableError,
)
from kctl.model import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    PartitionState,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.requests import LeaderAndIsrPartitionState, UpdateMetadataPartitionState
from kctl.stores.paths import topic_config

from tests.support.statemachine_harness import (
    TP,
    ConcurrentWriterStore,
    FailingStore,
    Harness,
    lai_state,
    make_harness,
    prefix,
    um_state,
)

pytestmark = pytest.mark.usefixtures("engine")  # every test here runs on each engine

P = PartitionState
NON_EXISTENT, NEW, ONLINE, OFFLINE = P.NON_EXISTENT, P.NEW, P.ONLINE, P.OFFLINE
TP1, TP2, TP3 = TopicPartition("t", 1), TopicPartition("t", 2), TopicPartition("t", 3)
PREFIX = prefix()

# Reference §3.1, transcribed (not read from kctl.model).
VALID_PREVIOUS = {
    NEW: {NON_EXISTENT},
    ONLINE: {NEW, ONLINE, OFFLINE},
    OFFLINE: {NEW, ONLINE, OFFLINE},
    NON_EXISTENT: {OFFLINE},
}
KAFKA_NAMES = {NON_EXISTENT: "NonExistentPartition", NEW: "NewPartition", ONLINE: "OnlinePartition",
               OFFLINE: "OfflinePartition"}
IDS = {NON_EXISTENT: "non_existent", NEW: "new", ONLINE: "online", OFFLINE: "offline"}


def lice(leader: int, isr: Sequence[int], leader_epoch: int, version: int, controller_epoch: int = 1,
         recovery: LeaderRecoveryState = LeaderRecoveryState.RECOVERED) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, tuple(isr), leader_epoch, version, recovery),
                                       controller_epoch)


def to_all(states: Sequence[LeaderAndIsrPartitionState | UpdateMetadataPartitionState],
           brokers: Sequence[int] = (1, 2, 3)) -> dict[int, dict[TopicPartition, object]]:
    return {b: {s.tp: s for s in states} for b in brokers}


def no_requests(h: Harness) -> None:
    assert h.channel.sent == []
    pending = h.batch.pending()
    assert (pending.leader_and_isr, pending.stop_replica, pending.update_metadata_brokers) == ({}, {}, set())


# --- The transition matrix ------------------------------------------------------------------------


def setup_from_state(h: Harness, state: PartitionState) -> None:
    """Brokers 1-3 live, t-0 assigned [1, 2, 3], and what ``state`` implies in the store and context."""
    if state is NON_EXISTENT:
        return  # nothing recorded: the machine must register it as NonExistentPartition itself
    if state is ONLINE:
        h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    elif state is OFFLINE:
        h.write_state(TP, -1, [2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: state})


def matrix() -> list[object]:
    return [
        pytest.param(f, t, id=("" if f in VALID_PREVIOUS[t] else "invalid_") + f"{IDS[f]}_to_{IDS[t]}")
        for f in P
        for t in P
    ]


def test_matrix_covers_every_pair() -> None:
    ids = [p.id for p in matrix()]  # type: ignore[attr-defined]
    assert len(ids) == 16 == len(set(ids))
    assert sum(not i.startswith("invalid_") for i in ids) == 8
    assert "new_to_online" in ids and "invalid_online_to_new" in ids


@pytest.mark.parametrize(("from_state", "to_state"), matrix())
def test_transition(from_state: PartitionState, to_state: PartitionState) -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    setup_from_state(h, from_state)
    stored_before = h.stored(TP)
    h.reset_observations()

    result = h.partition_sm.handle_state_changes([TP], to_state, OfflineElection())

    # Whatever happened, the batch was flushed.
    pending = h.batch.pending()
    assert (pending.leader_and_isr, pending.stop_replica, pending.update_metadata_brokers) == ({}, {}, set())
    assert h.context.has_partition_state(TP)
    from_name, to_name = KAFKA_NAMES[from_state], KAFKA_NAMES[to_state]

    if from_state not in VALID_PREVIOUS[to_state]:
        assert h.context.partition_state(TP) is from_state
        assert result == {}
        assert h.channel.sent == []
        assert h.stored(TP) == stored_before
        [line] = h.log
        m = re.fullmatch(
            rf"ERROR {re.escape(PREFIX)} Controller 0 epoch 1 failed to change state for partition t-0 from "
            rf"{from_name} to {to_name}: IllegalStateError: Partition t-0 should be in one of (\S+) states before "
            rf"moving to {to_name} state\. Instead it is in {from_name} state",
            line,
        )
        assert m is not None, line
        assert set(m.group(1).split(",")) == {KAFKA_NAMES[s] for s in VALID_PREVIOUS[to_state]}
        return

    assert h.context.partition_state(TP) is to_state
    if to_state is not ONLINE:
        # → New / Offline / NonExistent: record the state only.
        assert result == {}
        assert h.channel.sent == []
        assert h.stored(TP) == stored_before
        if to_state is NEW:
            assert h.log == [f"INFO {PREFIX} Changed partition t-0 state from {from_name} to {to_name} "
                             "with assigned replicas 1,2,3"]
        else:
            assert h.log == [f"TRACE {PREFIX} Changed partition t-0 state from {from_name} to {to_name}"]
        return

    if from_state is NEW:  # initialisation: leader = first live replica, ISR = live replicas, isNew
        leader, isr, epoch, version, is_new = 1, [1, 2, 3], 0, 0, True
        assert result == {}  # not an election
    elif from_state is ONLINE:  # same leader re-elected: the epoch still moves on
        leader, isr, epoch, version, is_new = 1, [1, 2, 3], 6, 3, False
        assert result == {TP: LeaderAndIsr(1, (1, 2, 3), 6, 3)}
    else:
        leader, isr, epoch, version, is_new = 2, [2, 3], 6, 3, False
        assert result == {TP: LeaderAndIsr(2, (2, 3), 6, 3)}
    assert h.stored(TP) == lice(leader, isr, epoch, version)
    assert h.context.partition_leadership(TP) == lice(leader, isr, epoch, version)
    assert h.channel.order() == [("LeaderAndIsr", 1), ("LeaderAndIsr", 2), ("LeaderAndIsr", 3),
                                 ("UpdateMetadata", 1), ("UpdateMetadata", 2), ("UpdateMetadata", 3)]
    assert h.channel.leader_and_isr() == to_all(
        [lai_state(TP, leader, isr, leader_epoch=epoch, partition_epoch=version, replicas=[1, 2, 3], is_new=is_new)]
    )
    assert h.channel.update_metadata() == to_all(
        [um_state(TP, leader, isr, leader_epoch=epoch, partition_epoch=version, replicas=[1, 2, 3])]
    )
    isr_text = ", ".join(map(str, isr))
    assert h.log == [f"INFO {PREFIX} Changed partition t-0 from {from_name} to OnlinePartition with state "
                     f"LeaderAndIsr(leader={leader}, leaderEpoch={epoch}, isr=List({isr_text}), zkVersion={version})"]


def test_valid_and_invalid_partitions_in_one_call() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}})
    h.write_state(TP1, 2, [2, 3, 1], leader_epoch=1, version=1)
    h.set_partition_states({TP: NEW, TP1: ONLINE})
    result = h.partition_sm.handle_state_changes([TP, TP1], NEW)
    assert result == {}
    assert h.partition_states([TP, TP1]) == {TP: NEW, TP1: ONLINE}
    assert len(h.errors()) == 2
    h.reset_observations()
    result = h.partition_sm.handle_state_changes([TP1, TP], OFFLINE)
    assert h.partition_states([TP, TP1]) == {TP: OFFLINE, TP1: OFFLINE}
    assert h.channel.sent == [] and result == {}
    assert h.log == [f"TRACE {PREFIX} Changed partition t-1 state from OnlinePartition to OfflinePartition",
                     f"TRACE {PREFIX} Changed partition t-0 state from NewPartition to OfflinePartition"]


def test_empty_input_does_nothing() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.batch.add_update_metadata_request_for_brokers([1])  # a pending batch would make new_batch throw
    assert h.partition_sm.handle_state_changes([], ONLINE) == {}
    assert h.channel.sent == [] and h.log == []


def test_unexpected_error_becomes_every_partitions_result() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [1, 2, 3]}})
    h.set_partition_states({TP: NEW, TP1: NEW})
    h.batch.add_update_metadata_request_for_brokers([1])  # left over: new_batch throws
    result = h.partition_sm.handle_state_changes([TP, TP1], ONLINE, OfflineElection())
    assert set(result) == {TP, TP1}
    assert all(isinstance(e, IllegalStateError) for e in result.values())
    assert h.partition_states([TP, TP1]) == {TP: NEW, TP1: NEW}
    assert h.stored_states([TP, TP1]) == {TP: None, TP1: None}


def test_election_strategy_is_mandatory_for_elections() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    before = h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: OFFLINE})
    result = h.partition_sm.handle_state_changes([TP], ONLINE)
    assert isinstance(result[TP], IllegalArgumentError)
    assert h.context.partition_state(TP) is OFFLINE
    assert h.stored(TP) == before
    no_requests(h)


# --- NewPartition → OnlinePartition (initialisation) ------------------------------------------------


def test_new_to_online_uses_live_replicas_in_assignment_order() -> None:
    h = make_harness((1, 2, 3, 4), shutting_down=[3], topics={"t": {0: [3, 4, 1, 2]}})
    h.context.add_replicas_on_offline_dirs(1, [TP])
    h.context.remove_live_brokers([2])
    h.set_partition_states({TP: NEW})
    h.partition_sm.handle_state_changes([TP], ONLINE)
    # 3 is shutting down, 1 has the partition on an offline dir, 2 is dead: only 4 is online.
    assert h.stored(TP) == lice(4, [4], 0, 0)
    assert h.context.partition_state(TP) is ONLINE
    expected = lai_state(TP, 4, [4], leader_epoch=0, partition_epoch=0, replicas=[3, 4, 1, 2], is_new=True)
    assert h.channel.leader_and_isr() == {4: {TP: expected}}  # only ISR members get LeaderAndIsr
    # UpdateMetadata goes to every registered broker, the shutting-down one included.
    um = um_state(TP, 4, [4], leader_epoch=0, partition_epoch=0, replicas=[3, 4, 1, 2], offline=[3, 1, 2])
    assert h.channel.update_metadata() == to_all([um], (1, 3, 4))


def test_new_to_online_without_live_replica_stays_new() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [4, 5]}})
    h.set_partition_states({TP: NEW, TP1: NEW})
    result = h.partition_sm.handle_state_changes([TP1, TP], ONLINE)
    assert result == {}
    assert h.partition_states([TP, TP1]) == {TP: ONLINE, TP1: NEW}
    assert h.stored_states([TP, TP1]) == {TP: lice(1, [1, 2, 3], 0, 0), TP1: None}
    assert h.context.partition_leadership(TP1) is None
    assert h.errors() == [
        f"ERROR {PREFIX} Controller 0 epoch 1 failed to change state for partition t-1 from NewPartition to "
        "OnlinePartition: StateChangeFailedError: Controller 0 epoch 1 encountered error during state change of "
        "partition t-1 from New to Online, assigned replicas are [4,5], live brokers are [1,2,3]. "
        "No assigned replica is alive."
    ]
    assert all(set(states) == {TP} for states in h.channel.leader_and_isr().values())
    assert all(set(states) == {TP} for states in h.channel.update_metadata().values())


def test_new_to_online_create_node_exists_stays_new() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}})
    leftover = h.write_state(TP1, 3, [3], leader_epoch=7, version=1, cache=False)
    h.set_partition_states({TP: NEW, TP1: NEW})
    result = h.partition_sm.handle_state_changes([TP, TP1], ONLINE)
    assert result == {}
    assert h.partition_states([TP, TP1]) == {TP: ONLINE, TP1: NEW}
    assert h.stored(TP1) == leftover  # untouched
    assert h.context.partition_leadership(TP1) is None
    [error] = h.errors()
    assert error.startswith(f"ERROR {PREFIX} Controller 0 epoch 1 failed to change state for partition t-1 from "
                            "NewPartition to OnlinePartition: NodeExistsError: ")
    assert all(set(states) == {TP} for states in h.channel.leader_and_isr().values())


def test_new_to_online_create_throwing_keeps_every_partition_new() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}})
    h.set_partition_states({TP: NEW, TP1: NEW})
    h.partition_sm.store = FailingStore(h.store, StoreUnavailableError("connection lost"), "create_partition_states")
    result = h.partition_sm.handle_state_changes([TP, TP1], ONLINE)
    assert result == {}
    assert h.partition_states([TP, TP1]) == {TP: NEW, TP1: NEW}
    assert h.stored_states([TP, TP1]) == {TP: None, TP1: None}
    # Kafka logs these with NewPartition as the target state.
    assert h.errors() == [
        f"ERROR {PREFIX} Controller 0 epoch 1 failed to change state for partition {tp} from NewPartition to "
        "NewPartition: StoreUnavailableError: connection lost"
        for tp in (TP, TP1)
    ]
    no_requests(h)


def test_new_to_online_fenced_create_raises_controller_moved() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.set_partition_states({TP: NEW})
    h.another_controller_takes_over()
    with pytest.raises(ControllerMovedError):
        h.partition_sm.handle_state_changes([TP], ONLINE)
    assert h.context.partition_state(TP) is NEW
    assert h.stored(TP) is None
    assert h.channel.sent == []


# --- Online/Offline → OnlinePartition (elections) ----------------------------------------------------


def test_offline_to_online_with_dead_leader() -> None:
    """Kafka's testOfflinePartitionToOnlinePartitionTransition, with a real store."""
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.context.remove_live_brokers([1])
    h.set_partition_states({TP: OFFLINE})
    result = h.partition_sm.handle_state_changes([TP], ONLINE, OfflineElection())
    assert result == {TP: LeaderAndIsr(2, (2, 3), 6, 3)}
    assert h.stored(TP) == lice(2, [2, 3], 6, 3)
    expected = lai_state(TP, 2, [2, 3], leader_epoch=6, partition_epoch=3, replicas=[1, 2, 3], is_new=False)
    assert h.channel.leader_and_isr() == to_all([expected], (2, 3))
    um = um_state(TP, 2, [2, 3], leader_epoch=6, partition_epoch=3, replicas=[1, 2, 3], offline=[1])
    assert h.channel.update_metadata() == to_all([um], (2, 3))


def test_online_to_online_with_preferred_strategy() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, 2, [1, 2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: ONLINE})
    result = h.partition_sm.handle_state_changes([TP], ONLINE, PreferredElection())
    assert result == {TP: LeaderAndIsr(1, (1, 2, 3), 6, 3)}
    assert h.stored(TP) == lice(1, [1, 2, 3], 6, 3)
    assert set(h.channel.leader_and_isr()) == {1, 2, 3}


def test_online_to_online_with_controlled_shutdown_strategy() -> None:
    h = make_harness(shutting_down=[1], topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: ONLINE})
    result = h.partition_sm.handle_state_changes([TP], ONLINE, ControlledShutdownElection())
    assert result == {TP: LeaderAndIsr(2, (2, 3), 6, 3)}
    assert h.stored(TP) == lice(2, [2, 3], 6, 3)
    # The shutting-down broker is told too.
    assert set(h.channel.leader_and_isr()) == {1, 2, 3}


def test_online_to_online_with_reassign_strategy() -> None:
    h = make_harness((1, 2, 3, 4), topics={"t": {0: ReplicaAssignment((1, 2)).reassign_to((4, 3))}})
    h.write_state(TP, 1, [1, 2, 3, 4], leader_epoch=5, version=2)
    h.set_partition_states({TP: ONLINE})
    result = h.partition_sm.handle_state_changes([TP], ONLINE, ReassignElection())
    assert result == {TP: LeaderAndIsr(4, (1, 2, 3, 4), 6, 3)}
    assert h.channel.leader_and_isr() == to_all(
        [lai_state(TP, 4, [1, 2, 3, 4], leader_epoch=6, partition_epoch=3, replicas=[4, 3, 1, 2], adding=[4, 3],
                   removing=[1, 2], is_new=False)],
        (4, 3),
    )


def test_election_missing_state_znode() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [1, 2, 3]}})
    h.write_state(TP1, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: OFFLINE, TP1: OFFLINE})
    result = h.partition_sm.handle_state_changes([TP, TP1], ONLINE, OfflineElection())
    assert isinstance(result[TP], StateChangeFailedError)
    assert str(result[TP]) == "LeaderAndIsr information doesn't exist for partition t-0 in OfflinePartition state"
    assert result[TP1] == LeaderAndIsr(1, (1, 2, 3), 6, 3)
    assert h.partition_states([TP, TP1]) == {TP: OFFLINE, TP1: ONLINE}
    assert h.stored(TP) is None
    assert h.errors() == [
        f"ERROR {PREFIX} Controller 0 epoch 1 failed to change state for partition t-0 from OfflinePartition to "
        f"OnlinePartition: StateChangeFailedError: {result[TP]}"
    ]
    assert all(set(states) == {TP1} for states in h.channel.leader_and_isr().values())


def test_election_aborted_when_a_newer_controller_wrote_the_state() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    before = h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2, controller_epoch=2)
    h.set_partition_states({TP: ONLINE})
    result = h.partition_sm.handle_state_changes([TP], ONLINE, PreferredElection())
    assert isinstance(result[TP], StateChangeFailedError)
    assert "already written by another controller" in str(result[TP])
    assert "another controller was elected with epoch 2" in str(result[TP])
    assert h.stored(TP) == before
    assert h.context.partition_state(TP) is ONLINE
    assert len(h.errors()) == 1
    no_requests(h)


def test_election_with_corrupt_state_znode() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.store.tree.set_raw("/brokers/topics/t/partitions/0/state", "not a state")
    h.set_partition_states({TP: OFFLINE})
    result = h.partition_sm.handle_state_changes([TP], ONLINE, OfflineElection())
    assert isinstance(result[TP], CorruptDataError)
    assert h.context.partition_state(TP) is OFFLINE
    no_requests(h)


def test_election_read_failure_fails_every_partition_without_retry() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [1, 2, 3]}})
    for tp in (TP, TP1):
        h.write_state(tp, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: OFFLINE, TP1: OFFLINE})
    failing = FailingStore(h.store, StoreUnavailableError("connection lost"), "get_partition_states")
    h.partition_sm.store = failing
    result = h.partition_sm.handle_state_changes([TP, TP1], ONLINE, OfflineElection())
    assert set(result) == {TP, TP1}
    assert all(isinstance(e, StoreUnavailableError) for e in result.values())
    assert h.partition_states([TP, TP1]) == {TP: OFFLINE, TP1: OFFLINE}
    assert len(h.errors()) == 2
    no_requests(h)


def test_no_eligible_leader() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    before = h.write_state(TP, 1, [1], leader_epoch=5, version=2)
    h.context.remove_live_brokers([1])
    h.set_partition_states({TP: OFFLINE})
    result = h.partition_sm.handle_state_changes([TP], ONLINE, OfflineElection())
    assert isinstance(result[TP], StateChangeFailedError)
    assert str(result[TP]) == (
        "Failed to elect leader for partition t-0 under strategy OfflinePartitionLeaderElectionStrategy(false)"
    )
    assert h.stored(TP) == before
    assert h.context.partition_state(TP) is OFFLINE
    assert h.errors() == [
        f"ERROR {PREFIX} Controller 0 epoch 1 failed to change state for partition t-0 from OfflinePartition to "
        f"OnlinePartition: StateChangeFailedError: {result[TP]}"
    ]
    no_requests(h)


@pytest.mark.parametrize(
    ("strategy", "name"),
    [(PreferredElection(), "PreferredReplicaPartitionLeaderElectionStrategy"),
     (ReassignElection(), "ReassignPartitionLeaderElectionStrategy"),
     (ControlledShutdownElection(), "ControlledShutdownPartitionLeaderElectionStrategy")],
)
def test_no_eligible_leader_names_the_strategy(strategy: object, name: str) -> None:
    h = make_harness(shutting_down=[1, 2, 3], topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, 1, [1], leader_epoch=5, version=2)
    h.set_partition_states({TP: ONLINE})
    result = h.partition_sm.handle_state_changes([TP], ONLINE, strategy)  # type: ignore[arg-type]
    assert str(result[TP]) == f"Failed to elect leader for partition t-0 under strategy {name}"


def test_badversion_is_retried_with_the_concurrently_written_state() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.write_state(TP1, 2, [2, 3, 1], leader_epoch=4, version=1)
    h.context.remove_live_brokers([1])
    h.set_partition_states({TP: OFFLINE, TP1: ONLINE})
    # Between the controller's read and its write, leader 1 shrinks t-0's ISR to [1, 3].
    store = ConcurrentWriterStore(h.store, h.concurrent_state_write(TP, 1, [1, 3]))
    h.partition_sm.store = store

    result = h.partition_sm.handle_state_changes([TP, TP1], ONLINE, OfflineElection())

    # First attempt: t-1 written, t-0 BADVERSION; the retry re-reads t-0 (version 3, ISR [1, 3]).
    assert [sorted(r.successful) for r in store.update_results] == [[TP1], [TP]]
    assert store.update_results[0].to_retry == [TP]
    assert result == {TP: LeaderAndIsr(3, (3,), 6, 4), TP1: LeaderAndIsr(2, (2, 3), 5, 2)}
    assert h.stored_states([TP, TP1]) == {TP: lice(3, [3], 6, 4), TP1: lice(2, [2, 3], 5, 2)}
    assert h.partition_states([TP, TP1]) == {TP: ONLINE, TP1: ONLINE}
    assert h.errors() == []
    assert h.channel.leader_and_isr() == {
        b: {
            TP: lai_state(TP, 3, [3], leader_epoch=6, partition_epoch=4, replicas=[1, 2, 3], is_new=False),
            TP1: lai_state(TP1, 2, [2, 3], leader_epoch=5, partition_epoch=2, replicas=[2, 3, 1], is_new=False),
        }
        for b in (2, 3)
    }


def test_election_write_failure_other_than_badversion_fails_that_partition() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [1, 2, 3]}})
    for tp in (TP, TP1):
        h.write_state(tp, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: OFFLINE, TP1: OFFLINE})

    def delete_t0_state() -> None:  # the znode disappears between the read and the write
        with h.store.tree.transaction() as txn:
            txn.delete("/brokers/topics/t/partitions/0/state")

    h.partition_sm.store = ConcurrentWriterStore(h.store, delete_t0_state)
    result = h.partition_sm.handle_state_changes([TP, TP1], ONLINE, OfflineElection())
    assert isinstance(result[TP], NoNodeError)
    assert result[TP1] == LeaderAndIsr(1, (1, 2, 3), 6, 3)
    assert h.partition_states([TP, TP1]) == {TP: OFFLINE, TP1: ONLINE}
    assert h.context.partition_leadership(TP) == lice(1, [1, 2, 3], 5, 2)  # cache untouched
    assert len(h.errors()) == 1 and "NoNodeError" in h.errors()[0]
    assert all(set(states) == {TP1} for states in h.channel.leader_and_isr().values())


def test_fenced_election_write_raises_controller_moved() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    before = h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: OFFLINE})
    new_epoch = h.another_controller_takes_over()
    assert new_epoch == (2, 2)
    with pytest.raises(ControllerMovedError):
        h.partition_sm.handle_state_changes([TP], ONLINE, OfflineElection())
    assert h.stored(TP) == before
    assert h.context.partition_state(TP) is OFFLINE
    assert h.channel.sent == []


def test_online_to_offline_sends_nothing_then_offline_to_online_does() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: ONLINE})
    h.context.remove_live_brokers([1])
    assert h.partition_sm.handle_state_changes([TP], OFFLINE) == {}
    assert h.channel.sent == []
    assert h.context.offline_partition_count == 1
    result = h.partition_sm.handle_state_changes([TP], ONLINE, OfflineElection())
    assert result == {TP: LeaderAndIsr(2, (2, 3), 6, 3)}
    assert set(h.channel.leader_and_isr()) == {2, 3}
    assert h.context.offline_partition_count == 0


# --- Unclean leader election per topic config (§2.3) ------------------------------------------------


def unclean_harness(broker_default: bool, topic_value: str | None, ibp: str | None = None) -> Harness:
    config: dict[str, object] = {"unclean.leader.election.enable": broker_default}
    if ibp is not None:
        config["inter.broker.protocol.version"] = ibp
    h = make_harness(config=config)
    h.create_topic("t", {0: [1, 2, 3]},
                   config=None if topic_value is None else {"unclean.leader.election.enable": topic_value})
    h.write_state(TP, 1, [1], leader_epoch=5, version=2)
    h.context.remove_live_brokers([1])
    h.set_partition_states({TP: OFFLINE})
    return h


@pytest.mark.parametrize(
    ("broker_default", "topic_value", "unclean"),
    [(False, "true", True), (True, "false", False), (True, None, True), (False, None, False)],
    ids=["topic_true_overrides", "topic_false_overrides", "broker_default_true", "broker_default_false"],
)
def test_unclean_election_follows_topic_config(broker_default: bool, topic_value: str | None, unclean: bool) -> None:
    h = unclean_harness(broker_default, topic_value)
    result = h.partition_sm.trigger_online_partition_state_change()
    if unclean:
        assert result == {TP: LeaderAndIsr(2, (2,), 6, 3)}
        assert h.stored(TP) == lice(2, [2], 6, 3)
        assert h.context.partition_state(TP) is ONLINE
        assert h.context.unclean_leader_elections == 1
        assert set(h.channel.leader_and_isr()) == {2, 3}
    else:
        assert isinstance(result[TP], StateChangeFailedError)
        assert "Failed to elect leader for partition t-0" in str(result[TP])
        assert h.stored(TP) == lice(1, [1], 5, 2)
        assert h.context.partition_state(TP) is OFFLINE
        assert h.context.unclean_leader_elections == 0
        no_requests(h)


def test_unclean_election_marks_recovering_with_ibp_3_2() -> None:
    h = unclean_harness(True, None, ibp="3.2")
    result = h.partition_sm.trigger_online_partition_state_change()
    assert result == {TP: LeaderAndIsr(2, (2,), 6, 3, LeaderRecoveryState.RECOVERING)}
    assert h.stored(TP) == lice(2, [2], 6, 3, recovery=LeaderRecoveryState.RECOVERING)
    states = h.channel.leader_and_isr()[2]
    assert states[TP].leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_corrupt_topic_config_value_fails_that_partition_only() -> None:
    h = make_harness()
    h.create_topic("t", {0: [1, 2, 3]}, config={"unclean.leader.election.enable": "maybe"})
    h.create_topic("u", {0: [1, 2, 3]}, config={"unclean.leader.election.enable": "true"})
    u0 = TopicPartition("u", 0)
    for tp in (TP, u0):
        h.write_state(tp, 1, [1], leader_epoch=5, version=2)
    h.context.remove_live_brokers([1])
    h.set_partition_states({TP: OFFLINE, u0: OFFLINE})
    result = h.partition_sm.trigger_online_partition_state_change()
    assert isinstance(result[TP], StateChangeFailedError)
    assert result[u0] == LeaderAndIsr(2, (2,), 6, 3)
    assert h.partition_states([TP, u0]) == {TP: OFFLINE, u0: ONLINE}
    assert h.stored(TP) == lice(1, [1], 5, 2)
    errors = h.errors()
    assert len(errors) == 2  # the config problem, then the failed election
    assert errors[0].startswith(f"ERROR {PREFIX} Controller 0 epoch 1 failed to change state for partition t-0 "
                                "from OfflinePartition to OnlinePartition: ")
    assert "'maybe'" in errors[0] and "unclean.leader.election.enable" in errors[0]
    assert errors[1].endswith("Failed to elect leader for partition t-0 under strategy "
                              "OfflinePartitionLeaderElectionStrategy(false)")


def test_unreadable_topic_config_fails_the_election() -> None:
    h = make_harness()
    h.create_topic("t", {0: [1, 2, 3]})
    h.store.tree.set_raw(topic_config("t"), ["not", "a", "config"])
    h.write_state(TP, 1, [1], leader_epoch=5, version=2)
    h.context.remove_live_brokers([1])
    h.set_partition_states({TP: OFFLINE})
    result = h.partition_sm.trigger_online_partition_state_change()
    assert isinstance(result[TP], StateChangeFailedError)
    assert "CorruptDataError" in h.errors()[0]
    assert h.context.partition_state(TP) is OFFLINE


def test_topic_config_not_consulted_when_a_live_isr_member_exists() -> None:
    h = make_harness()
    h.create_topic("t", {0: [1, 2, 3]}, config={"unclean.leader.election.enable": "garbage"})
    h.write_state(TP, 1, [1, 3], leader_epoch=5, version=2)
    h.context.remove_live_brokers([1])
    h.set_partition_states({TP: OFFLINE})
    assert h.partition_sm.trigger_online_partition_state_change() == {TP: LeaderAndIsr(3, (3,), 6, 3)}
    assert h.errors() == []


def test_allow_unclean_strategy_ignores_topic_config() -> None:
    h = unclean_harness(False, "false")
    result = h.partition_sm.handle_state_changes([TP], ONLINE, OfflineElection(allow_unclean=True))
    assert result == {TP: LeaderAndIsr(2, (2,), 6, 3)}
    assert h.context.unclean_leader_elections == 1


# --- trigger_online_partition_state_change and startup (§3.4) --------------------------------------


def test_trigger_online_partition_state_change_skips_topics_queued_for_deletion() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [1, 2, 3], 2: [1, 2, 3], 3: [1, 2, 3]}, "d": {0: [1, 2, 3]}})
    d0 = TopicPartition("d", 0)
    h.write_state(TP1, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.write_state(TP2, 2, [2, 3], leader_epoch=5, version=2)
    h.write_state(d0, 1, [1, 2, 3], leader_epoch=5, version=2)
    h.set_partition_states({TP: NEW, TP1: OFFLINE, TP2: ONLINE, TP3: NON_EXISTENT, d0: OFFLINE})
    h.context.queue_topic_deletion(["d"])
    result = h.partition_sm.trigger_online_partition_state_change()
    assert result == {TP1: LeaderAndIsr(1, (1, 2, 3), 6, 3)}  # TP was initialised, not elected
    assert h.partition_states([TP, TP1, TP2, TP3, d0]) == {
        TP: ONLINE, TP1: ONLINE, TP2: ONLINE, TP3: NON_EXISTENT, d0: OFFLINE
    }
    assert h.stored(TP2) == lice(2, [2, 3], 5, 2)  # online partitions are left alone
    assert h.stored(d0) == lice(1, [1, 2, 3], 5, 2)
    assert set(h.channel.leader_and_isr()[1]) == {TP, TP1}


def test_trigger_online_partition_state_change_for_one_topic() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3]}, "u": {0: [1, 2, 3]}})
    u0 = TopicPartition("u", 0)
    h.set_partition_states({TP: NEW, u0: NEW})
    h.partition_sm.trigger_online_partition_state_change("u")
    assert h.partition_states([TP, u0]) == {TP: NEW, u0: ONLINE}


def test_startup() -> None:
    h = make_harness((1, 2, 3, 4), shutting_down=[4],
                     topics={"t": {0: [1, 2], 1: [5, 2], 2: [3, 1], 3: [4, 3]}, "d": {0: [5, 1]}})
    d0 = TopicPartition("d", 0)
    h.write_state(TP, 1, [1, 2], leader_epoch=1, version=1)  # leader online → Online, untouched
    h.write_state(TP1, 5, [5, 2], leader_epoch=1, version=1)  # leader dead → Offline → elected
    # TP2: no leadership → New → initialised.
    h.write_state(TP3, 4, [4, 3], leader_epoch=1, version=1)  # leader shutting down → Offline → elected
    h.write_state(d0, 5, [5, 1], leader_epoch=1, version=1)  # queued for deletion → stays Offline
    h.context.queue_topic_deletion(["d"])

    h.partition_sm.startup()

    assert h.partition_states([TP, TP1, TP2, TP3, d0]) == {TP: ONLINE, TP1: ONLINE, TP2: ONLINE, TP3: ONLINE,
                                                           d0: OFFLINE}
    assert h.stored_states([TP, TP1, TP2, TP3, d0]) == {
        TP: lice(1, [1, 2], 1, 1),
        TP1: lice(2, [2], 2, 2),
        TP2: lice(3, [3, 1], 0, 0),
        TP3: lice(3, [3], 2, 2),
        d0: lice(5, [5, 1], 1, 1),
    }
    assert h.context.offline_partition_count == 1
    assert h.channel.leader_and_isr() == {
        1: {TP2: lai_state(TP2, 3, [3, 1], leader_epoch=0, partition_epoch=0, replicas=[3, 1], is_new=True)},
        2: {TP1: lai_state(TP1, 2, [2], leader_epoch=2, partition_epoch=2, replicas=[5, 2], is_new=False)},
        3: {TP2: lai_state(TP2, 3, [3, 1], leader_epoch=0, partition_epoch=0, replicas=[3, 1], is_new=True),
            TP3: lai_state(TP3, 3, [3], leader_epoch=2, partition_epoch=2, replicas=[4, 3], is_new=False)},
    }
