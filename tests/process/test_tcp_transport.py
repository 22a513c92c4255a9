"""The ``tcp`` transport and its frames: framing edge cases, epochs on every request, retries."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from kctl import wire
from kctl.broker import BrokerAgent
from kctl.errors import Errors
from kctl.model import BrokerInfo, EndPoint, LeaderAndIsr, TopicPartition
from kctl.net import EventLoopThread, FrameClient, FrameServer, Header, NetworkError, Request
from kctl.requests import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrResponse,
)
from kctl.scheduler import RealTimeScheduler
from kctl.stores import paths
from kctl.stores.memory import MemoryStore, MemoryTree
from kctl.testing.ports import LOOPBACK, free_ports
from kctl.transports.tcp import TcpTransport

from tests.support.process_harness import leader_and_isr_request, wait_until

TP = TopicPartition("t", 0)


def broker_store() -> MemoryStore:
    """A broker's store session on a cluster whose controllers have been elected up to epoch 5."""
    tree = MemoryTree()
    tree.set_raw(paths.CONTROLLER_EPOCH, 5)
    return MemoryStore(tree)


@pytest.fixture
def broker(scheduler: RealTimeScheduler) -> Iterator[tuple[BrokerAgent, TcpTransport]]:
    """Broker 1 serving controller requests on a TCP listener (a memory store holds its znode)."""
    transport = TcpTransport(scheduler, f"{LOOPBACK}:{free_ports(1)[0]}")
    host, port = transport.listen()
    agent = BrokerAgent(1, broker_store(), transport, scheduler, host=host, port=port)
    agent.startup()
    yield agent, transport
    agent.kill()
    transport.close()


@pytest.fixture
def controller(scheduler: RealTimeScheduler) -> Iterator[TcpTransport]:
    transport = TcpTransport(scheduler, f"{LOOPBACK}:{free_ports(1)[0]}", request_timeout=2.0, retry_backoff=0.05)
    yield transport
    transport.close()


def _send(transport: TcpTransport, info: BrokerInfo, request: Any) -> Any:
    channel = transport.controller_channel(9)
    channel.add_broker(info)
    answer: Future[Any] = Future()
    channel.send_request(info.id, request, answer.set_result)
    return answer.result(10)


def test_messages_survive_the_codec() -> None:
    request = AlterPartitionRequest(1, 7, {TP: LeaderAndIsr(1, (1, 2), 3, 4)})
    response = AlterPartitionResponse(Errors.NONE, {TP: LeaderAndIsr(1, (1, 2), 3, 5), TopicPartition("u", 1): Errors.FENCED_LEADER_EPOCH})
    for message in (request, response, leader_and_isr_request(3, 2), ControlledShutdownResponse(Errors.NONE, (TP,))):
        assert wire.decode(wire.encode(message)) == message
    with pytest.raises(wire.WireError, match="unknown message type 'Nope'"):
        wire.decode(wire.encode(wire._msgpack().ExtType(1, wire._pack(["Nope", []]))))
    with pytest.raises(wire.WireError, match="frame announces"):
        wire.frame_length(wire.FRAME_HEADER.pack(wire.MAX_FRAME_BYTES + 1))


def test_broker_rejects_a_stale_controller_epoch(
    broker: tuple[BrokerAgent, TcpTransport], controller: TcpTransport
) -> None:
    agent, _ = broker
    first = _send(controller, agent.info, leader_and_isr_request(controller_epoch=2, leader_epoch=0))
    assert first == LeaderAndIsrResponse(Errors.NONE, {TP: Errors.NONE})
    stale = _send(controller, agent.info, leader_and_isr_request(controller_epoch=1, leader_epoch=1))
    assert stale == LeaderAndIsrResponse(Errors.STALE_CONTROLLER_EPOCH, {TP: Errors.STALE_CONTROLLER_EPOCH})
    assert agent.leader_epoch(TP) == 0  # the stale request changed nothing
    old_broker_epoch = _send(controller, agent.info, leader_and_isr_request(2, 1, broker_epoch=agent.broker_epoch - 1))
    assert old_broker_epoch.error is Errors.STALE_BROKER_EPOCH


