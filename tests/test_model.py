"""kctl.model: topic names, partitions, LeaderAndIsr, ReplicaAssignment and the state tables.

Expectations are transcribed from the behavioural reference (§1, §3.1, §4.1), not from the code.
"""

from __future__ import annotations

import dataclasses
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl import model
from kctl.errors import InvalidTopicError, KctlError
from kctl.model import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    PartitionReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
    topic_collision_key,
    validate_topic_name,
)

# Keep hypothesis from writing an example database into the source tree.
PROFILE = settings(database=None, max_examples=300, deadline=None)

LEGAL_CHARS = string.ascii_letters + string.digits + "._-"


# --- constants (reference §1.1) -----------------------------------------------------------------


def test_sentinels_have_kafkas_values() -> None:
    assert model.NO_LEADER == -1
    assert model.LEADER_DURING_DELETE == -2
    assert model.NO_EPOCH == -1
    assert model.EPOCH_DURING_DELETE == -2
    assert model.INITIAL_LEADER_EPOCH == 0
    assert model.INITIAL_PARTITION_EPOCH == 0
    assert model.INITIAL_CONTROLLER_EPOCH == 0
    assert model.INITIAL_CONTROLLER_EPOCH_VERSION == 0
    assert model.UNKNOWN_BROKER_EPOCH == -1
    assert model.MAX_TOPIC_NAME_LENGTH == 249


# --- validate_topic_name ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "Z",
        "0",
        "_",
        "-",
        "...",  # only "." and ".." themselves are reserved
        ".a",
        "a..",
        "topic",
        "my.topic_name-1",
        "__consumer_offsets",
        LEGAL_CHARS,
        "x" * 249,
        "." * 249,
    ],
)
def test_legal_topic_names_are_accepted(name: str) -> None:
    assert validate_topic_name(name) is None


def test_length_boundary_249_vs_250() -> None:
    validate_topic_name("a" * 249)
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name("a" * 250)
    message = str(info.value)
    assert "249" in message
    assert "a" * 250 in message


