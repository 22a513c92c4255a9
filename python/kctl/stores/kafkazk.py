"""Kafka's meaning of its znodes, written once over a :class:`~kctl.stores.znode.ZnodeClient`.

:class:`KafkaZkClient` implements :class:`~kctl.stores.base.StateStore` the way Kafka's
``KafkaZkClient`` does (reference §6.2, §7): controller registration as one multi with the
recovery from a lost response, epoch creation, fenced writes, checked ephemeral broker
registrations, Kafka's order for creating partition-state znodes, deletion markers and sequential
notifications. It never sees bytes: a :class:`ZnodeFormat` says how each znode's data is written
and read (JSON for ZooKeeper, :mod:`kctl.stores.zkdata`; checked Python objects for the memory
tree), and the client moves the data. The stores (``memory``, ``zookeeper``) subclass it with a
client and a format, and override what they do faster (the ZooKeeper store's native codec).
"""

from __future__ import annotations

import base64
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kctl.errors import (
    BadVersionError,
    ControllerMovedError,
    CorruptDataError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    StoreError,
    TopicAlreadyMarkedForDeletionError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kctl.model import (
    INITIAL_CONTROLLER_EPOCH,
    INITIAL_CONTROLLER_EPOCH_VERSION,
    INT32_MAX,
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
    validate_topic_name,
)
from kctl.stores import paths
from kctl.stores.base import (
    MATCH_ANY_VERSION,
    FinalizedFeatures,
    ProducerIdBlock,
    ReadResult,
    TopicAssignment,
    UpdateResult,
    WatchKind,
    WatchListener,
    decoded_or_skipped,
)
from kctl.stores.zkdata import corrupt
from kctl.stores.znode import Failure, Found, Op, OpResult, Stat, ZnodeClient

K = TypeVar("K")
V = TypeVar("V")
In = TypeVar("In", contravariant=True)
Out = TypeVar("Out", covariant=True)

RACE_ATTEMPTS = 10
"""Re-tries of a create-or-set racing other writers."""
READ_CHUNK = 1_000
"""Znodes a bulk read asks its client for at once: a chunk's nodes and stats die young once
decoded. Reading every partition state in one request held 100K of each alive across collections,
so they reached the oldest generation and a 100K-partition failover made two more full
collections (about 10% of its CPU time); a ZooKeeper client still pipelines a chunk's reads."""
TOPIC_READS_PER_REQUEST = 64
"""Topic znodes can be large: keep bulk-read responses moderate."""
_NAME_FIELD = "<znode name>"  # the "field" of a corrupt-data error about a child's name


class Codec(Protocol[In, Out]):
    """How one kind of znode holds its value (``zkdata``'s ``…ZNode`` classes are codecs)."""

    def encode(self, value: In, /) -> Any: ...

    def decode(self, data: Any, path: str, /) -> Out:
        """The value, or :class:`~kctl.errors.CorruptDataError` naming ``path`` and the field."""


class BrokerCodec(Protocol):
    def encode(self, info: BrokerInfo, /) -> Any: ...

    def decode(self, data: Any, path: str, broker_id: int, /) -> BrokerInfo: ...


class StateCodec(Protocol):
    def encode(self, state: LeaderIsrAndControllerEpoch, /) -> Any: ...

    def decode(self, data: Any, path: str, zk_version: int, /) -> LeaderIsrAndControllerEpoch:
        """The state, with the znode's version as its partition epoch."""


@dataclass(frozen=True)
class ZnodeFormat:
    """The codec of each znode kind the controller reads or writes."""

    controller: Codec[int, int]
    controller_epoch: Codec[int, int]
    broker: BrokerCodec
    cluster_id: Codec[str, str]
    feature: Codec[FinalizedFeatures, FinalizedFeatures]
    producer_id_block: Codec[ProducerIdBlock, ProducerIdBlock]
    topic: Codec[TopicAssignment, TopicAssignment]
    config: Codec[Mapping[str, str], dict[str, str]]
    partition_state: StateCodec
    reassignments: Codec[Mapping[TopicPartition, Sequence[int]], dict[TopicPartition, list[int]]]
    preferred_replica_election: Codec[Iterable[TopicPartition], set[TopicPartition]]
    isr_change_notification: Codec[Iterable[TopicPartition], Iterable[TopicPartition]]
    log_dir_event_notification: Codec[int, int]
    config_change_notification: Codec[str, str]


class KafkaZkClient:
    """Kafka's semantics over a znode client: the whole :class:`~kctl.stores.base.StateStore`.

    :param znodes: the session.
    :param znode_format: how values are stored.
    :param random_bytes: where a new cluster id comes from (a seeded simulation's generator).
    """

    def __init__(self, znodes: ZnodeClient, znode_format: ZnodeFormat, random_bytes: Callable[[int], bytes]) -> None:
        self._znodes = znodes
        self._format = znode_format
        self._random_bytes = random_bytes
        self._logger = logging.getLogger(type(self).__module__)  # the store's own logger name

    # --- Session and watches -------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        """ZooKeeper's id of the current session."""
        return self._znodes.session_id

    def expire_session(self) -> None:
        """Expire this session as the server would: its ephemeral znodes go, and its listeners
        then get ``SESSION``/``EXPIRED``; every call fails until :meth:`reconnect`."""
        self._znodes.expire_session()

    def reconnect(self) -> None:
        """After expiry, continue on a new session with the same listeners and watches
        (``SESSION``/``RECONNECTED``). A live session is left as it is; a closed store cannot reconnect."""
        self._znodes.reconnect()

    def close(self) -> None:
        self._znodes.close()

    def add_listener(self, listener: WatchListener) -> None:
        self._znodes.add_listener(listener)

    def remove_listener(self, listener: WatchListener) -> None:
        self._znodes.remove_listener(listener)

    def watch(self, kind: WatchKind, key: object = None) -> None:
        self._znodes.watch(kind, key)

    def unwatch(self, kind: WatchKind, key: object = None) -> None:
        self._znodes.unwatch(kind, key)

    # --- Controller election and fencing -------------------------------------------------------

    def get_controller_id(self) -> int | None:
        found = self._get(paths.CONTROLLER)
        return None if found is None else self._format.controller.decode(found[0], paths.CONTROLLER)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        found = self._get(paths.CONTROLLER_EPOCH)
        if found is None:
            return None
        return self._format.controller_epoch.decode(found[0], paths.CONTROLLER_EPOCH), found[1].version

    def register_controller_and_increment_epoch(self, controller_id: int) -> tuple[int, int]:
        epoch, version = self._controller_epoch_or_create()
        ops = [
            Op("create", paths.CONTROLLER, self._format.controller.encode(controller_id), ephemeral=True),
            Op("set", paths.CONTROLLER_EPOCH, self._format.controller_epoch.encode(epoch + 1), version),
        ]
        outcome = self._znodes.multi([ops], MATCH_ANY_VERSION)[0]
        if not isinstance(outcome, Failure):
            return epoch + 1, _stat(outcome[1]).version
        if not isinstance(outcome.error, (NodeExistsError, BadVersionError)):
            raise outcome.error
        # Kafka's recovery from a lost response: the multi sent again may have been ours.
        holder, current = self.get_controller_id(), self.get_controller_epoch()
        if holder == controller_id and current is not None and current[0] == epoch + 1:
            return current
        raise ControllerMovedError(
            f"Controller moved to another broker: broker {controller_id} lost the election for "
            f"epoch {epoch + 1} (controller {holder}, epoch and its version {current})"
        ) from outcome.error

    def _controller_epoch_or_create(self) -> tuple[int, int]:
        current = self.get_controller_epoch()
        if current is not None:
            return current
        try:
            self._write(Op("create", paths.CONTROLLER_EPOCH, self._format.controller_epoch.encode(INITIAL_CONTROLLER_EPOCH)))
        except NodeExistsError:
            return self._controller_epoch_or_create()
        return INITIAL_CONTROLLER_EPOCH, INITIAL_CONTROLLER_EPOCH_VERSION

    def delete_controller(self, expected_controller_epoch_version: int) -> None:
        self._znodes.delete_recursive([paths.CONTROLLER], expected_controller_epoch_version)

    # --- Brokers -------------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> int:
        """Kafka's checked ephemeral create: a registration this session made already (its request
        sent again after a lost response) is a success; its czxid is the broker epoch."""
        path = paths.broker(info.id)
        try:
            return self._create_registration(info.id, path, self._format.broker.encode(info))
        except NodeExistsError:
            pass
        try:
            stat = self._znodes.exists(path)
        except NoAuthError:  # not readable: not ours
            raise NodeExistsError(f"{path} already exists (registered by another identity)", path) from None
        if stat is not None and stat.ephemeral_owner == self._znodes.session_id:
            return stat.czxid
        raise NodeExistsError(f"{path} already exists", path)

    def _create_registration(self, broker_id: int, path: str, data: object) -> int:
        """Create the ephemeral registration; its czxid (NodeExistsError when it exists)."""
        return self._znodes.create(path, data, ephemeral=True).czxid

    def deregister_broker(self, broker_id: int) -> None:
        """Delete this session's registration of ``broker_id`` (gone already, or another
        session's: left as it is)."""
        path = paths.broker(broker_id)
        stat = self._znodes.exists(path)
        if stat is None or stat.ephemeral_owner != self._znodes.session_id:
            return
        try:
            self._write(Op("delete", path, version=stat.version))
        except NoNodeError:
            pass

    def update_broker_info(self, info: BrokerInfo) -> None:
        self._write(Op("set", paths.broker(info.id), self._format.broker.encode(info)))

    def get_all_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        named = [(name, f"{paths.BROKER_IDS}/{name}") for name in self._children(paths.BROKER_IDS)]
        brokers: dict[int, tuple[BrokerInfo, int]] = {}
        for (name, path), found in zip(named, self._znodes.get_data([path for _, path in named])):
            if found is None:
                continue  # gone since the listing
            data, stat = _found(found)
            broker_id = paths.parse_id(name)
            try:
                if broker_id is None:
                    raise corrupt(path, _NAME_FIELD, f"must be a broker id (0 to {INT32_MAX}), found {name!r}")
                brokers[broker_id] = (self._format.broker.decode(data, path, broker_id), stat.czxid)
            except CorruptDataError as exc:
                self._logger.warning("Ignoring undecodable broker registration at %s: %s", path, exc)
        return dict(sorted(brokers.items()))

    def get_or_create_cluster_id(self) -> str:
        found = self._get(paths.CLUSTER_ID)
        if found is not None:
            return self._format.cluster_id.decode(found[0], paths.CLUSTER_ID)
        cluster_id = base64.urlsafe_b64encode(self._random_bytes(16)).rstrip(b"=").decode()
        self._znodes.ensure_paths([paths.CLUSTER_ID.rpartition("/")[0]])
        try:
            self._write(Op("create", paths.CLUSTER_ID, self._format.cluster_id.encode(cluster_id)))
        except NodeExistsError:
            return self.get_or_create_cluster_id()
        return cluster_id

    def get_finalized_features(self) -> FinalizedFeatures | None:
        found = self._get(paths.FEATURE)
        return None if found is None else self._format.feature.decode(found[0], paths.FEATURE)

    def set_finalized_features(self, features: FinalizedFeatures) -> None:
        self._put(paths.FEATURE, self._format.feature.encode(features))

    def get_producer_id_block(self) -> tuple[ProducerIdBlock | None, int | None]:
        path = paths.LATEST_PRODUCER_ID_BLOCK
        found = self._get(path)
        if found is None:
            return None, None
        data, stat = found
        return (self._format.producer_id_block.decode(data, path) if data else None), stat.version

    def set_producer_id_block(self, block: ProducerIdBlock, expected_version: int | None) -> bool:
        data = self._format.producer_id_block.encode(block)
        path = paths.LATEST_PRODUCER_ID_BLOCK
        op = Op("create", path, data) if expected_version is None else Op("set", path, data, expected_version)
        outcome = self._znodes.multi([[op]], MATCH_ANY_VERSION)[0]
        if isinstance(outcome, Failure):
            if isinstance(outcome.error, (BadVersionError, NodeExistsError, NoNodeError)):
                return False
            raise outcome.error
        return True

    # --- Topics and assignments ----------------------------------------------------------------

    def create_topic(self, topic: str, partitions: Mapping[int, ReplicaAssignment], topic_id: str | None = None,
                     config: Mapping[str, str] | None = None) -> None:
        """The config (created or replaced) and the topic znode in one multi, as ``AdminZkClient``."""
        validate_topic_name(topic)
        path = paths.topic(topic)
        create = Op("create", path, self._format.topic.encode(TopicAssignment(partitions, topic_id)))
        try:
            self._put(paths.topic_config(topic), self._format.config.encode(config or {}), [create])
        except NodeExistsError as exc:
            if exc.path != path:
                raise
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None

    def get_all_topics(self) -> set[str]:
        return set(self._children(paths.BROKER_TOPICS))

    def get_topic_assignments(self, topics: Iterable[str]) -> ReadResult[str, TopicAssignment]:
        decode = self._format.topic.decode
        return self._read_many(
            topics, paths.topic, lambda path, found: decode(_present(path, found)[0], path), TOPIC_READS_PER_REQUEST
        )

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment,
                             expected_controller_epoch_version: int = MATCH_ANY_VERSION) -> None:
        self._write(Op("set", paths.topic(topic), self._format.topic.encode(assignment)), expected_controller_epoch_version)

    def get_topic_partition_ids(self, topic: str) -> list[int]:
        path = paths.topic_partitions(topic)
        return paths.child_ids(path, self._children(path))

    def delete_topic(self, topic: str, expected_controller_epoch_version: int) -> None:
        self._znodes.delete_recursive(
            [paths.topic(topic), paths.topic_config(topic), paths.topic_deletion(topic)],
            expected_controller_epoch_version,
        )

    def get_topic_configs(self, topics: Iterable[str]) -> ReadResult[str, dict[str, str]]:
        decode = self._format.config.decode
        return self._read_many(topics, paths.topic_config, lambda path, found: {} if found is None else decode(found[0], path))

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace the overrides and, as Kafka's ``changeTopicConfig``, leave a change notification
        under ``/config/changes`` for brokers."""
        notification = Op(
            "create",
            f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
            self._format.config_change_notification.encode(f"topics/{topic}"),
            sequential=True,
        )
        self._put(paths.topic_config(topic), self._format.config.encode(config), [notification])

    # --- Partition states ----------------------------------------------------------------------

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> ReadResult[TopicPartition, LeaderIsrAndControllerEpoch]:
        decode = self._format.partition_state.decode

        def decoded(path: str, found: Found) -> LeaderIsrAndControllerEpoch:
            data, stat = _present(path, found)
            return decode(data, path, stat.version)

        return self._read_many(partitions, paths.partition_state, decoded, read=self._znodes.get_partition_states)

    def create_partition_states(self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
                                expected_controller_epoch_version: int) -> dict[TopicPartition, StoreError | None]:
        """Kafka's order: ``/partitions`` of each topic (:meth:`_partition_parents`), then per
        partition ``/partitions/<p>`` and its state in one multi item; parents that exist already
        are not created again."""
        fence = expected_controller_epoch_version
        results: dict[TopicPartition, StoreError | None] = {}
        existing: dict[str, set[str]] = {}
        for topic, found in self._partition_parents(list(dict.fromkeys(tp.topic for tp in states)), fence).items():
            if isinstance(found, StoreError):  # the topic does not exist
                results.update((tp, found) for tp in states if tp.topic == topic)
            else:
                existing[topic] = found

        encode = self._format.partition_state.encode
        by_key = getattr(self._znodes, "create_partition_states", None)  # the memory tree's: the same multi
        pending = [(tp, str(tp.partition) not in existing[tp.topic]) for tp in states if tp.topic in existing]
        while pending:
            if by_key is not None:
                outcomes = by_key([(tp, with_parent, encode(states[tp])) for tp, with_parent in pending], fence)
            else:  # a generator: the first multis are on their way while the rest are encoded
                outcomes = self._znodes.multi((
                    [Op("create", paths.topic_partition(tp))] * with_parent
                    + [Op("create", paths.partition_state(tp), encode(states[tp]))]
                    for tp, with_parent in pending
                ), fence)
            retry = []
            for (tp, with_parent), outcome in zip(pending, outcomes):
                if not isinstance(outcome, Failure):
                    results[tp] = None
                elif with_parent and outcome.op == 0 and isinstance(outcome.error, NodeExistsError):
                    retry.append((tp, False))  # created meanwhile: create only the state
                else:
                    results[tp] = outcome.error
            pending = retry
        return {tp: results[tp] for tp in states}

    def native_partition_parents(self, topics: Sequence[str], fence: int) -> list[list[str] | StoreError]:
        """Per topic, the names of its ``/partitions`` children, that znode created (fenced)
        where missing; or the error of a topic that does not exist (the native engine's creates
        on the ZooKeeper and memory stores start with it)."""
        return [found if isinstance(found, StoreError) else list(found)
                for found in self._partition_parents(topics, fence).values()]

    def _partition_parents(self, topics: Sequence[str], fence: int) -> dict[str, set[str] | StoreError]:
        """Each topic's ``/partitions`` children (created, fenced, where missing), or the error
        of a topic whose ``/partitions`` cannot be created (the topic does not exist)."""
        found: dict[str, set[str] | StoreError] = {}
        unlisted = []
        for topic, children in zip(topics, self._znodes.get_children([paths.topic_partitions(t) for t in topics])):
            if children is None:
                unlisted.append(topic)
            else:
                found[topic] = set(children)
        creates = [[Op("create", paths.topic_partitions(t))] for t in unlisted]
        for topic, outcome in zip(unlisted, self._znodes.multi(creates, fence)):
            if not isinstance(outcome, Failure) or isinstance(outcome.error, NodeExistsError):
                found[topic] = set()
            else:
                found[topic] = outcome.error
        return {topic: found[topic] for topic in topics}

    def update_partition_states(self, updates: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int,
                                expected_controller_epoch_version: int) -> UpdateResult:
        """Each state written at the version in its ``partition_epoch``, in fenced multis."""
        encode = self._format.partition_state.encode
        partitions = list(updates)
        versions = [state.partition_epoch for state in updates.values()]
        written = [state.with_partition_epoch(version + 1) for state, version in zip(updates.values(), versions)]
        data = [encode(LeaderIsrAndControllerEpoch(state, controller_epoch)) for state in written]
        outcomes = self._znodes.set_partition_states(partitions, data, versions, expected_controller_epoch_version)
        result = UpdateResult()
        for tp, state, outcome in zip(partitions, written, outcomes):
            if isinstance(outcome, int):  # the znode's new version
                result.successful[tp] = state if outcome == state.partition_epoch else state.with_partition_epoch(outcome)
            elif isinstance(outcome, BadVersionError):
                result.to_retry.append(tp)
            else:
                result.failed[tp] = outcome
        return result

    # --- Admin requests ------------------------------------------------------------------------

    def get_partition_reassignments(self) -> dict[TopicPartition, list[int]] | None:
        found = self._get(paths.REASSIGN_PARTITIONS)
        return None if found is None else self._format.reassignments.decode(found[0], paths.REASSIGN_PARTITIONS)

    def create_partition_reassignments(self, reassignments: Mapping[TopicPartition, Sequence[int]]) -> None:
        self._write(Op("create", paths.REASSIGN_PARTITIONS, self._format.reassignments.encode(reassignments)))

    def set_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int]], expected_controller_epoch_version: int
    ) -> None:
        data = self._format.reassignments.encode(reassignments)
        self._put(paths.REASSIGN_PARTITIONS, data, fence=expected_controller_epoch_version)

    def delete_partition_reassignments(self, expected_controller_epoch_version: int) -> None:
        self._znodes.delete_recursive([paths.REASSIGN_PARTITIONS], expected_controller_epoch_version)

    def get_preferred_replica_election(self) -> set[TopicPartition] | None:
        found = self._get(paths.PREFERRED_REPLICA_ELECTION)
        codec = self._format.preferred_replica_election
        return None if found is None else codec.decode(found[0], paths.PREFERRED_REPLICA_ELECTION)

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        data = self._format.preferred_replica_election.encode(partitions)
        self._write(Op("create", paths.PREFERRED_REPLICA_ELECTION, data))

    def delete_preferred_replica_election(self, expected_controller_epoch_version: int) -> None:
        self._znodes.delete_recursive([paths.PREFERRED_REPLICA_ELECTION], expected_controller_epoch_version)

    def get_topic_deletions(self) -> list[str]:
        return self._children(paths.DELETE_TOPICS)

    def create_topic_deletion(self, topic: str) -> None:
        """Mark ``topic`` for deletion, as ``AdminZkClient.deleteTopic``: one multi that requires
        the topic and creates the marker."""
        ops = [Op("check", paths.topic(topic)), Op("create", paths.topic_deletion(topic))]
        outcome = self._znodes.multi([ops], MATCH_ANY_VERSION)[0]
        if not isinstance(outcome, Failure):
            return
        if outcome.op == 0 and isinstance(outcome.error, NoNodeError):
            raise UnknownTopicOrPartitionError(f"Topic `{topic}` to delete does not exist")
        if outcome.op == 1 and isinstance(outcome.error, NodeExistsError):
            raise TopicAlreadyMarkedForDeletionError(f"Topic {topic} is already marked for deletion")
        raise outcome.error

    def delete_topic_deletions(self, topics: Iterable[str], expected_controller_epoch_version: int) -> None:
        self._znodes.delete_recursive(map(paths.topic_deletion, topics), expected_controller_epoch_version)

    # --- Notifications -------------------------------------------------------------------------

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        data = self._format.isr_change_notification.encode(partitions)
        return self._create_sequential(paths.isr_change_notification(paths.ISR_CHANGE_PREFIX), data)

    def get_isr_change_notifications(self) -> list[str]:
        return self._children(paths.ISR_CHANGE_NOTIFICATION)

    def get_isr_change_notification_partitions(self, names: Iterable[str]) -> list[TopicPartition]:
        found = self._read_existing(names, paths.isr_change_notification, self._format.isr_change_notification.decode)
        return [tp for partitions in found for tp in partitions]

    def delete_isr_change_notifications(self, names: Iterable[str], expected_controller_epoch_version: int) -> None:
        self._znodes.delete_recursive(map(paths.isr_change_notification, names), expected_controller_epoch_version)

    def create_log_dir_event_notification(self, broker_id: int) -> str:
        data = self._format.log_dir_event_notification.encode(broker_id)
        return self._create_sequential(paths.log_dir_event_notification(paths.LOG_DIR_EVENT_PREFIX), data)

    def get_log_dir_event_notifications(self) -> list[str]:
        return self._children(paths.LOG_DIR_EVENT_NOTIFICATION)

    def get_log_dir_event_brokers(self, names: Iterable[str]) -> list[int]:
        return self._read_existing(names, paths.log_dir_event_notification, self._format.log_dir_event_notification.decode)

    def delete_log_dir_event_notifications(self, names: Iterable[str], expected_controller_epoch_version: int) -> None:
        self._znodes.delete_recursive(map(paths.log_dir_event_notification, names), expected_controller_epoch_version)

    # --- Helpers -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._znodes!r})"


    def _get(self, path: str) -> Found:
        found = self._znodes.get_data([path])[0]
        return None if found is None else _found(found)

    def _children(self, path: str) -> list[str]:
        """Sorted children; none when the parent does not exist (as Kafka's getChildren)."""
        return self._znodes.get_children([path])[0] or []

    def _write(self, op: Op, fence: int = MATCH_ANY_VERSION) -> OpResult:
        """One operation (fenced unless ``fence`` is -1); its result, or its error raised."""
        outcome = self._znodes.multi([[op]], fence)[0]
        if isinstance(outcome, Failure):
            raise outcome.error
        return outcome[0]

    def _put(self, path: str, data: object, extra: Sequence[Op] = (), fence: int = MATCH_ANY_VERSION) -> None:
        """Create the node or replace its data, in one multi with ``extra``; done again when
        another writer creates or deletes the node in between."""
        for _ in range(RACE_ATTEMPTS):
            exists = self._znodes.exists(path) is not None
            ops = [Op("set" if exists else "create", path, data), *extra]
            outcome = self._znodes.multi([ops], fence)[0]
            if not isinstance(outcome, Failure):
                return
            if outcome.op != 0 or not isinstance(outcome.error, (NoNodeError, NodeExistsError)):
                raise outcome.error
        raise StoreError(f"{path} kept being created and deleted by other writers", path)

    def _create_sequential(self, prefix_path: str, data: object) -> str:
        return str(self._write(Op("create", prefix_path, data, sequential=True))).rpartition("/")[2]

    def _read_many(
        self,
        keys: Iterable[K],
        path_of: Callable[[K], str],
        decode: Callable[[str, Found], V],
        per_request: int | None = None,
        read: Callable[[list[K], int | None], list[Found | StoreError]] | None = None,
    ) -> ReadResult[K, V]:
        """Read one znode per key (by path, or by key with ``read``); ``decode(path, None)``
        handles an absent node. Each failure is reported for its key. Read ``READ_CHUNK`` keys at a
        time, so what a read holds until it is decoded dies young instead of filling the
        collector's oldest generation."""
        result: ReadResult[K, V] = ReadResult()
        pending = iter(keys)
        while chunk := list(itertools.islice(pending, READ_CHUNK)):
            chunk_paths = [path_of(key) for key in chunk]
            answers = self._znodes.get_data(chunk_paths, per_request) if read is None else read(chunk, per_request)
            for key, path, found in zip(chunk, chunk_paths, answers):
                try:
                    if isinstance(found, StoreError):
                        raise found
                    result.values[key] = decode(path, found)
                except StoreError as exc:
                    result.errors[key] = exc
        return result

    def _read_existing(self, names: Iterable[str], path_of: Callable[[str], str], decode: Callable[[Any, str], V]) -> list[V]:
        """The decoded content of the named nodes that exist (others were already processed)."""
        named = [path_of(name) for name in names]
        return [
            value for path, found in zip(named, self._znodes.get_data(named)) if found is not None
            for value in decoded_or_skipped(path, lambda: decode(_found(found)[0], path))  # noqa: B023 (called at once)
        ]


def _found(found: tuple[object, Stat] | StoreError) -> tuple[object, Stat]:
    if isinstance(found, StoreError):
        raise found
    return found


def _present(path: str, found: Found) -> tuple[object, Stat]:
    if found is None:
        raise NoNodeError(f"{path} does not exist", path)
    return found


def _stat(result: OpResult) -> Stat:
    assert isinstance(result, Stat), result
    return result


__all__ = ["BrokerCodec", "Codec", "KafkaZkClient", "StateCodec", "ZnodeFormat"]
