"""The in-memory ZooKeeper: a znode tree with sessions, transactions and history.

:class:`MemoryTree` plays the ZooKeeper server: a znode tree with versions, zxids, ephemeral
nodes owned by sessions, persistent-sequential children and all-or-nothing transactions, watch
events routed to sessions, and (optionally) every stored version of each partition.
:class:`TreeClient` is one client session on it, implementing the
:class:`~kctl.stores.znode.ZnodeClient` protocol that Kafka's semantics
(:class:`~kctl.stores.memory.MemoryStore`) are written over.

Znodes hold Python objects instead of JSON (a topic znode holds a ``TopicAssignment``); the
memory store checks their type when it reads them, so data planted with
:meth:`MemoryTree.set_raw` surfaces as :class:`~kctl.errors.CorruptDataError` exactly where a
ZooKeeper store would fail to decode JSON. Partition-state znodes, the bulk of the tree, live in a
native table (``kctl._engine.StateTable``) with the same versions and zxids, so that the native
engine reads and writes them without a Python object per partition; :class:`Transaction` routes
their paths there.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
from collections import deque
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableSet, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, TypeVar, cast

from kctl._engine import StateTable
from kctl.assignment_map import AssignmentMap, changed_between
from kctl.errors import (
    BadVersionError,
    IllegalStateError,
    NodeExistsError,
    NoNodeError,
    StoreError,
    StoreUnavailableError,
)
from kctl.model import (
    INT32_MAX,
    INT32_MIN,
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.stores import paths
from kctl.stores.base import (
    MATCH_ANY_VERSION,
    ChangeType,
    TopicAssignment,
    WatchEvent,
    WatchKind,
    WatchListener,
    check_watch_key,
)

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

from kctl.stores.znode import Failure, Found, ItemResult, Op, OpResult, Stat, controller_moved
_Delivery = tuple[WatchListener, WatchEvent]
_DELETED = object()
"""Marks a deletion in a transaction's record of written data."""


class _Node:
    __slots__ = ("children", "czxid", "data", "ephemeral_owner", "mzxid", "sequence", "version")

    def __init__(self, path: str, data: object, zxid: int, ephemeral_owner: int) -> None:
        self.data = data
        self.version = 0
        self.czxid = zxid
        self.mzxid = zxid
        self.ephemeral_owner = ephemeral_owner
        self.children: MutableSet[str] = _PartitionDirs() if _is_partitions_dir(path) else set()
        self.sequence = 0  # the next persistent-sequential suffix among this node's children

    def stat(self) -> Stat:
        return Stat(self.version, self.czxid, self.mzxid, self.ephemeral_owner)


class _PartitionDirs(MutableSet[str]):
    """The children of a topic's ``/brokers/topics/<t>/partitions`` znode, the one znode per
    partition besides its state: a partition's znode that is plain (no data, never set, not
    ephemeral, no child but its state, which the state table holds) is only its czxid in a column
    indexed by partition id (8 bytes instead of a node, its path and a set). Any other child is a
    node of the tree, named in ``others``; a plain one is made a node when it is set or gets
    another child (:meth:`Transaction._materialize`)."""

    __slots__ = ("count", "czxid", "others")

    def __init__(self) -> None:
        self.czxid = array("q")
        """The czxid of the plain znode of each partition id, -1 where there is none."""
        self.count = 0
        self.others: set[str] = set()

    def _index(self, name: str) -> int | None:
        """The column index of a partition named as Kafka names them (``str(id)``), when it is
        one: ids up to twice the number held plus 1,024, so planted far-off ids cost no memory."""
        if not (name.isascii() and name.isdigit()) or (len(name) > 1 and name[0] == "0") or len(name) > 10:
            return None
        at = int(name)
        return at if at < max(len(self.czxid), 2 * self.count + 1024) else None

    def plain(self, name: str) -> int | None:
        """The czxid of the plain znode ``name``, None when it is not one."""
        at = self._index(name)
        czxid = self.czxid[at] if at is not None and at < len(self.czxid) else -1
        return None if czxid < 0 else czxid

    def add_plain(self, name: str, czxid: int) -> bool:
        """Hold a new plain znode; False when ``name`` is not a partition id the column takes."""
        at = self._index(name)
        if at is None or name in self.others:
            return False
        if at >= len(self.czxid):
            self.czxid.extend(itertools.repeat(-1, at + 1 - len(self.czxid)))
        self.czxid[at] = czxid
        self.count += 1
        return True

    def drop_plain(self, name: str) -> None:
        at = self._index(name)
        if at is not None and at < len(self.czxid) and self.czxid[at] >= 0:
            self.czxid[at] = -1
            self.count -= 1

    def __contains__(self, name: object) -> bool:
        return name in self.others or (isinstance(name, str) and self.plain(name) is not None)

    def __iter__(self) -> Iterator[str]:
        yield from self.others
        yield from (str(at) for at, czxid in enumerate(self.czxid) if czxid >= 0)

    def __len__(self) -> int:
        return self.count + len(self.others)

    def add(self, value: str) -> None:
        self.others.add(value)

    def discard(self, value: str) -> None:
        self.others.discard(value)


