"""A real ``FrameServer`` on a loopback socket fed hostile bytes: it closes that connection, logs
why, and still answers a well-formed request from another client."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl import wire
from kctl.net import Address, EventLoopThread, FrameClient, FrameServer, Header, NetworkError, Request
from kctl.testing.ports import LOOPBACK, free_ports

from tests.support.hostile_inputs import fuzz, msgpack_values, mutated, nested_extensions, valid_frames


class Unhandled(logging.Handler):
    """What asyncio logs about exceptions nobody handled (a connection callback that raised)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def unhandled() -> Iterator[Unhandled]:
    handler = Unhandled()
    logging.getLogger("asyncio").addHandler(handler)
    yield handler
    logging.getLogger("asyncio").removeHandler(handler)


@pytest.fixture(scope="module")
def server(unhandled: Unhandled) -> Iterator[tuple[EventLoopThread, Address]]:
    network = EventLoopThread()
    frames = FrameServer(network, (LOOPBACK, free_ports(1)[0]))
    frames.add_handler("Echo", lambda request, respond: respond(request.body))
    address = frames.start()
    yield network, address
    frames.close()
    network.stop()


def send(address: Address, data: bytes, half_close: bool) -> bytes:
    """Send ``data`` on a connection of its own and return all the server wrote back until it
    closed the connection (failing if it does not within 20 s)."""
    received = b""
    with socket.create_connection(address, timeout=20) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk


def still_serves(network: EventLoopThread, address: Address) -> None:
    client = FrameClient(network)
    try:
        request = Request("Echo", Header(), ("still", "here"))
        assert network.run(client.call(address, request, 20), timeout=30) == ("still", "here")
    finally:
        client.close()


def test_nested_extension_frame_closes_the_connection_and_is_logged(
    server: tuple[EventLoopThread, Address], caplog: pytest.LogCaptureFixture
) -> None:
    network, address = server
    hostile = nested_extensions()
    with caplog.at_level(logging.WARNING, logger="kctl.net"):
        assert send(address, wire.FRAME_HEADER.pack(len(hostile)) + hostile, half_close=False) == b""
        still_serves(network, address)
    closing = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Closing the connection from")]
    assert closing and "extension values nested more than" in closing[0]


def test_a_client_of_a_hostile_server_drops_that_connection(server: tuple[EventLoopThread, Address]) -> None:
    """The other way round: an answer of nested extension values fails the call, not the process."""
    network, _ = server
    with socket.create_server((LOOPBACK, free_ports(1)[0])) as listener:
        client = FrameClient(network)
        future = network.submit(client.call(listener.getsockname(), Request("Echo", Header(), 1), 30))
        peer, _ = listener.accept()
        with peer:
            hostile = nested_extensions()
            peer.sendall(wire.FRAME_HEADER.pack(len(hostile)) + hostile)
            with pytest.raises(NetworkError, match="extension values nested more than"):
                future.result(30)
        client.close()


def framed(message: object) -> bytes:
    body = wire.encode(message)
    return wire.FRAME_HEADER.pack(len(body)) + body


headers = st.builds(Header, st.integers(-5, 5), st.integers(-5, 5), st.integers(-5, 5), st.none() | st.text(max_size=9))
hostile_requests = st.tuples(
    st.sampled_from(["req", "req", "resp"]) | msgpack_values,
    msgpack_values,
    st.sampled_from(["Echo", "Nope"]) | msgpack_values,
    headers | msgpack_values,
    msgpack_values,
).map(framed)
"""Request frames of the right length with any value in any place."""

hostile_streams = st.one_of(
    hostile_requests,
    st.binary(max_size=300),
    st.lists(mutated(valid_frames()), min_size=1, max_size=3).map(
        lambda bodies: b"".join(wire.FRAME_HEADER.pack(len(body)) + body for body in bodies)
    ),
    st.integers(wire.MAX_EXTENSION_DEPTH + 1, 2000).map(
        lambda depth: wire.FRAME_HEADER.pack(len(nested_extensions(depth))) + nested_extensions(depth)
    ),
)


@fuzz(300)
@given(hostile_streams)
def test_hostile_streams_leave_the_server_serving(
    server: tuple[EventLoopThread, Address], unhandled: Unhandled, data: bytes
) -> None:
    network, address = server
    unhandled.records.clear()
    answers, rest = wire.split_frames(send(address, data, half_close=True))
    assert rest == b"" and all(isinstance(a, tuple) and a[0] in ("resp", "err") for a in answers)
    still_serves(network, address)
    assert [r.getMessage() for r in unhandled.records] == []
