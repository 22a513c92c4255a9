"""The reference (pure Python) controller context: Kafka's ControllerContext, dict by dict.

Sets whose iteration order could leak into results are kept as insertion-ordered dicts, because
Python randomises string hashing between runs and results must be reproducible.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence, Set

from kctl.engine_api.context import ControllerContext
from kctl.errors import KctlError, NoNodeError
from kctl.stores.base import StateStore
from kctl.model import (
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)

_EMPTY_ASSIGNMENT = ReplicaAssignment(())


def _has_preferred_leader(assignment: ReplicaAssignment, leadership: LeaderIsrAndControllerEpoch) -> bool:
    if not assignment.replicas:
        return True
    preferred = assignment.replicas[0]
    if assignment.is_being_reassigned and preferred in assignment.adding_replicas:
        # An adding preferred replica only counts once it has joined the ISR.
        return preferred not in leadership.leader_and_isr.isr
    return leadership.leader_and_isr.leader == preferred


class ReferenceContext(ControllerContext):
    engine = "reference"

    def __init__(self, engine: str = "reference") -> None:
        self._reset()

    def _reset(self) -> None:
        self.epoch = 0
        self.epoch_zk_version = 0
        self._live_broker_epochs: dict[int, int] = {}
        self._broker_infos: dict[int, BrokerInfo] = {}
        self._shutting_down: set[int] = set()
        self._offline_dirs: dict[int, set[TopicPartition]] = {}
        self._all_topics: dict[str, None] = {}
        self._topic_ids: dict[str, str] = {}
        self._assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        self._leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self._partition_states: dict[TopicPartition, PartitionState] = {}
        self._replica_states: dict[PartitionReplica, ReplicaState] = {}
        self._being_reassigned: dict[TopicPartition, None] = {}
        self._to_be_deleted: dict[str, None] = {}
        self._deletion_started: dict[str, None] = {}
        self._ineligible_for_deletion: dict[str, None] = {}
        self._offline_partition_count = 0
        self._imbalance_count = 0
        self._unclean_elections = 0

    def reset_context(self) -> None:
        unclean = self._unclean_elections  # a meter outlives resignations
        self._reset()
        self._unclean_elections = unclean

    # --- Metrics -------------------------------------------------------------------------------

    @property
    def offline_partition_count(self) -> int:
        return self._offline_partition_count

    @property
    def preferred_replica_imbalance_count(self) -> int:
        return self._imbalance_count

    @property
    def unclean_leader_elections(self) -> int:
        return self._unclean_elections

    def record_unclean_leader_election(self) -> None:
        self._unclean_elections += 1

    def _update_imbalance(
        self,
        tp: TopicPartition,
        old: tuple[ReplicaAssignment | None, LeaderIsrAndControllerEpoch | None],
        new: tuple[ReplicaAssignment | None, LeaderIsrAndControllerEpoch | None],
    ) -> None:
        if tp.topic in self._to_be_deleted:
            return
        if old[0] is not None and old[1] is not None and not _has_preferred_leader(old[0], old[1]):
            self._imbalance_count -= 1
        if new[0] is not None and new[1] is not None and not _has_preferred_leader(new[0], new[1]):
            self._imbalance_count += 1

    def _clean_imbalance(self, topic: str) -> None:
        for partition, assignment in self._assignments.get(topic, {}).items():
            leadership = self._leadership.get(TopicPartition(topic, partition))
            if leadership is not None and not _has_preferred_leader(assignment, leadership):
                self._imbalance_count -= 1

    # --- Brokers -------------------------------------------------------------------------------

    def set_live_brokers(self, epochs: Mapping[int, int], infos: Mapping[int, BrokerInfo] | None = None) -> None:
        self._live_broker_epochs.clear()
        self._broker_infos.clear()
        self.add_live_brokers(epochs, infos)

    def add_live_brokers(self, epochs: Mapping[int, int], infos: Mapping[int, BrokerInfo] | None = None) -> None:
        for broker_id, epoch in epochs.items():
            self._live_broker_epochs[broker_id] = epoch
            self._broker_infos[broker_id] = (infos or {}).get(broker_id) or BrokerInfo(broker_id)

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self._live_broker_epochs.pop(broker_id, None)
            self._broker_infos.pop(broker_id, None)

    def update_broker_metadata(self, info: BrokerInfo) -> None:
        if info.id in self._broker_infos:
            self._broker_infos[info.id] = info

    @property
    def live_broker_ids(self) -> Set[int]:
        return frozenset(b for b in self._live_broker_epochs if b not in self._shutting_down)

    @property
    def live_or_shutting_down_broker_ids(self) -> Set[int]:
        return frozenset(self._live_broker_epochs)

    @property
    def shutting_down_broker_ids(self) -> Set[int]:
        return frozenset(self._shutting_down)

    def add_shutting_down_broker(self, broker_id: int) -> None:
        self._shutting_down.add(broker_id)

    def remove_shutting_down_brokers(self, broker_ids: Iterable[int]) -> None:
        self._shutting_down.difference_update(broker_ids)

    def live_broker_epoch(self, broker_id: int) -> int | None:
        return self._live_broker_epochs.get(broker_id)

    def live_broker_epochs(self) -> dict[int, int]:
        return dict(sorted(self._live_broker_epochs.items()))

    def live_or_shutting_down_brokers(self) -> list[BrokerInfo]:
        return [self._broker_infos[b] for b in sorted(self._broker_infos)]

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        if broker_id not in self._live_broker_epochs:
            return False
        if not include_shutting_down and broker_id in self._shutting_down:
            return False
        offline = self._offline_dirs.get(broker_id)
        return offline is None or tp not in offline

    def add_replicas_on_offline_dirs(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        partitions = set(partitions)
        if partitions:  # no entry for none, as the native context
            self._offline_dirs.setdefault(broker_id, set()).update(partitions)

    def remove_replicas_on_offline_dirs(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        offline = self._offline_dirs.get(broker_id)
        if offline is not None:
            offline.difference_update(partitions)
            if not offline:
                del self._offline_dirs[broker_id]

    def clear_replicas_on_offline_dirs(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self._offline_dirs.pop(broker_id, None)

    def replicas_on_offline_dirs(self, broker_id: int) -> Set[TopicPartition]:
        return frozenset(self._offline_dirs.get(broker_id, ()))

    # --- Topics and assignments ----------------------------------------------------------------

    @property
    def all_topics(self) -> Set[str]:
        return self._all_topics.keys()

    def add_topic(self, topic: str, topic_id: str | None = None) -> None:
        self._all_topics[topic] = None
        if topic_id is not None:
            self._topic_ids[topic] = topic_id

    def remove_topic(self, topic: str) -> None:
        if topic not in self._to_be_deleted:  # queued topics were already removed from the metric
            self._clean_imbalance(topic)
        self._to_be_deleted.pop(topic, None)
        self._deletion_started.pop(topic, None)
        self._all_topics.pop(topic, None)
        self._topic_ids.pop(topic, None)
        for partition in self._assignments.pop(topic, {}):
            self._leadership.pop(TopicPartition(topic, partition), None)

    @property
    def topic_ids(self) -> Mapping[str, str]:
        return self._topic_ids

    def update_partition_full_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        partitions = self._assignments.setdefault(tp.topic, {})
        previous = partitions.get(tp.partition)
        partitions[tp.partition] = assignment
        leadership = self._leadership.get(tp)
        self._update_imbalance(tp, (previous, leadership), (assignment, leadership))

    def put_partition_assignments(self, assignments: Mapping[TopicPartition, ReplicaAssignment]) -> None:
        for tp, assignment in assignments.items():
            self.update_partition_full_replica_assignment(tp, assignment)

    def reserve_partitions(self, count: int) -> None:
        """Nothing to size: dicts grow as they go."""

    def put_topic_assignment(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> Sequence[TopicPartition]:
        loaded = []
        for partition in sorted(partitions):
            tp, assignment = TopicPartition(topic, partition), partitions[partition]
            self.update_partition_full_replica_assignment(tp, assignment)
            if assignment.is_being_reassigned:
                self.add_partition_being_reassigned(tp)
            loaded.append(tp)
        return loaded

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        return self._assignments.get(tp.topic, {}).get(tp.partition, _EMPTY_ASSIGNMENT)

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.partition_full_replica_assignment(tp).replicas

    def partition_full_replica_assignment_for_topic(self, topic: str) -> dict[int, ReplicaAssignment]:
        return dict(self._assignments.get(topic, {}))

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in self._assignments.get(topic, {})]

    def all_partitions(self) -> list[TopicPartition]:
        return list(self._partitions())

    def _partitions(self) -> Iterator[TopicPartition]:
        """Every partition in context order, made one at a time: a scan that keeps few of them
        lets the rest die young, where a list of 1M new partitions outlives the young collections
        and brings full ones (a 1M broker failure scans twice)."""
        return (TopicPartition(t, p) for t, parts in self._assignments.items() for p in parts)

    @property
    def partition_count(self) -> int:
        return sum(len(parts) for parts in self._assignments.values())

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [
            TopicPartition(t, p)
            for t, parts in self._assignments.items()
            for p, assignment in parts.items()
            if broker_id in assignment.replicas
        ]

    def replicas_on_brokers(self, broker_ids: Collection[int]) -> list[PartitionReplica]:
        return [
            PartitionReplica(tp, broker_id)
            for broker_id in sorted(set(broker_ids))
            for tp in self.partitions_on_broker(broker_id)
        ]

    def replicas_for_topic(self, topic: str) -> list[PartitionReplica]:
        return self.replicas_for_partitions(self.partitions_for_topic(topic))

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> list[PartitionReplica]:
        return [PartitionReplica(tp, r) for tp in partitions for r in self.partition_replica_assignment(tp)]

    def online_and_offline_replicas(self) -> tuple[list[PartitionReplica], list[PartitionReplica]]:
        online: list[PartitionReplica] = []
        offline: list[PartitionReplica] = []
        for replica in self.replicas_for_partitions(self.all_partitions()):
            (online if self.is_replica_online(replica.broker, replica.tp) else offline).append(replica)
        return online, offline

    @property
    def partitions_being_reassigned(self) -> Set[TopicPartition]:
        return self._being_reassigned.keys()

    def add_partition_being_reassigned(self, tp: TopicPartition) -> None:
        self._being_reassigned[tp] = None

    def remove_partition_being_reassigned(self, tp: TopicPartition) -> None:
        self._being_reassigned.pop(tp, None)

    # --- Leadership ----------------------------------------------------------------------------

    def put_partition_leadership(self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch) -> None:
        previous = self._leadership.get(tp)
        self._leadership[tp] = leadership
        assignment = self.partition_full_replica_assignment(tp)
        self._update_imbalance(tp, (assignment, previous), (assignment, leadership))

    def put_partition_leaderships(self, leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]) -> None:
        for tp, leadership in leaderships.items():
            self.put_partition_leadership(tp, leadership)

    def load_partition_leaderships(self, store: StateStore, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KctlError]:
        read = store.get_partition_states(list(partitions))
        self.put_partition_leaderships(read.values)
        return {tp: e for tp, e in read.errors.items() if not isinstance(e, NoNodeError)}

    def partition_leadership(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self._leadership.get(tp)

    def clear_partition_leadership(self) -> None:
        self._leadership.clear()
        self._imbalance_count = 0

    def isr_changes_to_check(
        self, changes: Mapping[TopicPartition, LeaderAndIsr], eligible: Set[int] | None
    ) -> Collection[TopicPartition]:
        return list(changes)  # the oracle judges every proposal in Python

    def _partitions_with_leadership(self) -> Iterable[tuple[TopicPartition, LeaderIsrAndControllerEpoch]]:
        """Cached leadership in context order, topics queued for deletion excluded."""
        for tp in self._partitions():
            if tp.topic in self._to_be_deleted:
                continue
            leadership = self._leadership.get(tp)
            if leadership is not None:
                yield tp, leadership

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return [tp for tp, _ in self._partitions_with_leadership()]

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        return [
            tp
            for tp, leadership in self._partitions_with_leadership()
            if not self.is_replica_online(leadership.leader_and_isr.leader, tp)
        ]

    def partition_leaders_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [
            tp
            for tp, leadership in self._partitions_with_leadership()
            if leadership.leader_and_isr.leader == broker_id and len(self.partition_replica_assignment(tp)) > 1
        ]

    def leader_counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for leadership in self._leadership.values():
            leader = leadership.leader_and_isr.leader
            if leader >= 0:
                counts[leader] = counts.get(leader, 0) + 1
        return counts

    def replica_counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for assignments in self._assignments.values():
            for assignment in assignments.values():
                for broker in assignment.replicas:
                    counts[broker] = counts.get(broker, 0) + 1
        return counts

    # --- Bulk views for the controller's hot paths --------------------------------------------------

    def split_replicas_by_topic_deletion(
        self, replicas: Sequence[PartitionReplica]
    ) -> tuple[list[PartitionReplica], list[PartitionReplica]]:
        deleting = [r for r in replicas if r.tp.topic in self._to_be_deleted]
        return deleting, [r for r in replicas if r.tp.topic not in self._to_be_deleted]

    def controlled_shutdown_partitions(self, broker_id: int) -> tuple[list[TopicPartition], list[TopicPartition]]:
        acted_on = [
            tp for tp in self.partitions_on_broker(broker_id)
            if len(self.partition_replica_assignment(tp)) > 1
            and tp in self._leadership
            and tp.topic not in self._to_be_deleted
        ]
        led = [tp for tp in acted_on if self._leadership[tp].leader_and_isr.leader == broker_id]
        return led, [tp for tp in acted_on if self._leadership[tp].leader_and_isr.leader != broker_id]

    def replicas_of(self, partitions: Sequence[TopicPartition], broker_id: int) -> list[PartitionReplica]:
        return [PartitionReplica(tp, broker_id) for tp in partitions]

    def unconverged_partitions(self, limit: int | None = None) -> list[TopicPartition]:
        found = []
        for tp in self._partitions():
            if self.is_topic_queued_up_for_deletion(tp.topic):
                continue
            online = [r for r in self.partition_replica_assignment(tp) if self.is_replica_online(r, tp)]
            if not online:
                continue
            leadership = self.partition_leadership(tp)
            if (
                leadership is None
                or self.partition_state(tp) is not PartitionState.ONLINE
                or not set(online) <= set(leadership.leader_and_isr.isr)
            ):
                found.append(tp)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def partitions_not_led_by_preferred(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        def led_by_preferred(tp: TopicPartition) -> bool:
            replicas = self.partition_replica_assignment(tp)
            leadership = self._leadership.get(tp)
            return bool(replicas) and leadership is not None and leadership.leader_and_isr.leader == replicas[0]

        return [tp for tp in partitions if not led_by_preferred(tp)]

    def auto_rebalance_candidates(self, ratio: float, reassignments_block: bool) -> list[tuple[int, Sequence[TopicPartition]]]:
        groups: dict[int, tuple[list[TopicPartition], list[TopicPartition]]] = {}
        for tp in self._partitions():
            replicas = self.partition_replica_assignment(tp)
            if not replicas or tp.topic in self._to_be_deleted:
                continue
            group, not_preferred = groups.setdefault(replicas[0], ([], []))
            group.append(tp)
            leadership = self._leadership.get(tp)
            if leadership is not None and leadership.leader_and_isr.leader != replicas[0]:
                not_preferred.append(tp)
        blocked = reassignments_block and bool(self._being_reassigned)
        out: list[tuple[int, Sequence[TopicPartition]]] = []
        for broker in sorted(groups):
            group, not_preferred = groups[broker]
            if len(not_preferred) / len(group) <= ratio:
                continue
            out.append((broker, [] if blocked else [
                tp for tp in not_preferred
                if tp.topic in self._all_topics
                and self.is_replica_online(broker, tp)
                and broker in self._leadership[tp].leader_and_isr.isr
            ]))
        return out

    # --- States --------------------------------------------------------------------------------

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self._partition_states.get(tp, PartitionState.NON_EXISTENT)

    def has_partition_state(self, tp: TopicPartition) -> bool:
        return tp in self._partition_states

    def put_partition_state(self, tp: TopicPartition, state: PartitionState) -> None:
        current = self._partition_states.get(tp, PartitionState.NON_EXISTENT)
        self._partition_states[tp] = state
        if tp.topic not in self._deletion_started:
            if current is not PartitionState.OFFLINE and state is PartitionState.OFFLINE:
                self._offline_partition_count += 1
            elif current is PartitionState.OFFLINE and state is not PartitionState.OFFLINE:
                self._offline_partition_count -= 1

    def partitions_in_states(self, states: Collection[PartitionState], topic: str | None = None) -> list[TopicPartition]:
        partitions = self._partitions() if topic is None else self.partitions_for_topic(topic)
        return [tp for tp in partitions if tp in self._partition_states and self._partition_states[tp] in states]

    def replica_state(self, replica: PartitionReplica) -> ReplicaState:
        return self._replica_states.get(replica, ReplicaState.NON_EXISTENT)

    def has_replica_state(self, replica: PartitionReplica) -> bool:
        return replica in self._replica_states

    def put_replica_state(self, replica: PartitionReplica, state: ReplicaState) -> None:
        self._replica_states[replica] = state

    def remove_replica_state(self, replica: PartitionReplica) -> None:
        self._replica_states.pop(replica, None)

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionReplica]:
        return [r for r in self.replicas_for_topic(topic) if self._replica_states.get(r) is state]

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self._replica_states.get(r) is state for r in self.replicas_for_topic(topic))

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self._replica_states.get(r) is state for r in self.replicas_for_topic(topic))

    # --- Topic deletion ------------------------------------------------------------------------

    @property
    def topics_to_be_deleted(self) -> Set[str]:
        return self._to_be_deleted.keys()

    @property
    def topics_with_deletion_started(self) -> Set[str]:
        return self._deletion_started.keys()

    @property
    def topics_ineligible_for_deletion(self) -> Set[str]:
        return self._ineligible_for_deletion.keys()

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        for topic in topics:
            if topic not in self._to_be_deleted:
                self._clean_imbalance(topic)
                self._to_be_deleted[topic] = None

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        self._deletion_started.update(dict.fromkeys(topics))

    def mark_topics_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        self._ineligible_for_deletion.update(dict.fromkeys(topics))

    def clear_topics_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self._ineligible_for_deletion.pop(topic, None)

    def __repr__(self) -> str:
        return (
            f"ReferenceContext(epoch={self.epoch}, brokers={sorted(self._live_broker_epochs)}, "
            f"topics={len(self._all_topics)}, partitions={self.partition_count})"
        )
