"""Request sizes follow Kafka's message schemas: worked out by hand for small requests."""

from __future__ import annotations

from kctl.bench.request_bytes import request_size, uvarint_size
from kctl.model import BrokerInfo, EndPoint
from kctl.requests import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

BROKER = BrokerInfo(1, (EndPoint("b1", 9092),), rack="r1")


def lai_state(partition: int, topic: str = "t") -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(topic, partition, 1, 1, 0, (1, 2, 3), 0, (1, 2, 3), (), (), False)


def test_uvarint_sizes() -> None:
    assert [uvarint_size(v) for v in (0, 127, 128, 16383, 16384)] == [1, 1, 2, 2, 3]


def test_stop_replica_v3_by_hand() -> None:
    request = StopReplicaRequest(3, 1, 1, 5, False, (StopReplicaPartitionState("t", 0, 0, True),))
    frame, header = 4, 2 + 2 + 4 + (2 + 1) + 1  # size; api key, version, correlation id, client id "1", tags
    body = 4 + 4 + 8 + 1 + (2 + 1 + (4 + 4 + 1 + 1) + 1) + 1  # ids, epochs; one topic "t" with one partition; tags
    assert request_size(request) == frame + header + body == 48


def test_stop_replica_v0_lists_each_partition_with_its_topic() -> None:
    request = StopReplicaRequest(0, 1, 1, 5, True, (StopReplicaPartitionState("t", 0, -1, True),))
    header = 2 + 2 + 4 + (2 + 1)  # no tagged fields before the first flexible version
    body = 4 + 4 + 1 + 4 + (2 + 1 + 4)  # ids, delete flag, array of (topic, partition)
    assert request_size(request) == 4 + header + body


def test_leader_and_isr_v5_partition_and_topic_costs() -> None:
    one = LeaderAndIsrRequest(5, 1, 1, 5, (lai_state(0),), {"t": "x"}, (BROKER,))
    two = LeaderAndIsrRequest(5, 1, 1, 5, (lai_state(0), lai_state(1)), {"t": "x"}, (BROKER,))
    other_topic = LeaderAndIsrRequest(5, 1, 1, 5, (lai_state(0), lai_state(0, "u")), {"t": "x", "u": "y"}, (BROKER,))
    # index, controller epoch, leader, leader epoch; ISR and replicas (1 + 3 * 4 each); zkVersion;
    # empty adding and removing replicas; isNew; tagged fields
    partition = 4 * 4 + 13 + 4 + 13 + 1 + 1 + 1 + 1
    assert request_size(two) - request_size(one) == partition == 50
    assert request_size(other_topic) - request_size(one) == partition + (1 + 1) + 16 + 1 + 1  # name, id, count, tags


def test_update_metadata_v7_carries_endpoints_and_racks() -> None:
    state = UpdateMetadataPartitionState("t", 0, 1, 1, 0, (1,), 0, (1,), ())
    without_rack = BrokerInfo(1, (EndPoint("b1", 9092),))
    racked = UpdateMetadataRequest(7, 1, 1, 5, (state,), (BROKER,), {"t": "x"})
    unracked = UpdateMetadataRequest(7, 1, 1, 5, (state,), (without_rack,), {"t": "x"})
    assert request_size(racked) - request_size(unracked) == 2  # compact "r1" (3 bytes) instead of null (1)
    broker = 4 + (1 + (4 + 3 + 10 + 2 + 1)) + 3 + 1  # id; endpoint: port, "b1", "PLAINTEXT", protocol, tags; rack
    partition = 4 * 4 + 5 + 4 + 5 + 1 + 1  # ..., ISR [1], zkVersion, replicas [1], no offline replicas, tags
    topic = 2 + 16 + 1 + partition + 1
    assert request_size(racked) == 4 + (2 + 2 + 4 + 3 + 1) + (4 + 4 + 8 + 1 + topic + 1 + broker + 1)
