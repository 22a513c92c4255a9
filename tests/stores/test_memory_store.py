"""MemoryStore: the store contract, plus what only the embedded store has (the tree, history, set_raw)."""

from __future__ import annotations

import gc
import random
import threading
import tracemalloc
from collections.abc import Callable, Mapping
from types import MappingProxyType

import pytest

from kctl.errors import (
    ControllerMovedError,
    CorruptDataError,
    IllegalStateError,
    NodeExistsError,
    NoNodeError,
    StoreError,
    StoreUnavailableError,
)
from kctl._engine import StateTable
from kctl.model import INT32_MAX, LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState, ReplicaAssignment, TopicPartition
from kctl.plugins import PluginHost
from kctl.stores import (
    MATCH_ANY_VERSION,
    ChangeType,
    MemoryStore,
    MemoryTree,
    PartitionSnapshot,
    StateStore,
    TopicAssignment,
    WatchEvent,
    WatchKind,
)
from kctl.stores import paths
from kctl.stores.base import UpdateResult
from kctl.stores.kafkazk import KafkaZkClient
from kctl.stores.memtree import TreeClient
from kctl.stores.znode import Failure, Op, Stat
from kctl.testing.store_contract import ASSIGNMENT, T0, T1, T2, Recorder, StoreContract, broker, state

GARBAGE = b"\x00not an object any reader accepts"


class TestMemoryStoreContract(StoreContract):
    @pytest.fixture
    def tree(self) -> MemoryTree:
        return MemoryTree()

    @pytest.fixture
    def store_factory(self, tree: MemoryTree) -> Callable[[], StateStore]:
        return lambda: MemoryStore(tree)

    @pytest.fixture
    def corrupt_node(self, tree: MemoryTree) -> Callable[[str], None]:
        return lambda path: tree.set_raw(path, GARBAGE)

    @pytest.fixture
    def expire_session(self) -> Callable[[MemoryStore], None]:
        return MemoryStore.expire_session

    @pytest.fixture
    def reconnect_session(self) -> Callable[[MemoryStore], None]:
        return MemoryStore.reconnect


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(MemoryTree(record_history=True))


def snapshot(
    replicas: tuple[int, ...],
    leader: int = -1,
    leader_epoch: int = -1,
    isr: tuple[int, ...] = (),
    adding: tuple[int, ...] = (),
    removing: tuple[int, ...] = (),
) -> PartitionSnapshot:
    """A history row; its state, when it has one, was written by the controller of epoch 1."""
    return PartitionSnapshot(replicas, adding, removing, leader, leader_epoch, isr, 1 if isr else -1)


# --- The tree ------------------------------------------------------------------------------------


def test_persistent_paths_exist_from_the_start() -> None:
    with MemoryTree().transaction() as txn:
        assert all(txn.get(path) is not None for path in paths.PERSISTENT_PATHS)
        assert txn.children("/brokers") == ["ids", "seqid", "topics"]


def test_a_failed_transaction_leaves_no_trace() -> None:
    tree = MemoryTree()
    zxid = tree.zxid
    with pytest.raises(NodeExistsError), tree.transaction() as txn:
        txn.create("/a")
        txn.create("/a/b", 1)
        txn.set("/a/b", 2)
        txn.create("/a/seq-", sequential=True)
        txn.delete(paths.ISR_CHANGE_NOTIFICATION)
        txn.create("/a")
    assert tree.zxid == zxid
    with tree.transaction() as txn:
        assert txn.get("/a") is None
        assert txn.get(paths.ISR_CHANGE_NOTIFICATION) is not None
        assert txn.create("/seq-", sequential=True) == "/seq-0000000000"


def test_versions_and_zxids() -> None:
    tree = MemoryTree()
    with tree.transaction() as txn:
        txn.create("/a", "x")
        txn.create("/b")
    created = tree.zxid
    with tree.transaction() as txn:
        assert txn.get("/a") == ("x", (0, created, created, 0))
    assert tree.zxid == created  # reads commit nothing
    with tree.transaction() as txn:
        assert txn.set("/a", "y", 0) == 1
        with pytest.raises(StoreError):
            txn.check("/a", 0)
    assert tree.zxid == created + 1
    with tree.transaction() as txn:
        assert txn.get("/a") == ("y", (1, created, created + 1, 0))
        assert txn.get("/b") == (None, (0, created, created, 0))


