"""The columns of an election batch, stored flat.

A batch can hold a million partitions. Instead of a Python list per partition, a column keeps flat
int32 arrays that either engine fills in one go (the native engine hands over its own buffers); a
row becomes a Python object only when a selector reads it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from kctl.model import TopicPartition


def int32_buffer(data: bytes) -> memoryview:
    """Native-endian int32s in ``data`` (what the native engine hands over), read-only."""
    return memoryview(data).cast("i")


class IntRows(Sequence[tuple[int, ...]]):
    """Rows of broker ids: row ``i`` holds ``values[offsets[i]:offsets[i + 1]]``, read as a tuple."""

    __slots__ = ("_offsets", "_values")

    def __init__(self, offsets: memoryview, values: memoryview) -> None:
        self._offsets = offsets
        self._values = values

    @classmethod
    def of(cls, rows: Iterable[Iterable[int]]) -> IntRows:
        offsets, values = array("i", [0]), array("i")
        for row in rows:
            values.extend(row)
            offsets.append(len(values))
        return cls(memoryview(offsets).toreadonly(), memoryview(values).toreadonly())

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @overload
    def __getitem__(self, index: int) -> tuple[int, ...]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, ...]]: ...
    def __getitem__(self, index: int | slice) -> tuple[int, ...] | list[tuple[int, ...]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = _position(index, len(self))
        return tuple(self._values[self._offsets[i] : self._offsets[i + 1]])

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        values, offsets = self._values.tolist(), self._offsets.tolist()
        for start, end in zip(offsets, offsets[1:]):
            yield tuple(values[start:end])

    def __repr__(self) -> str:
        return f"IntRows({[list(row) for row in self]})"


class Partitions(Sequence[TopicPartition]):
    """Partitions as an index into the batch's distinct topics and a partition id, per row."""

    __slots__ = ("topics", "_topic_index", "_ids")

    def __init__(self, topics: Sequence[str], topic_index: memoryview, ids: memoryview) -> None:
        self.topics = topics
        """The distinct topics of the rows, in order of first appearance."""
        self._topic_index = topic_index
        self._ids = ids

    @classmethod
    def of(cls, partitions: Iterable[TopicPartition]) -> Partitions:
        position: dict[str, int] = {}
        index, ids = array("i"), array("i")
        for tp in partitions:
            index.append(position.setdefault(tp.topic, len(position)))
            ids.append(tp.partition)
        return cls(tuple(position), memoryview(index).toreadonly(), memoryview(ids).toreadonly())

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> TopicPartition: ...
    @overload
    def __getitem__(self, index: slice) -> list[TopicPartition]: ...
    def __getitem__(self, index: int | slice) -> TopicPartition | list[TopicPartition]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = _position(index, len(self))
        return TopicPartition(self.topics[self._topic_index[i]], self._ids[i])

    def __iter__(self) -> Iterator[TopicPartition]:
        topics, new = self.topics, tuple.__new__  # what TopicPartition(topic, p) does, minus a call
        for t, p in zip(self._topic_index.tolist(), self._ids.tolist()):
            yield new(TopicPartition, (topics[t], p))

    def __repr__(self) -> str:
        return f"Partitions({list(self)})"


def _position(index: int, length: int) -> int:
    i = index + length if index < 0 else index
    if not 0 <= i < length:
        raise IndexError(f"row {index} of {length}")
    return i
