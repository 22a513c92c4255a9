"""A broker that answers the ``kafka`` transport with bad bytes: the controller's sender closes the
connection, backs off and sends the same request again on a new one, as Kafka's controller does,
and the callback gets the first valid answer, never the bad ones."""

from __future__ import annotations

import logging
import queue
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from kctl.errors import Errors
from kctl.kafka import protocol as p
from kctl.messages import LeaderAndIsrPartitionState, LeaderAndIsrRequest, LeaderAndIsrResponse
from kctl.model import BrokerInfo, EndPoint, TopicPartition
from kctl.transports.kafka import KafkaTransport

BAD_ANSWERS = [
    struct.pack(">i", 2**31 - 1),  # a frame larger than any answer may be
    struct.pack(">i", -4),  # a negative frame size
    p.frame(b"\x00\x00\x00\x01\x00"),  # truncated body
    p.frame(p.encode_response(p.LEADER_AND_ISR, 4, 999_999, {"ErrorCode": 0, "PartitionErrors": []})),  # not ours
]


def read_request(conn: socket.socket) -> bytes:
    size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
    return conn.recv(size, socket.MSG_WAITALL)


@pytest.fixture
def hostile_broker() -> Iterator[tuple[int, list[bytes]]]:
    """A listener answering each connection's first request with the next bad answer, and the last
    connection's with a valid LeaderAndIsr v4 response; yields its port and the requests it read."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve() -> None:
        for bad in [*BAD_ANSWERS, None]:
            conn, _ = server.accept()
            with conn:
                data = read_request(conn)
                seen.append(data)
                if bad is not None:
                    conn.sendall(bad)
                    continue
                header, _ = p.decode_request(data)
                body = {"ErrorCode": 0, "PartitionErrors": [{"TopicName": "t", "PartitionIndex": 0, "ErrorCode": 0}]}
                conn.sendall(p.frame(p.encode_response(p.LEADER_AND_ISR, 4, header.correlation_id, body)))
                conn.recv(1)  # until the client closes

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        server.close()


def test_bad_answers_are_retried_until_a_good_one(hostile_broker: tuple[int, list[bytes]],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kctl.transports.kafka")
    port, seen = hostile_broker
    transport = KafkaTransport(request_timeout=30.0, retry_backoff=0.01, max_response_bytes=1 << 20)
    answers: queue.Queue[object] = queue.Queue()
    state = LeaderAndIsrPartitionState("t", 0, 1, 1, 0, (1,), 0, (1,), (), (), False)
    request = LeaderAndIsrRequest(4, 0, 1, 5, (state,), {}, ())
    try:
        channel = transport.controller_channel(0)
        channel.add_broker(BrokerInfo(1, (EndPoint("127.0.0.1", port),)))
        channel.send_request(1, request, answers.put)
        assert answers.get(timeout=60) == LeaderAndIsrResponse(Errors.NONE, {TopicPartition("t", 0): Errors.NONE})
    finally:
        transport.close()
    assert len(seen) == len(BAD_ANSWERS) + 1
    # The same request each time (correlation ids aside), as Kafka resends it.
    bodies = {p.decode_request(data)[1]["TopicStates"][0]["TopicName"] for data in seen}
    assert bodies == {"t"}
    # One line when the broker starts failing and one when it answers again; the retries in
    # between (every retry_backoff while a broker is down) only at DEBUG.
    failed = [r for r in caplog.records if "to broker 1 failed" in r.getMessage()]
    assert [r.levelno for r in failed] == [logging.WARNING] + [logging.DEBUG] * (len(BAD_ANSWERS) - 1)
    recovered = [r for r in caplog.records if r.levelno > logging.DEBUG and "answered" in r.getMessage()]
    assert [r.getMessage() for r in recovered] == [
        f"Controller 0: broker 1 answered LeaderAndIsr after {len(BAD_ANSWERS)} failed attempts"]