def test_changes_since_a_zxid() -> None:
    """Topics and partition states written after a zxid, by Python transactions and by the
    native table alike; an aborted write is not a change."""
    a0, b0 = TopicPartition("a", 0), TopicPartition("b", 0)
    store = MemoryStore()
    epoch, version = store.register_controller_and_increment_epoch(1)
    store.create_topic("a", {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))})
    store.create_topic("b", {0: ReplicaAssignment((1,))})
    assert set(store.create_partition_states({a0: state(1, (1, 2)), b0: state(1, (1,))}, version).values()) == {None}
    start = store.tree.zxid
    assert store.changes_since(start) == (start, [], [])
    assert store.update_partition_states({a0: LeaderAndIsr(2, (2,), 1, 0)}, epoch, version).successful
    store.set_topic_assignment("b", TopicAssignment({0: ReplicaAssignment((1, 2))}), version)
    with pytest.raises(NodeExistsError), store.tree.transaction() as txn:
        txn.set(paths.partition_state(b0), state(2, (2,)))
        txn.create(paths.topic("a"))
    zxid, topics, partitions = store.changes_since(start)
    assert (zxid, topics, partitions) == (store.tree.zxid, ["b"], [("a", 0)])
    assert store.changes_since(-1)[1:] == (["a", "b"], [("a", 0), ("b", 0)])
    store.delete_topic("b", version)
    assert store.changes_since(zxid)[1:] == ([], [])  # deleted znodes are not listed


def test_tree_operations_refuse_what_zookeeper_refuses() -> None:
    tree = MemoryTree()
    store = MemoryStore(tree)
    store.register_broker(broker(1))
    with tree.transaction() as txn:
        with pytest.raises(NoNodeError):
            txn.create("/missing/child")
        with pytest.raises(StoreError, match="has children"):
            txn.delete("/brokers")
        with pytest.raises(StoreError, match="ephemeral"):
            txn.create("/brokers/ids/1/child")
        with pytest.raises(StoreError, match="outside a session"):
            txn.create("/e", ephemeral=True)
        with pytest.raises(StoreError, match="invalid path"):
            txn.create("relative")


def test_sequence_numbers_count_per_parent() -> None:
    store = MemoryStore()
    assert store.create_isr_change_notification([T0]) == "isr_change_0000000000"
    assert store.create_log_dir_event_notification(1) == "log_dir_event_0000000000"
    assert store.create_isr_change_notification([T0]) == "isr_change_0000000001"
    store.delete_isr_change_notifications(store.get_isr_change_notifications(), MATCH_ANY_VERSION)
    assert store.create_isr_change_notification([T0]) == "isr_change_0000000002"


def test_broker_epoch_is_the_czxid() -> None:
    store = MemoryStore()
    epoch = store.register_broker(broker(1))
    with store.tree.transaction() as txn:
        found = txn.get(paths.broker(1))
    assert found is not None
    assert found[1].czxid == epoch and found[1].ephemeral_owner == store.session_id


def test_seeded_trees_have_the_same_cluster_id() -> None:
    ids = {MemoryStore(MemoryTree(rng=random.Random(7))).get_or_create_cluster_id() for _ in range(2)}
    assert len(ids) == 1
    assert MemoryStore(MemoryTree(rng=random.Random(8))).get_or_create_cluster_id() not in ids


# --- Sessions and listeners ----------------------------------------------------------------------


def test_listeners_run_in_session_then_registration_order() -> None:
    tree = MemoryTree()
    sessions = [MemoryStore(tree) for _ in range(3)]
    calls: list[tuple[int, int]] = []
    def listener(session: int, rank: int) -> Callable[[WatchEvent], None]:
        return lambda event: calls.append((session, rank))

    for index in (2, 0, 1):  # the order sessions register in does not matter; creation order does
        sessions[index].add_listener(listener(index, 0))
        sessions[index].add_listener(listener(index, 1))
        sessions[index].watch(WatchKind.TOPICS)
    sessions[2].create_topic("t", ASSIGNMENT)
    assert calls == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]


