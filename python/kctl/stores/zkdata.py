"""Kafka's znodes (reference §7): one class per znode kind, owning its path and its bytes.

This mirrors the shape of Kafka's ``ZkData.scala`` so that a cluster written by kctl is readable by
Kafka's tools and the other way round: encoders write Kafka 3.0's format (key order as in the
reference, byte-exact where Kafka's tests assert bytes); decoders accept every version the
reference lists, ignore keys they do not use, and turn anything they cannot use into a
:class:`~kctl.errors.CorruptDataError` naming the znode's path and the offending field.

The encoders of the hot znodes (partition state) build their JSON by formatting rather than with
:func:`json.dumps`, since a controller writes tens of thousands of them per second.
"""

from __future__ import annotations

import json
import re
import reprlib
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

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
from kctl.stores import paths
from kctl.stores.base import TopicAssignment

DOCUMENT = "<document>"
"""The field named when a znode's data as a whole cannot be used (not JSON, not an object …)."""

LOG_DIR_FAILURE_EVENT = 1
"""The only log-dir event Kafka defines (``LogDirEventNotificationHandler.LogDirFailureEvent``)."""

FEATURE_STATUS_DISABLED = 0
FEATURE_STATUS_ENABLED = 1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _json(value: object) -> bytes:
    """Compact JSON as Jackson writes it (no spaces, non-ASCII kept as UTF-8)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# --- Decoding helpers: every failure names the path and the field ---------------------------------


def corrupt(path: str, field: str, problem: str) -> CorruptDataError:
    """The error for undecodable data at ``path``: ``field`` is a JSON path such as ``isr[2]``."""
    return CorruptDataError(f"{path}: field '{field}' {problem}", path)


def _found(value: object) -> str:
    return f"found {type(value).__name__} {reprlib.repr(value)}"


def _object(data: bytes | None, path: str) -> dict[str, object]:
    """The JSON object stored at ``path``."""
    if data is None:
        raise corrupt(path, DOCUMENT, "is missing: the znode has no data")
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise corrupt(path, DOCUMENT, f"is not JSON ({exc}): {reprlib.repr(data)}") from None
    if not isinstance(value, dict):
        raise corrupt(path, DOCUMENT, f"must be a JSON object, {_found(value)}")
    return value


_MISSING = object()


def _field(doc: Mapping[str, object], name: str, path: str, default: object = _MISSING) -> object:
    value = doc.get(name, default)
    if value is _MISSING:
        raise corrupt(path, name, "is missing")
    return value


def _int(value: object, path: str, field: str) -> int:
    if type(value) is not int:
        raise corrupt(path, field, f"must be an integer, {_found(value)}")
    return value


def _str(value: object, path: str, field: str) -> str:
    if not isinstance(value, str):
        raise corrupt(path, field, f"must be a string, {_found(value)}")
    return value


def _list(value: object, path: str, field: str) -> list[object]:
    if not isinstance(value, list):
        raise corrupt(path, field, f"must be a list, {_found(value)}")
    return value


def _map(value: object, path: str, field: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise corrupt(path, field, f"must be an object, {_found(value)}")
    return value


def _int_list(value: object, path: str, field: str) -> tuple[int, ...]:
    items = _list(value, path, field)
    if all(type(item) is int for item in items):
        return tuple(items)  # type: ignore[arg-type]
    return tuple(_int(item, path, f"{field}[{i}]") for i, item in enumerate(items))


def _int_text(value: object, path: str, field: str) -> int:
    """A number Kafka writes as a string (timestamps, producer-id block bounds)."""
    text = _str(value, path, field)
    if not re.fullmatch(r"-?[0-9]+", text):
        raise corrupt(path, field, f"must be a decimal number in a string, found {text!r}")
    return int(text)


def _partition(value: object, path: str, field: str) -> TopicPartition:
    entry = _map(value, path, field)
    topic = _str(_field(entry, "topic", path), path, f"{field}.topic")
    partition = _int(_field(entry, "partition", path), path, f"{field}.partition")
    return TopicPartition(topic, partition)


def _partition_list(doc: Mapping[str, object], path: str) -> list[TopicPartition]:
    entries = _list(_field(doc, "partitions", path), path, "partitions")
    return [_partition(entry, path, f"partitions[{i}]") for i, entry in enumerate(entries)]


def _partition_entries(partitions: Iterable[TopicPartition]) -> list[dict[str, object]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]


# --- Controller ------------------------------------------------------------------------------------


class ControllerZNode:
    """``/controller``: the ephemeral registration of the active controller."""

    @staticmethod
    def path() -> str:
        return paths.CONTROLLER

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None) -> bytes:
        """Version 1, as Kafka 3.0 writes it."""
        timestamp = _now_ms() if timestamp_ms is None else timestamp_ms
        return b'{"version":1,"brokerid":%d,"timestamp":"%d"}' % (broker_id, timestamp)

    @staticmethod
    def decode(data: bytes | None, path: str = paths.CONTROLLER) -> int:
        """The controller's broker id; versions 1 and 2 (3.4+, with ``kraftControllerEpoch``)."""
        return _int(_field(_object(data, path), "brokerid", path), path, "brokerid")


