"""Controller-to-broker requests and their batching (Kafka's ControllerChannelManager, reference §5).

The messages are plain frozen dataclasses shared by every transport and by the broker agent.
:class:`ControllerBrokerRequestBatch` accumulates LeaderAndIsr, UpdateMetadata and StopReplica
entries per broker during a state change and sends them in one flush, in Kafka's order.
``ControllerBrokerRequestBatch(controller_id, context, config)`` returns the implementation of the
context's engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Union, overload

from kctl._engine import PartitionStates
from kctl.errors import Errors
from kctl.model import BrokerInfo, LeaderAndIsr, LeaderRecoveryState, TopicPartition

if TYPE_CHECKING:
    from kctl.config import ControllerConfig
    from kctl.context import ControllerContext
    from kctl.model import LeaderIsrAndControllerEpoch, ReplicaAssignment
    from kctl.statechange import StateChangeLogger


def _fmt(xs: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, xs)) + "]"


# --- Partition states carried by the requests ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    is_new: bool
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __str__(self) -> str:
        return (
            f"LeaderAndIsrPartitionState(topicName='{self.topic}', partitionIndex={self.partition}, "
            f"controllerEpoch={self.controller_epoch}, leader={self.leader}, leaderEpoch={self.leader_epoch}, "
            f"isr={_fmt(self.isr)}, zkVersion={self.partition_epoch}, replicas={_fmt(self.replicas)}, "
            f"addingReplicas={_fmt(self.adding_replicas)}, removingReplicas={_fmt(self.removing_replicas)}, "
            f"isNew={str(self.is_new).lower()})"
        )


@dataclass(frozen=True, slots=True)
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class StopReplicaPartitionState:
    topic: str
    partition: int
    leader_epoch: int
    delete_partition: bool

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# --- Requests ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    version: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: Sequence[LeaderAndIsrPartitionState]
    topic_ids: Mapping[str, str]
    live_leaders: tuple[BrokerInfo, ...]

    api = "LeaderAndIsr"


@dataclass(frozen=True)
class UpdateMetadataRequest:
    version: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: Sequence[UpdateMetadataPartitionState]
    live_brokers: tuple[BrokerInfo, ...]
    topic_ids: Mapping[str, str]

    api = "UpdateMetadata"


@dataclass(frozen=True)
class StopReplicaRequest:
    """From version 3 one request per broker carries every partition (grouped by topic) with its
    own delete flag and leader epoch; before, a request carries one delete flag for all."""

    version: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    delete_partitions: bool
    partition_states: Sequence[StopReplicaPartitionState]

    api = "StopReplica"


ControllerRequest = Union[LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest]


# --- Responses ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderAndIsrResponse:
    error: Errors = Errors.NONE
    partition_errors: Mapping[TopicPartition, Errors] = field(default_factory=dict)


@dataclass(frozen=True)
class UpdateMetadataResponse:
    error: Errors = Errors.NONE


@dataclass(frozen=True)
class StopReplicaResponse:
    error: Errors = Errors.NONE
    partition_errors: Mapping[TopicPartition, Errors] = field(default_factory=dict)


ControllerResponse = Union[LeaderAndIsrResponse, UpdateMetadataResponse, StopReplicaResponse]


@overload
def controller_error_response(request: LeaderAndIsrRequest, error: Errors) -> LeaderAndIsrResponse: ...
@overload
def controller_error_response(request: UpdateMetadataRequest, error: Errors) -> UpdateMetadataResponse: ...
@overload
def controller_error_response(request: StopReplicaRequest, error: Errors) -> StopReplicaResponse: ...
@overload
def controller_error_response(request: ControllerRequest, error: Errors) -> ControllerResponse: ...


def controller_error_response(request: ControllerRequest, error: Errors) -> ControllerResponse:
    """A refusal of the whole request (Kafka's ``getErrorResponse``): ``error`` at the top and for
    every partition."""
    if isinstance(request, UpdateMetadataRequest):
        return UpdateMetadataResponse(error)
    errors = {state.tp: error for state in request.partition_states}
    if isinstance(request, LeaderAndIsrRequest):
        return LeaderAndIsrResponse(error, errors)
    return StopReplicaResponse(error, errors)


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived:
    broker: int
    response: LeaderAndIsrResponse


@dataclass(frozen=True)
class UpdateMetadataResponseReceived:
    broker: int
    response: UpdateMetadataResponse


@dataclass(frozen=True)
class StopReplicaResponseReceived:
    """``deleted_partitions``: the partitions this request asked the broker to delete."""

    broker: int
    response: StopReplicaResponse
    deleted_partitions: frozenset[TopicPartition]


ResponseReceived = Union[LeaderAndIsrResponseReceived, UpdateMetadataResponseReceived, StopReplicaResponseReceived]


@dataclass(frozen=True)
class SentRequest:
    broker: int
    request: ControllerRequest


class RequestChannel(Protocol):
    """The controller side of a transport (Kafka's ControllerChannelManager): queues a request for a
    broker and calls ``callback`` with the broker's response, or drops requests to unknown brokers."""

    def send_request(
        self, broker_id: int, request: ControllerRequest, callback: Callable[[Any], None] | None
    ) -> None: ...


@dataclass
class PendingRequests:
    """What a batch holds before it is sent, per broker."""

    leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]]
    stop_replica: dict[int, dict[TopicPartition, StopReplicaPartitionState]]
    update_metadata_brokers: set[int]
    update_metadata_partitions: dict[TopicPartition, UpdateMetadataPartitionState]


