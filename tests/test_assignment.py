"""Replica assignment (reference §9): Kafka's exact examples, its validation, and placement guarantees."""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.assignment import (
    BrokerMetadata,
    RackAwareMode,
    _assign_rack_aware,
    _assign_rack_unaware,
    add_partitions_assignment,
    assign_replicas_to_brokers,
    broker_metadatas,
    rack_alternated_broker_list,
    validate_replica_assignment,
)
from kctl.errors import (
    AdminOperationError,
    BrokerNotAvailableError,
    Errors,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    KctlError,
)

# The six-broker, three-rack layout used by Kafka's AdminRackAwareTest (reference §9.4).
RACKS_9_4 = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def rackless(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in ids]


def racked(broker_racks: Mapping[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(i, broker_racks[i]) for i in sorted(broker_racks)]


def raises_exactly(error: type[KctlError], message: str) -> pytest.RaisesExc[KctlError]:
    return pytest.raises(error, match=f"^{re.escape(message)}$")


# --- Exact examples (reference §9.3–§9.5) ---------------------------------------------------------


def test_rack_unaware_example_from_kafka() -> None:
    assert assign_replicas_to_brokers(rackless(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


@pytest.mark.parametrize(
    ("broker_racks", "expected"),
    [
        (RACKS_9_4, [0, 3, 1, 5, 4, 2]),
        ({b: r for b, r in RACKS_9_4.items() if b != 5}, [0, 3, 1, 4, 2]),
        ({4: "a", 2: "a", 0: "a"}, [0, 2, 4]),
        ({0: "a", 1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}, [0, 3, 4, 1, 5, 2]),
        ({}, []),
    ],
    ids=["kafka-example", "kafka-example-without-5", "one-rack", "uneven-racks", "empty"],
)
def test_rack_alternated_broker_list(broker_racks: dict[int, str], expected: list[int]) -> None:
    assert rack_alternated_broker_list(broker_racks) == expected


def test_rack_aware_example_from_kafka() -> None:
    assignment = assign_replicas_to_brokers(
        racked(RACKS_9_4), 7, 3, fixed_start_index=0, start_partition_id=0
    )
    assert assignment == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


@pytest.mark.parametrize(
    ("n_partitions", "replication_factor", "start", "expected"),
    [
        # Worked by hand from §9.4 on the arranged list [0,3,1,5,4,2] (racks 1,2,3,1,2,3): shift 2
        # gives a follower offset of 2 × 3 racks; partition 6 wraps the list and the shift becomes 3.
        (7, 3, 2, {0: [1, 4, 0], 1: [5, 2, 3], 2: [4, 0, 1], 3: [2, 3, 5], 4: [0, 1, 4], 5: [3, 5, 2], 6: [1, 3, 5]}),
        # RF 4 > 3 racks: once every rack holds a replica, the fourth may share a rack.
        (3, 4, 1, {0: [3, 2, 0, 1], 1: [1, 0, 3, 5], 2: [5, 3, 1, 4]}),
    ],
    ids=["rf3-start2", "rf4-start1"],
)
def test_rack_aware_with_a_nonzero_fixed_start_index(
    n_partitions: int, replication_factor: int, start: int, expected: dict[int, list[int]]
) -> None:
    """The fixed start index is also the first shift, so followers move by shift × racks."""
    assert assign_replicas_to_brokers(
        racked(RACKS_9_4), n_partitions, replication_factor, fixed_start_index=start
    ) == expected


def test_add_partitions_example_from_kafka() -> None:
    assert add_partitions_assignment(rackless(0, 1, 2, 3), {0: [2, 3, 0, 1]}, 7) == {
        1: [3, 2, 0, 1],
        2: [0, 3, 1, 2],
        3: [1, 0, 2, 3],
        4: [2, 3, 0, 1],
        5: [3, 0, 1, 2],
        6: [0, 1, 2, 3],
    }


def test_add_partitions_starts_at_next_higher_broker_when_leader_is_gone() -> None:
    # Partition 0's leader 2 is no longer registered: the start index is that of broker 3, the next
    # higher id; when no broker id is high enough it is 0.
    assert add_partitions_assignment(rackless(0, 1, 3, 4), {0: [2]}, 3) == {1: [4], 2: [0]}
    assert add_partitions_assignment(rackless(0, 1), {0: [9]}, 3) == {1: [1], 2: [0]}


def test_start_partition_id_continues_the_same_layout() -> None:
    brokers = rackless(1, 4, 6, 9)
    whole = assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=2)
    tail = assign_replicas_to_brokers(brokers, 6, 3, fixed_start_index=2, start_partition_id=4)
    assert tail == {p: whole[p] for p in range(4, 10)}
    assert assign_replicas_to_brokers(brokers, 3, 2, 1, start_partition_id=-5) == (
        assign_replicas_to_brokers(brokers, 3, 2, 1, start_partition_id=0)
    )


# --- Validation (reference §9.1) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_partitions", "replication_factor", "brokers", "error", "message"),
    [
        (0, 0, [], InvalidPartitionsError, "Number of partitions must be larger than 0."),
        (-3, 1, rackless(0), InvalidPartitionsError, "Number of partitions must be larger than 0."),
        (1, 0, [], InvalidReplicationFactorError, "Replication factor must be larger than 0."),
        (1, -1, rackless(0), InvalidReplicationFactorError, "Replication factor must be larger than 0."),
        (
            1,
            4,
            rackless(0, 1, 2),
            InvalidReplicationFactorError,
            "Replication factor: 4 larger than available brokers: 3.",
        ),
        (
            2,
            1,
            [],
            InvalidReplicationFactorError,
            "Replication factor: 1 larger than available brokers: 0.",
        ),
        (
            2,
            3,
            [BrokerMetadata(0, "a"), BrokerMetadata(1)],
            InvalidReplicationFactorError,
            "Replication factor: 3 larger than available brokers: 2.",
        ),
        (
            2,
            2,
            [BrokerMetadata(0, "a"), BrokerMetadata(1)],
            AdminOperationError,
            "Not all brokers have rack information for replica rack aware assignment.",
        ),
    ],
    ids=[
        "partitions-before-rf",
        "negative-partitions",
        "rf-before-brokers",
        "negative-rf",
        "rf-above-brokers",
        "no-brokers",
        "rf-before-racks",
        "mixed-racks",
    ],
)
def test_validation_order_and_messages(
    n_partitions: int,
    replication_factor: int,
    brokers: list[BrokerMetadata],
    error: type[KctlError],
    message: str,
) -> None:
    with raises_exactly(error, message):
        assign_replicas_to_brokers(brokers, n_partitions, replication_factor, 0)


def test_validation_errors_carry_kafka_error_codes() -> None:
    with pytest.raises(InvalidPartitionsError) as partitions:
        assign_replicas_to_brokers(rackless(0), 0, 1)
    with pytest.raises(InvalidReplicationFactorError) as replication:
        assign_replicas_to_brokers(rackless(0), 1, 2)
    assert partitions.value.error is Errors.INVALID_PARTITIONS
    assert replication.value.error is Errors.INVALID_REPLICATION_FACTOR


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n_partitions": "3"}, InvalidPartitionsError, "Number of partitions must be an integer, got '3'."),
        (
            {"n_partitions": True},
            InvalidPartitionsError,
            "Number of partitions must be an integer, got True.",
        ),
        ({"n_partitions": 2.0}, InvalidPartitionsError, "Number of partitions must be an integer, got 2.0."),
        (
            {"replication_factor": None},
            InvalidReplicationFactorError,
            "Replication factor must be an integer, got None.",
        ),
        (
            {"replication_factor": False},
            InvalidReplicationFactorError,
            "Replication factor must be an integer, got False.",
        ),
        (
            {"fixed_start_index": "0"},
            InvalidReplicaAssignmentError,
            "Fixed start index must be an integer, got '0'.",
        ),
        (
            {"start_partition_id": 1.5},
            InvalidPartitionsError,
            "Start partition id must be an integer, got 1.5.",
        ),
    ],
    ids=[
        "partitions-str",
        "partitions-bool",
        "partitions-float",
        "rf-none",
        "rf-bool",
        "start-str",
        "pid-float",
    ],
)
def test_non_integer_arguments_are_named(
    kwargs: dict[str, object], error: type[KctlError], message: str
) -> None:
    arguments: dict[str, object] = {"n_partitions": 3, "replication_factor": 2, **kwargs}
    with raises_exactly(error, message):
        assign_replicas_to_brokers(rackless(0, 1, 2), **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": -1}, "Broker id must be an integer from 0 to 2147483647, got -1."),
        ({"id": "1"}, "Broker id must be an integer, got '1'."),
        ({"id": True}, "Broker id must be an integer, got True."),
        ({"id": 1, "rack": 3}, "Rack of broker 1 must be a string or None, got 3."),
    ],
    ids=["negative", "str", "bool", "rack-int"],
)
def test_bad_broker_metadata_is_rejected(fields: dict[str, object], message: str) -> None:
    with raises_exactly(InvalidReplicaAssignmentError, message):
        BrokerMetadata(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("brokers", "message"),
    [
        (rackless(0, 3, 3), "Duplicate broker id 3 in the broker list."),
        ([BrokerMetadata(0), 1], "Brokers must be given as BrokerMetadata, got 1."),
    ],
    ids=["duplicate", "not-metadata"],
)
def test_bad_broker_lists_are_rejected(brokers: list[BrokerMetadata], message: str) -> None:
    with raises_exactly(InvalidReplicaAssignmentError, message):
        assign_replicas_to_brokers(brokers, 1, 1)
    with raises_exactly(InvalidReplicaAssignmentError, message):
        add_partitions_assignment(brokers, {0: [0]}, 2)


