"""The controller's data model, named and shaped after Kafka's (reference §1).

Everything here is immutable: the controller replaces values rather than mutating them, which is
what makes cached state safe to share between the context, the request batch and the store.
"""

from __future__ import annotations

import enum
import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, cast

from kctl.errors import IllegalArgumentError, InvalidTopicError, KctlError

NO_LEADER = -1
"""A partition without a leader."""
LEADER_DURING_DELETE = -2
"""The leader advertised in UpdateMetadata for a topic queued for deletion."""
NO_EPOCH = -1
"""The leader epoch sent in StopReplica when no leadership is cached."""
EPOCH_DURING_DELETE = -2
"""The leader epoch sent in StopReplica for topics queued for deletion."""
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_VERSION = 0
UNKNOWN_BROKER_EPOCH = -1
"""A sender that predates broker epochs (KIP-380); never rejected."""
CONTROLLER_ONLY_FEATURE = "kctl.controller.only"
"""The supported feature that marks a broker entry as a kctl controller's, not a broker's: Kafka's
ZooKeeper-mode brokers find their controller only among live brokers, so a controller of real
Kafka brokers registers one (:attr:`BrokerInfo.controller_only`); it leads and hosts nothing."""

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
"""Kafka's ``Int``: broker, partition and controller ids, every epoch but the broker's, ports."""
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""Kafka's ``Long``: broker epochs (the czxid of a registration)."""
MAX_PORT = 65535

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


