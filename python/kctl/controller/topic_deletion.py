"""Topic deletion (Kafka's TopicDeletionManager, reference §6.11).

A topic is *queued* when its deletion is requested, *started* once its partitions went offline, and
*ineligible* while a replica is unreachable or a partition is being reassigned. Replica progress is
tracked with the ReplicaDeletion* states; the topic is removed once every replica reached
ReplicaDeletionSuccessful. Everything runs on the controller's event thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from kctl.engine_api.context import ControllerContext
from kctl.engine_api.statemachine import PartitionStateMachine, ReplicaStateMachine
from kctl.model import PartitionReplica, PartitionState, ReplicaState, TopicPartition

log = logging.getLogger(__name__)


class DeletionClient(Protocol):
    """The controller-side effects the manager needs (Kafka's ControllerDeletionClient)."""

    def delete_topic(self, topic: str) -> None: ...

    def delete_topic_deletions(self, topics: Iterable[str]) -> None: ...

    def mute_partition_modifications(self, topic: str) -> None: ...

    def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None: ...


class TopicDeletionManager:
    def __init__(
        self,
        delete_topic_enable: bool,
        context: ControllerContext,
        replica_state_machine: ReplicaStateMachine,
        partition_state_machine: PartitionStateMachine,
        client: DeletionClient,
    ) -> None:
        self.enabled = delete_topic_enable
        self.context = context
        self.replica_state_machine = replica_state_machine
        self.partition_state_machine = partition_state_machine
        self.client = client

    def init(self, queued: Iterable[str], ineligible: Iterable[str]) -> None:
        queued = list(queued)
        if self.enabled:
            self.context.queue_topic_deletion(queued)
            self.context.mark_topics_ineligible_for_deletion(
                t for t in ineligible if self.context.is_topic_queued_up_for_deletion(t)
            )
        elif queued:
            log.info("Removing %s from the deletion requests since topic deletion is disabled", queued)
            self.client.delete_topic_deletions(queued)

    def try_topic_deletion(self) -> None:
        if self.enabled:
            self._resume_deletions()

    def enqueue_topics_for_deletion(self, topics: Iterable[str]) -> None:
        if self.enabled:
            self.context.queue_topic_deletion(topics)
            self._resume_deletions()

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        if not self.enabled:
            return
        to_resume = [t for t in dict.fromkeys(topics) if self.context.is_topic_queued_up_for_deletion(t)]
        if to_resume:
            self.context.clear_topics_ineligible_for_deletion(to_resume)
            self._resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        if not self.enabled:
            return
        failed = [r for r in replicas if self.context.is_topic_queued_up_for_deletion(r.tp.topic)]
        if failed:
            topics = list(dict.fromkeys(r.tp.topic for r in failed))
            log.debug("Deletion failed for replicas %s; halting deletion of %s", failed, topics)
            self.replica_state_machine.handle_state_changes(failed, ReplicaState.DELETION_INELIGIBLE)
            self.mark_topic_ineligible_for_deletion(topics, "replica deletion failure")
            self._resume_deletions()

    def complete_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        deleted = [r for r in replicas if self.is_topic_queued_up_for_deletion(r.tp.topic)]
        log.debug("Deletion successfully completed for replicas %s", deleted)
        self.replica_state_machine.handle_state_changes(deleted, ReplicaState.DELETION_SUCCESSFUL)
        self._resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str], reason: str) -> None:
        if not self.enabled:
            return
        halted = [t for t in dict.fromkeys(topics) if self.context.is_topic_queued_up_for_deletion(t)]
        if halted:
            self.context.mark_topics_ineligible_for_deletion(halted)
            log.info("Halted deletion of topics %s due to %s", ", ".join(halted), reason)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return self.enabled and self.context.is_topic_queued_up_for_deletion(topic)

    # --- The deletion workflow -----------------------------------------------------------------

    def _is_ineligible(self, topic: str) -> bool:
        return not self.enabled or self.context.is_topic_ineligible_for_deletion(topic)

    def _is_in_progress(self, topic: str) -> bool:
        return not self.enabled or self.context.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED)

    def _is_eligible(self, topic: str) -> bool:
        return (
            self.context.is_topic_queued_up_for_deletion(topic)
            and not self._is_in_progress(topic)
            and not self._is_ineligible(topic)
        )

    def _resume_deletions(self) -> None:
        ctx = self.context
        queued = list(ctx.topics_to_be_deleted)
        retry: list[str] = []
        eligible: list[str] = []
        if queued:
            log.info("Handling deletion for topics %s", ", ".join(queued))
        for topic in queued:
            if ctx.are_all_replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL):
                self._complete_delete_topic(topic)
                log.info("Deletion of topic %s successfully completed", topic)
            elif not ctx.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED) and ctx.is_any_replica_in_state(
                topic, ReplicaState.DELETION_INELIGIBLE
            ):
                retry.append(topic)
            if self._is_eligible(topic):
                log.info("Deletion of topic %s (re)started", topic)
                eligible.append(topic)
        if retry:
            self._retry_deletion_for_ineligible_replicas(retry)
        if eligible:
            self._on_topic_deletion(eligible)

    def _retry_deletion_for_ineligible_replicas(self, topics: list[str]) -> None:
        failed = [r for t in topics for r in self.context.replicas_in_state(t, ReplicaState.DELETION_INELIGIBLE)]
        log.debug("Retrying deletion of replicas %s", failed)
        # The topic stays ineligible: only resume_deletion_for_topics clears that (reference §6.11).
        self.replica_state_machine.handle_state_changes(failed, ReplicaState.OFFLINE)

    def _complete_delete_topic(self, topic: str) -> None:
        # Stop watching the topic first, so that re-creating it is seen as a new topic.
        self.client.mute_partition_modifications(topic)
        successful = self.context.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL)
        self.replica_state_machine.handle_state_changes(successful, ReplicaState.NON_EXISTENT)
        self.client.delete_topic(topic)
        self.context.remove_topic(topic)

    def _on_topic_deletion(self, topics: list[str]) -> None:
        ctx = self.context
        unseen = [t for t in topics if not ctx.is_topic_deletion_in_progress(t)]
        if unseen:
            partitions = [tp for t in unseen for tp in ctx.partitions_for_topic(t)]
            self.partition_state_machine.handle_state_changes(partitions, PartitionState.OFFLINE)
            self.partition_state_machine.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            # Only now: the offline-partition metric must see these partitions leave OfflinePartition.
            ctx.begin_topic_deletion(unseen)
        self.client.send_metadata_update([tp for t in topics for tp in ctx.partitions_for_topic(t)])
        self._on_partition_deletion(topics)

    def _on_partition_deletion(self, topics: list[str]) -> None:
        ctx = self.context
        dead: list[PartitionReplica] = []
        to_delete: list[PartitionReplica] = []
        ineligible: list[str] = []
        for topic in topics:
            replicas = ctx.replicas_for_topic(topic)
            topic_dead = [r for r in replicas if not ctx.is_replica_online(r.broker, r.tp)]
            done = set(ctx.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL))
            to_delete += [r for r in replicas if r not in topic_dead and r not in done]
            dead += topic_dead
            if topic_dead:
                log.debug("Dead replicas %s of topic %s: deletion is halted", topic_dead, topic)
                ineligible.append(topic)
        self.replica_state_machine.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        # Stop the live replicas (they stop fetching), then ask them to delete their logs.
        self.replica_state_machine.handle_state_changes(to_delete, ReplicaState.OFFLINE)
        self.replica_state_machine.handle_state_changes(to_delete, ReplicaState.DELETION_STARTED)
        if ineligible:
            self.mark_topic_ineligible_for_deletion(ineligible, "offline replicas")
