"""The embedded state store: Kafka's znode layout on the in-memory ZooKeeper.

:class:`MemoryStore` is one client session on a :class:`~kctl.stores.memtree.MemoryTree` with
Kafka's semantics (:class:`~kctl.stores.kafkazk.KafkaZkClient`, the code the ZooKeeper store runs
too), so that a simulated cluster exercises the same fencing, conditional writes, broker epochs
and watch-driven events as one running on ZooKeeper.

Znodes hold Python objects instead of JSON (a topic znode holds a ``TopicAssignment``): this
module's codecs store them as they are (frozen where the caller could change them) and check their
type when they are read, so data planted with :meth:`MemoryTree.set_raw` surfaces as
:class:`~kctl.errors.CorruptDataError` exactly where a ZooKeeper store would fail to decode JSON.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import itertools
import operator
import reprlib
import weakref
from collections.abc import Callable, ItemsView, Iterator, Mapping, Sequence, ValuesView
from types import MappingProxyType
from typing import TYPE_CHECKING, Generic, TypeVar

from kctl._engine import StateTable
from kctl.assignment_map import AssignmentMap
from kctl.errors import CorruptDataError, NoNodeError, StoreError
from kctl.hookspecs import hookimpl
from kctl.model import (
    INT32_MAX,
    INT32_MIN,
    MAX_PORT,
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
    int_problem,
)
from kctl.stores import paths
from kctl.stores.base import FinalizedFeatures, ProducerIdBlock, TopicAssignment, UpdateResult
from kctl.stores.kafkazk import KafkaZkClient, ZnodeFormat
from kctl.stores.memtree import MemoryTree, PartitionSnapshot, Session, Transaction, TreeClient, _row_of
from kctl.stores.znode import Stat

if TYPE_CHECKING:
    from kctl.registry import StateStoreRegistry

T = TypeVar("T")
In = TypeVar("In")
Out = TypeVar("Out")


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


def _is_replica_list(value: object) -> bool:
    return isinstance(value, tuple) and all(type(r) is int and INT32_MIN <= r <= INT32_MAX for r in value)


def _is_partition(tp: object) -> bool:
    return isinstance(tp, TopicPartition) and type(tp.partition) is int and INT32_MIN <= tp.partition <= INT32_MAX


def _decode_assignment(path: str, data: object) -> TopicAssignment:
    """The topic's assignment, if every partition id and broker id in it is Kafka's ``Int``
    (partition ids non-negative); checked a whole column at a time, since a failover reads them all."""
    assignment = _typed(path, data, TopicAssignment)
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


def _at_version(state: LeaderIsrAndControllerEpoch, version: int) -> LeaderIsrAndControllerEpoch:
    """The state with the znode's version as its partition epoch (stored states already carry it)."""
    leader_and_isr = state.leader_and_isr
    if leader_and_isr.partition_epoch == version:
        return state
    return LeaderIsrAndControllerEpoch(leader_and_isr.with_partition_epoch(version), state.controller_epoch)


@dataclass(frozen=True)
class _Held(Generic[In, Out]):
    """A znode kind held as a Python object: stored as ``hold`` makes it (a copy the caller cannot
    change behind the store's back), found well-formed by ``check`` when read."""

    check: Callable[[str, object], Out]
    hold: Callable[[In], object] = lambda value: value

    def encode(self, value: In) -> object:
        return self.hold(value)

    def decode(self, data: object, path: str) -> Out:
        return self.check(path, data)


class _AsItIs:
    """A znode kind held as the immutable value it is."""

    @staticmethod
    def encode(value: object) -> object:
        return value


class _Broker(_AsItIs):
    @staticmethod
    def decode(data: object, path: str, broker_id: int) -> BrokerInfo:
        """The checks :class:`~kctl.stores.zkdata.BrokerIdZNode` makes of the JSON."""
        if not isinstance(data, BrokerInfo):
            raise _corrupt(path, "a BrokerInfo", data)
        if data.id != broker_id:
            raise CorruptDataError(f"{path}: it registers broker {reprlib.repr(data.id)}", path)
        ports = [e.port for e in data.endpoints if int_problem(e.port, 0, MAX_PORT) is not None]
        if ports:
            raise CorruptDataError(f"{path}: endpoint port {reprlib.repr(ports[0])} is not a TCP port (0 to {MAX_PORT})", path)
        problem = int_problem(data.jmx_port)
        if problem is not None:
            raise CorruptDataError(f"{path}: jmx_port {problem}", path)
        return data


class _PartitionState(_AsItIs):
    @staticmethod
    def decode(data: object, path: str, zk_version: int) -> LeaderIsrAndControllerEpoch:
        if _row_of(data) is None:  # what the state table keeps aside: not a state, or not in Kafka's Int
            raise _corrupt(path, "a LeaderIsrAndControllerEpoch of 32-bit integers", data)
        return _at_version(data, zk_version)  # type: ignore[arg-type]


