"""The controller's listener of the ``kafka`` transport (kctl.kafka.listener): what a Kafka broker
sends its controller (ApiVersions, ControlledShutdown, AlterPartition, in the bytes
tests/kafka/test_wire_codec.py checks against Kafka's own classes) reaches the bound controller and
its answers go back; bad frames close only their connection, as Kafka's socket server does."""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kctl.errors import Errors
from kctl.kafka import messages as km
from kctl.kafka import protocol as p
from kctl.kafka.listener import ControllerListener
from kctl.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from kctl.model import LeaderAndIsr, TopicPartition
from kctl.transports.kafka import KafkaTransport

FOO_ID = "AAECAwQFBgcICQoLDA0ODw"


class Controller:
    """A stand-in controller: records what it is asked and answers as told."""

    def __init__(self) -> None:
        self.asked: list[Any] = []
        self.silent = False

    def __call__(self, request: Any, respond: Callable[[Any], None]) -> None:
        self.asked.append(request)
        if self.silent:
            return
        if isinstance(request, ControlledShutdownRequest):
            respond(ControlledShutdownResponse(Errors.NONE, (TopicPartition("foo", 1),)))
        elif isinstance(request, AllocateProducerIdsRequest):
            respond(AllocateProducerIdsResponse(Errors.NONE, 2000, 1000))
        else:
            assert isinstance(request, AlterPartitionRequest)
            respond(AlterPartitionResponse(Errors.NONE, dict(request.changes)))


@pytest.fixture
def listening() -> Iterator[tuple[KafkaTransport, Controller]]:
    transport = KafkaTransport(request_timeout=5.0, topic_ids=lambda: {"foo": FOO_ID})
    controller = Controller()
    transport.bind_controller(0, controller)
    try:
        yield transport, controller
    finally:
        transport.close()


def connect(transport: KafkaTransport) -> socket.socket:
    address = transport.listener_address
    assert address is not None
    return socket.create_connection(address, timeout=10)


