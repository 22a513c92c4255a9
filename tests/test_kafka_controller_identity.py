"""The controller's identity among real Kafka brokers (the ``kafka`` transport): a ZooKeeper-mode
broker finds its controller only among the live brokers of UpdateMetadata, so the active
controller registers a controller-only broker entry on the inter-broker listener, adds it to every
UpdateMetadata, and never counts it as a broker (no replica, no leadership, no requests); the
topic ids its requests carry resolve the brokers' AlterPartition v2+."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kctl.controller import KafkaController
from kctl.errors import Errors
from kctl.kafka import messages as km
from kctl.messages import LeaderAndIsrRequest, UpdateMetadataRequest
from kctl.model import BrokerInfo, EndPoint, LeaderAndIsr, TopicPartition
from kctl.scheduler import SimulatedScheduler
from kctl.stores.memory import MemoryStore
from kctl.tools.client import AdminClient
from kctl.transports.kafka import KafkaTransport

from tests.test_kafka_listener import Controller, ask

CONTROLLER_ID = 3000
BAR_ID = "AQIDBAUGBwgJCgsMDQ4PEA"


@pytest.fixture
def transport() -> Iterator[KafkaTransport]:
    transport = KafkaTransport(listener="INTERNAL", request_timeout=5.0, retry_backoff=1.0)
    try:
        yield transport
    finally:
        transport.close()


def alter_partition_v3(topic_id: str) -> dict[str, Any]:
    return {"BrokerId": 2, "BrokerEpoch": 77, "Topics": [{"TopicId": km.topic_id_bytes(topic_id), "Partitions": [
        {"PartitionIndex": 0, "LeaderEpoch": 3, "PartitionEpoch": 4, "NewIsrWithEpochs": [{"BrokerId": 2, "BrokerEpoch": 70}]}]}]}


def replicas(store: MemoryStore, topic: str) -> set[tuple[int, ...]]:
    return {tuple(a.replicas) for a in store.get_topic_assignments([topic]).values[topic].partitions.values()}


def test_alter_partition_resolves_the_topic_ids_the_controller_sent(transport: KafkaTransport) -> None:
    controller = Controller()
    transport.bind_controller(CONTROLLER_ID, controller)
    assert ask(transport, 56, 3, alter_partition_v3(BAR_ID))["Topics"][0]["Partitions"][0]["ErrorCode"] == km.UNKNOWN_TOPIC_ID
    # A LeaderAndIsr v5+ names its topics' ids (a zero id is no id); the broker it goes to needs no channel.
    channel = transport.controller_channel(CONTROLLER_ID)
    channel.send_request(2, LeaderAndIsrRequest(7, CONTROLLER_ID, 1, 70, (), {"bar": BAR_ID, "baz": km.ZERO_UUID}, ()), None)
    answer = ask(transport, 56, 3, alter_partition_v3(BAR_ID))
    assert answer["Topics"][0]["Partitions"][0]["ErrorCode"] == Errors.NONE.value
    assert [request.changes for request in controller.asked] == [{TopicPartition("bar", 0): LeaderAndIsr(2, (2,), 3, 4)}]
    assert "baz" not in transport.known_topic_ids()


def test_update_metadata_names_the_controller_on_the_inter_broker_listener(transport: KafkaTransport) -> None:
    request = UpdateMetadataRequest(8, CONTROLLER_ID, 1, 70, (), (BrokerInfo(2, (EndPoint("127.0.0.1", 9092, "INTERNAL"),)),), {})
    assert transport.with_controller_entry(CONTROLLER_ID, request) is request  # nothing to advertise before binding
    transport.bind_controller(CONTROLLER_ID, Controller())
    host, port = transport.listener_address or ("", 0)
    entry = transport.controller_registration(CONTROLLER_ID)
    assert entry is not None and entry.controller_only and entry.endpoints == (EndPoint(host, port, "INTERNAL"),)
    assert transport.with_controller_entry(CONTROLLER_ID, request).live_brokers == (*request.live_brokers, entry)


def test_the_active_controller_registers_an_entry_that_hosts_nothing(transport: KafkaTransport) -> None:
    scheduler = SimulatedScheduler()
    store = MemoryStore()
    broker = store.new_session()
    broker.register_broker(BrokerInfo(1, (EndPoint("127.0.0.1", 1, "INTERNAL"),)))
    controller = KafkaController(CONTROLLER_ID, store, transport, clock=scheduler)
    controller.startup()
    scheduler.advance(0.0)
    assert controller.is_active
    entry, _ = store.get_all_brokers()[CONTROLLER_ID]
    assert entry == transport.controller_registration(CONTROLLER_ID)
    assert controller.context.live_broker_ids == {1}

    created = controller.create_topics([{"name": "t", "partitions": 4, "replication_factor": 1}])
    scheduler.advance(0.0)
    assert created.result() == {"t": None}
    assert replicas(store, "t") == {(1,)}
    admin = AdminClient(broker)
    assert admin.live_brokers() == {1}
    admin.create_topic("u", 4, 1)
    assert replicas(store, "u") == {(1,)}

    # A new broker is one; the controller's own entry coming and going is never a broker change.
    broker.register_broker(BrokerInfo(2, (EndPoint("127.0.0.1", 1, "INTERNAL"),)))
    scheduler.advance(0.0)
    assert controller.context.live_broker_ids == {1, 2}

    controller.shutdown()
    assert set(broker.get_all_brokers()) == {1, 2}  # resigned: its entry is gone with its role
