"""What every engine's request batch is (Kafka's AbstractControllerBrokerRequestBatch, reference §5).

:class:`ControllerBrokerRequestBatch` accumulates LeaderAndIsr, UpdateMetadata and StopReplica
entries per broker during a state change and sends them in one flush, in Kafka's order. Building
and delivering the request objects is shared here; accumulating is each engine's. The public
constructor (``kctl.requests.ControllerBrokerRequestBatch(controller_id, context, config)``)
returns the implementation of the context's engine.
"""

from __future__ import annotations

import abc
import itertools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kctl._engine import PartitionStates
from kctl.engine_api import engine_parts
from kctl.messages import (
    ZERO_UUID,
    ControllerRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponseReceived,
    Outgoing,
    RequestChannel,
    ResponseReceived,
    SentRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponseReceived,
    UpdateMetadataFanOut,
    UpdateMetadataPartitionState,
    UpdateMetadataResponseReceived,
    send_all,
)
from kctl.model import BrokerInfo, TopicPartition

if TYPE_CHECKING:
    from kctl.config import ControllerConfig
    from kctl.engine_api.context import ControllerContext
    from kctl.model import LeaderIsrAndControllerEpoch, ReplicaAssignment
    from kctl.statechange import StateChangeLogger


@dataclass
class PendingRequests:
    """What a batch holds before it is sent, per broker."""

    leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]]
    stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]]
    update_metadata_brokers: set[int]
    update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState]


def _update_metadata_callback(batch: ControllerBrokerRequestBatch, broker: int) -> Callable[[Any], None] | None:
    """What hears the broker's UpdateMetadata responses: the batch's ``update_metadata_callback``
    for it, else ``on_response`` with the same report while the broker answers with the same
    (immutable) response object, as a simulated broker answers every accepted request (a fan-out
    is answered by every broker, often)."""
    on_response = batch.on_response
    if on_response is None:
        return None
    if batch.update_metadata_callback is not None:
        return batch.update_metadata_callback(broker)
    last: object = None
    received: UpdateMetadataResponseReceived | None = None

    def answered(response: Any) -> None:
        nonlocal last, received
        if response is not last or received is None:
            last, received = response, UpdateMetadataResponseReceived(broker, response)
        on_response(received)
    return answered


_last_live_brokers: tuple[BrokerInfo, ...] = ()


def _shared_live_brokers(brokers: list[BrokerInfo]) -> tuple[BrokerInfo, ...]:
    """The registered brokers an UpdateMetadata advertises, as the same tuple as the previous
    send's (of any batch) while they are the same objects: the brokers' caches then index it
    once (``kctl.broker.metadata_cache._broker_index``), not once per request."""
    global _last_live_brokers
    last = _last_live_brokers
    if len(last) != len(brokers) or not all(map(operator.is_, last, brokers)):
        last = _last_live_brokers = tuple(brokers)
    return last


_last_broker_epochs: dict[int, int] = {}


def _shared_broker_epochs(epochs: dict[int, int]) -> dict[int, int]:
    """The live brokers' epochs, as the same dict as the previous send's (of any batch) while they
    are the same: a fan-out keeps them until its requests are built, and a reassignment sends tens
    of thousands of fan-outs between two changes of the live brokers (read-only once shared)."""
    global _last_broker_epochs
    if epochs != _last_broker_epochs:
        _last_broker_epochs = epochs
    return _last_broker_epochs


Sequence.register(PartitionStates)  # the native engine's lazy payloads


def _topics(states: Sequence[LeaderAndIsrPartitionState | UpdateMetadataPartitionState]) -> Iterable[str]:
    """The topics a payload names, in order; a native payload knows them without materialising."""
    if isinstance(states, PartitionStates):
        return states.topics()
    return dict.fromkeys(s.topic for s in states)


def _deleted(states: Sequence[StopReplicaPartitionState]) -> frozenset[TopicPartition]:
    if isinstance(states, PartitionStates):
        return frozenset(TopicPartition(t, p) for t, p in states.deleted())
    return frozenset(s.tp for s in states if s.delete_partition)