def test_empty_name_is_rejected() -> None:
    with pytest.raises(InvalidTopicError, match="empty"):
        validate_topic_name("")


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_and_dotdot_are_rejected(name: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    assert '"."' in str(info.value) and '".."' in str(info.value)


@pytest.mark.parametrize(
    "bad_char",
    [
        " ",  # whitespace
        "\t",
        "\n",
        "/",  # path separator (znode names)
        "\\",
        ":",
        "*",
        "+",
        "#",
        "@",
        "!",
        "?",
        ",",
        "'",
        '"',
        "$",
        "%",
        "(",
        "{",
        "[",
        "=",
        "~",
        "\x00",  # control character
        "é",  # non-ASCII letter
        "ß",
        "\u0663",  # non-ASCII digit (Arabic-Indic three)
        "\u00b2",  # superscript two
        "\u2013",  # en dash, looks like '-'
        "\uff0e",  # fullwidth full stop, looks like '.'
        "😀",
    ],
)
def test_each_illegal_character_class_is_rejected_and_named(bad_char: str) -> None:
    for name in (f"topic{bad_char}", f"{bad_char}topic", f"to{bad_char}pic", bad_char):
        with pytest.raises(InvalidTopicError) as info:
            validate_topic_name(name)
        message = str(info.value)
        assert name in message
        assert "illegal" in message


def test_trailing_newline_is_not_accepted() -> None:
    # A classic regex pitfall: "$" matches before a trailing newline.
    with pytest.raises(InvalidTopicError):
        validate_topic_name("topic\n")


def test_illegal_character_message_is_kafkas() -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name("bad topic")
    assert str(info.value) == (
        'Topic name "bad topic" is illegal, it contains a character other than ASCII alphanumerics, '
        "'.', '_' and '-'"
    )


def test_too_long_name_with_illegal_characters_reports_length_first() -> None:
    # Kafka checks the length before the character set.
    with pytest.raises(InvalidTopicError, match="longer than 249"):
        validate_topic_name("a b" * 100)


@pytest.mark.parametrize("value", [None, 5, 3.0, b"topic", ["topic"], ("t",)])
def test_non_string_names_are_rejected(value: object) -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(value)  # type: ignore[arg-type]
    assert repr(value) in str(info.value)


def test_invalid_topic_error_is_a_value_error_and_kctl_error() -> None:
    with pytest.raises(ValueError):
        validate_topic_name("")
    with pytest.raises(KctlError):
        validate_topic_name("")


@PROFILE
@given(st.text(alphabet=LEGAL_CHARS, min_size=1, max_size=249).filter(lambda n: n not in (".", "..")))
def test_property_every_legal_name_is_accepted(name: str) -> None:
    validate_topic_name(name)


@PROFILE
@given(
    st.text(alphabet=LEGAL_CHARS, max_size=20),
    st.characters().filter(lambda c: c not in LEGAL_CHARS),
    st.text(alphabet=LEGAL_CHARS, max_size=20),
)
def test_property_any_illegal_character_is_rejected(prefix: str, bad: str, suffix: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(prefix + bad + suffix)


# --- topic_collision_key -----------------------------------------------------------------------


def test_collision_key_unifies_dot_and_underscore() -> None:
    assert topic_collision_key("a.b_c") == "a_b_c"
    assert topic_collision_key("a.b") == topic_collision_key("a_b")
    assert topic_collision_key("...") == "___"
    assert topic_collision_key("plain-topic") == "plain-topic"
    # '-' is not a collision character.
    assert topic_collision_key("a-b") != topic_collision_key("a_b")
    assert topic_collision_key("a.b") != topic_collision_key("a.c")


# --- TopicPartition -----------------------------------------------------------------------------


def test_topic_partition_str() -> None:
    assert str(TopicPartition("foo", 0)) == "foo-0"
    assert str(TopicPartition("my-topic-1", 12)) == "my-topic-1-12"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("foo-0", TopicPartition("foo", 0)),
        ("foo-17", TopicPartition("foo", 17)),
        ("my-topic-3", TopicPartition("my-topic", 3)),
        ("a-b-c-10", TopicPartition("a-b-c", 10)),
        ("topic--1-2", TopicPartition("topic--1", 2)),
        ("1-2", TopicPartition("1", 2)),
        ("-1", None),
        ("__consumer_offsets-49", TopicPartition("__consumer_offsets", 49)),
    ],
)
def test_topic_partition_parse(text: str, expected: TopicPartition | None) -> None:
    if expected is None:
        with pytest.raises(InvalidTopicError):
            TopicPartition.parse(text)
    else:
        parsed = TopicPartition.parse(text)
        assert parsed == expected
        assert type(parsed.partition) is int


@pytest.mark.parametrize(
    "text",
    [
        "",
        "foo",
        "foo-",
        "-",
        "-3",
        "foo-bar",
        "foo-1a",
        "foo-+1",
        "foo- 1",
        "foo-1 ",
        "foo-1.0",
        "foo_1",
        "bad topic-1",  # illegal topic name
        ".-0",
        "..-0",
        "a" * 250 + "-0",
        "foo-\u0663",  # Arabic-Indic digit three
        "foo-\u00b2",  # superscript two
    ],
)
def test_topic_partition_parse_rejects_malformed(text: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        TopicPartition.parse(text)
    # The message names the whole string, or the topic part when only the topic name is illegal.
    message = str(info.value)
    assert text in message or text.rpartition("-")[0] in message


@pytest.mark.parametrize("value", [None, 3, b"foo-1", ("foo", 1)])
def test_topic_partition_parse_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidTopicError):
        TopicPartition.parse(value)  # type: ignore[arg-type]


@PROFILE
@given(
    st.text(alphabet=LEGAL_CHARS, min_size=1, max_size=60).filter(lambda n: n not in (".", "..")),
    st.integers(min_value=0, max_value=2**31 - 1),
)
def test_property_parse_inverts_str(topic: str, partition: int) -> None:
    tp = TopicPartition(topic, partition)
    assert TopicPartition.parse(str(tp)) == tp


