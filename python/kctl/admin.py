"""Admin operations that write the store for the controller to act on (Kafka's AdminZkClient).

Creating a topic, adding partitions, requesting a deletion, a reassignment or a preferred election
is, in ZooKeeper-mode Kafka, a validated write of an admin znode; the controller notices through its
watches. These functions are that write, used by the controller's admin entry points and by the
``kctl topics / reassign / elect-leaders`` tools alike. Every check happens before anything is
written, so a refused request leaves the store as it was; a topic too large for one znode is
refused before any of its replicas is placed.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Iterable, Mapping, Sequence

from kctl.assignment import (
    RackAwareMode,
    add_partitions_assignment,
    assign_replicas_to_brokers,
    broker_metadatas,
    validate_replica_assignment,
)
from kctl.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    InvalidTopicError,
    NoNodeError,
    TopicAlreadyMarkedForDeletionError,
    TopicDeletionDisabledError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kctl.model import (
    ReplicaAssignment,
    TopicPartition,
    int_problem,
    topic_collision_key,
    validate_partition_id,
    validate_topic_name,
)
from kctl.stores.base import StateStore, TopicAssignment
from kctl.topic_config import validate_topic_config
from kctl.stores.zkdata import TopicZNode
from kctl.stores.zookeeper import JUTE_MAXBUFFER

_TOPIC_ID_LENGTH = 22  # generate_topic_id's
_EMPTY_TOPIC_ZNODE = len(TopicZNode.encode(TopicAssignment({}, "A" * _TOPIC_ID_LENGTH)))


def generate_topic_id(rng: random.Random) -> str:
    """A topic id in Kafka's form: 16 random bytes, URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")


def least_topic_znode_bytes(partitions: int, replication_factor: int) -> int:
    """A lower bound of the size of a topic's assignment znode (``/brokers/topics/<t>``), known
    before any replica is placed: every partition written as ``"p":[b,…]`` with one-digit ids."""
    return _topic_znode_bytes(partitions, replication_factor, 1, _EMPTY_TOPIC_ZNODE)


def most_topic_znode_bytes(partitions: int, replication_factor: int, broker_ids: Iterable[int], topic_id: str) -> int:
    """An upper bound of the size of a placed topic's assignment znode: every replica written with
    as many digits as the largest of ``broker_ids`` (placement fills no reassignment lists)."""
    empty = len(TopicZNode.encode(TopicAssignment({}, topic_id)))
    return _topic_znode_bytes(partitions, replication_factor, len(str(max(broker_ids, default=0))), empty)


def _topic_znode_bytes(partitions: int, replication_factor: int, id_digits: int, empty: int) -> int:
    """The size of a topic znode of ``partitions`` lists of ``replication_factor`` ids of
    ``id_digits`` digits each (``"p":[b,…]`` per partition), its empty form taking ``empty``."""
    if partitions <= 0 or replication_factor <= 0:
        return empty
    digits, width, low = 0, 1, 0
    while low < partitions:  # the digits of the partition ids 0 … partitions-1
        high = 10 ** width
        digits += (min(partitions, high) - low) * width
        low, width = high, width + 1
    return empty + digits + partitions * ((id_digits + 1) * replication_factor + 4) + partitions - 1


def max_partitions(replication_factor: int) -> int:
    """The most partitions a topic of ``replication_factor`` may have and still fit one znode."""
    low, high = 0, JUTE_MAXBUFFER  # each partition takes more than one byte
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if least_topic_znode_bytes(middle, replication_factor) <= JUTE_MAXBUFFER else (low, middle - 1)
    return low


def check_topic_fits(name: str, partitions: object, replication_factor: object) -> None:
    """Refuse, before placing any replica, a topic whose assignment cannot fit in one znode
    (ZooKeeper refuses data larger than its ``jute.maxbuffer``, 1 MiB by default)."""
    if not isinstance(partitions, int) or not isinstance(replication_factor, int):
        return  # the assignment's own checks name the wrong type
    if int_problem(partitions) or int_problem(replication_factor):
        return  # and a count outside Kafka's Int
    least = least_topic_znode_bytes(partitions, replication_factor)
    if least > JUTE_MAXBUFFER:
        raise InvalidPartitionsError(
            f"Topic '{name}' cannot have {partitions} partitions of {replication_factor} replicas: their assignment "
            f"takes at least {least} bytes, more than fits in one znode (ZooKeeper's jute.maxbuffer, "
            f"{JUTE_MAXBUFFER} bytes); at most {max_partitions(replication_factor)} partitions fit"
        )


def check_assignment_fits(name: str, assignment: TopicAssignment) -> None:
    """Refuse an assignment (explicit, or placed) that does not fit in one znode."""
    size = len(TopicZNode.encode(assignment))
    if size > JUTE_MAXBUFFER:
        raise InvalidReplicaAssignmentError(
            f"Topic '{name}': the assignment of {len(assignment.partitions)} partitions takes {size} bytes, more than "
            f"fits in one znode (ZooKeeper's jute.maxbuffer, {JUTE_MAXBUFFER} bytes)"
        )