class ControllerBrokerRequestBatch(abc.ABC):
    """Kafka's AbstractControllerBrokerRequestBatch.

    :param channel: where requests go when the batch is sent (None: only returned).
    :param on_response: called with a ``*ResponseReceived`` event for each response.
    :param update_metadata_callback: makes the callback of a broker's UpdateMetadata responses,
        once per broker, instead of one reporting to ``on_response`` (the controller's queues an
        answer's event without a call in between: a fan-out is answered by every broker).
    """

    def __new__(cls, controller_id: int, context: ControllerContext, *args: Any, **kwargs: Any) -> ControllerBrokerRequestBatch:
        if cls is ControllerBrokerRequestBatch:
            return super().__new__(engine_parts(context.engine).request_batch)
        return super().__new__(cls)

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        config: ControllerConfig,
        *,
        channel: RequestChannel | None = None,
        on_response: Callable[[ResponseReceived], None] | None = None,
        update_metadata_callback: Callable[[int], Callable[[Any], None]] | None = None,
        state_change_logger: StateChangeLogger | None = None,
    ) -> None:
        from kctl.statechange import StateChangeLogger

        self.controller_id = controller_id
        self.context = context
        self.config = config
        self.channel = channel
        self.on_response = on_response
        self.update_metadata_callback = update_metadata_callback
        self.state_change_logger = state_change_logger or StateChangeLogger(controller_id, lambda: context.epoch)
        self._metadata_callbacks: dict[int, Callable[[Any], None] | None] = {}
        """Each broker's UpdateMetadata callback (:func:`_update_metadata_callback`), made once."""
        self._fan_out_callbacks: dict[tuple[int, ...], list[Callable[[Any], None] | None]] = {}
        """Those of each list of brokers fanned out to: the fan-outs of a reassignment go to the same."""

    # --- Building and delivering requests (shared by every engine) -------------------------------

    def _broker_epoch(self, broker: int) -> int:
        epoch = self.context.live_broker_epoch(broker)
        return -1 if epoch is None else epoch

    def _deliver(self, sent: list[SentRequest] | None, broker: int, request: ControllerRequest,
                 callback: Callable[[Any], None] | None) -> None:
        """Send ``request``, recorded in ``sent`` unless None (see ``send_requests_to_brokers``)."""
        if sent is not None:
            sent.append(SentRequest(broker, request))
        if self.channel is not None:
            self.channel.send_request(broker, request, callback if self.on_response is not None else None)

    def _registered_brokers(self) -> dict[int, BrokerInfo]:
        """The live or shutting-down brokers by id, for the LeaderAndIsr requests of one send."""
        return {b.id: b for b in self.context.live_or_shutting_down_brokers()}

    def _deliver_leader_and_isr(
        self, sent: list[SentRequest] | None, controller_epoch: int, broker: int,
        states: Sequence[LeaderAndIsrPartitionState], leaders: Iterable[int], brokers_by_id: Mapping[int, BrokerInfo],
    ) -> None:
        """``leaders``: the states' distinct leaders, ascending (the live ones are sent);
        ``brokers_by_id``: :meth:`_registered_brokers`."""
        ctx = self.context
        known = ctx.topic_ids
        request = LeaderAndIsrRequest(
            self.config.leader_and_isr_version,
            self.controller_id,
            controller_epoch,
            self._broker_epoch(broker),
            states,
            {t: known.get(t, ZERO_UUID) for t in _topics(states)},
            tuple(brokers_by_id[b] for b in leaders if b in brokers_by_id),
        )
        self._deliver(sent, broker, request, lambda r: self._respond(LeaderAndIsrResponseReceived(broker, r)))

    def _deliver_update_metadata(
        self, sent: list[SentRequest] | None, controller_epoch: int, brokers: list[int],
        states: Sequence[UpdateMetadataPartitionState],
    ) -> None:
        ctx = self.context
        live_brokers = _shared_live_brokers(ctx.live_or_shutting_down_brokers())
        known = ctx.topic_ids
        topic_ids = {t: known[t] for t in _topics(states) if t in known}
        fan_out = UpdateMetadataFanOut(self.config.update_metadata_version, self.controller_id, controller_epoch, states,
                                       live_brokers, topic_ids, _shared_broker_epochs(ctx.live_broker_epochs()))
        key = tuple(brokers)
        callbacks = self._fan_out_callbacks.get(key)
        if callbacks is None:
            made = self._metadata_callbacks
            for broker in key:
                if broker not in made:
                    made[broker] = _update_metadata_callback(self, broker)
            callbacks = self._fan_out_callbacks[key] = [made[broker] for broker in key]
        # _deliver for the whole fan-out: it is a request per broker, built when read
        outgoing: list[Outgoing] = list(zip(key, itertools.repeat(fan_out), callbacks))
        if sent is not None:
            sent.extend([SentRequest(broker, fan_out.request(broker)) for broker in brokers])
        if self.channel is not None:
            send_all(self.channel, outgoing)

    def _deliver_stop_replica(
        self, sent: list[SentRequest] | None, controller_epoch: int, broker: int, delete_partitions: bool,
        states: Sequence[StopReplicaPartitionState],
    ) -> None:
        version = self.config.stop_replica_version
        request = StopReplicaRequest(
            version, self.controller_id, controller_epoch, self._broker_epoch(broker), delete_partitions, states
        )
        deleted = _deleted(states)

        def answered(response: Any) -> None:
            self._respond(StopReplicaResponseReceived(broker, response, deleted))

        # Before version 3 only the request that deletes is answered.
        self._deliver(sent, broker, request, answered if version >= 3 or delete_partitions else None)

    def _respond(self, event: ResponseReceived) -> None:
        """Response callbacks only hand an event to the controller."""
        if self.on_response is not None:
            self.on_response(event)

    @abc.abstractmethod
    def new_batch(self) -> None:
        """Start a batch; :class:`IllegalStateError` if the previous one was not sent."""

    @abc.abstractmethod
    def clear(self) -> None:
        ...

    @abc.abstractmethod
    def add_leader_and_isr_request_for_brokers(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        leadership: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        """Queue a partition state for each broker (is_new is sticky) and UpdateMetadata for it."""

    @abc.abstractmethod
    def add_update_metadata_request_for_brokers(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        ...

    @abc.abstractmethod
    def add_stop_replica_request_for_brokers(
        self, brokers: Iterable[int], tp: TopicPartition, delete_partition: bool
    ) -> None:
        ...

    def add_stop_replica_requests_for_brokers(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition], delete_partition: bool
    ) -> None:
        """StopReplica for each partition, to the same brokers (bulk form of the call above)."""
        brokers = list(brokers)
        for tp in partitions:
            self.add_stop_replica_request_for_brokers(brokers, tp, delete_partition)

    @abc.abstractmethod
    def pending(self) -> PendingRequests:
        ...

    @abc.abstractmethod
    def send_requests_to_brokers(self, controller_epoch: int, *, record: bool = True) -> list[SentRequest]:
        """Send everything queued (LeaderAndIsr, then UpdateMetadata, then StopReplica) to brokers
        that are registered now; return what was sent, in that order. With ``record`` false the
        list is left empty: the controller's own sends are not read, and at 50 brokers a
        reassignment sends over a million requests."""
