"""``ControllerContext(engine="rust")``: the context kept by ``kctl._engine.Engine``.

Broker registrations (endpoints, rack) stay here in Python, since only request building reads
them; everything per partition lives in the engine's columnar arrays.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence, Set
from types import MappingProxyType
from typing import Any, cast

from kctl._engine import Engine
from kctl.assignment_map import AssignmentMap
from kctl.engine_api.context import ControllerContext
from kctl.errors import KctlError
from kctl.native.sets import PartitionList, ReassigningPartitions, ReplicaList
from kctl.model import (
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    PartitionReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from kctl.stores.base import StateStore

UNLIMITED = 2**63 - 1
"""A limit no partition count reaches."""

CACHED_TOPIC_ASSIGNMENTS = 8
"""Topics whose whole assignment the context keeps as Python objects (see
:meth:`NativeContext._cached_topic_assignment`)."""

_PARTITION_STATES = {s.state_id: s for s in PartitionState}
_REPLICA_STATES = {s.state_id: s for s in ReplicaState}
LeadershipTuple = tuple[int, list[int], int, int, int, int]


def leadership_tuple(leadership: LeaderIsrAndControllerEpoch) -> LeadershipTuple:
    state = leadership.leader_and_isr
    return (state.leader, list(state.isr), state.leader_epoch, state.partition_epoch, int(state.leader_recovery_state),
            leadership.controller_epoch)


_RECOVERY_STATES = {int(state): state for state in LeaderRecoveryState}
"""The engine's recovery states by value: a dict read, where the enum's lookup by value took a
quarter of :func:`leadership_of` (the controller reads a state per partition of an AlterPartition)."""


def leadership_of(t: LeadershipTuple) -> LeaderIsrAndControllerEpoch:
    leader, isr, leader_epoch, partition_epoch, recovery, controller_epoch = t
    return LeaderIsrAndControllerEpoch(
        LeaderAndIsr(leader, tuple(isr), leader_epoch, partition_epoch, _RECOVERY_STATES[recovery]), controller_epoch
    )


def assignment_tuple(a: ReplicaAssignment) -> tuple[list[int], list[int], list[int]]:
    return list(a.replicas), list(a.adding_replicas), list(a.removing_replicas)


def assignment_of(t: tuple[list[int], list[int], list[int]]) -> ReplicaAssignment:
    return ReplicaAssignment(tuple(t[0]), tuple(t[1]), tuple(t[2]))


def native_set(items: Any) -> Any:
    """What to hand the engine for a collection: its own handle as is, anything else as a list
    (of ``(topic, partition)`` or ``(topic, partition, broker)`` tuples)."""
    if isinstance(items, (PartitionList, ReplicaList)):
        return items.handle
    return [(r.tp.topic, r.tp.partition, r.broker) if isinstance(r, PartitionReplica) else r for r in items]


class NativeContext(ControllerContext):
    engine = "rust"

    def __init__(self, engine: str = "rust") -> None:
        self.native = Engine()
        self._broker_infos: dict[int, BrokerInfo] = {}
        # Every request batch reads the topic ids; they change only when a topic is added or removed.
        self._topic_ids: Mapping[str, str] | None = None
        self._topic_assignments: dict[str, AssignmentMap] = {}
        # Every UpdateMetadata fan-out reads the brokers' epochs; they change only through the
        # methods below that tell the engine of live brokers.
        self._live_broker_epochs: dict[int, int] | None = None

    # --- Controller epoch and metrics ----------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.native.epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self.native.epoch = value

    @property
    def epoch_zk_version(self) -> int:
        return self.native.epoch_zk_version

    @epoch_zk_version.setter
    def epoch_zk_version(self, value: int) -> None:
        self.native.epoch_zk_version = value

    @property
    def offline_partition_count(self) -> int:
        return self.native.offline_partition_count()

    @property
    def preferred_replica_imbalance_count(self) -> int:
        return self.native.preferred_replica_imbalance_count()

    @property
    def unclean_leader_elections(self) -> int:
        return self.native.unclean_leader_elections()

    def record_unclean_leader_election(self) -> None:
        self.native.record_unclean_leader_election()

    def reset_context(self) -> None:
        self.native.reset()
        self._broker_infos.clear()
        self._live_broker_epochs = None
        self._topic_ids = None

    # --- Brokers -------------------------------------------------------------------------------

    def set_live_brokers(self, epochs: Mapping[int, int], infos: Mapping[int, BrokerInfo] | None = None) -> None:
        self.native.set_live_brokers(list(epochs.items()))
        self._live_broker_epochs = None
        self._broker_infos = {b: (infos or {}).get(b) or BrokerInfo(b) for b in epochs}

    def add_live_brokers(self, epochs: Mapping[int, int], infos: Mapping[int, BrokerInfo] | None = None) -> None:
        self.native.add_live_brokers(list(epochs.items()))
        self._live_broker_epochs = None
        for broker in epochs:
            self._broker_infos[broker] = (infos or {}).get(broker) or BrokerInfo(broker)

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        broker_ids = list(broker_ids)
        self.native.remove_live_brokers(broker_ids)
        self._live_broker_epochs = None
        for broker in broker_ids:
            self._broker_infos.pop(broker, None)

    def update_broker_metadata(self, info: BrokerInfo) -> None:
        if info.id in self._broker_infos:
            self._broker_infos[info.id] = info

    @property
    def live_broker_ids(self) -> Set[int]:
        return frozenset(self.native.live_broker_ids())

    @property
    def live_or_shutting_down_broker_ids(self) -> Set[int]:
        return frozenset(self.native.live_or_shutting_down_broker_ids())

    @property
    def shutting_down_broker_ids(self) -> Set[int]:
        return frozenset(self.native.shutting_down_broker_ids())

    def add_shutting_down_broker(self, broker_id: int) -> None:
        self.native.add_shutting_down_broker(broker_id)

    def remove_shutting_down_brokers(self, broker_ids: Iterable[int]) -> None:
        self.native.remove_shutting_down_brokers(list(broker_ids))

    def live_broker_epoch(self, broker_id: int) -> int | None:
        return self.native.live_broker_epoch(broker_id)

    def live_broker_epochs(self) -> dict[int, int]:
        if self._live_broker_epochs is None:
            self._live_broker_epochs = dict(self.native.live_broker_epochs())
        return dict(self._live_broker_epochs)

    def live_or_shutting_down_brokers(self) -> list[BrokerInfo]:
        return [self._broker_infos[b] for b in sorted(self._broker_infos)]

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        return self.native.is_replica_online(broker_id, tp.topic, tp.partition, include_shutting_down)

    def add_replicas_on_offline_dirs(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        self.native.add_replicas_on_offline_dirs(broker_id, native_set(partitions))

    def remove_replicas_on_offline_dirs(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        self.native.remove_replicas_on_offline_dirs(broker_id, native_set(partitions))

    def clear_replicas_on_offline_dirs(self, broker_ids: Iterable[int]) -> None:
        self.native.clear_replicas_on_offline_dirs(list(broker_ids))

    def replicas_on_offline_dirs(self, broker_id: int) -> Set[TopicPartition]:
        return frozenset(PartitionList(self.native, self.native.replicas_on_offline_dirs(broker_id)))

    # --- Topics and assignments ----------------------------------------------------------------

    @property
    def all_topics(self) -> Set[str]:
        return dict.fromkeys(self.native.all_topics()).keys()

    def add_topic(self, topic: str, topic_id: str | None = None) -> None:
        self.native.add_topic(topic, topic_id)
        self._topic_ids = None

    def remove_topic(self, topic: str) -> None:
        self.native.remove_topic(topic)
        self._topic_ids = None

    @property
    def topic_ids(self) -> Mapping[str, str]:
        if self._topic_ids is None:
            self._topic_ids = MappingProxyType(dict(self.native.topic_ids()))
        return self._topic_ids

    def update_partition_full_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.native.update_assignment(tp.topic, tp.partition, assignment_tuple(assignment))

    def reserve_partitions(self, count: int) -> None:
        self.native.reserve_partitions(count)

    def put_topic_assignment(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.put_topic_assignment(topic, partitions))

    def put_partition_assignments(self, assignments: Mapping[TopicPartition, ReplicaAssignment]) -> None:
        self.native.put_assignments([(tp.topic, tp.partition, assignment_tuple(a)) for tp, a in assignments.items()])

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return assignment_of(self.native.assignment(tp.topic, tp.partition))

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(self.native.assignment(tp.topic, tp.partition)[0])

    def partition_full_replica_assignment_for_topic(self, topic: str) -> dict[int, ReplicaAssignment]:
        return self._cached_topic_assignment(topic).to_dict()

    def topic_assignment_with(self, tp: TopicPartition, assignment: ReplicaAssignment) -> Mapping[int, ReplicaAssignment]:
        """An :class:`AssignmentMap` made from the cached topic (see below): no copy of the topic."""
        return self._cached_topic_assignment(tp.topic).replacing({tp.partition: assignment})

    def _cached_topic_assignment(self, topic: str) -> AssignmentMap:
        """The controller writes a reassigned partition's whole topic znode (twice per partition,
        as Kafka does), so the topic's assignment is kept as Python objects, an
        :class:`AssignmentMap` patched from the engine's journal of changes: a write replaces a
        partition of it instead of converting or copying the topic, and a partition that did not
        change is the same object in every version."""
        changes = self.native.take_assignment_changes()
        cache = self._topic_assignments
        if changes is None:
            cache.clear()
        elif changes:
            by_topic: dict[str, dict[int, ReplicaAssignment]] = {}
            for t, p, a in changes:
                if t in cache:
                    by_topic.setdefault(t, {})[p] = assignment_of(a)
            for t, changed in by_topic.items():
                cache[t] = cache[t].replacing(changed)
        found = cache.get(topic)
        if found is None:
            if len(cache) >= CACHED_TOPIC_ASSIGNMENTS:
                del cache[next(iter(cache))]
            found = cache[topic] = AssignmentMap({p: assignment_of(a) for p, a in self.native.assignments_for_topic(topic)})
        return found

    def partitions_for_topic(self, topic: str) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.partitions_for_topic(topic))

    def all_partitions(self) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.all_partitions())

    @property
    def partition_count(self) -> int:
        return self.native.partition_count()

    def partitions_on_broker(self, broker_id: int) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.partitions_on_broker(broker_id))

    def replicas_on_brokers(self, broker_ids: Collection[int]) -> Sequence[PartitionReplica]:
        return ReplicaList(self.native, self.native.replicas_on_brokers(list(broker_ids)))

    def replicas_for_topic(self, topic: str) -> Sequence[PartitionReplica]:
        return ReplicaList(self.native, self.native.replicas_for_topic(topic))

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> Sequence[PartitionReplica]:
        return ReplicaList(self.native, self.native.replicas_for_partitions(native_set(partitions)))

    def online_and_offline_replicas(self) -> tuple[Sequence[PartitionReplica], Sequence[PartitionReplica]]:
        online, offline = self.native.online_and_offline_replicas()
        return ReplicaList(self.native, online), ReplicaList(self.native, offline)

    @property
    def partitions_being_reassigned(self) -> Set[TopicPartition]:
        return ReassigningPartitions(self.native)

    def add_partition_being_reassigned(self, tp: TopicPartition) -> None:
        self.native.add_partition_being_reassigned(tp.topic, tp.partition)

    def remove_partition_being_reassigned(self, tp: TopicPartition) -> None:
        self.native.remove_partition_being_reassigned(tp.topic, tp.partition)

    # --- Leadership ----------------------------------------------------------------------------

    def put_partition_leadership(self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch) -> None:
        self.native.put_leadership(tp.topic, tp.partition, leadership_tuple(leadership))

    def put_partition_leaderships(self, leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]) -> None:
        self.native.put_leaderships([(tp.topic, tp.partition, leadership_tuple(l)) for tp, l in leaderships.items()])

    def load_partition_leaderships(self, store: StateStore, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KctlError]:
        failed = self.native.load_leaderships(native_set(partitions), store)
        return {TopicPartition(topic, partition): cast(KctlError, error) for topic, partition, error in failed}

    def partition_leadership(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        t = self.native.leadership(tp.topic, tp.partition)
        return None if t is None else leadership_of(t)

    def clear_partition_leadership(self) -> None:
        self.native.clear_leadership()

    def isr_changes_to_check(
        self, changes: Mapping[TopicPartition, LeaderAndIsr], eligible: Set[int] | None
    ) -> Collection[TopicPartition]:
        return self.native.isr_changes_to_check(changes if type(changes) is dict else dict(changes), eligible)

    def partitions_with_leaders(self) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.partitions_with_leaders())

    def unconverged_partitions(self, limit: int | None = None) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.unconverged_partitions(UNLIMITED if limit is None else limit))

    def partitions_with_offline_leader(self) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.partitions_with_offline_leader())

    def partition_leaders_on_broker(self, broker_id: int) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.partition_leaders_on_broker(broker_id))

    def leader_counts(self) -> dict[int, int]:
        return dict(self.native.leader_counts())

    def replica_counts(self) -> dict[int, int]:
        return dict(self.native.replica_counts())

    # --- Bulk views for the controller's hot paths --------------------------------------------------

    def split_replicas_by_topic_deletion(
        self, replicas: Sequence[PartitionReplica]
    ) -> tuple[Sequence[PartitionReplica], Sequence[PartitionReplica]]:
        deleting, others = self.native.split_replicas_by_topic_deletion(native_set(replicas))
        return ReplicaList(self.native, deleting), ReplicaList(self.native, others)

    def controlled_shutdown_partitions(self, broker_id: int) -> tuple[Sequence[TopicPartition], Sequence[TopicPartition]]:
        led, followed = self.native.controlled_shutdown_partitions(broker_id)
        return PartitionList(self.native, led), PartitionList(self.native, followed)

    def replicas_of(self, partitions: Sequence[TopicPartition], broker_id: int) -> Sequence[PartitionReplica]:
        return ReplicaList(self.native, self.native.replicas_of(native_set(partitions), broker_id))

    def partitions_not_led_by_preferred(self, partitions: Sequence[TopicPartition]) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.partitions_not_led_by_preferred(native_set(partitions)))

    def auto_rebalance_candidates(self, ratio: float, reassignments_block: bool) -> list[tuple[int, Sequence[TopicPartition]]]:
        return [
            (broker, PartitionList(self.native, parts))
            for broker, parts in self.native.auto_rebalance_candidates(ratio, reassignments_block)
        ]

    # --- States --------------------------------------------------------------------------------

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return _PARTITION_STATES[self.native.partition_state(tp.topic, tp.partition)]

    def has_partition_state(self, tp: TopicPartition) -> bool:
        return self.native.has_partition_state(tp.topic, tp.partition)

    def put_partition_state(self, tp: TopicPartition, state: PartitionState) -> None:
        self.native.put_partition_state(tp.topic, tp.partition, state.state_id)

    def partitions_in_states(self, states: Collection[PartitionState], topic: str | None = None) -> Sequence[TopicPartition]:
        return PartitionList(self.native, self.native.partitions_in_states([s.state_id for s in states], topic))

    def replica_state(self, replica: PartitionReplica) -> ReplicaState:
        state = self.native.replica_state(replica.tp.topic, replica.tp.partition, replica.broker)
        return ReplicaState.NON_EXISTENT if state is None else _REPLICA_STATES[state]

    def has_replica_state(self, replica: PartitionReplica) -> bool:
        return self.native.replica_state(replica.tp.topic, replica.tp.partition, replica.broker) is not None

    def put_replica_state(self, replica: PartitionReplica, state: ReplicaState) -> None:
        self.native.put_replica_state(replica.tp.topic, replica.tp.partition, replica.broker, state.state_id)

    def remove_replica_state(self, replica: PartitionReplica) -> None:
        self.native.remove_replica_state(replica.tp.topic, replica.tp.partition, replica.broker)

    def replicas_in_state(self, topic: str, state: ReplicaState) -> Sequence[PartitionReplica]:
        return ReplicaList(self.native, self.native.replicas_in_state(topic, state.state_id))

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return self.native.are_all_replicas_in_state(topic, state.state_id)

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return self.native.is_any_replica_in_state(topic, state.state_id)

    # --- Topic deletion ------------------------------------------------------------------------

    @property
    def topics_to_be_deleted(self) -> Set[str]:
        return dict.fromkeys(self.native.topics_to_be_deleted()).keys()

    @property
    def topics_with_deletion_started(self) -> Set[str]:
        return dict.fromkeys(self.native.topics_with_deletion_started()).keys()

    @property
    def topics_ineligible_for_deletion(self) -> Set[str]:
        return dict.fromkeys(self.native.topics_ineligible_for_deletion()).keys()

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        self.native.queue_topic_deletion(list(topics))

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        self.native.begin_topic_deletion(list(topics))

    def mark_topics_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        self.native.mark_topics_ineligible_for_deletion(list(topics))

    def clear_topics_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        self.native.clear_topics_ineligible_for_deletion(list(topics))

    def __repr__(self) -> str:
        return f"NativeContext(epoch={self.epoch}, brokers={sorted(self._broker_infos)}, partitions={self.partition_count})"
