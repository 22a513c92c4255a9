"""The admin tools' JSON files: what is accepted, and the error naming the entry and field otherwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kctl.errors import AdminCommandFailedError
from kctl.model import TopicPartition
from kctl.tools.files import format_reassignment, parse_election_partitions, parse_reassignment, read_json


def entry(**fields: Any) -> dict[str, Any]:
    return {"topic": "foo", "partition": 0, "replicas": [1, 2], **fields}


def test_reassignment_file_round_trips_through_the_rollback_format() -> None:
    document = {"version": 1, "partitions": [entry(log_dirs=["any", "any"]), entry(partition=1, replicas=[3])]}
    targets = parse_reassignment(document, "f.json")
    assert targets == {TopicPartition("foo", 0): [1, 2], TopicPartition("foo", 1): [3]}
    assert parse_reassignment(json.loads(format_reassignment(targets)), "rollback") == targets
    assert json.loads(format_reassignment(targets))["partitions"][0] == {
        "topic": "foo", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "f.json: expected a JSON object"),
        ({"version": 2, "partitions": []}, "f.json: version: unsupported version 2"),
        ({"version": 1}, "f.json: partitions: expected a list"),
        ({"partitions": []}, "f.json: partitions: the partition reassignment data file is empty"),
        ({"partitions": [entry(), 7]}, "f.json: partitions[1]: expected an object, got 7"),
        ({"partitions": [entry(topic=3)]}, "f.json: partitions[0].topic: expected a topic name, got 3"),
        ({"partitions": [entry(topic="a b")]}, "f.json: partitions[0].topic: "),
        ({"partitions": [entry(partition="0")]}, 'f.json: partitions[0].partition: expected a partition id (an integer from 0 to 2147483647), got "0"'),
        ({"partitions": [entry(partition=-1)]}, "f.json: partitions[0].partition: expected a partition id"),
        ({"partitions": [entry(replicas=[])]}, "f.json: partitions[0].replicas: expected a non-empty list of broker ids (integers from 0 to 2147483647), got []"),
        ({"partitions": [entry(replicas=[1, True])]}, "f.json: partitions[0].replicas: expected a non-empty list"),
        ({"partitions": [entry(replicas=[1, 2, 1])]},
         "f.json: partitions[0].replicas: partition replica lists may not contain duplicate entries: foo-0 contains multiple entries for 1"),
        ({"partitions": [entry(log_dirs=["any"])]}, "f.json: partitions[0].log_dirs: size of replicas list [1, 2] is different"),
        ({"partitions": [entry(log_dirs="any")]}, 'f.json: partitions[0].log_dirs: expected a list of strings, got "any"'),
        ({"partitions": [entry(log_dirs=["any", "/data"])]}, 'f.json: partitions[0].log_dirs: kctl\'s brokers have no log directories to choose from; use "any", not "/data"'),
        ({"partitions": [entry(), entry(replicas=[3])]}, "f.json: partitions[1]: partition foo-0 is listed twice (also at partitions[0])"),
    ],
)
def test_malformed_reassignment_files_name_the_entry_and_field(document: Any, message: str) -> None:
    with pytest.raises(AdminCommandFailedError) as caught:
        parse_reassignment(document, "f.json")
    assert str(caught.value).startswith(message)


def test_election_file() -> None:
    document = {"partitions": [{"topic": "foo", "partition": 1}, {"topic": "bar", "partition": 0}]}
    assert parse_election_partitions(document, "e.json") == [TopicPartition("foo", 1), TopicPartition("bar", 0)]
    with pytest.raises(AdminCommandFailedError, match=r"^e.json: partitions: no partitions given$"):
        parse_election_partitions({"partitions": []}, "e.json")
    with pytest.raises(AdminCommandFailedError, match=r"^e.json: partitions\[0\].partition: expected a partition id"):
        parse_election_partitions({"partitions": [{"topic": "foo"}]}, "e.json")


def test_unreadable_files_are_clear_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"partitions": [\n{"topic": "foo",}]}')
    with pytest.raises(AdminCommandFailedError, match=r"broken.json: not valid JSON: .* at line 2 column"):
        read_json(broken)
    with pytest.raises(AdminCommandFailedError, match=r"cannot read .*missing.json: No such file or directory"):
        read_json(tmp_path / "missing.json")
