"""What every engine's context is: the controller's in-memory view of the cluster (Kafka's
ControllerContext, reference §1.4).

The public constructor (``kctl.context.ControllerContext(engine=...)``) returns the implementation
of the named engine; every engine implements this same API and must give identical results.
``"reference"`` is plain Python and is the oracle the native engine is checked against.

Ordering: every collection the context derives (all partitions, partitions on a broker, replicas of
brokers, partitions in some states …) is in *context order*: topics in the order they were first
given an assignment, partitions of a topic likewise. Broker-keyed collections are in ascending
broker id. This is what makes state-change logs and request batches identical across engines.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Iterable, Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any

from kctl.engine_api import default_engine, engine_parts
from kctl.errors import KctlError
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

if TYPE_CHECKING:
    from kctl.stores.base import StateStore


class ControllerContext(abc.ABC):
    """The controller's cache of brokers, assignments, leadership and states."""

    engine: str

    def __new__(cls, *args: Any, **kwargs: Any) -> ControllerContext:
        if cls is ControllerContext:
            engine = kwargs.get("engine", args[0] if args else None) or default_engine()
            return super().__new__(engine_parts(engine).context)
        return super().__new__(cls)

    # --- Controller epoch and metrics ----------------------------------------------------------

    epoch: int
    """The controller epoch of this controller (0 when not active)."""
    epoch_zk_version: int
    """The version of ``/controller_epoch``: the token that fences every controller write."""

    @property
    @abc.abstractmethod
    def offline_partition_count(self) -> int:
        """Partitions in OfflinePartition, ignoring topics whose deletion has started."""

    @property
    @abc.abstractmethod
    def preferred_replica_imbalance_count(self) -> int:
        """Partitions whose cached leader is not their preferred replica (topics queued for deletion
        excluded; a reassigning partition whose preferred replica is being added counts only once that
        replica is in the ISR)."""

    @property
    @abc.abstractmethod
    def unclean_leader_elections(self) -> int:
        """Unclean leader elections since this context was created."""

    @abc.abstractmethod
    def record_unclean_leader_election(self) -> None:
        ...

    @abc.abstractmethod
    def reset_context(self) -> None:
        """Forget everything (controller resignation); epoch and epoch version go back to 0."""

    # --- Brokers -------------------------------------------------------------------------------

    @abc.abstractmethod
    def set_live_brokers(
        self, epochs: Mapping[int, int], infos: Mapping[int, BrokerInfo] | None = None
    ) -> None:
        """Replace the live brokers: broker id → broker epoch, with optional registration details."""

    @abc.abstractmethod
    def add_live_brokers(self, epochs: Mapping[int, int], infos: Mapping[int, BrokerInfo] | None = None) -> None:
        ...

    @abc.abstractmethod
    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        ...

    @abc.abstractmethod
    def update_broker_metadata(self, info: BrokerInfo) -> None:
        ...

    @property
    @abc.abstractmethod
    def live_broker_ids(self) -> Set[int]:
        """Registered brokers that are not shutting down."""

    @property
    @abc.abstractmethod
    def live_or_shutting_down_broker_ids(self) -> Set[int]:
        """All registered brokers."""

    @property
    @abc.abstractmethod
    def shutting_down_broker_ids(self) -> Set[int]:
        ...

    @abc.abstractmethod
    def add_shutting_down_broker(self, broker_id: int) -> None:
        ...

    @abc.abstractmethod
    def remove_shutting_down_brokers(self, broker_ids: Iterable[int]) -> None:
        ...

    @abc.abstractmethod
    def live_broker_epoch(self, broker_id: int) -> int | None:
        """The cached broker epoch of a registered broker, None when it is not registered."""

    @abc.abstractmethod
    def live_broker_epochs(self) -> dict[int, int]:
        ...

    @abc.abstractmethod
    def live_or_shutting_down_brokers(self) -> list[BrokerInfo]:
        """Registration details of every registered broker, by id."""

    @abc.abstractmethod
    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        """The broker is live (or shutting down, if asked) and the partition is not on one of its
        offline log directories."""

    @abc.abstractmethod
    def add_replicas_on_offline_dirs(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        ...

    @abc.abstractmethod
    def remove_replicas_on_offline_dirs(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        ...

    @abc.abstractmethod
    def clear_replicas_on_offline_dirs(self, broker_ids: Iterable[int]) -> None:
        ...

    @abc.abstractmethod
    def replicas_on_offline_dirs(self, broker_id: int) -> Set[TopicPartition]:
        ...

    # --- Topics and assignments ----------------------------------------------------------------

    @property
    @abc.abstractmethod
    def all_topics(self) -> Set[str]:
        ...

    @abc.abstractmethod
    def add_topic(self, topic: str, topic_id: str | None = None) -> None:
        ...

    @abc.abstractmethod
    def remove_topic(self, topic: str) -> None:
        """Drop a topic with its assignments and cached leadership (after deletion)."""

    @property
    @abc.abstractmethod
    def topic_ids(self) -> Mapping[str, str]:
        ...

    @abc.abstractmethod
    def update_partition_full_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ...

    @abc.abstractmethod
    def put_partition_assignments(self, assignments: Mapping[TopicPartition, ReplicaAssignment]) -> None:
        """Bulk form of :meth:`update_partition_full_replica_assignment` (failover, topic creation)."""

    @abc.abstractmethod
    def reserve_partitions(self, count: int) -> None:
        """``count`` partitions are about to be loaded (a failover's topics, created topics): an
        engine that keeps partitions in columns sizes them once instead of growing them step by
        step. A hint: nothing observable changes."""

    @abc.abstractmethod
    def put_topic_assignment(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> Sequence[TopicPartition]:
        """Load a topic's stored assignment in partition order, marking partitions with adding or
        removing replicas as being reassigned; returns the loaded partitions."""

    @abc.abstractmethod
    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """RS/AR/RR of a partition (empty when unknown)."""

    @abc.abstractmethod
    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        ...

    @abc.abstractmethod
    def partition_full_replica_assignment_for_topic(self, topic: str) -> dict[int, ReplicaAssignment]:
        ...

    def topic_assignment_with(self, tp: TopicPartition, assignment: ReplicaAssignment) -> Mapping[int, ReplicaAssignment]:
        """The assignment of ``tp``'s topic with ``tp``'s replaced by ``assignment``: what the
        controller writes to the topic's znode when one partition's changes. An engine may hand
        back an immutable mapping that shares the unchanged partitions with the previous write."""
        partitions = self.partition_full_replica_assignment_for_topic(tp.topic)
        partitions[tp.partition] = assignment
        return partitions

    @abc.abstractmethod
    def partitions_for_topic(self, topic: str) -> Sequence[TopicPartition]:
        ...

    @abc.abstractmethod
    def all_partitions(self) -> Sequence[TopicPartition]:
        ...

    @property
    @abc.abstractmethod
    def partition_count(self) -> int:
        ...

    @abc.abstractmethod
    def partitions_on_broker(self, broker_id: int) -> Sequence[TopicPartition]:
        ...

    @abc.abstractmethod
    def replicas_on_brokers(self, broker_ids: Collection[int]) -> Sequence[PartitionReplica]:
        ...

    @abc.abstractmethod
    def replicas_for_topic(self, topic: str) -> Sequence[PartitionReplica]:
        ...

    @abc.abstractmethod
    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> Sequence[PartitionReplica]:
        ...

    @abc.abstractmethod
    def online_and_offline_replicas(self) -> tuple[Sequence[PartitionReplica], Sequence[PartitionReplica]]:
        ...

    @property
    @abc.abstractmethod
    def partitions_being_reassigned(self) -> Set[TopicPartition]:
        ...

    @abc.abstractmethod
    def add_partition_being_reassigned(self, tp: TopicPartition) -> None:
        ...

    @abc.abstractmethod
    def remove_partition_being_reassigned(self, tp: TopicPartition) -> None:
        ...

    # --- Leadership ----------------------------------------------------------------------------

    @abc.abstractmethod
    def put_partition_leadership(self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch) -> None:
        ...

    @abc.abstractmethod
    def put_partition_leaderships(self, leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]) -> None:
        ...

    @abc.abstractmethod
    def load_partition_leaderships(self, store: StateStore, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KctlError]:
        """Cache the stored states of ``partitions`` as they are (keeping the epoch of the controller
        that wrote them), in one bulk read; returns the errors of the states that could not be read
        (a missing state is not an error)."""

    @abc.abstractmethod
    def partition_leadership(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        ...

    @abc.abstractmethod
    def clear_partition_leadership(self) -> None:
        ...

    @abc.abstractmethod
    def isr_changes_to_check(
        self, changes: Mapping[TopicPartition, LeaderAndIsr], eligible: Set[int] | None
    ) -> Collection[TopicPartition]:
        """Of an AlterPartition's proposals, those the controller's full checks must judge, in
        order; the others (same epochs as cached, a change, not recovering, an ISR of ``eligible``
        brokers when given) are written as proposed. An engine may leave every one to the checks:
        this only spares a roll's hundreds of thousands of plain proposals their per-partition
        Python."""

    @abc.abstractmethod
    def partitions_with_leaders(self) -> Sequence[TopicPartition]:
        """Partitions with cached leadership, excluding topics queued for deletion."""

    @abc.abstractmethod
    def partitions_with_offline_leader(self) -> Sequence[TopicPartition]:
        """Cached leader not online, topic not queued for deletion."""

    @abc.abstractmethod
    def partition_leaders_on_broker(self, broker_id: int) -> Sequence[TopicPartition]:
        """Partitions the broker leads with more than one replica, topic not queued for deletion."""

    @abc.abstractmethod
    def leader_counts(self) -> dict[int, int]:
        """Partitions led by each broker (cached leadership), brokers leading none left out."""

    @abc.abstractmethod
    def replica_counts(self) -> dict[int, int]:
        """Partitions each broker hosts a replica of (assignments, adding replicas included),
        brokers hosting none left out."""

    # --- Bulk views for the controller's hot paths (no per-partition Python on the native engine) --

    @abc.abstractmethod
    def split_replicas_by_topic_deletion(
        self, replicas: Sequence[PartitionReplica]
    ) -> tuple[Sequence[PartitionReplica], Sequence[PartitionReplica]]:
        """Replicas of topics queued for deletion, and the others (reference §6.6 step 1)."""

    @abc.abstractmethod
    def controlled_shutdown_partitions(self, broker_id: int) -> tuple[Sequence[TopicPartition], Sequence[TopicPartition]]:
        """Partitions a controlled shutdown acts on (RF > 1, cached leadership, topic not queued for
        deletion): those the broker leads, and those it follows (reference §6.12 steps 5–6)."""

    @abc.abstractmethod
    def replicas_of(self, partitions: Sequence[TopicPartition], broker_id: int) -> Sequence[PartitionReplica]:
        """The replicas of ``partitions`` on one broker."""

    @abc.abstractmethod
    def unconverged_partitions(self, limit: int | None = None) -> Sequence[TopicPartition]:
        """Partitions of topics not queued for deletion that have an online replica and yet no
        leader, a state other than Online, or an ISR without one of their online replicas (at most
        ``limit``): what a cluster still has to converge on before it is stable."""

    @abc.abstractmethod
    def partitions_not_led_by_preferred(self, partitions: Sequence[TopicPartition]) -> Sequence[TopicPartition]:
        """Those of ``partitions`` whose cached leader is not the head of their assignment."""

    @abc.abstractmethod
    def auto_rebalance_candidates(
        self, ratio: float, reassignments_block: bool
    ) -> list[tuple[int, Sequence[TopicPartition]]]:
        """The auto-rebalance check (reference §6.10): each preferred broker, ascending, whose share
        of partitions led elsewhere exceeds ``ratio``, with the partitions its preferred replica could
        lead now (none while any reassignment runs, when ``reassignments_block``)."""

    # --- States --------------------------------------------------------------------------------

    @abc.abstractmethod
    def partition_state(self, tp: TopicPartition) -> PartitionState:
        """The recorded state; NonExistentPartition when none is recorded."""

    @abc.abstractmethod
    def has_partition_state(self, tp: TopicPartition) -> bool:
        ...

    @abc.abstractmethod
    def put_partition_state(self, tp: TopicPartition, state: PartitionState) -> None:
        ...

    @abc.abstractmethod
    def partitions_in_states(self, states: Collection[PartitionState], topic: str | None = None) -> Sequence[TopicPartition]:
        ...

    @abc.abstractmethod
    def replica_state(self, replica: PartitionReplica) -> ReplicaState:
        """The recorded state; NonExistentReplica when none is recorded."""

    @abc.abstractmethod
    def has_replica_state(self, replica: PartitionReplica) -> bool:
        ...

    @abc.abstractmethod
    def put_replica_state(self, replica: PartitionReplica, state: ReplicaState) -> None:
        ...

    @abc.abstractmethod
    def remove_replica_state(self, replica: PartitionReplica) -> None:
        ...

    @abc.abstractmethod
    def replicas_in_state(self, topic: str, state: ReplicaState) -> Sequence[PartitionReplica]:
        ...

    @abc.abstractmethod
    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        ...

    @abc.abstractmethod
    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        ...

    # --- Topic deletion ------------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def topics_to_be_deleted(self) -> Set[str]:
        ...

    @property
    @abc.abstractmethod
    def topics_with_deletion_started(self) -> Set[str]:
        ...

    @property
    @abc.abstractmethod
    def topics_ineligible_for_deletion(self) -> Set[str]:
        ...

    @abc.abstractmethod
    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        """Queue topics for deletion (their partitions stop counting towards the imbalance metric)."""

    @abc.abstractmethod
    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        ...

    @abc.abstractmethod
    def mark_topics_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        ...

    @abc.abstractmethod
    def clear_topics_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        ...

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started

    def is_topic_ineligible_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_ineligible_for_deletion
