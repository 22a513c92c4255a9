"""Controller configuration, spelled with Kafka's broker property names (reference §8).

A :class:`ControllerConfig` is built from a mapping of property names, as a ``server.properties``
file would give them: values may be typed (``True``, ``10``) or strings (``"true"``, ``"10"``).
Unknown names and values of the wrong type or range are a :class:`InvalidConfigurationError` that
names the property and the value; nothing is silently ignored.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kctl.errors import InvalidConfigurationError, StateChangeFailedError
from kctl.model import INT32_MAX


@dataclass(frozen=True, order=True)
class ProtocolVersion:
    """An ``inter.broker.protocol.version`` such as ``3.0-IV1``; it selects request versions and
    which controller features (AlterPartition, topic ids, leader recovery) are in use."""

    release: tuple[int, int, int]
    iv: int = 99  # a bare "3.0" means the latest internal version of 3.0

    @classmethod
    def parse(cls, text: str) -> ProtocolVersion:
        m = _IBP_FORMAT.fullmatch(text.strip()) if isinstance(text, str) else None
        if not m:
            raise InvalidConfigurationError(
                f"Invalid value {text!r} for configuration inter.broker.protocol.version: "
                "expected a version such as 3.0 or 2.7-IV2"
            )
        major, minor, patch, iv = m.groups()
        return cls((int(major), int(minor), int(patch or 0)), 99 if iv is None else int(iv))

    def at_least(self, text: str) -> bool:
        return self >= _parsed_version(text)

    def __str__(self) -> str:
        major, minor, patch = self.release
        # Kafka spells 0.x versions with three numbers ("0.10.0-IV1", "0.9.0"), later ones with two.
        base = f"{major}.{minor}" + (f".{patch}" if patch or major == 0 else "")
        return base + ("" if self.iv == 99 else f"-IV{self.iv}")


_IBP_FORMAT = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(?:-IV(\d+))?")


@functools.lru_cache(maxsize=64)
def _parsed_version(text: str) -> ProtocolVersion:
    """The versions the request-version tables name, parsed once (they are asked per request)."""
    return ProtocolVersion.parse(text)


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InvalidConfigurationError(
        f"Invalid value {value!r} for configuration {name}: expected a boolean (true or false)"
    )


def _parse_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise InvalidConfigurationError(f"Invalid value {value!r} for configuration {name}: expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT_FORMAT.fullmatch(value.strip()):
        # Like Java's Integer.parseInt: no '1_000', no non-ASCII digits (both accepted by int()).
        return int(value.strip())
    raise InvalidConfigurationError(f"Invalid value {value!r} for configuration {name}: expected an integer")


_INT_FORMAT = re.compile(r"[+-]?[0-9]+")


def _parse_str(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise InvalidConfigurationError(f"Invalid value {value!r} for configuration {name}: expected a string")


def _parse_optional_str(name: str, value: Any) -> str | None:
    return None if value is None else _parse_str(name, value)


def _parse_ibp(name: str, value: Any) -> ProtocolVersion:
    if isinstance(value, ProtocolVersion):
        return value
    return ProtocolVersion.parse(_parse_str(name, value))


@dataclass(frozen=True)
class _Property:
    name: str
    parse: Callable[[str, Any], Any]
    minimum: int | None = None
    maximum: int | None = None
    doc: str = ""


def _prop(name: str, default: Any, parse: Callable[[str, Any], Any], doc: str, *,
          minimum: int | None = None, maximum: int | None = None) -> Any:
    return field(default=default, metadata={"property": _Property(name, parse, minimum, maximum, doc)})


@dataclass(frozen=True)
class ControllerConfig:
    """The broker properties the controller reads, with Kafka's defaults (3.0)."""

    unclean_leader_election_enable: bool = _prop(
        "unclean.leader.election.enable", False, _parse_bool,
        "Elect a live out-of-sync replica when no ISR member is alive (also a topic config).")
    auto_leader_rebalance_enable: bool = _prop(
        "auto.leader.rebalance.enable", True, _parse_bool,
        "Periodically move leadership back to preferred replicas.")
    leader_imbalance_per_broker_percentage: int = _prop(
        "leader.imbalance.per.broker.percentage", 10, _parse_int,
        "Rebalance a broker's partitions when more than this percentage is led elsewhere.",
        minimum=0, maximum=100)
    leader_imbalance_check_interval_seconds: int = _prop(
        "leader.imbalance.check.interval.seconds", 300, _parse_int,
        "Seconds between auto-rebalance checks (the first runs 5 s after failover).", minimum=1)
    controlled_shutdown_enable: bool = _prop(
        "controlled.shutdown.enable", True, _parse_bool,
        "Brokers move their leadership away before stopping.")
    controlled_shutdown_max_retries: int = _prop(
        "controlled.shutdown.max.retries", 3, _parse_int,
        "Attempts a broker makes at a controlled shutdown.", minimum=0)
    controlled_shutdown_retry_backoff_ms: int = _prop(
        "controlled.shutdown.retry.backoff.ms", 5000, _parse_int,
        "Pause between controlled-shutdown attempts.", minimum=0)
    controller_socket_timeout_ms: int = _prop(
        "controller.socket.timeout.ms", 30000, _parse_int,
        "Timeout of the controller-to-broker connection.", minimum=0, maximum=INT32_MAX)
    request_timeout_ms: int = _prop(
        "request.timeout.ms", 30000, _parse_int,
        "Timeout of one controller-to-broker request.", minimum=0, maximum=INT32_MAX)
    delete_topic_enable: bool = _prop(
        "delete.topic.enable", True, _parse_bool, "Allow topic deletion.")
    zookeeper_session_timeout_ms: int = _prop(
        "zookeeper.session.timeout.ms", 18000, _parse_int,
        "ZooKeeper session timeout.", minimum=1, maximum=INT32_MAX)
    replica_lag_time_max_ms: int = _prop(
        "replica.lag.time.max.ms", 30000, _parse_int,
        "A follower that has not caught up for this long leaves the ISR.", minimum=1)
    default_replication_factor: int = _prop(
        "default.replication.factor", 1, _parse_int,
        "Replication factor of topics created without one.", minimum=1)
    num_partitions: int = _prop(
        "num.partitions", 1, _parse_int, "Partition count of topics created without one.", minimum=1)
    min_insync_replicas: int = _prop(
        "min.insync.replicas", 1, _parse_int, "Not used by the controller; kept for parity.", minimum=1)
    inter_broker_protocol_version: ProtocolVersion = _prop(
        "inter.broker.protocol.version", ProtocolVersion((3, 0, 0), 1), _parse_ibp,
        "Selects request versions and controller features.")
    control_plane_listener_name: str | None = _prop(
        "control.plane.listener.name", None, _parse_optional_str,
        "A dedicated listener for controller requests.")
    leader_selector_offline: str = _prop(
        "kctl.leader.selector.offline", "offline", _parse_str,
        "kctl: the leader selector used for offline elections (a registered selector name).")
    leader_selector_reassign: str = _prop(
        "kctl.leader.selector.reassign", "reassign", _parse_str,
        "kctl: the leader selector used when a reassignment moves the leader.")
    leader_selector_preferred: str = _prop(
        "kctl.leader.selector.preferred", "preferred", _parse_str,
        "kctl: the leader selector used for preferred-replica elections.")
    leader_selector_controlled_shutdown: str = _prop(
        "kctl.leader.selector.controlled_shutdown", "controlled_shutdown", _parse_str,
        "kctl: the leader selector used during controlled shutdown.")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            prop: _Property = f.metadata["property"]
            value = prop.parse(prop.name, getattr(self, f.name))
            if prop.minimum is not None and value < prop.minimum or prop.maximum is not None and value > prop.maximum:
                bounds = f"[{prop.minimum}, {'...' if prop.maximum is None else prop.maximum}]"
                raise InvalidConfigurationError(
                    f"Invalid value {value!r} for configuration {prop.name}: must be in {bounds}"
                )
            object.__setattr__(self, f.name, value)

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ControllerConfig:
        """Build a config from Kafka property names; unknown names are an error."""
        by_name = property_fields()
        kwargs: dict[str, Any] = {}
        for name, value in properties.items():
            if name not in by_name:
                raise InvalidConfigurationError(
                    f"Unknown configuration {name!r}; known properties: {', '.join(sorted(by_name))}"
                )
            kwargs[by_name[name]] = value
        return cls(**kwargs)

    @classmethod
    def coerce(cls, config: ControllerConfig | Mapping[str, Any] | None) -> ControllerConfig:
        """Accept a config, a mapping of property names, or ``None`` (the defaults)."""
        if config is None:
            return cls()
        if isinstance(config, ControllerConfig):
            return config
        if isinstance(config, Mapping):
            return cls.from_properties(config)
        raise InvalidConfigurationError(
            f"config must be a ControllerConfig or a mapping of property names, not {type(config).__name__}"
        )

    def with_properties(self, properties: Mapping[str, Any]) -> ControllerConfig:
        """A copy with some properties changed (dynamic broker config updates)."""
        merged = self.to_properties()
        merged.update(properties)
        return ControllerConfig.from_properties(merged)

    def to_properties(self) -> dict[str, Any]:
        return {f.metadata["property"].name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def leader_imbalance_ratio(self) -> float:
        return self.leader_imbalance_per_broker_percentage / 100.0

    @property
    def uses_alter_partition(self) -> bool:
        """IBP ≥ 2.7-IV2: leaders report ISR changes with AlterIsr/AlterPartition, not ZK writes."""
        return self.inter_broker_protocol_version.at_least("2.7-IV2")

    @property
    def uses_topic_ids(self) -> bool:
        return self.inter_broker_protocol_version.at_least("2.8-IV0")

    @property
    def uses_leader_recovery(self) -> bool:
        return self.inter_broker_protocol_version.at_least("3.2-IV0")

    @functools.cached_property  # asked per request sent
    def stop_replica_version(self) -> int:
        ibp = self.inter_broker_protocol_version
        if ibp.at_least("3.4-IV0"):
            return 4
        if ibp.at_least("2.6-IV0"):
            return 3
        if ibp.at_least("2.4-IV1"):
            return 2
        return 1 if ibp.at_least("2.2-IV0") else 0

    @functools.cached_property  # asked per request sent
    def leader_and_isr_version(self) -> int:
        ibp = self.inter_broker_protocol_version
        for version, at_least in ((7, "3.4-IV0"), (6, "3.2-IV0"), (5, "2.8-IV1"), (4, "2.4-IV1"),
                                  (3, "2.4-IV0"), (2, "2.2-IV0"), (1, "1.0-IV0")):
            if ibp.at_least(at_least):
                return version
        return 0

    @functools.cached_property  # asked per request sent
    def update_metadata_version(self) -> int:
        ibp = self.inter_broker_protocol_version
        for version, at_least in ((8, "3.4-IV0"), (7, "2.8-IV1"), (6, "2.4-IV1"), (5, "2.2-IV0"),
                                  (4, "1.0-IV0"), (3, "0.10.2-IV0"), (2, "0.10.0-IV1"), (1, "0.9.0")):
            if ibp.at_least(at_least):
                return version
        return 0

    def selector_name(self, kind: Any) -> str:
        """The configured leader selector for an election kind (offline, reassign, …); ``kind`` is
        the kind's name or a :class:`kctl.selectors.ElectionKind`."""
        kind = getattr(kind, "value", kind)
        if kind not in _SELECTOR_KINDS:
            raise InvalidConfigurationError(
                f"Unknown leader election kind {kind!r}; expected one of {', '.join(_SELECTOR_KINDS)}"
            )
        return str(getattr(self, f"leader_selector_{kind}"))

    @property
    def leader_selectors(self) -> dict[str, str]:
        """The configured selector of each election kind, kind → name (``kctl.leader.selector.*``)."""
        return {kind: self.selector_name(kind) for kind in _SELECTOR_KINDS}


_SELECTOR_KINDS = ("offline", "reassign", "preferred", "controlled_shutdown")


def describe_components(engine: str, store: str, transport: str, config: ControllerConfig) -> str:
    """What a controller runs with, in one line: the controller processes log it when they start
    and ``kctl sim``/``kctl demo`` print it in their header, so a run says which plugins it used."""
    selectors = ", ".join(f"{kind}={name}" for kind, name in config.leader_selectors.items())
    return f"engine {engine}, store {store}, transport {transport}, leader selectors {selectors}"


def property_fields() -> dict[str, str]:
    """Kafka property name → attribute name."""
    return {f.metadata["property"].name: f.name for f in dataclasses.fields(ControllerConfig)}


def property_docs() -> dict[str, tuple[Any, str]]:
    """Kafka property name → (default, description), for documentation and ``kctl config``."""
    return {
        f.metadata["property"].name: (f.default, f.metadata["property"].doc)
        for f in dataclasses.fields(ControllerConfig)
    }


def topic_unclean_leader_election_enable(topic: str, overrides: Mapping[str, str], default: bool) -> bool:
    """A topic's effective ``unclean.leader.election.enable`` (reference §2.3): its override, else
    the broker's ``default``. An override that is not a boolean fails, as it fails Kafka's election."""
    value = overrides.get("unclean.leader.election.enable")
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise StateChangeFailedError(
            f"Invalid value {value!r} for configuration unclean.leader.election.enable of topic {topic}"
        )
    return text == "true"
