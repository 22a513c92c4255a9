"""The reference replica state machine: Kafka's ZkReplicaStateMachine (reference §4)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kctl.errors import ControllerMovedError, IllegalStateError, NoNodeError, StateChangeFailedError
from kctl.model import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from kctl.statechange import TRACE
from kctl.engine_api.statemachine import ReplicaOutcome, ReplicaStateMachine

log = logging.getLogger(__name__)

_R = ReplicaState
_INT_MASK = 0xFFFFFFFF


def kafka_broker_order(brokers: Iterable[int]) -> list[int]:
    """The order Kafka's replica state machine visits ``brokers`` in: it groups a transition's
    replicas by broker with Scala 2.13's ``groupBy``, an immutable HashMap (a CHAMP trie), and
    iterates that map. The order matters when one partition's replicas on several brokers go
    offline together (a topic deletion, brokers failing at once): each visit rewrites its ISR, and
    the last one leaves it. It is deterministic: at each level of the trie (five bits of the key's
    improved hash, lowest first) the keys alone in their slot come first, in slot order, then the
    slots holding several keys, each ordered the same way on the next five bits."""
    def improve(key: int) -> int:  # scala.collection.Hashing.improve of an Int's hash (the Int)
        h = key & _INT_MASK
        h = (h + (~(h << 9) & _INT_MASK)) & _INT_MASK
        h ^= h >> 14
        h = (h + (h << 4)) & _INT_MASK
        return h ^ (h >> 10)

    def visit(entries: list[tuple[int, int]], shift: int) -> list[int]:
        slots: dict[int, list[tuple[int, int]]] = {}
        for entry in entries:
            slots.setdefault((entry[0] >> shift) & 31, []).append(entry)
        ordered = sorted(slots.items())
        alone = [group[0][1] for _, group in ordered if len(group) == 1]
        return alone + [b for _, group in ordered if len(group) > 1 for b in visit(group, shift + 5)]

    return visit([(improve(b), b) for b in dict.fromkeys(brokers)], 0)


class ReferenceReplicaStateMachine(ReplicaStateMachine):
    def _initialize_replica_states(self) -> None:
        ctx = self.context
        for replica in ctx.replicas_for_partitions(ctx.all_partitions()):
            # Replicas on dead brokers are ineligible for deletion, so a topic being deleted does not
            # wait forever in ReplicaDeletionStarted after a failover.
            online = ctx.is_replica_online(replica.broker, replica.tp)
            ctx.put_replica_state(replica, _R.ONLINE if online else _R.DELETION_INELIGIBLE)

    def handle_state_changes(
        self, replicas: Iterable[PartitionReplica], target_state: ReplicaState, election: None = None
    ) -> dict[PartitionReplica, ReplicaOutcome]:
        replicas = list(dict.fromkeys(replicas))
        if not replicas:
            return {}
        results: dict[PartitionReplica, ReplicaOutcome] = {}
        try:
            self.batch.new_batch()
            by_broker: dict[int, list[PartitionReplica]] = {}
            for replica in replicas:
                by_broker.setdefault(replica.broker, []).append(replica)
            for broker in kafka_broker_order(by_broker):
                results.update(self._do_handle_state_changes(broker, by_broker[broker], target_state))
            self.batch.send_requests_to_brokers(self.context.epoch, record=False)
        except ControllerMovedError:
            log.error("Controller moved to another broker when moving some replicas to %s state", target_state)
            raise
        except Exception:
            log.error("Error while moving some replicas to %s state", target_state, exc_info=True)
        return results

    def _do_handle_state_changes(
        self, broker: int, replicas: list[PartitionReplica], target: ReplicaState
    ) -> dict[PartitionReplica, ReplicaOutcome]:
        ctx = self.context
        for replica in replicas:
            if not ctx.has_replica_state(replica):
                ctx.put_replica_state(replica, _R.NON_EXISTENT)
        valid = []
        for replica in replicas:
            if ctx.replica_state(replica) in target.valid_previous_states:
                valid.append(replica)
            else:
                self._log_invalid_transition(replica, target)
        if target is _R.NEW:
            return self._to_new(broker, valid)
        if target is _R.ONLINE:
            return self._to_online(broker, valid)
        if target is _R.OFFLINE:
            return self._to_offline(broker, valid)
        results: dict[PartitionReplica, ReplicaOutcome] = {}
        for replica in valid:
            self._transition(replica, target)
            if target is _R.DELETION_STARTED:
                self.batch.add_stop_replica_request_for_brokers((broker,), replica.tp, True)
            results[replica] = target
        return results

    def _transition(self, replica: PartitionReplica, target: ReplicaState) -> None:
        """Record a successful transition (NonExistentReplica also drops the replica from the assignment)."""
        ctx, scl = self.context, self.state_change_logger
        if scl.enabled(TRACE):
            scl.trace(
                f"Changed state of replica {replica.broker} for partition {replica.tp} from "
                f"{ctx.replica_state(replica)} to {target}"
            )
        if target is _R.NON_EXISTENT:
            assignment = ctx.partition_full_replica_assignment(replica.tp)
            ctx.update_partition_full_replica_assignment(replica.tp, assignment.remove_replica(replica.broker))
            ctx.remove_replica_state(replica)
        else:
            ctx.put_replica_state(replica, target)

    def _to_new(self, broker: int, replicas: list[PartitionReplica]) -> dict[PartitionReplica, ReplicaOutcome]:
        ctx = self.context
        results: dict[PartitionReplica, ReplicaOutcome] = {}
        for replica in replicas:
            leadership = ctx.partition_leadership(replica.tp)
            if leadership is not None:
                if leadership.leader_and_isr.leader == broker:
                    error = StateChangeFailedError(
                        f"Replica {broker} for partition {replica.tp} cannot be moved to NewReplica state as it is "
                        "being requested to become leader"
                    )
                    # Kafka names OfflineReplica as the target in this message; kept for parity.
                    self._log_failed_state_change(replica, ctx.replica_state(replica), _R.OFFLINE, error)
                    results[replica] = error
                    continue
                self.batch.add_leader_and_isr_request_for_brokers(
                    (broker,), replica.tp, leadership, ctx.partition_full_replica_assignment(replica.tp), True
                )
            self._transition(replica, _R.NEW)
            results[replica] = _R.NEW
        return results

    def _to_online(self, broker: int, replicas: list[PartitionReplica]) -> dict[PartitionReplica, ReplicaOutcome]:
        ctx = self.context
        for replica in replicas:
            assignment = ctx.partition_full_replica_assignment(replica.tp)
            if ctx.replica_state(replica) is _R.NEW:
                if broker not in assignment.replicas:
                    log.error("Adding replica (%s) that is not part of the assignment %s", broker, assignment)
                    ctx.update_partition_full_replica_assignment(
                        replica.tp,
                        ReplicaAssignment(
                            assignment.replicas + (broker,), assignment.adding_replicas, assignment.removing_replicas
                        ),
                    )
            else:
                leadership = ctx.partition_leadership(replica.tp)
                if leadership is not None:
                    self.batch.add_leader_and_isr_request_for_brokers((broker,), replica.tp, leadership, assignment, False)
            self._transition(replica, _R.ONLINE)
        return dict.fromkeys(replicas, _R.ONLINE)

    def _to_offline(self, broker: int, replicas: list[PartitionReplica]) -> dict[PartitionReplica, ReplicaOutcome]:
        ctx, scl = self.context, self.state_change_logger
        for replica in replicas:
            self.batch.add_stop_replica_request_for_brokers((broker,), replica.tp, False)
        with_leadership = [r for r in replicas if ctx.partition_leadership(r.tp) is not None]
        without_leadership = [r for r in replicas if ctx.partition_leadership(r.tp) is None]
        results: dict[PartitionReplica, ReplicaOutcome] = {}
        updated, failures = self._remove_replica_from_isr(broker, [r.tp for r in with_leadership])
        for tp, error in failures.items():
            replica = PartitionReplica(tp, broker)
            self._log_failed_state_change(replica, ctx.replica_state(replica), _R.OFFLINE, error)
            results[replica] = error
        for tp, leadership in updated.items():
            if scl.enabled(logging.INFO):
                scl.info(
                    f"Partition {tp} state changed to {leadership} after removing replica {broker} from the ISR "
                    "as part of transition to OfflineReplica"
                )
            if not ctx.is_topic_queued_up_for_deletion(tp.topic):
                recipients = [r for r in ctx.partition_replica_assignment(tp) if r != broker]
                self.batch.add_leader_and_isr_request_for_brokers(
                    recipients, tp, leadership, ctx.partition_full_replica_assignment(tp), False
                )
            replica = PartitionReplica(tp, broker)
            self._transition(replica, _R.OFFLINE)
            results[replica] = _R.OFFLINE
        for replica in without_leadership:
            self._transition(replica, _R.OFFLINE)
            self.batch.add_update_metadata_request_for_brokers(sorted(ctx.live_or_shutting_down_broker_ids), (replica.tp,))
            results[replica] = _R.OFFLINE
        return results

    def _remove_replica_from_isr(
        self, broker: int, partitions: list[TopicPartition]
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], dict[TopicPartition, Exception]]:
        """Take ``broker`` out of each partition's stored ISR (never emptying it), retrying partitions
        whose state changed under us; returns the states now cached and the partitions that failed."""
        updated: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        failures: dict[TopicPartition, Exception] = {}
        remaining = partitions
        while remaining:
            done, failed, remaining = self._do_remove_replica_from_isr(broker, remaining)
            updated.update(done)
            failures.update(failed)
        ordered = {tp: updated[tp] for tp in partitions if tp in updated}
        return ordered, failures

    def _do_remove_replica_from_isr(
        self, broker: int, partitions: list[TopicPartition]
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], dict[TopicPartition, Exception], list[TopicPartition]]:
        ctx = self.context
        failures: dict[TopicPartition, Exception] = {}
        try:
            read = self.store.get_partition_states(partitions)
        except Exception as e:
            return {}, dict.fromkeys(partitions, e), []
        unchanged: dict[TopicPartition, LeaderAndIsr] = {}
        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in partitions:
            leadership = read.values.get(tp)
            if leadership is None:
                error = read.errors.get(tp)
                if error is not None and not isinstance(error, NoNodeError):
                    failures[tp] = error
                elif not ctx.is_topic_queued_up_for_deletion(tp.topic):
                    failures[tp] = StateChangeFailedError(
                        f"Failed to change state of replica {broker} for partition {tp} since the leader and isr "
                        "path in zookeeper is empty"
                    )
                continue
            if leadership.controller_epoch > ctx.epoch:
                failures[tp] = StateChangeFailedError(
                    "Leader and isr path written by another controller. This probably means the current controller "
                    f"with epoch {ctx.epoch} went through a soft failure and another controller was elected with "
                    f"epoch {leadership.controller_epoch}. Aborting state change by this controller"
                )
                continue
            leader_and_isr = leadership.leader_and_isr
            if broker not in leader_and_isr.isr:
                unchanged[tp] = leader_and_isr
                continue
            leader = NO_LEADER if leader_and_isr.leader == broker else leader_and_isr.leader
            isr = leader_and_isr.isr
            isr = isr if len(isr) == 1 else tuple(r for r in isr if r != broker)
            adjusted[tp] = leader_and_isr.new_leader_and_isr(leader, isr)
        outcome = self.store.update_partition_states(adjusted, ctx.epoch, ctx.epoch_zk_version)
        failures.update(outcome.failed)
        cached: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp, leader_and_isr in (*unchanged.items(), *outcome.successful.items()):
            leadership = LeaderIsrAndControllerEpoch(leader_and_isr, ctx.epoch)
            ctx.put_partition_leadership(tp, leadership)
            cached[tp] = leadership
        return cached, failures, list(outcome.to_retry)

    # --- State-change log ----------------------------------------------------------------------

    def _log_invalid_transition(self, replica: PartitionReplica, target: ReplicaState) -> None:
        current = self.context.replica_state(replica)
        valid = ",".join(s.kafka_name for s in sorted(target.valid_previous_states, key=lambda s: s.state_id))
        self._log_failed_state_change(
            replica,
            current,
            target,
            IllegalStateError(
                f"Replica {replica} should be in the {valid} states before moving to {target} state. "
                f"Instead it is in {current} state"
            ),
        )

    def _log_failed_state_change(
        self, replica: PartitionReplica, current: ReplicaState, target: ReplicaState, error: Exception
    ) -> None:
        self.state_change_logger.error(
            f"Controller {self.controller_id} epoch {self.context.epoch} initiated state change of replica "
            f"{replica.broker} for partition {replica.tp} from {current} to {target} failed: "
            f"{type(error).__name__}: {error}"
        )
