"""kctl.config: Kafka's property names and defaults (reference §8), value parsing, and the request
versions / feature switches derived from inter.broker.protocol.version (reference §5.4, §10)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kctl.config import ControllerConfig, ProtocolVersion, property_docs, property_fields
from kctl.errors import InvalidConfigurationError, KctlError

# Reference §8, Kafka 3.0 defaults.
KAFKA_DEFAULTS: dict[str, Any] = {
    "unclean.leader.election.enable": False,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.per.broker.percentage": 10,
    "leader.imbalance.check.interval.seconds": 300,
    "controlled.shutdown.enable": True,
    "controlled.shutdown.max.retries": 3,
    "controlled.shutdown.retry.backoff.ms": 5000,
    "controller.socket.timeout.ms": 30000,
    "request.timeout.ms": 30000,
    "delete.topic.enable": True,
    "zookeeper.session.timeout.ms": 18000,
    "replica.lag.time.max.ms": 30000,
    "default.replication.factor": 1,
    "num.partitions": 1,
    "min.insync.replicas": 1,
    "control.plane.listener.name": None,
}
# kctl's own properties: the built-in selector of each election kind.
KCTL_DEFAULTS: dict[str, str] = {
    "kctl.leader.selector.offline": "offline",
    "kctl.leader.selector.reassign": "reassign",
    "kctl.leader.selector.preferred": "preferred",
    "kctl.leader.selector.controlled_shutdown": "controlled_shutdown",
}
IBP = "inter.broker.protocol.version"

BOOL_PROPS = [name for name, v in KAFKA_DEFAULTS.items() if isinstance(v, bool)]
INT_PROPS = [name for name, v in KAFKA_DEFAULTS.items() if isinstance(v, int) and not isinstance(v, bool)]
STR_PROPS = list(KCTL_DEFAULTS)


def test_property_set_is_reference_section_8_plus_kctl_selectors() -> None:
    assert set(property_fields()) == set(KAFKA_DEFAULTS) | set(KCTL_DEFAULTS) | {IBP}


@pytest.mark.parametrize("name", sorted(KAFKA_DEFAULTS))
def test_kafka_defaults(name: str) -> None:
    value = ControllerConfig().to_properties()[name]
    assert value == KAFKA_DEFAULTS[name]
    assert type(value) is type(KAFKA_DEFAULTS[name])


@pytest.mark.parametrize("name", sorted(KCTL_DEFAULTS))
def test_selector_defaults_are_the_built_in_names(name: str) -> None:
    assert ControllerConfig().to_properties()[name] == KCTL_DEFAULTS[name]


def test_default_inter_broker_protocol_version_is_3_0_iv1() -> None:
    config = ControllerConfig()
    assert config.inter_broker_protocol_version == ProtocolVersion.parse("3.0-IV1")
    assert str(config.inter_broker_protocol_version) == "3.0-IV1"


def test_attribute_names() -> None:
    config = ControllerConfig()
    assert config.unclean_leader_election_enable is False
    assert config.auto_leader_rebalance_enable is True
    assert config.leader_imbalance_per_broker_percentage == 10
    assert config.leader_imbalance_check_interval_seconds == 300
    assert config.controlled_shutdown_enable is True
    assert config.controlled_shutdown_max_retries == 3
    assert config.controlled_shutdown_retry_backoff_ms == 5000
    assert config.controller_socket_timeout_ms == 30000
    assert config.request_timeout_ms == 30000
    assert config.delete_topic_enable is True
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.replica_lag_time_max_ms == 30000
    assert config.default_replication_factor == 1
    assert config.num_partitions == 1
    assert config.min_insync_replicas == 1
    assert config.control_plane_listener_name is None
    assert config.leader_selector_offline == "offline"
    assert config.leader_selector_reassign == "reassign"
    assert config.leader_selector_preferred == "preferred"
    assert config.leader_selector_controlled_shutdown == "controlled_shutdown"


def test_property_fields_map_names_to_attributes() -> None:
    fields = property_fields()
    assert fields["unclean.leader.election.enable"] == "unclean_leader_election_enable"
    assert fields[IBP] == "inter_broker_protocol_version"
    assert fields["kctl.leader.selector.controlled_shutdown"] == "leader_selector_controlled_shutdown"
    config = ControllerConfig()
    for name, attr in fields.items():
        assert getattr(config, attr) == config.to_properties()[name]


def test_property_docs() -> None:
    docs = property_docs()
    assert set(docs) == set(property_fields())
    for name, (default, doc) in docs.items():
        assert doc.strip(), name
        expected = {**KAFKA_DEFAULTS, **KCTL_DEFAULTS}.get(name, ProtocolVersion.parse("3.0-IV1"))
        assert default == expected, name


def test_config_is_frozen_and_hashable() -> None:
    config = ControllerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_partitions = 3  # type: ignore[misc]
    assert hash(config) == hash(ControllerConfig())
    assert config == ControllerConfig()


# --- from_properties ----------------------------------------------------------------------------


def test_from_properties_with_typed_values() -> None:
    config = ControllerConfig.from_properties(
        {
            "unclean.leader.election.enable": True,
            "auto.leader.rebalance.enable": False,
            "leader.imbalance.per.broker.percentage": 25,
            "num.partitions": 8,
            "control.plane.listener.name": "CONTROLLER",
            "kctl.leader.selector.offline": "load-aware",
            IBP: ProtocolVersion.parse("2.8-IV1"),
        }
    )
    assert config.unclean_leader_election_enable is True
    assert config.auto_leader_rebalance_enable is False
    assert config.leader_imbalance_per_broker_percentage == 25
    assert config.num_partitions == 8
    assert config.control_plane_listener_name == "CONTROLLER"
    assert config.leader_selector_offline == "load-aware"
    assert config.inter_broker_protocol_version == ProtocolVersion.parse("2.8-IV1")
    # Untouched properties keep their defaults.
    assert config.delete_topic_enable is True
    assert config.replica_lag_time_max_ms == 30000


def test_from_properties_with_string_values() -> None:
    config = ControllerConfig.from_properties(
        {
            "unclean.leader.election.enable": "true",
            "delete.topic.enable": "false",
            "controlled.shutdown.enable": " FALSE ",
            "auto.leader.rebalance.enable": "True",
            "leader.imbalance.per.broker.percentage": "10",
            "controlled.shutdown.max.retries": " 7 ",
            "controlled.shutdown.retry.backoff.ms": "+250",
            IBP: "2.7-IV2",
        }
    )
    assert config.unclean_leader_election_enable is True
    assert config.delete_topic_enable is False
    assert config.controlled_shutdown_enable is False
    assert config.auto_leader_rebalance_enable is True
    assert config.leader_imbalance_per_broker_percentage == 10
    assert type(config.leader_imbalance_per_broker_percentage) is int
    assert config.controlled_shutdown_max_retries == 7
    assert config.controlled_shutdown_retry_backoff_ms == 250
    assert config.inter_broker_protocol_version == ProtocolVersion((2, 7, 0), 2)


@pytest.mark.parametrize("name", INT_PROPS)
def test_every_int_property_accepts_int_and_numeric_string(name: str) -> None:
    attr = property_fields()[name]
    assert getattr(ControllerConfig.from_properties({name: 42}), attr) == 42
    assert getattr(ControllerConfig.from_properties({name: "42"}), attr) == 42


@pytest.mark.parametrize("name", BOOL_PROPS)
def test_every_bool_property_accepts_bool_and_boolean_string(name: str) -> None:
    attr = property_fields()[name]
    for raw, expected in ((True, True), (False, False), ("true", True), ("false", False), ("TRUE", True)):
        assert getattr(ControllerConfig.from_properties({name: raw}), attr) is expected


def test_empty_properties_give_the_defaults() -> None:
    assert ControllerConfig.from_properties({}) == ControllerConfig()


def test_string_defaults_compare_equal_to_typed_defaults() -> None:
    assert ControllerConfig.from_properties(
        {"num.partitions": "1", "delete.topic.enable": "true", IBP: "3.0-IV1"}
    ) == ControllerConfig()


@pytest.mark.parametrize(
    "name",
    ["unknown.property", "num_partitions", "unclean.leader.election.enabled", "kctl.leader.selector.bogus", ""],
)
def test_unknown_property_is_an_error_naming_it(name: str) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        ControllerConfig.from_properties({"num.partitions": 3, name: "x"})
    assert repr(name) in str(info.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        # booleans
        ("unclean.leader.election.enable", "yes"),
        ("unclean.leader.election.enable", "1"),
        ("unclean.leader.election.enable", 1),
        ("unclean.leader.election.enable", 0),
        ("delete.topic.enable", None),
        ("auto.leader.rebalance.enable", "t"),
        ("controlled.shutdown.enable", ""),
        # integers
        ("num.partitions", "ten"),
        ("num.partitions", True),
        ("num.partitions", False),
        ("num.partitions", 3.0),
        ("num.partitions", "3.0"),
        ("num.partitions", "1_000"),
        ("num.partitions", "\u0663"),  # Arabic-Indic digit three
        ("num.partitions", ""),
        ("num.partitions", None),
        ("request.timeout.ms", "30s"),
        ("leader.imbalance.per.broker.percentage", "10%"),
        ("controlled.shutdown.max.retries", [3]),
        # strings
        ("kctl.leader.selector.offline", 5),
        ("kctl.leader.selector.preferred", None),
        ("control.plane.listener.name", 9093),
        # protocol version
        (IBP, 3.0),
        (IBP, "latest"),
        (IBP, None),
    ],
)
def test_ill_typed_values_name_the_property_and_the_value(name: str, value: Any) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        ControllerConfig.from_properties({name: value})
    message = str(info.value)
    assert name in message
    assert repr(value) in message


@pytest.mark.parametrize(
    ("name", "bad", "good"),
    [
        ("leader.imbalance.per.broker.percentage", [-1, 101, "101"], [0, 100]),
        ("leader.imbalance.check.interval.seconds", [0, -5], [1]),
        ("controlled.shutdown.max.retries", [-1, "-1"], [0]),
        ("controlled.shutdown.retry.backoff.ms", [-1], [0]),
        ("controller.socket.timeout.ms", [-1], [0]),
        ("request.timeout.ms", [-1], [0]),
        ("zookeeper.session.timeout.ms", [0], [1]),
        ("replica.lag.time.max.ms", [0], [1]),
        ("default.replication.factor", [0, -1], [1]),
        ("num.partitions", [0, "0"], [1]),
        ("min.insync.replicas", [0], [1]),
    ],
)
def test_out_of_range_values(name: str, bad: list[Any], good: list[Any]) -> None:
    attr = property_fields()[name]
    for value in bad:
        with pytest.raises(InvalidConfigurationError) as info:
            ControllerConfig.from_properties({name: value})
        message = str(info.value)
        assert name in message
        assert str(int(value)) in message
    for value in good:
        assert getattr(ControllerConfig.from_properties({name: value}), attr) == value


def test_constructor_keywords_are_validated_too() -> None:
    assert ControllerConfig(num_partitions="4").num_partitions == 4  # type: ignore[arg-type]
    assert ControllerConfig(inter_broker_protocol_version="2.4-IV1").leader_and_isr_version == 4  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigurationError, match="num.partitions"):
        ControllerConfig(num_partitions=0)
    with pytest.raises(InvalidConfigurationError, match="delete.topic.enable"):
        ControllerConfig(delete_topic_enable="maybe")  # type: ignore[arg-type]


def test_configuration_errors_are_kctl_and_value_errors() -> None:
    with pytest.raises(KctlError):
        ControllerConfig.from_properties({"nope": 1})
    with pytest.raises(ValueError):
        ControllerConfig.from_properties({"num.partitions": "x"})


# --- coerce ---------------------------------------------------------------------------------------


def test_coerce_none_gives_defaults() -> None:
    assert ControllerConfig.coerce(None) == ControllerConfig()


def test_coerce_mapping() -> None:
    config = ControllerConfig.coerce({"unclean.leader.election.enable": True, "num.partitions": "3"})
    assert config.unclean_leader_election_enable is True
    assert config.num_partitions == 3


def test_coerce_mapping_validates() -> None:
    with pytest.raises(InvalidConfigurationError, match="bogus"):
        ControllerConfig.coerce({"bogus": 1})


def test_coerce_config_is_identity() -> None:
    config = ControllerConfig(num_partitions=5)
    assert ControllerConfig.coerce(config) is config


@pytest.mark.parametrize("value", ["num.partitions=3", [("num.partitions", 3)], 3, object()])
def test_coerce_rejects_other_types(value: Any) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        ControllerConfig.coerce(value)
    assert type(value).__name__ in str(info.value)


# --- with_properties / to_properties --------------------------------------------------------------


def test_to_properties_round_trip() -> None:
    config = ControllerConfig.from_properties(
        {"unclean.leader.election.enable": "true", "num.partitions": "6", IBP: "2.6-IV0",
         "control.plane.listener.name": "CONTROLLER", "kctl.leader.selector.reassign": "custom"}
    )
    props = config.to_properties()
    assert set(props) == set(property_fields())
    assert props["unclean.leader.election.enable"] is True
    assert props["num.partitions"] == 6
    assert props[IBP] == ProtocolVersion.parse("2.6-IV0")
    assert ControllerConfig.from_properties(props) == config
    # Also through the strings a properties file would hold.
    as_strings = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in props.items() if v is not None}
    assert ControllerConfig.from_properties(as_strings) == config


def test_with_properties_changes_only_the_given_properties() -> None:
    base = ControllerConfig.from_properties({"num.partitions": 4, "delete.topic.enable": False})
    updated = base.with_properties({"unclean.leader.election.enable": "true"})
    assert updated.unclean_leader_election_enable is True
    assert updated.num_partitions == 4
    assert updated.delete_topic_enable is False
    # The original is untouched.
    assert base.unclean_leader_election_enable is False
    assert updated != base
    assert updated.with_properties({"unclean.leader.election.enable": False}) == base


def test_with_properties_validates() -> None:
    base = ControllerConfig()
    with pytest.raises(InvalidConfigurationError, match="no.such.property"):
        base.with_properties({"no.such.property": 1})
    with pytest.raises(InvalidConfigurationError, match="leader.imbalance.per.broker.percentage"):
        base.with_properties({"leader.imbalance.per.broker.percentage": 200})


def test_leader_imbalance_ratio() -> None:
    assert ControllerConfig().leader_imbalance_ratio == pytest.approx(0.10)
    assert ControllerConfig(leader_imbalance_per_broker_percentage=25).leader_imbalance_ratio == pytest.approx(0.25)
    assert ControllerConfig(leader_imbalance_per_broker_percentage=0).leader_imbalance_ratio == 0.0


def test_selector_name() -> None:
    config = ControllerConfig.from_properties({"kctl.leader.selector.preferred": "load-aware"})
    assert config.selector_name("offline") == "offline"
    assert config.selector_name("reassign") == "reassign"
    assert config.selector_name("preferred") == "load-aware"
    assert config.selector_name("controlled_shutdown") == "controlled_shutdown"


def test_selector_name_accepts_election_kinds() -> None:
    from kctl.selectors import ElectionKind

    config = ControllerConfig.from_properties({"kctl.leader.selector.offline": "mine"})
    assert config.selector_name(ElectionKind.OFFLINE) == "mine"
    assert {config.selector_name(k) for k in ElectionKind} == {"mine", "reassign", "preferred", "controlled_shutdown"}


@pytest.mark.parametrize("kind", ["bogus", "", "OFFLINE", "controlled-shutdown"])
def test_selector_name_rejects_unknown_kinds(kind: str) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        ControllerConfig().selector_name(kind)
    assert repr(kind) in str(info.value)


# --- ProtocolVersion ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "release", "iv"),
    [
        ("3.0-IV1", (3, 0, 0), 1),
        ("3.0-IV0", (3, 0, 0), 0),
        ("2.7-IV2", (2, 7, 0), 2),
        ("3.4-IV0", (3, 4, 0), 0),
        ("0.10.0-IV1", (0, 10, 0), 1),
        ("0.10.2-IV0", (0, 10, 2), 0),
        ("0.9.0", (0, 9, 0), 99),
        ("2.8", (2, 8, 0), 99),
        ("3.0.1", (3, 0, 1), 99),
        (" 2.4-IV1 ", (2, 4, 0), 1),
        ("2.10-IV0", (2, 10, 0), 0),
    ],
)
def test_protocol_version_parse(text: str, release: tuple[int, int, int], iv: int) -> None:
    version = ProtocolVersion.parse(text)
    assert version.release == release
    assert version.iv == iv
    assert version == ProtocolVersion(release, iv)


@pytest.mark.parametrize(
    "text",
    ["", "3", "3.", ".3", "3.0-IV", "3.0-iv1", "3.0IV1", "v3.0", "3.0-IV1x", "latest", "3.0 -IV1", "3-0"],
)
def test_protocol_version_parse_rejects_malformed(text: str) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        ProtocolVersion.parse(text)
    assert IBP in str(info.value)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("value", [None, 3.0, 30, (3, 0)])
def test_protocol_version_parse_rejects_non_strings(value: Any) -> None:
    with pytest.raises(InvalidConfigurationError):
        ProtocolVersion.parse(value)


@pytest.mark.parametrize(
    "text", ["3.0-IV1", "2.7-IV2", "2.8", "3.4-IV0", "0.10.0-IV1", "0.10.2-IV0", "0.9.0", "0.8.2", "3.0.1", "1.0-IV0"]
)
def test_protocol_version_str_is_kafkas_spelling(text: str) -> None:
    assert str(ProtocolVersion.parse(text)) == text
    assert ProtocolVersion.parse(str(ProtocolVersion.parse(text))) == ProtocolVersion.parse(text)


# Kafka's inter.broker.protocol.version values up to 3.4, in release order.
KAFKA_IBPS = [
    "0.8.0", "0.8.1", "0.8.2", "0.9.0",
    "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2", "0.10.2-IV0",
    "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2",
    "1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1", "2.1-IV0", "2.1-IV1", "2.1-IV2",
    "2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0", "2.4-IV1", "2.5-IV0", "2.6-IV0",
    "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1", "3.1-IV0",
    "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3", "3.4-IV0",
]


def test_protocol_version_ordering_follows_kafka_release_order() -> None:
    versions = [ProtocolVersion.parse(v) for v in KAFKA_IBPS]
    assert sorted(reversed(versions)) == versions
    for older, newer in zip(versions, versions[1:]):
        assert older < newer
        assert newer.at_least(str(older))
        assert not older.at_least(str(newer))
        assert newer.at_least(str(newer))


def test_bare_release_is_its_latest_internal_version() -> None:
    assert ProtocolVersion.parse("2.7") > ProtocolVersion.parse("2.7-IV2")
    assert ProtocolVersion.parse("2.7") < ProtocolVersion.parse("2.8-IV0")
    assert ProtocolVersion.parse("3.0").at_least("3.0-IV1")
    # Numeric, not lexicographic.
    assert ProtocolVersion.parse("2.10-IV0") > ProtocolVersion.parse("2.9-IV0")
    assert ProtocolVersion.parse("10.0") > ProtocolVersion.parse("9.9")


def config_at(ibp: str) -> ControllerConfig:
    return ControllerConfig.from_properties({IBP: ibp})


# (LeaderAndIsr, UpdateMetadata, StopReplica) per IBP, worked out by hand from the §5.4 table.
REQUEST_VERSIONS = {
    "0.8.0": (0, 0, 0),
    "0.8.2": (0, 0, 0),
    "0.9.0": (0, 1, 0),
    "0.10.0-IV0": (0, 1, 0),
    "0.10.0-IV1": (0, 2, 0),
    "0.10.1-IV2": (0, 2, 0),
    "0.10.2-IV0": (0, 3, 0),
    "0.11.0-IV2": (0, 3, 0),
    "1.0-IV0": (1, 4, 0),
    "2.1-IV2": (1, 4, 0),
    "2.2-IV0": (2, 5, 1),
    "2.3-IV1": (2, 5, 1),
    "2.4-IV0": (3, 5, 1),
    "2.4-IV1": (4, 6, 2),
    "2.5-IV0": (4, 6, 2),
    "2.6-IV0": (4, 6, 3),
    "2.7-IV2": (4, 6, 3),
    "2.8-IV0": (4, 6, 3),
    "2.8-IV1": (5, 7, 3),
    "3.0-IV0": (5, 7, 3),
    "3.0-IV1": (5, 7, 3),
    "3.1-IV0": (5, 7, 3),
    "3.2-IV0": (6, 7, 3),
    "3.3-IV3": (6, 7, 3),
    "3.4-IV0": (7, 8, 4),
    # Bare releases mean their latest internal version.
    "2.4": (4, 6, 2),
    "2.8": (5, 7, 3),
    "3.0": (5, 7, 3),
}


@pytest.mark.parametrize(("ibp", "expected"), sorted(REQUEST_VERSIONS.items()))
def test_request_versions_by_ibp(ibp: str, expected: tuple[int, int, int]) -> None:
    config = config_at(ibp)
    assert (config.leader_and_isr_version, config.update_metadata_version, config.stop_replica_version) == expected


def test_default_request_versions_are_the_3_0_column() -> None:
    config = ControllerConfig()
    assert config.leader_and_isr_version == 5
    assert config.update_metadata_version == 7
    assert config.stop_replica_version == 3


# Reference §5.4 thresholds: (request attribute, first IBP of the version, version).
THRESHOLDS = [
    ("leader_and_isr_version", "3.4-IV0", 7),
    ("leader_and_isr_version", "3.2-IV0", 6),
    ("leader_and_isr_version", "2.8-IV1", 5),
    ("leader_and_isr_version", "2.4-IV1", 4),
    ("leader_and_isr_version", "2.4-IV0", 3),
    ("leader_and_isr_version", "2.2-IV0", 2),
    ("leader_and_isr_version", "1.0-IV0", 1),
    ("update_metadata_version", "3.4-IV0", 8),
    ("update_metadata_version", "2.8-IV1", 7),
    ("update_metadata_version", "2.4-IV1", 6),
    ("update_metadata_version", "2.2-IV0", 5),
    ("update_metadata_version", "1.0-IV0", 4),
    ("update_metadata_version", "0.10.2-IV0", 3),
    ("update_metadata_version", "0.10.0-IV1", 2),
    ("update_metadata_version", "0.9.0", 1),
    ("stop_replica_version", "3.4-IV0", 4),
    ("stop_replica_version", "2.6-IV0", 3),
    ("stop_replica_version", "2.4-IV1", 2),
    ("stop_replica_version", "2.2-IV0", 1),
]


@pytest.mark.parametrize(("attr", "first_ibp", "version"), THRESHOLDS)
def test_request_version_switches_exactly_at_its_threshold(attr: str, first_ibp: str, version: int) -> None:
    index = KAFKA_IBPS.index(first_ibp)
    assert getattr(config_at(first_ibp), attr) == version
    assert getattr(config_at(KAFKA_IBPS[index - 1]), attr) < version
    for later in KAFKA_IBPS[index:]:
        assert getattr(config_at(later), attr) >= version


def test_request_versions_never_decrease() -> None:
    previous = (0, 0, 0)
    for ibp in KAFKA_IBPS:
        config = config_at(ibp)
        current = (config.leader_and_isr_version, config.update_metadata_version, config.stop_replica_version)
        assert all(c >= p for c, p in zip(current, previous)), ibp
        previous = current
    assert previous == (7, 8, 4)


@pytest.mark.parametrize(
    ("switch", "last_without", "first_with"),
    [
        ("uses_alter_partition", "2.7-IV1", "2.7-IV2"),
        ("uses_topic_ids", "2.7-IV2", "2.8-IV0"),
        ("uses_leader_recovery", "3.1-IV0", "3.2-IV0"),
    ],
)
def test_feature_switches_at_their_boundary(switch: str, last_without: str, first_with: str) -> None:
    assert getattr(config_at(last_without), switch) is False
    assert getattr(config_at(first_with), switch) is True
    index = KAFKA_IBPS.index(first_with)
    assert all(getattr(config_at(v), switch) for v in KAFKA_IBPS[index:])
    assert not any(getattr(config_at(v), switch) for v in KAFKA_IBPS[:index])


def test_feature_switches_at_default_3_0() -> None:
    config = ControllerConfig()
    assert config.uses_alter_partition is True
    assert config.uses_topic_ids is True
    assert config.uses_leader_recovery is False
    old = config.with_properties({IBP: "2.4-IV1"})
    assert (old.uses_alter_partition, old.uses_topic_ids, old.uses_leader_recovery) == (False, False, False)