def test_listeners_run_outside_the_lock_and_in_commit_order() -> None:
    store = MemoryStore()
    seen: list[tuple[WatchEvent, set[str]]] = []

    def listener(event: WatchEvent) -> None:
        seen.append((event, store.get_all_topics()))  # would deadlock inside the lock
        if len(seen) == 1:
            store.create_topic_deletion("t")  # its event must follow the pending TOPICS one

    store.add_listener(listener)
    store.watch(WatchKind.TOPICS)
    store.watch(WatchKind.TOPIC_CONFIG, "t")
    store.watch(WatchKind.DELETE_TOPICS)
    store.create_topic("t", ASSIGNMENT, config={"a": "1"})
    assert [event.kind for event, _ in seen] == [
        WatchKind.TOPIC_CONFIG,
        WatchKind.TOPICS,
        WatchKind.DELETE_TOPICS,
    ]
    assert all(topics == {"t"} for _, topics in seen)


def test_a_failing_listener_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    recorder = Recorder()

    def broken(event: WatchEvent) -> None:
        raise RuntimeError("boom")

    store.add_listener(broken)
    store.add_listener(recorder)
    store.watch(WatchKind.BROKER_IDS)
    store.register_broker(broker(1))
    assert recorder.events == [WatchEvent(WatchKind.BROKER_IDS, ChangeType.CHILDREN_CHANGED)]
    assert "boom" in caplog.text


def test_one_transaction_fires_a_watch_once() -> None:
    store = MemoryStore()
    store.create_topic("t", ASSIGNMENT)
    store.create_topic("u", ASSIGNMENT)
    store.create_topic_deletion("t")
    store.create_topic_deletion("u")
    recorder = Recorder()
    store.add_listener(recorder)
    store.watch(WatchKind.DELETE_TOPICS)
    store.delete_topic_deletions(["t", "u"], MATCH_ANY_VERSION)
    assert recorder.events == [WatchEvent(WatchKind.DELETE_TOPICS, ChangeType.CHILDREN_CHANGED)]


def test_expiry_reaches_other_sessions_before_the_expired_one() -> None:
    tree = MemoryTree()
    expiring, watcher = MemoryStore(tree), MemoryStore(tree)
    calls: list[WatchEvent] = []
    expiring.add_listener(calls.append)
    watcher.add_listener(calls.append)
    watcher.watch(WatchKind.BROKER_IDS)
    expiring.register_broker(broker(1))
    calls.clear()
    expiring.expire_session()
    assert calls == [
        WatchEvent(WatchKind.BROKER_IDS, ChangeType.CHILDREN_CHANGED),
        WatchEvent(WatchKind.SESSION, ChangeType.EXPIRED),
    ]
    expiring.expire_session()  # already expired: nothing more happens
    assert len(calls) == 2


def test_reconnect_is_a_new_session_and_only_after_expiry() -> None:
    store = MemoryStore()
    first = store.session_id
    store.reconnect()  # live: nothing to do
    assert store.session_id == first
    store.expire_session()
    with pytest.raises(StoreUnavailableError, match="expired; reconnect"):
        store.get_controller_id()
    store.reconnect()
    assert store.session_id > first
    store.close()
    with pytest.raises(StoreUnavailableError, match="closed"):
        store.reconnect()


def test_watch_keys_are_type_checked() -> None:
    store = MemoryStore()
    with pytest.raises(TypeError, match="BROKER watch takes a int key"):
        store.watch(WatchKind.BROKER, "1")
    with pytest.raises(TypeError, match="takes no key"):
        store.watch(WatchKind.TOPICS, "t")
    with pytest.raises(TypeError, match="TopicPartition"):
        store.watch(WatchKind.PARTITION_STATE, ("t", 0))


# --- Controller election details -----------------------------------------------------------------


def test_a_lost_election_response_is_recognised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's recovery path: our multi landed but we retried from the epoch read before it."""
    store = MemoryStore()
    assert store.register_controller_and_increment_epoch(1) == (1, 1)
    reads = iter([(0, 0)])
    real = store.get_controller_epoch
    monkeypatch.setattr(store, "get_controller_epoch", lambda: next(reads, None) or real())
    assert store.register_controller_and_increment_epoch(1) == (1, 1)