class _DensePartitions(Mapping[int, ReplicaAssignment]):
    """A stored topic's assignment whose partition ids are 0 to n-1 in order, as Kafka numbers
    them: the assignments in a tuple indexed by id (8 bytes a partition, where a dict took about
    40 and an int key 28 more). Read-only, like the ``MappingProxyType`` other topics get."""

    __slots__ = ("_values",)

    def __init__(self, values: tuple[ReplicaAssignment, ...]) -> None:
        self._values = values

    def __getitem__(self, partition: int) -> ReplicaAssignment:
        if isinstance(partition, int) and 0 <= partition < len(self._values):
            return self._values[partition]
        raise KeyError(partition)

    def __contains__(self, partition: object) -> bool:
        return isinstance(partition, int) and 0 <= partition < len(self._values)

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self._values)))

    def __len__(self) -> int:
        return len(self._values)

    def values(self) -> ValuesView[ReplicaAssignment]:
        return _DenseValues(self)

    def items(self) -> ItemsView[int, ReplicaAssignment]:
        return _DenseItems(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self.items())!r})"


class _DenseValues(ValuesView[ReplicaAssignment]):
    """The values of a :class:`_DensePartitions` iterated in C (a failover reads them all)."""

    _mapping: _DensePartitions

    def __iter__(self) -> Iterator[ReplicaAssignment]:
        return iter(self._mapping._values)


class _DenseItems(ItemsView[int, ReplicaAssignment]):
    _mapping: _DensePartitions

    def __iter__(self) -> Iterator[tuple[int, ReplicaAssignment]]:
        return zip(range(len(self._mapping)), self._mapping._values)


_SHARED_MAX = 1 << 20
"""How many distinct assignments :class:`_Topic` shares before it starts over (a bound on a cache)."""


class _Topic:
    """Topic znodes; the ones whose ids were found in Kafka's Int are remembered by path: stored
    objects never change, and a failover reads every topic, so an unchanged one is checked once.

    A created topic's assignments are shared (:meth:`share`): partitions with the same replicas
    hold one ``ReplicaAssignment`` (a cluster of 100 brokers has a few thousand distinct ones
    however many partitions it has), so the store keeps about 8 bytes a partition instead of an
    object each. Rewrites keep the caller's objects: a reassignment rewrites its topic once per
    partition step, and sharing every value again would compare them all each time."""

    def __init__(self) -> None:
        self._checked: dict[str, weakref.ref[TopicAssignment]] = {}
        self._shared: dict[ReplicaAssignment, ReplicaAssignment] = {}

    def encode(self, assignment: TopicAssignment) -> object:
        partitions = assignment.partitions
        if isinstance(partitions, (_DensePartitions, AssignmentMap)):  # immutable (the first already stored)
            return assignment
        keys, values = list(partitions), list(partitions.values())
        if keys == list(range(len(keys))):
            return TopicAssignment(_DensePartitions(tuple(values)), assignment.topic_id)
        return TopicAssignment(MappingProxyType(dict(zip(keys, values))), assignment.topic_id)

    def share(self, partitions: Mapping[int, ReplicaAssignment]) -> Mapping[int, ReplicaAssignment]:
        """``partitions`` with each assignment replaced by an equal one already stored, if any."""
        if len(self._shared) > _SHARED_MAX:
            self._shared.clear()
        values = list(partitions.values())
        try:
            return dict(zip(partitions, map(self._shared.setdefault, values, values)))
        except TypeError:  # an unhashable value, which decoding will find corrupt
            return partitions

    def decode(self, data: object, path: str) -> TopicAssignment:
        known = self._checked.get(path)
        if known is not None and known() is data:
            return data  # type: ignore[return-value]
        assignment = _decode_assignment(path, data)
        self._checked[path] = weakref.ref(assignment)
        return assignment


