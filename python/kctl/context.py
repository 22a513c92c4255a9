"""The controller's in-memory view of the cluster (Kafka's ControllerContext, reference §1.4).

``ControllerContext(engine=...)`` returns the implementation of the named engine; every engine
implements this same API and must give identical results. ``"reference"`` is plain Python and is
the oracle the native engine is checked against.

Ordering: every collection the context derives (all partitions, partitions on a broker, replicas of
brokers, partitions in some states …) is in *context order*: topics in the order they were first
given an assignment, partitions of a topic likewise. Broker-keyed collections are in ascending
broker id. This is what makes state-change logs and request batches identical across engines.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any

from kctl.errors import KctlError

from kctl.model import (
    BrokerInfo,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)

if TYPE_CHECKING:
    from kctl.stores.base import StateStore

ENGINES = ("reference", "rust")
"""Engines this build provides; ``ControllerContext(engine=...)`` accepts these names."""
DEFAULT_ENGINE = os.environ.get("KCTL_ENGINE", "rust")
"""The native engine, unless ``KCTL_ENGINE`` names another (the test suite runs on each)."""
if DEFAULT_ENGINE not in ENGINES:
    raise ImportError(f"KCTL_ENGINE={DEFAULT_ENGINE!r} is not an engine; choose one of {', '.join(ENGINES)}")


def _engine_class(engine: str) -> type[ControllerContext]:
    if engine == "reference":
        from kctl.reference.context import ReferenceContext

        return ReferenceContext
    if engine == "rust":
        from kctl.native.context import RustContext

        return RustContext
    raise ValueError(f"unknown engine {engine!r}; available engines: {', '.join(ENGINES)}")


class ControllerContext:
    """The controller's cache of brokers, assignments, leadership and states."""

    engine: str

    def __new__(cls, *args: Any, **kwargs: Any) -> ControllerContext:
        if cls is ControllerContext:
            engine = kwargs.get("engine", args[0] if args else DEFAULT_ENGINE)
            return super().__new__(_engine_class(engine))
        return super().__new__(cls)

    # --- Controller epoch and metrics ----------------------------------------------------------

    epoch: int
    """The controller epoch of this controller (0 when not active)."""
    epoch_zk_version: int
    """The version of ``/controller_epoch``: the token that fences every controller write."""

    @property
    def offline_partition_count(self) -> int:
        """Partitions in OfflinePartition, ignoring topics whose deletion has started."""
        raise NotImplementedError

    @property
    def preferred_replica_imbalance_count(self) -> int:
        """Partitions whose cached leader is not their preferred replica (topics queued for deletion
        excluded; a reassigning partition whose preferred replica is being added counts only once that
        replica is in the ISR)."""
        raise NotImplementedError

    @property
    def unclean_leader_elections(self) -> int:
        """Unclean leader elections since this context was created."""
        raise NotImplementedError

    def record_unclean_leader_election(self) -> None:
        raise NotImplementedError

    def reset_context(self) -> None:
        """Forget everything (controller resignation); epoch and epoch version go back to 0."""
        raise NotImplementedError

    # --- Brokers -------------------------------------------------------------------------------

    def set_live_brokers(
        self, epochs: Mapping[int, int], infos: Mapping[int, BrokerInfo] | None = None
    ) -> None:
        """Replace the live brokers: broker id → broker epoch, with optional registration details."""
        raise NotImplementedError

    def add_live_brokers(self, epochs: Mapping[int, int], infos: Mapping[int, BrokerInfo] | None = None) -> None:
        raise NotImplementedError

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        raise NotImplementedError

    def update_broker_metadata(self, info: BrokerInfo) -> None:
        raise NotImplementedError

    @property
    def live_broker_ids(self) -> Set[int]:
        """Registered brokers that are not shutting down."""
        raise NotImplementedError

    @property
    def live_or_shutting_down_broker_ids(self) -> Set[int]:
        """All registered brokers."""
        raise NotImplementedError

    @property
    def shutting_down_broker_ids(self) -> Set[int]:
        raise NotImplementedError

    def add_shutting_down_broker(self, broker_id: int) -> None:
        raise NotImplementedError

    def remove_shutting_down_brokers(self, broker_ids: Iterable[int]) -> None:
        raise NotImplementedError

    def live_broker_epoch(self, broker_id: int) -> int | None:
        """The cached broker epoch of a registered broker, None when it is not registered."""
        raise NotImplementedError

    def live_broker_epochs(self) -> dict[int, int]:
        raise NotImplementedError

    def live_or_shutting_down_brokers(self) -> list[BrokerInfo]:
        """Registration details of every registered broker, by id."""
        raise NotImplementedError

    def is_replica_online(self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False) -> bool:
        """The broker is live (or shutting down, if asked) and the partition is not on one of its
        offline log directories."""
        raise NotImplementedError

    def add_replicas_on_offline_dirs(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        raise NotImplementedError

    def remove_replicas_on_offline_dirs(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        raise NotImplementedError

    def clear_replicas_on_offline_dirs(self, broker_ids: Iterable[int]) -> None:
        raise NotImplementedError

    def replicas_on_offline_dirs(self, broker_id: int) -> Set[TopicPartition]:
        raise NotImplementedError

    # --- Topics and assignments ----------------------------------------------------------------

    @property
    def all_topics(self) -> Set[str]:
        raise NotImplementedError

    def add_topic(self, topic: str, topic_id: str | None = None) -> None:
        raise NotImplementedError

    def remove_topic(self, topic: str) -> None:
        """Drop a topic with its assignments and cached leadership (after deletion)."""
        raise NotImplementedError

    @property
    def topic_ids(self) -> Mapping[str, str]:
        raise NotImplementedError

    def update_partition_full_replica_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        raise NotImplementedError

    def put_partition_assignments(self, assignments: Mapping[TopicPartition, ReplicaAssignment]) -> None:
        """Bulk form of :meth:`update_partition_full_replica_assignment` (failover, topic creation)."""
        raise NotImplementedError

    def put_topic_assignment(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> Sequence[TopicPartition]:
        """Load a topic's stored assignment in partition order, marking partitions with adding or
        removing replicas as being reassigned; returns the loaded partitions."""
        raise NotImplementedError

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """RS/AR/RR of a partition (empty when unknown)."""
        raise NotImplementedError

    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        raise NotImplementedError

    def partition_full_replica_assignment_for_topic(self, topic: str) -> dict[int, ReplicaAssignment]:
        raise NotImplementedError

    def partitions_for_topic(self, topic: str) -> Sequence[TopicPartition]:
        raise NotImplementedError

    def all_partitions(self) -> Sequence[TopicPartition]:
        raise NotImplementedError

    @property
    def partition_count(self) -> int:
        raise NotImplementedError

    def partitions_on_broker(self, broker_id: int) -> Sequence[TopicPartition]:
        raise NotImplementedError

    def replicas_on_brokers(self, broker_ids: Collection[int]) -> Sequence[PartitionReplica]:
        raise NotImplementedError

    def replicas_for_topic(self, topic: str) -> Sequence[PartitionReplica]:
        raise NotImplementedError

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> Sequence[PartitionReplica]:
        raise NotImplementedError

    def online_and_offline_replicas(self) -> tuple[Sequence[PartitionReplica], Sequence[PartitionReplica]]:
        raise NotImplementedError

    @property
    def partitions_being_reassigned(self) -> Set[TopicPartition]:
        raise NotImplementedError

    def add_partition_being_reassigned(self, tp: TopicPartition) -> None:
        raise NotImplementedError

    def remove_partition_being_reassigned(self, tp: TopicPartition) -> None:
        raise NotImplementedError

    # --- Leadership ----------------------------------------------------------------------------

    def put_partition_leadership(self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch) -> None:
        raise NotImplementedError

    def put_partition_leaderships(self, leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]) -> None:
        raise NotImplementedError

    def load_partition_leaderships(self, store: StateStore, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KctlError]:
        """Cache the stored states of ``partitions`` as they are (keeping the epoch of the controller
        that wrote them), in one bulk read; returns the errors of the states that could not be read
        (a missing state is not an error)."""
        raise NotImplementedError

    def partition_leadership(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        raise NotImplementedError

    def clear_partition_leadership(self) -> None:
        raise NotImplementedError

    def partitions_with_leaders(self) -> Sequence[TopicPartition]:
        """Partitions with cached leadership, excluding topics queued for deletion."""
        raise NotImplementedError

    def partitions_with_offline_leader(self) -> Sequence[TopicPartition]:
        """Cached leader not online, topic not queued for deletion."""
        raise NotImplementedError

    def partition_leaders_on_broker(self, broker_id: int) -> Sequence[TopicPartition]:
        """Partitions the broker leads with more than one replica, topic not queued for deletion."""
        raise NotImplementedError

    def leader_counts(self) -> dict[int, int]:
        """Partitions led by each broker (cached leadership), brokers leading none left out."""
        raise NotImplementedError

    def replica_counts(self) -> dict[int, int]:
        """Partitions each broker hosts a replica of (assignments, adding replicas included),
        brokers hosting none left out."""
        raise NotImplementedError

    # --- Bulk views for the controller's hot paths (no per-partition Python on the native engine) --

    def split_replicas_by_topic_deletion(
        self, replicas: Sequence[PartitionReplica]
    ) -> tuple[Sequence[PartitionReplica], Sequence[PartitionReplica]]:
        """Replicas of topics queued for deletion, and the others (reference §6.6 step 1)."""
        raise NotImplementedError

    def controlled_shutdown_partitions(self, broker_id: int) -> tuple[Sequence[TopicPartition], Sequence[TopicPartition]]:
        """Partitions a controlled shutdown acts on (RF > 1, cached leadership, topic not queued for
        deletion): those the broker leads, and those it follows (reference §6.12 steps 5–6)."""
        raise NotImplementedError

    def replicas_of(self, partitions: Sequence[TopicPartition], broker_id: int) -> Sequence[PartitionReplica]:
        """The replicas of ``partitions`` on one broker."""
        raise NotImplementedError

    def unconverged_partitions(self, limit: int | None = None) -> Sequence[TopicPartition]:
        """Partitions of topics not queued for deletion that have an online replica and yet no
        leader, a state other than Online, or an ISR without one of their online replicas (at most
        ``limit``): what a cluster still has to converge on before it is stable."""
        raise NotImplementedError

    def partitions_not_led_by_preferred(self, partitions: Sequence[TopicPartition]) -> Sequence[TopicPartition]:
        """Those of ``partitions`` whose cached leader is not the head of their assignment."""
        raise NotImplementedError

    def auto_rebalance_candidates(
        self, ratio: float, reassignments_block: bool
    ) -> list[tuple[int, Sequence[TopicPartition]]]:
        """The auto-rebalance check (reference §6.10): each preferred broker, ascending, whose share
        of partitions led elsewhere exceeds ``ratio``, with the partitions its preferred replica could
        lead now (none while any reassignment runs, when ``reassignments_block``)."""
        raise NotImplementedError

    # --- States --------------------------------------------------------------------------------

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        """The recorded state; NonExistentPartition when none is recorded."""
        raise NotImplementedError

    def has_partition_state(self, tp: TopicPartition) -> bool:
        raise NotImplementedError

    def put_partition_state(self, tp: TopicPartition, state: PartitionState) -> None:
        raise NotImplementedError

    def partitions_in_states(self, states: Collection[PartitionState], topic: str | None = None) -> Sequence[TopicPartition]:
        raise NotImplementedError

    def replica_state(self, replica: PartitionReplica) -> ReplicaState:
        """The recorded state; NonExistentReplica when none is recorded."""
        raise NotImplementedError

    def has_replica_state(self, replica: PartitionReplica) -> bool:
        raise NotImplementedError

    def put_replica_state(self, replica: PartitionReplica, state: ReplicaState) -> None:
        raise NotImplementedError

    def remove_replica_state(self, replica: PartitionReplica) -> None:
        raise NotImplementedError

    def replicas_in_state(self, topic: str, state: ReplicaState) -> Sequence[PartitionReplica]:
        raise NotImplementedError

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        raise NotImplementedError

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        raise NotImplementedError

    # --- Topic deletion ------------------------------------------------------------------------

    @property
    def topics_to_be_deleted(self) -> Set[str]:
        raise NotImplementedError

    @property
    def topics_with_deletion_started(self) -> Set[str]:
        raise NotImplementedError

    @property
    def topics_ineligible_for_deletion(self) -> Set[str]:
        raise NotImplementedError

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        """Queue topics for deletion (their partitions stop counting towards the imbalance metric)."""
        raise NotImplementedError

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        raise NotImplementedError

    def mark_topics_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        raise NotImplementedError

    def clear_topics_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        raise NotImplementedError

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started

    def is_topic_ineligible_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_ineligible_for_deletion
