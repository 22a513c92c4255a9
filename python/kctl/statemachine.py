"""The partition and replica state machines (reference §3 and §4).

``PartitionStateMachine(controller_id, context, store, batch, config)`` and
``ReplicaStateMachine(controller_id, context, store, batch)`` return the implementation of the
context's engine. Both work on batches: ``handle_state_changes(items, target_state)`` validates
each item against the target's valid previous states (invalid items are logged to the state-change
log and otherwise ignored: state unchanged, no write, no request, absent from the result), applies
the transition's actions (store writes, queued requests), and sends the batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Union, cast

from kctl.model import LeaderAndIsr, PartitionReplica, PartitionState, ReplicaState, TopicPartition

if TYPE_CHECKING:
    from kctl.config import ControllerConfig
    from kctl.context import ControllerContext
    from kctl.election import Election
    from kctl.plugins import PluginHost
    from kctl.requests import ControllerBrokerRequestBatch
    from kctl.statechange import StateChangeLogger
    from kctl.stores.base import StateStore

ElectionOutcome = Union[LeaderAndIsr, Exception]
"""A partition's election result: its new state, or why it failed (Kafka's Either)."""
ReplicaOutcome = Union[ReplicaState, Exception]


def _implementation(kind: str, engine: str) -> type[Any]:
    if engine == "reference":
        if kind == "partition":
            from kctl.reference.partition_state_machine import ReferencePartitionStateMachine

            return ReferencePartitionStateMachine
        from kctl.reference.replica_state_machine import ReferenceReplicaStateMachine

        return ReferenceReplicaStateMachine
    if engine == "rust":
        from kctl.native.statemachine import RustPartitionStateMachine, RustReplicaStateMachine

        return RustPartitionStateMachine if kind == "partition" else RustReplicaStateMachine
    raise ValueError(f"no {kind} state machine for engine {engine!r}")


def _default_logger(controller_id: int, context: ControllerContext) -> StateChangeLogger:
    from kctl.statechange import StateChangeLogger

    return StateChangeLogger(controller_id, lambda: context.epoch)


class PartitionStateMachine:
    """NonExistentPartition → NewPartition → OnlinePartition ⇄ OfflinePartition → NonExistentPartition."""

    def __new__(cls, controller_id: int, context: ControllerContext, *args: Any, **kwargs: Any) -> PartitionStateMachine:
        if cls is PartitionStateMachine:
            return cast(PartitionStateMachine, super().__new__(_implementation("partition", context.engine)))
        return super().__new__(cls)

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        store: StateStore,
        batch: ControllerBrokerRequestBatch,
        config: ControllerConfig,
        *,
        state_change_logger: StateChangeLogger | None = None,
        plugins: PluginHost | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self.store = store
        self.batch = batch
        self.config = config
        self.state_change_logger = state_change_logger or _default_logger(controller_id, context)
        self.plugins = plugins
        """Where configured plugin selectors are found (None: the process-wide plugin host)."""

    def startup(self) -> None:
        """Derive every partition's state from cached leadership, then elect leaders for the New and
        Offline ones (controller failover)."""
        self._initialize_partition_states()
        self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        """Nothing to release: the state lives in the context, which the controller resets."""

    def _initialize_partition_states(self) -> None:
        raise NotImplementedError

    def handle_state_changes(
        self, partitions: Iterable[TopicPartition], target_state: PartitionState, election: Election | None = None
    ) -> Mapping[TopicPartition, ElectionOutcome]:
        """Move partitions to ``target_state``; the result holds every partition that went through a
        leader election (its new LeaderAndIsr or the exception that failed it)."""
        raise NotImplementedError

    def trigger_online_partition_state_change(self, topic: str | None = None) -> Mapping[TopicPartition, ElectionOutcome]:
        """Elect leaders (offline strategy, unclean per topic config) for every New or Offline
        partition of topics not queued for deletion (of one topic, if given)."""
        raise NotImplementedError


class ReplicaStateMachine:
    """The seven replica states, from NewReplica to NonExistentReplica."""

    def __new__(cls, controller_id: int, context: ControllerContext, *args: Any, **kwargs: Any) -> ReplicaStateMachine:
        if cls is ReplicaStateMachine:
            return cast(ReplicaStateMachine, super().__new__(_implementation("replica", context.engine)))
        return super().__new__(cls)

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        store: StateStore,
        batch: ControllerBrokerRequestBatch,
        *,
        state_change_logger: StateChangeLogger | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.context = context
        self.store = store
        self.batch = batch
        self.state_change_logger = state_change_logger or _default_logger(controller_id, context)

    def startup(self) -> None:
        """Mark replicas Online or DeletionIneligible, then re-run the Online transition for the live
        ones (LeaderAndIsr to every replica) and the Offline one for the others (ISR shrink)."""
        self._initialize_replica_states()
        online, offline = self.context.online_and_offline_replicas()
        self.handle_state_changes(online, ReplicaState.ONLINE)
        self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def shutdown(self) -> None:
        """Nothing to release: the state lives in the context, which the controller resets."""

    def _initialize_replica_states(self) -> None:
        raise NotImplementedError

    def handle_state_changes(
        self, replicas: Iterable[PartitionReplica], target_state: ReplicaState, election: None = None
    ) -> Mapping[PartitionReplica, ReplicaOutcome]:
        """Move replicas to ``target_state``, broker by broker; the result holds every valid replica:
        its new state, or the exception that kept it in its old one."""
        raise NotImplementedError