def ask(transport: KafkaTransport, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    with connect(transport) as conn:
        conn.sendall(p.frame(p.encode_request(p.RequestHeader(api_key, version, 17, "broker-2"), body)))
        size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
        data = conn.recv(size, socket.MSG_WAITALL)
    answered_version = version if 0 <= version <= p.api(api_key).max_version else 0
    correlation_id, answer = p.decode_response(p.api(api_key), answered_version, data)
    assert correlation_id == 17
    return answer


def closed_by_listener(transport: KafkaTransport, payload: bytes) -> bool:
    with connect(transport) as conn:
        conn.sendall(payload)
        return conn.recv(1) == b""


def test_api_versions_name_what_the_controller_answers(listening: tuple[KafkaTransport, Controller]) -> None:
    transport, _ = listening
    for version in range(4):
        answer = ask(transport, 18, version, {"ClientSoftwareName": "apache-kafka-java", "ClientSoftwareVersion": "3.9.1"})
        assert answer["ErrorCode"] == 0
        assert {(k["ApiKey"], k["MinVersion"], k["MaxVersion"]) for k in answer["ApiKeys"]} == {(7, 0, 3), (18, 0, 3), (56, 0, 3), (67, 0, 0)}
    # A newer ApiVersions than kctl's: answered at v0 with UNSUPPORTED_VERSION, as Kafka answers it.
    with connect(transport) as conn:
        conn.sendall(p.frame(struct.pack(">hhih", 18, 9, 17, -1) + b"\x00\x00"))
        size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
        _, answer = p.decode_response(p.API_VERSIONS, 0, conn.recv(size, socket.MSG_WAITALL))
    assert answer["ErrorCode"] == km.UNSUPPORTED_VERSION and len(answer["ApiKeys"]) == 4


def test_controlled_shutdown_reaches_the_controller(listening: tuple[KafkaTransport, Controller]) -> None:
    transport, controller = listening
    answer = ask(transport, 7, 3, {"BrokerId": 2, "BrokerEpoch": 77})
    assert controller.asked == [ControlledShutdownRequest(2, 77)]
    assert answer == {"ErrorCode": 0, "RemainingPartitions": [{"TopicName": "foo", "PartitionIndex": 1}]}


def test_allocate_producer_ids_reaches_the_controller(listening: tuple[KafkaTransport, Controller]) -> None:
    transport, controller = listening
    answer = ask(transport, 67, 0, {"BrokerId": 2, "BrokerEpoch": 77})
    assert controller.asked == [AllocateProducerIdsRequest(2, 77)]
    assert answer == {"ThrottleTimeMs": 0, "ErrorCode": 0, "ProducerIdStart": 2000, "ProducerIdLen": 1000}
    transport.unbind_controller(0)
    answer = ask(transport, 67, 0, {"BrokerId": 2, "BrokerEpoch": 77})
    assert (answer["ErrorCode"], answer["ProducerIdStart"], answer["ProducerIdLen"]) == (Errors.NOT_CONTROLLER.value, -1, 0)


def test_alter_partition_by_topic_id(listening: tuple[KafkaTransport, Controller]) -> None:
    transport, controller = listening
    unknown = bytes(16 * [9])

    def topic(raw_id: bytes) -> dict[str, Any]:
        return {"TopicId": raw_id, "Partitions": [{"PartitionIndex": 0, "LeaderEpoch": 3, "PartitionEpoch": 4,
                                                   "NewIsrWithEpochs": [{"BrokerId": 2, "BrokerEpoch": 70}]}]}

    answer = ask(transport, 56, 3, {"BrokerId": 2, "BrokerEpoch": 77,
                                    "Topics": [topic(km.topic_id_bytes(FOO_ID)), topic(unknown)]})
    assert controller.asked == [AlterPartitionRequest(2, 77, {TopicPartition("foo", 0): LeaderAndIsr(2, (2,), 3, 4)})]
    by_id = {t["TopicId"]: t["Partitions"][0] for t in answer["Topics"]}
    assert (by_id[km.topic_id_bytes(FOO_ID)]["ErrorCode"], by_id[km.topic_id_bytes(FOO_ID)]["Isr"]) == (0, (2,))
    assert by_id[unknown]["ErrorCode"] == km.UNKNOWN_TOPIC_ID


def test_without_a_controller_brokers_are_told_not_controller(listening: tuple[KafkaTransport, Controller]) -> None:
    transport, controller = listening
    transport.unbind_controller(0)
    answer = ask(transport, 7, 3, {"BrokerId": 2, "BrokerEpoch": 77})
    assert answer["ErrorCode"] == Errors.NOT_CONTROLLER.value and controller.asked == []


def test_bad_frames_close_only_their_connection(listening: tuple[KafkaTransport, Controller],
                                                caplog: pytest.LogCaptureFixture) -> None:
    transport, controller = listening
    hostile = {
        "unknown api key": p.frame(struct.pack(">hhih", 0, 9, 1, -1)),
        "a controller's request sent to the controller": p.frame(p.encode_request(
            p.RequestHeader(5, 0, 1, "x"), {"ControllerId": 1, "ControllerEpoch": 1, "DeletePartitions": False,
                                            "UngroupedPartitions": []})),
        "unsupported version": p.frame(struct.pack(">hhih", 7, 4, 1, -1)),
        "oversized frame": struct.pack(">i", p.MAX_FRAME_BYTES + 1),
        "negative frame": struct.pack(">i", -1),
        "truncated body": p.frame(p.encode_request(p.RequestHeader(7, 3, 1, "x"), {"BrokerId": 2, "BrokerEpoch": 7})[:-3]),
        "bad varint": p.frame(p.encode_request_header(p.RequestHeader(56, 3, 1, "x")) + struct.pack(">iq", 2, 7) + b"\xff" * 6),
    }
    with caplog.at_level(logging.WARNING, logger="kctl.kafka.listener"):
        for what, payload in hostile.items():
            assert closed_by_listener(transport, payload), what
    assert controller.asked == []
    assert len([r for r in caplog.records if r.getMessage().startswith("Closing the connection from 127.0.0.1")]) == len(hostile)
    assert ask(transport, 7, 3, {"BrokerId": 2, "BrokerEpoch": 77})["ErrorCode"] == 0  # still serving


def test_a_silent_controller_gets_the_connection_closed(listening: tuple[KafkaTransport, Controller]) -> None:
    transport, controller = listening
    controller.silent = True
    payload = p.frame(p.encode_request(p.RequestHeader(7, 3, 1, "x"), {"BrokerId": 2, "BrokerEpoch": 77}))
    assert closed_by_listener(transport, payload)
    assert controller.asked == [ControlledShutdownRequest(2, 77)]


def test_connections_beyond_the_limit_and_idle_ones_are_closed(caplog: pytest.LogCaptureFixture) -> None:
    """A thread serves each connection: a peer cannot open them without bound, nor hold one idle."""
    listener = ControllerListener(max_connections=1, idle_timeout=1.0)
    try:
        with caplog.at_level(logging.WARNING, logger="kctl.kafka.listener"), \
                socket.create_connection(listener.address, timeout=30) as first:
            first.sendall(p.frame(p.encode_request(p.RequestHeader(p.API_VERSIONS.key, 0, 1, "probe"), {})))
            assert struct.unpack(">i", first.recv(4))[0] > 0  # served
            with socket.create_connection(listener.address, timeout=30) as second:
                assert second.recv(1) == b""  # over the limit: closed at once
            first.settimeout(30)
            while first.recv(65536):  # the rest of the answer, then the close for idleness
                pass
        messages = [r.getMessage() for r in caplog.records]
        assert any("1 connections are open already (max_connections)" in m for m in messages), messages
        assert any("idle for 1.0 s" in m for m in messages), messages
    finally:
        listener.close()
