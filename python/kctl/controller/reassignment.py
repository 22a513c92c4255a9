"""Partition reassignment (the reassignment part of Kafka's KafkaController, reference §6.8).

A reassignment moves a partition from its origin replicas to target replicas in two phases: while
the targets are not all in the ISR (phase A) the partition runs on origin plus adding replicas;
once they are (phase B) the assignment becomes the targets, the leader moves if it must and the
removed replicas are deleted. Requests come from the AlterPartitionReassignments API or the
deprecated ``/admin/reassign_partitions`` znode; progress is noticed through ISR changes. Everything
runs on the controller's event thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from kctl.engine_api.context import ControllerContext
from kctl.controller.topic_deletion import TopicDeletionManager
from kctl.election import Election
from kctl.errors import (
    ControllerMovedError,
    IllegalStateError,
    InvalidReplicaAssignmentError,
    KctlError,
    NoNodeError,
    NoReassignmentInProgressError,
    StateChangeFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kctl.model import (
    NO_LEADER,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
    int_problem,
)
from kctl.engine_api.request_batch import ControllerBrokerRequestBatch
from kctl.statechange import StateChangeLogger
from kctl.engine_api.statemachine import PartitionStateMachine, ReplicaStateMachine
from kctl.stores.base import StateStore, TopicAssignment

log = logging.getLogger(__name__)

ReassignmentResults = dict[TopicPartition, "KctlError | None"]


class ReassignmentClient(Protocol):
    """The controller-side effects the manager needs."""

    def watch_isr_changes(self, tp: TopicPartition) -> None:
        """Watch the partition's state for ISR changes (unless brokers report them by AlterPartition)."""

    def unwatch_isr_changes(self, tp: TopicPartition) -> None: ...

    def reassignment_election(self) -> Election:
        """The election that moves a leader out of the removed replicas (the configured selector)."""

    def send_requests(self, add: Callable[[ControllerBrokerRequestBatch], None]) -> None:
        """Send a new batch filled by ``add``."""

    def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None: ...

    def rearm_zk_reassignment(self) -> None:
        """Look at ``/admin/reassign_partitions`` again (its watch fires on creation only)."""


