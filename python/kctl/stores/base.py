"""The state store protocol: what the controller needs from ZooKeeper, in Kafka's terms.

The methods mirror ``KafkaZkClient``'s (reference §6, §7): bulk where Kafka batches, conditional on
versions where Kafka is, and fenced by the controller epoch's version where Kafka wraps a write in
``[check(/controller_epoch, version), op]``. Every store (``memory``, ``zookeeper``, third-party
plugins) implements this protocol; the controller never sees paths or bytes.

Conventions:

- ``expected_controller_epoch_version`` is the fencing token: a write carrying a value ≥ 0 lands only
  while ``/controller_epoch`` still has that version, otherwise :class:`ControllerMovedError` is raised
  and nothing is written. -1 (``MATCH_ANY_VERSION``) means unfenced (admin tools, brokers).
- Bulk reads return a :class:`ReadResult`: decoded values plus a per-key error
  (:class:`NoNodeError` when absent, :class:`CorruptDataError` naming the path and field when the
  stored data cannot be decoded). One bad entry never hides the others.
- Watches are persistent registrations (the store re-arms ZooKeeper's one-shot watches) delivered
  as :class:`WatchEvent` to the listeners; listeners must only enqueue work, never block.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, runtime_checkable

from kctl.errors import ControllerMovedError, CorruptDataError, StoreError
from kctl.model import BrokerInfo, LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition

if TYPE_CHECKING:
    from kctl._engine import StateTable

MATCH_ANY_VERSION = -1
"""``expected_controller_epoch_version`` of an unfenced write."""

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


@dataclass
class ReadResult(Generic[K, V]):
    """The outcome of a bulk read: values found, and an error for every key that was not."""

    values: dict[K, V] = field(default_factory=dict)
    errors: dict[K, StoreError] = field(default_factory=dict)


@dataclass
class UpdateResult:
    """The outcome of a bulk conditional partition-state update (Kafka's UpdateLeaderAndIsrResult).

    ``successful`` holds the written states with their new ``partition_epoch`` (the store version);
    ``to_retry`` the partitions whose expected version was stale (BADVERSION: the leader changed the
    ISR concurrently); ``failed`` any other per-partition error.
    """

    successful: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    to_retry: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, StoreError] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicAssignment:
    """The content of ``/brokers/topics/<topic>``: the topic id and every partition's RS/AR/RR."""

    partitions: Mapping[int, ReplicaAssignment]
    topic_id: str | None = None


FEATURE_STATUS_DISABLED = 0
FEATURE_STATUS_ENABLED = 1
"""``/feature``'s ``status``: feature versioning disabled (IBP before 2.7-IV0) or enabled."""


@dataclass(frozen=True)
class FinalizedFeatures:
    """The content of ``/feature`` (Kafka's ``FeatureZNode``): the znode's format version (1, or
    2 from IBP 3.3-IV0, without ``min_version_level``), whether feature versioning is enabled
    (``status`` 1) or not (0), and each feature's finalized (maximum) version level."""

    version: int
    status: int
    features: Mapping[str, int]


@dataclass(frozen=True)
class ProducerIdBlock:
    """The content of ``/latest_producer_id_block``: the last block of producer ids handed out,
    its owner and its inclusive bounds (Kafka's ``ProducerIdsBlock``)."""

    broker: int
    block_start: int
    block_end: int


class WatchKind(enum.Enum):
    """What a watch observes; ``key`` of the registration and the event says which instance."""

    CONTROLLER = "controller"  # /controller created, changed or deleted
    BROKER_IDS = "broker_ids"  # children of /brokers/ids
    BROKER = "broker"  # data of /brokers/ids/<key: int>
    TOPICS = "topics"  # children of /brokers/topics
    TOPIC = "topic"  # data of /brokers/topics/<key: str>
    DELETE_TOPICS = "delete_topics"  # children of /admin/delete_topics
    REASSIGN_PARTITIONS = "reassign_partitions"  # /admin/reassign_partitions created/changed/deleted
    PREFERRED_REPLICA_ELECTION = "preferred_replica_election"  # /admin/preferred_replica_election
    ISR_CHANGE_NOTIFICATION = "isr_change_notification"  # children of /isr_change_notification
    LOG_DIR_EVENT_NOTIFICATION = "log_dir_event_notification"  # children of /log_dir_event_notification
    PARTITION_STATE = "partition_state"  # data of a state znode, key: TopicPartition (pre-AlterIsr)
    TOPIC_CONFIG = "topic_config"  # a topic's config changed, key: str
    SESSION = "session"  # this client's session expired (change EXPIRED) or was re-established


class ChangeType(enum.Enum):
    CREATED = "created"
    DELETED = "deleted"
    DATA_CHANGED = "data_changed"
    CHILDREN_CHANGED = "children_changed"
    EXPIRED = "expired"
    RECONNECTED = "reconnected"


@dataclass(frozen=True)
class WatchEvent:
    kind: WatchKind
    change: ChangeType
    key: object = None


WatchListener = Callable[[WatchEvent], None]

WATCH_KEY_TYPES: dict[WatchKind, type] = {
    WatchKind.BROKER: int,
    WatchKind.TOPIC: str,
    WatchKind.PARTITION_STATE: TopicPartition,
    WatchKind.TOPIC_CONFIG: str,
}
"""The key each keyed watch kind takes; the other kinds take none."""


def decoded_or_skipped(path: str, decode: Callable[[], V]) -> list[V]:
    """``[decode()]``, or nothing and a warning naming ``path`` when its data cannot be decoded: one
    malformed notification never holds back the others (Kafka logs and skips what it cannot parse)."""
    try:
        return [decode()]
    except CorruptDataError as exc:
        logger.warning("Ignoring the undecodable %s: %s", path, exc)
        return []


def check_watch_key(kind: WatchKind, key: object) -> None:
    """Refuse a watch registration whose key does not fit its kind (a programming error)."""
    expected = WATCH_KEY_TYPES.get(kind)
    if expected is None and key is not None:
        raise TypeError(f"a {kind.name} watch takes no key, got {key!r}")
    if expected is not None and not isinstance(key, expected):
        raise TypeError(f"a {kind.name} watch takes a {expected.__name__} key, got {key!r}")


@runtime_checkable
class StateStore(Protocol):
    """A session on the cluster's metadata store (one per process or component)."""

    # --- Session and watches -------------------------------------------------------------------

    def close(self) -> None:
        """End the session; its ephemeral registrations (controller, broker) disappear."""

    def add_listener(self, listener: WatchListener) -> None: ...

    def remove_listener(self, listener: WatchListener) -> None: ...

    def watch(self, kind: WatchKind, key: object = None) -> None:
        """Register a persistent watch; events for it go to every listener of this session."""

    def unwatch(self, kind: WatchKind, key: object = None) -> None: ...

    # --- Controller election and fencing -------------------------------------------------------

    def get_controller_id(self) -> int | None: ...

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """``(epoch, version of /controller_epoch)``, or None before the first election."""

    def register_controller_and_increment_epoch(self, controller_id: int) -> tuple[int, int]:
        """Create the ephemeral ``/controller`` and bump ``/controller_epoch`` in one multi
        (reference §6.2); returns ``(new epoch, new epoch version)``. Raises
        :class:`ControllerMovedError` when another controller won."""

    def delete_controller(self, expected_controller_epoch_version: int) -> None: ...

    # --- Brokers -------------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns the broker epoch (its czxid)."""

    def deregister_broker(self, broker_id: int) -> None:
        """Delete ``/brokers/ids/<id>`` if this session registered it (a controller's entry when it
        resigns with its session alive)."""

    def update_broker_info(self, info: BrokerInfo) -> None: ...

    def get_all_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        """Every registered broker with its epoch; undecodable registrations are logged and left out."""

    def get_or_create_cluster_id(self) -> str:
        """``/cluster/id``, created with a new random id if absent (Kafka's ``getOrGenerateClusterId``,
        which every broker runs at start-up)."""

    def get_finalized_features(self) -> FinalizedFeatures | None:
        """``/feature``, or None when absent."""

    def set_finalized_features(self, features: FinalizedFeatures) -> None:
        """Create or overwrite ``/feature`` (the controller's, at failover)."""

    def get_producer_id_block(self) -> tuple[ProducerIdBlock | None, int | None]:
        """``/latest_producer_id_block`` and its version: no block while it is absent (version
        None) or empty (as brokers create it at start-up)."""

    def set_producer_id_block(self, block: ProducerIdBlock, expected_version: int | None) -> bool:
        """Write ``block`` if the znode is still at ``expected_version`` (None: create it); False
        when another writer came first (Kafka's ``conditionalUpdatePath``)."""

    # --- Topics and assignments ----------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        partitions: Mapping[int, ReplicaAssignment],
        topic_id: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Write the topic config then the topic znode (admin; :class:`TopicExistsError` if present)."""

    def get_all_topics(self) -> set[str]: ...

    def get_topic_assignments(self, topics: Iterable[str]) -> ReadResult[str, TopicAssignment]: ...

    def set_topic_assignment(
        self, topic: str, assignment: TopicAssignment, expected_controller_epoch_version: int = MATCH_ANY_VERSION
    ) -> None: ...

    def get_topic_partition_ids(self, topic: str) -> list[int]:
        """Children of ``/brokers/topics/<topic>/partitions``: partitions with an initialised state
        (a child not named by a partition id is logged and left out)."""

    def delete_topic(self, topic: str, expected_controller_epoch_version: int) -> None:
        """Remove the topic znode (recursively), its config and its deletion marker."""

    def get_topic_configs(self, topics: Iterable[str]) -> ReadResult[str, dict[str, str]]:
        """Each topic's config overrides (an empty dict when it has none)."""

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace a topic's config overrides and notify watchers of ``TOPIC_CONFIG``."""

    # --- Partition states ----------------------------------------------------------------------

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> ReadResult[TopicPartition, LeaderIsrAndControllerEpoch]: ...

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_version: int
    ) -> dict[TopicPartition, StoreError | None]:
        """Create the state znodes (and their parents); None marks success for a partition."""

    def update_partition_states(
        self,
        updates: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_version: int,
    ) -> UpdateResult:
        """Conditionally write each state at the version in its ``partition_epoch``."""

    # --- Admin requests ------------------------------------------------------------------------

    def get_partition_reassignments(self) -> dict[TopicPartition, list[int]] | None:
        """The content of ``/admin/reassign_partitions``, or None when it does not exist."""

    def create_partition_reassignments(self, reassignments: Mapping[TopicPartition, Sequence[int]]) -> None: ...

    def set_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int]], expected_controller_epoch_version: int
    ) -> None: ...

    def delete_partition_reassignments(self, expected_controller_epoch_version: int) -> None: ...

    def get_preferred_replica_election(self) -> set[TopicPartition] | None: ...

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None: ...

    def delete_preferred_replica_election(self, expected_controller_epoch_version: int) -> None: ...

    def get_topic_deletions(self) -> list[str]: ...

    def create_topic_deletion(self, topic: str) -> None: ...

    def delete_topic_deletions(self, topics: Iterable[str], expected_controller_epoch_version: int) -> None: ...

    # --- Notifications -------------------------------------------------------------------------

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str: ...

    def get_isr_change_notifications(self) -> list[str]: ...

    def get_isr_change_notification_partitions(self, names: Iterable[str]) -> list[TopicPartition]:
        """The partitions of the named notifications that exist; undecodable ones are logged and left out."""

    def delete_isr_change_notifications(self, names: Iterable[str], expected_controller_epoch_version: int) -> None: ...

    def create_log_dir_event_notification(self, broker_id: int) -> str: ...

    def get_log_dir_event_notifications(self) -> list[str]: ...

    def get_log_dir_event_brokers(self, names: Iterable[str]) -> list[int]:
        """The brokers of the named notifications that exist; undecodable ones are logged and left out."""

    def delete_log_dir_event_notifications(
        self, names: Iterable[str], expected_controller_epoch_version: int
    ) -> None: ...


