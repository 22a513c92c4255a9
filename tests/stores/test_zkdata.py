"""The znode codecs: Kafka's bytes exactly (every exact string of reference §7), every version the
reference lists decoded, and undecodable data reported with its path and field."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl._engine import decode_topic_znode, encode_partition_states
from kctl.errors import CorruptDataError
from kctl.model import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.stores import paths, zkdata
from kctl.stores.base import TopicAssignment
from kctl.stores.zkdata import (
    DOCUMENT,
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    FeatureZNode,
    FinalizedFeatures,
    IsrChangeNotificationSequenceZNode,
    LogDirEventNotificationSequenceZNode,
    PreferredReplicaElectionZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicZNode,
)

FOO0 = TopicPartition("foo", 0)
STATE = "/brokers/topics/t/partitions/0/state"

# --- Kafka's exact bytes (reference §7) --------------------------------------------------------------

ENCODED: dict[str, tuple[Callable[[], bytes], bytes]] = {
    "controller": (
        lambda: ControllerZNode.encode(1, timestamp_ms=1600000000000),
        b'{"version":2,"brokerid":1,"timestamp":"1600000000000","kraftControllerEpoch":-1}',
    ),
    "controller_epoch": (lambda: ControllerEpochZNode.encode(1), b"1"),
    "broker_v5": (
        lambda: BrokerIdZNode.encode(
            BrokerInfo(1, (EndPoint("broker1", 9092),), rack="rack-a"), timestamp_ms=1600000000000
        ),
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://broker1:9092"],"jmx_port":-1,"port":9092,"host":"broker1",'
        b'"version":5,"timestamp":"1600000000000","rack":"rack-a"}',
    ),
    "topic_v3": (
        lambda: TopicZNode.encode(
            TopicAssignment({0: ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))}, "jp0oK1lQRSe1BV8vLzT0zg")
        ),
        b'{"version":3,"topic_id":"jp0oK1lQRSe1BV8vLzT0zg","partitions":{"0":[4,5,6,1,2,3]},'
        b'"adding_replicas":{"0":[4,5,6]},"removing_replicas":{"0":[1,2,3]}}',
    ),
    "partition_state": (
        lambda: TopicPartitionStateZNode.encode(LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2, 3)), 1)),
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}',
    ),
    "partition_state_recovering": (
        lambda: TopicPartitionStateZNode.encode(
            LeaderIsrAndControllerEpoch(
                LeaderAndIsr(1, (1,), 3, leader_recovery_state=LeaderRecoveryState.RECOVERING), 2
            )
        ),
        b'{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":3,"isr":[1],"leader_recovery_state":1}',
    ),
    "reassign_partitions": (
        lambda: ReassignPartitionsZNode.encode({FOO0: [1, 2]}),
        b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}',
    ),
    "preferred_replica_election": (
        lambda: PreferredReplicaElectionZNode.encode([FOO0, FOO0]),
        b'{"version":1,"partitions":[{"topic":"foo","partition":0}]}',
    ),
    "isr_change_notification": (
        lambda: IsrChangeNotificationSequenceZNode.encode([TopicPartition("topic-a", 0), TopicPartition("topic-b", 0)]),
        b'{"version":1,"partitions":[{"topic":"topic-a","partition":0},{"topic":"topic-b","partition":0}]}',
    ),
    "log_dir_event_notification": (
        lambda: LogDirEventNotificationSequenceZNode.encode(3),
        b'{"version":1,"broker":3,"event":1}',
    ),
    "topic_config": (
        lambda: ConfigEntityZNode.encode({"unclean.leader.election.enable": "true", "min.insync.replicas": "2"}),
        b'{"version":1,"config":{"unclean.leader.election.enable":"true","min.insync.replicas":"2"}}',
    ),
    "config_change_notification": (
        lambda: ConfigEntityChangeNotificationSequenceZNode.encode("topics/orders"),
        b'{"version":2,"entity_path":"topics/orders"}',
    ),
    "cluster_id": (
        lambda: ClusterIdZNode.encode("AAAAAAAAAAAAAAAAAAAAAA"),
        b'{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAA"}',
    ),
    "feature_v2": (  # as Kafka 3.9.1 writes it at IBP 3.9-IV0 (read back from a real cluster)
        lambda: FeatureZNode.encode(FinalizedFeatures(2, 1, {})),
        b'{"features":{},"version":2,"status":1}',
    ),
    "feature_v1": (
        lambda: FeatureZNode.encode(FinalizedFeatures(1, 0, {"f": 3})),
        b'{"features":{"f":{"max_version_level":3,"min_version_level":3}},"version":1,"status":0}',
    ),
    "latest_producer_id_block": (
        lambda: ProducerIdBlockZNode.encode(ProducerIdBlock(0, 0, 999)),
        b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}',
    ),
}


@pytest.mark.parametrize("encode, expected", ENCODED.values(), ids=ENCODED.keys())
def test_encodes_kafkas_bytes(encode: Callable[[], bytes], expected: bytes) -> None:
    assert encode() == expected


DECODED: dict[str, tuple[Callable[[bytes], object], bytes, object]] = {
    "controller_v1": (
        ControllerZNode.decode,
        b'{"version":1,"brokerid":1,"timestamp":"1600000000000"}',
        1,
    ),
    "controller_v2": (
        ControllerZNode.decode,
        b'{"version":2,"brokerid":1,"timestamp":"1600000000000","kraftControllerEpoch":-1}',
        1,
    ),
    "controller_epoch": (ControllerEpochZNode.decode, b"1", 1),
    "broker_v5": (
        lambda data: BrokerIdZNode.decode(data, "/brokers/ids/1", 1),
        ENCODED["broker_v5"][1],
        BrokerInfo(1, (EndPoint("broker1", 9092),), rack="rack-a"),
    ),
    "broker_v4_listeners_and_null_rack": (
        lambda data: BrokerIdZNode.decode(data, "/brokers/ids/2", 2),
        b'{"listener_security_protocol_map":{"CLIENT":"SASL_SSL","REPLICATION":"PLAINTEXT"},'
        b'"endpoints":["CLIENT://[::1]:9093","REPLICATION://b2:9094"],"jmx_port":9999,"host":"b2",'
        b'"timestamp":"1","port":9094,"version":4,"rack":null}',
        BrokerInfo(
            2,
            (EndPoint("::1", 9093, "CLIENT", "SASL_SSL"), EndPoint("b2", 9094, "REPLICATION", "PLAINTEXT")),
            jmx_port=9999,
        ),
    ),
    "broker_v2_without_map": (
        lambda data: BrokerIdZNode.decode(data, "/brokers/ids/3", 3),
        b'{"jmx_port":-1,"timestamp":"1","endpoints":["SSL://b3:9093"],"host":null,"version":2,"port":-1}',
        BrokerInfo(3, (EndPoint("b3", 9093, "SSL", "SSL"),)),
    ),
    "broker_v1": (
        lambda data: BrokerIdZNode.decode(data, "/brokers/ids/4", 4),
        b'{"jmx_port":-1,"timestamp":"1","host":"b4","version":1,"port":9092}',
        BrokerInfo(4, (EndPoint("b4", 9092),)),
    ),
    "broker_v5_features": (
        lambda data: BrokerIdZNode.decode(data, "/brokers/ids/5", 5),
        b'{"features":{"metadata.version":{"min_version":1,"max_version":7}},"endpoints":["PLAINTEXT://b5:1"],'
        b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"version":5,"host":"b5","port":1}',
        BrokerInfo(5, (EndPoint("b5", 1),), features=(("metadata.version", (1, 7)),)),
    ),
    "topic_v1": (
        lambda data: TopicZNode.decode(data, "/brokers/topics/t"),
        b'{"version":1,"partitions":{"0":[1,2]}}',
        TopicAssignment({0: ReplicaAssignment((1, 2))}),
    ),
    "topic_v2": (
        lambda data: TopicZNode.decode(data, "/brokers/topics/t"),
        b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1]},"adding_replicas":{},"removing_replicas":{}}',
        TopicAssignment({0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1))}),
    ),
    "topic_v3": (
        lambda data: TopicZNode.decode(data, "/brokers/topics/t"),
        ENCODED["topic_v3"][1],
        TopicAssignment({0: ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))}, "jp0oK1lQRSe1BV8vLzT0zg"),
    ),
    "partition_state": (
        lambda data: TopicPartitionStateZNode.decode(data, STATE, 4),
        ENCODED["partition_state"][1],
        LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2, 3), 0, partition_epoch=4), 1),
    ),
    "partition_state_recovering": (
        lambda data: TopicPartitionStateZNode.decode(data, STATE, 0),
        ENCODED["partition_state_recovering"][1],
        LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1,), 3, leader_recovery_state=LeaderRecoveryState.RECOVERING), 2),
    ),
    "reassign_partitions": (ReassignPartitionsZNode.decode, ENCODED["reassign_partitions"][1], {FOO0: [1, 2]}),
    "preferred_replica_election": (
        PreferredReplicaElectionZNode.decode,
        ENCODED["preferred_replica_election"][1],
        {FOO0},
    ),
    "isr_change_notification_keeps_duplicates": (
        lambda data: IsrChangeNotificationSequenceZNode.decode(data, "/isr_change_notification/isr_change_0"),
        b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":1},'
        b'{"topic":"a","partition":0}]}',
        [TopicPartition("a", 0), TopicPartition("b", 1), TopicPartition("a", 0)],
    ),
    "log_dir_event_notification": (
        lambda data: LogDirEventNotificationSequenceZNode.decode(data, "/log_dir_event_notification/x"),
        ENCODED["log_dir_event_notification"][1],
        3,
    ),
    "topic_config": (
        lambda data: ConfigEntityZNode.decode(data, "/config/topics/t"),
        ENCODED["topic_config"][1],
        {"unclean.leader.election.enable": "true", "min.insync.replicas": "2"},
    ),
    "config_change_notification": (
        lambda data: ConfigEntityChangeNotificationSequenceZNode.decode(data, "/config/changes/config_change_0"),
        ENCODED["config_change_notification"][1],
        "topics/orders",
    ),
    "cluster_id": (ClusterIdZNode.decode, ENCODED["cluster_id"][1], "AAAAAAAAAAAAAAAAAAAAAA"),
    "feature_v1": (
        FeatureZNode.decode,
        b'{"version":1,"status":1,"features":{"metadata.version":{"min_version_level":1,"max_version_level":3}}}',
        FinalizedFeatures(1, 1, {"metadata.version": 3}),
    ),
    "feature_v2": (
        FeatureZNode.decode,
        b'{"features":{"metadata.version":{"max_version_level":21}},"version":2,"status":1}',
        FinalizedFeatures(2, 1, {"metadata.version": 21}),
    ),
    "controller_kraft": (  # a KRaft controller's registration during a migration: its id, as Kafka reads it
        ControllerZNode.decode,
        b'{"version":2,"brokerid":3000,"timestamp":"1600000000000","kraftControllerEpoch":7}',
        3000,
    ),
    "latest_producer_id_block": (
        ProducerIdBlockZNode.decode,
        ENCODED["latest_producer_id_block"][1],
        ProducerIdBlock(0, 0, 999),
    ),
}


@pytest.mark.parametrize("decode, data, expected", DECODED.values(), ids=DECODED.keys())
def test_decodes_every_listed_version(decode: Callable[[bytes], object], data: bytes, expected: object) -> None:
    assert decode(data) == expected


def test_broker_registration_details() -> None:
    """host/port come from the PLAINTEXT endpoint (null/-1 without one), IPv6 hosts are bracketed."""
    info = BrokerInfo(
        7,
        (EndPoint("::1", 9093, "CLIENT", "SSL"), EndPoint("10.0.0.7", 9092, "INTERNAL", "PLAINTEXT")),
        features=(("metadata.version", (1, 7)),),
        jmx_port=9999,
    )
    document = json.loads(BrokerIdZNode.encode(info, timestamp_ms=5))
    assert document == {
        "features": {"metadata.version": {"min_version": 1, "max_version": 7}},
        "listener_security_protocol_map": {"CLIENT": "SSL", "INTERNAL": "PLAINTEXT"},
        "endpoints": ["CLIENT://[::1]:9093", "INTERNAL://10.0.0.7:9092"],
        "jmx_port": 9999,
        "port": 9092,
        "host": "10.0.0.7",
        "version": 5,
        "timestamp": "5",
    }
    assert BrokerIdZNode.decode(BrokerIdZNode.encode(info), "/brokers/ids/7", 7) == info
    no_plaintext = json.loads(BrokerIdZNode.encode(BrokerInfo(8, (EndPoint("h", 1, "S", "SSL"),))))
    assert (no_plaintext["host"], no_plaintext["port"]) == (None, -1) and "rack" not in no_plaintext


def test_timestamps_default_to_now() -> None:
    stamp = int(json.loads(ControllerZNode.encode(1))["timestamp"])
    assert abs(stamp - int(json.loads(BrokerIdZNode.encode(BrokerInfo(1)))["timestamp"])) < 60_000
    assert stamp > 1_600_000_000_000


def test_topic_assignment_lists_only_moving_partitions() -> None:
    moving = ReplicaAssignment((3, 1, 2), (3,), (2,))
    encoded = json.loads(TopicZNode.encode(TopicAssignment({1: ReplicaAssignment((1, 2)), 0: moving})))
    assert encoded == {
        "version": 3,
        "partitions": {"0": [3, 1, 2], "1": [1, 2]},
        "adding_replicas": {"0": [3]},
        "removing_replicas": {"0": [2]},
    }
    assert list(encoded["partitions"]) == ["0", "1"]


def test_paths_are_kafkas() -> None:
    tp = TopicPartition("t", 3)
    assert ControllerZNode.path() == "/controller"
    assert ControllerEpochZNode.path() == "/controller_epoch"
    assert BrokerIdZNode.path(2) == "/brokers/ids/2"
    assert TopicZNode.path("t") == "/brokers/topics/t"
    assert TopicPartitionsZNode.path("t") == "/brokers/topics/t/partitions"
    assert TopicPartitionZNode.path(tp) == "/brokers/topics/t/partitions/3"
    assert TopicPartitionStateZNode.path(tp) == "/brokers/topics/t/partitions/3/state"
    assert ReassignPartitionsZNode.path() == "/admin/reassign_partitions"
    assert PreferredReplicaElectionZNode.path() == "/admin/preferred_replica_election"
    assert DeleteTopicsTopicZNode.path("t") == "/admin/delete_topics/t"
    assert IsrChangeNotificationSequenceZNode.path("isr_change_0000000007") == (
        "/isr_change_notification/isr_change_0000000007"
    )
    assert IsrChangeNotificationSequenceZNode.PREFIX == "isr_change_"
    assert LogDirEventNotificationSequenceZNode.path("x") == "/log_dir_event_notification/x"
    assert LogDirEventNotificationSequenceZNode.PREFIX == "log_dir_event_"
    assert ConfigEntityZNode.path("t") == "/config/topics/t"
    assert ConfigEntityChangeNotificationSequenceZNode.path("config_change_1") == "/config/changes/config_change_1"
    assert ConfigEntityChangeNotificationSequenceZNode.PREFIX == "config_change_"
    assert ClusterIdZNode.path() == "/cluster/id"
    assert FeatureZNode.path() == "/feature"
    assert ProducerIdBlockZNode.path() == paths.LATEST_PRODUCER_ID_BLOCK == "/latest_producer_id_block"


# --- Round trips -------------------------------------------------------------------------------------

replica_lists = st.lists(st.integers(0, 2**31 - 1), max_size=6).map(tuple)


@given(
    leader=st.integers(-1, 2**31 - 1),
    isr=replica_lists,
    leader_epoch=st.integers(0, 2**31 - 1),
    controller_epoch=st.integers(0, 2**31 - 1),
    version=st.integers(0, 2**31 - 1),
    recovery=st.sampled_from(LeaderRecoveryState),
)
def test_partition_states_round_trip(
    leader: int,
    isr: tuple[int, ...],
    leader_epoch: int,
    controller_epoch: int,
    version: int,
    recovery: LeaderRecoveryState,
) -> None:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, isr, leader_epoch, version, recovery), controller_epoch)
    encoded = TopicPartitionStateZNode.encode(state)
    assert json.loads(encoded)["isr"] == list(isr)
    assert TopicPartitionStateZNode.decode(encoded, STATE, version) == state


@given(
    st.dictionaries(st.integers(0, 10_000), st.tuples(replica_lists, replica_lists, replica_lists), max_size=8),
    st.none() | st.text("ABCabc0123-_", min_size=22, max_size=22),
)
def test_topic_assignments_round_trip(
    partitions: dict[int, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]], topic_id: str | None
) -> None:
    assignment = TopicAssignment({p: ReplicaAssignment(*lists) for p, lists in partitions.items()}, topic_id)
    assert TopicZNode.decode(TopicZNode.encode(assignment), "/brokers/topics/t") == assignment


def test_topic_assignments_share_equal_replica_lists() -> None:
    """A failover decodes every topic of the cluster: partitions with the same replicas (a cluster
    of 100 brokers has a few thousand distinct lists) hold one object, in partition order."""
    a = TopicZNode.decode(b'{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]}}', "/brokers/topics/a")
    b = TopicZNode.decode(b'{"version":2,"partitions":{"1":[1,2,3],"0":[2,3,1]},"adding_replicas":{}}',
                          "/brokers/topics/b")
    assert list(b.partitions) == [0, 1]
    assert b.partitions[1] is a.partitions[0] and b.partitions[0] is a.partitions[1]
    assert a.partitions[0] == ReplicaAssignment((1, 2, 3))


@given(st.dictionaries(st.text(min_size=1), st.text()))
def test_configs_round_trip(config: dict[str, str]) -> None:
    assert ConfigEntityZNode.decode(ConfigEntityZNode.encode(config), "/config/topics/t") == config


# --- Undecodable data names the path and the field -----------------------------------------------------

CORRUPT: dict[str, tuple[Callable[[bytes | None, str], object], bytes | None, str]] = {
    "no_data": (lambda d, p: TopicPartitionStateZNode.decode(d, p, 0), None, DOCUMENT),
    "not_json": (lambda d, p: TopicPartitionStateZNode.decode(d, p, 0), b"\x00garbage", DOCUMENT),
    "not_an_object": (lambda d, p: TopicPartitionStateZNode.decode(d, p, 0), b"[1,2]", DOCUMENT),
    "state_leader_text": (
        lambda d, p: TopicPartitionStateZNode.decode(d, p, 0),
        b'{"controller_epoch":1,"leader":"1","version":1,"leader_epoch":0,"isr":[1]}',
        "leader",
    ),
    "state_leader_bool": (
        lambda d, p: TopicPartitionStateZNode.decode(d, p, 0),
        b'{"controller_epoch":1,"leader":true,"version":1,"leader_epoch":0,"isr":[1]}',
        "leader",
    ),
    "state_isr_member": (
        lambda d, p: TopicPartitionStateZNode.decode(d, p, 0),
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,"2"]}',
        "isr[1]",
    ),
    "state_missing_epoch": (
        lambda d, p: TopicPartitionStateZNode.decode(d, p, 0),
        b'{"controller_epoch":1,"leader":1,"version":1,"isr":[1]}',
        "leader_epoch",
    ),
    "state_recovery": (
        lambda d, p: TopicPartitionStateZNode.decode(d, p, 0),
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1],"leader_recovery_state":2}',
        "leader_recovery_state",
    ),
    "state_float_epoch": (
        lambda d, p: TopicPartitionStateZNode.decode(d, p, 0),
        b'{"controller_epoch":1.0,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}',
        "controller_epoch",
    ),
    "topic_partition_key": (TopicZNode.decode, b'{"version":3,"partitions":{"x":[1]}}', "partitions.x"),
    "topic_replicas": (TopicZNode.decode, b'{"version":3,"partitions":{"0":1}}', "partitions.0"),
    "topic_adding": (
        TopicZNode.decode,
        b'{"version":3,"partitions":{"0":[1]},"adding_replicas":{"0":[2,"x"]}}',
        "adding_replicas.0[1]",
    ),
    "topic_missing_partitions": (TopicZNode.decode, b'{"version":3}', "partitions"),
    "topic_id": (TopicZNode.decode, b'{"version":3,"topic_id":7,"partitions":{}}', "topic_id"),
    "topic_version": (TopicZNode.decode, b'{"version":"3","partitions":{}}', "version"),
    "broker_endpoint": (
        lambda d, p: BrokerIdZNode.decode(d, p, 1),
        b'{"version":5,"endpoints":["broker1:9092"]}',
        "endpoints[0]",
    ),
    "broker_v1_host": (lambda d, p: BrokerIdZNode.decode(d, p, 1), b'{"version":1,"port":9092}', "host"),
    "broker_rack": (
        lambda d, p: BrokerIdZNode.decode(d, p, 1),
        b'{"version":4,"endpoints":[],"rack":3}',
        "rack",
    ),
    "broker_protocol": (
        lambda d, p: BrokerIdZNode.decode(d, p, 1),
        b'{"version":4,"endpoints":["A://h:1"],"listener_security_protocol_map":{"A":1}}',
        "listener_security_protocol_map.A",
    ),
    "broker_feature": (
        lambda d, p: BrokerIdZNode.decode(d, p, 1),
        b'{"version":5,"endpoints":[],"features":{"f":{"min_version":1}}}',
        "features.f.max_version",
    ),
    "controller_id": (lambda d, p: ControllerZNode.decode(d, p), b'{"version":1,"brokerid":"1"}', "brokerid"),
    "controller_epoch": (lambda d, p: ControllerEpochZNode.decode(d, p), b"one", DOCUMENT),
    "reassign_replicas": (
        lambda d, p: ReassignPartitionsZNode.decode(d, p),
        b'{"version":1,"partitions":[{"topic":"foo","partition":0}]}',
        "partitions[0].replicas",
    ),
    "reassign_topic": (
        lambda d, p: ReassignPartitionsZNode.decode(d, p),
        b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]},{"topic":1}]}',
        "partitions[1].topic",
    ),
    "preferred_partition": (
        lambda d, p: PreferredReplicaElectionZNode.decode(d, p),
        b'{"version":1,"partitions":[{"topic":"foo","partition":"0"}]}',
        "partitions[0].partition",
    ),
    "isr_change_entry": (
        IsrChangeNotificationSequenceZNode.decode,
        b'{"version":1,"partitions":["t-0"]}',
        "partitions[0]",
    ),
    "log_dir_broker": (LogDirEventNotificationSequenceZNode.decode, b'{"version":1,"event":1}', "broker"),
    "config_value": (ConfigEntityZNode.decode, b'{"version":1,"config":{"retention.ms":1000}}', "config.retention.ms"),
    "config_change_path": (ConfigEntityChangeNotificationSequenceZNode.decode, b'{"version":2}', "entity_path"),
    "cluster_id": (lambda d, p: ClusterIdZNode.decode(d, p), b'{"version":"1","id":null}', "id"),
    "feature_status": (lambda d, p: FeatureZNode.decode(d, p), b'{"version":1,"status":5,"features":{}}', "status"),
    "feature_level": (
        lambda d, p: FeatureZNode.decode(d, p),
        b'{"version":1,"status":1,"features":{"f":{"min_version_level":1,"max_version_level":"2"}}}',
        "features.f.max_version_level",
    ),
    "feature_version": (lambda d, p: FeatureZNode.decode(d, p), b'{"version":3,"status":1,"features":{}}', "version"),
    "feature_v1_minimum": (
        lambda d, p: FeatureZNode.decode(d, p),
        b'{"version":1,"status":1,"features":{"f":{"max_version_level":2}}}',
        "features.f.min_version_level",
    ),
    "feature_levels": (
        lambda d, p: FeatureZNode.decode(d, p),
        b'{"version":1,"status":1,"features":{"f":{"min_version_level":3,"max_version_level":2}}}',
        "features.f.min_version_level",
    ),
    "feature_v2_level": (
        lambda d, p: FeatureZNode.decode(d, p),
        b'{"version":2,"status":1,"features":{"f":{"max_version_level":0}}}',
        "features.f.max_version_level",
    ),
    "controller_kraft_epoch": (
        lambda d, p: ControllerZNode.decode(d, p),
        b'{"version":2,"brokerid":1,"timestamp":"0","kraftControllerEpoch":"7"}',
        "kraftControllerEpoch",
    ),
    "producer_id_block_bound": (
        lambda d, p: ProducerIdBlockZNode.decode(d, p),
        b'{"version":1,"broker":0,"block_start":"x","block_end":"999"}',
        "block_start",
    ),
}

TOPIC_PARTITIONS_TO_CHECK_FIELD_BY_FIELD = {
    "key_with_comma": (b'{"0":[1],"1,2":[1]}', "partitions.1,2"),
    "key_leading_zero": (b'{"01":[1]}', "partitions.01"),
    "key_over_int32": (b'{"0":[1],"2147483648":[1]}', "partitions.2147483648"),
    "replica_boolean": (b'{"0":[1],"1":[true]}', "partitions.1[0]"),
    "replica_float": (b'{"0":[1,2.0]}', "partitions.0[1]"),
    "replica_over_int32": (b'{"0":[2147483648]}', "partitions.0[0]"),
    "replica_under_int32": (b'{"0":[-2147483649]}', "partitions.0[0]"),
    "replica_list": (b'{"0":[[1]]}', "partitions.0[0]"),
    "replicas_null": (b'{"0":[1],"1":null}', "partitions.1"),
    "adding_not_a_map": (b'{"0":[1]},"adding_replicas":[]', "adding_replicas"),
}
"""Topic documents the bulk check of the usual one (``zkdata._plain_partitions``) must refuse, so
that the field-by-field decoder names the problem: the ``partitions`` map (and what follows)."""
CORRUPT.update(
    (f"topic_{name}", (TopicZNode.decode, b'{"version":3,"partitions":' + partitions + b"}", field))
    for name, (partitions, field) in TOPIC_PARTITIONS_TO_CHECK_FIELD_BY_FIELD.items()
)


@pytest.mark.parametrize("decode, data, field", CORRUPT.values(), ids=CORRUPT.keys())
def test_undecodable_data_names_the_path_and_the_field(
    decode: Callable[[bytes | None, str], object], data: bytes | None, field: str
) -> None:
    path = "/some/znode"
    with pytest.raises(CorruptDataError) as raised:
        decode(data, path)
    assert raised.value.path == path
    assert str(raised.value).startswith(f"{path}: field '{field}' ")


@given(
    leader=st.integers(-1, 2**31 - 1),
    isr=st.lists(st.integers(0, 2**31 - 1), max_size=6),
    leader_epoch=st.integers(0, 2**31 - 1),
    controller_epoch=st.integers(0, 2**31 - 1),
    recovery=st.sampled_from(list(LeaderRecoveryState)),
)
def test_the_native_bulk_encoder_writes_the_same_bytes(
    leader: int, isr: list[int], leader_epoch: int, controller_epoch: int, recovery: LeaderRecoveryState
) -> None:
    """The ZooKeeper store's bulk writes use the engine's encoder: byte for byte the single one."""
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, tuple(isr), leader_epoch, 0, recovery), controller_epoch)
    native = encode_partition_states(
        [(leader, isr, leader_epoch, recovery is LeaderRecoveryState.RECOVERING, controller_epoch)] * 2
    )
    assert native == [TopicPartitionStateZNode.encode(state)] * 2


_TOPIC_DOCUMENTS = [
    b'{"version":3,"topic_id":"AbC","partitions":{"0":[1,2],"1":[2,3],"2":[1,2],"9":[]},'
    b'"adding_replicas":{},"removing_replicas":{}}',
    b' {"partitions" : {"7" : [ -1 , 2147483647 ] } , "version":1}\n',
    b'{"version":3,"partitions":{"1":[1],"0":[2]}}',  # out of order: Python's decoder
    b'{"version":3,"partitions":{"0":[1],"0":[2]}}',
    b'{"version":3,"partitions":{"0":[1]},"adding_replicas":{"0":[3]},"removing_replicas":{}}',
    b'{"version":3,"topic_id":null,"partitions":{"0":[1]}}',
    b'{"version":3,"topic_id":"a\\u0041","partitions":{"0":[1]},"extra":[1]}',
    b'{"version":3,"partitions":{}}',
]


@pytest.mark.parametrize("data", _TOPIC_DOCUMENTS)
def test_the_engines_topic_decoder_decodes_as_python_does(data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """``TopicZNode.decode`` hands the usual topic document to the engine's parser and decodes the
    rest itself: either way the same assignment, partition order and shared replica lists."""
    native, parsed = TopicZNode.decode(data, "/brokers/topics/t"), decode_topic_znode(data) is not None
    monkeypatch.setattr(zkdata, "decode_topic_znode", lambda data: None)
    python = TopicZNode.decode(data, "/brokers/topics/t")
    assert native == python and list(native.partitions) == list(python.partitions)
    assert parsed == (data in _TOPIC_DOCUMENTS[:2])
    if parsed:  # the usual document's replica lists are shared either way
        assert all(a is b for a, b in zip(native.partitions.values(), python.partitions.values()))


@given(
    st.dictionaries(st.integers(0, 2**31 - 1), replica_lists, min_size=1, max_size=8),
    st.none() | st.text("ABCabc0123-_", min_size=1, max_size=22),
    st.integers(-(2**31), 2**31 - 1),
)
def test_the_engine_parses_the_usual_topic_documents(
    partitions: dict[int, tuple[int, ...]], topic_id: str | None, version: int
) -> None:
    document: dict[str, object] = {"version": version, "partitions": {str(p): list(r) for p, r in sorted(partitions.items())}}
    if topic_id is not None:
        document["topic_id"] = topic_id
    data = json.dumps(document).encode()
    parsed = decode_topic_znode(data)
    assert parsed is not None
    _, found_id, ids, indexes, lists = parsed
    assert (found_id, ids) == (topic_id, sorted(partitions))
    assert [tuple(lists[i]) for i in indexes] == [partitions[p] for p in ids]
    assert TopicZNode.decode(data, "/brokers/topics/t") == TopicAssignment(
        {p: ReplicaAssignment(r) for p, r in partitions.items()}, topic_id)