class ReassignmentManager:
    def __init__(
        self,
        context: ControllerContext,
        store: StateStore,
        replica_state_machine: ReplicaStateMachine,
        partition_state_machine: PartitionStateMachine,
        deletion_manager: TopicDeletionManager,
        state_change_logger: StateChangeLogger,
        client: ReassignmentClient,
    ) -> None:
        self.context = context
        self.store = store
        self.replica_state_machine = replica_state_machine
        self.partition_state_machine = partition_state_machine
        self.deletion_manager = deletion_manager
        self.state_change_logger = state_change_logger
        self.client = client

    # --- What the controller calls -------------------------------------------------------------

    def on_api_reassignment(self, targets: Mapping[TopicPartition, tuple[int, ...] | None]) -> ReassignmentResults:
        """AlterPartitionReassignments: start (target replicas) or cancel (None) each partition's reassignment."""
        results, to_reassign = self._plan(targets, self._validate_replicas)
        # The latest request wins: drop these partitions from the admin-path reassignment.
        self._maybe_remove_from_zk_reassignment(lambda tp, _: tp in to_reassign)
        results.update(self._maybe_trigger_partition_reassignment(to_reassign))
        return results

    def on_zk_reassignment(self) -> set[TopicPartition]:
        """Start the reassignments of ``/admin/reassign_partitions``; returns those started."""
        try:
            requested = self.store.get_partition_reassignments()
        except KctlError as e:
            log.error("Ignoring the reassignment request: %s", e)
            self.store.delete_partition_reassignments(self.context.epoch_zk_version)
            self.client.rearm_zk_reassignment()
            return set()
        if requested is None:
            return set()
        # No liveness check here (only the API has one): a target broker that is down gets its
        # replica when it starts (reference §6.8, §6.5 step 6).
        results, to_reassign = self._plan(requested, lambda _, target: _validate_replica_list(target))
        results.update(self._maybe_trigger_partition_reassignment(to_reassign))
        failed = {tp for tp, error in results.items() if error is not None}
        if failed:
            log.warning("Failed reassignment through zk: %s", {str(tp): results[tp] for tp in failed})
            self._maybe_remove_from_zk_reassignment(lambda tp, _: tp in failed)
        return {tp for tp, error in results.items() if error is None}

    def initialize(self) -> None:
        """On failover: the admin path's requests, then the reassignments already in the assignments."""
        resumed = self.on_zk_reassignment()
        self.maybe_resume_reassignments(lambda tp, _: tp not in resumed)

    def maybe_resume_reassignments(self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        for tp in list(self.context.partitions_being_reassigned):
            assignment = self.context.partition_full_replica_assignment(tp)
            if should_resume(tp, assignment):
                self._on_partition_reassignment(tp, assignment)

    def on_isr_change(self, partitions: Iterable[TopicPartition]) -> None:
        """Complete the reassignments of these partitions whose targets all joined the ISR."""
        reassigning = self.context.partitions_being_reassigned  # a live view on both engines
        if not reassigning:  # an AlterPartition's thousands of partitions are not looked up one by one
            return
        for tp in dict.fromkeys(partitions):
            if tp in reassigning:
                self._maybe_complete_reassignment(tp)

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        """The reassignments in progress among ``partitions`` (None: all of them)."""
        ctx = self.context
        results = {}
        for tp in sorted(ctx.partitions_being_reassigned if partitions is None else partitions):
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment.is_being_reassigned:
                results[tp] = assignment
        return results

    def reassigning_topics(self) -> set[str]:
        return {tp.topic for tp in self.context.partitions_being_reassigned}

    # --- Starting a reassignment ---------------------------------------------------------------

    def _plan(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        validate: Callable[[TopicPartition, Sequence[int]], KctlError | None],
    ) -> tuple[ReassignmentResults, dict[TopicPartition, ReplicaAssignment]]:
        """Each partition's error, or the assignment its target (None: cancel) leads to."""
        results: ReassignmentResults = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in targets.items():
            error = None if target is None else validate(tp, target)
            if error is not None:
                results[tp] = error
                continue
            assignment = self._maybe_build_reassignment(tp, target)
            if assignment is None:
                results[tp] = NoReassignmentInProgressError(f"No reassignment in progress for partition {tp}")
            else:
                to_reassign[tp] = assignment
        return results, to_reassign

    def _validate_replicas(self, tp: TopicPartition, replicas: Sequence[int]) -> KctlError | None:
        """The API's validation of a target: a well-formed list whose adding replicas are live."""
        error = _validate_replica_list(replicas)
        if error is not None:
            return error
        new = self.context.partition_full_replica_assignment(tp).reassign_to(tuple(replicas))
        live = self.context.live_broker_ids
        if not set(new.adding_replicas) <= live:
            return InvalidReplicaAssignmentError(
                f"Replica assignment has brokers that are not alive. Replica list: {list(new.adding_replicas)}, "
                f"live broker list: {sorted(live)}"
            )
        return None

    def _maybe_build_reassignment(self, tp: TopicPartition, target: Sequence[int] | None) -> ReplicaAssignment | None:
        current = self.context.partition_full_replica_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin_replicas if target is None else tuple(target))
        return None if target is None else current.reassign_to(tuple(target))

    def _maybe_trigger_partition_reassignment(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> ReassignmentResults:
        results: ReassignmentResults = {}
        for tp, assignment in reassignments.items():
            if self.deletion_manager.is_topic_queued_up_for_deletion(tp.topic):
                log.info("Skipping reassignment of %s since the topic is currently being deleted", tp)
                results[tp] = UnknownTopicOrPartitionError("The partition does not exist.")
            elif not self.context.partition_replica_assignment(tp):
                results[tp] = UnknownTopicOrPartitionError("The partition does not exist.")
            else:
                try:
                    self._on_partition_reassignment(tp, assignment)
                    results[tp] = None
                except ControllerMovedError:
                    log.info("Failed completing reassignment of partition %s because controller has moved", tp)
                    raise
                except Exception as e:
                    log.error("Error completing reassignment of partition %s", tp, exc_info=True)
                    results[tp] = UnknownServerError(str(e))
        return results

    # --- The two phases ------------------------------------------------------------------------

    def _on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """Reference §6.8: phase A while the target replicas are not all in the ISR, phase B after."""
        ctx = self.context
        self.deletion_manager.mark_topic_ineligible_for_deletion([tp.topic], "topic reassignment in progress")
        self._update_current_reassignment(tp, reassignment)
        adding, removing = reassignment.adding_replicas, reassignment.removing_replicas
        if not self._is_reassignment_complete(tp, reassignment):
            self._update_leader_epoch_and_send_request(tp, reassignment)  # A1
            for broker in adding:  # A2
                self.replica_state_machine.handle_state_changes([PartitionReplica(tp, broker)], ReplicaState.NEW)
            return
        self.replica_state_machine.handle_state_changes([PartitionReplica(tp, b) for b in adding], ReplicaState.ONLINE)  # B1
        completed = ReplicaAssignment(reassignment.target_replicas)
        ctx.update_partition_full_replica_assignment(tp, completed)  # B2
        self._move_reassigned_partition_leader_if_required(tp, completed)  # B3
        self._stop_removed_replicas_of_reassigned_partition(tp, removing)  # B4, B5
        self._update_replica_assignment_for_partition(tp, completed)  # B6
        self._remove_partition_from_reassigning_partitions(tp, completed)  # B7
        self.client.send_metadata_update([tp])  # B8
        self.deletion_manager.resume_deletion_for_topics([tp.topic])

    def _update_current_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        ctx = self.context
        current = ctx.partition_full_replica_assignment(tp)
        if current != reassignment:
            self._update_replica_assignment_for_partition(tp, reassignment)  # U1
            ctx.update_partition_full_replica_assignment(tp, reassignment)  # U2
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:  # U3: adding replicas of a superseded reassignment
                self._stop_removed_replicas_of_reassigned_partition(tp, unneeded)
        self.client.watch_isr_changes(tp)
        ctx.add_partition_being_reassigned(tp)

    def _update_replica_assignment_for_partition(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.context
        partitions = ctx.topic_assignment_with(tp, assignment)
        try:
            self.store.set_topic_assignment(tp.topic, TopicAssignment(partitions, ctx.topic_ids.get(tp.topic)), ctx.epoch_zk_version)
        except NoNodeError as e:
            raise IllegalStateError(f"Failed to update assignment for {tp} since the topic has no current assignment") from e
        log.info("Successfully updated assignment of partition %s to %s", tp, assignment)

    def _is_reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        stored = self.store.get_partition_states([tp]).values.get(tp)
        return stored is not None and set(assignment.target_replicas) <= set(stored.leader_and_isr.isr)

    def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        assignment = self.context.partition_full_replica_assignment(tp)
        if self._is_reassignment_complete(tp, assignment):
            log.info("Target replicas %s have all caught up with the leader for reassigning partition %s",
                     assignment.target_replicas, tp)
            self._on_partition_reassignment(tp, assignment)

    def _update_leader_epoch(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        """Bump the stored leader epoch (same leader and ISR) so brokers act on a changed replica set."""
        ctx = self.context
        while True:
            stored = self.store.get_partition_states([tp]).values.get(tp)
            if stored is None:
                raise IllegalStateError(
                    f"Cannot update leader epoch for partition {tp} as leaderAndIsr path is empty. This could mean we "
                    "somehow tried to reassign a partition that doesn't exist"
                )
            if stored.controller_epoch > ctx.epoch:
                raise StateChangeFailedError(
                    "Leader and isr path written by another controller. This probably means the current controller "
                    f"with epoch {ctx.epoch} went through a soft failure and another controller was elected with "
                    f"epoch {stored.controller_epoch}. Aborting state change by this controller"
                )
            outcome = self.store.update_partition_states({tp: stored.leader_and_isr.new_epoch()}, ctx.epoch, ctx.epoch_zk_version)
            if tp in outcome.failed:
                raise outcome.failed[tp]
            if tp in outcome.successful:
                leadership = LeaderIsrAndControllerEpoch(outcome.successful[tp], ctx.epoch)
                ctx.put_partition_leadership(tp, leadership)
                return leadership

    def _update_leader_epoch_and_send_request(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        leadership = self._update_leader_epoch(tp)
        if leadership is None:
            self.state_change_logger.error(
                f"Failed to send LeaderAndIsr request with new replica assignment {assignment} to leader for "
                f"partition being reassigned {tp}"
            )
            return

        def add(batch: ControllerBrokerRequestBatch) -> None:
            batch.add_leader_and_isr_request_for_brokers(assignment.origin_replicas, tp, leadership, assignment, False)
            batch.add_leader_and_isr_request_for_brokers(assignment.adding_replicas, tp, leadership, assignment, True)

        self.client.send_requests(add)
        self.state_change_logger.info(
            f"Sent LeaderAndIsr request {leadership} with new replica assignment {assignment} to leader "
            f"{leadership.leader_and_isr.leader} for partition being reassigned {tp}"
        )

    def _move_reassigned_partition_leader_if_required(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        leadership = self.context.partition_leadership(tp)
        leader = NO_LEADER if leadership is None else leadership.leader_and_isr.leader
        if leader not in assignment.replicas or not self.context.is_replica_online(leader, tp):
            log.info("Leader %s for partition %s being reassigned is not in the new list of replicas %s or is offline. "
                     "Re-electing leader", leader, tp, assignment.replicas)
            self.partition_state_machine.handle_state_changes([tp], PartitionState.ONLINE, self.client.reassignment_election())
        else:
            log.info("Leader %s for partition %s being reassigned is already in the new list of replicas %s and is "
                     "alive", leader, tp, assignment.replicas)
            self._update_leader_epoch_and_send_request(tp, assignment)

    def _stop_removed_replicas_of_reassigned_partition(self, tp: TopicPartition, removed: Sequence[int]) -> None:
        replicas = [PartitionReplica(tp, b) for b in removed]
        for state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL,
                      ReplicaState.NON_EXISTENT):
            self.replica_state_machine.handle_state_changes(replicas, state)

    def _remove_partition_from_reassigning_partitions(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.context
        if tp not in ctx.partitions_being_reassigned:
            raise IllegalStateError("Cannot remove a reassigning partition because it is not present in memory")
        self.client.unwatch_isr_changes(tp)
        self._maybe_remove_from_zk_reassignment(lambda p, replicas: p == tp and tuple(replicas) == assignment.replicas)
        ctx.remove_partition_being_reassigned(tp)

    def _maybe_remove_from_zk_reassignment(self, should_remove: Callable[[TopicPartition, Sequence[int]], bool]) -> None:
        try:
            requested = self.store.get_partition_reassignments()
        except KctlError as e:
            log.error("Cannot read the admin reassignment path: %s", e)
            return
        if requested is None:
            return
        remaining = {tp: r for tp, r in requested.items() if not should_remove(tp, r)}
        if len(remaining) == len(requested):
            return
        if not remaining:
            log.info("No more partitions need to be reassigned. Deleting the admin reassignment path")
            self.store.delete_partition_reassignments(self.context.epoch_zk_version)
            self.client.rearm_zk_reassignment()
        else:
            self.store.set_partition_reassignments(remaining, self.context.epoch_zk_version)


def _validate_replica_list(replicas: Sequence[int]) -> KctlError | None:
    if not replicas:
        return InvalidReplicaAssignmentError("Empty replica list specified in partition reassignment.")
    if len(set(replicas)) != len(replicas):
        return InvalidReplicaAssignmentError(f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}")
    problem = next((p for p in (int_problem(r, 0) for r in replicas) if p is not None), None)
    if problem is not None:
        return InvalidReplicaAssignmentError(f"Invalid broker id in replica list: {list(replicas)}: a broker id {problem}")
    return None
