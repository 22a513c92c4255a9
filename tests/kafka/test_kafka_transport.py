"""The ``kafka`` transport against one real Kafka 3.9.1 broker (ZooKeeper mode): kctl's controller
channel connects to the broker's listener and sends LeaderAndIsr and UpdateMetadata in Kafka's
protocol; the broker acts on them (it creates the partition's log and says so in its
state-change.log) and its answers come back as kctl's messages, errors included."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import kazoo.client
import pytest

from kctl.errors import Errors
from kctl.messages import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kctl.model import BrokerInfo, EndPoint, TopicPartition
from kctl.plugins import get_plugin_host
from kctl.testing.kafka import KafkaCluster, KafkaInstallation
from kctl.testing.zookeeper import ZooKeeperEnsemble

CONTROLLER_ID = 1000
TOPIC, TOPIC_ID = "kctl-wire", "Xw8HP7v3S2mJq0Bw5c1Tgg"
ANSWER_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def one_broker(zookeeper_server: ZooKeeperEnsemble, kafka_installation: KafkaInstallation) -> Iterator[KafkaCluster]:
    with KafkaCluster(zookeeper_server.hosts, 1, installation=kafka_installation) as cluster:
        yield cluster


def broker_epoch(cluster: KafkaCluster, broker_id: int) -> int:
    """The broker's epoch: the czxid of its registration znode."""
    zk = kazoo.client.KazooClient(hosts=cluster.zk, timeout=10.0)
    zk.start(timeout=30)
    try:
        return int(zk.get(f"/brokers/ids/{broker_id}")[1].czxid)
    finally:
        zk.stop()
        zk.close()


def send(cluster: KafkaCluster, request: Any) -> Any:
    transport = get_plugin_host().transports().get("kafka").factory(listener="PLAINTEXT")
    answers: queue.Queue[Any] = queue.Queue()
    try:
        channel = transport.controller_channel(CONTROLLER_ID)
        broker = cluster.brokers[1]
        port = int(broker.config["listeners"].rsplit(":", 1)[1])
        channel.add_broker(BrokerInfo(1, (EndPoint("127.0.0.1", port),)))
        channel.send_request(1, request, answers.put)
        return answers.get(timeout=ANSWER_TIMEOUT)
    finally:
        transport.close()


def leader_and_isr(cluster: KafkaCluster, controller_epoch: int) -> LeaderAndIsrRequest:
    state = LeaderAndIsrPartitionState(TOPIC, 0, controller_epoch, 1, 0, (1,), 0, (1,), (), (), True)
    return LeaderAndIsrRequest(7, CONTROLLER_ID, controller_epoch, broker_epoch(cluster, 1), (state,),
                               {TOPIC: TOPIC_ID}, (BrokerInfo(1, (EndPoint("127.0.0.1", 0),)),))


def test_a_real_broker_takes_leadership_from_kctl(one_broker: KafkaCluster) -> None:
    response = send(one_broker, leader_and_isr(one_broker, controller_epoch=50))
    assert response == LeaderAndIsrResponse(Errors.NONE, {TopicPartition(TOPIC, 0): Errors.NONE})
    broker = one_broker.brokers[1]
    assert (broker.directory / "data" / f"{TOPIC}-0").is_dir()
    assert f"from controller {CONTROLLER_ID} " in (broker.logs_dir / "state-change.log").read_text()

    state = UpdateMetadataPartitionState(TOPIC, 0, 50, 1, 0, (1,), 0, (1,), ())
    port = int(broker.config["listeners"].rsplit(":", 1)[1])
    update = UpdateMetadataRequest(8, CONTROLLER_ID, 50, broker_epoch(one_broker, 1), (state,),
                                   (BrokerInfo(1, (EndPoint("127.0.0.1", port),)),), {TOPIC: TOPIC_ID})
    assert send(one_broker, update) == UpdateMetadataResponse(Errors.NONE)


def test_a_real_broker_refuses_an_older_controller(one_broker: KafkaCluster) -> None:
    send(one_broker, leader_and_isr(one_broker, controller_epoch=60))
    response = send(one_broker, leader_and_isr(one_broker, controller_epoch=59))
    assert response.error == Errors.STALE_CONTROLLER_EPOCH