def _is_partitions_dir(path: str) -> bool:
    """Whether ``path`` is a topic's ``/brokers/topics/<t>/partitions``."""
    return path.endswith("/partitions") and path.startswith(paths.BROKER_TOPICS + "/") and path.count("/") == 4


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
    skips identical objects), in blocks, descending into those that differ, instead of partition
    by partition.
    """
    return _diff(previous, _Listed.of(previous), current)[0]


class _Listed(NamedTuple):
    """A topic's assignment as its partition ids and assignments, in order."""

    keys: list[int]
    values: list[ReplicaAssignment]

    @classmethod
    def of(cls, assignment: Mapping[int, ReplicaAssignment]) -> _Listed:
        return cls(list(assignment), list(assignment.values()))


def _diff(previous: Mapping[int, ReplicaAssignment], listed: _Listed,
          current: Mapping[int, ReplicaAssignment]) -> tuple[list[int], _Listed]:
    """:func:`_changed_partitions` with ``previous`` already listed (the history keeps the last
    write of each topic listed); returns ``current`` listed too."""
    keys, new = list(current), list(current.values())
    if keys != listed.keys:
        return [p for p in keys if previous.get(p) != current[p]], _Listed(keys, new)
    changed: list[int] = []
    if new != listed.values:
        _scan(keys, new, listed.values, 0, len(keys), changed)
    return changed, _Listed(keys, new)


_FAN = 16
"""How many blocks :func:`_scan` cuts a range into."""


