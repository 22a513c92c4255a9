"""The JSON files of Kafka's admin tools, read strictly.

``kafka-reassign-partitions`` takes ``{"version":1,"partitions":[{"topic":"foo","partition":0,
"replicas":[1,2],"log_dirs":["any","any"]}]}`` and ``kafka-leader-election`` takes
``{"partitions":[{"topic":"foo","partition":0}]}``. A file that does not fit is refused as a whole,
before anything is written, with an :class:`~kctl.errors.AdminCommandFailedError` naming the file,
the entry (``partitions[2]``) and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kctl.errors import AdminCommandFailedError, KctlError
from kctl.limits import DocumentError, load_json, read_file
from kctl.model import INT32_MAX, TopicPartition, int_problem, validate_topic_name

ANY_LOG_DIR = "any"
"""The ``log_dirs`` entry that leaves the choice of directory to the broker (the only one kctl has)."""


def read_json(path: str | Path) -> Any:
    """The parsed content of a tool's JSON file; a file that cannot be read, or is too large, not
    UTF-8, not JSON or nested too deeply, is a clear error (:mod:`kctl.limits`)."""
    try:
        return load_json(read_file(path))
    except OSError as exc:
        raise AdminCommandFailedError(f"cannot read {path}: {exc.strerror}") from None
    except DocumentError as exc:
        raise AdminCommandFailedError(f"{path}: {exc}") from None


def _entries(document: Any, source: str) -> list[Mapping[str, Any]]:
    if not isinstance(document, dict):
        raise AdminCommandFailedError(f"{source}: expected a JSON object with a \"partitions\" list")
    version = document.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise AdminCommandFailedError(f"{source}: version: unsupported version {version!r} (expected 1)")
    partitions = document.get("partitions")
    if not isinstance(partitions, list):
        raise AdminCommandFailedError(f"{source}: partitions: expected a list of partition entries")
    for i, entry in enumerate(partitions):
        if not isinstance(entry, dict):
            raise AdminCommandFailedError(f"{source}: partitions[{i}]: expected an object, got {json.dumps(entry)}")
    return partitions


def _partition(entry: Mapping[str, Any], where: str) -> TopicPartition:
    topic, partition = entry.get("topic"), entry.get("partition")
    if not isinstance(topic, str):
        raise AdminCommandFailedError(f"{where}.topic: expected a topic name, got {json.dumps(topic)}")
    try:
        validate_topic_name(topic)
    except KctlError as exc:
        raise AdminCommandFailedError(f"{where}.topic: {exc}") from None
    if not isinstance(partition, int) or int_problem(partition, 0) is not None:
        raise AdminCommandFailedError(
            f"{where}.partition: expected a partition id (an integer from 0 to {INT32_MAX}), got {json.dumps(partition)}"
        )
    return TopicPartition(topic, partition)


def _no_duplicates(seen: dict[TopicPartition, int], tp: TopicPartition, i: int, source: str) -> None:
    if tp in seen:
        raise AdminCommandFailedError(
            f"{source}: partitions[{i}]: partition {tp} is listed twice (also at partitions[{seen[tp]}])"
        )
    seen[tp] = i


def parse_reassignment(document: Any, source: str) -> dict[TopicPartition, list[int]]:
    """The target replicas of each partition of a ``kafka-reassign-partitions`` file."""
    targets: dict[TopicPartition, list[int]] = {}
    seen: dict[TopicPartition, int] = {}
    for i, entry in enumerate(_entries(document, source)):
        where = f"{source}: partitions[{i}]"
        tp = _partition(entry, where)
        replicas = entry.get("replicas")
        if not isinstance(replicas, list) or not replicas or any(int_problem(r, 0) is not None for r in replicas):
            raise AdminCommandFailedError(
                f"{where}.replicas: expected a non-empty list of broker ids (integers from 0 to {INT32_MAX}), "
                f"got {json.dumps(replicas)}"
            )
        duplicates = sorted({r for r in replicas if replicas.count(r) > 1})
        if duplicates:
            raise AdminCommandFailedError(
                f"{where}.replicas: partition replica lists may not contain duplicate entries: "
                f"{tp} contains multiple entries for {','.join(map(str, duplicates))}"
            )
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise AdminCommandFailedError(f"{where}.log_dirs: expected a list of strings, got {json.dumps(log_dirs)}")
        if len(log_dirs) != len(replicas):
            raise AdminCommandFailedError(
                f"{where}.log_dirs: size of replicas list {replicas} is different from size of log dirs list "
                f"{log_dirs} for partition {tp}"
            )
        chosen = [d for d in log_dirs if d != ANY_LOG_DIR]
        if chosen:
            raise AdminCommandFailedError(
                f"{where}.log_dirs: kctl's brokers have no log directories to choose from; use \"any\", not {json.dumps(chosen[0])}"
            )
        _no_duplicates(seen, tp, i, source)
        targets[tp] = list(replicas)
    if not targets:
        raise AdminCommandFailedError(f"{source}: partitions: the partition reassignment data file is empty")
    return targets


def parse_election_partitions(document: Any, source: str) -> list[TopicPartition]:
    """The partitions of a ``kafka-leader-election --path-to-json-file`` file."""
    found: list[TopicPartition] = []
    seen: dict[TopicPartition, int] = {}
    for i, entry in enumerate(_entries(document, source)):
        tp = _partition(entry, f"{source}: partitions[{i}]")
        _no_duplicates(seen, tp, i, source)
        found.append(tp)
    if not found:
        raise AdminCommandFailedError(f"{source}: partitions: no partitions given")
    return found


def format_reassignment(assignments: Mapping[TopicPartition, tuple[int, ...] | list[int]]) -> str:
    """A ``kafka-reassign-partitions`` file of ``assignments`` (what ``--execute`` prints for rollback)."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
                 "log_dirs": [ANY_LOG_DIR] * len(replicas)}
                for tp, replicas in sorted(assignments.items())
            ],
        },
        separators=(",", ":"),
    )


__all__ = ["ANY_LOG_DIR", "format_reassignment", "parse_election_partitions", "parse_reassignment", "read_json"]
