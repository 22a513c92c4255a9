"""Python views of the native engine's opaque sets and results.

They behave as the reference engine's lists and dicts (sequence and mapping protocols, equality),
but build their Python objects only when someone looks inside; passed back to the engine they
travel as the native handle, so a hot path never touches its partitions in Python.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any, TypeVar, overload

from kctl.model import PartitionReplica, ReplicaState, TopicPartition

if TYPE_CHECKING:
    from kctl._engine import Engine, Outcomes, Parts, Replicas

T = TypeVar("T")
_REPLICA_STATES = {s.state_id: s for s in ReplicaState}


class _Lazy(Sequence[T]):
    __slots__ = ("_engine", "_items", "handle")

    def __init__(self, engine: Engine, handle: Any) -> None:
        self._engine = engine
        self.handle = handle
        self._items: list[T] | None = None

    def _materialize(self) -> list[T]:
        raise NotImplementedError

    def _list(self) -> list[T]:
        if self._items is None:
            self._items = self._materialize()
        return self._items

    def __len__(self) -> int:
        return len(self.handle)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._list()[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return self._list() == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        raise TypeError("unhashable type")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._list()!r})"


class PartitionList(_Lazy[TopicPartition]):
    """Partitions of one engine (a ``kctl._engine.Parts`` handle)."""

    handle: Parts

    def _materialize(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self._engine.parts_list(self.handle)]


class ReplicaList(_Lazy[PartitionReplica]):
    """Replicas of one engine (a ``kctl._engine.Replicas`` handle)."""

    handle: Replicas

    def _materialize(self) -> list[PartitionReplica]:
        return [PartitionReplica(TopicPartition(t, p), b) for t, p, b in self._engine.replicas_list(self.handle)]


class ReassigningPartitions(Set[TopicPartition]):
    """The partitions being reassigned, live as the reference engine's view of its dict: the
    controller asks whether one partition is being reassigned once per partition it completes,
    so membership is one engine call, and the partitions are built only when iterated."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __contains__(self, tp: object) -> bool:
        return isinstance(tp, TopicPartition) and self._engine.is_partition_being_reassigned(tp.topic, tp.partition)

    def __len__(self) -> int:
        return len(self._engine.partitions_being_reassigned())

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(PartitionList(self._engine, self._engine.partitions_being_reassigned()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class LazyOutcomes(Mapping[Any, Any]):
    """A state machine's results: per partition (or replica) the new state or the exception."""

    __slots__ = ("_dict", "_engine", "_replicas", "handle")

    def __init__(self, engine: Engine, handle: Outcomes, replicas: bool) -> None:
        self._engine = engine
        self.handle = handle
        self._replicas = replicas
        self._dict: dict[Any, Any] | None = None

    def _get(self) -> dict[Any, Any]:
        if self._dict is None:
            items = self._engine.outcomes_items(self.handle)
            if self._replicas:
                self._dict = {
                    PartitionReplica(TopicPartition(t, p), b): (_REPLICA_STATES[v] if isinstance(v, int) else v)
                    for (t, p, b), v in items
                }
            else:
                self._dict = {TopicPartition(t, p): v for (t, p, _), v in items}
        return self._dict

    def __getitem__(self, key: Any) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self.handle)

    def __repr__(self) -> str:
        return repr(self._get())
