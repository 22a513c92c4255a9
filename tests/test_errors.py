"""kctl.errors: Kafka's protocol error codes and the Kafka error each KctlError reports."""

from __future__ import annotations

import inspect
import pickle

import pytest

from kctl import errors
from kctl.errors import Errors, KctlError, StoreError, error_of

# Protocol error codes, transcribed from Kafka's org.apache.kafka.common.protocol.Errors.
KAFKA_ERROR_CODES = {
    "NONE": 0,
    "UNKNOWN_SERVER_ERROR": -1,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "LEADER_NOT_AVAILABLE": 5,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "BROKER_NOT_AVAILABLE": 8,
    "STALE_CONTROLLER_EPOCH": 11,
    "INVALID_TOPIC_EXCEPTION": 17,
    "TOPIC_AUTHORIZATION_FAILED": 29,
    "CLUSTER_AUTHORIZATION_FAILED": 31,
    "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_PARTITIONS": 37,
    "INVALID_REPLICATION_FACTOR": 38,
    "INVALID_REPLICA_ASSIGNMENT": 39,
    "INVALID_CONFIG": 40,
    "NOT_CONTROLLER": 41,
    "INVALID_REQUEST": 42,
    "OPERATION_NOT_ATTEMPTED": 55,
    "KAFKA_STORAGE_ERROR": 56,
    "FETCH_SESSION_ID_NOT_FOUND": 70,
    "INVALID_FETCH_SESSION_EPOCH": 71,
    "TOPIC_DELETION_DISABLED": 73,
    "FENCED_LEADER_EPOCH": 74,
    "STALE_BROKER_EPOCH": 77,
    "PREFERRED_LEADER_NOT_AVAILABLE": 80,
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": 83,
    "ELECTION_NOT_NEEDED": 84,
    "NO_REASSIGNMENT_IN_PROGRESS": 85,
    "INVALID_UPDATE_VERSION": 95,
    "BROKER_ID_NOT_REGISTERED": 102,
    "INELIGIBLE_REPLICA": 107,
}

# Every KctlError subclass -> (the Kafka error it reports, extra Python base it must have).
EXPECTED: dict[str, tuple[str, type[BaseException] | None]] = {
    # admin input validation: Kafka's ApiExceptions of the same name
    "InvalidTopicError": ("INVALID_TOPIC_EXCEPTION", ValueError),
    "InvalidPartitionsError": ("INVALID_PARTITIONS", ValueError),
    "InvalidReplicationFactorError": ("INVALID_REPLICATION_FACTOR", ValueError),
    "InvalidReplicaAssignmentError": ("INVALID_REPLICA_ASSIGNMENT", ValueError),
    "InvalidConfigurationError": ("INVALID_CONFIG", ValueError),
    "InvalidRequestError": ("INVALID_REQUEST", ValueError),
    # Kafka's AdminOperationException is not an ApiException: reported as UNKNOWN_SERVER_ERROR.
    "AdminOperationError": ("UNKNOWN_SERVER_ERROR", ValueError),
    # admin tools (kctl topics / reassign / elect-leaders): AdminCommandFailedException is not an
    # ApiException either; a tool waiting too long for the controller reports REQUEST_TIMED_OUT.
    "AdminCommandFailedError": ("UNKNOWN_SERVER_ERROR", ValueError),
    "RequestTimedOutError": ("REQUEST_TIMED_OUT", None),
    "TopicExistsError": ("TOPIC_ALREADY_EXISTS", None),
    "UnknownTopicOrPartitionError": ("UNKNOWN_TOPIC_OR_PARTITION", LookupError),
    # kctl's choice (Kafka's DeleteTopics swallows this case).
    "TopicAlreadyMarkedForDeletionError": ("INVALID_TOPIC_EXCEPTION", None),
    "TopicDeletionDisabledError": ("TOPIC_DELETION_DISABLED", None),
    "BrokerNotAvailableError": ("BROKER_NOT_AVAILABLE", None),
    # controller state
    "IllegalStateError": ("UNKNOWN_SERVER_ERROR", None),
    "IllegalArgumentError": ("UNKNOWN_SERVER_ERROR", ValueError),
    "StateChangeFailedError": ("UNKNOWN_SERVER_ERROR", None),
    # Kafka maps ControllerMovedException to STALE_CONTROLLER_EPOCH; admin entry points that find the
    # controller inactive answer NotControllerError (NOT_CONTROLLER) instead.
    "ControllerMovedError": ("STALE_CONTROLLER_EPOCH", None),
    "NotControllerError": ("NOT_CONTROLLER", None),
    "StaleBrokerEpochError": ("STALE_BROKER_EPOCH", None),
    "BrokerIdNotRegisteredError": ("BROKER_ID_NOT_REGISTERED", None),
    "StaleControllerEpochError": ("STALE_CONTROLLER_EPOCH", None),
    "ElectionNotNeededError": ("ELECTION_NOT_NEEDED", None),
    "PreferredLeaderNotAvailableError": ("PREFERRED_LEADER_NOT_AVAILABLE", None),
    "EligibleLeadersNotAvailableError": ("ELIGIBLE_LEADERS_NOT_AVAILABLE", None),
    "NoReassignmentInProgressError": ("NO_REASSIGNMENT_IN_PROGRESS", None),
    "FencedLeaderEpochError": ("FENCED_LEADER_EPOCH", None),
    "InvalidUpdateVersionError": ("INVALID_UPDATE_VERSION", None),
    "IneligibleReplicaError": ("INELIGIBLE_REPLICA", None),
    "UnknownServerError": ("UNKNOWN_SERVER_ERROR", None),
    # stores and plugins: internal failures
    "StoreError": ("UNKNOWN_SERVER_ERROR", None),
    "NoNodeError": ("UNKNOWN_SERVER_ERROR", StoreError),
    "NoAuthError": ("UNKNOWN_SERVER_ERROR", StoreError),
    "NodeExistsError": ("UNKNOWN_SERVER_ERROR", StoreError),
    "BadVersionError": ("UNKNOWN_SERVER_ERROR", StoreError),
    "CorruptDataError": ("UNKNOWN_SERVER_ERROR", StoreError),
    "StoreUnavailableError": ("UNKNOWN_SERVER_ERROR", StoreError),
    "PluginConflict": ("UNKNOWN_SERVER_ERROR", None),
    "PluginError": ("UNKNOWN_SERVER_ERROR", None),
}