def _batch_class(engine: str) -> type[ControllerBrokerRequestBatch]:
    if engine == "reference":
        from kctl.reference.request_batch import ReferenceRequestBatch

        return ReferenceRequestBatch
    if engine == "rust":
        from kctl.native.request_batch import RustRequestBatch

        return RustRequestBatch
    raise ValueError(f"no request batch for engine {engine!r}")


def _update_metadata_callback(batch: ControllerBrokerRequestBatch, broker: int) -> Callable[[Any], None]:
    return lambda response: batch._respond(UpdateMetadataResponseReceived(broker, response))


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


ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's Uuid.ZERO_UUID in its base64 form: the topic id sent when a topic has none."""


class ControllerBrokerRequestBatch:
    """Kafka's AbstractControllerBrokerRequestBatch.

    :param channel: where requests go when the batch is sent (None: only returned).
    :param on_response: called with a ``*ResponseReceived`` event for each response.
    """

    def __new__(cls, controller_id: int, context: ControllerContext, *args: Any, **kwargs: Any) -> ControllerBrokerRequestBatch:
        if cls is ControllerBrokerRequestBatch:
            return super().__new__(_batch_class(context.engine))
        return super().__new__(cls)

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        config: ControllerConfig,
        *,
        channel: RequestChannel | None = None,
        on_response: Callable[[ResponseReceived], None] | None = None,
        state_change_logger: StateChangeLogger | None = None,
    ) -> None:
        from kctl.statechange import StateChangeLogger

        self.controller_id = controller_id
        self.context = context
        self.config = config
        self.channel = channel
        self.on_response = on_response
        self.state_change_logger = state_change_logger or StateChangeLogger(controller_id, lambda: context.epoch)

    # --- Building and delivering requests (shared by every engine) -------------------------------

    def _broker_epoch(self, broker: int) -> int:
        epoch = self.context.live_broker_epoch(broker)
        return -1 if epoch is None else epoch

    def _deliver(self, sent: list[SentRequest], broker: int, request: ControllerRequest,
                 callback: Callable[[Any], None] | None) -> None:
        sent.append(SentRequest(broker, request))
        if self.channel is not None:
            self.channel.send_request(broker, request, callback if self.on_response is not None else None)

    def _registered_brokers(self) -> dict[int, BrokerInfo]:
        """The live or shutting-down brokers by id, for the LeaderAndIsr requests of one send."""
        return {b.id: b for b in self.context.live_or_shutting_down_brokers()}

    def _deliver_leader_and_isr(
        self, sent: list[SentRequest], controller_epoch: int, broker: int,
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
        self, sent: list[SentRequest], controller_epoch: int, brokers: list[int],
        states: Sequence[UpdateMetadataPartitionState],
    ) -> None:
        ctx = self.context
        live_brokers = tuple(ctx.live_or_shutting_down_brokers())
        known = ctx.topic_ids
        topic_ids = {t: known[t] for t in _topics(states) if t in known}
        for broker in brokers:
            request = UpdateMetadataRequest(
                self.config.update_metadata_version, self.controller_id, controller_epoch,
                self._broker_epoch(broker), states, live_brokers, topic_ids,
            )
            self._deliver(sent, broker, request, _update_metadata_callback(self, broker))

    def _deliver_stop_replica(
        self, sent: list[SentRequest], controller_epoch: int, broker: int, delete_partitions: bool,
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

    def new_batch(self) -> None:
        """Start a batch; :class:`IllegalStateError` if the previous one was not sent."""
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    def add_leader_and_isr_request_for_brokers(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        leadership: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        """Queue a partition state for each broker (is_new is sticky) and UpdateMetadata for it."""
        raise NotImplementedError

    def add_update_metadata_request_for_brokers(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        raise NotImplementedError

    def add_stop_replica_request_for_brokers(
        self, brokers: Iterable[int], tp: TopicPartition, delete_partition: bool
    ) -> None:
        raise NotImplementedError

    def add_stop_replica_requests_for_brokers(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition], delete_partition: bool
    ) -> None:
        """StopReplica for each partition, to the same brokers (bulk form of the call above)."""
        brokers = list(brokers)
        for tp in partitions:
            self.add_stop_replica_request_for_brokers(brokers, tp, delete_partition)

    def pending(self) -> PendingRequests:
        raise NotImplementedError

    def send_requests_to_brokers(self, controller_epoch: int) -> list[SentRequest]:
        """Send everything queued (LeaderAndIsr, then UpdateMetadata, then StopReplica) to brokers
        that are registered now; return what was sent, in that order."""
        raise NotImplementedError


# --- Broker-to-controller requests -------------------------------------------------------------------


@dataclass(frozen=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int

    api = "ControlledShutdown"


@dataclass(frozen=True)
class ControlledShutdownResponse:
    """``remaining_partitions``: partitions the broker still leads (the shutdown is complete only
    when the error is NONE and nothing remains)."""

    error: Errors = Errors.NONE
    remaining_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class AlterPartitionRequest:
    """A leader's proposed ISR changes; each state carries the leader epoch and the partition epoch
    (store version) the leader last saw."""

    broker_id: int
    broker_epoch: int
    changes: Mapping[TopicPartition, LeaderAndIsr]

    api = "AlterPartition"


@dataclass(frozen=True)
class AlterPartitionResponse:
    """A top-level error, or per partition the committed state or an error."""

    error: Errors = Errors.NONE
    partitions: Mapping[TopicPartition, LeaderAndIsr | Errors] = field(default_factory=dict)


BrokerToControllerRequest = Union[ControlledShutdownRequest, AlterPartitionRequest]