# --- Rack modes (AdminZkClient.getBrokerMetadatas) ------------------------------------------------

MIXED = {5: "b", 1: "a", 3: None}
ALL = {5: "b", 1: "a", 3: "a"}
NONE: dict[int, str | None] = {5: None, 1: None, 3: None}


@pytest.mark.parametrize(
    ("broker_racks", "mode", "expected"),
    [
        (ALL, RackAwareMode.ENFORCED, [(1, "a"), (3, "a"), (5, "b")]),
        (NONE, RackAwareMode.ENFORCED, [(1, None), (3, None), (5, None)]),
        (ALL, RackAwareMode.SAFE, [(1, "a"), (3, "a"), (5, "b")]),
        (MIXED, RackAwareMode.SAFE, [(1, None), (3, None), (5, None)]),
        (ALL, RackAwareMode.DISABLED, [(1, None), (3, None), (5, None)]),
        (MIXED, RackAwareMode.DISABLED, [(1, None), (3, None), (5, None)]),
    ],
    ids=["enforced-all", "enforced-none", "safe-all", "safe-mixed", "disabled-all", "disabled-mixed"],
)
def test_rack_modes(
    broker_racks: dict[int, str | None],
    mode: RackAwareMode,
    expected: list[tuple[int, str | None]],
) -> None:
    assert broker_metadatas(broker_racks, mode) == [BrokerMetadata(i, r) for i, r in expected]