def test_topic_partition_ordering_is_by_topic_then_partition() -> None:
    tps = [
        TopicPartition("b", 0),
        TopicPartition("a", 10),
        TopicPartition("a", 2),
        TopicPartition("a-1", 0),
        TopicPartition("B", 5),
    ]
    assert sorted(tps) == [
        TopicPartition("B", 5),
        TopicPartition("a", 2),
        TopicPartition("a", 10),  # numeric, not lexicographic ("10" < "2")
        TopicPartition("a-1", 0),
        TopicPartition("b", 0),
    ]
    assert TopicPartition("a", 1) < TopicPartition("a", 2) < TopicPartition("b", 0)


def test_topic_partition_equality_and_hashing() -> None:
    a = TopicPartition("t", 1)
    b = TopicPartition("t", 1)
    assert a == b and hash(a) == hash(b)
    assert a != TopicPartition("t", 2)
    assert a != TopicPartition("u", 1)
    assert len({a, b, TopicPartition("t", 2)}) == 2
    assert {a: "x"}[b] == "x"
    assert a.topic == "t" and a.partition == 1


def test_topic_partition_is_immutable() -> None:
    tp = TopicPartition("t", 1)
    with pytest.raises(AttributeError):
        tp.partition = 2  # type: ignore[misc]


# --- PartitionReplica ---------------------------------------------------------------------------


def test_partition_replica() -> None:
    pr = PartitionReplica(TopicPartition("foo", 3), 7)
    assert pr.tp == TopicPartition("foo", 3)
    assert pr.broker == 7
    assert str(pr) == "[Topic=foo,Partition=3,Replica=7]"
    assert pr == PartitionReplica(TopicPartition("foo", 3), 7)
    assert pr != PartitionReplica(TopicPartition("foo", 3), 8)
    assert hash(pr) == hash(PartitionReplica(TopicPartition("foo", 3), 7))
    assert sorted([PartitionReplica(TopicPartition("b", 0), 1), PartitionReplica(TopicPartition("a", 0), 2),
                   PartitionReplica(TopicPartition("a", 0), 1)]) == [
        PartitionReplica(TopicPartition("a", 0), 1),
        PartitionReplica(TopicPartition("a", 0), 2),
        PartitionReplica(TopicPartition("b", 0), 1),
    ]


# --- LeaderAndIsr (reference §1.2) --------------------------------------------------------------


def test_leader_and_isr_defaults() -> None:
    lai = LeaderAndIsr(1, (1, 2, 3))
    assert lai.leader == 1
    assert lai.isr == (1, 2, 3)
    assert lai.leader_epoch == 0
    assert lai.partition_epoch == 0
    assert lai.leader_recovery_state is LeaderRecoveryState.RECOVERED


def test_leader_and_isr_normalises_isr_to_a_tuple() -> None:
    lai = LeaderAndIsr(1, [1, 2])  # type: ignore[arg-type]
    assert lai.isr == (1, 2)
    assert isinstance(lai.isr, tuple)
    assert lai == LeaderAndIsr(1, (1, 2))
    assert hash(lai) == hash(LeaderAndIsr(1, (1, 2)))