# --- The native engine's fast paths -------------------------------------------------------------------
#
# The ``rust`` engine reads and writes partition states (its hot path: every election, every ISR
# change) through a store's ``get_partition_states`` / ``update_partition_states``, one Python call
# per bulk operation. A store may offer one of these protocols as well, so that the engine does the
# same work natively, with no Python object per partition. The engine takes the fast path of a
# store whose class (or a base class) defines the protocol's first method, and only while that
# class's partition-state methods are the store's own: a subclass that overrides them (a fault
# injector) is used through them. Whatever a fast path cannot decode is read again through
# ``get_partition_states``, so errors read the same on both paths; everything else (configs, and
# creates but on ZooKeeper) always goes through the ``StateStore`` methods.


@runtime_checkable
class BulkWatches(Protocol):
    """A store that registers many watches of one kind at once (a failover watches every topic
    and every broker): the ZooKeeper store sets their watches in one round of pipelined requests
    instead of a round trip each. The controller registers them one by one on other stores."""

    def watch_all(self, kind: WatchKind, keys: Iterable[object]) -> None:
        """:meth:`StateStore.watch` for each of ``keys``."""


class NativeStateTable(Protocol):
    """The in-memory fast path: the engine reads and writes the store's native state table
    (``kctl._engine.StateTable``) directly, inside one bulk operation at a time."""

    def native_begin(self) -> tuple[StateTable, int, int, bool]:
        """Start a bulk operation on the table, which stays locked until :meth:`native_end`:
        returns the table, the version of ``/controller_epoch`` (-1 when absent) the engine fences
        writes with, the zxid the operation commits with, and whether any session watches
        partition states (the engine then lists the states it changed). Raises the store's error,
        without locking, when the session has ended."""

    def native_end(self, wrote: bool, written: Sequence[tuple[str, int]] = ()) -> None:
        """End the operation begun with :meth:`native_begin` (always called once after it):
        commit when ``wrote``, and deliver watch events for the ``(topic, partition)`` states
        ``written``."""

    def native_partition_parents(self, topics: Sequence[str], fence: int) -> list[list[str] | StoreError]:
        """Before creating partition states: per topic, the names of its ``/partitions``
        children, that znode created (fenced) where missing; or the error of a topic that does
        not exist."""

    def native_create_partition_znodes(self, creates: Sequence[tuple[str, Sequence[int], Sequence[int]]]) -> bool:
        """Inside a bulk operation that creates partition states in the table: create the
        partition znodes they need, per topic ``(topic, ids to create, ids there already)``, all
        or none (False: the store's ``create_partition_states`` is to do the creation, as it does
        on a store without this method)."""