def create_topic(
    store: StateStore,
    name: str,
    *,
    broker_racks: Mapping[int, str | None],
    partitions: int | None = None,
    replication_factor: int | None = None,
    assignment: Mapping[int, Sequence[int]] | None = None,
    config: Mapping[str, object] | None = None,
    topic_id: str | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Validate and write a new topic; returns its assignment.

    Either ``assignment`` (explicit replica lists, validated against the registered brokers) or
    ``partitions`` and ``replication_factor`` (placed by Kafka's rack-aware algorithm over
    ``broker_racks``) must be given.
    """
    validate_topic_name(name)
    existing = store.get_all_topics()
    if name in existing:
        raise TopicExistsError(f"Topic '{name}' already exists.")
    key = topic_collision_key(name)
    clash = sorted(t for t in existing if topic_collision_key(t) == key)
    if clash:
        raise InvalidTopicError(
            f"Topic '{name}' collides with existing topics: {', '.join(clash)} (names may not differ only by '.' and '_')"
        )
    topic_config = validate_topic_config(config)
    known_id = topic_id or "A" * _TOPIC_ID_LENGTH
    if assignment is not None:
        if partitions is not None or replication_factor is not None:
            raise InvalidReplicaAssignmentError(
                "Give either an explicit assignment or a partition count and replication factor, not both"
            )
        validate_replica_assignment(assignment, set(broker_racks))
        placed = {int(p): [int(r) for r in replicas] for p, replicas in sorted(assignment.items())}
        may_not_fit = True
    else:
        if partitions is None or replication_factor is None:
            raise InvalidPartitionsError("A partition count and a replication factor are required")
        check_topic_fits(name, partitions, replication_factor)
        metadata = broker_metadatas(broker_racks, RackAwareMode.ENFORCED)
        placed = assign_replicas_to_brokers(metadata, partitions, replication_factor, rng=rng)
        # encoding the assignment to measure it costs more than placing it: only near the limit
        may_not_fit = most_topic_znode_bytes(partitions, replication_factor, broker_racks, known_id) > JUTE_MAXBUFFER
    replicas = {p: ReplicaAssignment(tuple(r)) for p, r in placed.items()}
    if may_not_fit:
        check_assignment_fits(name, TopicAssignment(replicas, known_id))
    store.create_topic(name, replicas, topic_id=topic_id, config=topic_config)
    return placed


def add_partitions(
    store: StateStore,
    topic: str,
    new_total: int,
    *,
    broker_racks: Mapping[int, str | None],
    manual: Mapping[int, Sequence[int]] | None = None,
) -> dict[int, list[int]]:
    """Grow a topic to ``new_total`` partitions; returns the new partitions' assignment."""
    read = store.get_topic_assignments([topic])
    if topic not in read.values:
        error = read.errors.get(topic)
        if error is not None and not isinstance(error, NoNodeError):
            raise error  # corrupt topic data: say so rather than pretend the topic is missing
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
    current = read.values[topic]
    if topic in store.get_topic_deletions():
        raise InvalidTopicError(f"Topic '{topic}' is marked for deletion; partitions cannot be added")
    existing = {p: list(a.replicas) for p, a in current.partitions.items()}
    check_topic_fits(topic, new_total, len(existing.get(0, ())))
    metadata = broker_metadatas(broker_racks, RackAwareMode.ENFORCED)
    added = add_partitions_assignment(metadata, existing, new_total, manual)
    full = dict(current.partitions)
    full.update({p: ReplicaAssignment(tuple(r)) for p, r in added.items()})
    grown = TopicAssignment(full, current.topic_id)
    check_assignment_fits(topic, grown)
    store.set_topic_assignment(topic, grown)
    return added


def change_topic_config(store: StateStore, topic: str, config: Mapping[str, object]) -> dict[str, str]:
    """Replace a topic's config overrides (Kafka's ``changeTopicConfig``); returns what was stored."""
    validate_topic_name(topic)
    if topic not in store.get_all_topics():
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
    stored = validate_topic_config(config)
    store.set_topic_config(topic, stored)
    return stored


def delete_topic(store: StateStore, topic: str, *, delete_topic_enable: bool = True) -> None:
    """Request a deletion (``/admin/delete_topics/<topic>``)."""
    if not delete_topic_enable:
        raise TopicDeletionDisabledError("Topic deletion is disabled (delete.topic.enable=false)")
    if topic not in store.get_all_topics():
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
    if topic in store.get_topic_deletions():
        raise TopicAlreadyMarkedForDeletionError(f"Topic '{topic}' is already marked for deletion.")
    store.create_topic_deletion(topic)


def request_reassignment(store: StateStore, reassignments: Mapping[TopicPartition, Sequence[int]]) -> None:
    """Write ``/admin/reassign_partitions`` (the pre-API path; refused while one is in progress)."""
    if not reassignments:
        raise InvalidReplicaAssignmentError("No partitions to reassign")
    for tp, replicas in reassignments.items():
        validate_partition_id(tp, 0, InvalidRequestError)
        replicas = list(replicas)
        problems = [f": a broker id {p}" for p in (int_problem(r, 0) for r in replicas) if p is not None]
        if not replicas or len(set(replicas)) != len(replicas) or problems:
            raise InvalidReplicaAssignmentError(f"Invalid replica list {replicas} for partition {tp}{''.join(problems[:1])}")
    store.create_partition_reassignments(reassignments)


def request_preferred_replica_election(store: StateStore, partitions: Sequence[TopicPartition]) -> None:
    """Write ``/admin/preferred_replica_election``."""
    if not partitions:
        raise InvalidPartitionsError("No partitions given for a preferred replica election")
    for tp in partitions:
        validate_partition_id(tp, 0, InvalidRequestError)
    store.create_preferred_replica_election(partitions)