class ControllerEpochZNode:
    """``/controller_epoch``: the epoch as plain decimal text; its zkVersion is the fencing token."""

    @staticmethod
    def path() -> str:
        return paths.CONTROLLER_EPOCH

    @staticmethod
    def encode(epoch: int) -> bytes:
        return b"%d" % epoch

    @staticmethod
    def decode(data: bytes | None, path: str = paths.CONTROLLER_EPOCH) -> int:
        text = (data or b"").strip()
        if not re.fullmatch(rb"-?[0-9]+", text):
            raise corrupt(path, DOCUMENT, f"must be the epoch as decimal text, found {reprlib.repr(data)}")
        return int(text)


# --- Brokers ---------------------------------------------------------------------------------------

_ENDPOINT = re.compile(r"(?P<listener>[^:/]+)://\[?(?P<host>[0-9a-zA-Z\-%._:]*?)\]?:(?P<port>-?[0-9]+)")


def _connection_string(endpoint: EndPoint) -> str:
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.listener_name}://{host}:{endpoint.port}"


class BrokerIdZNode:
    """``/brokers/ids/<id>``: a broker's ephemeral registration; its czxid is the broker epoch."""

    VERSION = 5
    """Written by Kafka 2.7+ (inter.broker.protocol.version ≥ 2.7-IV0): endpoints, the listener map
    and supported features."""

    @staticmethod
    def path(broker_id: int) -> str:
        return paths.broker(broker_id)

    @staticmethod
    def encode(info: BrokerInfo, timestamp_ms: int | None = None) -> bytes:
        """Version 5. ``host``/``port`` are the first PLAINTEXT endpoint's (null/-1 without one);
        ``rack`` appears only when set."""
        plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
        document: dict[str, object] = {
            "features": {
                name: {"min_version": low, "max_version": high} for name, (low, high) in info.features
            },
            "listener_security_protocol_map": {e.listener_name: e.security_protocol for e in info.endpoints},
            "endpoints": [_connection_string(e) for e in info.endpoints],
            "jmx_port": info.jmx_port,
            "port": plaintext.port if plaintext else -1,
            "host": plaintext.host if plaintext else None,
            "version": BrokerIdZNode.VERSION,
            "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms),
        }
        if info.rack is not None:
            document["rack"] = info.rack
        return _json(document)

    @staticmethod
    def decode(data: bytes | None, path: str, broker_id: int) -> BrokerInfo:
        """Version 1 (host and port only: one PLAINTEXT endpoint) and versions 2+ (endpoints, an
        optional listener map, an optional or null rack, features from version 5)."""
        doc = _object(data, path)
        version = _int(_field(doc, "version", path), path, "version")
        jmx_port = _int(doc.get("jmx_port", -1), path, "jmx_port")
        if version == 1:
            host = _str(_field(doc, "host", path), path, "host")
            port = _int(_field(doc, "port", path), path, "port")
            return BrokerInfo(broker_id, (EndPoint(host, port),), jmx_port=jmx_port)
        protocols = _map(doc.get("listener_security_protocol_map", {}), path, "listener_security_protocol_map")
        endpoints = []
        for i, entry in enumerate(_list(_field(doc, "endpoints", path), path, "endpoints")):
            field = f"endpoints[{i}]"
            match = _ENDPOINT.fullmatch(_str(entry, path, field))
            if match is None:
                raise corrupt(path, field, f"must look like LISTENER://host:port, found {entry!r}")
            listener = match["listener"]
            protocol = protocols.get(listener, listener)  # without a map, listener = protocol
            endpoints.append(
                EndPoint(
                    match["host"],
                    int(match["port"]),
                    listener,
                    _str(protocol, path, f"listener_security_protocol_map.{listener}"),
                )
            )
        rack = doc.get("rack")
        features = []
        for name, bounds in _map(doc.get("features", {}), path, "features").items():
            entry = _map(bounds, path, f"features.{name}")
            low = _int(_field(entry, "min_version", path), path, f"features.{name}.min_version")
            high = _int(_field(entry, "max_version", path), path, f"features.{name}.max_version")
            features.append((name, (low, high)))
        return BrokerInfo(
            broker_id,
            tuple(endpoints),
            rack=None if rack is None else _str(rack, path, "rack"),
            features=tuple(features),
            jmx_port=jmx_port,
        )


