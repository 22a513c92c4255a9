"""Topic configs are checked as Kafka 3.9's LogConfig checks them (issue 11, defect 5): the names,
each type's parsing and validator, the rules across configs; in the admin path (topic creation,
config changes), before anything is written; and an invalid value already stored is logged and
treated as unset by the controller, never a crash."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.errors import InvalidConfigurationError, KctlError
from kctl.topic_config import TOPIC_CONFIGS, ConfigType, parse_topic_config, validate_topic_config

ACCEPTED = [
    ("cleanup.policy", "compact, delete", ["compact", "delete"]),
    ("cleanup.policy", "", []),
    ("compression.gzip.level", "-1", -1),
    ("compression.type", " zstd ", "zstd"),
    ("compression.zstd.level", "-131072", -131072),
    ("flush.messages", "9223372036854775807", 2**63 - 1),
    ("leader.replication.throttled.replicas", "0:1, 2:3", ["0:1", "2:3"]),
    ("follower.replication.throttled.replicas", "*", ["*"]),
    ("max.message.bytes", "+0", 0),
    ("message.format.version", "0.10.2-IV0", "0.10.2-IV0"),
    ("message.format.version", "3.0.1", "3.0.1"),  # the third part is ignored, as Kafka does
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ("min.cleanable.dirty.ratio", "1e-1", 0.1),
    ("min.insync.replicas", "2147483647", 2**31 - 1),
    ("retention.bytes", "-5", -5),
    ("retention.ms", "-1", -1),
    ("segment.bytes", "14", 14),
    ("unclean.leader.election.enable", " TRUE ", True),
]
REFUSED = [
    ("foo.bar", "1", "Unknown topic config name: foo.bar"),
    ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("retention.ms", "9223372036854775808", "Invalid value 9223372036854775808 for configuration retention.ms: "
                                            "Not a number of type LONG"),
    ("segment.bytes", "2147483648", "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"),
    ("segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ("segment.ms", "1.5", "Invalid value 1.5 for configuration segment.ms: Not a number of type LONG"),
    ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ("min.cleanable.dirty.ratio", "1.01", "Invalid value 1.01 for configuration min.cleanable.dirty.ratio: "
                                          "Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "ratio", "Invalid value ratio for configuration min.cleanable.dirty.ratio: "
                                           "Not a number of type DOUBLE"),
    ("unclean.leader.election.enable", "yes", "Invalid value yes for configuration unclean.leader.election.enable: "
                                              "Expected value to be either true or false"),
    ("cleanup.policy", "delete,Compact", "Invalid value delete,Compact for configuration cleanup.policy: "
                                         "String must be one of: compact, delete"),
    ("cleanup.policy", "compact,", "Invalid value compact, for configuration cleanup.policy: "
                                   "String must be one of: compact, delete"),
    ("compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one of: "
                                 "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: "
                                    "Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: "
                                    "Value must be no more than 17"),
    ("message.timestamp.type", "createtime", "Invalid value createtime for configuration message.timestamp.type: "
                                             "String must be one of: CreateTime, LogAppendTime"),
    ("message.format.version", "4.0", "Invalid value 4.0 for configuration message.format.version: "
                                      "Version 4.0 is not a valid version"),
    ("leader.replication.throttled.replicas", "0:a", "Invalid value 0:a for configuration "
                                                     "leader.replication.throttled.replicas: leader.replication."
                                                     "throttled.replicas must be the literal '*' or a list of replicas"),
]


@pytest.mark.parametrize(("name", "text", "value"), ACCEPTED, ids=[f"{n}={t}" for n, t, _ in ACCEPTED])
def test_values_are_parsed_as_kafka_parses_them(name: str, text: str, value: object) -> None:
    assert parse_topic_config(name, text) == value
    assert validate_topic_config({name: text}) == {name: text}  # stored as given


@pytest.mark.parametrize(("name", "text", "message"), REFUSED, ids=[f"{n}={t}" for n, t, _ in REFUSED])
def test_invalid_configs_are_refused_naming_the_property_and_value(name: str, text: str, message: str) -> None:
    with pytest.raises(InvalidConfigurationError) as refused:
        validate_topic_config({"retention.bytes": "1", name: text})
    assert str(refused.value).startswith(message)
    assert refused.value.error.name == "INVALID_CONFIG"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
         "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
        ({"remote.storage.enable": "true"}, "Invalid value true for configuration remote.storage.enable: Tiered "
                                            "Storage functionality is disabled in the broker."),
        ({"remote.log.copy.disable": "true"}, "It is invalid to set `remote.log.delete.on.disable` or "
                                              "`remote.log.copy.disable` under Zookeeper's mode."),
        ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
        ({"retention.ms": [1]}, "Invalid value [1] for configuration retention.ms: expected a string, a number "),
    ],
)
def test_rules_across_configs_and_python_values(config: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigurationError) as refused:
        validate_topic_config(config)
    assert str(refused.value).startswith(message)


def test_python_values_are_stored_as_kafkas_tools_write_them() -> None:
    stored = validate_topic_config({"retention.ms": 1000, "unclean.leader.election.enable": True,
                                    "min.cleanable.dirty.ratio": 0.25, "min.compaction.lag.ms": 5})
    assert stored == {"retention.ms": "1000", "unclean.leader.election.enable": "true",
                      "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "5"}


def test_kafka_3_9_topic_configs_are_all_defined() -> None:
    assert len(TOPIC_CONFIGS) == 36
    assert {name for name, key in TOPIC_CONFIGS.items() if key.type is ConfigType.BOOLEAN} == {
        "message.downconversion.enable", "preallocate", "remote.log.copy.disable", "remote.log.delete.on.disable",
        "remote.storage.enable", "unclean.leader.election.enable"}
    for key in TOPIC_CONFIGS.values():  # every default is itself valid
        parse_topic_config(key.name, key.default)


# --- The admin path: nothing is written on refusal ---------------------------------------------


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(3, config={"auto.leader.rebalance.enable": False}) as c:
        c.create_topic("t", partitions=1, replication_factor=3, config={"retention.ms": 1000})
        yield c


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("config", [{"foo.bar": 1}, {"retention.ms": "abc"}, {"cleanup.policy": "archive"}])
def test_topic_creation_with_an_invalid_config_writes_nothing(cluster: EmbeddedCluster, config: dict[str, object]) -> None:
    with pytest.raises(KctlError) as refused:
        cluster.create_topic("v", partitions=1, replication_factor=1, config=config)
    assert refused.value.error.name == "INVALID_CONFIG" and str(next(iter(config))) in str(refused.value)
    assert "v" not in cluster.store.get_all_topics()
    assert cluster.store.get_topic_configs(["v"]).values == {"v": {}}


@pytest.mark.usefixtures("engine")
def test_a_config_change_is_validated_before_it_is_written(cluster: EmbeddedCluster) -> None:
    with pytest.raises(InvalidConfigurationError, match="Not a number of type LONG"):
        cluster.set_topic_config("t", {"retention.ms": "abc"})
    with pytest.raises(InvalidConfigurationError, match="Unknown topic config name: foo.bar"):
        cluster.set_topic_config("t", {"foo.bar": 1})
    assert cluster.store.get_topic_configs(["t"]).values == {"t": {"retention.ms": "1000"}}
    cluster.set_topic_config("t", {"retention.ms": 2000, "cleanup.policy": "compact"})
    assert cluster.store.get_topic_configs(["t"]).values == {"t": {"retention.ms": "2000", "cleanup.policy": "compact"}}


@pytest.mark.usefixtures("engine")
def test_an_invalid_stored_value_is_logged_and_treated_as_unset(
    cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Written by an older tool: the controller's config handler reads it as unset (no unclean
    election is triggered) and says why."""
    caplog.set_level(logging.INFO, logger="kctl")
    cluster.store.set_topic_config("t", {"unclean.leader.election.enable": "maybe"})
    cluster.run_until(lambda: "Ignoring the stored config of topic t" in caplog.text, what="the change to be read")
    assert ("Ignoring the stored config of topic t (/config/topics/t): Invalid value maybe for configuration "
            "unclean.leader.election.enable: Expected value to be either true or false") in caplog.text
    assert not [r for r in caplog.records if r.exc_info]
    assert cluster.run_until_stable()