def _config(path: str, data: object) -> dict[str, str]:
    if isinstance(data, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        return dict(data)
    raise _corrupt(path, "a mapping of config names to string values", data)


def _reassignments(path: str, data: object) -> dict[TopicPartition, list[int]]:
    if isinstance(data, Mapping) and all(
        _is_partition(tp) and _is_replica_list(replicas) for tp, replicas in data.items()
    ):
        return {tp: list(replicas) for tp, replicas in data.items()}
    raise _corrupt(path, "a mapping of TopicPartition to replica tuples", data)


def _partition_set(path: str, data: object) -> set[TopicPartition]:
    if isinstance(data, frozenset) and all(map(_is_partition, data)):
        return set(data)
    raise _corrupt(path, "a frozenset of TopicPartition", data)


def _partition_list(path: str, data: object) -> tuple[TopicPartition, ...]:
    if isinstance(data, tuple) and all(map(_is_partition, data)):
        return data
    raise _corrupt(path, "a tuple of TopicPartition", data)


def _string(path: str, data: object) -> str:
    return _typed(path, data, str)


def _features(path: str, data: object) -> FinalizedFeatures:
    if isinstance(data, FinalizedFeatures) and all(
        isinstance(name, str) and int_problem(level) is None for name, level in data.features.items()
    ):
        return dataclasses.replace(data, features=dict(data.features))
    raise _corrupt(path, "FinalizedFeatures with a level per feature name", data)


def _producer_id_block(path: str, data: object) -> ProducerIdBlock:
    return _typed(path, data, ProducerIdBlock)


_INT32: _Held[int, int] = _Held(_int32)
_OBJECTS = ZnodeFormat(
    controller=_INT32,
    controller_epoch=_INT32,
    broker=_Broker,
    cluster_id=_Held(_string),
    feature=_Held(_features, lambda value: dataclasses.replace(value, features=dict(value.features))),
    producer_id_block=_Held(_producer_id_block),
    topic=_Topic(),
    config=_Held(_config, dict),
    partition_state=_PartitionState,
    reassignments=_Held(_reassignments, lambda value: {tp: tuple(replicas) for tp, replicas in value.items()}),
    preferred_replica_election=_Held(_partition_set, frozenset),
    isr_change_notification=_Held(_partition_list, tuple),
    log_dir_event_notification=_INT32,
    config_change_notification=_Held(_string),
)
"""How the memory tree holds Kafka's znodes (the topic codec's memory is per tree)."""
_TOPIC_CODECS: weakref.WeakKeyDictionary[MemoryTree, _Topic] = weakref.WeakKeyDictionary()


class MemoryStore(KafkaZkClient):
    """One session on a :class:`MemoryTree`, implementing the ``StateStore`` protocol.

    Sessions made with :meth:`new_session` share the tree, as brokers and controllers share a
    ZooKeeper ensemble. :meth:`expire_session` and :meth:`reconnect` let tests and simulations
    inject ZooKeeper session expiry: in between, every store call raises
    :class:`~kctl.errors.StoreUnavailableError` (listener and watch registration still work; they
    are client-side and carried over to the new session).
    """

    def __init__(self, tree: MemoryTree | None = None) -> None:
        tree = tree if tree is not None else MemoryTree()
        self._client = TreeClient(tree)
        topics = self._topics = _TOPIC_CODECS.setdefault(tree, _Topic())
        super().__init__(self._client, dataclasses.replace(_OBJECTS, topic=topics), tree.random_bytes)

    @property
    def tree(self) -> MemoryTree:
        return self._client.tree

    def changes_since(self, zxid: int) -> tuple[int, list[str], list[tuple[str, int]]]:
        """What changed after ``zxid`` (see :meth:`MemoryTree.changes_since`): lets a cluster keep
        its view of the store up to date without reading all of it."""
        return self._client.tree.changes_since(zxid)

    def create_topic(self, topic: str, partitions: Mapping[int, ReplicaAssignment], topic_id: str | None = None,
                     config: Mapping[str, str] | None = None) -> None:
        """Kafka's, with the assignments shared with equal ones stored (see ``_Topic.share``)."""
        super().create_topic(topic, self._topics.share(partitions), topic_id, config)

    def update_partition_states(self, updates: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int,
                                expected_controller_epoch_version: int) -> UpdateResult:
        """Kafka's, written to the tree's state table in one native call
        (:meth:`MemoryTree.update_partition_states`): an AlterPartition writes thousands of
        states, each a set with its undo record in the general path, which takes anything else."""
        outcome = self._client.update_partition_states(updates, controller_epoch, expected_controller_epoch_version)
        if outcome is None:
            return super().update_partition_states(updates, controller_epoch, expected_controller_epoch_version)
        successful, to_retry, missing = outcome
        failed: dict[TopicPartition, StoreError] = {}
        for tp in missing:
            path = paths.partition_state(tp)
            failed[tp] = NoNodeError(f"{path} does not exist", path)
        return UpdateResult(successful, to_retry, failed)

    def new_session(self) -> MemoryStore:
        """Another client of the same tree (another broker or controller process)."""
        return MemoryStore(self._client.tree)

    # --- The native engine's fast path ----------------------------------------------------------

    def native_begin(self) -> tuple[StateTable, int, int, bool]:
        """See :meth:`MemoryTree.native_begin` (the native engine detects this method)."""
        return self._client.native_begin()

    def native_end(self, wrote: bool, written: Sequence[tuple[str, int]] = ()) -> None:
        """See :meth:`MemoryTree.native_end`."""
        self._client.native_end(wrote, written)

    def native_create_partition_znodes(self, creates: Sequence[tuple[str, Sequence[int], Sequence[int]]]) -> bool:
        """See :meth:`MemoryTree.native_create_partition_znodes`."""
        return self._client.native_create_partition_znodes(creates)

    # --- Inspection ----------------------------------------------------------------------------

    def partition_history(self, tp: TopicPartition) -> list[PartitionSnapshot]:
        """Every stored version of ``tp``, oldest first (needs ``MemoryTree(record_history=True)``)."""
        return self._client.tree.partition_history(tp)


@hookimpl
def kctl_register_state_stores(register: StateStoreRegistry) -> None:
    """Register the embedded store as ``memory``: kctl's default, registered like any plugin's."""
    register.add("memory", MemoryStore)


__all__ = ["MemoryStore", "MemoryTree", "PartitionSnapshot", "Session", "Stat", "Transaction"]