def test_leader_and_isr_is_immutable() -> None:
    lai = LeaderAndIsr(1, (1, 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        lai.leader = 2  # type: ignore[misc]


def test_new_leader_bumps_epoch_keeps_isr_and_partition_epoch() -> None:
    lai = LeaderAndIsr(1, (1, 2, 3), leader_epoch=4, partition_epoch=9)
    new = lai.new_leader(2)
    assert new == LeaderAndIsr(2, (1, 2, 3), leader_epoch=5, partition_epoch=9)
    assert lai == LeaderAndIsr(1, (1, 2, 3), leader_epoch=4, partition_epoch=9)  # unchanged
    # Electing the same leader again still bumps the epoch (reference §2.2).
    assert lai.new_leader(1) == LeaderAndIsr(1, (1, 2, 3), leader_epoch=5, partition_epoch=9)
    assert lai.new_leader(model.NO_LEADER).leader == -1


def test_new_leader_and_isr() -> None:
    lai = LeaderAndIsr(1, (1, 2, 3), leader_epoch=4, partition_epoch=9)
    new = lai.new_leader_and_isr(3, [3])
    assert new == LeaderAndIsr(3, (3,), leader_epoch=5, partition_epoch=9)
    assert isinstance(new.isr, tuple)


def test_new_epoch_only_bumps_leader_epoch() -> None:
    lai = LeaderAndIsr(2, (2, 1), leader_epoch=0, partition_epoch=3)
    assert lai.new_epoch() == LeaderAndIsr(2, (2, 1), leader_epoch=1, partition_epoch=3)
    assert lai.new_epoch().new_epoch().leader_epoch == 2


def test_helpers_keep_the_recovery_state() -> None:
    lai = LeaderAndIsr(1, (1,), 3, 4, LeaderRecoveryState.RECOVERING)
    assert lai.new_leader(2).leader_recovery_state is LeaderRecoveryState.RECOVERING
    assert lai.new_leader_and_isr(2, [2]).leader_recovery_state is LeaderRecoveryState.RECOVERING
    assert lai.new_epoch().leader_recovery_state is LeaderRecoveryState.RECOVERING
    assert lai.with_partition_epoch(5).leader_recovery_state is LeaderRecoveryState.RECOVERING
    recovered = lai.with_recovery_state(LeaderRecoveryState.RECOVERED)
    assert recovered == LeaderAndIsr(1, (1,), 3, 4, LeaderRecoveryState.RECOVERED)


def test_leader_recovery_state_values() -> None:
    assert LeaderRecoveryState.RECOVERED == 0
    assert LeaderRecoveryState.RECOVERING == 1


def test_with_partition_epoch_changes_only_the_partition_epoch() -> None:
    lai = LeaderAndIsr(1, (1, 2), leader_epoch=7, partition_epoch=2)
    assert lai.with_partition_epoch(3) == LeaderAndIsr(1, (1, 2), leader_epoch=7, partition_epoch=3)


def test_equals_ignoring_partition_epoch() -> None:
    lai = LeaderAndIsr(1, (1, 2), leader_epoch=7, partition_epoch=2)
    assert lai.equals_ignoring_partition_epoch(lai.with_partition_epoch(99))
    assert lai != lai.with_partition_epoch(99)
    assert lai.equals_ignoring_partition_epoch(lai)
    assert not lai.equals_ignoring_partition_epoch(LeaderAndIsr(2, (1, 2), 7, 2))
    assert not lai.equals_ignoring_partition_epoch(LeaderAndIsr(1, (1, 2), 8, 2))
    assert not lai.equals_ignoring_partition_epoch(LeaderAndIsr(1, (1,), 7, 2))
    assert not lai.equals_ignoring_partition_epoch(LeaderAndIsr(1, (2, 1), 7, 2))  # ISR order matters
    assert not lai.equals_ignoring_partition_epoch(lai.with_recovery_state(LeaderRecoveryState.RECOVERING))


def test_leader_and_isr_str_is_kafka_3_0s() -> None:
    assert str(LeaderAndIsr(1, (1, 2, 3), 5, 7)) == (
        "LeaderAndIsr(leader=1, leaderEpoch=5, isr=List(1, 2, 3), zkVersion=7)"
    )
    assert str(LeaderAndIsr(-1, ())) == "LeaderAndIsr(leader=-1, leaderEpoch=0, isr=List(), zkVersion=0)"
    assert "leaderRecoveryState=RECOVERING" in str(
        LeaderAndIsr(1, (1,), 0, 0, LeaderRecoveryState.RECOVERING)
    )


def test_leader_isr_and_controller_epoch() -> None:
    lai = LeaderAndIsr(1, (1, 2), 3, 4)
    lice = LeaderIsrAndControllerEpoch(lai, 5)
    assert lice.leader_and_isr is lai
    assert lice.controller_epoch == 5
    assert lice == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2), 3, 4), 5)
    assert lice != LeaderIsrAndControllerEpoch(lai, 6)
    assert str(lice) == "(Leader:1,ISR:1,2,LeaderEpoch:3,ControllerEpoch:5)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        lice.controller_epoch = 6  # type: ignore[misc]