# --- Topics and partitions -------------------------------------------------------------------------


class TopicZNode:
    """``/brokers/topics/<topic>``: the topic id and every partition's RS/AR/RR."""

    VERSION = 3
    """Kafka 2.8+; ``topic_id`` appears only when known."""

    @staticmethod
    def path(topic: str) -> str:
        return paths.topic(topic)

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        """Version 3, partitions in id order; only non-empty AR/RR lists appear."""
        partitions = sorted(assignment.partitions.items())
        document: dict[str, object] = {"version": TopicZNode.VERSION}
        if assignment.topic_id is not None:
            document["topic_id"] = assignment.topic_id
        document["partitions"] = {str(p): list(a.replicas) for p, a in partitions}
        document["adding_replicas"] = {str(p): list(a.adding_replicas) for p, a in partitions if a.adding_replicas}
        document["removing_replicas"] = {
            str(p): list(a.removing_replicas) for p, a in partitions if a.removing_replicas
        }
        return _json(document)

    @staticmethod
    def decode(data: bytes | None, path: str) -> TopicAssignment:
        """Versions 1 to 3: missing ``adding_replicas``/``removing_replicas`` maps or entries are empty."""
        doc = _object(data, path)
        _int(_field(doc, "version", path), path, "version")
        lists: list[dict[int, tuple[int, ...]]] = []
        for key in ("partitions", "adding_replicas", "removing_replicas"):
            entries = _map(_field(doc, key, path) if key == "partitions" else doc.get(key, {}), path, key)
            decoded = {}
            for name, replicas in entries.items():
                if not name.isdigit():
                    raise corrupt(path, f"{key}.{name}", "must be keyed by a partition id")
                decoded[int(name)] = _int_list(replicas, path, f"{key}.{name}")
            lists.append(decoded)
        replicas, adding, removing = lists
        topic_id = doc.get("topic_id")
        return TopicAssignment(
            {
                p: ReplicaAssignment(r, adding.get(p, ()), removing.get(p, ()))
                for p, r in sorted(replicas.items())
            },
            None if topic_id is None else _str(topic_id, path, "topic_id"),
        )


class TopicPartitionsZNode:
    """``/brokers/topics/<topic>/partitions``: no data; its children are the initialised partitions."""

    @staticmethod
    def path(topic: str) -> str:
        return paths.topic_partitions(topic)


class TopicPartitionZNode:
    """``/brokers/topics/<topic>/partitions/<p>``: no data; the parent of the state znode."""

    @staticmethod
    def path(tp: TopicPartition) -> str:
        return paths.topic_partition(tp)


class TopicPartitionStateZNode:
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, ISR, epochs; its zkVersion is the
    partition epoch."""

    @staticmethod
    def path(tp: TopicPartition) -> str:
        return paths.partition_state(tp)

    @staticmethod
    def encode(state: LeaderIsrAndControllerEpoch) -> bytes:
        """Kafka's key order; ``leader_recovery_state`` only when RECOVERING (3.2+)."""
        lai = state.leader_and_isr
        recovering = lai.leader_recovery_state is LeaderRecoveryState.RECOVERING
        return (
            '{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":%d,"isr":[%s]%s}'
            % (
                state.controller_epoch,
                lai.leader,
                lai.leader_epoch,
                ",".join(map(str, lai.isr)),
                ',"leader_recovery_state":1' if recovering else "",
            )
        ).encode()

    @staticmethod
    def decode(data: bytes | None, path: str, zk_version: int) -> LeaderIsrAndControllerEpoch:
        """The state with ``zk_version`` (the znode's data version) as its partition epoch."""
        doc = _object(data, path)
        recovery = _int(doc.get("leader_recovery_state", 0), path, "leader_recovery_state")
        if recovery not in (LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING):
            raise corrupt(path, "leader_recovery_state", f"must be 0 or 1, found {recovery}")
        return LeaderIsrAndControllerEpoch(
            LeaderAndIsr(
                _int(_field(doc, "leader", path), path, "leader"),
                _int_list(_field(doc, "isr", path), path, "isr"),
                _int(_field(doc, "leader_epoch", path), path, "leader_epoch"),
                zk_version,
                LeaderRecoveryState(recovery),
            ),
            _int(_field(doc, "controller_epoch", path), path, "controller_epoch"),
        )