def kctl_error_classes() -> dict[str, type[KctlError]]:
    return {
        name: obj
        for name, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, KctlError) and obj is not KctlError
    }


def test_errors_codes_match_kafka() -> None:
    assert {e.name: e.code for e in Errors} == KAFKA_ERROR_CODES
    for error in Errors:
        assert error.code == error.value


def test_error_codes_are_unique() -> None:
    codes = [e.code for e in Errors]
    assert len(codes) == len(set(codes))


def test_every_kctl_error_subclass_is_in_the_table() -> None:
    assert set(kctl_error_classes()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_error_carries_its_kafka_error(name: str) -> None:
    cls = getattr(errors, name)
    kafka_name, extra_base = EXPECTED[name]
    exc = cls("something went wrong")
    assert isinstance(exc, KctlError)
    assert isinstance(exc, Exception)
    assert exc.error is Errors[kafka_name]
    assert cls.error is Errors[kafka_name]
    assert error_of(exc) is Errors[kafka_name]
    assert exc.message == "something went wrong"
    assert str(exc) == "something went wrong"
    if extra_base is not None:
        assert isinstance(exc, extra_base)
    with pytest.raises(KctlError):
        raise exc


def test_validation_errors_are_value_errors_but_state_errors_are_not() -> None:
    assert issubclass(errors.InvalidReplicaAssignmentError, ValueError)
    assert not issubclass(errors.IllegalStateError, ValueError)
    assert not issubclass(errors.ControllerMovedError, ValueError)
    assert not issubclass(errors.StoreError, ValueError)


def test_kctl_error_defaults() -> None:
    exc = KctlError()
    assert exc.message == ""
    assert exc.error is Errors.UNKNOWN_SERVER_ERROR
    assert error_of(exc) is Errors.UNKNOWN_SERVER_ERROR


@pytest.mark.parametrize(
    "exc",
    [ValueError("x"), KeyError("k"), RuntimeError(), KeyboardInterrupt(), SystemExit(1), Exception()],
)
def test_error_of_unexpected_exceptions_is_unknown_server_error(exc: BaseException) -> None:
    assert error_of(exc) is Errors.UNKNOWN_SERVER_ERROR


def test_error_of_uses_the_instance_error() -> None:
    class Custom(KctlError):
        error = Errors.OPERATION_NOT_ATTEMPTED

    assert error_of(Custom("m")) is Errors.OPERATION_NOT_ATTEMPTED
    exc = errors.UnknownServerError("m")
    exc.error = Errors.REQUEST_TIMED_OUT
    assert error_of(exc) is Errors.REQUEST_TIMED_OUT
    # The class attribute is untouched.
    assert errors.UnknownServerError("m").error is Errors.UNKNOWN_SERVER_ERROR


@pytest.mark.parametrize(
    "cls",
    [StoreError, errors.NoNodeError, errors.NodeExistsError, errors.BadVersionError, errors.CorruptDataError,
     errors.StoreUnavailableError],
)
def test_store_error_path(cls: type[StoreError]) -> None:
    exc = cls("no such node", path="/brokers/topics/foo/partitions/0/state")
    assert exc.path == "/brokers/topics/foo/partitions/0/state"
    assert exc.message == "no such node"
    assert str(exc) == "no such node"
    assert cls("no path").path is None
    assert cls("positional", "/controller").path == "/controller"


def test_store_error_survives_pickling() -> None:
    exc = errors.BadVersionError("lost a race", path="/controller_epoch")
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is errors.BadVersionError
    assert copy.path == "/controller_epoch"
    assert copy.message == "lost a race"
    assert copy.error is Errors.UNKNOWN_SERVER_ERROR


@pytest.mark.parametrize("name", ["InvalidTopicError", "ElectionNotNeededError", "ControllerMovedError"])
def test_errors_survive_pickling(name: str) -> None:
    exc = getattr(errors, name)("message")
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is type(exc)
    assert copy.message == "message"
    assert error_of(copy) is error_of(exc)