class TopicPartition(NamedTuple):
    """A partition of a topic; ordered by topic name, then partition id."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """Parse ``"topic-3"`` (the form ``str()`` produces); the topic may itself contain dashes."""
        if not isinstance(text, str):
            raise InvalidTopicError(f"{text!r} is not of the form <topic>-<partition>")
        topic, sep, partition = text.rpartition("-")
        # ASCII digits only: str.isdigit() also accepts '²' or Arabic-Indic digits.
        if not sep or not topic or not (partition.isascii() and partition.isdigit()):
            raise InvalidTopicError(f"'{text}' is not of the form <topic>-<partition>")
        validate_topic_name(topic)
        digits = partition.lstrip("0") or "0"
        if len(digits) > len(str(INT32_MAX)) or int(digits) > INT32_MAX:  # int() refuses 4300+ digits
            raise InvalidTopicError(f"'{text}': the partition id must be an integer from 0 to {INT32_MAX}")
        return cls(topic, int(digits))


new_topic_partition = cast(Callable[[tuple[str, int]], TopicPartition], partial(tuple.__new__, TopicPartition))
"""``TopicPartition(*pair)`` without the Python frame of a NamedTuple's constructor (half the
cost), for loops over the thousands of partitions of one request."""


class PartitionReplica(NamedTuple):
    """The replica of a partition hosted on one broker."""

    tp: TopicPartition
    broker: int

    def __str__(self) -> str:
        return f"[Topic={self.tp.topic},Partition={self.tp.partition},Replica={self.broker}]"


class LeaderRecoveryState(enum.IntEnum):
    """KIP-704: whether the leader's log may be missing committed records after an unclean election."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """Leader, leader epoch and ISR of a partition, plus the version of the stored state.

    ``partition_epoch`` is ZooKeeper's zkVersion of the partition's state znode: it changes only when
    a conditional write succeeds, so the helpers that compute a new state leave it alone.
    """

    leader: int
    isr: tuple[int, ...]
    leader_epoch: int = INITIAL_LEADER_EPOCH
    partition_epoch: int = INITIAL_PARTITION_EPOCH
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    def __post_init__(self) -> None:
        if not isinstance(self.isr, tuple):
            object.__setattr__(self, "isr", tuple(self.isr))

    def new_leader(self, leader: int) -> LeaderAndIsr:
        """Same ISR, another leader, the next leader epoch."""
        return self.new_leader_and_isr(leader, self.isr)

    def new_leader_and_isr(self, leader: int, isr: tuple[int, ...] | list[int]) -> LeaderAndIsr:
        """Another leader and ISR, the next leader epoch."""
        return LeaderAndIsr(
            leader, tuple(isr), self.leader_epoch + 1, self.partition_epoch, self.leader_recovery_state
        )

    def new_epoch(self) -> LeaderAndIsr:
        """Same leader and ISR, the next leader epoch (forces brokers to act on a changed replica set)."""
        return self.new_leader_and_isr(self.leader, self.isr)

    def with_partition_epoch(self, partition_epoch: int) -> LeaderAndIsr:
        """The same state recorded at another store version (after a successful conditional write)."""
        return LeaderAndIsr(
            self.leader, self.isr, self.leader_epoch, partition_epoch, self.leader_recovery_state
        )

    def with_recovery_state(self, state: LeaderRecoveryState) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.isr, self.leader_epoch, self.partition_epoch, state)

    def equals_ignoring_partition_epoch(self, other: LeaderAndIsr) -> bool:
        """Kafka's AlterIsr idempotency test: leader, leader epoch, ISR and recovery state match."""
        return (
            self.leader == other.leader
            and self.leader_epoch == other.leader_epoch
            and self.isr == other.isr
            and self.leader_recovery_state == other.leader_recovery_state
        )

    def __str__(self) -> str:
        # Kafka 3.0's wording; the recovery state (3.2+) appears only when it matters.
        isr = ", ".join(map(str, self.isr))
        recovery = (
            ", leaderRecoveryState=RECOVERING"
            if self.leader_recovery_state is LeaderRecoveryState.RECOVERING
            else ""
        )
        return (
            f"LeaderAndIsr(leader={self.leader}, leaderEpoch={self.leader_epoch}, isr=List({isr}){recovery}, "
            f"zkVersion={self.partition_epoch})"
        )


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """A LeaderAndIsr plus the epoch of the controller that wrote it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int

    def __str__(self) -> str:
        return f"(Leader:{self.leader_and_isr.leader},ISR:{','.join(map(str, self.leader_and_isr.isr))},LeaderEpoch:{self.leader_and_isr.leader_epoch},ControllerEpoch:{self.controller_epoch})"


def _distinct(items: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """RS, AR and RR of one partition (reference §1.3).

    While a reassignment is in flight ``replicas`` holds the target replicas first, then the origin
    replicas that are not in the target.
    """

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("replicas", "adding_replicas", "removing_replicas"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """TRS: the replicas once the reassignment completes."""
        removing = self.removing_replicas
        return tuple(r for r in self.replicas if r not in removing) if removing else self.replicas

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment started."""
        adding = self.adding_replicas
        return tuple(r for r in self.replicas if r not in adding) if adding else self.replicas

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: tuple[int, ...] | list[int]) -> ReplicaAssignment:
        """The assignment that moves the origin replicas to ``target``; computed from ORS, so
        re-targeting drops the previous AR and targeting ORS cancels."""
        target = tuple(target)
        origin = self.origin_replicas
        full = _distinct(target + origin)
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )

    def remove_replica(self, broker: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(r for r in self.replicas if r != broker),
            tuple(r for r in self.adding_replicas if r != broker),
            tuple(r for r in self.removing_replicas if r != broker),
        )

    def __str__(self) -> str:
        def fmt(xs: tuple[int, ...]) -> str:
            return ",".join(map(str, xs))

        return (
            f"ReplicaAssignment(replicas={fmt(self.replicas)}, addingReplicas={fmt(self.adding_replicas)}, "
            f"removingReplicas={fmt(self.removing_replicas)})"
        )


class PartitionState(enum.Enum):
    """States of the partition state machine (reference §3.1)."""

    NEW = (0, "NewPartition")
    ONLINE = (1, "OnlinePartition")
    OFFLINE = (2, "OfflinePartition")
    NON_EXISTENT = (3, "NonExistentPartition")

    @property
    def state_id(self) -> int:
        return self.value[0]

    @property
    def kafka_name(self) -> str:
        return self.value[1]

    @property
    def valid_previous_states(self) -> frozenset[PartitionState]:
        return PARTITION_VALID_PREVIOUS_STATES[self]

    def __str__(self) -> str:
        return self.kafka_name


