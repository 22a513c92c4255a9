"""The partition and replica state machines on the native engine."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kctl.clusterview import TopicConfigSource
from kctl.election import Election, for_config
from kctl.errors import IllegalStateError
from kctl.model import PartitionReplica, PartitionState, ReplicaState, TopicPartition
from kctl.native.context import NativeContext, native_set
from kctl.native.request_batch import NativeRequestBatch, emit
from kctl.native.selection import NativeSelection
from kctl.native.sets import LazyOutcomes, PartitionList, ReplicaList
from kctl.selectors import ElectionKind, KafkaLeaderSelector
from kctl.statechange import TRACE
from kctl.engine_api.statemachine import ElectionOutcome, PartitionStateMachine, ReplicaOutcome, ReplicaStateMachine

partition_log = logging.getLogger(f"{__name__}.partition")
replica_log = logging.getLogger(f"{__name__}.replica")  # one logger per machine, as Kafka's


def _options(machine: Any, config: Any) -> dict[str, Any]:
    logger = machine.state_change_logger
    batch_logger = machine.batch.state_change_logger
    return {
        "controller_id": machine.controller_id,
        "stop_replica_version": config.stop_replica_version,
        "leader_recovery": config.uses_leader_recovery,
        "unclean_default": config.unclean_leader_election_enable,
        "trace": logger.enabled(TRACE),
        "info": logger.enabled(20),
        "batch_info": batch_logger.enabled(20),
    }


def _strategy(
    machine: NativePartitionStateMachine, election: Election | None
) -> tuple[tuple[str, bool] | None, NativeSelection | None]:
    """The engine's strategy spec, and what the engine calls when the election's selector is a
    plugin (Kafka's own run natively)."""
    if election is None:
        return None, None
    spec = (election.kind.value, bool(getattr(election, "allow_unclean", False)))
    if isinstance(election.selector, KafkaLeaderSelector):
        return spec, None
    configs = TopicConfigSource.of_store(machine.store, machine.config.unclean_leader_election_enable)
    return spec, NativeSelection(election, machine.context, configs)


class NativePartitionStateMachine(PartitionStateMachine):
    context: NativeContext
    batch: NativeRequestBatch

    def _initialize_partition_states(self) -> None:
        self.context.native.initialize_partition_states()

    def trigger_online_partition_state_change(self, topic: str | None = None) -> Mapping[TopicPartition, ElectionOutcome]:
        native = self.context.native
        partitions = PartitionList(native, native.partitions_to_trigger_online(topic))
        return self.handle_state_changes(partitions, PartitionState.ONLINE, for_config(ElectionKind.OFFLINE, self.config, self.plugins))

    def handle_state_changes(
        self, partitions: Iterable[TopicPartition], target_state: PartitionState, election: Election | None = None
    ) -> Mapping[TopicPartition, ElectionOutcome]:
        spec, plugin = _strategy(self, election)
        native = self.context.native
        parts = native_set(partitions)
        results, lines, raw = native.partition_state_changes(
            self.batch.slot, parts, target_state.state_id, spec, plugin, self.store, _options(self, self.config),
        )
        emit(self.state_change_logger, self.batch.state_change_logger, lines)
        try:
            self.batch.deliver_raw(self.context.epoch, raw, record=False)
        except IllegalStateError as e:  # as the reference: every partition reports the failed send
            partition_log.error("Error while moving some partitions to %s state", target_state, exc_info=True)
            return dict.fromkeys(partitions, e)
        return LazyOutcomes(native, results, replicas=False)


class NativeReplicaStateMachine(ReplicaStateMachine):
    context: NativeContext
    batch: NativeRequestBatch

    def startup(self) -> None:
        """Every engine's startup, its two bulk transitions keeping no result per replica: nothing
        reads them, and a failover at 1M partitions moves 3M replicas. The replicas come grouped
        by broker from the engine's index of each broker's partitions, which this makes: the
        first broker failure after a failover finds it made."""
        self._initialize_replica_states()
        native = self.context.native
        online, offline = native.online_and_offline_replicas_by_broker()
        self.handle_state_changes(ReplicaList(native, online), ReplicaState.ONLINE, results=False)
        self.handle_state_changes(ReplicaList(native, offline), ReplicaState.OFFLINE, results=False)

    def _initialize_replica_states(self) -> None:
        self.context.native.initialize_replica_states()

    def handle_state_changes(
        self, replicas: Iterable[PartitionReplica], target_state: ReplicaState, election: None = None,
        *, results: bool = True,
    ) -> Mapping[PartitionReplica, ReplicaOutcome]:
        """``results=False``: the caller reads no result, and the mapping returned is empty."""
        native = self.context.native
        outcomes, lines, raw = native.replica_state_changes(
            self.batch.slot, native_set(replicas), target_state.state_id, self.store, _options(self, self.batch.config),
            results,
        )
        emit(self.state_change_logger, self.batch.state_change_logger, lines)
        try:
            self.batch.deliver_raw(self.context.epoch, raw, record=False)
        except IllegalStateError:  # as the reference: logged, the transitions stand
            replica_log.error("Error while moving some replicas to %s state", target_state, exc_info=True)
        return LazyOutcomes(native, outcomes, replicas=True)

