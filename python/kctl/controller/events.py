"""Controller events (Kafka's ControllerEvent family, reference §6.1).

Watches, timers, broker responses and admin calls never touch controller state: they enqueue one
of these, and the single event thread processes them in order. Events that carry a caller's future
answer it in :meth:`ControllerEvent.preempt` when they are drained unprocessed (the controller is
resigning or shutting down). Fields are keyword-only and have no stand-in defaults: an event is built
with everything it is about.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kctl.errors import ControllerMovedError, NotControllerError
from kctl import messages
from kctl.messages import ResponseReceived
from kctl.model import ElectionType as ElectionType  # re-exported: admin vocabulary, defined with the model
from kctl.model import LeaderAndIsr, TopicPartition


class ControllerState(enum.Enum):
    """What the event thread is doing; names the rate-and-time metric of each event kind."""

    IDLE = "Idle"
    CONTROLLER_CHANGE = "ControllerChange"
    BROKER_CHANGE = "BrokerChange"
    TOPIC_CHANGE = "TopicChange"
    TOPIC_DELETION = "TopicDeletion"
    ALTER_PARTITION_REASSIGNMENT = "AlterPartitionReassignment"
    AUTO_LEADER_BALANCE = "AutoLeaderBalance"
    MANUAL_LEADER_BALANCE = "ManualLeaderBalance"
    CONTROLLED_SHUTDOWN = "ControlledShutdown"
    ISR_CHANGE = "IsrChange"
    LEADER_AND_ISR_RESPONSE_RECEIVED = "LeaderAndIsrResponseReceived"
    LOG_DIR_CHANGE = "LogDirChange"
    CONTROLLER_SHUTDOWN = "ControllerShutdown"
    UNCLEAN_LEADER_ELECTION_ENABLE = "UncleanLeaderElectionEnable"
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = "TopicUncleanLeaderElectionEnable"
    LIST_PARTITION_REASSIGNMENT = "ListPartitionReassignment"
    UPDATE_METADATA_RESPONSE_RECEIVED = "UpdateMetadataResponseReceived"
    TOPIC_ADMIN = "TopicAdmin"
    CONFIG_CHANGE = "ConfigChange"

    @property
    def kafka_value(self) -> int:
        """The value of the ``ControllerState`` gauge: Kafka's number for the state (Kafka 3.9's
        last is UpdateFeatures, 17, which kctl has no event for); kctl's own states follow it."""
        return _KAFKA_VALUES[self]

    @property
    def rate_and_time_metric(self) -> str | None:
        """The name of the ``ControllerStats`` timer of this state's events, as Kafka names it
        (``<State>RateAndTimeMs``, two kept from older releases); None for the states Kafka does not time."""
        if self in (ControllerState.IDLE, ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED):
            return None
        if self is ControllerState.BROKER_CHANGE:
            return "LeaderElectionRateAndTimeMs"
        if self is ControllerState.ALTER_PARTITION_REASSIGNMENT:
            return "PartitionReassignmentRateAndTimeMs"
        return f"{self.value}RateAndTimeMs"


_KAFKA_VALUES = {
    ControllerState.IDLE: 0,
    ControllerState.CONTROLLER_CHANGE: 1,
    ControllerState.BROKER_CHANGE: 2,
    ControllerState.TOPIC_CHANGE: 3,
    ControllerState.TOPIC_DELETION: 4,
    ControllerState.ALTER_PARTITION_REASSIGNMENT: 5,
    ControllerState.AUTO_LEADER_BALANCE: 6,
    ControllerState.MANUAL_LEADER_BALANCE: 7,
    ControllerState.CONTROLLED_SHUTDOWN: 8,
    ControllerState.ISR_CHANGE: 9,
    ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED: 10,
    ControllerState.LOG_DIR_CHANGE: 11,
    ControllerState.CONTROLLER_SHUTDOWN: 12,
    ControllerState.UNCLEAN_LEADER_ELECTION_ENABLE: 13,
    ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE: 14,
    ControllerState.LIST_PARTITION_REASSIGNMENT: 15,
    ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED: 16,
    ControllerState.TOPIC_ADMIN: 18,
    ControllerState.CONFIG_CHANGE: 19,
}


