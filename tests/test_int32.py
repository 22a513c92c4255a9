"""Kafka's ``Int`` in one place (``kctl.model``): the rule every decoder and entry point applies,
and the command-line arguments that refuse ids outside it before anything connects (issue 11)."""

from __future__ import annotations

import pytest

from kctl.cli import main
from kctl.errors import IllegalArgumentError, InvalidRequestError, InvalidTopicError
from kctl.model import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    TopicPartition,
    int_problem,
    validate_int,
    validate_partition_id,
)
from kctl.stores.paths import parse_id


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (0, None),
        (INT32_MAX, None),
        (INT32_MIN, None),
        (INT32_MAX + 1, "must be an integer from -2147483648 to 2147483647, got 2147483648"),
        (INT32_MIN - 1, "must be an integer from -2147483648 to 2147483647, got -2147483649"),
        (2**63, "must be an integer from -2147483648 to 2147483647, got 9223372036854775808"),
        (True, "must be an integer, got True"),
        ("1", "must be an integer, got '1'"),
        (1.0, "must be an integer, got 1.0"),
        (None, "must be an integer, got None"),
    ],
)
def test_int_problem_is_kafkas_int(value: object, problem: str | None) -> None:
    assert int_problem(value) == problem


def test_validators_name_the_field_and_the_value() -> None:
    assert validate_int("broker epoch", INT64_MAX, -INT64_MAX - 1, INT64_MAX) == INT64_MAX
    with pytest.raises(IllegalArgumentError, match="^broker id must be an integer from 0 to 2147483647, got -1$"):
        validate_int("broker id", -1, 0)
    with pytest.raises(InvalidRequestError, match="^partition t-2147483648: the partition id must be an integer "):
        validate_partition_id(TopicPartition("t", 2**31), error=InvalidRequestError)
    assert validate_partition_id(TopicPartition("t", INT32_MAX)) == TopicPartition("t", INT32_MAX)


@pytest.mark.parametrize(
    ("name", "found"),
    [("0", 0), ("7", 7), ("2147483647", INT32_MAX), ("2147483648", None), ("99999999999", None), ("²", None),
     ("٣", None), ("-1", None), ("007", None), ("+7", None), ("", None), ("1" * 5000, None), ("7\n", None)],
)
def test_znode_names_are_ids_only_in_kafkas_spelling(name: str, found: int | None) -> None:
    assert parse_id(name) == found


@pytest.mark.parametrize("text", ["t-2147483648", "t-99999999999", "t-" + "9" * 5000])
def test_topic_partitions_beyond_kafkas_int_do_not_parse(text: str) -> None:
    with pytest.raises(InvalidTopicError, match="the partition id must be an integer from 0 to 2147483647"):
        TopicPartition.parse(text)
    assert TopicPartition.parse("t-000000000002147483647") == TopicPartition("t", INT32_MAX)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["controller", "--id", "99999999999"], "argument --id: a broker id must be an integer from 0 to 2147483647, "
                                                 "got 99999999999"),
        (["broker", "--id", "²"], "argument --id: a broker id must be an integer, got '²'"),
        (["broker", "--id", "-1"], "argument --id: a broker id must be an integer from 0 to 2147483647, got -1"),
        (["topics", "create", "--topic", "t", "--partitions", "2147483648", "--replication-factor", "1"],
         "argument --partitions: a partition count must be an integer from 1 to 2147483647, got 2147483648"),
        (["topics", "create", "--topic", "t", "--partitions", "1", "--replication-factor", "2147483648"],
         "argument --replication-factor: a replication factor must be an integer from 1 to 2147483647, got 2147483648"),
        (["topics", "alter", "--topic", "t", "--partitions", "2147483648"],
         "argument --partitions: a partition count must be an integer from 1 to 2147483647, got 2147483648"),
        (["elect-leaders", "--election-type", "preferred", "--topic", "t", "--partition", "2147483648"],
         "argument --partition: a partition id must be an integer from 0 to 2147483647, got 2147483648"),
    ],
)
def test_command_line_ids_outside_kafkas_int_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused by the argument parser (exit 2): no ZooKeeper is contacted (this one does not exist)."""
    assert main([*argv[:2], "--zk", "127.0.0.1:1", *argv[2:]] if argv[0] == "topics" else
                [*argv, "--zk", "127.0.0.1:1"]) == 2
    assert message in capsys.readouterr().err
