"""A broker's metadata cache: what the controller last told it with UpdateMetadata.

Brokers learn the controller, the live brokers and every partition's leadership only from
UpdateMetadata (Kafka's ``ZkMetadataCache``). Invariant I7 says that once the cluster is quiet
every broker's cache matches the store; :meth:`BrokerMetadataCache.differences` checks it against a
:class:`MetadataSnapshot` read once from the store, so a checker comparing a hundred brokers reads
the store once, and :class:`ExpectedMetadata` lets a cluster waiting to be stable compare a digest
per broker instead.
"""

from __future__ import annotations

import threading
from itertools import groupby
from operator import itemgetter
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import NamedTuple

from kctl._engine import MetadataCache, StateTable, fold_digests, metadata_digest, stored_digests
from kctl.model import BrokerInfo, LeaderIsrAndControllerEpoch, TopicPartition
from kctl.messages import UpdateMetadataFanOut, UpdateMetadataPartitionState, UpdateMetadataRequest
from kctl.stores.base import StateStore


CachedState = tuple[int, int, int, list[int], int, list[int], list[int]]
"""A native cache entry: controller epoch, leader, leader epoch, ISR, partition epoch, replicas,
offline replicas."""


class PartitionMetadata(NamedTuple):
    """The parts of a partition's metadata that the cache and the store must agree on (a tuple,
    so that checking a hundred caches of 100K partitions stays cheap)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]

    def __str__(self) -> str:
        return (
            f"leader={self.leader} leader_epoch={self.leader_epoch} isr={list(self.isr)} "
            f"partition_epoch={self.partition_epoch} replicas={list(self.replicas)}"
        )


def _metadata(cached: CachedState) -> PartitionMetadata:
    _, leader, leader_epoch, isr, partition_epoch, replicas, _ = cached
    return PartitionMetadata(leader, leader_epoch, tuple(isr), partition_epoch, tuple(replicas))


@dataclass(frozen=True)
class MetadataSnapshot:
    """What every broker's cache should hold once the cluster is quiet, read from the store.

    Topics queued for deletion are left out (brokers drop them when the controller advertises
    them with leader -2), and so are partitions without a state (not initialised yet).
    """

    controller_id: int | None
    brokers: frozenset[int]
    partitions: Mapping[TopicPartition, PartitionMetadata]

    @classmethod
    def from_store(cls, store: StateStore) -> MetadataSnapshot:
        topics = store.get_all_topics() - set(store.get_topic_deletions())
        assignments = store.get_topic_assignments(sorted(topics)).values
        replicas = {
            TopicPartition(topic, partition): assignment.replicas
            for topic, topic_assignment in assignments.items()
            for partition, assignment in topic_assignment.partitions.items()
        }
        states = store.get_partition_states(replicas).values
        partitions = {}
        for tp, state in states.items():
            leader_and_isr = state.leader_and_isr
            partitions[tp] = PartitionMetadata(leader_and_isr.leader, leader_and_isr.leader_epoch, leader_and_isr.isr,
                                               leader_and_isr.partition_epoch, replicas[tp])
        return cls(store.get_controller_id(), frozenset(store.get_all_brokers()), partitions)

    @property
    def digest(self) -> int:
        """The sum of the partitions' ``metadata_digest``s (what :class:`ExpectedMetadata` keeps)."""
        return sum(metadata_digest(tp.topic, tp.partition, m.leader, m.leader_epoch, m.isr, m.partition_epoch, m.replicas)
                   for tp, m in self.partitions.items()) % DIGEST_MODULUS


_last_index: tuple[Sequence[BrokerInfo], Mapping[int, BrokerInfo]] = ((), {})


def _broker_index(live_brokers: Sequence[BrokerInfo]) -> Mapping[int, BrokerInfo]:
    """The live brokers by id. One UpdateMetadata fan-out hands every broker the same tuple, so
    the index of the last tuple seen is shared (read-only) by every cache instead of being built
    once per broker."""
    global _last_index
    seen, index = _last_index
    if seen is not live_brokers:
        index = {broker.id: broker for broker in live_brokers}
        _last_index = (live_brokers, index)
    return index


