"""``ControllerBrokerRequestBatch`` on the native engine: the engine accumulates and flushes; this
class turns what it sent into request objects and delivers them through the channel."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from kctl.errors import IllegalStateError
from kctl.model import BrokerInfo, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.native.context import NativeContext, assignment_tuple, leadership_tuple, native_set
from kctl.engine_api.request_batch import ControllerBrokerRequestBatch, PendingRequests
from kctl.messages import LeaderAndIsrPartitionState, SentRequest, StopReplicaPartitionState
from kctl.statechange import StateChangeLogger

if TYPE_CHECKING:
    from kctl._engine import StateChangeLines, _RawRequest


_LEVEL_AND_LINE = itemgetter(0, 2)


def emit(machine: StateChangeLogger, batch: StateChangeLogger, lines: StateChangeLines) -> None:
    """Log the engine's lines in order, the request batch's through the batch's own logger; when
    both are one logger, whose lines are held, the engine makes their text, and they are made
    into lines, only when written; when it takes none of them, its sink keeps them as they are."""
    if machine is batch and machine.log_later(lambda: map(_LEVEL_AND_LINE, lines.made()), len(lines)):
        return
    made = lines.made()
    if machine is batch and machine.keep_unlogged(made):
        return
    for from_batch, run in groupby(made, key=itemgetter(1)):
        (batch if from_batch else machine).log_all(map(_LEVEL_AND_LINE, run))


class NativeRequestBatch(ControllerBrokerRequestBatch):
    context: NativeContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slot: int = self.context.native.new_batch_slot()

    def new_batch(self) -> None:
        error = self.context.native.batch_check_empty(self.slot)
        if error is not None:
            raise IllegalStateError(error)

    def clear(self) -> None:
        self.context.native.batch_clear(self.slot)

    def add_leader_and_isr_request_for_brokers(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        leadership: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        self.context.native.batch_add_leader_and_isr(
            self.slot, list(brokers), tp.topic, tp.partition, leadership_tuple(leadership),
            assignment_tuple(replica_assignment), is_new,
        )

    def add_update_metadata_request_for_brokers(self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()) -> None:
        self.context.native.batch_add_update_metadata(self.slot, list(brokers), native_set(partitions))

    def add_stop_replica_request_for_brokers(self, brokers: Iterable[int], tp: TopicPartition, delete_partition: bool) -> None:
        self.context.native.batch_add_stop_replicas(self.slot, list(brokers), [tp], delete_partition)

    def add_stop_replica_requests_for_brokers(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition], delete_partition: bool
    ) -> None:
        self.context.native.batch_add_stop_replicas(self.slot, list(brokers), native_set(partitions), delete_partition)

    def pending(self) -> PendingRequests:
        per_broker, um_brokers, um = self.context.native.batch_pending(self.slot)
        leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = {}
        for kind, broker, _, states, _, _ in per_broker:
            if kind == "LeaderAndIsr":
                leader_and_isr[broker] = {s.tp: s for s in states}
            else:
                stop_replica[broker] = {s.tp: s for s in states}
        return PendingRequests(leader_and_isr, stop_replica, set(um_brokers), {s.tp: s for s in um[3]})

    def send_requests_to_brokers(self, controller_epoch: int, *, record: bool = True) -> list[SentRequest]:
        lines, raw = self.context.native.batch_send(
            self.slot, self.config.stop_replica_version, self.state_change_logger.enabled(20)
        )
        emit(self.state_change_logger, self.state_change_logger, lines)
        return self.deliver_raw(controller_epoch, raw, record=record)

    def deliver_raw(self, controller_epoch: int, raw: Iterable[_RawRequest], *, record: bool = True) -> list[SentRequest]:
        """Build and deliver the requests the engine sent, in its order (a failing channel is an
        IllegalStateError, as in the reference); returned unless ``record`` is false."""
        sent: list[SentRequest] = []
        try:
            self._deliver_all(controller_epoch, raw, sent if record else None)
            return sent
        except Exception as e:
            raise IllegalStateError(f"failed to send controller requests: {e}") from e

    def _deliver_all(self, controller_epoch: int, raw: Iterable[_RawRequest], sent: list[SentRequest] | None) -> None:
        brokers_by_id: Mapping[int, BrokerInfo] | None = None
        for kind, broker, _, states, brokers, delete in raw:
            if kind == "UpdateMetadata":  # one fan-out, to ``brokers``
                self._deliver_update_metadata(sent, controller_epoch, brokers, states)
            elif kind == "LeaderAndIsr":  # ``brokers``: the live leaders
                if brokers_by_id is None:
                    brokers_by_id = self._registered_brokers()
                self._deliver_leader_and_isr(sent, controller_epoch, broker, states, brokers, brokers_by_id)
            else:
                self._deliver_stop_replica(sent, controller_epoch, broker, delete, states)