def test_a_stale_epoch_read_loses_to_the_winner(monkeypatch: pytest.MonkeyPatch) -> None:
    tree = MemoryTree()
    loser, winner = MemoryStore(tree), MemoryStore(tree)
    winner.register_controller_and_increment_epoch(2)
    reads = iter([(0, 0)])
    real = loser.get_controller_epoch
    monkeypatch.setattr(loser, "get_controller_epoch", lambda: next(reads, None) or real())
    with pytest.raises(ControllerMovedError):
        loser.register_controller_and_increment_epoch(1)
    assert loser.get_controller_id() == 2


def test_an_existing_epoch_is_incremented() -> None:
    tree = MemoryTree()
    tree.set_raw(paths.CONTROLLER_EPOCH, 41)
    assert MemoryStore(tree).register_controller_and_increment_epoch(1) == (42, 1)


# --- Corrupt data planted with set_raw -----------------------------------------------------------

ISR_CHANGE = "isr_change_0000000000"
LOG_DIR_EVENT = "log_dir_event_0000000000"
CORRUPTIONS: dict[str, tuple[str, object, Callable[[MemoryStore], object]]] = {
    "controller_id": (paths.CONTROLLER, "1", MemoryStore.get_controller_id),
    "controller_epoch": (paths.CONTROLLER_EPOCH, True, MemoryStore.get_controller_epoch),
    "election": (paths.CONTROLLER_EPOCH, "1", lambda s: s.register_controller_and_increment_epoch(1)),
    "cluster_id": (paths.CLUSTER_ID, 42, MemoryStore.get_or_create_cluster_id),
    "reassign_keys": (paths.REASSIGN_PARTITIONS, {("t", 0): (1,)}, MemoryStore.get_partition_reassignments),
    "reassign_replicas": (paths.REASSIGN_PARTITIONS, {T0: [1]}, MemoryStore.get_partition_reassignments),
    "preferred": (paths.PREFERRED_REPLICA_ELECTION, {T0}, MemoryStore.get_preferred_replica_election),
    "controller_id_beyond_int": (paths.CONTROLLER, 2**31, MemoryStore.get_controller_id),
    "controller_epoch_beyond_int": (paths.CONTROLLER_EPOCH, 2**40, MemoryStore.get_controller_epoch),
    "reassign_partition_beyond_int": (
        paths.REASSIGN_PARTITIONS, {TopicPartition("t", 2**31): (1,)}, MemoryStore.get_partition_reassignments
    ),
}
SKIPPED: dict[str, tuple[str, object, Callable[[MemoryStore], object]]] = {
    "partition_ids": (paths.topic_partitions("t") + "/x", None, lambda s: s.get_topic_partition_ids("t")),
    "isr_notification": (
        paths.isr_change_notification(ISR_CHANGE),
        [T0],
        lambda s: s.get_isr_change_notification_partitions([ISR_CHANGE]),
    ),
    "log_dir_notification": (
        paths.log_dir_event_notification(LOG_DIR_EVENT),
        1.0,
        lambda s: s.get_log_dir_event_brokers([LOG_DIR_EVENT]),
    ),
}


@pytest.mark.parametrize("path, value, read", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_values_of_the_wrong_type_are_corrupt(
    path: str, value: object, read: Callable[[MemoryStore], object]
) -> None:
    tree = MemoryTree()
    tree.set_raw(path, value)
    with pytest.raises(CorruptDataError) as raised:
        read(MemoryStore(tree))
    assert raised.value.path == path and path in str(raised.value)


@pytest.mark.parametrize("path, value, read", SKIPPED.values(), ids=SKIPPED.keys())
def test_children_of_the_wrong_type_are_skipped_with_a_log_line(
    path: str, value: object, read: Callable[[MemoryStore], object], caplog: pytest.LogCaptureFixture
) -> None:
    tree = MemoryTree()
    tree.set_raw(path, value)
    assert read(MemoryStore(tree)) == []
    assert path in caplog.text


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(LeaderAndIsr(1, (1,)), id="leader_and_isr_without_controller_epoch"),
        pytest.param({"leader": 1}, id="dict"),
    ],
)
def test_state_znodes_of_the_wrong_type_are_corrupt_per_key(value: object) -> None:
    store = MemoryStore()
    store.create_topic("t", ASSIGNMENT)
    store.create_partition_states({T0: state(1, (1,)), T1: state(2, (2,))}, MATCH_ANY_VERSION)
    store.tree.set_raw(paths.partition_state(T1), value)
    found = store.get_partition_states([T0, T1])
    assert set(found.values) == {T0}
    assert isinstance(found.errors[T1], CorruptDataError)


