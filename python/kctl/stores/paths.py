"""Kafka's znode paths (reference §7), shared by every store that keeps a znode tree."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kctl.model import INT32_MAX, TopicPartition

logger = logging.getLogger(__name__)

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


def parse_id(name: str) -> int | None:
    """The broker or partition id a znode is named by (``/brokers/ids/<id>``,
    ``/brokers/topics/<t>/partitions/<p>``), or None when ``name`` is not one: Kafka's ``Int``,
    non-negative, in ASCII digits without sign or leading zeros (the only spelling :func:`broker`
    and :func:`topic_partition` produce, so the znode can be addressed again)."""
    if not (name.isdigit() and name.isascii()) or len(name) > 10 or (name[0] == "0" and len(name) > 1):
        return None
    value = int(name)
    return value if value <= INT32_MAX else None


def child_ids(parent: str, names: Iterable[str]) -> list[int]:
    """The ids of the children ``names`` of ``parent``, sorted; a child not named by an id is
    logged and left out, as Kafka skips a znode it cannot parse."""
    ids = []
    for name in names:
        found = parse_id(name)
        if found is None:
            logger.warning("Ignoring %s/%s: the node name is not an id (0 to %d)", parent, name, INT32_MAX)
        else:
            ids.append(found)
    return sorted(ids)


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