class NativeZooKeeperCodec(Protocol):
    """The ZooKeeper fast path: the engine builds the multi and multiRead request bodies for
    partition states and decodes the answers itself; the store only moves bytes over its
    connection and names the errors. The engine's ``zk_read_partition_states`` /
    ``zk_write_partition_states`` / ``zk_create_partition_states`` use the same methods for the
    store's own bulk calls."""

    def native_exchange(self, opcode: int, requests: Sequence[tuple[bytes, str]]) -> list[bytes]:
        """Send complete request bodies of type ``opcode`` (multi or multiRead), pipelined, and
        return the response bodies in order; each ``(body, path)`` names the znode an error of the
        request as a whole is reported for."""

    def native_zk(self) -> tuple[str, int, int, int, bool, bytes | None]:
        """The chroot, the ops per multi, the reads per multiRead, the bytes of ops per request,
        whether the servers have multiRead (without it, reads go through Python), and the ACL
        (jute-encoded) every created znode gets (None: a policy decides per path, and creates go
        through ``create_partition_states``)."""

    def native_partition_parents(self, topics: Sequence[str], fence: int) -> list[list[str] | StoreError]:
        """Before creating partition states: per topic, the names of its ``/partitions``
        children, that znode created (fenced) where missing; or the error of a topic that does
        not exist."""

    def native_error(self, path: str, code: int) -> StoreError:
        """The store's error for ZooKeeper's error ``code`` on ``path`` (without the chroot)."""

    def native_create_error(self, path: str, code: int) -> StoreError:
        """The store's error for a create of ``path`` (without the chroot) that failed with ``code``."""

    def native_fence_error(self, code: int, fence: int) -> ControllerMovedError:
        """The error of a multi whose ``check(/controller_epoch, fence)`` failed with ``code``."""

    def native_limit_error(self, path: str, size: int) -> StoreError:
        """The error of a write to ``path`` too large for any request."""

    def native_wire_error(self, message: str) -> StoreError:
        """A response the engine could not decode."""