# --- ReplicaAssignment (reference §1.3) ---------------------------------------------------------


def ra(replicas: list[int], adding: list[int] = [], removing: list[int] = []) -> ReplicaAssignment:  # noqa: B006
    return ReplicaAssignment(tuple(replicas), tuple(adding), tuple(removing))


def test_plain_assignment() -> None:
    a = ReplicaAssignment((1, 2, 3))
    assert a.replicas == (1, 2, 3)
    assert a.adding_replicas == () and a.removing_replicas == ()
    assert a.origin_replicas == (1, 2, 3)
    assert a.target_replicas == (1, 2, 3)
    assert not a.is_being_reassigned


def test_assignment_normalises_lists_to_tuples() -> None:
    a = ReplicaAssignment([1, 2], [2], [])  # type: ignore[arg-type]
    assert a.replicas == (1, 2) and a.adding_replicas == (2,) and a.removing_replicas == ()
    assert a == ReplicaAssignment((1, 2), (2,), ())
    assert hash(a) == hash(ReplicaAssignment((1, 2), (2,), ()))


def test_origin_target_and_reassigning_flag() -> None:
    a = ra([4, 2, 5, 3, 1], [5], [1])
    assert a.origin_replicas == (4, 2, 3, 1)  # RS minus AR, order preserved
    assert a.target_replicas == (4, 2, 5, 3)  # RS minus RR, order preserved
    assert a.is_being_reassigned
    assert ra([1, 2, 3], [3], []).is_being_reassigned  # AR alone
    assert ra([1, 2, 3], [], [3]).is_being_reassigned  # RR alone


def test_reassign_example_overlapping_target() -> None:
    assert ra([1, 2, 3, 4]).reassign_to([4, 2, 5, 3]) == ra([4, 2, 5, 3, 1], [5], [1])


def test_reassign_example_disjoint_target() -> None:
    assert ra([1, 2, 3]).reassign_to([4, 5, 6]) == ra([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])


def test_reassign_example_pure_reorder_is_not_a_reassignment() -> None:
    result = ra([1, 2, 3]).reassign_to([3, 1, 2])
    assert result == ra([3, 1, 2])
    assert not result.is_being_reassigned


def test_retargeting_is_computed_from_origin_and_drops_previous_adding() -> None:
    in_flight = ra([1, 2, 3]).reassign_to([4, 5, 6])
    assert in_flight == ra([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])
    retargeted = in_flight.reassign_to([7, 2, 3])
    assert retargeted == ra([7, 2, 3, 1], [7], [1])
    assert not {4, 5, 6} & set(retargeted.replicas)
    # Re-targeting keeps an adding replica only if the new target still wants it.
    assert in_flight.reassign_to([4, 1, 2]) == ra([4, 1, 2, 3], [4], [3])


def test_targeting_origin_cancels() -> None:
    in_flight = ra([1, 2, 3]).reassign_to([4, 5, 6])
    cancelled = in_flight.reassign_to(in_flight.origin_replicas)
    assert cancelled == ra([1, 2, 3])
    assert not cancelled.is_being_reassigned
    overlapping = ra([1, 2, 3, 4]).reassign_to([4, 2, 5, 3])
    assert overlapping.reassign_to([1, 2, 3, 4]) == ra([1, 2, 3, 4])


def test_reassign_to_target_is_identity() -> None:
    for a in (
        ra([1, 2, 3]),
        ra([4, 2, 5, 3, 1], [5], [1]),
        ra([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3]),
    ):
        assert a.reassign_to(a.target_replicas) == a


def test_reassign_to_accepts_lists_and_tuples() -> None:
    assert ra([1, 2]).reassign_to([2, 3]) == ra([1, 2]).reassign_to((2, 3)) == ra([2, 3, 1], [3], [1])