# --- Admin requests --------------------------------------------------------------------------------


class ReassignPartitionsZNode:
    """``/admin/reassign_partitions``: the (deprecated since 2.4) ZooKeeper-initiated reassignments."""

    @staticmethod
    def path() -> str:
        return paths.REASSIGN_PARTITIONS

    @staticmethod
    def encode(reassignments: Mapping[TopicPartition, Sequence[int]]) -> bytes:
        entries = [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
            for tp, replicas in reassignments.items()
        ]
        return _json({"version": 1, "partitions": entries})

    @staticmethod
    def decode(data: bytes | None, path: str = paths.REASSIGN_PARTITIONS) -> dict[TopicPartition, list[int]]:
        doc = _object(data, path)
        result = {}
        for i, entry in enumerate(_list(_field(doc, "partitions", path), path, "partitions")):
            tp = _partition(entry, path, f"partitions[{i}]")
            replicas = _field(_map(entry, path, f"partitions[{i}]"), "replicas", path)
            result[tp] = list(_int_list(replicas, path, f"partitions[{i}].replicas"))
        return result


class PreferredReplicaElectionZNode:
    """``/admin/preferred_replica_election``: partitions whose preferred replica should lead."""

    @staticmethod
    def path() -> str:
        return paths.PREFERRED_REPLICA_ELECTION

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        """Each partition once, in first-seen order."""
        return _json({"version": 1, "partitions": _partition_entries(dict.fromkeys(partitions))})

    @staticmethod
    def decode(data: bytes | None, path: str = paths.PREFERRED_REPLICA_ELECTION) -> set[TopicPartition]:
        return set(_partition_list(_object(data, path), path))


class DeleteTopicsTopicZNode:
    """``/admin/delete_topics/<topic>``: no data; its presence requests the topic's deletion."""

    @staticmethod
    def path(topic: str) -> str:
        return paths.topic_deletion(topic)


# --- Notifications ---------------------------------------------------------------------------------


class IsrChangeNotificationSequenceZNode:
    """``/isr_change_notification/isr_change_<seq>``: partitions whose ISR a leader changed."""

    PREFIX = paths.ISR_CHANGE_PREFIX

    @staticmethod
    def path(name: str) -> str:
        return paths.isr_change_notification(name)

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _json({"version": 1, "partitions": _partition_entries(partitions)})

    @staticmethod
    def decode(data: bytes | None, path: str) -> list[TopicPartition]:
        """The partitions in stored order, duplicates kept."""
        return _partition_list(_object(data, path), path)


class LogDirEventNotificationSequenceZNode:
    """``/log_dir_event_notification/log_dir_event_<seq>``: a broker's log directory failed."""

    PREFIX = paths.LOG_DIR_EVENT_PREFIX

    @staticmethod
    def path(name: str) -> str:
        return paths.log_dir_event_notification(name)

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return b'{"version":1,"broker":%d,"event":%d}' % (broker_id, LOG_DIR_FAILURE_EVENT)

    @staticmethod
    def decode(data: bytes | None, path: str) -> int:
        """The broker whose log directory failed."""
        return _int(_field(_object(data, path), "broker", path), path, "broker")


# --- Configs ---------------------------------------------------------------------------------------


class ConfigEntityZNode:
    """``/config/topics/<topic>``: a topic's config overrides (values are strings)."""

    @staticmethod
    def path(topic: str) -> str:
        return paths.topic_config(topic)

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _json({"version": 1, "config": dict(config)})

    @staticmethod
    def decode(data: bytes | None, path: str) -> dict[str, str]:
        doc = _object(data, path)
        config = _map(_field(doc, "config", path), path, "config")
        return {name: _str(value, path, f"config.{name}") for name, value in config.items()}


