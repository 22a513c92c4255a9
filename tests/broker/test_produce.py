"""Produce requests to a broker process's leaders: the client's view of the simulated data plane
that the fault suite uses to check I8 from outside."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from kctl.broker import BrokerAgent
from kctl.broker.fetcher import PRODUCE_API, NetworkReplicaManager, ProduceRequest, ProduceResponse
from kctl.errors import Errors
from kctl.model import TopicPartition
from kctl.net import EventLoopThread, FrameClient, FrameServer, Header, Request
from kctl.scheduler import SimulatedScheduler
from kctl.security.authorizer import ClusterAuthorizer
from kctl.security.config import SecurityConfig
from kctl.security.principal import KafkaPrincipal, Peer
from kctl.stores import MemoryStore, MemoryTree, paths
from kctl.testing.ports import LOOPBACK, free_ports
from kctl.transports.inprocess import InProcessTransport

from tests.support.broker_harness import lai_state, leader_and_isr

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def broker() -> Iterator[tuple[BrokerAgent, FrameClient, tuple[str, int]]]:
    network = EventLoopThread("test-produce")
    server = FrameServer(network, (LOOPBACK, free_ports(1)[0]))
    client = FrameClient(network)
    manager = NetworkReplicaManager(client, lambda broker_id: None)
    manager.serve(server)
    scheduler = SimulatedScheduler(0)
    tree = MemoryTree()
    tree.set_raw(paths.CONTROLLER_EPOCH, 1)  # the epoch of the requests below
    agent = BrokerAgent(1, MemoryStore(tree), InProcessTransport(scheduler), scheduler, replica_manager=manager)
    agent.startup()
    try:
        yield agent, client, server.start()
    finally:
        client.close()
        server.close()
        network.stop()


def produce(client: FrameClient, address: tuple[str, int], tp: TopicPartition, records: int) -> ProduceResponse:
    answer = client.network.run(client.call(address, Request(PRODUCE_API, Header(), ProduceRequest(tp, records)), 10))
    assert isinstance(answer, ProduceResponse)
    return answer


def test_a_leader_appends_and_answers_with_its_log(broker: tuple[BrokerAgent, FrameClient, tuple[str, int]]) -> None:
    agent, client, address = broker
    agent.handle_request(leader_and_isr(lai_state(T0, 1, [1], leader_epoch=3)))
    assert produce(client, address, T0, 5) == ProduceResponse(T0, Errors.NONE, 5, 5, ((3, 0),), 3)
    assert produce(client, address, T0, 0) == ProduceResponse(T0, Errors.NONE, 5, 5, ((3, 0),), 3)  # a read


def test_produce_is_refused_where_the_broker_does_not_lead(
    broker: tuple[BrokerAgent, FrameClient, tuple[str, int]]
) -> None:
    agent, client, address = broker
    agent.handle_request(leader_and_isr(lai_state(T0, 2, [2, 1], replicas=[2, 1])))
    for records in (1, 0):
        assert produce(client, address, T0, records) == ProduceResponse(T0, Errors.NOT_LEADER_OR_FOLLOWER)
    assert produce(client, address, T1, 1) == ProduceResponse(T1, Errors.UNKNOWN_TOPIC_OR_PARTITION)
    assert produce(client, address, T0, -1) == ProduceResponse(T0, Errors.INVALID_REQUEST)


def test_with_authorization_only_a_super_user_may_produce(
    broker: tuple[BrokerAgent, FrameClient, tuple[str, int]], caplog: pytest.LogCaptureFixture
) -> None:
    agent, client, address = broker
    agent.handle_request(leader_and_isr(lai_state(T0, 1, [1])))
    authorizer = ClusterAuthorizer(SecurityConfig.from_properties({
        "security.inter.broker.protocol": "SSL", "ssl.keystore.location": "k.pem", "ssl.truststore.location": "ca.pem",
        "ssl.client.auth": "required", "super.users": "User:controller-1", "kctl.authorization.enable": "true",
        "kctl.broker.principal": "User:broker-{id}",
    }))
    assert authorizer.authorize_client_request(Peer("10.0.0.1:1", KafkaPrincipal("User", "controller-1")), PRODUCE_API)
    agent.replica_manager._authorizer = authorizer  # type: ignore[attr-defined]  # as serve() takes a TLS listener's
    with caplog.at_level(logging.WARNING, "kctl.authorizer"):
        assert produce(client, address, T0, 1) == ProduceResponse(T0, Errors.TOPIC_AUTHORIZATION_FAILED)
    assert "Principal = User:ANONYMOUS is Denied" in caplog.text and "request = Produce" in caplog.text
    assert produce(client, address, T0, 0) == ProduceResponse(T0, Errors.TOPIC_AUTHORIZATION_FAILED)
