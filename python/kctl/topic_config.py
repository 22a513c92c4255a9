"""Topic configs: the per-topic overrides Kafka 3.9's ``LogConfig`` defines, and their validation.

Kafka checks a topic's overrides before it writes ``/config/topics/<topic>`` (``AdminZkClient``'s
``validateTopicCreate`` and ``changeTopicConfig``): every name must be a topic config, every value
must parse as the config's type (the text is trimmed first, as ``ConfigDef`` does) and pass its
validator, and a few rules span configs. kctl does the same with the same definitions, so that
``--config foo.bar=1`` or ``retention.ms=abc`` is refused before anything is written, with
:class:`~kctl.errors.InvalidConfigurationError` (Kafka's ``InvalidConfigurationException``) naming
the property and the value. The controller itself only reads ``unclean.leader.election.enable``;
the others are kept for the brokers, as Kafka's controller keeps them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kctl.errors import InvalidConfigurationError
from kctl.model import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


class ConfigType(enum.Enum):
    """The ``ConfigDef.Type`` of a topic config: how its text is parsed."""

    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"


Value = bool | int | float | str | list[str]
Validator = Callable[[Value], str | None]
"""Why a parsed value is not valid (Kafka's ``ConfigException`` message), or None."""


@dataclass(frozen=True)
class TopicConfigKey:
    """One topic config: its type, Kafka's default and the values it takes."""

    name: str
    type: ConfigType
    default: str
    """Kafka's default, as text (the broker's ``log.*`` property overrides it cluster-wide)."""
    valid_values: str = ""
    """What Kafka's documentation shows in its "Valid Values" column."""
    validator: Validator | None = None


# --- Validators (ConfigDef's Range, ValidString and ValidList, and Kafka's special ones) -------------


def _at_least(minimum: int) -> Validator:
    return lambda value: f"Value must be at least {minimum}" if value < minimum else None  # type: ignore[operator]


def _between(minimum: float, maximum: float) -> Validator:
    def check(value: Value) -> str | None:
        if not minimum <= value <= maximum:  # type: ignore[operator]  # also refuses NaN
            return f"Value must be at least {minimum}" if not value >= minimum else f"Value must be no more than {maximum}"  # type: ignore[operator]
        return None
    return check


def _one_of(*strings: str) -> Validator:
    return lambda value: None if value in strings else f"String must be one of: {', '.join(strings)}"


def _each_one_of(*strings: str) -> Validator:
    check = _one_of(*strings)
    return lambda values: next((p for p in map(check, values) if p is not None), None)  # type: ignore[arg-type]


def _gzip_level(value: Value) -> str | None:
    """``CompressionType.GZIP.levelValidator``: Deflater's levels, or its default (-1)."""
    return None if 1 <= value <= 9 or value == -1 else "Value must be between 1 and 9 or equal to -1"  # type: ignore[operator]


_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str) -> Validator:
    """``ThrottledReplicaListValidator``: ``*``, or ``partition:broker`` entries."""
    def check(values: Value) -> str | None:
        entries = [v.strip() for v in values]  # type: ignore[union-attr]
        if all(_THROTTLED_REPLICA.fullmatch(e) for e in entries) or "".join(entries) == "*":
            return None
        return (f"{name} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return check


_RELEASES = {
    "0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0, "0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3,
    "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3,
    "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5, "3.8": 1,
    "3.9": 1, "4.0": 2,
}
"""Kafka 3.9's ``MetadataVersion`` releases and how many internal versions (``-IVn``) each has
(none: the release alone, as ``0.9.0``); 4.0 was not yet a production release."""
_METADATA_VERSIONS = frozenset(
    [r for r, n in _RELEASES.items() if r != "4.0"] + [f"{r}-IV{i}" for r, n in _RELEASES.items() for i in range(n)]
)


def _message_format_version(value: Value) -> str | None:
    """``MetadataVersionValidator``: a release (``3.0``, ``0.10.2``, extra parts ignored) or an
    internal version (``3.0-IV1``)."""
    text = str(value)
    segments = text.split(".")
    kept = 3 if text.startswith("0.") else 2
    key = text if kept >= len(segments) else ".".join(segments[:kept])
    return None if key in _METADATA_VERSIONS else f"Version {text} is not a valid version"


_LONG_MAX = str(INT64_MAX)
_BOOLEAN = "true, false (any case)"
_ZOOKEEPER_MODE = "false (true is refused in ZooKeeper mode)"

TOPIC_CONFIGS: dict[str, TopicConfigKey] = {
    key.name: key
    for key in (
        TopicConfigKey("cleanup.policy", ConfigType.LIST, "delete", "[compact, delete]",
                       _each_one_of("compact", "delete")),
        TopicConfigKey("compression.gzip.level", ConfigType.INT, "-1", "[1,...,9] or -1", _gzip_level),
        TopicConfigKey("compression.lz4.level", ConfigType.INT, "9", "[1,...,17]", _between(1, 17)),
        TopicConfigKey("compression.type", ConfigType.STRING, "producer",
                       "[uncompressed, zstd, lz4, snappy, gzip, producer]",
                       _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        TopicConfigKey("compression.zstd.level", ConfigType.INT, "3", "[-131072,...,22]", _between(-131072, 22)),
        TopicConfigKey("delete.retention.ms", ConfigType.LONG, "86400000", "[0,...]", _at_least(0)),
        TopicConfigKey("file.delete.delay.ms", ConfigType.LONG, "60000", "[0,...]", _at_least(0)),
        TopicConfigKey("flush.messages", ConfigType.LONG, _LONG_MAX, "[1,...]", _at_least(1)),
        TopicConfigKey("flush.ms", ConfigType.LONG, _LONG_MAX, "[0,...]", _at_least(0)),
        TopicConfigKey("follower.replication.throttled.replicas", ConfigType.LIST, "",
                       "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
                       _throttled_replicas("follower.replication.throttled.replicas")),
        TopicConfigKey("index.interval.bytes", ConfigType.INT, "4096", "[0,...]", _at_least(0)),
        TopicConfigKey("leader.replication.throttled.replicas", ConfigType.LIST, "",
                       "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
                       _throttled_replicas("leader.replication.throttled.replicas")),
        TopicConfigKey("local.retention.bytes", ConfigType.LONG, "-2", "[-2,...]", _at_least(-2)),
        TopicConfigKey("local.retention.ms", ConfigType.LONG, "-2", "[-2,...]", _at_least(-2)),
        TopicConfigKey("max.compaction.lag.ms", ConfigType.LONG, _LONG_MAX, "[1,...]", _at_least(1)),
        TopicConfigKey("max.message.bytes", ConfigType.INT, "1048588", "[0,...]", _at_least(0)),
        TopicConfigKey("message.downconversion.enable", ConfigType.BOOLEAN, "true", _BOOLEAN),
        TopicConfigKey("message.format.version", ConfigType.STRING, "3.0-IV1",
                       "a Kafka release (0.8.0 … 3.9) or internal version (3.0-IV1 … 4.0-IV1)", _message_format_version),
        TopicConfigKey("message.timestamp.after.max.ms", ConfigType.LONG, _LONG_MAX, "[0,...]", _at_least(0)),
        TopicConfigKey("message.timestamp.before.max.ms", ConfigType.LONG, _LONG_MAX, "[0,...]", _at_least(0)),
        TopicConfigKey("message.timestamp.difference.max.ms", ConfigType.LONG, _LONG_MAX, "[0,...]", _at_least(0)),
        TopicConfigKey("message.timestamp.type", ConfigType.STRING, "CreateTime", "[CreateTime, LogAppendTime]",
                       _one_of("CreateTime", "LogAppendTime")),
        TopicConfigKey("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", "[0,...,1]", _between(0, 1)),
        TopicConfigKey("min.compaction.lag.ms", ConfigType.LONG, "0", "[0,...]", _at_least(0)),
        TopicConfigKey("min.insync.replicas", ConfigType.INT, "1", "[1,...]", _at_least(1)),
        TopicConfigKey("preallocate", ConfigType.BOOLEAN, "false", _BOOLEAN),
        TopicConfigKey("remote.log.copy.disable", ConfigType.BOOLEAN, "false", _ZOOKEEPER_MODE),
        TopicConfigKey("remote.log.delete.on.disable", ConfigType.BOOLEAN, "false", _ZOOKEEPER_MODE),
        TopicConfigKey("remote.storage.enable", ConfigType.BOOLEAN, "false", "false (no tiered storage here)"),
        TopicConfigKey("retention.bytes", ConfigType.LONG, "-1", "any (-1: no limit)"),
        TopicConfigKey("retention.ms", ConfigType.LONG, "604800000", "[-1,...]", _at_least(-1)),
        TopicConfigKey("segment.bytes", ConfigType.INT, "1073741824", "[14,...]", _at_least(14)),
        TopicConfigKey("segment.index.bytes", ConfigType.INT, "10485760", "[4,...]", _at_least(4)),
        TopicConfigKey("segment.jitter.ms", ConfigType.LONG, "0", "[0,...]", _at_least(0)),
        TopicConfigKey("segment.ms", ConfigType.LONG, "604800000", "[1,...]", _at_least(1)),
        TopicConfigKey(UNCLEAN_LEADER_ELECTION_ENABLE, ConfigType.BOOLEAN, "false", _BOOLEAN),
    )
}
"""Every topic config of Kafka 3.9 (``LogConfig``), by name."""


# --- Parsing (ConfigDef.parseType) -----------------------------------------------------------------

_JAVA_WHITESPACE = "".join(map(chr, range(33)))
"""What Java's ``String.trim`` removes: every character up to the space."""
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_INTEGER_RANGES = {ConfigType.INT: (INT32_MIN, INT32_MAX), ConfigType.LONG: (INT64_MIN, INT64_MAX)}


def _parse(key: TopicConfigKey, text: str) -> Value:
    """The value of ``text`` as ``key``'s type, or :class:`InvalidConfigurationError`."""
    trimmed = text.strip(_JAVA_WHITESPACE)
    kind = key.type
    if kind is ConfigType.BOOLEAN:
        if trimmed.lower() not in ("true", "false"):
            raise _invalid(key.name, text, "Expected value to be either true or false")
        return trimmed.lower() == "true"
    if kind in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[kind]
        digits = trimmed.lstrip("+-").lstrip("0")  # int() refuses 4300+ digits with an error of its own
        if not _INTEGER.fullmatch(trimmed) or len(digits) > len(str(high)) or not low <= int(trimmed) <= high:
            raise _invalid(key.name, text, f"Not a number of type {kind.name}")
        return int(trimmed)
    if kind is ConfigType.DOUBLE:
        if not _DOUBLE.fullmatch(trimmed):
            raise _invalid(key.name, text, "Not a number of type DOUBLE")
        return float(trimmed.rstrip("fFdD").replace("Infinity", "inf"))
    if kind is ConfigType.LIST:
        return _LIST_SEPARATOR.split(trimmed) if trimmed else []
    return trimmed


def _invalid(name: str, value: str, problem: str) -> InvalidConfigurationError:
    """Kafka's ``ConfigException`` message, as ``InvalidConfigurationException`` carries it."""
    shown = value if len(value) <= 100 else value[:100] + "…"
    return InvalidConfigurationError(f"Invalid value {shown} for configuration {name}: {problem}")


def parse_topic_config(name: str, text: str) -> Value:
    """The value of the topic config ``name`` written as ``text``, checked as Kafka checks it."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise InvalidConfigurationError(f"Unknown topic config name: {name}")
    value = _parse(key, text)
    problem = None if key.validator is None else key.validator(value)
    if problem is not None:
        raise _invalid(name, text, problem)
    return value


def _text(name: object, value: object) -> str:
    """A config value given in Python as Kafka's tools take it: as text (booleans in lower case)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str | int | float):
        return str(value)
    if value is None:
        raise InvalidConfigurationError(f"Null value not supported for topic configs: {name}")
    raise InvalidConfigurationError(
        f"Invalid value {value!r} for configuration {name}: expected a string, a number or a boolean"
    )


def validate_topic_config(config: Mapping[str, object] | None) -> dict[str, str]:
    """A topic's overrides as they are stored (values as text), if Kafka 3.9's ZooKeeper-mode admin
    path would accept them; otherwise :class:`InvalidConfigurationError` naming the property."""
    stored: dict[str, str] = {}
    parsed: dict[str, Value] = {}
    for name, value in (config or {}).items():
        if not isinstance(name, str) or name not in TOPIC_CONFIGS:
            raise InvalidConfigurationError(f"Unknown topic config name: {name}")
        stored[name] = _text(name, value)
        parsed[name] = parse_topic_config(name, stored[name])
    min_lag = parsed.get("min.compaction.lag.ms", 0)
    max_lag = parsed.get("max.compaction.lag.ms", INT64_MAX)
    if min_lag > max_lag:  # type: ignore[operator]
        raise InvalidConfigurationError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})"
        )
    if parsed.get("remote.log.delete.on.disable") or parsed.get("remote.log.copy.disable"):
        raise InvalidConfigurationError(
            "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode."
        )
    if parsed.get("remote.storage.enable"):
        raise InvalidConfigurationError(
            "Invalid value true for configuration remote.storage.enable: Tiered Storage functionality is disabled "
            "in the broker. Topic cannot be configured with remote log storage."
        )
    return stored


__all__ = [
    "TOPIC_CONFIGS",
    "UNCLEAN_LEADER_ELECTION_ENABLE",
    "ConfigType",
    "TopicConfigKey",
    "parse_topic_config",
    "validate_topic_config",
]
