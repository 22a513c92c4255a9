"""The reference request batch: per-broker dicts, flushed in Kafka's order (reference §5)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kctl.errors import IllegalStateError
from kctl.model import (
    EPOCH_DURING_DELETE,
    INITIAL_LEADER_EPOCH,
    INITIAL_PARTITION_EPOCH,
    LEADER_DURING_DELETE,
    NO_EPOCH,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.engine_api.request_batch import ControllerBrokerRequestBatch, PendingRequests
from kctl.messages import (
    LeaderAndIsrPartitionState,
    SentRequest,
    StopReplicaPartitionState,
    UpdateMetadataPartitionState,
)


class ReferenceRequestBatch(ControllerBrokerRequestBatch):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = {}
        self._update_metadata_brokers: dict[int, None] = {}
        self._update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState] = {}

    def new_batch(self) -> None:
        for name, pending in (
            ("LeaderAndIsr", self._leader_and_isr),
            ("StopReplica", self._stop_replica),
            ("UpdateMetadata", self._update_metadata_brokers),
        ):
            if pending:
                raise IllegalStateError(
                    "Controller to broker state change requests batch is not empty while creating a new one. "
                    f"Some {name} state changes to brokers {sorted(pending)} might be lost"
                )

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()

    # --- Accumulation --------------------------------------------------------------------------

    def add_leader_and_isr_request_for_brokers(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        leadership: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        leader_and_isr = leadership.leader_and_isr
        for broker in brokers:
            if broker < 0:
                continue
            per_broker = self._leader_and_isr.setdefault(broker, {})
            previous = per_broker.get(tp)
            per_broker[tp] = LeaderAndIsrPartitionState(
                tp.topic,
                tp.partition,
                leadership.controller_epoch,
                leader_and_isr.leader,
                leader_and_isr.leader_epoch,
                leader_and_isr.isr,
                leader_and_isr.partition_epoch,
                replica_assignment.replicas,
                replica_assignment.adding_replicas,
                replica_assignment.removing_replicas,
                is_new or (previous is not None and previous.is_new),
                leader_and_isr.leader_recovery_state,
            )
        self.add_update_metadata_request_for_brokers(sorted(self.context.live_or_shutting_down_broker_ids), (tp,))

    def add_update_metadata_request_for_brokers(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        self._update_metadata_brokers.update(dict.fromkeys(b for b in brokers if b >= 0))
        ctx = self.context
        for tp in partitions:
            leadership = ctx.partition_leadership(tp)
            if leadership is None:
                continue  # no leader yet: nothing to advertise
            leader_and_isr = leadership.leader_and_isr
            replicas = ctx.partition_replica_assignment(tp)
            offline = tuple(r for r in replicas if not ctx.is_replica_online(r, tp))
            if ctx.is_topic_queued_up_for_deletion(tp.topic):
                leader, leader_epoch, version = LEADER_DURING_DELETE, INITIAL_LEADER_EPOCH, INITIAL_PARTITION_EPOCH
            else:
                leader, leader_epoch = leader_and_isr.leader, leader_and_isr.leader_epoch
                version = leader_and_isr.partition_epoch
            self._update_metadata_partitions[tp] = UpdateMetadataPartitionState(
                tp.topic, tp.partition, leadership.controller_epoch, leader, leader_epoch, leader_and_isr.isr, version,
                replicas, offline,
            )

    def add_stop_replica_request_for_brokers(self, brokers: Iterable[int], tp: TopicPartition, delete_partition: bool) -> None:
        if self.context.is_topic_queued_up_for_deletion(tp.topic):
            leader_epoch = EPOCH_DURING_DELETE
        else:
            leadership = self.context.partition_leadership(tp)
            leader_epoch = NO_EPOCH if leadership is None else leadership.leader_and_isr.leader_epoch
        for broker in brokers:
            if broker < 0:
                continue
            per_broker = self._stop_replica.setdefault(broker, {})
            previous = per_broker.get(tp)
            delete = delete_partition or (previous is not None and previous.delete_partition)
            per_broker[tp] = StopReplicaPartitionState(tp.topic, tp.partition, leader_epoch, delete)

    def pending(self) -> PendingRequests:
        return PendingRequests(
            {b: dict(ps) for b, ps in sorted(self._leader_and_isr.items())},
            {b: dict(ps) for b, ps in sorted(self._stop_replica.items())},
            set(self._update_metadata_brokers),
            dict(self._update_metadata_partitions),
        )

    # --- Sending -------------------------------------------------------------------------------

    def send_requests_to_brokers(self, controller_epoch: int, *, record: bool = True) -> list[SentRequest]:
        sent: list[SentRequest] = []
        recorded = sent if record else None
        try:
            self._send_leader_and_isr(controller_epoch, recorded)
            self._send_update_metadata(controller_epoch, recorded)
            self._send_stop_replica(controller_epoch, recorded)
        except Exception as e:
            raise IllegalStateError(f"failed to send controller requests: {e}") from e
        return sent

    def _send_leader_and_isr(self, controller_epoch: int, sent: list[SentRequest] | None) -> None:
        registered = self.context.live_or_shutting_down_broker_ids
        brokers_by_id = self._registered_brokers()
        for broker, states in sorted(self._leader_and_isr.items()):
            if broker not in registered:
                continue
            become_leaders = sum(1 for s in states.values() if s.leader == broker)
            self.state_change_logger.info(
                f"Sending LeaderAndIsr request to broker {broker} with {become_leaders} become-leader "
                f"and {len(states) - become_leaders} become-follower partitions"
            )
            payload = tuple(states.values())
            self._deliver_leader_and_isr(sent, controller_epoch, broker, payload, sorted({s.leader for s in payload}),
                                         brokers_by_id)
        self._leader_and_isr.clear()

    def _send_update_metadata(self, controller_epoch: int, sent: list[SentRequest] | None) -> None:
        if not self._update_metadata_brokers:
            self._update_metadata_partitions.clear()
            return
        registered = self.context.live_or_shutting_down_broker_ids
        self.state_change_logger.info(
            f"Sending UpdateMetadata request to brokers {sorted(self._update_metadata_brokers)} "
            f"for {len(self._update_metadata_partitions)} partitions"
        )
        targets = sorted(b for b in self._update_metadata_brokers if b in registered)
        self._deliver_update_metadata(sent, controller_epoch, targets, tuple(self._update_metadata_partitions.values()))
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()

    def _send_stop_replica(self, controller_epoch: int, sent: list[SentRequest] | None) -> None:
        log = self.state_change_logger
        version = self.config.stop_replica_version
        for broker, states in sorted(self._stop_replica.items()):
            if broker not in self.context.live_or_shutting_down_broker_ids:
                continue
            if version >= 3:
                by_topic: dict[str, list[StopReplicaPartitionState]] = {}
                for s in states.values():
                    by_topic.setdefault(s.topic, []).append(s)
                grouped = tuple(s for group in by_topic.values() for s in group)
                log.info(f"Sending StopReplica request for {len(states)} replicas to broker {broker}")
                self._deliver_stop_replica(sent, controller_epoch, broker, False, grouped)
                continue
            # Before version 3: the partitions to delete first, in a request with its own callback.
            to_delete = tuple(s for s in states.values() if s.delete_partition)
            to_stop = tuple(s for s in states.values() if not s.delete_partition)
            if to_delete:
                log.info(f"Sending StopReplica request (delete = true) for {len(to_delete)} replicas to broker {broker}")
                self._deliver_stop_replica(sent, controller_epoch, broker, True, to_delete)
            if to_stop:
                log.info(f"Sending StopReplica request (delete = false) for {len(to_stop)} replicas to broker {broker}")
                self._deliver_stop_replica(sent, controller_epoch, broker, False, to_stop)
        self._stop_replica.clear()



