"""Errors, named after Kafka's exceptions and protocol error codes.

Every exception kctl raises on purpose is a :class:`KctlError`. Those that correspond to a Kafka
protocol error carry it as ``error`` (an :class:`Errors` member), so per-partition results can be
reported with Kafka's names (``UNKNOWN_TOPIC_OR_PARTITION``, ``ELECTION_NOT_NEEDED`` …).
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Iterable


class Errors(enum.Enum):
    """Kafka protocol error codes used by the controller and the broker agent."""

    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    STALE_CONTROLLER_EPOCH = 11
    INVALID_TOPIC_EXCEPTION = 17
    TOPIC_AUTHORIZATION_FAILED = 29
    CLUSTER_AUTHORIZATION_FAILED = 31
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_UPDATE_VERSION = 95
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107

    @property
    def code(self) -> int:
        return self.value


class KctlError(Exception):
    """Base of every error kctl raises on purpose."""

    error: Errors = Errors.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


# --- Validation of admin input (topic creation, assignments, config) -------------------------------


class InvalidTopicError(KctlError, ValueError):
    error = Errors.INVALID_TOPIC_EXCEPTION


class InvalidPartitionsError(KctlError, ValueError):
    error = Errors.INVALID_PARTITIONS


class InvalidReplicationFactorError(KctlError, ValueError):
    error = Errors.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KctlError, ValueError):
    error = Errors.INVALID_REPLICA_ASSIGNMENT


class AdminOperationError(KctlError, ValueError):
    """Kafka's AdminOperationException (e.g. mixed rack information)."""


class AdminCommandFailedError(KctlError, ValueError):
    """Kafka's AdminCommandFailedException: an admin tool's input (a JSON file, an option) is invalid."""


class InvalidConfigurationError(KctlError, ValueError):
    error = Errors.INVALID_CONFIG


class InvalidRequestError(KctlError, ValueError):
    error = Errors.INVALID_REQUEST


class TopicExistsError(KctlError):
    error = Errors.TOPIC_ALREADY_EXISTS


class UnknownTopicOrPartitionError(KctlError, LookupError):
    error = Errors.UNKNOWN_TOPIC_OR_PARTITION


class TopicAlreadyMarkedForDeletionError(KctlError):
    error = Errors.INVALID_TOPIC_EXCEPTION


class TopicDeletionDisabledError(KctlError):
    error = Errors.TOPIC_DELETION_DISABLED


class BrokerNotAvailableError(KctlError):
    error = Errors.BROKER_NOT_AVAILABLE


# --- Controller state --------------------------------------------------------------------------------


class IllegalStateError(KctlError):
    """Kafka's IllegalStateException: a programming or protocol invariant was broken."""


class IllegalArgumentError(KctlError, ValueError):
    """Kafka's IllegalArgumentException: a caller passed something a method cannot work with."""


class StateChangeFailedError(KctlError):
    """A state transition of one partition or replica could not be made."""


class ControllerMovedError(KctlError):
    """This controller is no longer the active one (a fenced write failed or another took over).

    Kafka reports it as STALE_CONTROLLER_EPOCH (e.g. to a broker whose controlled shutdown reached a
    deposed controller); requests reaching an inactive controller get :class:`NotControllerError`."""

    error = Errors.STALE_CONTROLLER_EPOCH


class NotControllerError(KctlError):
    error = Errors.NOT_CONTROLLER


class StaleBrokerEpochError(KctlError):
    error = Errors.STALE_BROKER_EPOCH


class BrokerIdNotRegisteredError(KctlError):
    error = Errors.BROKER_ID_NOT_REGISTERED


class StaleControllerEpochError(KctlError):
    error = Errors.STALE_CONTROLLER_EPOCH


class ElectionNotNeededError(KctlError):
    error = Errors.ELECTION_NOT_NEEDED


class PreferredLeaderNotAvailableError(KctlError):
    error = Errors.PREFERRED_LEADER_NOT_AVAILABLE


class EligibleLeadersNotAvailableError(KctlError):
    error = Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE


class NoReassignmentInProgressError(KctlError):
    error = Errors.NO_REASSIGNMENT_IN_PROGRESS


class FencedLeaderEpochError(KctlError):
    error = Errors.FENCED_LEADER_EPOCH


class InvalidUpdateVersionError(KctlError):
    error = Errors.INVALID_UPDATE_VERSION


class IneligibleReplicaError(KctlError):
    error = Errors.INELIGIBLE_REPLICA


class UnknownServerError(KctlError):
    error = Errors.UNKNOWN_SERVER_ERROR


class RequestTimedOutError(KctlError):
    error = Errors.REQUEST_TIMED_OUT


# --- Stores ------------------------------------------------------------------------------------------


class StoreError(KctlError):
    """A state store operation failed; ``path`` names the znode (or its in-memory equivalent)."""

    def __init__(self, message: str = "", path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class NoNodeError(StoreError):
    """ZooKeeper's NONODE."""


class NodeExistsError(StoreError):
    """ZooKeeper's NODEEXISTS."""


class BadVersionError(StoreError):
    """ZooKeeper's BADVERSION: a conditional write lost a race."""


class CorruptDataError(StoreError):
    """Stored data could not be decoded; the message names the path and the field."""


class NoAuthError(StoreError):
    """ZooKeeper's NOAUTH: the ACL of a znode does not let this identity change it."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached (connection loss, closed session)."""


# --- Plugins -----------------------------------------------------------------------------------------


class PluginConflict(KctlError):
    """Two plugins registered the same name for the same kind of capability."""


class PluginError(KctlError):
    """A plugin is missing, misbehaving or returned something outside its contract."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when a known name is close to ``name`` (a likely typo), else ``""``:
    the hint every message about an unknown name ends with."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean '{close[0]}'?)" if close else ""


def error_of(exc: BaseException) -> Errors:
    """The Kafka error code reported for an exception (UNKNOWN_SERVER_ERROR for unexpected ones)."""
    return exc.error if isinstance(exc, KctlError) else Errors.UNKNOWN_SERVER_ERROR