def test_header_must_agree_with_theleader_and_isr_request(broker: tuple[BrokerAgent, TcpTransport]) -> None:
    agent, transport = broker
    network = EventLoopThread()
    client = FrameClient(network)
    try:
        address = transport.server.address
        assert address is not None
        lying = Request("LeaderAndIsr", Header(9, 5, -1), leader_and_isr_request(controller_epoch=1, leader_epoch=0))
        with pytest.raises(NetworkError, match="disagree with the request"):
            network.run(client.call(address, lying, 5))
        assert agent.leader_epoch(TP) is None
        honest = Request("LeaderAndIsr", Header(9, 1, -1), leader_and_isr_request(controller_epoch=1, leader_epoch=0))
        assert network.run(client.call(address, honest, 5)).error is Errors.NONE
    finally:
        client.close()
        network.stop()


def _raw_frames(port: int, payload: bytes, chunk: int) -> list[Any]:
    """Write ``payload`` ``chunk`` bytes at a time; read until the server has answered or closed."""
    answers: list[Any] = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for i in range(0, len(payload), chunk):
            sock.sendall(payload[i : i + chunk])
        rest = b""
        try:
            while len(answers) < payload.count(b"ping-"):
                data = sock.recv(65536)
                if not data:
                    break
                frames, rest = wire.split_frames(rest + data)
                answers += frames
        except TimeoutError:
            pass
    return answers


def test_frames_split_and_coalesced_on_the_socket() -> None:
    network = EventLoopThread()
    server = FrameServer(network, (LOOPBACK, free_ports(1)[0]))
    server.add_handler("Echo", lambda request, respond: respond(request.body))
    _, port = server.start()
    try:
        frames = b"".join(wire.frame(("req", i, "Echo", Header(), f"ping-{i}")) for i in range(3))
        assert _raw_frames(port, frames, chunk=1) == [("resp", i, f"ping-{i}") for i in range(3)]
        assert _raw_frames(port, frames, chunk=len(frames)) == [("resp", i, f"ping-{i}") for i in range(3)]
        unknown = _raw_frames(port, wire.frame(("req", 7, "Nope", Header(), "ping-x")), chunk=64)
        assert unknown == [("err", 7, "no handler for Nope requests here")]
        # A length over the limit, or bytes that are no message, close the connection.
        assert _raw_frames(port, wire.FRAME_HEADER.pack(wire.MAX_FRAME_BYTES + 1) + b"ping-", 64) == []
        assert _raw_frames(port, wire.FRAME_HEADER.pack(6) + b"\xc1ping-", 64) == []
        assert _raw_frames(port, frames, chunk=7)[-1] == ("resp", 2, "ping-2")  # the server still serves
    finally:
        server.close()
        network.stop()


def test_channel_retries_until_the_broker_listens(scheduler: RealTimeScheduler, controller: TcpTransport) -> None:
    port = free_ports(1)[0]
    info = BrokerInfo(1, (EndPoint("127.0.0.1", port),))
    answer: Future[Any] = Future()
    channel = controller.controller_channel(9)
    channel.add_broker(info)
    channel.send_request(1, leader_and_isr_request(1, 0), answer.set_result)
    wait_until(lambda: channel.queued() == {1: 1}, 5, "the request to wait for broker 1")
    assert not answer.done()

    transport = TcpTransport(scheduler, f"127.0.0.1:{port}")
    agent = BrokerAgent(1, broker_store(), transport, scheduler, port=port)
    agent.startup()
    try:
        assert answer.result(10) == LeaderAndIsrResponse(Errors.NONE, {TP: Errors.NONE})
    finally:
        agent.kill()
        transport.close()


def test_brokers_reach_the_controller_they_heard_from(
    broker: tuple[BrokerAgent, TcpTransport], controller: TcpTransport
) -> None:
    agent, broker_transport = broker
    received: list[Any] = []

    def handle(request: Any, respond: Any) -> None:
        received.append(request)
        threading.Timer(0.01, respond, [ControlledShutdownResponse(Errors.NONE, ())]).start()  # a later answer

    controller.bind_controller(9, handle)
    request = ControlledShutdownRequest(1, agent.broker_epoch)
    unknown: Future[Any] = Future()
    broker_transport.send_to_controller(9, request, unknown.set_result)
    assert unknown.result(5) == ControlledShutdownResponse(Errors.NOT_CONTROLLER)  # never heard from 9

    _send(controller, agent.info, leader_and_isr_request(1, 0))  # controller 9's request names its listener
    answer: Future[Any] = Future()
    broker_transport.send_to_controller(9, request, answer.set_result)
    assert answer.result(5) == ControlledShutdownResponse(Errors.NONE, ())
    assert received == [request]
