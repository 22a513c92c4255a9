"""Kafka's znodes (reference §7): one class per znode kind, owning its path and its bytes.

This mirrors the shape of Kafka's ``ZkData.scala`` so that a cluster written by kctl is readable by
Kafka's tools and the other way round: encoders write Kafka 3.0's format (key order as in the
reference, byte-exact where Kafka's tests assert bytes); decoders accept every version the
reference lists, ignore keys they do not use, and turn anything they cannot use into a
:class:`~kctl.errors.CorruptDataError` naming the znode's path and the offending field.

The encoders of the hot znodes (partition state) build their JSON by formatting rather than with
:func:`json.dumps`, since a controller writes tens of thousands of them per second.

Znode data comes from outside the process, so decoding is bounded: data larger than
:data:`MAX_ZNODE_BYTES` is refused unread, JSON that nests too deeply for the parser is corrupt
data like any other, and no value reaches the caller unchecked (every field's type is), so
nothing deeply nested gets past a decoder.
"""

from __future__ import annotations

import itertools
import json
import re
import reprlib
import time
from collections.abc import Iterable, Mapping, Sequence

from kctl._engine import decode_topic_znode
from kctl.errors import CorruptDataError
from kctl.limits import DocumentError, decode_text, parse_json
from kctl.model import (
    INT32_MAX,
    INT32_MIN,
    MAX_PORT,
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    TopicPartition,
    int_problem,
)
from kctl.stores import paths
from kctl.stores.base import (
    FEATURE_STATUS_DISABLED,
    FEATURE_STATUS_ENABLED,
    FinalizedFeatures,
    ProducerIdBlock,
    TopicAssignment,
)

MAX_ZNODE_BYTES = 4 * 1024 * 1024
"""The largest znode data decoded: the ``jute.maxbuffer`` Kafka's ZooKeeper client is given (ZooKeeper
servers default to 1 MiB), so that larger data cannot come from a cluster Kafka could read."""

DOCUMENT = "<document>"
"""The field named when a znode's data as a whole cannot be used (not JSON, not an object …)."""

LOG_DIR_FAILURE_EVENT = 1
"""The only log-dir event Kafka defines (``LogDirEventNotificationHandler.LogDirFailureEvent``)."""



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


_MISSING = object()
_RECOVERY_STATES = tuple(LeaderRecoveryState)  # indexed by value: 0 RECOVERED, 1 RECOVERING
_DECIMAL = re.compile(r"-?[0-9]{1,19}")  # at most a Long's digits: int() of a longer one may refuse


class _Fields:
    """A JSON object read from ``path``: each accessor checks a field's type and names it
    (``partitions[2].topic``) in the :class:`CorruptDataError` it raises otherwise."""

    __slots__ = ("_doc", "_path", "_prefix")

    def __init__(self, doc: object, path: str, name: str = DOCUMENT) -> None:
        if not isinstance(doc, dict):
            raise corrupt(path, name, f"must be a JSON object, {_found(doc)}")
        self._doc: dict[str, object] = doc
        self._path = path
        self._prefix = "" if name == DOCUMENT else f"{name}."

    @classmethod
    def parse(cls, data: bytes | None, path: str) -> _Fields:
        """The JSON object stored at ``path``."""
        if data is None:
            raise corrupt(path, DOCUMENT, "is missing: the znode has no data")
        try:
            return cls(parse_json(decode_text(data, MAX_ZNODE_BYTES)), path)
        except DocumentError as exc:
            raise corrupt(path, DOCUMENT, f"is {exc}: {reprlib.repr(data)}") from None

    def name(self, key: str) -> str:
        return f"{self._prefix}{key}"

    def fail(self, key: str, problem: str) -> CorruptDataError:
        return corrupt(self._path, self.name(key), problem)

    def value(self, key: str, default: object = _MISSING) -> object:
        found = self._doc.get(key, default)
        if found is _MISSING:
            raise self.fail(key, "is missing")
        return found

    def integer(self, key: str, default: object = _MISSING) -> int:
        """A number Kafka reads as an ``Int`` (ids, epochs, versions, ports)."""
        found = self._doc.get(key, default)
        if type(found) is int and INT32_MIN <= found <= INT32_MAX:  # the hot path of every decoder
            return found
        self.value(key, default)
        raise self.fail(key, _int32_problem(found))

    def string(self, key: str, default: object = _MISSING) -> str:
        found = self.value(key, default)
        if not isinstance(found, str):
            raise self.fail(key, f"must be a string, {_found(found)}")
        return found

    def optional_string(self, key: str) -> str | None:
        return None if self._doc.get(key) is None else self.string(key)

    def decimal(self, key: str) -> int:
        """A number Kafka writes as a string (timestamps, producer-id block bounds)."""
        text = self.string(key)
        if not _DECIMAL.fullmatch(text):
            raise self.fail(key, f"must be a decimal number in a string, found {text!r}")
        return int(text)

    def sequence(self, key: str) -> list[object]:
        found = self.value(key)
        if not isinstance(found, list):
            raise self.fail(key, f"must be a list, {_found(found)}")
        return found

    def integers(self, key: str) -> tuple[int, ...]:
        """A list Kafka reads as ``Int`` values (replicas, ISR)."""
        items = self.sequence(key)
        for i, item in enumerate(items):
            if not (type(item) is int and INT32_MIN <= item <= INT32_MAX):
                raise self.fail(f"{key}[{i}]", _int32_problem(item))
        return tuple(items)  # type: ignore[arg-type]

    def mapping(self, key: str, default: object = _MISSING) -> _Fields:
        return _Fields(self.value(key, default), self._path, self.name(key))

    def element(self, key: str, index: int) -> _Fields:
        """The object at ``key[index]`` of a list."""
        return _Fields(self.sequence(key)[index], self._path, self.name(f"{key}[{index}]"))

    def elements(self, key: str) -> list[_Fields]:
        return [self.element(key, i) for i in range(len(self.sequence(key)))]

    def keys(self) -> list[str]:
        return list(self._doc)


