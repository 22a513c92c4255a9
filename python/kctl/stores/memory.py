"""The embedded state store: an in-memory ZooKeeper holding Kafka's znode layout.

:class:`MemoryTree` plays the ZooKeeper server: a znode tree with versions, zxids, ephemeral
nodes owned by sessions, persistent-sequential children and all-or-nothing transactions.
:class:`MemoryStore` is one client session on a tree and implements
:class:`~kctl.stores.base.StateStore` the way Kafka's ``KafkaZkClient`` does (reference §6.2, §7),
so that a simulated cluster exercises the same fencing, conditional writes, broker epochs and
watch-driven events as one running on ZooKeeper.

Znodes hold Python objects instead of JSON (a topic znode holds a ``TopicAssignment``); reads
check their type, so data planted with :meth:`MemoryTree.set_raw` surfaces as
:class:`~kctl.errors.CorruptDataError` exactly where a ZooKeeper store would fail to decode JSON.
Partition-state znodes, the bulk of the tree, live in a native table (``kctl._engine.StateTable``)
with the same versions and zxids, so that the native engine reads and writes them without a Python
object per partition; :class:`Transaction` routes their paths there.
"""

from __future__ import annotations

import base64
import itertools
import logging
import operator
import random
import reprlib
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple, TypeVar, cast

