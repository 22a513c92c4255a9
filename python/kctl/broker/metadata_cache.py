"""A broker's metadata cache: what the controller last told it with UpdateMetadata.

Brokers learn the controller, the live brokers and every partition's leadership only from
UpdateMetadata (Kafka's ``ZkMetadataCache``). Invariant I7 says that once the cluster is quiet
every broker's cache matches the store; :meth:`BrokerMetadataCache.differences` checks it against a
:class:`MetadataSnapshot` read once from the store, so a checker comparing a hundred brokers reads
the store once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kctl.model import LEADER_DURING_DELETE, BrokerInfo, TopicPartition
from kctl.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kctl.stores.base import StateStore


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


def _metadata(state: UpdateMetadataPartitionState) -> PartitionMetadata:
    return PartitionMetadata(state.leader, state.leader_epoch, state.isr, state.partition_epoch, state.replicas)


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
            lai = state.leader_and_isr
            partitions[tp] = PartitionMetadata(lai.leader, lai.leader_epoch, lai.isr, lai.partition_epoch, replicas[tp])
        return cls(store.get_controller_id(), frozenset(store.get_all_brokers()), partitions)


class BrokerMetadataCache:
    """The controller id, live brokers and partition states from the latest UpdateMetadata.

    Partition states are kept per topic and keyed by the states' own topic and partition objects:
    brokers caching the states of one UpdateMetadata share every object but their dict slots.
    """

    def __init__(self) -> None:
        self.controller_id: int | None = None
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, dict[int, UpdateMetadataPartitionState]] = {}
        self.topic_ids: dict[str, str] = {}

    def update(self, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an UpdateMetadata request; returns the partitions it removed (those advertised
        with leader -2, whose topic is being deleted)."""
        self.controller_id = request.controller_id if request.controller_id >= 0 else None
        self._brokers = {broker.id: broker for broker in request.live_brokers}
        deleted = []
        topics = self._topics
        for state in request.partition_states:
            partitions = topics.get(state.topic)
            if state.leader == LEADER_DURING_DELETE:
                if partitions is not None and partitions.pop(state.partition, None) is not None:
                    deleted.append(TopicPartition(state.topic, state.partition))
                    if not partitions:
                        del topics[state.topic]
                        self.topic_ids.pop(state.topic, None)
            elif partitions is None:
                topics[state.topic] = {state.partition: state}
            else:
                partitions[state.partition] = state
        self.topic_ids.update(request.topic_ids)
        return deleted

    @property
    def live_broker_ids(self) -> list[int]:
        return sorted(self._brokers)

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._brokers.get(broker_id)

    def partition_state(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        partitions = self._topics.get(tp.topic)
        return None if partitions is None else partitions.get(tp.partition)

    def partitions(self) -> Iterator[TopicPartition]:
        return (tp for tp, _ in self._states())

    def __len__(self) -> int:
        return sum(map(len, self._topics.values()))

    def differences(self, expected: MetadataSnapshot) -> list[str]:
        """How this cache differs from ``expected`` (empty when it matches), one line per difference."""
        found = []
        if self.controller_id != expected.controller_id:
            found.append(f"controller: cached {self.controller_id}, stored {expected.controller_id}")
        if set(self._brokers) != expected.brokers:
            found.append(f"live brokers: cached {self.live_broker_ids}, stored {sorted(expected.brokers)}")
        for tp, stored in expected.partitions.items():
            state = self.partition_state(tp)
            if state is None:
                found.append(f"{tp}: not cached, stored {stored}")
            elif (cached := _metadata(state)) != stored:
                found.append(f"{tp}: cached {cached}, stored {stored}")
        found.extend(f"{tp}: cached {_metadata(s)}, not in the store" for tp, s in self._states()
                     if tp not in expected.partitions)
        return found

    def _states(self) -> Iterator[tuple[TopicPartition, UpdateMetadataPartitionState]]:
        for topic, partitions in self._topics.items():
            for partition, state in partitions.items():
                yield TopicPartition(topic, partition), state


__all__ = ["BrokerMetadataCache", "MetadataSnapshot", "PartitionMetadata"]