def _scan(keys: list[int], new: list[ReplicaAssignment], old: list[ReplicaAssignment], lo: int, hi: int,
          changed: list[int]) -> None:
    """Append the keys in ``[lo, hi)`` whose values differ: the range cut into :data:`_FAN` blocks
    compared in C, descending only into those that differ (a write changes one partition or two,
    so a rewrite of 5,000 partitions compares about 50 slices instead of halving 12 times)."""
    step = -(-(hi - lo) // _FAN)
    for i in range(lo, hi, step):
        j = min(i + step, hi)
        if new[i:j] == old[i:j]:
            continue
        if j - i <= _FAN:
            changed.extend(keys[k] for k in range(i, j) if new[k] is not old[k] and new[k] != old[k])
        else:
            _scan(keys, new, old, i, j, changed)


class _History:
    """Assignment rows of every committed topic-znode write; the state table keeps the state rows.

    Both draw sequence numbers from the table, so :meth:`MemoryTree.partition_history` merges them
    in write order.
    """

    def __init__(self, states: StateTable) -> None:
        self._states = states
        self.rows: dict[TopicPartition, list[tuple[int, ReplicaAssignment]]] = {}
        self._assignments: dict[str, tuple[Mapping[int, ReplicaAssignment], _Listed | None]] = {}
        """Each topic's last write, with it listed (None until needed: a write that shares its
        base with the previous one is compared by its overlay, see :func:`changed_between`)."""

    def record(self, written: list[tuple[int, str, object]]) -> None:
        for seq, path, data in written:
            target = _keyed_node(path)
            if target is not None and target[0] is WatchKind.TOPIC and isinstance(target[1], str):
                self._topic_written(seq, target[1], data)

    def _topic_written(self, seq: int, topic: str, data: object) -> None:
        if data is _DELETED:  # a re-created topic starts a history of its own
            for partition in self._assignments.pop(topic, ({}, None))[0]:
                self.rows.pop(TopicPartition(topic, partition), None)
            self._states.forget_history(topic)
        elif isinstance(data, TopicAssignment):
            partitions = data.partitions
            previous, listed = self._assignments.get(topic, ({}, _Listed([], [])))
            changed = None
            if isinstance(previous, AssignmentMap) and isinstance(partitions, AssignmentMap):
                changed = changed_between(previous, partitions)
            if changed is None:
                changed, listed = _diff(previous, listed if listed is not None else _Listed.of(previous), partitions)
            else:
                listed = None
            for partition in changed:
                self.rows.setdefault(TopicPartition(topic, partition), []).append((seq, partitions[partition]))
            self._assignments[topic] = (partitions, listed)

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
            leader_and_isr = None if written is None else written.leader_and_isr
            snapshots.append(
                PartitionSnapshot(
                    assignment.replicas,
                    assignment.adding_replicas,
                    assignment.removing_replicas,
                    NO_LEADER if leader_and_isr is None else leader_and_isr.leader,
                    -1 if leader_and_isr is None else leader_and_isr.leader_epoch,
                    () if leader_and_isr is None else leader_and_isr.isr,
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
        self._nodes: dict[str, _Node] = {"/": _Node("/", None, 0, 0)}
        self._zxid = 0
        self._rng = rng if rng is not None else random.Random()
        self._states = StateTable(record_history)
        self._corrupt_states: dict[tuple[str, int], object] = {}
        """What state znodes holding something other than a partition state hold, by (topic,
        partition) (their slot in the table is marked corrupt)."""
        self._history = _History(self._states) if record_history else None
        self._sessions: dict[int, Session] = {}
        self._session_ids = itertools.count(1)
        self._pending: deque[_Delivery] = deque()
        self._delivering = False
        with self.transaction() as txn:
            for path in paths.PERSISTENT_PATHS:
                txn.ensure_path(path)

    def random_bytes(self, count: int) -> bytes:
        """Bytes from the tree's generator (a seeded run makes the same cluster id)."""
        return self._rng.randbytes(count)

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
                txn.rollback_to((0, 0, 0, 0))
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

    def update_partition_states(
        self, session: Session, updates: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int, fence: int,
    ) -> tuple[dict[TopicPartition, LeaderAndIsr], list[TopicPartition], list[TopicPartition]] | None:
        """:meth:`TreeClient.set_partition_states` of a controller's bulk update in one native call
        (``StateTable.update_states``): the same fenced transaction, versions, zxid, history and
        watch events, with no Python object per partition but the written states. The states
        written (at their new versions), the partitions at another version and those without a
        state znode; None, with nothing done, when ``updates`` is not a plain dict or an update is
        not a partition state the table holds as a row (the general path then writes them)."""
        if type(updates) is not dict:
            return None
        with self._lock:
            _check_live(session)
            if fence != MATCH_ANY_VERSION:
                epoch = self._nodes.get(paths.CONTROLLER_EPOCH)
                if epoch is None or epoch.version != fence:
                    raise controller_moved(fence)
            outcome = self._states.update_states(updates, controller_epoch, self._zxid + 1, LeaderAndIsr,
                                                 LeaderRecoveryState)
            if outcome is None or not outcome[0]:  # nothing written: nothing to commit
                return outcome
            self._zxid += 1
            if self._corrupt_states or any(s.state_watches and s.listeners for s in self._sessions.values()):
                for tp in outcome[0]:
                    self._corrupt_states.pop(tp, None)
                self._route([], [], list(outcome[0]))
        self._drain()
        return outcome

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

    def native_create_partition_znodes(self, creates: Sequence[tuple[str, Sequence[int], Sequence[int]]]) -> bool:
        """Between :meth:`native_begin` and :meth:`native_end` (under the lock): make plain the
        partition znodes of a creation the engine writes the states of, with the zxid the
        operation commits with. ``creates`` holds per topic the ids of the partition znodes to
        create and those that must be there already, plain (the table then holds their new
        states), each as :meth:`Transaction.create_partition_znode` and
        :meth:`Transaction.create_state` would find it. All or nothing: False, with nothing
        changed, when any is not (a topic without a ``/partitions`` of its own, an id the column
        does not take, a znode there already, one made a node of the tree), for the general path
        to create them and name the errors. A creation fires no watch (see :func:`_watch_event`)
        and the history records no partition znode."""
        planned = []
        for topic, new, existing in creates:
            parent = self._nodes.get(paths.topic_partitions(topic)) if topic and "/" not in topic else None
            dirs = None if parent is None or parent.ephemeral_owner else parent.children
            if not isinstance(dirs, _PartitionDirs) or any(dirs.plain(str(p)) is None for p in existing):
                return False
            count, size, column, others = dirs.count, len(dirs.czxid), dirs.czxid, dirs.others
            for p in new:  # as add_plain would take them one by one
                if not 0 <= p < max(size, 2 * count + 1024) or (p < size and column[p] >= 0) or str(p) in others:
                    return False
                count, size = count + 1, max(size, p + 1)
            planned.append((dirs, new, size))
        zxid = self._zxid + 1
        for dirs, new, size in planned:
            dirs.czxid.extend(itertools.repeat(-1, size - len(dirs.czxid)))
            column = dirs.czxid
            for p in new:
                column[p] = zxid
            dirs.count += len(new)
        return True

    # --- Sessions --------------------------------------------------------------------------------
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

    def _route(self, changed_paths: list[str], changes: list[ChangeType],
               states_set: Sequence[tuple[str, int]] = ()) -> None:
        """Queue the events of a committed transaction for the sessions watching them (under the
        lock): the changed paths', then those of the state znodes set by key (``states_set``).

        Repeated events of one transaction are delivered once, as ZooKeeper fires a watch once.
        """
        watching = [s for s in self._sessions.values() if s.watches and s.listeners]
        if not watching:
            return
        events = dict.fromkeys(e for e in map(_watch_event, changed_paths, changes) if e is not None)
        if states_set and any(s.state_watches for s in watching):
            changed = ChangeType.DATA_CHANGED
            events.update(dict.fromkeys(WatchEvent(WatchKind.PARTITION_STATE, changed, TopicPartition(*key))
                                        for key in states_set))
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


class _PlainWritten(NamedTuple):
    """A plain partition znode created (``czxid`` -1) or deleted."""

    dirs: _PartitionDirs
    name: str
    czxid: int


_StateRow = tuple[int, Sequence[int], int, int, int, int]
_Slot = tuple[_StateRow | None, int, int, int]
"""A state-table slot: (state row or None when corrupt, version, czxid, mzxid)."""
_ABSENT = object()


class _StateWritten(NamedTuple):
    """A write to the state table: what to put back (slot, corrupt data) and the history row to drop."""

    path: str | None
    """None for a :meth:`Transaction.set_state`, which changes no parent's children."""
    key: tuple[str, int]
    previous: _Slot | None
    corrupt: object
    parent: _Node | None
    """None when the parent is a plain partition znode, whose children the state table tells."""
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
        self._undo: list[_Created | _Changed | _Deleted | _PlainWritten | _StateWritten] = []
        self._changed_paths: list[str] = []
        self._changes: list[ChangeType] = []
        self._states_set: list[tuple[str, int]] = []
        """The state znodes :meth:`set_state` wrote, routed to watchers by key (no path to parse)."""
        self._recording = tree._history is not None
        self._written: list[tuple[int, str, object]] = []

    def get(self, path: str) -> tuple[object, Stat] | None:
        """The node's data and stat, or None when it does not exist."""
        key = _state_key(path)
        if key is not None:
            return self.get_state(key)
        node = self._nodes.get(path)
        if node is None:
            stat = self._plain_stat(path)
            return None if stat is None else (None, stat)
        return node.data, node.stat()

    def get_state(self, key: tuple[str, int]) -> Found:
        """:meth:`get` of the state znode of partition ``key``, found in the table by key."""
        slot = self._states.get(*key)
        if slot is None:
            return None
        row, version, czxid, mzxid = slot
        data = self._tree._corrupt_states.get(key) if row is None else _state_of(row)
        return data, Stat(version, czxid, mzxid, 0)

    def stat(self, path: str) -> Stat | None:
        """The node's stat (without reading its data), or None when it does not exist."""
        key = _state_key(path)
        if key is not None:
            slot = self._states.get(*key)
            return None if slot is None else Stat(slot[1], slot[2], slot[3], 0)
        node = self._nodes.get(path)
        return self._plain_stat(path) if node is None else node.stat()

    def exists(self, path: str) -> bool:
        key = _state_key(path)
        if key is not None:
            return self._states.get(*key) is not None
        return path in self._nodes or self._plain(path) is not None

    def children(self, path: str) -> list[str]:
        """The names of the node's children, sorted."""
        if _state_key(path) is not None and self.exists(path):
            return []  # state znodes have no children
        node = self._nodes.get(path)
        if node is None and self._plain(path) is not None:
            return ["state"] if self.exists(_join(path, "state")) else []
        return sorted(self._node(path).children)

    def _plain(self, path: str) -> tuple[_PartitionDirs, str, int] | None:
        """The column holding ``path``, its name and czxid, when it is a plain partition znode."""
        parent_path, name = _split(path)
        parent = self._nodes.get(parent_path)
        if parent is None or not isinstance(parent.children, _PartitionDirs):
            return None
        czxid = parent.children.plain(name)
        return None if czxid is None else (parent.children, name, czxid)

    def _plain_stat(self, path: str) -> Stat | None:
        plain = self._plain(path)
        return None if plain is None else Stat(0, plain[2], plain[2], 0)

    def _materialize(self, path: str) -> _Node | None:
        """Make the plain partition znode at ``path`` a node of the tree (None when it is not
        one), before it is set or gets a child the state table does not hold; the znode stays
        the same, so a rollback leaves the node."""
        plain = self._plain(path)
        if plain is None:
            return None
        dirs, name, czxid = plain
        node = _Node(path, None, czxid, 0)
        if self.exists(_join(path, "state")):
            node.children.add("state")
        dirs.drop_plain(name)
        dirs.others.add(name)
        self._nodes[path] = node
        return node

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
        key = _state_key(path)
        parent = self._nodes.get(parent_path)
        if key is not None and parent is None and self._plain(parent_path) is not None:
            return self._create_state(path, parent_path, data, key, None, ephemeral=ephemeral)
        if parent is None:
            parent = self._materialize(parent_path)
        if parent is None:
            raise NoNodeError(f"cannot create {path}: {parent_path} does not exist", path)
        if parent.ephemeral_owner:
            raise StoreError(f"cannot create {path}: ephemeral {parent_path} cannot have children", path)
        if sequential:
            name = paths.sequence_name(name, parent.sequence)
            path = _join(parent_path, name)
        dirs = parent.children
        # self.exists(path), with the key or the parent in hand (a creation makes two znodes per partition)
        if sequential:
            exists = self.exists(path)
        elif key is not None:
            exists = self._states.get(*key) is not None
        else:
            exists = path in self._nodes or (isinstance(dirs, _PartitionDirs) and dirs.plain(name) is not None)
        if exists:
            raise NodeExistsError(f"{path} already exists", path)
        if ephemeral and self._session is None:
            raise StoreError(f"cannot create ephemeral {path} outside a session", path)
        if key is not None:
            return self._create_state(path, parent_path, data, key, parent, ephemeral=ephemeral)
        if (isinstance(dirs, _PartitionDirs) and data is None and not ephemeral and not sequential
                and dirs.add_plain(name, self.zxid)):
            self._wrote(_PlainWritten(dirs, name, -1), path, data, ChangeType.CREATED, parent_path)
            return path
        owner = self._session if ephemeral else None
        self._nodes[path] = _Node(path, data, self.zxid, owner.id if owner else 0)
        parent.children.add(name)
        if sequential:
            parent.sequence += 1
        if owner:
            owner.ephemerals.add(path)
        undo = _Created(path, parent, name, owner, sequential)
        self._wrote(undo, path, data, ChangeType.CREATED, parent_path)
        return path

    def create_partition_znode(self, tp: TopicPartition) -> str:
        """:meth:`create` of ``tp``'s partition znode, without data: a topic's creation makes one
        per partition (and its state, :meth:`create_state`), here without parsing its path back.
        Anything but a new plain znode of a Kafka key takes :meth:`create`'s general path, with
        its checks and errors."""
        path = paths.topic_partition(tp)
        if _is_key(tp):
            parent_path = paths.topic_partitions(tp.topic)
            parent = self._nodes.get(parent_path)
            dirs = None if parent is None or parent.ephemeral_owner else parent.children
            name = str(tp.partition)
            if (isinstance(dirs, _PartitionDirs) and path not in self._nodes and dirs.plain(name) is None
                    and dirs.add_plain(name, self.zxid)):
                self._wrote(_PlainWritten(dirs, name, -1), path, None, ChangeType.CREATED, parent_path)
                return path
        return self.create(path)

    def create_state(self, tp: TopicPartition, partition_path: str, data: object) -> str:
        """:meth:`create` of the state znode of ``tp``, whose partition znode is at
        ``partition_path``, found in the table by key when that znode is plain."""
        path = _join(partition_path, "state")
        if not _is_key(tp) or partition_path in self._nodes or self._plain(partition_path) is None:
            return self.create(path, data)
        return self._create_state(path, partition_path, data, (tp.topic, tp.partition), None, ephemeral=False)

    def _create_state(self, path: str, parent_path: str, data: object, key: tuple[str, int], parent: _Node | None, *,
                      ephemeral: bool) -> str:
        """Create a state znode in the table (``parent`` None: a plain partition znode)."""
        if ephemeral:
            raise StoreError(f"cannot create {path}: partition-state znodes are persistent here", path)
        states = self._states
        if states.get(*key) is not None:  # self.exists(path), with the key in hand
            raise NodeExistsError(f"{path} already exists", path)
        row = self._state_row(key, data)
        _, seq = states.create(key[0], key[1], row, self.zxid)
        if parent is not None:
            parent.children.add("state")
        self._wrote(_StateWritten(path, key, None, _ABSENT, parent, seq), path, data, ChangeType.CREATED, parent_path)
        return path

    def set(self, path: str, data: object, version: int = MATCH_ANY_VERSION) -> int:
        """Replace the node's data, conditional on ``version`` unless -1; returns the new version."""
        return self.set_and_stat(path, data, version).version

    def set_and_stat(self, path: str, data: object, version: int = MATCH_ANY_VERSION) -> Stat:
        """:meth:`set`, returning the node's new stat (a multi's answer)."""
        key = _state_key(path)
        if key is not None:
            previous, new_version = self._set_state(key, data, version, path)
            self._wrote(_StateWritten(path, key, previous[:4], previous[4], None, previous[5]), path, data, ChangeType.DATA_CHANGED)
            return Stat(new_version, previous[2], self.zxid, 0)
        node = self._node(path)
        self._check_version(path, node.version, version)
        undo = _Changed(node, node.data, node.version, node.mzxid)
        node.data, node.version, node.mzxid = data, node.version + 1, self.zxid
        self._wrote(undo, path, data, ChangeType.DATA_CHANGED)
        return node.stat()

    def set_state(self, key: tuple[str, int], data: object, version: int = MATCH_ANY_VERSION) -> int:
        """:meth:`set` of the state znode of partition ``key``, found in the table by key; returns
        the new version. Watchers hear of it by key, and its record keeps no path (made only for
        an error): a controller writes tens of thousands of states in one multi."""
        previous, new_version = self._set_state(key, data, version, None)
        self._undo.append(_StateWritten(None, key, previous[:4], previous[4], None, previous[5]))
        self._states_set.append(key)
        return new_version

    def _set_state(self, key: tuple[str, int], data: object, version: int,
                   path: str | None) -> tuple[tuple[_StateRow | None, int, int, int, object, int], int]:
        """Write a state znode's slot: its previous slot with the corrupt data it held and the
        write's history sequence, and its new version."""
        slot = self._states.get(*key)
        if slot is None or (version != MATCH_ANY_VERSION and slot[1] != version):
            path = path or paths.partition_state(TopicPartition(*key))
            self._check_version(path, self._slot(path, key)[1], version)
        corrupt = self._tree._corrupt_states.get(key, _ABSENT)
        row = self._state_row(key, data)
        _, new_version, seq = self._states.set(key[0], key[1], row, MATCH_ANY_VERSION, self.zxid)
        return (*slot, corrupt, seq), new_version  # type: ignore[misc]

    def delete(self, path: str, version: int = MATCH_ANY_VERSION) -> None:
        """Delete a childless node, conditional on ``version`` unless -1."""
        parent_path, name = _split(path)
        key = _state_key(path)
        if key is not None:
            previous = self._slot(path, key)
            self._check_version(path, previous[1], version)
            corrupt = self._tree._corrupt_states.pop(key, _ABSENT)
            deleted = self._states.delete(*key)
            seq = 0 if deleted is None else deleted[1]
            parent = self._nodes.get(parent_path)
            if parent is not None:
                parent.children.discard(name)
            self._wrote(_StateWritten(path, key, previous, corrupt, parent, seq), path, _DELETED, ChangeType.DELETED, parent_path)
            return
        plain = None if path in self._nodes else self._plain(path)
        if plain is not None:
            self._check_version(path, 0, version)
            if self.exists(_join(path, "state")):
                raise StoreError(f"cannot delete {path}: it has children", path)
            dirs, plain_name, czxid = plain
            dirs.drop_plain(plain_name)
            self._wrote(_PlainWritten(dirs, plain_name, czxid), path, _DELETED, ChangeType.DELETED, parent_path)
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
            stack.extend(_join(current, child) for child in self.children(current))
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

    def savepoint(self) -> tuple[int, int, int, int]:
        """A mark that :meth:`rollback_to` undoes the later operations back to."""
        return len(self._undo), len(self._changed_paths), len(self._written), len(self._states_set)

    def rollback_to(self, savepoint: tuple[int, int, int, int]) -> None:
        """Undo the operations since ``savepoint`` (one item of a multi that failed)."""
        undo, changed, written, states_set = savepoint
        undone = self._undo[undo:]
        del self._undo[undo:], self._changed_paths[changed:], self._changes[changed:], self._written[written:]
        del self._states_set[states_set:]
        for record in reversed(undone):
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
                case _PlainWritten(dirs, name, czxid):
                    if czxid < 0:
                        dirs.drop_plain(name)
                    else:
                        dirs.add_plain(name, czxid)
                case _StateWritten(path, (topic, partition) as key, previous, corrupt, parent, seq):
                    self._states.restore(topic, partition, previous, seq)
                    if corrupt is _ABSENT:
                        self._tree._corrupt_states.pop(key, None)
                    else:
                        self._tree._corrupt_states[key] = corrupt
                    if parent is None or path is None:
                        pass
                    elif previous is None:
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
        tree._route(self._changed_paths, self._changes, self._states_set)

    def _node(self, path: str) -> _Node:
        node = self._nodes.get(path) or self._materialize(path)
        if node is None:
            raise NoNodeError(f"{path} does not exist", path)
        return node

    def _slot(self, path: str, key: tuple[str, int]) -> _Slot:
        slot: _Slot | None = self._states.get(*key)
        if slot is None:
            raise NoNodeError(f"{path} does not exist", path)
        return slot

    def _state_row(self, key: tuple[str, int], data: object) -> _StateRow | None:
        """The table's row for ``data``; anything but a well-formed state is kept aside as corrupt."""
        row = _row_of(data)
        if row is None:
            self._tree._corrupt_states[key] = data
        elif self._tree._corrupt_states:
            self._tree._corrupt_states.pop(key, None)
        return row

    @staticmethod
    def _check_version(path: str, current: int, version: int) -> None:
        if version != MATCH_ANY_VERSION and current != version:
            raise BadVersionError(f"{path} is at version {current}, not {version}", path)

    def _wrote(
        self,
        undo: _Created | _Changed | _Deleted | _PlainWritten | _StateWritten,
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
        # The history keeps topic znodes' writes (the table keeps state rows): a creation's
        # hundreds of thousands of partition znodes are not recorded only to be passed over.
        if self._recording and not isinstance(undo, _StateWritten) and path.startswith(_TOPICS) and path.count("/") == 3:
            self._written.append((self._states.next_seq(), path, data))


def _check_live(session: Session) -> None:
    if session.ended:
        reconnect = "; reconnect() opens a new session" if session.ended == "expired" else ""
        raise StoreUnavailableError(f"session {session.id:#x} has {session.ended}{reconnect}")


_TOPICS = "/brokers/topics/"
_STATE = "/state"


def _state_key(path: str) -> tuple[str, int] | None:
    """``(topic, partition)`` when ``path`` is a partition-state znode (kept in the state table):
    ``/brokers/topics/<topic>/partitions/<p>/state`` with no other ``/``. Every state read and
    write of a controller passes here, so no split into a list and no regular expression."""
    if not (path.endswith(_STATE) and path.startswith(_TOPICS)):
        return None
    topic, partitions, name = path[len(_TOPICS):-len(_STATE)].partition("/partitions/")
    if not partitions or "/" in topic or "/" in name:
        return None
    partition = paths.parse_id(name)
    return None if partition is None else (topic, partition)


def _is_key(tp: TopicPartition) -> bool:
    """Whether ``tp``'s znode paths are valid and name it back (:func:`_state_key`)."""
    topic, partition = tp.topic, tp.partition
    return bool(topic) and "/" not in topic and type(partition) is int and 0 <= partition <= INT32_MAX


def _row_of(data: object) -> _StateRow | None:
    """A partition state as the table stores it; None for anything else."""
    if not isinstance(data, LeaderIsrAndControllerEpoch):
        return None
    leader_and_isr = data.leader_and_isr
    if not (isinstance(leader_and_isr, LeaderAndIsr)
            and isinstance(leader_and_isr.leader_recovery_state, LeaderRecoveryState)):
        return None
    fields = (leader_and_isr.leader, leader_and_isr.leader_epoch, leader_and_isr.partition_epoch, data.controller_epoch,
              *leader_and_isr.isr)
    if not all(type(v) is int and INT32_MIN <= v <= INT32_MAX for v in fields):
        return None
    recovery = int(leader_and_isr.leader_recovery_state)
    return (leader_and_isr.leader, leader_and_isr.isr, leader_and_isr.leader_epoch, leader_and_isr.partition_epoch,
            recovery, data.controller_epoch)


def _state_of(row: _StateRow) -> LeaderIsrAndControllerEpoch:
    leader, isr, leader_epoch, partition_epoch, recovery, controller_epoch = row
    leader_and_isr = LeaderAndIsr(leader, tuple(isr), leader_epoch, partition_epoch, LeaderRecoveryState(recovery))
    return LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)


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
_TOPIC_CONFIGS = "/config/topics/"


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
    if change is not ChangeType.DATA_CHANGED and not path.startswith(_TOPIC_CONFIGS):
        return None  # keyed watches fire on data changes, a topic config's on its creation too (see _KEYED_CHANGES)
    keyed = _keyed_node(path)
    if keyed is None or change not in _KEYED_CHANGES[keyed[0]]:
        return None
    return WatchEvent(keyed[0], change, keyed[1])



class TreeClient:
    """One client session on a :class:`MemoryTree`: the :class:`~kctl.stores.znode.ZnodeClient`.

    After :meth:`expire` every call raises :class:`~kctl.errors.StoreUnavailableError` until
    :meth:`reconnect` (listener and watch registration still work; they are client-side and carried
    over to the new session).
    """

    def __init__(self, tree: MemoryTree) -> None:
        self.tree = tree
        self._session = tree.open_session()

    def __repr__(self) -> str:
        return f"session={self._session.id:#x}, {self._session.ended or 'live'}"

    @property
    def session_id(self) -> int:
        return self._session.id

    def expire_session(self) -> None:
        """Expire this session as ZooKeeper would (ephemeral nodes deleted, SESSION/EXPIRED sent)."""
        self.tree.expire_session(self._session)

    def reconnect(self) -> None:
        """After expiry, open a new session keeping listeners and watches (SESSION/RECONNECTED).

        A live session is left as it is; a closed client cannot reconnect.
        """
        if self._session.ended == "closed":
            raise StoreUnavailableError("the store was closed")
        if self._session.ended:
            self._session = self.tree.open_session(self._session)

    def close(self) -> None:
        self.tree.close_session(self._session)

    def add_listener(self, listener: WatchListener) -> None:
        with self.tree._lock:
            self._session.listeners.append(listener)

    def remove_listener(self, listener: WatchListener) -> None:
        with self.tree._lock:
            if listener in self._session.listeners:
                self._session.listeners.remove(listener)

    def watch(self, kind: WatchKind, key: object = None) -> None:
        check_watch_key(kind, key)
        with self.tree._lock:
            self._session.watch(kind, key)

    def unwatch(self, kind: WatchKind, key: object = None) -> None:
        with self.tree._lock:
            self._session.unwatch(kind, key)

    # --- Znodes ----------------------------------------------------------------------------------

    def transaction(self) -> AbstractContextManager[Transaction]:
        """A transaction of this session (see :meth:`MemoryTree.transaction`)."""
        return self.tree.transaction(self._session)

    def get_data(self, paths: Sequence[str], per_request: int | None = None) -> list[Found | StoreError]:
        with self.transaction() as txn:
            return [txn.get(path) for path in paths]

    def get_children(self, paths: Sequence[str]) -> list[list[str] | None]:
        with self.transaction() as txn:
            return [txn.children(path) if txn.exists(path) else None for path in paths]

    def get_partition_states(self, partitions: Sequence[TopicPartition],
                             per_request: int | None = None) -> list[Found | StoreError]:
        """Read from the state table by key."""
        with self.transaction() as txn:
            return [txn.get_state(tp) for tp in partitions]

    def set_partition_states(self, partitions: Sequence[TopicPartition], data: Sequence[object],
                             versions: Sequence[int], fence: int) -> list[int | StoreError]:
        """Written to the state table by key, in one transaction (each set applies whole or not at all)."""
        results: list[int | StoreError] = []
        with self._fenced(fence) as txn:
            for tp, value, version in zip(partitions, data, versions):
                try:
                    results.append(txn.set_state(tp, value, version))
                except StoreError as exc:
                    results.append(exc)
        return results

    def update_partition_states(
        self, updates: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int, fence: int,
    ) -> tuple[dict[TopicPartition, LeaderAndIsr], list[TopicPartition], list[TopicPartition]] | None:
        """See :meth:`MemoryTree.update_partition_states`."""
        return self.tree.update_partition_states(self._session, updates, controller_epoch, fence)

    def exists(self, path: str) -> Stat | None:
        with self.transaction() as txn:
            return txn.stat(path)

    def create(self, path: str, data: object, *, ephemeral: bool = False) -> Stat:
        with self.transaction() as txn:
            txn.create(path, data, ephemeral=ephemeral)
            return cast(Stat, txn.stat(path))

    def multi(self, items: Iterable[Sequence[Op]], fence: int) -> list[ItemResult]:
        """All items in one transaction; a failed item's operations are undone, the others kept."""
        results: list[ItemResult] = []
        with self._fenced(fence) as txn:
            for ops in items:
                # one operation applies whole or not at all: only longer items need a savepoint
                savepoint = txn.savepoint() if len(ops) > 1 else None
                done: list[OpResult] = []
                try:
                    for op in ops:
                        done.append(_APPLY[op.kind](txn, op))
                except StoreError as exc:
                    if savepoint is not None:
                        txn.rollback_to(savepoint)
                    results.append(Failure(len(done), exc))
                else:
                    results.append(done)
        return results

    def create_partition_states(self, creates: Iterable[tuple[TopicPartition, bool, object]],
                                fence: int) -> list[ItemResult]:
        """:meth:`multi` of the items a topic's creation sends, each ``(tp, with_parent, data)``:
        create ``tp``'s partition znode (``with_parent``) then its state znode with ``data``; the
        same transaction, results and errors, without an operation and two paths to parse per
        znode (``KafkaZkClient.create_partition_states`` detects this method)."""
        results: list[ItemResult] = []
        with self._fenced(fence) as txn:
            for tp, with_parent, data in creates:
                savepoint = txn.savepoint() if with_parent else None
                done: list[OpResult] = []
                try:
                    if with_parent:
                        done.append(txn.create_partition_znode(tp))
                    done.append(txn.create_state(tp, paths.topic_partition(tp), data))
                except StoreError as exc:
                    if savepoint is not None:
                        txn.rollback_to(savepoint)
                    results.append(Failure(len(done), exc))
                else:
                    results.append(done)
        return results

    def delete_recursive(self, paths: Iterable[str], fence: int) -> None:
        with self._fenced(fence) as txn:
            for path in paths:
                txn.delete_recursive(path)

    def ensure_paths(self, paths: Iterable[str]) -> None:
        with self.transaction() as txn:
            for path in paths:
                txn.ensure_path(path)

    @contextmanager
    def _fenced(self, fence: int) -> Iterator[Transaction]:
        """A transaction that first checks ``/controller_epoch``'s version, as Kafka wraps every
        controller write in ``[check(/controller_epoch, version), op]``; -1 means unfenced."""
        with self.transaction() as txn:
            if fence != MATCH_ANY_VERSION:
                try:
                    txn.check(paths.CONTROLLER_EPOCH, fence)
                except (BadVersionError, NoNodeError) as exc:
                    raise controller_moved(fence) from exc
            yield txn

    # --- The native engine's fast path ----------------------------------------------------------

    def native_begin(self) -> tuple[StateTable, int, int, bool]:
        """See :meth:`MemoryTree.native_begin`."""
        return self.tree.native_begin(self._session)

    def native_end(self, wrote: bool, written: Sequence[tuple[str, int]] = ()) -> None:
        """See :meth:`MemoryTree.native_end`."""
        self.tree.native_end(wrote, written)

    def native_create_partition_znodes(self, creates: Sequence[tuple[str, Sequence[int], Sequence[int]]]) -> bool:
        """See :meth:`MemoryTree.native_create_partition_znodes`."""
        return self.tree.native_create_partition_znodes(creates)


_APPLY: dict[str, Callable[[Transaction, Op], OpResult]] = {
    "create": lambda txn, op: txn.create(op.path, op.data, ephemeral=op.ephemeral, sequential=op.sequential),
    "set": lambda txn, op: txn.set_and_stat(op.path, op.data, op.version),
    "delete": lambda txn, op: txn.delete(op.path, op.version),
    "check": lambda txn, op: txn.check(op.path, op.version),
}
"""How each operation of a multi applies to a transaction."""


__all__ = ["MemoryTree", "PartitionSnapshot", "Session", "Stat", "Transaction", "TreeClient"]
