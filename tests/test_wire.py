"""The bytes of kctl's messages are the documented format (``kctl.wire``), whatever makes them
fast: a controller and brokers of different builds must read each other."""

from __future__ import annotations

import msgpack  # type: ignore[import-untyped]

from kctl import wire
from kctl.errors import Errors
from kctl.messages import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrResponse
from kctl.model import BrokerInfo, EndPoint, LeaderRecoveryState, TopicPartition


def packed(value: object) -> bytes:
    return msgpack.packb(value, use_bin_type=True, strict_types=True)  # type: ignore[no-any-return]


def ext(code: int, value: object) -> msgpack.ExtType:
    return msgpack.ExtType(code, packed(value))


def dataclass_ext(name: str, *values: object) -> msgpack.ExtType:
    """Extension 1: the type's name and its fields in declaration order."""
    return ext(1, [name, list(values)])


def test_a_request_is_nested_extension_values_in_field_order() -> None:
    state = LeaderAndIsrPartitionState("t", 7, 3, 2, 5, (2, 1), 4, (1, 2, 3), (3,), (), True,
                                       LeaderRecoveryState.RECOVERING)
    broker = BrokerInfo(2, (EndPoint("h", 9092),), "r1", (("metadata.version", (1, 7)),), 9999)
    request = LeaderAndIsrRequest(6, 100, 3, 42, [state], {"t": "id"}, (broker,))
    expected = packed(dataclass_ext(
        "LeaderAndIsrRequest", 6, 100, 3, 42,
        [dataclass_ext("LeaderAndIsrPartitionState", "t", 7, 3, 2, 5, [2, 1], 4, [1, 2, 3], [3], [], True,
                       ext(4, 1))],
        {"t": "id"},
        [dataclass_ext("BrokerInfo", 2, [dataclass_ext("EndPoint", "h", 9092, "PLAINTEXT", "PLAINTEXT")], "r1",
                       [["metadata.version", [1, 7]]], 9999)],
    ))
    assert wire.encode(request) == expected
    assert wire.decode(expected) == LeaderAndIsrRequest(6, 100, 3, 42, (state,), {"t": "id"}, (broker,))


def test_errors_and_topic_partitions_are_extensions_of_their_own() -> None:
    response = LeaderAndIsrResponse(Errors.STALE_CONTROLLER_EPOCH, {TopicPartition("t", 1): Errors.NONE})
    expected = packed(dataclass_ext("LeaderAndIsrResponse", ext(3, Errors.STALE_CONTROLLER_EPOCH.value),
                                    {ext(2, ["t", 1]): ext(3, 0)}))
    assert wire.encode(response) == expected
    assert wire.decode(expected) == response