PARTITION_VALID_PREVIOUS_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


class ReplicaState(enum.Enum):
    """States of the replica state machine (reference §4.1)."""

    NEW = (1, "NewReplica")
    ONLINE = (2, "OnlineReplica")
    OFFLINE = (3, "OfflineReplica")
    DELETION_STARTED = (4, "ReplicaDeletionStarted")
    DELETION_SUCCESSFUL = (5, "ReplicaDeletionSuccessful")
    DELETION_INELIGIBLE = (6, "ReplicaDeletionIneligible")
    NON_EXISTENT = (7, "NonExistentReplica")

    @property
    def state_id(self) -> int:
        return self.value[0]

    @property
    def kafka_name(self) -> str:
        return self.value[1]

    @property
    def valid_previous_states(self) -> frozenset[ReplicaState]:
        return REPLICA_VALID_PREVIOUS_STATES[self]

    def __str__(self) -> str:
        return self.kafka_name


_R = ReplicaState
REPLICA_VALID_PREVIOUS_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}
del _R


class ElectionType(enum.Enum):
    """What an admin asks a leader election for (Kafka's ElectionType): the preferred replica, or
    any live replica when no ISR member is left (unclean)."""

    PREFERRED = "preferred"
    UNCLEAN = "unclean"


@dataclass(frozen=True, slots=True)
class EndPoint:
    """A listener of a broker: ``PLAINTEXT://host:port``."""

    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        return f"{self.listener_name}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What a broker registers about itself (``/brokers/ids/<id>``)."""

    id: int
    endpoints: tuple[EndPoint, ...] = ()
    rack: str | None = None
    features: tuple[tuple[str, tuple[int, int]], ...] = ()
    jmx_port: int = -1

    @property
    def controller_only(self) -> bool:
        """A controller's entry (:data:`CONTROLLER_ONLY_FEATURE`): never a replica's broker."""
        return any(name == CONTROLLER_ONLY_FEATURE for name, _ in self.features)


def int_problem(value: object, minimum: int = INT32_MIN, maximum: int = INT32_MAX) -> str | None:
    """Why ``value`` is not an integer from ``minimum`` to ``maximum`` (Kafka's ``Int`` unless told
    otherwise), or None when it is one. Anything Kafka parses as an ``Int`` and kctl hands to its
    native engine must pass, or it would fail there (an ``OverflowError``) instead of here."""
    if not isinstance(value, int) or isinstance(value, bool):
        return f"must be an integer, got {reprlib.repr(value)}"
    if not minimum <= value <= maximum:
        return f"must be an integer from {minimum} to {maximum}, got {reprlib.repr(value)}"
    return None


def validate_int(
    name: str,
    value: object,
    minimum: int = INT32_MIN,
    maximum: int = INT32_MAX,
    error: type[KctlError] = IllegalArgumentError,
) -> int:
    """``value`` if :func:`int_problem` finds nothing, else ``error`` naming the field ``name``."""
    problem = int_problem(value, minimum, maximum)
    if problem is not None:
        raise error(f"{name} {problem}")
    return value  # type: ignore[return-value]


def validate_partition_id(
    tp: TopicPartition, minimum: int = INT32_MIN, error: type[KctlError] = IllegalArgumentError
) -> TopicPartition:
    """``tp``, if its partition id is Kafka's ``Int`` (at least ``minimum``); else ``error`` naming it."""
    validate_int(f"partition {tp}: the partition id", tp.partition, minimum, INT32_MAX, error)
    return tp


def validate_topic_name(name: str) -> None:
    """Kafka's topic-name rules: 1 to 249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"Topic name must be a string, not {type(name).__name__}: {name!r}")
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )


def topic_collision_key(name: str) -> str:
    """Names that differ only by '.' and '_' collide in metric names, so Kafka refuses the second."""
    return name.replace(".", "_")
