"""What every engine's partition and replica state machines are (reference §3 and §4).

The public constructors (``kctl.statemachine.PartitionStateMachine(controller_id, context, store,
batch, config)`` and ``ReplicaStateMachine(controller_id, context, store, batch)``) return the
implementation of the context's engine. Both work on batches: ``handle_state_changes(items,
target_state)`` validates each item against the target's valid previous states (invalid items are
logged to the state-change log and otherwise ignored: state unchanged, no write, no request, absent
from the result), applies the transition's actions (store writes, queued requests), and sends the
batch.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Union

from kctl.engine_api import engine_parts
from kctl.model import LeaderAndIsr, PartitionReplica, PartitionState, ReplicaState, TopicPartition

if TYPE_CHECKING:
    from kctl.config import ControllerConfig
    from kctl.engine_api.context import ControllerContext
    from kctl.engine_api.request_batch import ControllerBrokerRequestBatch
    from kctl.election import Election
    from kctl.plugins import PluginHost
    from kctl.statechange import StateChangeLogger
    from kctl.stores.base import StateStore

ElectionOutcome = Union[LeaderAndIsr, Exception]
"""A partition's election result: its new state, or why it failed (Kafka's Either)."""
ReplicaOutcome = Union[ReplicaState, Exception]


def _default_logger(controller_id: int, context: ControllerContext) -> StateChangeLogger:
    from kctl.statechange import StateChangeLogger

    return StateChangeLogger(controller_id, lambda: context.epoch)


class PartitionStateMachine(abc.ABC):
    """NonExistentPartition → NewPartition → OnlinePartition ⇄ OfflinePartition → NonExistentPartition."""

    def __new__(cls, controller_id: int, context: ControllerContext, *args: Any, **kwargs: Any) -> PartitionStateMachine:
        if cls is PartitionStateMachine:
            return super().__new__(engine_parts(context.engine).partition_state_machine)
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

    def shutdown(self) -> None:  # noqa: B027 (a no-op every engine shares, not an abstract method)
        """Nothing to release: the state lives in the context, which the controller resets."""

    @abc.abstractmethod
    def _initialize_partition_states(self) -> None:
        ...

    @abc.abstractmethod
    def handle_state_changes(
        self, partitions: Iterable[TopicPartition], target_state: PartitionState, election: Election | None = None
    ) -> Mapping[TopicPartition, ElectionOutcome]:
        """Move partitions to ``target_state``; the result holds every partition that went through a
        leader election (its new LeaderAndIsr or the exception that failed it)."""

    @abc.abstractmethod
    def trigger_online_partition_state_change(self, topic: str | None = None) -> Mapping[TopicPartition, ElectionOutcome]:
        """Elect leaders (offline strategy, unclean per topic config) for every New or Offline
        partition of topics not queued for deletion (of one topic, if given)."""


class ReplicaStateMachine(abc.ABC):
    """The seven replica states, from NewReplica to NonExistentReplica."""

    def __new__(cls, controller_id: int, context: ControllerContext, *args: Any, **kwargs: Any) -> ReplicaStateMachine:
        if cls is ReplicaStateMachine:
            return super().__new__(engine_parts(context.engine).replica_state_machine)
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

    def shutdown(self) -> None:  # noqa: B027 (a no-op every engine shares, not an abstract method)
        """Nothing to release: the state lives in the context, which the controller resets."""

    @abc.abstractmethod
    def _initialize_replica_states(self) -> None:
        ...

    @abc.abstractmethod
    def handle_state_changes(
        self, replicas: Iterable[PartitionReplica], target_state: ReplicaState, election: None = None
    ) -> Mapping[PartitionReplica, ReplicaOutcome]:
        """Move replicas to ``target_state``, broker by broker; the result holds every valid replica:
        its new state, or the exception that kept it in its old one."""