def _int32_problem(value: object) -> str:
    if type(value) is int:
        return f"must be a 32-bit integer (Kafka's Int), found {reprlib.repr(value)}"
    return f"must be an integer, {_found(value)}"


def _partition(fields: _Fields) -> TopicPartition:
    return TopicPartition(fields.string("topic"), fields.integer("partition"))


def _partition_id(partitions: _Fields, key: str) -> int:
    partition = paths.parse_id(key)
    if partition is None:
        raise partitions.fail(key, f"must be keyed by a partition id (0 to {INT32_MAX}), found {key!r}")
    return partition


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
        """Version 2, as Kafka 3.4+ writes it: a ZooKeeper controller's ``kraftControllerEpoch`` is -1."""
        timestamp = _now_ms() if timestamp_ms is None else timestamp_ms
        return b'{"version":2,"brokerid":%d,"timestamp":"%d","kraftControllerEpoch":-1}' % (broker_id, timestamp)

    @staticmethod
    def decode(data: bytes | None, path: str = paths.CONTROLLER) -> int:
        """The controller's id; versions 1 and 2 (3.4+, with ``kraftControllerEpoch``, checked to
        be an ``Int``). A KRaft controller's registration during a migration (its epoch set) is
        an active controller like any other, as Kafka's ZooKeeper brokers take it."""
        doc = _Fields.parse(data, path)
        doc.integer("kraftControllerEpoch", -1)
        return doc.integer("brokerid")


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
        text = (data or b"").decode(errors="replace").strip()
        if not _DECIMAL.fullmatch(text) or len(text) > len(str(INT32_MIN)) or int_problem(int(text)) is not None:
            raise corrupt(path, DOCUMENT, f"must be the epoch as decimal text (Kafka's Int), found {reprlib.repr(data)}")
        return int(text)


# --- Brokers ---------------------------------------------------------------------------------------