class ConfigEntityChangeNotificationSequenceZNode:
    """``/config/changes/config_change_<seq>``: tells brokers an entity's config changed."""

    PREFIX = paths.CONFIG_CHANGE_PREFIX

    @staticmethod
    def path(name: str) -> str:
        return f"{paths.CONFIG_CHANGES}/{name}"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        """``entity_path`` is ``<entity type>/<name>``, e.g. ``topics/orders``."""
        return _json({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes | None, path: str) -> str:
        return _str(_field(_object(data, path), "entity_path", path), path, "entity_path")


# --- Cluster-wide ----------------------------------------------------------------------------------


class ClusterIdZNode:
    """``/cluster/id``: the cluster id, created by the first broker (its version is a string)."""

    @staticmethod
    def path() -> str:
        return paths.CLUSTER_ID

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _json({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes | None, path: str = paths.CLUSTER_ID) -> str:
        return _str(_field(_object(data, path), "id", path), path, "id")


class FinalizedFeatures(NamedTuple):
    """The content of ``/feature``: whether feature versioning is enabled, and each feature's
    finalized ``(min_version_level, max_version_level)``."""

    status: int
    features: dict[str, tuple[int, int]]


class FeatureZNode:
    """``/feature`` (2.7+): the cluster's finalized feature versions, written by the controller."""

    @staticmethod
    def path() -> str:
        return paths.FEATURE

    @staticmethod
    def encode(finalized: FinalizedFeatures) -> bytes:
        features = {
            name: {"min_version_level": low, "max_version_level": high}
            for name, (low, high) in finalized.features.items()
        }
        return _json({"version": 1, "status": finalized.status, "features": features})

    @staticmethod
    def decode(data: bytes | None, path: str = paths.FEATURE) -> FinalizedFeatures:
        doc = _object(data, path)
        status = _int(_field(doc, "status", path), path, "status")
        if status not in (FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED):
            raise corrupt(path, "status", f"must be 0 (disabled) or 1 (enabled), found {status}")
        features = {}
        for name, levels in _map(doc.get("features", {}), path, "features").items():
            entry = _map(levels, path, f"features.{name}")
            features[name] = (
                _int(_field(entry, "min_version_level", path), path, f"features.{name}.min_version_level"),
                _int(_field(entry, "max_version_level", path), path, f"features.{name}.max_version_level"),
            )
        return FinalizedFeatures(status, features)


class ProducerIdBlock(NamedTuple):
    """The last producer-id block handed out: its owner and its inclusive bounds."""

    broker: int
    block_start: int
    block_end: int


class ProducerIdBlockZNode:
    """``/latest_producer_id_block``: the last producer-id block allocated (bounds as strings)."""

    @staticmethod
    def path() -> str:
        return paths.LATEST_PRODUCER_ID_BLOCK

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return _json(
            {
                "version": 1,
                "broker": block.broker,
                "block_start": str(block.block_start),
                "block_end": str(block.block_end),
            }
        )

    @staticmethod
    def decode(data: bytes | None, path: str = paths.LATEST_PRODUCER_ID_BLOCK) -> ProducerIdBlock:
        doc = _object(data, path)
        return ProducerIdBlock(
            _int(_field(doc, "broker", path), path, "broker"),
            _int_text(_field(doc, "block_start", path), path, "block_start"),
            _int_text(_field(doc, "block_end", path), path, "block_end"),
        )


__all__ = [
    "DOCUMENT",
    "FEATURE_STATUS_DISABLED",
    "FEATURE_STATUS_ENABLED",
    "LOG_DIR_FAILURE_EVENT",
    "BrokerIdZNode",
    "ClusterIdZNode",
    "ConfigEntityChangeNotificationSequenceZNode",
    "ConfigEntityZNode",
    "ControllerEpochZNode",
    "ControllerZNode",
    "DeleteTopicsTopicZNode",
    "FeatureZNode",
    "FinalizedFeatures",
    "IsrChangeNotificationSequenceZNode",
    "LogDirEventNotificationSequenceZNode",
    "PreferredReplicaElectionZNode",
    "ProducerIdBlock",
    "ProducerIdBlockZNode",
    "ReassignPartitionsZNode",
    "TopicPartitionStateZNode",
    "TopicPartitionZNode",
    "TopicPartitionsZNode",
    "TopicZNode",
    "corrupt",
]