def test_a_registration_under_another_id_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    store.tree.set_raw(paths.broker(2), broker(3))
    assert store.get_all_brokers() == {}
    assert "/brokers/ids/2" in caplog.text


def test_stored_data_is_immune_to_caller_mutation() -> None:
    store = MemoryStore()
    partitions = {0: ReplicaAssignment((1,))}
    config = {"a": "1"}
    store.create_topic("t", partitions, config=config)
    partitions[1] = ReplicaAssignment((2,))
    config["b"] = "2"
    store.get_topic_configs(["t"]).values["t"]["c"] = "3"
    assert dict(store.get_topic_assignments(["t"]).values["t"].partitions) == {0: ReplicaAssignment((1,))}
    assert store.get_topic_configs(["t"]).values == {"t": {"a": "1"}}


# --- History -------------------------------------------------------------------------------------


def test_partition_history_rows(store: MemoryStore) -> None:
    _, version = store.register_controller_and_increment_epoch(1)
    store.create_topic("t", {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))})
    store.create_partition_states({T0: state(1, (1, 2))}, version)
    first = store.update_partition_states({T0: LeaderAndIsr(1, (1,), 0)}, 1, version).successful[T0]
    store.update_partition_states({T0: LeaderAndIsr(9, (9,), 9)}, 1, version)  # stale: not written
    with pytest.raises(ControllerMovedError):
        store.update_partition_states({T0: first.new_leader(2)}, 1, version + 1)  # fenced: not written
    moving = ReplicaAssignment((3, 1, 2), adding_replicas=(3,), removing_replicas=(2,))
    store.set_topic_assignment("t", TopicAssignment({0: moving, 1: ReplicaAssignment((2, 1))}), version)

    assert store.partition_history(T0) == [
        snapshot((1, 2)),
        snapshot((1, 2), leader=1, leader_epoch=0, isr=(1, 2)),
        snapshot((1, 2), leader=1, leader_epoch=0, isr=(1,)),
        snapshot((3, 1, 2), leader=1, leader_epoch=0, isr=(1,), adding=(3,), removing=(2,)),
    ]
    assert store.partition_history(T1) == [snapshot((2, 1))]  # its assignment never changed


def test_history_restarts_when_a_topic_is_recreated(store: MemoryStore) -> None:
    store.create_topic("t", {0: ReplicaAssignment((1,))})
    store.create_partition_states({T0: state(1, (1,), leader_epoch=4)}, MATCH_ANY_VERSION)
    store.delete_topic("t", MATCH_ANY_VERSION)
    store.create_topic("t", {0: ReplicaAssignment((1,))})
    assert store.partition_history(T0) == [snapshot((1,))]  # the deleted topic's rows are gone


def test_history_needs_to_be_enabled() -> None:
    with pytest.raises(IllegalStateError, match=r"record_history=True"):
        MemoryStore().partition_history(T0)


# --- The native bulk update ----------------------------------------------------------------------


def _twin_update(
    updates: Mapping[TopicPartition, LeaderAndIsr], fence_moved: bool = False,
) -> list[tuple[object, ...]]:
    """``updates`` applied by ``MemoryStore.update_partition_states`` (the state table's bulk
    write) and by ``KafkaZkClient``'s (a transaction's sets) to twin trees: what each answered
    and left behind (states, stats, zxid, history, changes, the watch events of another session)."""
    seen = []
    for update in (MemoryStore.update_partition_states, KafkaZkClient.update_partition_states):
        store = MemoryStore(MemoryTree(record_history=True))
        _, version = store.register_controller_and_increment_epoch(1)
        store.create_topic("t", {p: ReplicaAssignment((1, 2)) for p in range(5)})
        store.create_partition_states({TopicPartition("t", p): state(1, (1, 2)) for p in range(5)}, version)
        store.update_partition_states({T1: LeaderAndIsr(1, (1,), 0)}, 1, version)
        store.tree.set_raw(paths.partition_state(T2), GARBAGE)
        watcher, recorder = store.new_session(), Recorder()
        watcher.add_listener(recorder)
        for p in range(5):
            watcher.watch(WatchKind.PARTITION_STATE, TopicPartition("t", p))
        start = store.tree.zxid
        try:
            result: object = update(store, updates, 7, version + fence_moved)
        except ControllerMovedError as e:
            result = (type(e), str(e))
        else:
            assert isinstance(result, UpdateResult)
            result = (result.successful, result.to_retry, {tp: (type(e), str(e)) for tp, e in result.failed.items()})
        tps = [TopicPartition("t", p) for p in range(5)]
        with store.tree.transaction() as txn:
            stored = [txn.get_state(tp) for tp in tps]
        seen.append((result, stored, store.tree.zxid - start, store.changes_since(start),
                     [store.partition_history(tp) for tp in tps], recorder.events))
    return seen


