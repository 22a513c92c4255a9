"""Replica assignment for new topics and partitions, done the way Kafka's AdminUtils does it (reference §9).

Placement is a pure function of the broker list, the counts, a start index and a replica shift.
The public functions validate their input and then choose the start index and shift: at random
unless a fixed start is given. So the same input with the same seeded ``random.Random`` always
gives the same assignment.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from kctl.errors import (
    AdminOperationError,
    BrokerNotAvailableError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    KctlError,
)
from kctl.model import INT32_MIN, int_problem

__all__ = [
    "BrokerMetadata",
    "RackAwareMode",
    "add_partitions_assignment",
    "assign_replicas_to_brokers",
    "broker_metadatas",
    "rack_alternated_broker_list",
    "validate_replica_assignment",
]


@dataclass(frozen=True)
class BrokerMetadata:
    """A broker as replica assignment sees it: its id and, for rack-aware placement, its rack."""

    id: int
    rack: str | None = None

    def __post_init__(self) -> None:
        _require_broker_id(self.id, "")
        if self.rack is not None and not isinstance(self.rack, str):
            raise InvalidReplicaAssignmentError(
                f"Rack of broker {self.id} must be a string or None, got {self.rack!r}."
            )


class RackAwareMode(enum.Enum):
    """How rack information is used when only some brokers have a rack (AdminZkClient's modes)."""

    ENFORCED = "enforced"
    """Use racks, and refuse to assign if only some brokers have one."""
    SAFE = "safe"
    """Use racks if every broker has one, otherwise ignore all of them."""
    DISABLED = "disabled"
    """Ignore racks."""


def broker_metadatas(
    broker_racks: Mapping[int, str | None], mode: RackAwareMode = RackAwareMode.ENFORCED
) -> list[BrokerMetadata]:
    """The brokers sorted by id (the order assignment expects), with racks kept or dropped by ``mode``."""
    brokers = sorted(
        (BrokerMetadata(broker, rack) for broker, rack in broker_racks.items()), key=lambda b: b.id
    )
    without_rack = [b.id for b in brokers if b.rack is None]
    mixed = 0 < len(without_rack) < len(brokers)
    if mode is RackAwareMode.ENFORCED and mixed:
        raise AdminOperationError(
            f"Not all brokers have rack information; brokers without a rack: {without_rack}. "
            "Use RackAwareMode.SAFE or RackAwareMode.DISABLED to assign replicas without racks."
        )
    if mode is RackAwareMode.DISABLED or (mode is RackAwareMode.SAFE and mixed):
        return [BrokerMetadata(b.id) for b in brokers]
    return brokers


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists (leader first) for ``n_partitions`` partitions numbered from ``start_partition_id``.

    Kafka spreads leaders round-robin from a start index and puts followers at a shifted distance
    that grows every ``len(brokers)`` partitions. It is rack-aware when every broker has a rack and
    rack-unaware when none has one. A negative ``fixed_start_index`` draws the start index and
    then the replica shift from ``rng``, in two independent draws. A fixed start index is used as
    the shift too.
    """
    if _require_int(n_partitions, "Number of partitions", InvalidPartitionsError) <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if _require_int(replication_factor, "Replication factor", InvalidReplicationFactorError) <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    _check_brokers(brokers)
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    fixed_start_index = _require_int(
        fixed_start_index, "Fixed start index", InvalidReplicaAssignmentError
    )
    first_partition = max(
        0, _require_int(start_partition_id, "Start partition id", InvalidPartitionsError)
    )
    broker_racks = {b.id: b.rack for b in brokers if b.rack is not None}
    if broker_racks and len(broker_racks) < len(brokers):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )

    if fixed_start_index >= 0:
        start_index = replica_shift = fixed_start_index
    else:
        rng = random.Random() if rng is None else rng
        start_index = rng.randrange(len(brokers))
        replica_shift = rng.randrange(len(brokers))

    if broker_racks:
        return _assign_rack_aware(
            broker_racks, n_partitions, replication_factor, start_index, replica_shift, first_partition
        )
    return _assign_rack_unaware(
        [b.id for b in brokers],
        n_partitions,
        replication_factor,
        start_index,
        replica_shift,
        first_partition,
    )


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """The brokers ordered so that consecutive entries are on different racks as far as possible.

    Racks are taken in name order, and in each round every rack that still has brokers gives its
    next broker (lowest id first).
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    rounds = max((len(column) for column in columns), default=0)
    return [column[i] for i in range(rounds) for column in columns if i < len(column)]


def add_partitions_assignment(
    brokers: Sequence[BrokerMetadata],
    existing: Mapping[int, Sequence[int]],
    new_total: int,
    manual: Mapping[int, Sequence[int]] | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for the partitions that take a topic from ``len(existing)`` to ``new_total``.

    Only the new partitions are returned. ``manual`` gives their replica lists explicitly, and it is
    validated against ``brokers`` and partition 0's replication factor. Without it the new
    partitions continue the topic's layout: Kafka starts at the broker holding partition 0's
    leader (or the next higher id) with a fixed start index, so the result is deterministic and
    ``rng`` is never drawn from. It is accepted so that callers can pass the same arguments as to
    :func:`assign_replicas_to_brokers`. With racks, Kafka takes that index from the id-ordered
    broker list but applies it to the rack-alternated one, and kctl does the same.
    """
    if 0 not in existing:
        raise AdminOperationError(
            "Unexpected existing replica assignment, partition id 0 is missing. "
            f"Assignment: {dict(existing)}"
        )
    partition0 = list(existing[0])
    if not partition0:
        raise AdminOperationError(
            "Unexpected existing replica assignment, partition id 0 has no replicas."
        )
    current = len(existing)
    if _require_int(new_total, "Number of partitions", InvalidPartitionsError) <= current:
        raise InvalidPartitionsError(
            "The number of partitions for a topic can only be increased. "
            f"Topic currently has {current} partitions, {new_total} would not be an increase."
        )
    _check_brokers(brokers)
    if manual is not None:
        return _checked_new_partitions(
            manual, range(current, new_total), len(partition0), {b.id for b in brokers}
        )
    start_index = next((i for i, b in enumerate(brokers) if b.id >= partition0[0]), 0)
    return assign_replicas_to_brokers(
        brokers, new_total - current, len(partition0), start_index, current, rng
    )


def validate_replica_assignment(
    assignment: Mapping[int, Sequence[int]], live_brokers: Collection[int] | None = None
) -> None:
    """Check an explicit assignment given at topic creation (Kafka's validateTopicCreate rules).

    There must be at least one partition. Every partition needs a non-empty list of distinct,
    non-negative broker ids, all lists need the same length, and the partition ids must be exactly
    0..n-1. Kafka's validateTopicCreate does not check that the brokers exist. kctl does, when
    ``live_brokers`` is given, so that a typo fails at once instead of leaving offline partitions.
    """
    if not assignment:
        raise InvalidReplicaAssignmentError("A replica assignment needs at least one partition.")
    checked = {
        _require_int(partition, "Partition id", InvalidReplicaAssignmentError): _checked_replicas(
            partition, replicas
        )
        for partition, replicas in assignment.items()
    }
    first = min(checked)
    _check_replication_factor(checked, first, len(checked[first]))
    if sorted(checked) != list(range(len(checked))):
        raise InvalidReplicaAssignmentError(
            "partitions should be a consecutive 0-based integer sequence, "
            f"got partition ids {sorted(checked)}."
        )
    if live_brokers is not None:
        unknown = {b for replicas in checked.values() for b in replicas} - set(live_brokers)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Replica assignment refers to brokers that are not live: {sorted(unknown)} "
                f"(live brokers: {sorted(live_brokers)})."
            )


# --- Deterministic core ---------------------------------------------------------------------------


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    """Kafka's replicaIndex: the j-th follower position after ``first``, never ``first`` itself."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def _partition_leaders(
    n: int, n_partitions: int, start_index: int, replica_shift: int, first_partition: int
) -> Iterator[tuple[int, int, int]]:
    """Yield (partition id, leader position, replica shift), the walk both placements share.

    The shift grows by one each time the partition id reaches a multiple of ``n``, so every round
    of ``n`` partitions puts followers at a different distance from their leaders.
    """
    shift = replica_shift
    for partition in range(first_partition, first_partition + n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        yield partition, (partition + start_index) % n, shift


def _assign_rack_unaware(
    broker_ids: Sequence[int],
    n_partitions: int,
    replication_factor: int,
    start_index: int,
    replica_shift: int,
    first_partition: int,
) -> dict[int, list[int]]:
    n = len(broker_ids)
    return {
        partition: [broker_ids[first]]
        + [broker_ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        for partition, first, shift in _partition_leaders(
            n, n_partitions, start_index, replica_shift, first_partition
        )
    }


def _assign_rack_aware(
    broker_racks: Mapping[int, str],
    n_partitions: int,
    replication_factor: int,
    start_index: int,
    replica_shift: int,
    first_partition: int,
) -> dict[int, list[int]]:
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    racks = [broker_racks[b] for b in arranged]
    n_racks = len(set(racks))
    assignment: dict[int, list[int]] = {}
    followers = replication_factor - 1
    offsets: list[int] = []
    offsets_shift = None
    for partition, first, shift in _partition_leaders(
        n, n_partitions, start_index, replica_shift, first_partition
    ):
        if shift != offsets_shift:
            # _replica_index(first, shift * n_racks, k, n) is (first + offsets[k % (n - 1)]) % n
            offsets = [1 + (shift * n_racks + k) % (n - 1) for k in range(n - 1)] if followers else []
            offsets_shift = shift
        replicas = [arranged[first]]
        racks_used = {racks[first]}
        k = 0  # carried across followers: each search resumes where the previous one stopped
        while len(replicas) <= followers:
            position = (first + offsets[k % (n - 1)]) % n
            k += 1
            candidate, rack = arranged[position], racks[position]
            # Kafka also accepts a used broker once every broker is used; RF <= n rules that out.
            if candidate not in replicas and (rack not in racks_used or len(racks_used) == n_racks):
                replicas.append(candidate)
                racks_used.add(rack)
        assignment[partition] = replicas
    return assignment


# --- Validation helpers ---------------------------------------------------------------------------


def _require_int(value: object, what: str, error: type[KctlError], minimum: int = INT32_MIN) -> int:
    """Reject non-integers, bools (which Python counts as ints) and integers outside Kafka's Int
    (or below ``minimum``), before they reach arithmetic or the engine."""
    problem = int_problem(value, minimum)
    if problem is not None:
        raise error(f"{what} {problem}.")
    return value  # type: ignore[return-value]


def _require_broker_id(value: object, where: str) -> int:
    return _require_int(value, f"Broker id{where}", InvalidReplicaAssignmentError, minimum=0)


def _check_brokers(brokers: Sequence[BrokerMetadata]) -> None:
    seen: set[int] = set()
    for broker in brokers:
        if not isinstance(broker, BrokerMetadata):
            raise InvalidReplicaAssignmentError(
                f"Brokers must be given as BrokerMetadata, got {broker!r}."
            )
        if broker.id in seen:
            raise InvalidReplicaAssignmentError(f"Duplicate broker id {broker.id} in the broker list.")
        seen.add(broker.id)


def _checked_replicas(partition: object, replicas: object) -> list[int]:
    """The replica list of one partition as ints: non-empty, no negative or repeated broker ids."""
    if isinstance(replicas, (str, bytes)) or not isinstance(replicas, Sequence):
        raise InvalidReplicaAssignmentError(
            f"Replicas of partition id {partition} must be a sequence of broker ids, got {replicas!r}."
        )
    if not replicas:
        raise InvalidReplicaAssignmentError(
            f"Cannot have replication factor of 0 for partition id {partition}."
        )
    ids = [_require_broker_id(b, f" for partition id {partition}") for b in replicas]
    repeated = sorted({b for b in ids if ids.count(b) > 1})
    if repeated:
        raise InvalidReplicaAssignmentError(
            f"Duplicate brokers not allowed in replica assignment: {_join(ids)} "
            f"for partition id {partition} (repeated: {_join(repeated)})."
        )
    return ids


def _check_replication_factor(
    assignment: Mapping[int, Sequence[int]], reference: int, expected: int
) -> None:
    bad = {p: len(r) for p, r in sorted(assignment.items()) if len(r) != expected}
    if bad:
        raise InvalidReplicaAssignmentError(
            f"Inconsistent replication factor between partitions, partition {reference} has "
            f"{expected} while partitions [{_join(bad)}] have replication factors "
            f"[{_join(bad.values())}], respectively."
        )


def _checked_new_partitions(
    manual: Mapping[int, Sequence[int]],
    new_partitions: range,
    replication_factor: int,
    broker_ids: set[int],
) -> dict[int, list[int]]:
    """Validate a manual assignment of new partitions against the brokers and partition 0's RF."""
    if set(manual) != set(new_partitions):
        raise InvalidReplicaAssignmentError(
            f"Increasing the number of partitions by {len(new_partitions)} needs assignments for "
            f"partition ids {list(new_partitions)}, got {list(manual)}."
        )
    checked: dict[int, list[int]] = {}
    for partition in new_partitions:
        replicas = _checked_replicas(partition, manual[partition])
        unknown = sorted(set(replicas) - broker_ids)
        if unknown:
            raise BrokerNotAvailableError(
                f"Some brokers specified for partition id {partition} are not available. "
                f"Specified brokers: {_join(replicas)}, available brokers: {_join(sorted(broker_ids))}, "
                f"unknown: {_join(unknown)}."
            )
        checked[partition] = replicas
    _check_replication_factor(checked, 0, replication_factor)
    return checked


def _join(items: Iterable[int]) -> str:
    return ", ".join(map(str, items))
