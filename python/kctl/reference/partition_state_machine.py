"""The reference partition state machine: Kafka's ZkPartitionStateMachine (reference §3)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from kctl.clusterview import TopicConfigSource
from kctl.config import topic_unclean_leader_election_enable
from kctl.election import Election, ElectionInput, OfflineElection, for_config
from kctl.selectors import ElectionKind
from kctl.errors import (
    ControllerMovedError,
    IllegalArgumentError,
    IllegalStateError,
    NoNodeError,
    StateChangeFailedError,
    StoreError,
)
from kctl.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionState, TopicPartition
from kctl.statechange import TRACE
from kctl.engine_api.statemachine import ElectionOutcome, PartitionStateMachine

log = logging.getLogger(__name__)

_NEW, _ONLINE, _OFFLINE, _NON_EXISTENT = (
    PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE, PartitionState.NON_EXISTENT
)


class ReferencePartitionStateMachine(PartitionStateMachine):
    def _initialize_partition_states(self) -> None:
        ctx = self.context
        for tp in ctx.all_partitions():
            leadership = ctx.partition_leadership(tp)
            if leadership is None:
                ctx.put_partition_state(tp, _NEW)
            elif ctx.is_replica_online(leadership.leader_and_isr.leader, tp):
                ctx.put_partition_state(tp, _ONLINE)
            else:
                ctx.put_partition_state(tp, _OFFLINE)

    def trigger_online_partition_state_change(self, topic: str | None = None) -> dict[TopicPartition, ElectionOutcome]:
        ctx = self.context
        partitions = [
            tp for tp in ctx.partitions_in_states((_OFFLINE, _NEW), topic) if not ctx.is_topic_queued_up_for_deletion(tp.topic)
        ]
        return self.handle_state_changes(partitions, _ONLINE, for_config(ElectionKind.OFFLINE, self.config, self.plugins))

    def handle_state_changes(
        self, partitions: Iterable[TopicPartition], target_state: PartitionState, election: Election | None = None
    ) -> dict[TopicPartition, ElectionOutcome]:
        partitions = list(dict.fromkeys(partitions))
        if not partitions:
            return {}
        try:
            self.batch.new_batch()
            result = self._do_handle_state_changes(partitions, target_state, election)
            self.batch.send_requests_to_brokers(self.context.epoch, record=False)
            return result
        except ControllerMovedError:
            log.error("Controller moved to another broker when moving some partitions to %s state", target_state)
            raise
        except Exception as e:
            log.error("Error while moving some partitions to %s state", target_state, exc_info=True)
            return dict.fromkeys(partitions, e)

    def _do_handle_state_changes(
        self, partitions: list[TopicPartition], target: PartitionState, election: Election | None
    ) -> dict[TopicPartition, ElectionOutcome]:
        ctx, scl = self.context, self.state_change_logger
        for tp in partitions:
            if not ctx.has_partition_state(tp):
                ctx.put_partition_state(tp, _NON_EXISTENT)
        valid = []
        for tp in partitions:
            if ctx.partition_state(tp) in target.valid_previous_states:
                valid.append(tp)
            else:
                self._log_invalid_transition(tp, target)

        if target is _NEW:
            for tp in valid:
                if scl.enabled(logging.INFO):
                    replicas = ",".join(map(str, ctx.partition_replica_assignment(tp)))
                    scl.info(f"Changed partition {tp} state from {ctx.partition_state(tp)} to {target} with assigned replicas {replicas}")
                ctx.put_partition_state(tp, _NEW)
            return {}
        if target is _ONLINE:
            uninitialized = [tp for tp in valid if ctx.partition_state(tp) is _NEW]
            to_elect = [tp for tp in valid if ctx.partition_state(tp) in (_ONLINE, _OFFLINE)]
            for tp in self._initialize_leader_and_isr(uninitialized):
                if scl.enabled(logging.INFO):
                    leadership = ctx.partition_leadership(tp)
                    assert leadership is not None
                    scl.info(f"Changed partition {tp} from {ctx.partition_state(tp)} to {target} with state {leadership.leader_and_isr}")
                ctx.put_partition_state(tp, _ONLINE)
            if not to_elect:
                return {}
            if election is None:
                raise IllegalArgumentError("Election strategy is a required field when the target state is OnlinePartition")
            results = self._elect_leaders(to_elect, election)
            for tp, outcome in results.items():
                if isinstance(outcome, LeaderAndIsr):
                    if scl.enabled(logging.INFO):
                        scl.info(f"Changed partition {tp} from {ctx.partition_state(tp)} to {target} with state {outcome}")
                    ctx.put_partition_state(tp, _ONLINE)
            return results
        for tp in valid:  # OfflinePartition or NonExistentPartition: record the state only
            if scl.enabled(TRACE):
                scl.trace(f"Changed partition {tp} state from {ctx.partition_state(tp)} to {target}")
            ctx.put_partition_state(tp, target)
        return {}

    # --- NewPartition → OnlinePartition --------------------------------------------------------

    def _initialize_leader_and_isr(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        ctx = self.context
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            replicas = ctx.partition_replica_assignment(tp)
            live = [r for r in replicas if ctx.is_replica_online(r, tp)]
            if not live:
                message = (
                    f"Controller {self.controller_id} epoch {ctx.epoch} encountered error during state change of "
                    f"partition {tp} from New to Online, assigned replicas are [{','.join(map(str, replicas))}], "
                    f"live brokers are [{','.join(map(str, sorted(ctx.live_broker_ids)))}]. No assigned replica is alive."
                )
                self._log_failed_state_change(tp, _NEW, _ONLINE, StateChangeFailedError(message))
                continue
            states[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(live[0], tuple(live)), ctx.epoch)
        if not states:
            return []
        try:
            responses = self.store.create_partition_states(states, ctx.epoch_zk_version)
        except ControllerMovedError:
            log.error("Controller moved to another broker when trying to create the topic partition state znode")
            raise
        except Exception as e:
            for tp in states:
                self._log_failed_state_change(tp, ctx.partition_state(tp), _NEW, e)
            return []
        initialized = []
        for tp, leadership in states.items():
            error = responses.get(tp)
            if error is not None:
                self._log_failed_state_change(tp, _NEW, _ONLINE, error)
                continue
            ctx.put_partition_leadership(tp, leadership)
            self.batch.add_leader_and_isr_request_for_brokers(
                leadership.leader_and_isr.isr, tp, leadership, ctx.partition_full_replica_assignment(tp), True
            )
            initialized.append(tp)
        return initialized

    # --- Online/Offline → OnlinePartition ------------------------------------------------------

    def _elect_leaders(self, partitions: list[TopicPartition], election: Election) -> dict[TopicPartition, ElectionOutcome]:
        finished: dict[TopicPartition, ElectionOutcome] = {}
        remaining = partitions
        while remaining:
            done, remaining = self._do_elect_leaders(remaining, election)
            for tp, outcome in done.items():
                if isinstance(outcome, Exception):
                    self._log_failed_state_change(tp, self.context.partition_state(tp), _ONLINE, outcome)
            finished.update(done)
            if remaining:
                log.info("Retrying leader election with strategy %s for partitions %s", election, remaining)
        return finished

    def _do_elect_leaders(
        self, partitions: list[TopicPartition], election: Election
    ) -> tuple[dict[TopicPartition, ElectionOutcome], list[TopicPartition]]:
        ctx = self.context
        try:
            read = self.store.get_partition_states(partitions)
        except Exception as e:
            return dict.fromkeys(partitions, e), []
        failed: dict[TopicPartition, ElectionOutcome] = {}
        current: list[tuple[TopicPartition, LeaderAndIsr]] = []
        for tp in partitions:
            leadership = read.values.get(tp)
            if leadership is None:
                error = read.errors.get(tp)
                if error is None or isinstance(error, NoNodeError):
                    failed[tp] = StateChangeFailedError(
                        f"LeaderAndIsr information doesn't exist for partition {tp} in {ctx.partition_state(tp)} state"
                    )
                else:
                    failed[tp] = error
            elif leadership.controller_epoch > ctx.epoch:
                failed[tp] = StateChangeFailedError(
                    f"Aborted leader election for partition {tp} since the LeaderAndIsr path was already written by "
                    f"another controller. This probably means that the current controller {self.controller_id} went "
                    f"through a soft failure and another controller was elected with epoch {leadership.controller_epoch}."
                )
            else:
                current.append((tp, leadership.leader_and_isr))
        if not current:
            return failed, []

        configs = TopicConfigSource.of_store(self.store, self.config.unclean_leader_election_enable)
        inputs = self._election_inputs(current, election)
        results = election.elect(ctx, inputs, leader_recovery=self.config.uses_leader_recovery, configs=configs)
        recipients: dict[TopicPartition, tuple[int, ...]] = {}
        updates: dict[TopicPartition, LeaderAndIsr] = {}
        for result in results:
            if result.leader_and_isr is None:
                failed[result.partition] = result.error or StateChangeFailedError(
                    f"Failed to elect leader for partition {result.partition} under strategy {election}"
                )
            else:
                updates[result.partition] = result.leader_and_isr
                recipients[result.partition] = result.recipients
        outcome = self.store.update_partition_states(updates, ctx.epoch, ctx.epoch_zk_version)
        finished: dict[TopicPartition, ElectionOutcome] = {}
        for tp, state in outcome.successful.items():
            leadership = LeaderIsrAndControllerEpoch(state, ctx.epoch)
            ctx.put_partition_leadership(tp, leadership)
            self.batch.add_leader_and_isr_request_for_brokers(
                recipients[tp], tp, leadership, ctx.partition_full_replica_assignment(tp), False
            )
            finished[tp] = state
        finished.update(outcome.failed)
        finished.update(failed)
        return finished, list(outcome.to_retry)

    def _election_inputs(self, current: list[tuple[TopicPartition, LeaderAndIsr]], election: Election) -> list[ElectionInput]:
        """Decide per partition whether an offline election may be unclean (reference §2.3).

        Partitions without a live ISR member come first, as in Kafka; unless the strategy allows
        unclean elections outright, their topics' ``unclean.leader.election.enable`` decides.
        """
        if not isinstance(election, OfflineElection):
            return [ElectionInput(tp, leader_and_isr) for tp, leader_and_isr in current]
        ctx = self.context
        without_live_isr = [(tp, leader_and_isr) for tp, leader_and_isr in current
                            if not any(ctx.is_replica_online(r, tp) for r in leader_and_isr.isr)]
        with_live_isr = [(tp, leader_and_isr) for tp, leader_and_isr in current
                         if any(ctx.is_replica_online(r, tp) for r in leader_and_isr.isr)]
        if election.allow_unclean:
            unclean = [ElectionInput(tp, leader_and_isr, True) for tp, leader_and_isr in without_live_isr]
        else:
            enabled = self._unclean_election_enabled(dict.fromkeys(tp.topic for tp, _ in without_live_isr))
            unclean = []
            for tp, leader_and_isr in without_live_isr:
                flag = enabled[tp.topic]
                if isinstance(flag, Exception):
                    self._log_failed_state_change(tp, ctx.partition_state(tp), _ONLINE, flag)
                    unclean.append(ElectionInput(tp, leader_and_isr, None))
                else:
                    unclean.append(ElectionInput(tp, leader_and_isr, flag))
        return unclean + [ElectionInput(tp, leader_and_isr, False) for tp, leader_and_isr in with_live_isr]

    def _unclean_election_enabled(self, topics: Iterable[str]) -> dict[str, bool | Exception]:
        """Each topic's ``unclean.leader.election.enable``, its override over the broker default."""
        topics = list(topics)
        default = self.config.unclean_leader_election_enable
        try:
            read = self.store.get_topic_configs(topics)
        except StoreError as e:
            return dict.fromkeys(topics, e)
        enabled: dict[str, bool | Exception] = {}
        for topic in topics:
            if topic in read.errors:
                enabled[topic] = read.errors[topic]
                continue
            try:
                enabled[topic] = topic_unclean_leader_election_enable(topic, read.values.get(topic, {}), default)
            except StateChangeFailedError as e:
                enabled[topic] = e
        return enabled

    # --- State-change log ----------------------------------------------------------------------

    def _log_invalid_transition(self, tp: TopicPartition, target: PartitionState) -> None:
        current = self.context.partition_state(tp)
        valid = ",".join(s.kafka_name for s in _ordered(target.valid_previous_states))
        self._log_failed_state_change(
            tp,
            current,
            target,
            IllegalStateError(
                f"Partition {tp} should be in one of {valid} states before moving to "
                f"{target} state. Instead it is in {current} state"
            ),
        )

    def _log_failed_state_change(
        self, tp: TopicPartition, current: PartitionState, target: PartitionState, error: Exception
    ) -> None:
        self.state_change_logger.error(
            f"Controller {self.controller_id} epoch {self.context.epoch} failed to change state for partition {tp} "
            f"from {current} to {target}: {type(error).__name__}: {error}"
        )


def _ordered(states: Iterable[PartitionState]) -> Sequence[PartitionState]:
    return sorted(states, key=lambda s: s.state_id)