def test_enforced_rack_mode_rejects_mixed_racks_naming_rackless_brokers() -> None:
    with pytest.raises(AdminOperationError, match=re.escape("brokers without a rack: [3]")):
        broker_metadatas(MIXED)


def test_broker_metadatas_feed_assignment() -> None:
    brokers = broker_metadatas({0: "rack1", 5: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2"})
    assert assign_replicas_to_brokers(brokers, 2, 3, 0) == {0: [0, 3, 1], 1: [3, 1, 5]}


# --- Randomness -----------------------------------------------------------------------------------


class ScriptedRandom(random.Random):
    """Returns scripted values from randrange and records the bounds asked for."""

    def __init__(self, values: Sequence[int]) -> None:
        super().__init__(0)
        self.values = list(values)
        self.bounds: list[int] = []

    def randrange(self, *args: int, **kwargs: object) -> int:  # type: ignore[override]
        self.bounds.append(args[0])
        return self.values.pop(0)


@pytest.mark.parametrize(
    ("brokers", "expected"),
    [
        # §9.3 by hand, start 3 and shift 1 (2 from partition 5, 3 from partition 10).
        (rackless(0, 2, 4, 6, 8), {
            0: [6, 0, 2], 1: [8, 2, 4], 2: [0, 4, 6], 3: [2, 6, 8], 4: [4, 8, 0], 5: [6, 2, 4],
            6: [8, 4, 6], 7: [0, 6, 8], 8: [2, 8, 0], 9: [4, 0, 2], 10: [6, 4, 8], 11: [8, 6, 0],
        }),
        # §9.4 by hand on [0,3,1,5,4,2], start 3 and shift 1 (2 from partition 6).
        (racked(RACKS_9_4), {
            0: [5, 3, 1], 1: [4, 1, 5], 2: [2, 5, 4], 3: [0, 4, 2], 4: [3, 2, 0], 5: [1, 0, 3],
            6: [5, 2, 3], 7: [4, 0, 1], 8: [2, 3, 5], 9: [0, 1, 4], 10: [3, 5, 2], 11: [1, 4, 0],
        }),
    ],
    ids=["unaware", "aware"],
)
def test_random_start_and_shift_are_two_independent_draws(
    brokers: list[BrokerMetadata], expected: dict[int, list[int]]
) -> None:
    """Kafka draws the start index and the replica shift separately, each in [0, n)."""
    rng = ScriptedRandom([3, 1])
    assert assign_replicas_to_brokers(brokers, 12, 3, rng=rng) == expected
    assert rng.bounds == [len(brokers), len(brokers)]


@pytest.mark.parametrize("brokers", [rackless(0, 2, 4, 6, 8), racked(RACKS_9_4)], ids=["unaware", "aware"])
def test_same_seed_gives_same_assignment(brokers: list[BrokerMetadata]) -> None:
    runs = [assign_replicas_to_brokers(brokers, 20, 3, rng=random.Random(seed)) for seed in range(30)]
    again = [assign_replicas_to_brokers(brokers, 20, 3, rng=random.Random(seed)) for seed in range(30)]
    assert runs == again
    assert len({repr(run) for run in runs}) > 1, "the random start and shift are never used"


def test_fixed_start_index_and_add_partitions_do_not_draw_from_rng() -> None:
    rng = random.Random(42)
    state = rng.getstate()
    assign_replicas_to_brokers(rackless(0, 1, 2), 5, 2, fixed_start_index=1, rng=rng)
    add_partitions_assignment(rackless(0, 1, 2), {0: [1, 2]}, 4, rng=rng)
    assert rng.getstate() == state


def test_default_rng_gives_a_valid_assignment() -> None:
    assignment = assign_replicas_to_brokers(rackless(0, 1, 2, 3), 8, 2)
    assert sorted(assignment) == list(range(8))
    assert Counter(replicas[0] for replicas in assignment.values()) == {0: 2, 1: 2, 2: 2, 3: 2}


# --- Placement guarantees for every (start index, shift) pair -------------------------------------

UNAWARE_LAYOUTS = [[7], [0, 1], [1, 4, 9], [0, 1, 2, 3, 4], [2, 3, 5, 7, 11, 13]]
ROUNDS = 2  # partitions per broker in each checked run


@pytest.mark.parametrize(
    ("broker_ids", "replication_factor"),
    [(ids, rf) for ids in UNAWARE_LAYOUTS for rf in range(1, len(ids) + 1)],
    ids=lambda v: str(v),
)
def test_rack_unaware_placement_for_every_start_and_shift(
    broker_ids: list[int], replication_factor: int
) -> None:
    n = len(broker_ids)
    for start, shift, first_partition in itertools.product(range(n), range(n), (0, n, 1, n + 2)):
        assignment = _assign_rack_unaware(
            broker_ids, n * ROUNDS, replication_factor, start, shift, first_partition
        )
        assert list(assignment) == list(range(first_partition, first_partition + n * ROUNDS))
        for partition, replicas in assignment.items():
            assert len(replicas) == replication_factor
            assert len(set(replicas)) == replication_factor
            assert set(replicas) <= set(broker_ids)
            assert replicas[0] == broker_ids[(partition + start) % n]
        assert_spread_evenly(assignment, broker_ids, first_partition % n == 0)


RACK_LAYOUTS = {
    "kafka-3x2": (RACKS_9_4, True),
    "2x3": ({i: f"r{i % 2}" for i in range(6)}, True),
    "4x1": ({i: f"r{i}" for i in range(4)}, True),
    "3x3-sparse-ids": ({10 * i: f"r{i % 3}" for i in range(9)}, True),
    "2x4": ({i: f"r{i // 4}" for i in range(8)}, True),
    "one-rack": ({i: "r" for i in range(4)}, True),
    "uneven-3-1-2": ({0: "a", 1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}, False),
    "uneven-1-4": ({0: "a", 1: "b", 2: "b", 3: "b", 4: "b"}, False),
}


@pytest.mark.parametrize(
    ("broker_racks", "equal_racks", "replication_factor"),
    [
        pytest.param(racks, equal, rf, id=f"{name}-rf{rf}")
        for name, (racks, equal) in RACK_LAYOUTS.items()
        for rf in range(1, len(racks) + 1)
    ],
)
def test_rack_aware_placement_for_every_start_and_shift(
    broker_racks: dict[int, str], equal_racks: bool, replication_factor: int
) -> None:
    n = len(broker_racks)
    arranged = rack_alternated_broker_list(broker_racks)
    for start, shift, first_partition in itertools.product(range(n), range(n), (0, n, 1, n + 2)):
        assignment = _assign_rack_aware(
            broker_racks, n * ROUNDS, replication_factor, start, shift, first_partition
        )
        assert list(assignment) == list(range(first_partition, first_partition + n * ROUNDS))
        for partition, replicas in assignment.items():
            assert_rack_guarantees(replicas, broker_racks, replication_factor)
            assert replicas[0] == arranged[(partition + start) % n]
        if equal_racks:
            assert_spread_evenly(assignment, list(broker_racks), first_partition % n == 0)


def test_one_rack_places_like_rack_unaware() -> None:
    broker_ids = [1, 3, 4, 8, 9]
    for start, shift, rf in itertools.product(range(5), range(5), range(1, 6)):
        assert _assign_rack_aware({b: "r" for b in broker_ids}, 11, rf, start, shift, 0) == (
            _assign_rack_unaware(broker_ids, 11, rf, start, shift, 0)
        )


def assert_spread_evenly(
    assignment: Mapping[int, list[int]], broker_ids: list[int], aligned: bool
) -> None:
    """Leaders of n·k consecutive partitions are spread evenly; so are all replicas when the run
    starts at a multiple of n (otherwise the shift changes part-way through a round)."""
    rounds = len(assignment) // len(broker_ids)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert leaders == dict.fromkeys(broker_ids, rounds)
    if aligned:
        rf = len(next(iter(assignment.values())))
        hosted = Counter(b for replicas in assignment.values() for b in replicas)
        assert hosted == dict.fromkeys(broker_ids, rounds * rf)


def assert_rack_guarantees(
    replicas: list[int], broker_racks: Mapping[int, str], replication_factor: int
) -> None:
    """AdminRackAwareTest's per-partition guarantees."""
    n_racks = len(set(broker_racks.values()))
    racks = {broker_racks[b] for b in replicas}
    assert len(replicas) == replication_factor
    assert len(set(replicas)) == replication_factor
    if replication_factor <= n_racks:
        assert len(racks) == replication_factor
    if replication_factor >= n_racks:
        assert len(racks) == n_racks


# --- Property tests over random layouts -----------------------------------------------------------


@st.composite
def broker_layouts(draw: st.DrawFn) -> list[BrokerMetadata]:
    ids = sorted(draw(st.sets(st.integers(0, 60), min_size=1, max_size=9)))
    if draw(st.booleans()):
        return [BrokerMetadata(i, draw(st.sampled_from("abcd"))) for i in ids]
    return rackless(*ids)


@settings(max_examples=300, deadline=None)
@given(
    brokers=broker_layouts(),
    n_partitions=st.integers(1, 40),
    rf_fraction=st.floats(0, 1),
    start_partition_id=st.integers(-2, 30),
    seed=st.integers(0, 2**32),
)
def test_random_layouts_get_valid_reproducible_assignments(
    brokers: list[BrokerMetadata],
    n_partitions: int,
    rf_fraction: float,
    start_partition_id: int,
    seed: int,
) -> None:
    rf = 1 + int(rf_fraction * (len(brokers) - 1))
    assignment = assign_replicas_to_brokers(
        brokers, n_partitions, rf, start_partition_id=start_partition_id, rng=random.Random(seed)
    )
    first = max(0, start_partition_id)
    assert list(assignment) == list(range(first, first + n_partitions))
    broker_racks = {b.id: b.rack for b in brokers if b.rack is not None}
    for replicas in assignment.values():
        assert len(set(replicas)) == len(replicas) == rf
        assert set(replicas) <= {b.id for b in brokers}
        if broker_racks:
            assert_rack_guarantees(replicas, broker_racks, rf)
    again = assign_replicas_to_brokers(
        brokers, n_partitions, rf, start_partition_id=start_partition_id, rng=random.Random(seed)
    )
    assert again == assignment


@settings(max_examples=200, deadline=None)
@given(
    broker_ids=st.sets(st.integers(0, 40), min_size=1, max_size=8).map(sorted),
    data=st.data(),
)
def test_added_partitions_continue_the_leader_round_robin(
    broker_ids: list[int], data: st.DataObject
) -> None:
    brokers = rackless(*broker_ids)
    n = len(broker_ids)
    rf = data.draw(st.integers(1, n), label="rf")
    current = data.draw(st.integers(1, 12), label="current")
    new_total = data.draw(st.integers(current + 1, 30), label="new_total")
    existing = assign_replicas_to_brokers(
        brokers, current, rf, rng=random.Random(data.draw(st.integers(0, 1000), label="seed"))
    )
    added = add_partitions_assignment(brokers, existing, new_total)
    start = broker_ids.index(existing[0][0])
    assert list(added) == list(range(current, new_total))
    for partition, replicas in added.items():
        assert replicas[0] == broker_ids[(partition + start) % n]
        assert len(set(replicas)) == len(replicas) == rf
    validate_replica_assignment({**existing, **added}, broker_ids)


# --- Adding partitions: errors and manual assignments (reference §9.5) ----------------------------

FOUR = rackless(0, 1, 2, 3)
EXISTING = {0: [0, 1], 1: [1, 2], 2: [2, 3]}


def test_manual_new_partitions_are_returned_as_given() -> None:
    assert add_partitions_assignment(FOUR, EXISTING, 5, manual={4: (3, 0), 3: [1, 3]}) == {
        3: [1, 3],
        4: [3, 0],
    }


@pytest.mark.parametrize(
    ("manual", "error", "message"),
    [
        (
            {3: [0, 1], 5: [1, 2]},
            InvalidReplicaAssignmentError,
            "Increasing the number of partitions by 2 needs assignments for partition ids [3, 4], "
            "got [3, 5].",
        ),
        (
            {3: [0, 1]},
            InvalidReplicaAssignmentError,
            "Increasing the number of partitions by 2 needs assignments for partition ids [3, 4], got [3].",
        ),
        (
            {3: [0, 1], 4: []},
            InvalidReplicaAssignmentError,
            "Cannot have replication factor of 0 for partition id 4.",
        ),
        (
            {3: [2, 2], 4: [0, 1]},
            InvalidReplicaAssignmentError,
            "Duplicate brokers not allowed in replica assignment: 2, 2 for partition id 3 (repeated: 2).",
        ),
        (
            {3: [0, 1], 4: [-1, 0]},
            InvalidReplicaAssignmentError,
            "Broker id for partition id 4 must be an integer from 0 to 2147483647, got -1.",
        ),
        (
            {3: [0, "1"], 4: [0, 1]},
            InvalidReplicaAssignmentError,
            "Broker id for partition id 3 must be an integer, got '1'.",
        ),
        (
            {3: [0, 9], 4: [0, 1]},
            BrokerNotAvailableError,
            "Some brokers specified for partition id 3 are not available. Specified brokers: 0, 9, "
            "available brokers: 0, 1, 2, 3, unknown: 9.",
        ),
        (
            {3: [0, 1, 2], 4: [3]},
            InvalidReplicaAssignmentError,
            "Inconsistent replication factor between partitions, partition 0 has 2 while partitions "
            "[3, 4] have replication factors [3, 1], respectively.",
        ),
    ],
    ids=["wrong-ids", "missing-id", "empty", "duplicate", "negative", "not-int", "unknown-broker", "rf"],
)
def test_manual_new_partitions_are_validated(
    manual: dict[int, list[int]], error: type[KctlError], message: str
) -> None:
    with raises_exactly(error, message):
        add_partitions_assignment(FOUR, EXISTING, 5, manual=manual)


@pytest.mark.parametrize(
    ("existing", "new_total", "error", "message"),
    [
        (
            {1: [0, 1]},
            3,
            AdminOperationError,
            "Unexpected existing replica assignment, partition id 0 is missing. Assignment: {1: [0, 1]}",
        ),
        (
            {0: []},
            3,
            AdminOperationError,
            "Unexpected existing replica assignment, partition id 0 has no replicas.",
        ),
        (
            EXISTING,
            3,
            InvalidPartitionsError,
            "The number of partitions for a topic can only be increased. "
            "Topic currently has 3 partitions, 3 would not be an increase.",
        ),
        (
            EXISTING,
            "4",
            InvalidPartitionsError,
            "Number of partitions must be an integer, got '4'.",
        ),
        (
            {0: [0, 1, 2, 3, 4]},
            2,
            InvalidReplicationFactorError,
            "Replication factor: 5 larger than available brokers: 4.",
        ),
    ],
    ids=["no-partition-0", "empty-partition-0", "no-increase", "not-int", "rf-above-brokers"],
)
def test_add_partitions_errors(
    existing: dict[int, list[int]], new_total: int, error: type[KctlError], message: str
) -> None:
    with raises_exactly(error, message):
        add_partitions_assignment(FOUR, existing, new_total)


def test_added_partitions_keep_rack_guarantees() -> None:
    brokers = racked(RACKS_9_4)
    existing = assign_replicas_to_brokers(brokers, 4, 3, rng=random.Random(3))
    added = add_partitions_assignment(brokers, existing, 16)
    assert list(added) == list(range(4, 16))
    for replicas in added.values():
        assert_rack_guarantees(replicas, RACKS_9_4, 3)


# --- Explicit assignments at topic creation (reference §9.6) --------------------------------------


NOT_CONSECUTIVE = "partitions should be a consecutive 0-based integer sequence"


def test_valid_explicit_assignment_passes() -> None:
    validate_replica_assignment({1: (2, 0), 0: [0, 1], 2: [1, 2]}, live_brokers={0, 1, 2})
    # Like Kafka's validateTopicCreate, broker existence is not checked without live_brokers.
    validate_replica_assignment({0: [100, 200]})


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ({}, "A replica assignment needs at least one partition."),
        ({0: [0], 1: []}, "Cannot have replication factor of 0 for partition id 1."),
        (
            {0: [0, 1], 1: [1], 2: [2, 0, 1]},
            "Inconsistent replication factor between partitions, partition 0 has 2 while partitions "
            "[1, 2] have replication factors [1, 3], respectively.",
        ),
        (
            {0: [0, 1, 0]},
            "Duplicate brokers not allowed in replica assignment: 0, 1, 0 for partition id 0 (repeated: 0).",
        ),
        ({0: [1], 1: [-2]}, "Broker id for partition id 1 must be an integer from 0 to 2147483647, got -2."),
        ({0: [True]}, "Broker id for partition id 0 must be an integer, got True."),
        ({0: [0], 2: [1]}, f"{NOT_CONSECUTIVE}, got partition ids [0, 2]."),
        ({1: [0], 2: [1]}, f"{NOT_CONSECUTIVE}, got partition ids [1, 2]."),
        ({-1: [0], 0: [1]}, f"{NOT_CONSECUTIVE}, got partition ids [-1, 0]."),
        ({"0": [0]}, "Partition id must be an integer, got '0'."),
        ({0: 3}, "Replicas of partition id 0 must be a sequence of broker ids, got 3."),
        ({0: "01"}, "Replicas of partition id 0 must be a sequence of broker ids, got '01'."),
    ],
    ids=[
        "empty",
        "empty-partition",
        "rf",
        "duplicate",
        "negative-broker",
        "bool-broker",
        "gap",
        "not-from-0",
        "negative-partition",
        "str-partition",
        "not-sequence",
        "str-replicas",
    ],
)
def test_explicit_assignment_errors(assignment: dict[int, list[int]], message: str) -> None:
    with raises_exactly(InvalidReplicaAssignmentError, message):
        validate_replica_assignment(assignment)


def test_explicit_assignment_rejects_brokers_that_are_not_live() -> None:
    with raises_exactly(
        InvalidReplicaAssignmentError,
        "Replica assignment refers to brokers that are not live: [7, 9] (live brokers: [0, 1, 2]).",
    ):
        validate_replica_assignment({0: [0, 7], 1: [9, 1]}, live_brokers=[2, 0, 1])