def test_remove_replica_removes_from_all_three_lists() -> None:
    a = ra([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])
    assert a.remove_replica(4) == ra([5, 6, 1, 2, 3], [5, 6], [1, 2, 3])
    assert a.remove_replica(1) == ra([4, 5, 6, 2, 3], [4, 5, 6], [2, 3])
    assert a.remove_replica(99) == a
    assert ra([1, 2, 3]).remove_replica(2) == ra([1, 3])


def test_replica_assignment_str() -> None:
    assert str(ra([4, 2, 5, 3, 1], [5], [1])) == (
        "ReplicaAssignment(replicas=4,2,5,3,1, addingReplicas=5, removingReplicas=1)"
    )
    assert str(ra([1])) == "ReplicaAssignment(replicas=1, addingReplicas=, removingReplicas=)"


def test_replica_assignment_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ra([1]).replicas = (2,)  # type: ignore[misc]


# Property tests: a replica list is a duplicate-free list of broker ids.
replica_lists = st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=8, unique=True)


def distinct(xs: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(xs))


@PROFILE
@given(replica_lists, replica_lists)
def test_property_reassign_to_matches_the_definition(origin: list[int], target: list[int]) -> None:
    result = ra(origin).reassign_to(target)
    full = distinct(target + origin)
    assert result.replicas == full
    assert result.adding_replicas == tuple(r for r in full if r not in origin)
    assert result.removing_replicas == tuple(r for r in full if r not in target)
    # Derived views.
    assert result.target_replicas == tuple(target)
    assert set(result.origin_replicas) == set(origin)
    assert result.replicas[: len(target)] == tuple(target)  # target first
    assert not set(result.adding_replicas) & set(result.removing_replicas)
    assert result.is_being_reassigned == (set(origin) != set(target))
    assert len(set(result.replicas)) == len(result.replicas)


@PROFILE
@given(replica_lists, replica_lists)
def test_property_target_is_a_fixed_point(origin: list[int], target: list[int]) -> None:
    result = ra(origin).reassign_to(target)
    assert result.reassign_to(result.target_replicas) == result
    assert ra(origin).reassign_to(origin) == ra(origin)


@PROFILE
@given(replica_lists, replica_lists)
def test_property_targeting_origin_cancels(origin: list[int], target: list[int]) -> None:
    result = ra(origin).reassign_to(target)
    cancelled = result.reassign_to(origin)
    assert not cancelled.is_being_reassigned
    assert cancelled.replicas == tuple(origin)


@PROFILE
@given(replica_lists, replica_lists, replica_lists)
def test_property_retargeting_forgets_the_first_target(
    origin: list[int], first: list[int], second: list[int]
) -> None:
    retargeted = ra(origin).reassign_to(first).reassign_to(second)
    direct = ra(origin).reassign_to(second)
    assert retargeted.target_replicas == direct.target_replicas == tuple(second)
    assert retargeted.adding_replicas == direct.adding_replicas
    assert set(retargeted.removing_replicas) == set(direct.removing_replicas)
    assert set(retargeted.replicas) == set(origin) | set(second)
    assert set(retargeted.origin_replicas) == set(origin)


@PROFILE
@given(replica_lists, replica_lists, st.integers(min_value=0, max_value=12))
def test_property_remove_replica(origin: list[int], target: list[int], broker: int) -> None:
    a = ra(origin).reassign_to(target)
    removed = a.remove_replica(broker)
    assert broker not in removed.replicas
    assert broker not in removed.adding_replicas
    assert broker not in removed.removing_replicas
    assert removed.replicas == tuple(r for r in a.replicas if r != broker)


# --- state tables (reference §3.1, §4.1) --------------------------------------------------------