@pytest.mark.parametrize(
    "updates",
    [
        pytest.param({TopicPartition("t", 0): LeaderAndIsr(2, (2,), 1, 0), T1: LeaderAndIsr(2, (2, 1), 1, 1)},
                     id="written"),
        pytest.param({T1: LeaderAndIsr(2, (2,), 1, 0), TopicPartition("u", 0): LeaderAndIsr(1, (1,), 1)},
                     id="stale-and-missing"),
        pytest.param({T2: LeaderAndIsr(2, (2,), 1, 1), TopicPartition("t", 3): LeaderAndIsr(2, (2,), 1, -1),
                      TopicPartition("t", 0): LeaderAndIsr(1, (1,), 1, 0, LeaderRecoveryState.RECOVERING)},
                     id="over-corrupt-and-unconditional"),
        pytest.param({TopicPartition("t", 0): LeaderAndIsr(2, (2,), 1, 0), T1: LeaderAndIsr(2, (True,), 1, 1)},
                     id="not-a-row"),
        pytest.param({TopicPartition("t", 0): LeaderAndIsr(2, (2,), 2**31, 0)}, id="out-of-range"),
        pytest.param({}, id="nothing"),
        pytest.param(MappingProxyType({TopicPartition("t", 0): LeaderAndIsr(2, (2,), 1, 0)}), id="not-a-dict"),
    ],
)
def test_the_bulk_update_is_a_transaction_of_sets(updates: Mapping[TopicPartition, LeaderAndIsr]) -> None:
    native, general = _twin_update(updates)
    assert native == general


def test_the_bulk_update_is_fenced() -> None:
    native, general = _twin_update({T1: LeaderAndIsr(2, (2,), 1, 1)}, fence_moved=True)
    assert native == general
    assert native[0][0] is ControllerMovedError and native[2] == 0


def test_the_table_takes_only_what_it_holds_as_rows() -> None:
    """``StateTable.update_states`` given anything else writes nothing and says so (None), or
    names the argument it cannot take."""
    table = StateTable(False)
    table.create("t", 0, (1, [1], 0, 0, 0, 1), 1)
    good = LeaderAndIsr(2, (2,), 1, 0)
    for updates in ({("t", 0, 1): good}, {"t": good}, {("t", 0): "state"}, {(b"t", 0): good},
                    {("t", 0): good, ("t", 1): LeaderAndIsr(2, (2,), 1, INT32_MAX)}):
        assert table.update_states(updates, 1, 2, LeaderAndIsr, LeaderRecoveryState) is None
    assert table.update_states({("t", 0): good}, True, 2, LeaderAndIsr, LeaderRecoveryState) is None
    with pytest.raises(TypeError):
        table.update_states([(("t", 0), good)], 1, 2, LeaderAndIsr, LeaderRecoveryState)  # type: ignore[arg-type]
    assert table.get("t", 0) == ((1, [1], 0, 0, 0, 1), 0, 1, 1)  # nothing written
    written = table.update_states({("t", 0): good, ("t", 1): good}, 1, 2, LeaderAndIsr, LeaderRecoveryState)
    assert written == ({("t", 0): LeaderAndIsr(2, (2,), 1, 1)}, [], [("t", 1)])


# --- Threads and scale ---------------------------------------------------------------------------


