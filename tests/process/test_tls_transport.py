"""The ``tcp`` transport over TLS with authorization, in one process: who may send what.

Certificates come from docs/security.md's commands (:mod:`tests.support.tls_harness`): controller-1 is a super
user, broker-N's principal is ``User:broker-N``. A second run of the same commands makes another
CA, whose certificates carry the very same names.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from kctl.broker import BrokerAgent
from kctl.broker.fetcher import FetchPartition, FetchRequest, NetworkReplicaManager
from kctl.errors import Errors
from kctl.model import TopicPartition
from kctl.net import EventLoopThread, FrameClient, FrameServer, Header, NetworkError
from kctl.requests import (
    AlterPartitionRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrResponse,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kctl.scheduler import RealTimeScheduler
from kctl.stores import paths
from kctl.stores.memory import MemoryStore, MemoryTree
from kctl.testing.ports import LOOPBACK, free_ports
from kctl.transports.tcp import TcpTransport

from tests.support.process_harness import leader_and_isr_request, wait_until
from tests.support.tls_harness import Certificates, Outsider

TP = TopicPartition("t", 0)
EPOCH = 5


@pytest.fixture
def broker(certificates: Certificates, scheduler: RealTimeScheduler) -> Iterator[tuple[BrokerAgent, TcpTransport]]:
    """Broker 1 on a TLS listener with authorization; controllers are elected up to epoch 5."""
    transport = TcpTransport(scheduler, f"{LOOPBACK}:{free_ports(1)[0]}", security=certificates.security("broker-1"))
    host, port = transport.listen()
    tree = MemoryTree()
    tree.set_raw(paths.CONTROLLER_EPOCH, EPOCH)
    agent = BrokerAgent(1, MemoryStore(tree), transport, scheduler, host=host, port=port, security_protocol="SSL")
    agent.startup()
    yield agent, transport
    agent.kill()
    transport.close()


@pytest.fixture
def clients() -> Iterator[list[Outsider]]:
    made: list[Outsider] = []
    yield made
    for client in made:
        client.close()


def call(peer: Outsider, address: Any, header: Header, body: Any) -> Any:
    """The answer; a :class:`NetworkError` (no answer) is raised."""
    answer = peer.send(address, header, body)
    if isinstance(answer, NetworkError):
        raise answer
    return answer


def stop_replica_delete() -> StopReplicaRequest:
    return StopReplicaRequest(3, 1, EPOCH, -1, True, (StopReplicaPartitionState("t", 0, -2, True),))


def update_metadata(controller_epoch: int) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(7, 1, controller_epoch, -1, (), (), {})


def header(request: Any, source: str | None = None) -> Header:
    return Header(request.controller_id, request.controller_epoch, request.broker_epoch, source)


def test_only_a_controller_principal_may_send_controller_requests(
    certificates: Certificates, broker: tuple[BrokerAgent, TcpTransport], clients: list[Outsider],
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent, transport = broker
    address = transport.server.address
    controller = Outsider(certificates.client_context(certificates.path("controller-1.pem")))
    other_broker = Outsider(certificates.client_context(certificates.path("broker-2.pem")))
    clients += [controller, other_broker]
    lai = leader_and_isr_request(EPOCH, 0)
    assert call(controller, address, header(lai), lai) == LeaderAndIsrResponse(Errors.NONE, {TP: Errors.NONE})

    caplog.set_level(logging.WARNING, "kctl.authorizer")
    denied = Errors.CLUSTER_AUTHORIZATION_FAILED
    forged = [stop_replica_delete(), update_metadata(2**31 - 1), leader_and_isr_request(EPOCH, 1)]
    answers = [call(other_broker, address, header(r, "127.0.0.1:1"), r) for r in forged]
    assert answers == [StopReplicaResponse(denied, {TP: denied}), UpdateMetadataResponse(denied),
                       LeaderAndIsrResponse(denied, {TP: denied})]
    assert [h.request for h in agent.handled] == [lai] and agent.leader_epoch(TP) == 0  # nothing changed
    denials = [r for r in caplog.records if r.name == "kctl.authorizer"]
    assert [r.getMessage().rpartition("for request = ")[2].split()[0] for r in denials] == [
        "StopReplica", "UpdateMetadata", "LeaderAndIsr"]
    assert all("Principal = User:broker-2 is Denied Operation = ClusterAction from host = 127.0.0.1:" in r.getMessage()
               for r in denials)

    # A refused request's header does not teach the broker where "controller 1" listens.
    answer: Future[Any] = Future()
    transport.send_to_controller(1, ControlledShutdownRequest(1, agent.broker_epoch), answer.set_result)
    assert answer.result(10) == ControlledShutdownResponse(Errors.NOT_CONTROLLER)
    # A forged epoch from the controller principal itself is refused by the epoch rule.
    with pytest.raises(NetworkError, match=r"ahead of /controller_epoch \(5\)"):
        call(controller, address, header(update_metadata(2**31 - 1)), update_metadata(2**31 - 1))
    assert call(controller, address, header(update_metadata(EPOCH)), update_metadata(EPOCH)).error is Errors.NONE


def test_peers_without_a_certificate_of_the_cluster_are_disconnected(
    certificates: Certificates, other_ca: Certificates, broker: tuple[BrokerAgent, TcpTransport],
    clients: list[Outsider], caplog: pytest.LogCaptureFixture,
) -> None:
    agent, transport = broker
    address = transport.server.address
    caplog.set_level(logging.WARNING, "kctl.net")
    # Plaintext; a certificate named controller-1 but signed by another CA; no certificate at all.
    no_certificate = ssl.create_default_context(cafile=certificates.path("ca.pem"))
    peers = [Outsider(None), Outsider(certificates.client_context(other_ca.path("controller-1.pem"))), Outsider(no_certificate)]
    clients += peers
    request = stop_replica_delete()
    for peer in peers:
        with pytest.raises(NetworkError):
            call(peer, address, header(request), request)
    assert agent.handled == []

    def closed_all() -> list[str] | None:  # the server logs on its event loop, maybe after the client's error
        closed = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
        return closed if len(closed) >= 3 else None

    closed = wait_until(closed_all, 10.0, "the server to log the three failed handshakes")
    assert len(closed) == 3 and all(m.startswith("Closing the connection from 127.0.0.1:") for m in closed)
    assert "WRONG_VERSION_NUMBER" in closed[0] or "wrong version number" in closed[0]
    assert "certificate verify failed" in closed[1] and "peer did not return a certificate" in closed[2]
    # A server whose certificate another CA signed is refused by the client as well.
    impostor = FrameServer(EventLoopThread(), (LOOPBACK, free_ports(1)[0]), other_ca.security("broker-1"))
    impostor.add_handler("UpdateMetadata", lambda req, respond: respond(UpdateMetadataResponse()))
    controller = Outsider(certificates.client_context(certificates.path("controller-1.pem")))
    clients.append(controller)
    try:
        with pytest.raises(NetworkError, match="TLS handshake failed"):
            call(controller, impostor.start(), header(update_metadata(EPOCH)), update_metadata(EPOCH))
    finally:
        impostor.close()
        impostor.network.stop()


def test_broker_requests_only_from_the_broker_they_name(
    certificates: Certificates, scheduler: RealTimeScheduler, clients: list[Outsider], caplog: pytest.LogCaptureFixture,
) -> None:
    controller = TcpTransport(scheduler, f"{LOOPBACK}:{free_ports(1)[0]}", security=certificates.security("controller-1"))
    received: list[Any] = []
    controller.bind_controller(1, lambda request, respond: (received.append(request),
                                                           respond(ControlledShutdownResponse(Errors.NONE, ()))))
    try:
        address = controller.server.address
        own, other = (Outsider(certificates.client_context(certificates.path(f"broker-{b}.pem"))) for b in (1, 2))
        clients += [own, other]
        shutdown = ControlledShutdownRequest(1, 7)
        assert call(own, address, Header(broker_epoch=7), shutdown) == ControlledShutdownResponse(Errors.NONE, ())
        caplog.set_level(logging.WARNING, "kctl.authorizer")
        denied = Errors.CLUSTER_AUTHORIZATION_FAILED
        assert call(other, address, Header(broker_epoch=7), shutdown) == ControlledShutdownResponse(denied)
        alter = AlterPartitionRequest(1, 7, {})
        assert call(other, address, Header(broker_epoch=7), alter).error is denied
        assert received == [shutdown]
        assert "for request = ControlledShutdown (sent for broker 1, whose principal is User:broker-1)" in caplog.text
    finally:
        controller.close()


def test_fetches_are_served_to_the_replicas_own_principal(certificates: Certificates, clients: list[Outsider]) -> None:
    network = EventLoopThread()
    server = FrameServer(network, (LOOPBACK, free_ports(1)[0]), certificates.security("broker-1"))
    NetworkReplicaManager(FrameClient(network), lambda broker_id: None).serve(server)
    try:
        address = server.start()
        broker_2 = Outsider(certificates.client_context(certificates.path("broker-2.pem")))
        clients.append(broker_2)
        part = FetchPartition(TP, 0, 0)
        as_itself = call(broker_2, address, Header(), FetchRequest(2, 1, (part,)))
        assert [p.error for p in as_itself.partitions] == [Errors.NOT_LEADER_OR_FOLLOWER]  # served: nothing led here
        as_broker_3 = call(broker_2, address, Header(), FetchRequest(3, 1, (part,)))
        assert [p.error for p in as_broker_3.partitions] == [Errors.TOPIC_AUTHORIZATION_FAILED]
    finally:
        server.close()
        network.stop()