class ElectionTrigger(enum.Enum):
    ZK = "ZkTriggered"
    ADMIN = "AdminClientTriggered"
    AUTO = "AutoTriggered"


@dataclass(frozen=True, kw_only=True)
class ControllerEvent:
    state: ClassVar[ControllerState] = ControllerState.IDLE

    def preempt(self) -> None:
        """Called instead of processing when the event is drained by a resignation."""

    @property
    def name(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, kw_only=True)
class EventWithFuture(ControllerEvent):
    """An event a caller waits on (an admin call or a broker's request)."""

    future: Future[Any] = field(default_factory=Future, compare=False)

    def preempt(self) -> None:
        if not self.future.done():
            self.future.set_exception(NotControllerError("The controller moved before this request was processed"))


@dataclass(frozen=True, kw_only=True)
class Startup(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, kw_only=True)
class ControllerChange(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, kw_only=True)
class Reelect(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, kw_only=True)
class Expire(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, kw_only=True)
class ShutdownEventThread(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_SHUTDOWN


@dataclass(frozen=True, kw_only=True)
class BrokerChange(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE


@dataclass(frozen=True, kw_only=True)
class BrokerModifications(ControllerEvent):
    broker_id: int
    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE


@dataclass(frozen=True, kw_only=True)
class TopicChange(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE


@dataclass(frozen=True, kw_only=True)
class PartitionModifications(ControllerEvent):
    topic: str
    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE


@dataclass(frozen=True, kw_only=True)
class TopicDeletion(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION


@dataclass(frozen=True, kw_only=True)
class ZkPartitionReassignment(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT


@dataclass(frozen=True, kw_only=True)
class PartitionReassignmentIsrChange(ControllerEvent):
    partition: TopicPartition
    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT


@dataclass(frozen=True, kw_only=True)
class IsrChangeNotification(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.ISR_CHANGE


@dataclass(frozen=True, kw_only=True)
class LogDirEventNotification(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.LOG_DIR_CHANGE


@dataclass(frozen=True, kw_only=True)
class TopicConfigChange(ControllerEvent):
    """A topic's config changed (kctl's form of Kafka's TopicConfigHandler hook)."""

    topic: str
    state: ClassVar[ControllerState] = ControllerState.CONFIG_CHANGE


@dataclass(frozen=True, kw_only=True)
class ReplicaLeaderElection(EventWithFuture):
    """``partitions`` None means: read them from the preferred-election admin path (ZK trigger)."""

    partitions: frozenset[TopicPartition] | None
    election_type: ElectionType
    trigger: ElectionTrigger
    state: ClassVar[ControllerState] = ControllerState.MANUAL_LEADER_BALANCE

    @classmethod
    def zk_triggered(cls) -> ReplicaLeaderElection:
        """The election ``/admin/preferred_replica_election`` asks for (its partitions read from it)."""
        return cls(partitions=None, election_type=ElectionType.PREFERRED, trigger=ElectionTrigger.ZK)

    def preempt(self) -> None:
        if not self.future.done():
            self.future.set_result({p: NotControllerError() for p in self.partitions or ()})


@dataclass(frozen=True, kw_only=True)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.AUTO_LEADER_BALANCE


@dataclass(frozen=True, kw_only=True)
class ControlledShutdown(EventWithFuture):
    broker_id: int
    broker_epoch: int
    state: ClassVar[ControllerState] = ControllerState.CONTROLLED_SHUTDOWN

    def preempt(self) -> None:
        if not self.future.done():
            self.future.set_exception(ControllerMovedError("Controller moved to another broker. Aborting controlled shutdown"))


@dataclass(frozen=True, kw_only=True)
class BrokerResponseReceived(ControllerEvent):
    """A broker answered a request of a batch; each subclass's ``received`` is what the batch reported."""

    @staticmethod
    def of(received: ResponseReceived) -> BrokerResponseReceived:
        return _RESPONSE_EVENTS.get(type(received), TopicDeletionStopReplicaResponseReceived)(received=received)


@dataclass(frozen=True, kw_only=True)
class LeaderAndIsrResponseReceived(BrokerResponseReceived):
    received: messages.LeaderAndIsrResponseReceived
    state: ClassVar[ControllerState] = ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED


@dataclass(frozen=True, kw_only=True)
class UpdateMetadataResponseReceived(BrokerResponseReceived):
    received: messages.UpdateMetadataResponseReceived
    state: ClassVar[ControllerState] = ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED


@dataclass(frozen=True, kw_only=True)
class TopicDeletionStopReplicaResponseReceived(BrokerResponseReceived):
    received: messages.StopReplicaResponseReceived
    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION


_RESPONSE_EVENTS: dict[type, Callable[..., BrokerResponseReceived]] = {
    messages.LeaderAndIsrResponseReceived: LeaderAndIsrResponseReceived,
    messages.UpdateMetadataResponseReceived: UpdateMetadataResponseReceived,
}
"""The event of each kind of response (a StopReplica response's is a topic deletion's)."""


@dataclass(frozen=True, kw_only=True)
class ApiPartitionReassignment(EventWithFuture):
    """Target ``None`` cancels the partition's reassignment."""

    reassignments: Mapping[TopicPartition, tuple[int, ...] | None]
    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT


@dataclass(frozen=True, kw_only=True)
class ListPartitionReassignments(EventWithFuture):
    """``partitions`` None lists every partition being reassigned."""

    partitions: frozenset[TopicPartition] | None
    state: ClassVar[ControllerState] = ControllerState.LIST_PARTITION_REASSIGNMENT


@dataclass(frozen=True, kw_only=True)
class AllocateProducerIds(EventWithFuture):
    """A broker asking for a block of producer ids (Kafka's event keeps the controller Idle)."""

    broker_id: int
    broker_epoch: int
    state: ClassVar[ControllerState] = ControllerState.IDLE


@dataclass(frozen=True, kw_only=True)
class AlterPartitionReceived(EventWithFuture):
    broker_id: int
    broker_epoch: int
    changes: Mapping[TopicPartition, LeaderAndIsr]
    state: ClassVar[ControllerState] = ControllerState.ISR_CHANGE


@dataclass(frozen=True, kw_only=True)
class UncleanLeaderElectionEnable(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.UNCLEAN_LEADER_ELECTION_ENABLE


@dataclass(frozen=True, kw_only=True)
class TopicUncleanLeaderElectionEnable(ControllerEvent):
    topic: str
    state: ClassVar[ControllerState] = ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE


@dataclass(frozen=True, kw_only=True)
class TopicAdminRequest(EventWithFuture):
    """An admin-tool operation run on the event thread so it is ordered with everything else
    (kctl's own events: Kafka's admin client writes these znodes itself). The future maps each
    topic to None or its error."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_ADMIN


@dataclass(frozen=True, kw_only=True)
class CreateTopics(TopicAdminRequest):
    """Each mapping has ``name`` and either ``partitions``/``replication_factor`` or ``assignment``,
    optionally ``config`` (checked on the event thread: a bad one fails that topic only)."""

    topics: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, kw_only=True)
class CreatePartitions(TopicAdminRequest):
    increases: Mapping[str, int]
    assignments: Mapping[str, Mapping[int, Sequence[int]]]


@dataclass(frozen=True, kw_only=True)
class DeleteTopics(TopicAdminRequest):
    topics: tuple[str, ...]
