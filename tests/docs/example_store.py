"""kctl-journal: a state store plugin that keeps every partition's history on top of another store.

``EmbeddedCluster.partition_history`` and ``check_invariants`` read a store's history, which only
the memory store records. ``journal`` wraps the sessions of any registered store (``memory`` by
default) and journals what they write to topic and partition-state znodes; everything else is the
inner store's own.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

import kctl
from kctl.errors import StoreError
from kctl.model import NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.plugins import get_plugin_host
from kctl.registry import StateStoreRegistry
from kctl.stores import MATCH_ANY_VERSION, PartitionSnapshot, StateStore, TopicAssignment, UpdateResult

NOTHING_STORED = PartitionSnapshot((), (), (), NO_LEADER, -1, ())


@kctl.hookimpl
def kctl_register_state_stores(register: StateStoreRegistry) -> None:
    register.add("journal", journal_store)


def journal_store(inner: str = "memory", **options: Any) -> JournalStore:
    """The factory: a session of the ``inner`` store (made with ``options``), and a new journal."""
    factory = get_plugin_host().state_stores().get(inner).factory
    return JournalStore(factory(**options), Journal())


class Journal:
    """Every stored version of every partition, written through any session of one backing store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[TopicPartition, list[PartitionSnapshot]] = {}
        self._assignments: dict[str, Mapping[int, ReplicaAssignment]] = {}

    def history(self, tp: TopicPartition) -> list[PartitionSnapshot]:
        with self._lock:
            return list(self._rows.get(tp, ()))

    def assigned(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> None:
        """A topic znode was written: a row for each partition whose assignment changed."""
        with self._lock:
            previous = self._assignments.get(topic, {})
            for partition, assignment in sorted(partitions.items()):
                if previous.get(partition) != assignment:
                    self._append(TopicPartition(topic, partition), replicas=assignment.replicas,
                                 adding_replicas=assignment.adding_replicas,
                                 removing_replicas=assignment.removing_replicas)
            self._assignments[topic] = dict(partitions)

    def stated(self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]) -> None:
        """Partition-state znodes were written: a row each."""
        with self._lock:
            for tp, state in states.items():
                lai = state.leader_and_isr
                self._append(tp, leader=lai.leader, leader_epoch=lai.leader_epoch, isr=lai.isr,
                             controller_epoch=state.controller_epoch)

    def forget(self, topic: str) -> None:
        """The topic was deleted: a topic created again under its name starts a history of its own."""
        with self._lock:
            self._assignments.pop(topic, None)
            for tp in [tp for tp in self._rows if tp.topic == topic]:
                del self._rows[tp]

    def _append(self, tp: TopicPartition, **changed: Any) -> None:
        rows = self._rows.setdefault(tp, [])
        rows.append(dataclasses.replace(rows[-1] if rows else NOTHING_STORED, **changed))


class JournalStore:
    """A session of the inner store whose writes to topics and partition states are journaled.

    Sessions made with :meth:`new_session` share the journal, as they share the backing store. The
    journal records a write once it has returned, so with threads writing one partition at once
    (controller and brokers on a real ZooKeeper) its order is the order the writes returned in.
    """

    def __init__(self, inner: StateStore, journal: Journal) -> None:
        self._inner = inner
        self._journal = journal

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # every other method, the inner store's

    # --- What EmbeddedCluster needs beyond the StateStore protocol ---------------------------------

    def new_session(self) -> JournalStore:
        return JournalStore(self._inner.new_session(), self._journal)  # type: ignore[attr-defined]

    def partition_history(self, tp: TopicPartition) -> list[PartitionSnapshot]:
        return self._journal.history(tp)

    # --- Writes that make a partition's history ----------------------------------------------------

    def create_topic(
        self,
        topic: str,
        partitions: Mapping[int, ReplicaAssignment],
        topic_id: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        self._inner.create_topic(topic, partitions, topic_id, config)
        self._journal.assigned(topic, partitions)

    def set_topic_assignment(
        self, topic: str, assignment: TopicAssignment, expected_controller_epoch_version: int = MATCH_ANY_VERSION
    ) -> None:
        self._inner.set_topic_assignment(topic, assignment, expected_controller_epoch_version)
        self._journal.assigned(topic, assignment.partitions)

    def delete_topic(self, topic: str, expected_controller_epoch_version: int) -> None:
        self._inner.delete_topic(topic, expected_controller_epoch_version)
        self._journal.forget(topic)

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_version: int
    ) -> dict[TopicPartition, StoreError | None]:
        outcome = self._inner.create_partition_states(states, expected_controller_epoch_version)
        self._journal.stated({tp: state for tp, state in states.items() if outcome[tp] is None})
        return outcome

    def update_partition_states(
        self,
        updates: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_version: int,
    ) -> UpdateResult:
        result = self._inner.update_partition_states(updates, controller_epoch, expected_controller_epoch_version)
        self._journal.stated(
            {tp: LeaderIsrAndControllerEpoch(lai, controller_epoch) for tp, lai in result.successful.items()}
        )
        return result