P = PartitionState
# Target state -> (Kafka name, numeric id, valid previous states), transcribed from reference §3.1.
PARTITION_TABLE: dict[PartitionState, tuple[str, int, set[PartitionState]]] = {
    P.NEW: ("NewPartition", 0, {P.NON_EXISTENT}),
    P.ONLINE: ("OnlinePartition", 1, {P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: ("OfflinePartition", 2, {P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: ("NonExistentPartition", 3, {P.OFFLINE}),
}

R = ReplicaState
# Transcribed from reference §4.1.
REPLICA_TABLE: dict[ReplicaState, tuple[str, int, set[ReplicaState]]] = {
    R.NEW: ("NewReplica", 1, {R.NON_EXISTENT}),
    R.ONLINE: ("OnlineReplica", 2, {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: ("OfflineReplica", 3, {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: ("ReplicaDeletionStarted", 4, {R.OFFLINE}),
    R.DELETION_SUCCESSFUL: ("ReplicaDeletionSuccessful", 5, {R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: ("ReplicaDeletionIneligible", 6, {R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: ("NonExistentReplica", 7, {R.DELETION_SUCCESSFUL}),
}


def test_partition_state_members() -> None:
    assert {s.name for s in PartitionState} == {"NON_EXISTENT", "NEW", "ONLINE", "OFFLINE"}
    assert set(PartitionState) == set(PARTITION_TABLE)


def test_replica_state_members() -> None:
    assert {s.name for s in ReplicaState} == {
        "NEW", "ONLINE", "OFFLINE", "DELETION_STARTED", "DELETION_SUCCESSFUL",
        "DELETION_INELIGIBLE", "NON_EXISTENT",
    }
    assert set(ReplicaState) == set(REPLICA_TABLE)


@pytest.mark.parametrize("target", list(PartitionState))
def test_partition_state_names_ids_and_previous_states(target: PartitionState) -> None:
    name, state_id, previous = PARTITION_TABLE[target]
    assert target.kafka_name == name
    assert str(target) == name
    assert target.state_id == state_id
    assert target.valid_previous_states == frozenset(previous)
    assert model.PARTITION_VALID_PREVIOUS_STATES[target] == frozenset(previous)


@pytest.mark.parametrize("target", list(ReplicaState))
def test_replica_state_names_ids_and_previous_states(target: ReplicaState) -> None:
    name, state_id, previous = REPLICA_TABLE[target]
    assert target.kafka_name == name
    assert str(target) == name
    assert target.state_id == state_id
    assert target.valid_previous_states == frozenset(previous)
    assert model.REPLICA_VALID_PREVIOUS_STATES[target] == frozenset(previous)


def test_every_partition_transition_pair_exhaustively() -> None:
    for current in PartitionState:
        for target in PartitionState:
            expected = current in PARTITION_TABLE[target][2]
            assert (current in target.valid_previous_states) is expected, (current, target)
    # 4 x 4 pairs, 8 of them valid.
    valid = sum(c in t.valid_previous_states for c in PartitionState for t in PartitionState)
    assert valid == 8


def test_every_replica_transition_pair_exhaustively() -> None:
    for current in ReplicaState:
        for target in ReplicaState:
            expected = current in REPLICA_TABLE[target][2]
            assert (current in target.valid_previous_states) is expected, (current, target)
    valid = sum(c in t.valid_previous_states for c in ReplicaState for t in ReplicaState)
    assert valid == 14


def test_state_ids_are_unique() -> None:
    assert sorted(s.state_id for s in PartitionState) == [0, 1, 2, 3]
    assert sorted(s.state_id for s in ReplicaState) == [1, 2, 3, 4, 5, 6, 7]


def test_tables_are_immutable() -> None:
    for states in (*model.PARTITION_VALID_PREVIOUS_STATES.values(), *model.REPLICA_VALID_PREVIOUS_STATES.values()):
        assert isinstance(states, frozenset)


# --- brokers ------------------------------------------------------------------------------------


def test_end_point_and_broker_info() -> None:
    ep = model.EndPoint("broker1", 9092)
    assert str(ep) == "PLAINTEXT://broker1:9092"
    assert str(model.EndPoint("h", 9093, "SSL", "SSL")) == "SSL://h:9093"
    info = model.BrokerInfo(1, (ep,), rack="rack-a")
    assert info.id == 1 and info.endpoints == (ep,) and info.rack == "rack-a"
    assert model.BrokerInfo(2).rack is None
    assert model.BrokerInfo(2).jmx_port == -1
    assert model.BrokerInfo(2).endpoints == ()