from kctl._engine import StateTable
from kctl.errors import (
    BadVersionError,
    ControllerMovedError,
    CorruptDataError,
    IllegalStateError,
    NodeExistsError,
    NoNodeError,
    StoreError,
    StoreUnavailableError,
    TopicAlreadyMarkedForDeletionError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kctl.hookspecs import hookimpl
from kctl.model import (
    INITIAL_CONTROLLER_EPOCH,
    INT32_MAX,
    INT32_MIN,
    MAX_PORT,
    NO_LEADER,
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    TopicPartition,
    int_problem,
    validate_topic_name,
)
from kctl.stores import paths
from kctl.stores.base import (
    MATCH_ANY_VERSION,
    ChangeType,
    ReadResult,
    TopicAssignment,
    UpdateResult,
    WatchEvent,
    WatchKind,
    WatchListener,
    check_watch_key,
    decoded_or_skipped,
)

if TYPE_CHECKING:
    from kctl.registry import StateStoreRegistry

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_Delivery = tuple[WatchListener, WatchEvent]
_DELETED = object()
"""Marks a deletion in a transaction's record of written data."""


class Stat(NamedTuple):
    """A znode's metadata, as ZooKeeper's ``Stat``; ``ephemeral_owner`` is 0 for persistent nodes."""

    version: int
    czxid: int
    mzxid: int
    ephemeral_owner: int


class _Node:
    __slots__ = ("children", "czxid", "data", "ephemeral_owner", "mzxid", "sequence", "version")

    def __init__(self, data: object, zxid: int, ephemeral_owner: int) -> None:
        self.data = data
        self.version = 0
        self.czxid = zxid
        self.mzxid = zxid
        self.ephemeral_owner = ephemeral_owner
        self.children: set[str] = set()
        self.sequence = 0  # the next persistent-sequential suffix among this node's children

    def stat(self) -> Stat:
        return Stat(self.version, self.czxid, self.mzxid, self.ephemeral_owner)


class Session:
    """A client session of a :class:`MemoryTree`, an opaque handle for its users: the session's
    ephemeral nodes, plus the listeners and watches a reconnect carries over."""

    __slots__ = ("ended", "ephemerals", "id", "listeners", "state_watches", "watches")

    def __init__(
        self, session_id: int, listeners: list[WatchListener], watches: set[tuple[WatchKind, object]]
    ) -> None:
        self.id = session_id
        self.listeners = listeners
        self.watches = watches
        # Partition-state watches, counted so that each native bulk write need not scan the watches.
        self.state_watches = sum(kind is WatchKind.PARTITION_STATE for kind, _ in watches)
        self.ephemerals: set[str] = set()
        self.ended: str | None = None  # "expired" or "closed"

    def watch(self, kind: WatchKind, key: object) -> None:
        if (kind, key) not in self.watches:
            self.watches.add((kind, key))
            self.state_watches += kind is WatchKind.PARTITION_STATE

    def unwatch(self, kind: WatchKind, key: object) -> None:
        if (kind, key) in self.watches:
            self.watches.discard((kind, key))
            self.state_watches -= kind is WatchKind.PARTITION_STATE


@dataclass(frozen=True)
class PartitionSnapshot:
    """One stored version of a partition: its latest assignment and latest state at that moment."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = -1
    """Epoch of the controller that wrote the state (-1 before the state exists)."""


_NO_ASSIGNMENT = ReplicaAssignment(())


def _changed_partitions(previous: Mapping[int, ReplicaAssignment], current: Mapping[int, ReplicaAssignment]) -> list[int]:
    """The partitions whose assignment ``current`` changes, in its order.

    A reassignment rewrites its topic's znode once per partition step, with every other
    partition's assignment the same object as before: the value lists are compared in C (which
    skips identical objects), halving the ranges that differ, instead of partition by partition.
    """
    keys = list(current)
    if keys != list(previous):
        return [p for p in keys if previous.get(p) != current[p]]
    new, old = list(current.values()), list(previous.values())
    changed: list[int] = []

    def scan(lo: int, hi: int) -> None:
        if new[lo:hi] == old[lo:hi]:
            return
        if hi - lo <= 8:
            changed.extend(keys[i] for i in range(lo, hi) if new[i] != old[i])
            return
        mid = (lo + hi) // 2
        scan(lo, mid)
        scan(mid, hi)

    scan(0, len(keys))
    return changed


class _History:
    """Assignment rows of every committed topic-znode write; the state table keeps the state rows.

    Both draw sequence numbers from the table, so :meth:`MemoryTree.partition_history` merges them
    in write order.
    """

    def __init__(self, states: StateTable) -> None:
        self._states = states
        self.rows: dict[TopicPartition, list[tuple[int, ReplicaAssignment]]] = {}
        self._assignments: dict[str, Mapping[int, ReplicaAssignment]] = {}

    def record(self, written: list[tuple[int, str, object]]) -> None:
        for seq, path, data in written:
            target = _keyed_node(path)
            if target is not None and target[0] is WatchKind.TOPIC and isinstance(target[1], str):
                self._topic_written(seq, target[1], data)

    def _topic_written(self, seq: int, topic: str, data: object) -> None:
        if data is _DELETED:  # a re-created topic starts a history of its own
            for partition in self._assignments.pop(topic, {}):
                self.rows.pop(TopicPartition(topic, partition), None)
            self._states.forget_history(topic)
        elif isinstance(data, TopicAssignment):
            partitions = data.partitions
            for partition in _changed_partitions(self._assignments.get(topic, {}), partitions):
                self.rows.setdefault(TopicPartition(topic, partition), []).append((seq, partitions[partition]))
            self._assignments[topic] = partitions

    def snapshots(self, tp: TopicPartition) -> list[PartitionSnapshot]:
        """Assignment and state rows merged by sequence: each row shows the latest of the other."""
        states = self._states.history(tp.topic, tp.partition) or []
        rows = sorted(
            [(seq, assignment, None) for seq, assignment in self.rows.get(tp, ())]
            + [(seq, None, state) for seq, state in states],
            key=lambda row: row[0],
        )
        snapshots = []
        assignment: ReplicaAssignment = _NO_ASSIGNMENT
        written: LeaderIsrAndControllerEpoch | None = None
        for _, new_assignment, state in rows:
            if new_assignment is not None:
                assignment = new_assignment
            elif state is None:  # the state znode was deleted
                written = None
                continue
            else:
                written = _state_of(state)
            lai = None if written is None else written.leader_and_isr
            snapshots.append(
                PartitionSnapshot(
                    assignment.replicas,
                    assignment.adding_replicas,
                    assignment.removing_replicas,
                    NO_LEADER if lai is None else lai.leader,
                    -1 if lai is None else lai.leader_epoch,
                    () if lai is None else lai.isr,
                    -1 if written is None else written.controller_epoch,
                )
            )
        return snapshots


class MemoryTree:
    """The shared in-memory "ZooKeeper server" that :class:`MemoryStore` sessions connect to.

    Mutations happen under one lock (sessions may live on different threads). Watch listeners are
    called after the mutation, outside the lock, in commit order: sessions in creation order,
    listeners in registration order. With several threads, a listener runs on whichever thread is
    delivering at the time, which is why listeners must only enqueue work. ``rng`` makes the cluster id reproducible in seeded runs;
    ``record_history`` keeps every write of topic and partition-state znodes for
    :meth:`partition_history`.
    """

    def __init__(self, record_history: bool = False, rng: random.Random | None = None) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, _Node] = {"/": _Node(None, 0, 0)}
        self._zxid = 0
        self._rng = rng if rng is not None else random.Random()
        self._states = StateTable(record_history)
        self._corrupt_states: dict[str, object] = {}
        """What state znodes holding something other than a partition state hold (their slot in the
        table is marked corrupt)."""
        self._history = _History(self._states) if record_history else None
        self._checked_assignments: dict[str, weakref.ref[TopicAssignment]] = {}
        """The topic znodes whose ids were found in Kafka's Int, by path: stored objects never
        change, and a failover reads every topic, so an unchanged one is checked only once."""
        self._sessions: dict[int, Session] = {}
        self._session_ids = itertools.count(1)
        self._pending: deque[_Delivery] = deque()
        self._delivering = False
        with self.transaction() as txn:
            for path in paths.PERSISTENT_PATHS:
                txn.ensure_path(path)

    @property
    def zxid(self) -> int:
        """The zxid of the last committed transaction."""
        return self._zxid

    @contextmanager
    def transaction(self, session: Session | None = None) -> Iterator[Transaction]:
        """An all-or-nothing multi-op (ZooKeeper's ``multi``) run while holding the tree's lock.

        An exception escaping the block undoes every operation; on success the transaction gets
        the next zxid (if it wrote anything) and watchers are notified after the lock is released.
        """
        with self._lock:
            if session is not None:
                _check_live(session)
            txn = Transaction(self, session)
            try:
                yield txn
            except BaseException:
                txn._rollback()
                raise
            txn._commit()
        self._drain()

    def set_raw(self, path: str, value: object) -> None:
        """Store ``value`` at ``path`` as is, creating missing parents (tests plant corrupt data)."""
        with self.transaction() as txn:
            if txn.get(path) is None:
                txn.ensure_path(path, value)
            else:
                txn.set(path, value)

    def partition_history(self, tp: TopicPartition) -> list[PartitionSnapshot]:
        """Every stored version of ``tp`` (assignment or state write), oldest first."""
        if self._history is None:
            raise IllegalStateError(
                "partition history is not recorded: create the tree with MemoryTree(record_history=True)"
            )
        with self._lock:
            return self._history.snapshots(tp)

    def changes_since(self, zxid: int) -> tuple[int, list[str], list[tuple[str, int]]]:
        """The zxid of the last commit, the topics whose assignment znode was created or changed
        after ``zxid``, and the ``(topic, partition)`` whose state znode was (both sorted). Deleted znodes are not
        listed (a deleted topic is missing from :meth:`MemoryStore.get_all_topics`)."""
        with self._lock:
            topics = self._nodes[paths.BROKER_TOPICS].children
            changed = sorted(t for t in topics if self._nodes[paths.topic(t)].mzxid > zxid)
            return self._zxid, changed, self._states.modified_since(zxid)

    # --- The native engine's access to the state table -----------------------------------------

    def native_begin(self, session: Session) -> tuple[StateTable, int, int, bool]:
        """Lock the tree for one bulk operation of the native engine on the state table.

        Returns the table, the version of ``/controller_epoch`` (-1 when absent) for fencing, the
        zxid the operation commits with, and whether any session watches partition states. Every
        call must be followed by :meth:`native_end`.
        """
        self._lock.acquire()
        try:
            _check_live(session)
        except StoreUnavailableError:
            self._lock.release()
            raise
        epoch = self._nodes.get(paths.CONTROLLER_EPOCH)
        watched = any(s.state_watches and s.listeners for s in self._sessions.values())
        return self._states, -1 if epoch is None else epoch.version, self._zxid + 1, watched

    def native_end(self, wrote: bool, written: Sequence[tuple[str, int]] = ()) -> None:
        """Commit the operation begun with :meth:`native_begin` (``written``: the partitions whose
        state changed, given only when they are watched) and deliver the watch events."""
        try:
            if wrote:
                self._zxid += 1
                changed = [paths.partition_state(TopicPartition(t, p)) for t, p in written]
                self._route(changed, [ChangeType.DATA_CHANGED] * len(changed))
        finally:
            self._lock.release()
        self._drain()

    # --- Sessions --------------------------------------------------------------------------------

    def open_session(self, previous: Session | None = None) -> Session:
        """A new session; given the ``previous`` (ended) one, it inherits its listeners and watches
        and tells them ``SESSION``/``RECONNECTED``."""
        with self._lock:
            if previous is None:
                session = Session(next(self._session_ids), [], set())
            else:
                session = Session(next(self._session_ids), list(previous.listeners), set(previous.watches))
                reconnected = WatchEvent(WatchKind.SESSION, ChangeType.RECONNECTED)
                self._pending.extend((listener, reconnected) for listener in session.listeners)
            self._sessions[session.id] = session
        self._drain()
        return session

    def expire_session(self, session: Session) -> None:
        """Expire ``session``: its ephemeral nodes go (firing other sessions' watches), then its
        listeners get ``SESSION``/``EXPIRED``, as a client learns of expiry after the server acted."""
        self._end_session(session, "expired")

    def close_session(self, session: Session) -> None:
        """Close ``session``: its ephemeral nodes go; its own listeners hear nothing."""
        self._end_session(session, "closed")

    def _end_session(self, session: Session, how: str) -> None:
        with self._lock:
            if session.ended:
                return
            session.ended = how
            del self._sessions[session.id]
            txn = Transaction(self, None)
            for path in sorted(session.ephemerals):
                txn.delete(path)
            session.ephemerals.clear()
            txn._commit()
            if how == "expired":
                expired = WatchEvent(WatchKind.SESSION, ChangeType.EXPIRED)
                self._pending.extend((listener, expired) for listener in session.listeners)
        self._drain()

    # --- Watches ---------------------------------------------------------------------------------

    def _route(self, changed_paths: list[str], changes: list[ChangeType]) -> None:
        """Queue the events of a committed transaction for the sessions watching them (under the lock).

        Repeated events of one transaction are delivered once, as ZooKeeper fires a watch once.
        """
        watching = [s for s in self._sessions.values() if s.watches and s.listeners]
        if not watching:
            return
        events = dict.fromkeys(e for e in map(_watch_event, changed_paths, changes) if e is not None)
        for session in watching:
            for event in events:
                if (event.kind, event.key) in session.watches:
                    self._pending.extend((listener, event) for listener in session.listeners)

    def _drain(self) -> None:
        """Call queued listeners outside the lock. One thread drains at a time, so events reach
        listeners in commit order; a listener that writes to the store has its own events queued
        behind the current ones instead of being called re-entrantly."""
        with self._lock:
            if self._delivering or not self._pending:
                return
            self._delivering = True
        try:
            while True:
                with self._lock:
                    if not self._pending:
                        self._delivering = False
                        return
                    listener, event = self._pending.popleft()
                try:
                    listener(event)
                except Exception:
                    logger.exception("Watch listener %r failed on %s", listener, event)
        except BaseException:
            with self._lock:
                self._delivering = False
            raise


class _Created(NamedTuple):
    path: str
    parent: _Node
    name: str
    owner: Session | None
    sequential: bool


class _Changed(NamedTuple):
    node: _Node
    data: object
    version: int
    mzxid: int


class _Deleted(NamedTuple):
    path: str
    node: _Node
    parent: _Node
    name: str
    owner: Session | None


_StateRow = tuple[int, Sequence[int], int, int, int, int]
_Slot = tuple[_StateRow | None, int, int, int]
"""A state-table slot: (state row or None when corrupt, version, czxid, mzxid)."""
_ABSENT = object()


class _StateWritten(NamedTuple):
    """A write to the state table: what to put back (slot, corrupt data) and the history row to drop."""

    path: str
    key: tuple[str, int]
    previous: _Slot | None
    corrupt: object
    parent: _Node
    seq: int



class Transaction:
    """The operations of one :meth:`MemoryTree.transaction`: ZooKeeper's check/create/set/delete.

    Each operation either applies completely or raises without effect, so a caller may catch a
    failed operation and carry on (Kafka's per-partition results); reads see earlier writes.
    Bookkeeping is one small record per write, so that transactions over 100K nodes stay cheap
    for Python's garbage collector.
    """

    def __init__(self, tree: MemoryTree, session: Session | None) -> None:
        self._tree = tree
        self._nodes = tree._nodes
        self._states = tree._states
        self._session = session
        self.zxid = tree._zxid + 1
        """The zxid this transaction commits with (the czxid of the nodes it creates)."""
        self._undo: list[_Created | _Changed | _Deleted | _StateWritten] = []
        self._changed_paths: list[str] = []
        self._changes: list[ChangeType] = []
        self._recording = tree._history is not None
        self._written: list[tuple[int, str, object]] = []

    def get(self, path: str) -> tuple[object, Stat] | None:
        """The node's data and stat, or None when it does not exist."""
        key = _state_key(path)
        if key is not None:
            slot = self._states.get(*key)
            if slot is None:
                return None
            row, version, czxid, mzxid = slot
            data = self._tree._corrupt_states.get(path) if row is None else _state_of(row)
            return data, Stat(version, czxid, mzxid, 0)
        node = self._nodes.get(path)
        return None if node is None else (node.data, node.stat())

    def exists(self, path: str) -> bool:
        key = _state_key(path)
        return path in self._nodes if key is None else self._states.get(*key) is not None

    def children(self, path: str) -> list[str]:
        """The names of the node's children, sorted."""
        if _state_key(path) is not None and self.exists(path):
            return []  # state znodes have no children
        return sorted(self._node(path).children)

    def check(self, path: str, version: int) -> None:
        """Require the node to exist at ``version``."""
        found = self.get(path)
        if found is None:
            raise NoNodeError(f"{path} does not exist", path)
        self._check_version(path, found[1].version, version)

    def create(
        self, path: str, data: object = None, *, ephemeral: bool = False, sequential: bool = False
    ) -> str:
        """Create a node; a sequential one gets a 10-digit suffix. Returns the created path."""
        if not path.startswith("/") or path.endswith("/") or "//" in path:
            raise StoreError(f"invalid path {path!r}", path)
        parent_path, name = _split(path)
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(f"cannot create {path}: {parent_path} does not exist", path)
        if parent.ephemeral_owner:
            raise StoreError(f"cannot create {path}: ephemeral {parent_path} cannot have children", path)
        if sequential:
            name = paths.sequence_name(name, parent.sequence)
            path = _join(parent_path, name)
        if self.exists(path):
            raise NodeExistsError(f"{path} already exists", path)
        if ephemeral and self._session is None:
            raise StoreError(f"cannot create ephemeral {path} outside a session", path)
        key = _state_key(path)
        if key is not None:
            if ephemeral:
                raise StoreError(f"cannot create {path}: partition-state znodes are persistent here", path)
            row = self._state_row(path, data)
            _, seq = self._states.create(key[0], key[1], row, self.zxid)
            parent.children.add(name)
            self._wrote(_StateWritten(path, key, None, _ABSENT, parent, seq), path, data, ChangeType.CREATED, parent_path)
            return path
        owner = self._session if ephemeral else None
        self._nodes[path] = _Node(data, self.zxid, owner.id if owner else 0)
        parent.children.add(name)
        if sequential:
            parent.sequence += 1
        if owner:
            owner.ephemerals.add(path)
        undo = _Created(path, parent, name, owner, sequential)
        self._wrote(undo, path, data, ChangeType.CREATED, parent_path)
        return path

    def set(self, path: str, data: object, version: int = MATCH_ANY_VERSION) -> int:
        """Replace the node's data, conditional on ``version`` unless -1; returns the new version."""
        key = _state_key(path)
        if key is not None:
            previous = self._slot(path, key)
            self._check_version(path, previous[1], version)
            corrupt = self._tree._corrupt_states.get(path, _ABSENT)
            row = self._state_row(path, data)
            _, new_version, seq = self._states.set(key[0], key[1], row, MATCH_ANY_VERSION, self.zxid)
            parent = self._nodes[_split(path)[0]]
            self._wrote(_StateWritten(path, key, previous, corrupt, parent, seq), path, data, ChangeType.DATA_CHANGED)
            return new_version
        node = self._node(path)
        self._check_version(path, node.version, version)
        undo = _Changed(node, node.data, node.version, node.mzxid)
        node.data, node.version, node.mzxid = data, node.version + 1, self.zxid
        self._wrote(undo, path, data, ChangeType.DATA_CHANGED)
        return node.version

    def delete(self, path: str, version: int = MATCH_ANY_VERSION) -> None:
        """Delete a childless node, conditional on ``version`` unless -1."""
        parent_path, name = _split(path)
        key = _state_key(path)
        if key is not None:
            previous = self._slot(path, key)
            self._check_version(path, previous[1], version)
            corrupt = self._tree._corrupt_states.pop(path, _ABSENT)
            deleted = self._states.delete(*key)
            seq = 0 if deleted is None else deleted[1]
            parent = self._nodes[parent_path]
            parent.children.discard(name)
            self._wrote(_StateWritten(path, key, previous, corrupt, parent, seq), path, _DELETED, ChangeType.DELETED, parent_path)
            return
        node = self._node(path)
        self._check_version(path, node.version, version)
        if node.children:
            raise StoreError(f"cannot delete {path}: it has children", path)
        parent = self._nodes[parent_path]
        owner = self._tree._sessions.get(node.ephemeral_owner)
        del self._nodes[path]
        parent.children.discard(name)
        if owner:
            owner.ephemerals.discard(path)
        undo = _Deleted(path, node, parent, name, owner)
        self._wrote(undo, path, _DELETED, ChangeType.DELETED, parent_path)

    def delete_recursive(self, path: str) -> None:
        """Delete the node and its descendants, children first; a missing node is fine."""
        if not self.exists(path):
            return
        preorder, stack = [], [path]
        while stack:
            current = stack.pop()
            preorder.append(current)
            node = self._nodes.get(current)  # None for a state znode, which has no children
            if node is not None:
                stack.extend(_join(current, child) for child in node.children)
        for current in reversed(preorder):
            self.delete(current)

    def ensure_path(self, path: str, data: object = None) -> None:
        """Create the node with ``data`` if absent, and its missing ancestors without data."""
        missing = []
        while not self.exists(path):
            missing.append(path)
            path = _split(path)[0]
        for i, current in enumerate(reversed(missing)):
            self.create(current, data if i == len(missing) - 1 else None)

    def _rollback(self) -> None:
        for record in reversed(self._undo):
            match record:
                case _Changed(node, data, version, mzxid):
                    node.data, node.version, node.mzxid = data, version, mzxid
                case _Created(path, parent, name, owner, sequential):
                    del self._nodes[path]
                    parent.children.discard(name)
                    if sequential:
                        parent.sequence -= 1
                    if owner:
                        owner.ephemerals.discard(path)
                case _Deleted(path, node, parent, name, owner):
                    self._nodes[path] = node
                    parent.children.add(name)
                    if owner:
                        owner.ephemerals.add(path)
                case _StateWritten(path, (topic, partition), previous, corrupt, parent, seq):
                    self._states.restore(topic, partition, previous, seq)
                    if corrupt is _ABSENT:
                        self._tree._corrupt_states.pop(path, None)
                    else:
                        self._tree._corrupt_states[path] = corrupt
                    if previous is None:
                        parent.children.discard(_split(path)[1])
                    else:
                        parent.children.add(_split(path)[1])

    def _commit(self) -> None:
        if not self._undo:
            return
        tree = self._tree
        tree._zxid = self.zxid
        if tree._history is not None:
            tree._history.record(self._written)
        tree._route(self._changed_paths, self._changes)

    def _node(self, path: str) -> _Node:
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(f"{path} does not exist", path)
        return node

    def _slot(self, path: str, key: tuple[str, int]) -> _Slot:
        slot: _Slot | None = self._states.get(*key)
        if slot is None:
            raise NoNodeError(f"{path} does not exist", path)
        return slot

    def _state_row(self, path: str, data: object) -> _StateRow | None:
        """The table's row for ``data``; anything but a well-formed state is kept aside as corrupt."""
        row = _row_of(data)
        if row is None:
            self._tree._corrupt_states[path] = data
        else:
            self._tree._corrupt_states.pop(path, None)
        return row

    @staticmethod
    def _check_version(path: str, current: int, version: int) -> None:
        if version != MATCH_ANY_VERSION and current != version:
            raise BadVersionError(f"{path} is at version {current}, not {version}", path)

    def _wrote(
        self,
        undo: _Created | _Changed | _Deleted | _StateWritten,
        path: str,
        data: object,
        change: ChangeType,
        parent: str | None = None,
    ) -> None:
        self._undo.append(undo)
        self._changed_paths.append(path)
        self._changes.append(change)
        if parent is not None:
            self._changed_paths.append(parent)
            self._changes.append(ChangeType.CHILDREN_CHANGED)
        if self._recording and not isinstance(undo, _StateWritten):  # the table keeps state rows
            self._written.append((self._states.next_seq(), path, data))


def _check_live(session: Session) -> None:
    if session.ended:
        reconnect = "; reconnect() opens a new session" if session.ended == "expired" else ""
        raise StoreUnavailableError(f"session {session.id:#x} has {session.ended}{reconnect}")


def _state_key(path: str) -> tuple[str, int] | None:
    """``(topic, partition)`` when ``path`` is a partition-state znode (kept in the state table)."""
    if not path.endswith("/state"):
        return None
    parts = path.split("/")
    if len(parts) != 7 or parts[1:3] != ["brokers", "topics"] or parts[4] != "partitions":
        return None
    partition = paths.parse_id(parts[5])
    return None if partition is None else (parts[3], partition)


def _row_of(data: object) -> _StateRow | None:
    """A partition state as the table stores it; None for anything else."""
    if not isinstance(data, LeaderIsrAndControllerEpoch):
        return None
    lai = data.leader_and_isr
    if not (isinstance(lai, LeaderAndIsr) and isinstance(lai.leader_recovery_state, LeaderRecoveryState)):
        return None
    fields = (lai.leader, lai.leader_epoch, lai.partition_epoch, data.controller_epoch, *lai.isr)
    if not all(type(v) is int and INT32_MIN <= v <= INT32_MAX for v in fields):
        return None
    recovery = int(lai.leader_recovery_state)
    return lai.leader, lai.isr, lai.leader_epoch, lai.partition_epoch, recovery, data.controller_epoch


def _state_of(row: _StateRow) -> LeaderIsrAndControllerEpoch:
    leader, isr, leader_epoch, partition_epoch, recovery, controller_epoch = row
    lai = LeaderAndIsr(leader, tuple(isr), leader_epoch, partition_epoch, LeaderRecoveryState(recovery))
    return LeaderIsrAndControllerEpoch(lai, controller_epoch)


def _split(path: str) -> tuple[str, str]:
    parent, _, name = path.rpartition("/")
    return parent or "/", name


def _join(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


# --- Which watch a change fires ------------------------------------------------------------------

_CHILD_WATCHES = {
    paths.BROKER_IDS: WatchKind.BROKER_IDS,
    paths.BROKER_TOPICS: WatchKind.TOPICS,
    paths.DELETE_TOPICS: WatchKind.DELETE_TOPICS,
    paths.ISR_CHANGE_NOTIFICATION: WatchKind.ISR_CHANGE_NOTIFICATION,
    paths.LOG_DIR_EVENT_NOTIFICATION: WatchKind.LOG_DIR_EVENT_NOTIFICATION,
}
_EXISTENCE = frozenset({ChangeType.CREATED, ChangeType.DELETED})
_NODE_WATCHES = {
    paths.CONTROLLER: (WatchKind.CONTROLLER, _EXISTENCE | {ChangeType.DATA_CHANGED}),
    paths.REASSIGN_PARTITIONS: (WatchKind.REASSIGN_PARTITIONS, _EXISTENCE | {ChangeType.DATA_CHANGED}),
    paths.PREFERRED_REPLICA_ELECTION: (WatchKind.PREFERRED_REPLICA_ELECTION, _EXISTENCE),
}
_KEYED_CHANGES = {
    WatchKind.BROKER: frozenset({ChangeType.DATA_CHANGED}),
    WatchKind.TOPIC: frozenset({ChangeType.DATA_CHANGED}),
    WatchKind.PARTITION_STATE: frozenset({ChangeType.DATA_CHANGED}),
    WatchKind.TOPIC_CONFIG: frozenset({ChangeType.CREATED, ChangeType.DATA_CHANGED}),
}
def _keyed_node(path: str) -> tuple[WatchKind, object] | None:
    """The keyed watch a node belongs to: a broker, topic, partition-state or topic-config znode."""
    parts = path.split("/")
    if len(parts) == 4 and parts[1] == "brokers":
        broker = paths.parse_id(parts[3])
        if parts[2] == "ids" and broker is not None:
            return WatchKind.BROKER, broker
        if parts[2] == "topics":
            return WatchKind.TOPIC, parts[3]
    elif len(parts) == 4 and parts[1] == "config" and parts[2] == "topics":
        return WatchKind.TOPIC_CONFIG, parts[3]
    elif len(parts) == 7 and parts[6] == "state":
        state = _state_key(path)
        if state is not None:
            return WatchKind.PARTITION_STATE, TopicPartition(*state)
    return None


def _watch_event(path: str, change: ChangeType) -> WatchEvent | None:
    if change is ChangeType.CHILDREN_CHANGED:
        kind = _CHILD_WATCHES.get(path)
        return None if kind is None else WatchEvent(kind, change)
    fixed = _NODE_WATCHES.get(path)
    if fixed is not None:
        kind, changes = fixed
        return WatchEvent(kind, change) if change in changes else None
    keyed = _keyed_node(path)
    if keyed is None or change not in _KEYED_CHANGES[keyed[0]]:
        return None
    return WatchEvent(keyed[0], change, keyed[1])


# --- Decoding stored objects ---------------------------------------------------------------------


def _corrupt(path: str, expected: str, data: object) -> CorruptDataError:
    found = f"{type(data).__name__} {reprlib.repr(data)}"
    return CorruptDataError(f"{path}: expected {expected}, found {found}", path)


def _typed(path: str, data: object, expected: type[T]) -> T:
    if isinstance(data, expected) and not (expected is int and isinstance(data, bool)):
        return data
    raise _corrupt(path, expected.__name__, data)


def _int32(path: str, data: object) -> int:
    """What a ZooKeeper store would decode as Kafka's ``Int`` (ids, epochs)."""
    problem = int_problem(data)
    if problem is not None:
        raise CorruptDataError(f"{path}: {problem}", path)
    return data  # type: ignore[return-value]


def _present(path: str, found: tuple[object, Stat] | None) -> tuple[object, Stat]:
    if found is None:
        raise NoNodeError(f"{path} does not exist", path)
    return found


def _is_replica_list(value: object) -> bool:
    return isinstance(value, tuple) and all(type(r) is int and INT32_MIN <= r <= INT32_MAX for r in value)


def _is_partition(tp: object) -> bool:
    return isinstance(tp, TopicPartition) and type(tp.partition) is int and INT32_MIN <= tp.partition <= INT32_MAX


def _decode_assignment(path: str, found: tuple[object, Stat] | None) -> TopicAssignment:
    """The topic's assignment, if every partition id and broker id in it is Kafka's ``Int``
    (partition ids non-negative); checked a whole column at a time, since a failover reads them all."""
    assignment = _typed(path, _present(path, found)[0], TopicAssignment)
    partitions, chain = assignment.partitions, itertools.chain.from_iterable
    if not isinstance(partitions, Mapping) or not set(map(type, partitions.values())) <= {ReplicaAssignment}:
        raise _corrupt(path, "a mapping of partition ids to ReplicaAssignment", partitions)
    brokers = set(chain(map(operator.attrgetter("replicas"), partitions.values())))
    brokers.update(chain(map(operator.attrgetter("adding_replicas"), partitions.values())))
    brokers.update(chain(map(operator.attrgetter("removing_replicas"), partitions.values())))
    for ids, what, minimum in ((partitions.keys(), "partition ids", 0), (brokers, "broker ids", INT32_MIN)):
        if ids and not (set(map(type, ids)) == {int} and min(ids) >= minimum and max(ids) <= INT32_MAX):
            bad = next(i for i in ids if int_problem(i, minimum) is not None)
            raise CorruptDataError(f"{path}: {what} {int_problem(bad, minimum)}", path)
    return assignment


def _decode_state(path: str, found: tuple[object, Stat] | None) -> LeaderIsrAndControllerEpoch:
    data, stat = _present(path, found)
    if _row_of(data) is None:  # what the state table keeps aside: not a state, or not in Kafka's Int
        raise _corrupt(path, "a LeaderIsrAndControllerEpoch of 32-bit integers", data)
    return _at_version(data, stat.version)  # type: ignore[arg-type]


def _decode_config(path: str, found: tuple[object, Stat] | None) -> dict[str, str]:
    if found is None:
        return {}
    data = found[0]
    if isinstance(data, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        return dict(data)
    raise _corrupt(path, "a mapping of config names to string values", data)


def _decode_reassignments(path: str, data: object) -> dict[TopicPartition, list[int]]:
    if isinstance(data, Mapping) and all(
        _is_partition(tp) and _is_replica_list(replicas) for tp, replicas in data.items()
    ):
        return {tp: list(replicas) for tp, replicas in data.items()}
    raise _corrupt(path, "a mapping of TopicPartition to replica tuples", data)


def _decode_partition_set(path: str, data: object) -> set[TopicPartition]:
    if isinstance(data, frozenset) and all(map(_is_partition, data)):
        return set(data)
    raise _corrupt(path, "a frozenset of TopicPartition", data)


def _decode_partition_list(path: str, data: object) -> tuple[TopicPartition, ...]:
    if isinstance(data, tuple) and all(map(_is_partition, data)):
        return data
    raise _corrupt(path, "a tuple of TopicPartition", data)


def _registration_problem(name: str, data: object) -> str | None:
    """What keeps ``data`` at ``/brokers/ids/<name>`` from being a usable registration (None if nothing):
    the checks :class:`~kctl.stores.zkdata.BrokerIdZNode` makes of the JSON."""
    broker_id = paths.parse_id(name)
    if broker_id is None:
        return f"the node name {name!r} is not a broker id (0 to {INT32_MAX})"
    if not isinstance(data, BrokerInfo):
        return f"expected a BrokerInfo, found {type(data).__name__} {reprlib.repr(data)}"
    if data.id != broker_id:
        return f"it registers broker {reprlib.repr(data.id)}"
    ports = [e.port for e in data.endpoints if int_problem(e.port, 0, MAX_PORT) is not None]
    if ports:
        return f"endpoint port {reprlib.repr(ports[0])} is not a TCP port (0 to {MAX_PORT})"
    problem = int_problem(data.jmx_port)
    return None if problem is None else f"jmx_port {problem}"


def _decode_broker_id(path: str, data: object) -> int:
    return _int32(path, data)


def _at_version(state: LeaderIsrAndControllerEpoch, version: int) -> LeaderIsrAndControllerEpoch:
    """The state with the znode's version as its partition epoch (stored states already carry it)."""
    lai = state.leader_and_isr
    if lai.partition_epoch == version:
        return state
    return LeaderIsrAndControllerEpoch(lai.with_partition_epoch(version), state.controller_epoch)


def _frozen(assignment: TopicAssignment) -> TopicAssignment:
    """A copy the caller cannot change behind the store's back."""
    return TopicAssignment(MappingProxyType(dict(assignment.partitions)), assignment.topic_id)


class MemoryStore:
    """One session on a :class:`MemoryTree`, implementing the ``StateStore`` protocol.

    Sessions made with :meth:`new_session` share the tree, as brokers and controllers share a
    ZooKeeper ensemble. :meth:`expire_session` and :meth:`reconnect` let tests and simulations
    inject ZooKeeper session expiry: in between, every store call raises
    :class:`~kctl.errors.StoreUnavailableError` (listener and watch registration still work; they
    are client-side and carried over to the new session).
    """

    def __init__(self, tree: MemoryTree | None = None) -> None:
        self._tree = tree if tree is not None else MemoryTree()
        self._session = self._tree.open_session()

    def __repr__(self) -> str:
        return f"MemoryStore(session={self._session.id:#x}, {self._session.ended or 'live'})"

    @property
    def tree(self) -> MemoryTree:
        return self._tree

    @property
    def session_id(self) -> int:
        return self._session.id

    def changes_since(self, zxid: int) -> tuple[int, list[str], list[tuple[str, int]]]:
        """What changed after ``zxid`` (see :meth:`MemoryTree.changes_since`): lets a cluster keep
        its view of the store up to date without reading all of it."""
        return self._tree.changes_since(zxid)

    # --- Session and watches -------------------------------------------------------------------

    def new_session(self) -> MemoryStore:
        """Another client of the same tree (another broker or controller process)."""
        return MemoryStore(self._tree)

    def expire_session(self) -> None:
        """Expire this session as ZooKeeper would (ephemeral nodes deleted, SESSION/EXPIRED sent)."""
        self._tree.expire_session(self._session)

    def reconnect(self) -> None:
        """After expiry, open a new session keeping listeners and watches (SESSION/RECONNECTED).

        A live session is left as it is; a closed store cannot reconnect.
        """
        if self._session.ended == "closed":
            raise StoreUnavailableError("the store was closed")
        if self._session.ended:
            self._session = self._tree.open_session(self._session)

    def close(self) -> None:
        self._tree.close_session(self._session)

    def add_listener(self, listener: WatchListener) -> None:
        with self._tree._lock:
            self._session.listeners.append(listener)

    def remove_listener(self, listener: WatchListener) -> None:
        with self._tree._lock:
            if listener in self._session.listeners:
                self._session.listeners.remove(listener)

    def watch(self, kind: WatchKind, key: object = None) -> None:
        check_watch_key(kind, key)
        with self._tree._lock:
            self._session.watch(kind, key)

    def unwatch(self, kind: WatchKind, key: object = None) -> None:
        with self._tree._lock:
            self._session.unwatch(kind, key)

    # --- Controller election and fencing -------------------------------------------------------

    def get_controller_id(self) -> int | None:
        with self._txn() as txn:
            found = txn.get(paths.CONTROLLER)
        return None if found is None else _int32(paths.CONTROLLER, found[0])

    def get_controller_epoch(self) -> tuple[int, int] | None:
        with self._txn() as txn:
            found = txn.get(paths.CONTROLLER_EPOCH)
        return None if found is None else (_int32(paths.CONTROLLER_EPOCH, found[0]), found[1].version)

    def register_controller_and_increment_epoch(self, controller_id: int) -> tuple[int, int]:
        epoch, version = self._controller_epoch_or_create()
        try:
            with self._txn() as txn:
                txn.create(paths.CONTROLLER, controller_id, ephemeral=True)
                new_version = txn.set(paths.CONTROLLER_EPOCH, epoch + 1, version)
            return epoch + 1, new_version
        except (NodeExistsError, BadVersionError) as exc:
            # Kafka's recovery from a lost response: the write we retried may have been ours.
            holder, current = self.get_controller_id(), self.get_controller_epoch()
            if holder == controller_id and current is not None and current[0] == epoch + 1:
                return current
            raise ControllerMovedError(
                f"Controller moved to another broker: broker {controller_id} lost the election for "
                f"epoch {epoch + 1} (controller {holder}, epoch and its version {current})"
            ) from exc

    def _controller_epoch_or_create(self) -> tuple[int, int]:
        current = self.get_controller_epoch()
        if current is not None:
            return current
        try:
            with self._txn() as txn:
                txn.create(paths.CONTROLLER_EPOCH, INITIAL_CONTROLLER_EPOCH)
        except NodeExistsError:
            return self._controller_epoch_or_create()
        return INITIAL_CONTROLLER_EPOCH, 0

    def delete_controller(self, expected_controller_epoch_version: int) -> None:
        self._delete_paths([paths.CONTROLLER], expected_controller_epoch_version)

    # --- Brokers -------------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> int:
        path = paths.broker(info.id)
        with self._txn() as txn:
            found = txn.get(path)
            if found is not None and found[1].ephemeral_owner == self._session.id:
                return found[1].czxid  # Kafka's checked ephemeral create: our own node is a success
            txn.create(path, info, ephemeral=True)
            return txn.zxid  # the broker epoch: the czxid of the new node

    def update_broker_info(self, info: BrokerInfo) -> None:
        with self._txn() as txn:
            txn.set(paths.broker(info.id), info)

    def get_all_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        brokers: dict[int, tuple[BrokerInfo, int]] = {}
        undecodable: list[tuple[str, str]] = []
        with self._txn() as txn:
            for name in self._children(txn, paths.BROKER_IDS):
                path = _join(paths.BROKER_IDS, name)
                data, stat = _present(path, txn.get(path))
                problem = _registration_problem(name, data)
                if problem is None:
                    registered = cast(BrokerInfo, data)
                    brokers[registered.id] = (registered, stat.czxid)
                else:
                    undecodable.append((path, problem))
        for path, problem in undecodable:
            logger.warning("Ignoring undecodable broker registration at %s: %s", path, problem)
        return dict(sorted(brokers.items()))

    def get_or_create_cluster_id(self) -> str:
        with self._txn() as txn:
            found = txn.get(paths.CLUSTER_ID)
            if found is not None:
                return _typed(paths.CLUSTER_ID, found[0], str)
            cluster_id = base64.urlsafe_b64encode(self._tree._rng.randbytes(16)).rstrip(b"=").decode()
            txn.ensure_path(paths.CLUSTER_ID, cluster_id)
            return cluster_id

    # --- Topics and assignments ----------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        partitions: Mapping[int, ReplicaAssignment],
        topic_id: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        validate_topic_name(topic)
        assignment = _frozen(TopicAssignment(partitions, topic_id))
        with self._txn() as txn:
            if txn.get(paths.topic(topic)) is not None:
                raise TopicExistsError(f"Topic '{topic}' already exists.")
            self._put(txn, paths.topic_config(topic), dict(config or {}))
            txn.create(paths.topic(topic), assignment)

    def get_all_topics(self) -> set[str]:
        with self._txn() as txn:
            return set(self._children(txn, paths.BROKER_TOPICS))

    def get_topic_assignments(self, topics: Iterable[str]) -> ReadResult[str, TopicAssignment]:
        checked = self._tree._checked_assignments

        def decode(path: str, found: tuple[object, Stat] | None) -> TopicAssignment:
            known = checked.get(path)
            if found is not None and known is not None and known() is found[0]:
                return cast(TopicAssignment, found[0])
            assignment = _decode_assignment(path, found)
            checked[path] = weakref.ref(assignment)
            return assignment

        return self._read_many(topics, paths.topic, decode)

    def set_topic_assignment(
        self,
        topic: str,
        assignment: TopicAssignment,
        expected_controller_epoch_version: int = MATCH_ANY_VERSION,
    ) -> None:
        with self._fenced(expected_controller_epoch_version) as txn:
            txn.set(paths.topic(topic), _frozen(assignment))

    def get_topic_partition_ids(self, topic: str) -> list[int]:
        path = paths.topic_partitions(topic)
        with self._txn() as txn:
            names = self._children(txn, path)
        return paths.child_ids(path, names)

    def delete_topic(self, topic: str, expected_controller_epoch_version: int) -> None:
        self._delete_paths(
            [paths.topic(topic), paths.topic_config(topic), paths.topic_deletion(topic)],
            expected_controller_epoch_version,
        )

    def get_topic_configs(self, topics: Iterable[str]) -> ReadResult[str, dict[str, str]]:
        return self._read_many(topics, paths.topic_config, _decode_config)

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        with self._txn() as txn:
            self._put(txn, paths.topic_config(topic), dict(config))

    # --- Partition states ----------------------------------------------------------------------

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> ReadResult[TopicPartition, LeaderIsrAndControllerEpoch]:
        return self._read_many(partitions, paths.partition_state, _decode_state)

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_version: int,
    ) -> dict[TopicPartition, StoreError | None]:
        results: dict[TopicPartition, StoreError | None] = {}
        with self._fenced(expected_controller_epoch_version) as txn:
            for tp, state in states.items():
                try:
                    for parent in (paths.topic_partitions(tp.topic), paths.topic_partition(tp)):
                        if txn.get(parent) is None:
                            txn.create(parent)
                    txn.create(paths.partition_state(tp), _at_version(state, 0))
                    results[tp] = None
                except StoreError as exc:
                    results[tp] = exc
        return results

    def update_partition_states(
        self,
        updates: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_version: int,
    ) -> UpdateResult:
        result = UpdateResult()
        with self._fenced(expected_controller_epoch_version) as txn:
            for tp, lai in updates.items():
                written = lai.with_partition_epoch(lai.partition_epoch + 1)
                try:
                    txn.set(
                        paths.partition_state(tp),
                        LeaderIsrAndControllerEpoch(written, controller_epoch),
                        lai.partition_epoch,
                    )
                except BadVersionError:
                    result.to_retry.append(tp)
                except NoNodeError as exc:
                    result.failed[tp] = exc
                else:
                    result.successful[tp] = written
        return result

    # --- Admin requests ------------------------------------------------------------------------

    def get_partition_reassignments(self) -> dict[TopicPartition, list[int]] | None:
        return self._read_optional(paths.REASSIGN_PARTITIONS, _decode_reassignments)

    def create_partition_reassignments(self, reassignments: Mapping[TopicPartition, Sequence[int]]) -> None:
        with self._txn() as txn:
            txn.create(paths.REASSIGN_PARTITIONS, _stored_reassignments(reassignments))

    def set_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int]], expected_controller_epoch_version: int
    ) -> None:
        with self._fenced(expected_controller_epoch_version) as txn:
            self._put(txn, paths.REASSIGN_PARTITIONS, _stored_reassignments(reassignments))

    def delete_partition_reassignments(self, expected_controller_epoch_version: int) -> None:
        self._delete_paths([paths.REASSIGN_PARTITIONS], expected_controller_epoch_version)

    def get_preferred_replica_election(self) -> set[TopicPartition] | None:
        return self._read_optional(paths.PREFERRED_REPLICA_ELECTION, _decode_partition_set)

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        with self._txn() as txn:
            txn.create(paths.PREFERRED_REPLICA_ELECTION, frozenset(partitions))

    def delete_preferred_replica_election(self, expected_controller_epoch_version: int) -> None:
        self._delete_paths([paths.PREFERRED_REPLICA_ELECTION], expected_controller_epoch_version)

    def get_topic_deletions(self) -> list[str]:
        with self._txn() as txn:
            return self._children(txn, paths.DELETE_TOPICS)

    def create_topic_deletion(self, topic: str) -> None:
        """Mark ``topic`` for deletion, as ``AdminZkClient.deleteTopic``."""
        with self._txn() as txn:
            if txn.get(paths.topic(topic)) is None:
                raise UnknownTopicOrPartitionError(f"Topic `{topic}` to delete does not exist")
            if txn.get(paths.topic_deletion(topic)) is not None:
                raise TopicAlreadyMarkedForDeletionError(f"Topic {topic} is already marked for deletion")
            txn.create(paths.topic_deletion(topic))

    def delete_topic_deletions(self, topics: Iterable[str], expected_controller_epoch_version: int) -> None:
        self._delete_paths(map(paths.topic_deletion, topics), expected_controller_epoch_version)

    # --- Notifications -------------------------------------------------------------------------

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        prefix = paths.isr_change_notification(paths.ISR_CHANGE_PREFIX)
        return self._create_sequential(prefix, tuple(partitions))

    def get_isr_change_notifications(self) -> list[str]:
        with self._txn() as txn:
            return self._children(txn, paths.ISR_CHANGE_NOTIFICATION)

    def get_isr_change_notification_partitions(self, names: Iterable[str]) -> list[TopicPartition]:
        found = self._read_existing(names, paths.isr_change_notification, _decode_partition_list)
        return list(itertools.chain.from_iterable(found))

    def delete_isr_change_notifications(
        self, names: Iterable[str], expected_controller_epoch_version: int
    ) -> None:
        self._delete_paths(map(paths.isr_change_notification, names), expected_controller_epoch_version)

    def create_log_dir_event_notification(self, broker_id: int) -> str:
        prefix = paths.log_dir_event_notification(paths.LOG_DIR_EVENT_PREFIX)
        return self._create_sequential(prefix, broker_id)

    def get_log_dir_event_notifications(self) -> list[str]:
        with self._txn() as txn:
            return self._children(txn, paths.LOG_DIR_EVENT_NOTIFICATION)

    def get_log_dir_event_brokers(self, names: Iterable[str]) -> list[int]:
        return self._read_existing(names, paths.log_dir_event_notification, _decode_broker_id)

    def delete_log_dir_event_notifications(
        self, names: Iterable[str], expected_controller_epoch_version: int
    ) -> None:
        self._delete_paths(map(paths.log_dir_event_notification, names), expected_controller_epoch_version)

    # --- The native engine's fast path ----------------------------------------------------------

    def native_begin(self) -> tuple[StateTable, int, int, bool]:
        """See :meth:`MemoryTree.native_begin` (the native engine detects this method)."""
        return self._tree.native_begin(self._session)

    def native_end(self, wrote: bool, written: Sequence[tuple[str, int]] = ()) -> None:
        """See :meth:`MemoryTree.native_end`."""
        self._tree.native_end(wrote, written)

    # --- Inspection ----------------------------------------------------------------------------

    def partition_history(self, tp: TopicPartition) -> list[PartitionSnapshot]:
        """Every stored version of ``tp``, oldest first (needs ``MemoryTree(record_history=True)``)."""
        return self._tree.partition_history(tp)

    # --- Helpers -------------------------------------------------------------------------------

    def _txn(self) -> AbstractContextManager[Transaction]:
        return self._tree.transaction(self._session)

    @contextmanager
    def _fenced(self, expected_controller_epoch_version: int) -> Iterator[Transaction]:
        """A transaction that first checks ``/controller_epoch``'s version, as Kafka wraps every
        controller write in ``[check(/controller_epoch, version), op]``; -1 means unfenced."""
        with self._txn() as txn:
            if expected_controller_epoch_version != MATCH_ANY_VERSION:
                try:
                    txn.check(paths.CONTROLLER_EPOCH, expected_controller_epoch_version)
                except (BadVersionError, NoNodeError) as exc:
                    raise ControllerMovedError(
                        "Controller epoch zkVersion check fails. "
                        f"Expected zkVersion = {expected_controller_epoch_version}"
                    ) from exc
            yield txn

    @staticmethod
    def _children(txn: Transaction, path: str) -> list[str]:
        """Sorted children; none when the parent does not exist (as Kafka's getChildren)."""
        return txn.children(path) if txn.get(path) is not None else []

    @staticmethod
    def _put(txn: Transaction, path: str, data: object) -> None:
        if txn.get(path) is None:
            txn.create(path, data)
        else:
            txn.set(path, data)

    def _read_many(
        self,
        keys: Iterable[K],
        path_of: Callable[[K], str],
        decode: Callable[[str, tuple[object, Stat] | None], V],
    ) -> ReadResult[K, V]:
        result: ReadResult[K, V] = ReadResult()
        with self._txn() as txn:
            for key in keys:
                path = path_of(key)
                try:
                    result.values[key] = decode(path, txn.get(path))
                except StoreError as exc:
                    result.errors[key] = exc
        return result

    def _read_optional(self, path: str, decode: Callable[[str, object], T]) -> T | None:
        with self._txn() as txn:
            found = txn.get(path)
        return None if found is None else decode(path, found[0])

    def _read_existing(
        self, names: Iterable[str], path_of: Callable[[str], str], decode: Callable[[str, object], T]
    ) -> list[T]:
        """The decoded content of the named nodes that exist (others were already processed)."""
        with self._txn() as txn:
            found = [(path, txn.get(path)) for path in map(path_of, names)]
        return [
            value for path, entry in found if entry is not None
            for value in decoded_or_skipped(path, lambda: decode(path, entry[0]))  # noqa: B023 (called at once)
        ]

    def _create_sequential(self, prefix_path: str, data: object) -> str:
        with self._txn() as txn:
            return _split(txn.create(prefix_path, data, sequential=True))[1]

    def _delete_paths(self, doomed: Iterable[str], expected_controller_epoch_version: int) -> None:
        """Fenced recursive deletes of whichever of the paths exist (Kafka's ``deletePath``)."""
        with self._fenced(expected_controller_epoch_version) as txn:
            for path in doomed:
                txn.delete_recursive(path)


def _stored_reassignments(
    reassignments: Mapping[TopicPartition, Sequence[int]],
) -> dict[TopicPartition, tuple[int, ...]]:
    return {tp: tuple(replicas) for tp, replicas in reassignments.items()}


@hookimpl
def kctl_register_state_stores(register: StateStoreRegistry) -> None:
    """Register the embedded store as ``memory``: kctl's default, registered like any plugin's."""
    register.add("memory", MemoryStore)


__all__ = ["MemoryStore", "MemoryTree", "PartitionSnapshot", "Session", "Stat", "Transaction"]
