"""A topic's assignment that is replaced a partition at a time without being copied whole.

Kafka's controller writes a reassigned partition's whole topic znode twice per partition (phases U
and B6 of reference §6.8), each write the topic's assignment with one partition changed. Built as
a dict each time, every write cost the topic's size, so moving a whole topic cost its size times
the partitions moved (a topic of 50,000 partitions copied 100,000 times). An :class:`AssignmentMap`
is never changed: :meth:`AssignmentMap.replacing` makes the next one, sharing the partitions that
did not change with it (its *base*) and holding those that did in a small overlay, which is folded
into a new base once it grows past about the square root of the topic's size. A write costs that
square root, amortised, and whoever compares two versions that share a base looks at the overlays
only (:func:`changed_between`).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from math import isqrt

from kctl.model import ReplicaAssignment

_MIN_OVERLAY = 32
"""The overlay's size below which it is never folded into the base, whatever the topic's size."""


class AssignmentMap(Mapping[int, ReplicaAssignment]):
    """An immutable mapping of partition ids to assignments, in a dict's order: a partition
    replaced keeps its place, a new one comes last. Equal to any mapping with the same items."""

    __slots__ = ("_base", "_len", "_overlay")

    def __init__(self, partitions: Mapping[int, ReplicaAssignment] | None = None) -> None:
        self._base: dict[int, ReplicaAssignment] = dict(partitions or {})
        self._overlay: dict[int, ReplicaAssignment] = {}
        self._len = len(self._base)

    def replacing(self, changes: Mapping[int, ReplicaAssignment]) -> AssignmentMap:
        """This assignment with ``changes`` applied (partitions replaced or added)."""
        base, overlay = self._base, {**self._overlay, **changes}
        added = sum(1 for p in changes if p not in base and p not in self._overlay)
        new = AssignmentMap.__new__(AssignmentMap)
        if len(overlay) > max(_MIN_OVERLAY, isqrt(len(base))):
            new._base, new._overlay = {**base, **overlay}, {}
        else:
            new._base, new._overlay = base, overlay
        new._len = self._len + added
        return new

    def to_dict(self) -> dict[int, ReplicaAssignment]:
        """A dict with the same items in the same order (built in C)."""
        return {**self._base, **self._overlay}

    def __getitem__(self, partition: int) -> ReplicaAssignment:
        overlay = self._overlay
        return overlay[partition] if partition in overlay else self._base[partition]

    def __contains__(self, partition: object) -> bool:
        return partition in self._base or partition in self._overlay

    def __iter__(self) -> Iterator[int]:
        if not self._overlay:
            return iter(self._base)
        return iter(self.to_dict())

    def __len__(self) -> int:
        return self._len

    def values(self) -> ValuesView[ReplicaAssignment]:
        return (self._base if not self._overlay else self.to_dict()).values()

    def items(self) -> ItemsView[int, ReplicaAssignment]:
        return (self._base if not self._overlay else self.to_dict()).items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AssignmentMap):
            return self.to_dict() == other.to_dict()
        return isinstance(other, Mapping) and self.to_dict() == dict(other.items())

    __hash__ = None  # type: ignore[assignment]  # a mapping, like dict

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()!r})"


def changed_between(previous: AssignmentMap, current: AssignmentMap) -> list[int] | None:
    """The partitions whose assignment differs between two versions sharing a base, found from
    their overlays (in no particular order); None when they do not share one."""
    if previous._base is not current._base:
        return None
    before, after = previous._overlay, current._overlay
    base = current._base
    changed = []
    for partition in before.keys() | after.keys():
        if partition not in after and partition not in base:
            continue  # not in ``current``: no write of it to record
        old = before[partition] if partition in before else base.get(partition)
        new = after[partition] if partition in after else base[partition]
        if old is not new and old != new:
            changed.append(partition)
    return changed


__all__ = ["AssignmentMap", "changed_between"]