_ENDPOINT = re.compile(r"(?P<listener>[^:/]+)://\[?(?P<host>[0-9a-zA-Z\-%._:]*?)\]?:(?P<port>-?[0-9]{1,10})")


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
            "features": {name: {"min_version": low, "max_version": high} for name, (low, high) in info.features},
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
        doc = _Fields.parse(data, path)
        jmx_port = doc.integer("jmx_port", -1)
        if doc.integer("version") == 1:
            port = doc.integer("port")
            if not 0 <= port <= MAX_PORT:
                raise doc.fail("port", f"must be a TCP port (0 to {MAX_PORT}), found {port}")
            return BrokerInfo(broker_id, (EndPoint(doc.string("host"), port),), jmx_port=jmx_port)
        protocols = doc.mapping("listener_security_protocol_map", {})
        endpoints = []
        for i, entry in enumerate(doc.sequence("endpoints")):
            match = _ENDPOINT.fullmatch(entry) if isinstance(entry, str) else None
            if match is None:
                raise doc.fail(f"endpoints[{i}]", f"must look like LISTENER://host:port, {_found(entry)}")
            listener = match["listener"]
            protocol = protocols.string(listener, listener)  # without a map, listener = protocol
            digits = match["port"]
            if len(digits) > len(str(MAX_PORT)) or not 0 <= int(digits) <= MAX_PORT:
                raise doc.fail(f"endpoints[{i}]", f"must have a TCP port (0 to {MAX_PORT}), found {entry!r}")
            endpoints.append(EndPoint(match["host"], int(digits), listener, protocol))
        features = doc.mapping("features", {})
        supported = []
        for name in features.keys():
            bounds = features.mapping(name)
            supported.append((name, (bounds.integer("min_version"), bounds.integer("max_version"))))
        return BrokerInfo(
            broker_id,
            tuple(endpoints),
            rack=doc.optional_string("rack"),
            features=tuple(supported),
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
        """Versions 1 to 3: missing ``adding_replicas``/``removing_replicas`` maps or entries are
        empty. The usual document (no reassignment in flight, partitions in order, as kctl and
        Kafka's CreateTopics write it) is parsed by the engine (``decode_topic_znode``): a
        controller reads every partition of a new topic before it writes a state."""
        if type(data) is bytes and len(data) <= MAX_ZNODE_BYTES:
            usual = decode_topic_znode(data)
            if usual is not None:
                _, topic_id, ids, indexes, lists = usual
                shared = [_SHARED_ASSIGNMENTS[tuple(replicas)] for replicas in lists]
                return TopicAssignment(dict(zip(ids, map(shared.__getitem__, indexes))), topic_id)
        doc = _Fields.parse(data, path)
        doc.integer("version")
        plain = _plain_partitions(doc)
        if plain is not None:
            return TopicAssignment(plain, doc.optional_string("topic_id"))
        replicas, adding, removing = (
            {_partition_id(lists, key): lists.integers(key) for key in lists.keys()}
            for lists in (
                doc.mapping("partitions"),
                doc.mapping("adding_replicas", {}),
                doc.mapping("removing_replicas", {}),
            )
        )
        return TopicAssignment(
            {p: ReplicaAssignment(r, adding.get(p, ()), removing.get(p, ())) for p, r in sorted(replicas.items())},
            doc.optional_string("topic_id"),
        )


class _SharedAssignments(dict[tuple[int, ...], ReplicaAssignment]):
    """Assignments without a reassignment, one per replica list: a cluster of 100 brokers has a few
    thousand distinct lists however many partitions it has, so a failover reading a million
    partitions makes a few thousand objects, not a million (they are immutable)."""

    def __missing__(self, replicas: tuple[int, ...]) -> ReplicaAssignment:
        if len(self) >= _SHARED_ASSIGNMENTS_MAX:
            self.clear()
        assignment = self[replicas] = ReplicaAssignment(replicas)
        return assignment


_SHARED_ASSIGNMENTS_MAX = 1 << 16
_SHARED_ASSIGNMENTS = _SharedAssignments()
_PARTITION_IDS = re.compile(r"(?:0|[1-9][0-9]{0,9})(?:,(?:0|[1-9][0-9]{0,9}))*")
"""Partition ids (:func:`kctl.stores.paths.parse_id`'s spelling) joined by commas."""


def _plain_partitions(doc: _Fields) -> dict[int, ReplicaAssignment] | None:
    """A topic document's assignments when it is the usual one, checked in bulk rather than field
    by field (a failover decodes every partition of the cluster): no reassignment in flight, every
    key a partition id, every value a list of Kafka Ints. None when anything differs, and the
    field-by-field decoder then decides, and names the problem."""
    partitions = doc.value("partitions", None)
    if type(partitions) is not dict or not partitions:
        return None
    for moving in (doc.value("adding_replicas", {}), doc.value("removing_replicas", {})):
        if type(moving) is not dict or moving:
            return None
    keys = ",".join(partitions)
    if keys.count(",") != len(partitions) - 1 or not _PARTITION_IDS.fullmatch(keys):
        return None  # a key holding a comma, or not an id
    ids = list(map(int, partitions))
    lists = list(partitions.values())
    if max(ids) > INT32_MAX or set(map(type, lists)) != {list}:
        return None
    replicas = list(itertools.chain.from_iterable(lists))
    if replicas and (set(map(type, replicas)) != {int} or min(replicas) < INT32_MIN or max(replicas) > INT32_MAX):
        return None
    return dict(sorted(zip(ids, map(_SHARED_ASSIGNMENTS.__getitem__, map(tuple, lists)))))


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
        leader_and_isr = state.leader_and_isr
        recovering = leader_and_isr.leader_recovery_state is LeaderRecoveryState.RECOVERING
        return (
            '{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":%d,"isr":[%s]%s}'
            % (
                state.controller_epoch,
                leader_and_isr.leader,
                leader_and_isr.leader_epoch,
                ",".join(map(str, leader_and_isr.isr)),
                ',"leader_recovery_state":1' if recovering else "",
            )
        ).encode()

    @staticmethod
    def decode(data: bytes | None, path: str, zk_version: int) -> LeaderIsrAndControllerEpoch:
        """The state with ``zk_version`` (the znode's data version) as its partition epoch.

        A failover decodes every partition's state, so the usual document (integers where Kafka
        writes them, no recovery state) takes a fast path; anything else is checked field by field.
        """
        try:
            fast = json.loads(data.decode()) if data and len(data) <= MAX_ZNODE_BYTES else None
        except (ValueError, RecursionError):  # not UTF-8, not JSON, or too deep: the checked path says which
            fast = None
        if type(fast) is dict and "leader_recovery_state" not in fast:
            leader, isr, leader_epoch, controller_epoch = (
                fast.get("leader"), fast.get("isr"), fast.get("leader_epoch"), fast.get("controller_epoch")
            )
            if (type(leader) is int and type(leader_epoch) is int and type(controller_epoch) is int
                    and type(isr) is list and all(type(b) is int and INT32_MIN <= b <= INT32_MAX for b in isr)
                    and INT32_MIN <= leader <= INT32_MAX and INT32_MIN <= leader_epoch <= INT32_MAX
                    and INT32_MIN <= controller_epoch <= INT32_MAX):
                return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, tuple(isr), leader_epoch, zk_version),
                                                   controller_epoch)
        doc = _Fields.parse(data, path)
        recovery = doc.integer("leader_recovery_state", LeaderRecoveryState.RECOVERED.value)
        if not 0 <= recovery < len(_RECOVERY_STATES):
            raise doc.fail("leader_recovery_state", f"must be 0 or 1, found {recovery}")
        return LeaderIsrAndControllerEpoch(
            LeaderAndIsr(
                doc.integer("leader"),
                doc.integers("isr"),
                doc.integer("leader_epoch"),
                zk_version,
                _RECOVERY_STATES[recovery],
            ),
            doc.integer("controller_epoch"),
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
        return {
            _partition(entry): list(entry.integers("replicas"))
            for entry in _Fields.parse(data, path).elements("partitions")
        }


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
        return set(map(_partition, _Fields.parse(data, path).elements("partitions")))


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
        return list(map(_partition, _Fields.parse(data, path).elements("partitions")))


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
        return _Fields.parse(data, path).integer("broker")


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
        config = _Fields.parse(data, path).mapping("config")
        return {name: config.string(name) for name in config.keys()}


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
        return _Fields.parse(data, path).string("entity_path")


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
        return _Fields.parse(data, path).string("id")


class FeatureZNode:
    """``/feature`` (2.7+): the cluster's finalized feature versions, written by the controller."""

    @staticmethod
    def path() -> str:
        return paths.FEATURE

    @staticmethod
    def encode(finalized: FinalizedFeatures) -> bytes:
        """Kafka's key order; in version 1 each level is both the minimum and the maximum."""
        features = {
            name: {"max_version_level": level, "min_version_level": level} if finalized.version == 1
            else {"max_version_level": level}
            for name, level in finalized.features.items()
        }
        return _json({"features": features, "version": finalized.version, "status": finalized.status})

    @staticmethod
    def decode(data: bytes | None, path: str = paths.FEATURE) -> FinalizedFeatures:
        """Versions 1 and 2, with Kafka's checks (levels from 1, a version 1 minimum at most its maximum)."""
        doc = _Fields.parse(data, path)
        version = doc.integer("version")
        if version not in (1, 2):
            raise doc.fail("version", f"must be 1 or 2, found {version}")
        status = doc.integer("status")
        if status not in (FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED):
            raise doc.fail("status", f"must be 0 (disabled) or 1 (enabled), found {status}")
        features = doc.mapping("features")
        finalized = {}
        for name in features.keys():
            levels = features.mapping(name)
            high = levels.integer("max_version_level")
            low = levels.integer("min_version_level") if version == 1 else high
            if not 1 <= low <= high:
                raise levels.fail("max_version_level" if version == 2 else "min_version_level",
                                  f"must be levels from 1 with the minimum at most the maximum, found {low} and {high}")
            finalized[name] = high
        return FinalizedFeatures(version, status, finalized)


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
        doc = _Fields.parse(data, path)
        return ProducerIdBlock(doc.integer("broker"), doc.decimal("block_start"), doc.decimal("block_end"))


__all__ = [
    "DOCUMENT",
    "FEATURE_STATUS_DISABLED",
    "FEATURE_STATUS_ENABLED",
    "LOG_DIR_FAILURE_EVENT",
    "MAX_ZNODE_BYTES",
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
