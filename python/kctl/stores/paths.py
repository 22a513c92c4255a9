"""Kafka's znode paths (reference §7), shared by every store that keeps a znode tree."""

from __future__ import annotations

from kctl.model import TopicPartition

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CLUSTER_ID = "/cluster/id"
FEATURE = "/feature"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
BROKER_STATE = "/brokers/state"
"""Seed 004's parent of the per-broker state-change queues (the ``zkqueue`` transport)."""
CONTROLLER_STATE = "/controller_state"
"""kctl's parent of the per-controller queues (the ``zkqueue`` transport)."""

PERSISTENT_PATHS = (
    "/consumers",
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS,
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
)
"""Created (if absent) when a broker or controller starts, as Kafka's ``makeSurePersistentPathsExists``."""


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions"


def topic_partition(tp: TopicPartition) -> str:
    return f"{BROKER_TOPICS}/{tp.topic}/partitions/{tp.partition}"


def partition_state(tp: TopicPartition) -> str:
    return f"{BROKER_TOPICS}/{tp.topic}/partitions/{tp.partition}/state"


def topic_deletion(name: str) -> str:
    return f"{DELETE_TOPICS}/{name}"


def topic_config(name: str) -> str:
    return f"{CONFIG_TOPICS}/{name}"


def isr_change_notification(name: str) -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{name}"


def log_dir_event_notification(name: str) -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{name}"


def sequence_name(prefix: str, sequence: int) -> str:
    """ZooKeeper's persistent-sequential child name: the prefix and a 10-digit counter."""
    return f"{prefix}{sequence:010d}"