def test_concurrent_conditional_updates_never_lose_a_write() -> None:
    tree = MemoryTree()
    MemoryStore(tree).create_topic("t", {0: ReplicaAssignment((1,))})
    MemoryStore(tree).create_partition_states({T0: state(1, (1,))}, MATCH_ANY_VERSION)
    rounds, workers = 200, 4

    def bump(store: MemoryStore) -> None:
        done = 0
        while done < rounds:
            current = store.get_partition_states([T0]).values[T0].leader_and_isr
            if store.update_partition_states({T0: current.new_epoch()}, 1, MATCH_ANY_VERSION).successful:
                done += 1

    threads = [threading.Thread(target=bump, args=(MemoryStore(tree),)) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = MemoryStore(tree).get_partition_states([T0]).values[T0].leader_and_isr
    assert final.leader_epoch == final.partition_epoch == rounds * workers


def test_bulk_operations_on_100k_partitions() -> None:
    """Correctness at scale; the speed of these bulk calls is measured in benches/bench_store.py."""
    store = MemoryStore()
    topics = {f"topic-{i}": {p: ReplicaAssignment((1, 2, 3)) for p in range(1000)} for i in range(100)}
    for topic, partitions in topics.items():
        store.create_topic(topic, partitions)
    tps = [TopicPartition(t, p) for t, partitions in topics.items() for p in partitions]
    store.create_partition_states({tp: state(1, (1, 2, 3)) for tp in tps}, MATCH_ANY_VERSION)

    found = store.get_partition_states(tps)
    updates = {tp: lice.leader_and_isr.new_leader_and_isr(2, (2, 3)) for tp, lice in found.values.items()}
    result = store.update_partition_states(updates, 1, MATCH_ANY_VERSION)

    assert len(found.values) == len(result.successful) == 100_000
    assert store.get_partition_states(tps[-1:]).values[tps[-1]] == LeaderIsrAndControllerEpoch(
        LeaderAndIsr(2, (2, 3), 1, partition_epoch=1), 1
    )


def test_partition_znodes_are_znodes_like_any_other() -> None:
    """The znode of each partition (``/brokers/topics/<t>/partitions/<p>``), held as a column
    entry while plain, answers every operation as a node of the tree would."""
    tree = MemoryTree()
    store = MemoryStore(tree)
    store.create_topic("t", {p: ReplicaAssignment((1,)) for p in range(12)})
    store.create_partition_states({TopicPartition("t", p): state(1, (1,)) for p in range(12)}, MATCH_ANY_VERSION)
    created = tree.zxid
    partitions, dir2 = paths.topic_partitions("t"), paths.topic_partition(TopicPartition("t", 2))
    assert store.get_topic_partition_ids("t") == list(range(12))
    with tree.transaction() as txn:
        assert txn.get(dir2) == (None, Stat(0, created, created, 0))
        assert txn.children(dir2) == ["state"]
        assert txn.children(partitions) == sorted(str(p) for p in range(12))
        with pytest.raises(StoreError, match="has children"):
            txn.delete(dir2)
        txn.delete(f"{dir2}/state")
        txn.delete(dir2, 0)
        assert not txn.exists(dir2) and txn.get(dir2) is None
        txn.create(dir2, "data")  # a znode with data, and one set, are nodes of the tree
        assert txn.set(paths.topic_partition(TopicPartition("t", 3)), "x", 0) == 1
        txn.create(paths.topic_partition(TopicPartition("t", 4)) + "/extra", 7)
        txn.create(f"{partitions}/007")  # not a partition id as Kafka writes one
    with tree.transaction() as txn:
        assert txn.get(dir2) == ("data", Stat(0, tree.zxid, tree.zxid, 0))
        assert txn.get(paths.topic_partition(TopicPartition("t", 3)))[0] == "x"  # type: ignore[index]
        assert txn.children(paths.topic_partition(TopicPartition("t", 4))) == ["extra", "state"]
        assert txn.children(partitions) == sorted([*(str(p) for p in range(12)), "007"])
    with pytest.raises(NodeExistsError), tree.transaction() as txn:  # undone whole
        txn.create(f"{partitions}/12")
        txn.delete(f"{partitions}/5/state")
        txn.delete(f"{partitions}/5")
        txn.create(f"{partitions}/12")
    with tree.transaction() as txn:
        assert not txn.exists(f"{partitions}/12") and txn.children(f"{partitions}/5") == ["state"]
    store.delete_topic("t", MATCH_ANY_VERSION)
    with tree.transaction() as txn:
        assert not txn.exists(partitions) and not txn.exists(f"{partitions}/5/state")
        txn.ensure_path(f"{partitions}/5/state")
        assert txn.children(partitions) == ["5"]


def test_partitions_take_no_python_object_each() -> None:
    """A topic's assignment and its partitions' znodes add a few bytes of Python heap per
    partition, not objects each (about 750 bytes before: a node, a path and a set per partition
    znode, and the caller's ``ReplicaAssignment`` objects kept with a dict of them)."""
    store = MemoryStore(MemoryTree())
    count = 20_000
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store.create_topic("t", {p: ReplicaAssignment((p % 7, (p + 1) % 7)) for p in range(count)})
        store.create_partition_states({TopicPartition("t", p): state(1, (1,)) for p in range(count)}, MATCH_ANY_VERSION)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held / count < 32, f"{held / count:.0f} bytes of Python heap per partition"
    assert store.get_topic_partition_ids("t") == list(range(count))
    assignment = store.get_topic_assignments(["t"]).values["t"].partitions
    assert assignment[19_999] == ReplicaAssignment((19_999 % 7, 20_000 % 7)) and len(assignment) == count
    assert dict(assignment.items()) == {p: ReplicaAssignment((p % 7, (p + 1) % 7)) for p in range(count)}


def test_stored_assignments_read_as_written() -> None:
    """Partition ids 0 to n-1 in order are held as a tuple, any others as a dict: both read back
    as the mapping written, in its order, and compare equal to it."""
    store = MemoryStore(MemoryTree())
    dense = {p: ReplicaAssignment((p, 9)) for p in range(3)}
    unordered = {1: ReplicaAssignment((1,)), 0: ReplicaAssignment((0,), (0,), ())}
    sparse = {0: ReplicaAssignment((1,)), 5: ReplicaAssignment((2,))}
    for name, written in (("dense", dense), ("unordered", unordered), ("sparse", sparse)):
        store.create_topic(name, written)
        read = store.get_topic_assignments([name]).values[name].partitions
        assert read == written and list(read.items()) == list(written.items()) and list(read) == list(written)
        assert 7 not in read and read.get(7) is None and -1 not in read
        with pytest.raises(KeyError):
            read[7]
    read = store.get_topic_assignments(["dense"]).values["dense"].partitions
    assert list(read.values()) == list(dense.values()) and read.keys() == dense.keys()
    store.set_topic_assignment("dense", TopicAssignment({**read, 1: ReplicaAssignment((4,))}))
    assert store.get_topic_assignments(["dense"]).values["dense"].partitions[1] == ReplicaAssignment((4,))


# --- Plugin registration -------------------------------------------------------------------------


def test_registered_as_the_memory_store_plugin() -> None:
    entry = PluginHost().state_stores().get("memory")
    assert entry.factory is MemoryStore
    assert entry.plugin == "kctl.stores.memory"
    assert isinstance(entry.factory(), StateStore)


def test_a_failed_item_of_a_multi_is_undone_whole_and_the_others_kept() -> None:
    """The znode client's multi (what Kafka's semantics are written over): each item applies
    atomically, as one ZooKeeper multi; a failed item leaves nothing behind, a fenced one nothing at all."""
    tree = MemoryTree()
    client = TreeClient(tree)
    items = [
        [Op("create", "/a", "x")],
        [Op("create", "/b", "y"), Op("create", "/missing/child")],  # the second op fails
        [Op("create", "/c"), Op("set", "/c", "z", 0)],
    ]
    results = client.multi(items, MATCH_ANY_VERSION)
    assert results[0] == ["/a"]
    failure = results[1]
    assert isinstance(failure, Failure) and failure.op == 1 and isinstance(failure.error, NoNodeError)
    assert isinstance(results[2], list) and results[2][1] == Stat(1, tree.zxid, tree.zxid, 0)
    assert client.get_data(["/a", "/b", "/c"]) == [("x", Stat(0, tree.zxid, tree.zxid, 0)), None,
                                                   ("z", Stat(1, tree.zxid, tree.zxid, 0))]
    before = tree.zxid
    with pytest.raises(ControllerMovedError):
        client.multi([[Op("create", "/d")]], 7)  # no /controller_epoch at version 7
    assert tree.zxid == before and client.exists("/d") is None