class BrokerMetadataCache:
    """The controller id, live brokers and partition states from the latest UpdateMetadata.

    Partition states live in a native :class:`kctl._engine.MetadataCache` (whichever engine the
    controller runs): a native UpdateMetadata payload is applied without a Python object per
    partition, and the cache keeps a digest of its contents for :class:`ExpectedMetadata`.
    """

    def __init__(self) -> None:
        self.controller_id: int | None = None
        self._brokers: Mapping[int, BrokerInfo] = {}
        self._partitions = MetadataCache()
        self.topic_ids: dict[str, str] = {}

    def update(self, request: UpdateMetadataRequest | UpdateMetadataFanOut) -> list[TopicPartition]:
        """Apply an UpdateMetadata request (or a fan-out's, which carries the same payload); returns
        the partitions it removed (those advertised with leader -2, whose topic is being deleted)."""
        self.controller_id = request.controller_id if request.controller_id >= 0 else None
        seen, index = _last_index
        self._brokers = index if seen is request.live_brokers else _broker_index(request.live_brokers)
        removed = self._partitions.update(request.partition_states)
        if not removed:  # nearly always: only a deletion removes partitions
            self.topic_ids.update(request.topic_ids)
            return []
        for topic in dict.fromkeys(topic for topic, _ in removed):
            if not self._partitions.has_topic(topic):
                self.topic_ids.pop(topic, None)
        self.topic_ids.update(request.topic_ids)
        return [TopicPartition(topic, partition) for topic, partition in removed]

    @property
    def live_broker_ids(self) -> list[int]:
        return sorted(self._brokers)

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._brokers.get(broker_id)

    def partition_state(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        cached = self._partitions.get(tp.topic, tp.partition)
        if cached is None:
            return None
        controller_epoch, leader, leader_epoch, isr, partition_epoch, replicas, offline = cached
        return UpdateMetadataPartitionState(tp.topic, tp.partition, controller_epoch, leader, leader_epoch, tuple(isr),
                                            partition_epoch, tuple(replicas), tuple(offline))

    def partitions(self) -> Iterator[TopicPartition]:
        return (TopicPartition(topic, partition) for topic, partition, _ in self._partitions.items())

    def __len__(self) -> int:
        return len(self._partitions)

    def agrees_with(self, controller_id: int | None, brokers: Set[int], digest: int) -> bool:
        """Whether the cache holds this controller, these live brokers and partition metadata
        with this digest (see :class:`ExpectedMetadata`)."""
        return self.controller_id == controller_id and self._brokers.keys() == brokers and self._partitions.digest == digest

    def differences(self, expected: MetadataSnapshot) -> list[str]:
        """How this cache differs from ``expected`` (empty when it matches), one line per difference."""
        found = []
        if self.controller_id != expected.controller_id:
            found.append(f"controller: cached {self.controller_id}, stored {expected.controller_id}")
        if set(self._brokers) != expected.brokers:
            found.append(f"live brokers: cached {self.live_broker_ids}, stored {sorted(expected.brokers)}")
        for tp, stored in expected.partitions.items():
            cached = self._partitions.get(tp.topic, tp.partition)
            if cached is None:
                found.append(f"{tp}: not cached, stored {stored}")
            elif (metadata := _metadata(cached)) != stored:
                found.append(f"{tp}: cached {metadata}, stored {stored}")
        found.extend(f"{tp}: cached {_metadata(cached)}, not in the store"
                     for topic, partition, cached in self._partitions.items()
                     if (tp := TopicPartition(topic, partition)) not in expected.partitions)
        return found


class ExpectedMetadata:
    """The digest of what every broker's cache should hold once quiet (a :class:`MetadataSnapshot`'s
    partitions), kept up to date from the store's changes.

    A simulated cluster checks invariant I7 at every quiet point; reading and comparing every
    partition for every broker each time costs brokers × partitions. With a store that reports
    what changed since a zxid (``MemoryStore.changes_since``), a check reads only the changed
    topics and partition states and compares one digest per broker; other stores are read whole.
    Digests are kept by topic, then partition number: following a creation or a restart builds no
    key object per partition.
    """

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._changes_since: Callable[[int], tuple[int, list[str], list[tuple[str, int]]]] | None = getattr(
            store, "changes_since", None
        )
        self._zxid = -1
        self._replicas: dict[str, dict[int, tuple[int, ...]]] = {}
        self._digests: dict[str, dict[int, int]] = {}
        self._digest = 0
        self._lock = threading.Lock()  # one update at a time: a real-time cluster is checked from any thread

    def digest(self) -> int:
        """The digest of the store's partition metadata now."""
        if self._changes_since is None:
            return MetadataSnapshot.from_store(self._store).digest
        with self._lock:
            return self._updated_digest(self._changes_since)

    def _updated_digest(self, changes_since: Callable[[int], tuple[int, list[str], list[tuple[str, int]]]]) -> int:
        live = self._store.get_all_topics() - set(self._store.get_topic_deletions())
        self._zxid, topics, states = changes_since(self._zxid)
        reload = set(topics) | (live ^ self._replicas.keys())
        for topic in reload:
            self._forget(topic)
        changed: dict[str, list[int]] = {}
        for topic, assignment in self._store.get_topic_assignments(sorted(reload & live)).values.items():
            replicas = self._replicas[topic] = {p: a.replicas for p, a in assignment.partitions.items()}
            self._digests[topic] = {}
            changed[topic] = list(replicas)
        for topic, written in groupby(states, itemgetter(0)):  # sorted: one group per topic
            if topic not in reload and (kept := self._replicas.get(topic)) is not None:
                changed[topic] = [partition for _, partition in written if partition in kept]
        if changed:
            self._load(changed)
        return self._digest

    def _load(self, changed: Mapping[str, list[int]]) -> None:
        """(Re)compute the digests of ``changed``'s partitions (by topic) from their stored states."""
        total = self._digest
        for topic, partitions, stored in self._stored_digests(changed):
            total += fold_digests(self._digests[topic], partitions, stored)
        self._digest = total % DIGEST_MODULUS

    def _stored_digests(self, changed: Mapping[str, list[int]]) -> list[tuple[str, list[int], list[int | None]]]:
        """Each topic of ``changed``, its partitions and their stored states' digests (None
        without a readable state): computed in the store's native state table when it offers one
        (``NativeStateTable``), which builds no Python object per partition (a rolling restart
        rewrites thousands of states between two checks), else from ``get_partition_states``."""
        begin = getattr(self._store, "native_begin", None)
        if begin is None:
            stored = self._store.get_partition_states(
                [TopicPartition(topic, p) for topic, partitions in changed.items() for p in partitions]).values
            return [(topic, partitions, [_digest(topic, p, stored.get(TopicPartition(topic, p)), self._replicas[topic])
                                         for p in partitions])
                    for topic, partitions in changed.items()]
        table: StateTable = begin()[0]
        try:
            return [(topic, partitions, stored_digests(table, topic, partitions, self._replicas[topic]))
                    for topic, partitions in changed.items()]
        finally:
            self._store.native_end(False)  # type: ignore[attr-defined]  # the pair of native_begin

    def _forget(self, topic: str) -> None:
        self._replicas.pop(topic, None)
        self._digest = (self._digest - sum(self._digests.pop(topic, {}).values())) % DIGEST_MODULUS


def _digest(topic: str, partition: int, state: LeaderIsrAndControllerEpoch | None,
            replicas: Mapping[int, tuple[int, ...]]) -> int | None:
    """What ``stored_digests`` gives for ``state`` (a stored state read as Python objects)."""
    if state is None:
        return None
    lai = state.leader_and_isr
    return metadata_digest(topic, partition, lai.leader, lai.leader_epoch, lai.isr, lai.partition_epoch,
                           replicas[partition])


DIGEST_MODULUS = 2**64
"""Digests are sums of 64-bit partition digests, wrapping as the native cache's do."""


__all__ = ["BrokerMetadataCache", "ExpectedMetadata", "MetadataSnapshot", "PartitionMetadata"]
