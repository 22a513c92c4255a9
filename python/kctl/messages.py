"""The controller's messages to brokers and theirs to it (reference §5), shared by the batch, the
broker agent, every transport, the wire codec and the simulator.

Plain frozen dataclasses with Kafka's field names: LeaderAndIsr, UpdateMetadata and StopReplica
with their partition states and responses; the ``*ResponseReceived`` events a response becomes on
the controller; ControlledShutdown and AlterPartition from brokers. They depend on the data model
only, so anything that speaks to a controller or a broker can import them without the engines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, Union, overload

from kctl.errors import Errors
from kctl.model import BrokerInfo, LeaderAndIsr, LeaderRecoveryState, TopicPartition, new_topic_partition


T = TypeVar("T")


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


LeaderAndIsrRow = tuple[TopicPartition, int, int, int, tuple[int, ...], int, tuple[int, ...], tuple[int, ...], bool]
"""A LeaderAndIsr partition state as a simulated broker reads it: ``(tp, controller_epoch, leader,
leader_epoch, isr, partition_epoch, replicas, adding_replicas, is_new)``."""
StopReplicaRow = tuple[TopicPartition, int, bool]
"""A StopReplica partition state as a simulated broker reads it: ``(tp, leader_epoch, delete_partition)``."""


def leader_and_isr_rows(
    states: Sequence[LeaderAndIsrPartitionState], indices: list[int] | None = None
) -> list[LeaderAndIsrRow]:
    """``states`` (those at ``indices``, ascending, when given) as rows: the native engine's
    payload builds them without a state object each (``PartitionStates.rows``); the reference
    engine's objects are read field by field."""
    rows = getattr(states, "rows", None)
    if rows is not None:
        return rows(indices)  # type: ignore[no-any-return]  # kctl._engine.PartitionStates
    return [(new_topic_partition((s.topic, s.partition)), s.controller_epoch, s.leader, s.leader_epoch, s.isr,
             s.partition_epoch, s.replicas, s.adding_replicas, s.is_new) for s in _picked(states, indices)]


def stop_replica_rows(
    states: Sequence[StopReplicaPartitionState], indices: list[int] | None = None
) -> list[StopReplicaRow]:
    """``states`` (those at ``indices``) as rows (see :func:`leader_and_isr_rows`)."""
    rows = getattr(states, "rows", None)
    if rows is not None:
        return rows(indices)  # type: ignore[no-any-return]  # kctl._engine.PartitionStates
    return [(new_topic_partition((s.topic, s.partition)), s.leader_epoch, s.delete_partition)
            for s in _picked(states, indices)]


def _picked(states: Sequence[T], indices: list[int] | None) -> Sequence[T]:
    return states if indices is None else [states[i] for i in indices]


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


class UpdateMetadataFanOut:
    """One UpdateMetadata payload for many brokers, each with its own broker epoch: Kafka sends
    every live broker the same request but for that field. :meth:`request` builds a broker's
    :class:`UpdateMetadataRequest` when something reads it, once: a reassignment at 50 brokers
    sends over a million, which in-process brokers apply in short and nothing else reads.

    ``broker_epochs`` (the epoch sent to each broker, -1 for one missing) is read-only: fan-outs
    share it while the live brokers do not change."""

    __slots__ = ("_built", "broker_epochs", "controller_epoch", "controller_id", "live_brokers", "partition_states",
                 "topic_ids", "version")

    api = "UpdateMetadata"

    def __init__(self, version: int, controller_id: int, controller_epoch: int,
                 partition_states: Sequence[UpdateMetadataPartitionState], live_brokers: tuple[BrokerInfo, ...],
                 topic_ids: Mapping[str, str], broker_epochs: Mapping[int, int]) -> None:
        self.version, self.controller_id, self.controller_epoch = version, controller_id, controller_epoch
        self.partition_states, self.live_brokers, self.topic_ids = partition_states, live_brokers, topic_ids
        self.broker_epochs = broker_epochs
        self._built: dict[int, UpdateMetadataRequest] = {}

    def request(self, broker: int) -> UpdateMetadataRequest:
        """The request sent to ``broker`` (the same object at every call)."""
        built = self._built
        request = built.get(broker)
        if request is None:  # setdefault: threads building it at once get the same one
            request = built.setdefault(broker, UpdateMetadataRequest(
                self.version, self.controller_id, self.controller_epoch, self.broker_epochs.get(broker, -1),
                self.partition_states, self.live_brokers, self.topic_ids,
            ))
        return request

    def __repr__(self) -> str:
        return (f"UpdateMetadataFanOut(version={self.version}, controller_id={self.controller_id}, "
                f"controller_epoch={self.controller_epoch}, brokers={sorted(self.broker_epochs)})")


def built_request(request: ControllerRequest | UpdateMetadataFanOut, broker: int) -> ControllerRequest:
    """``request`` as sent to ``broker``: a fan-out's request for it, built if not yet."""
    return request.request(broker) if isinstance(request, UpdateMetadataFanOut) else request


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


Outgoing = tuple[int, ControllerRequest | UpdateMetadataFanOut, Callable[[Any], None] | None]
"""A request for a broker and the callback of its response, as a fan-out hands them over in bulk
(``send_requests(outgoing)``, which a channel may offer besides ``send_request``); an
UpdateMetadata fan-out hands over its :class:`UpdateMetadataFanOut` in place of each broker's
request, which a channel offering ``send_requests`` takes as it is."""


def send_all(channel: RequestChannel, outgoing: list[Outgoing]) -> None:
    """``channel.send_request`` for each request in order (a fan-out's built for its broker): in
    one call, fan-outs as they are, where the channel has ``send_requests`` (an UpdateMetadata
    fan-out is a request per broker)."""
    send_requests = getattr(channel, "send_requests", None)
    if send_requests is not None:
        send_requests(outgoing)
        return
    for broker_id, request, callback in outgoing:
        channel.send_request(broker_id, built_request(request, broker_id), callback)


ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's Uuid.ZERO_UUID in its base64 form: the topic id sent when a topic has none."""


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


@dataclass(frozen=True)
class AllocateProducerIdsRequest:
    """A broker asking for a block of producer ids for its idempotent and transactional producers."""

    broker_id: int
    broker_epoch: int

    api = "AllocateProducerIds"


@dataclass(frozen=True)
class AllocateProducerIdsResponse:
    """The block (``producer_id_start`` and the ``producer_id_len`` ids after it), or an error."""

    error: Errors = Errors.NONE
    producer_id_start: int = -1
    producer_id_len: int = 0


BrokerToControllerRequest = Union[ControlledShutdownRequest, AlterPartitionRequest, AllocateProducerIdsRequest]
