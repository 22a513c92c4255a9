"""Scenario files for ``kctl sim``: a cluster, its topics and a timeline of steps, in TOML.

A scenario is checked completely before anything runs, against a static model of the cluster as
the steps change it (which topics exist, which brokers are up), so a misspelt field, an unknown
broker or a topic deleted two steps earlier is reported at once, never half-way through a run.
Every problem names the file, the place (``[cluster]``, ``topic 2 (orders)``, ``step 5
(kill_broker)``) and the field. ``docs/scenarios.md`` documents the format; :data:`ACTIONS` is
the table it is checked against.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kctl.admin import check_topic_fits
from kctl.cluster import DEFAULT_TIMEOUT, MAX_BROKERS
from kctl.config import ControllerConfig
from kctl.errors import KctlError, did_you_mean
from kctl.limits import DocumentError, load_toml, read_file
from kctl.model import INT32_MAX, NO_LEADER, TopicPartition, validate_topic_name
from kctl.plugins import get_plugin_host
from kctl.scheduler import MAX_DURATION
from kctl.topic_config import validate_topic_config


class ScenarioError(KctlError):
    """A scenario that cannot run as written; ``problems`` holds one line per mistake."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


# --- The model -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterSpec:
    """The ``[cluster]`` table: what :class:`~kctl.cluster.EmbeddedCluster` is built with."""

    brokers: tuple[int, ...]
    racks: dict[int, str] | None = None
    controllers: tuple[int, ...] = ()
    seed: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    """Kafka property names, as written in the file."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create, from ``[[topics]]`` or a ``create_topic`` step."""

    name: str
    partitions: int | None = None
    replication_factor: int | None = None
    assignment: dict[int, tuple[int, ...]] | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def create_arguments(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`EmbeddedCluster.create_topic` (unset ones left out)."""
        arguments = {"partitions": self.partitions, "replication_factor": self.replication_factor,
                     "assignment": self.assignment, "config": self.config or None}
        return {"name": self.name} | {k: v for k, v in arguments.items() if v is not None}


@dataclass(frozen=True)
class Step:
    """One ``[[steps]]`` entry, checked; ``args`` holds the action's own fields, parsed."""

    number: int
    """1-based position in the file (what messages and progress lines show)."""
    action: str
    args: Mapping[str, Any]
    at: float | None = None
    after: float | None = None
    note: str = ""
    wait: bool = True
    timeout: float = DEFAULT_TIMEOUT


@dataclass(frozen=True)
class Scenario:
    source: str
    cluster: ClusterSpec
    topics: tuple[TopicSpec, ...] = ()
    steps: tuple[Step, ...] = ()
    name: str = ""
    description: str = ""


# --- Values ----------------------------------------------------------------------------------------


class _Bad(Exception):
    """A value is wrong; ``field`` overrides the field the message is reported under."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


_TOML_TYPES = ((bool, "boolean"), (int, "integer"), (float, "float"), (str, "string"), (list, "array"),
               (dict, "table"))


def _shown(value: Any) -> str:
    kind = next((name for t, name in _TOML_TYPES if isinstance(value, t)), type(value).__name__)
    return f"{value!r} ({kind})"


def _integer(value: Any, minimum: int | None = None, maximum: int | None = INT32_MAX) -> int:
    """An integer; ids and counts are Kafka's ``Int``, so at most ``INT32_MAX`` unless told otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"expected an integer, got {_shown(value)}")
    if minimum is not None and value < minimum:
        raise _Bad(f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise _Bad(f"must be at most {maximum}, got {value}")
    return value


def _broker_key(key: str, static: _Static) -> int:
    """A table key naming a broker (``[cluster.racks]``, ``partitions_led``): its id in decimal."""
    if not (key.isascii() and key.isdigit()) or len(key) > len(str(INT32_MAX)):
        raise _Bad(f"expected broker ids as keys, got '{key}'")
    return static.broker(int(key))


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Bad(f"expected a number of seconds, got {_shown(value)}")
    if value < 0:
        raise _Bad(f"must not be negative, got {value}")
    if value > MAX_DURATION:
        raise _Bad(f"must be at most {MAX_DURATION:g} seconds (a day), got {value:g}")
    return float(value)


def _positive_seconds(value: Any) -> float:
    seconds = _seconds(value)
    if seconds == 0:
        raise _Bad("must be more than 0 seconds")
    return seconds


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad(f"expected true or false, got {_shown(value)}")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad(f"expected a string, got {_shown(value)}")
    return value


def _array(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _Bad(f"expected an array, got {_shown(value)}")
    return value


def _table(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"expected a table, got {_shown(value)}")
    return value


def _scalar_table(value: Any) -> dict[str, Any]:
    """Config values: strings, numbers or booleans (``kafka-configs`` takes them as text)."""
    table = _table(value)
    for key, item in table.items():
        if isinstance(item, list | dict):
            raise _Bad(f"{key}: expected a string, number or boolean, got {_shown(item)}")
    return table


def _topic_config(value: Any) -> dict[str, Any]:
    """A topic's config overrides, checked as Kafka checks them (:mod:`kctl.topic_config`)."""
    config = _scalar_table(value)
    try:
        validate_topic_config(config)
    except KctlError as e:
        raise _Bad(str(e)) from None
    return config


# --- The static model the steps are checked against -------------------------------------------------


@dataclass
class _Static:
    """The cluster as the steps change it: what exists and what is up at the step being checked."""

    brokers: tuple[int, ...]
    controllers: tuple[int, ...] = ()
    config: ControllerConfig = field(default_factory=ControllerConfig)
    topics: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Topic → (partitions, replication factor)."""
    down: set[int] = field(default_factory=set)

    def broker(self, value: Any) -> int:
        broker = _integer(value)
        if broker not in self.brokers:
            raise _Bad(f"unknown broker {broker}; the brokers are {_ids(self.brokers)}")
        return broker

    def broker_list(self, value: Any) -> tuple[int, ...]:
        brokers = tuple(self.broker(b) for b in _array(value))
        if len(set(brokers)) != len(brokers):
            raise _Bad(f"lists a broker twice: {list(brokers)}")
        return brokers

    def running(self, value: Any) -> int:
        broker = self.broker(value)
        if broker in self.down:
            raise _Bad(f"broker {broker} is not running at this step")
        return broker

    def topic(self, value: Any) -> str:
        name = _string(value)
        if name not in self.topics:
            known = sorted(self.topics)
            raise _Bad(f"unknown topic '{name}'{did_you_mean(name, known)}; topics at this step: {', '.join(known) or 'none'}")
        return name

    def partition(self, value: Any) -> TopicPartition:
        try:
            tp = TopicPartition.parse(_string(value))
        except KctlError as e:
            raise _Bad(str(e)) from None
        count = self.topics[self.topic(tp.topic)][0]
        if tp.partition >= count:
            raise _Bad(f"{tp} does not exist: {tp.topic} has partitions 0-{count - 1}")
        return tp

    def partition_list(self, value: Any) -> tuple[TopicPartition, ...]:
        return tuple(dict.fromkeys(self.partition(p) for p in _array(value)))

    def per_partition(self, value: Any, parse: Callable[[Any], Any]) -> dict[TopicPartition, Any]:
        parsed = {}
        for key, item in _table(value).items():
            tp = self.partition(key)
            try:
                parsed[tp] = parse(item)
            except _Bad as e:
                raise _Bad(f"{key}: {e}") from None
        return parsed


def _ids(brokers: Sequence[int]) -> str:
    ordered = sorted(brokers)
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
        return f"{ordered[0]}-{ordered[-1]}"
    return ", ".join(map(str, ordered))


# --- Fields and actions ------------------------------------------------------------------------------

Parse = Callable[[Any, _Static], Any]


def _bound(parse: Parse, static: _Static) -> Callable[[Any], Any]:
    return lambda value: parse(value, static)


@dataclass(frozen=True)
class Field:
    """A field of an action: how to check and parse its value (docs/scenarios.md says what it means)."""

    parse: Parse
    required: bool = False


@dataclass(frozen=True)
class Action:
    """An action a step can take: its fields, and how it changes the static model."""

    fields: Mapping[str, Field] = field(default_factory=dict)
    settles: bool = True
    """Takes ``wait`` and ``timeout``: after the action, run until stable (at most ``timeout``)."""
    fault: bool = False
    """A fault: the summary reports how long partitions stayed without a leader after it."""
    check: Callable[[dict[str, Any], _Static], None] | None = None
    """Rules across fields; raises :class:`_Bad` naming the field."""
    apply: Callable[[dict[str, Any], _Static], None] | None = None
    """The action's effect on the static model, once the step is valid."""


def _one_of(args: dict[str, Any], *names: str, required: bool = True) -> None:
    given = [n for n in names if n in args]
    if len(given) > 1:
        raise _Bad(f"give only one of {' or '.join(names)}", field=given[1])
    if required and not given:
        raise _Bad(f"give {' or '.join(names)}", field=names[0])


def _new_topic_name(value: Any, static: _Static) -> str:
    name = _string(value)
    try:
        validate_topic_name(name)
    except KctlError as e:
        raise _Bad(str(e)) from None
    if name in static.topics:
        raise _Bad(f"topic '{name}' already exists at this step")
    return name


def _replication_factor(value: Any, static: _Static) -> int:
    rf = _integer(value, minimum=1)
    if rf > len(static.brokers):
        raise _Bad(f"replication factor {rf} is larger than the number of brokers ({len(static.brokers)})")
    return rf


def _assignment(value: Any, static: _Static) -> dict[int, tuple[int, ...]]:
    rows = _array(value)
    if not rows:
        raise _Bad("needs at least one partition")
    assignment = {}
    for partition, replicas in enumerate(rows):
        try:
            assignment[partition] = static.broker_list(replicas)
        except _Bad as e:
            raise _Bad(f"partition {partition}: {e}") from None
        if not assignment[partition]:
            raise _Bad(f"partition {partition}: needs at least one replica")
    if len({len(r) for r in assignment.values()}) > 1:
        raise _Bad("every partition needs the same number of replicas")
    return assignment


def _topic_check(args: dict[str, Any], static: _Static) -> None:
    if "assignment" in args:
        for name in ("partitions", "replication_factor"):
            if name in args:
                raise _Bad("give either assignment or partitions and replication_factor", field=name)
    elif args.get("replication_factor", static.config.default_replication_factor) > len(static.brokers):
        raise _Bad(f"the default replication factor ({static.config.default_replication_factor}) is larger "
                   f"than the number of brokers ({len(static.brokers)})", field="replication_factor")
    _topic_fits(args, static)


def _topic_fits(args: dict[str, Any], static: _Static) -> None:
    """A topic too large for one znode is refused here, not when the step runs."""
    partitions, replication_factor = _topic_shape(args, static)
    try:
        check_topic_fits(args["name"], partitions, replication_factor)
    except KctlError as e:
        raise _Bad(str(e), field=next((f for f in ("partitions", "assignment") if f in args), "name")) from None


def _topic_shape(args: dict[str, Any], static: _Static) -> tuple[int, int]:
    if "assignment" in args:
        assignment = args["assignment"]
        return len(assignment), len(assignment[0])
    return (args.get("partitions", static.config.num_partitions),
            args.get("replication_factor", static.config.default_replication_factor))


def _add_topic(args: dict[str, Any], static: _Static) -> None:
    static.topics[args["name"]] = _topic_shape(args, static)


TOPIC_FIELDS: dict[str, Field] = {
    "name": Field(_new_topic_name, required=True),
    "partitions": Field(lambda v, s: _integer(v, 1)),
    "replication_factor": Field(_replication_factor),
    "assignment": Field(_assignment),
    "config": Field(lambda v, s: _topic_config(v)),
}


def _reassign_check(args: dict[str, Any], static: _Static) -> None:
    _one_of(args, "partitions", "topic")
    if "topic" in args:
        if "brokers" not in args:
            raise _Bad("a whole-topic move needs the target brokers", field="brokers")
        rf = static.topics[args["topic"]][1]
        if len(args["brokers"]) < rf:
            raise _Bad(f"{args['topic']} has replication factor {rf} but only {len(args['brokers'])} target brokers",
                       field="brokers")
    elif "brokers" in args:
        raise _Bad("brokers goes with topic (a whole-topic move), not with partitions", field="brokers")


def _elect_kind(value: Any, static: _Static) -> str:
    kind = _string(value)
    if kind not in ("preferred", "unclean"):
        raise _Bad(f"expected preferred or unclean, got '{kind}'")
    return kind


def _properties(value: Any, static: _Static) -> dict[str, Any]:
    properties = _scalar_table(value)
    _checked_config(lambda: static.config.with_properties(properties))
    return properties


def _update_config(args: dict[str, Any], static: _Static) -> None:
    static.config = static.config.with_properties(args["properties"])


def _remove_topic(args: dict[str, Any], static: _Static) -> None:
    del static.topics[args["topic"]]


def _set_down(down: bool) -> Callable[[dict[str, Any], _Static], None]:
    def apply(args: dict[str, Any], static: _Static) -> None:
        (static.down.add if down else static.down.discard)(args["broker"])
    return apply


def _stopped(value: Any, static: _Static) -> int:
    broker = static.broker(value)
    if broker not in static.down:
        raise _Bad(f"broker {broker} is already running at this step")
    return broker


def _rolling_restart_check(args: dict[str, Any], static: _Static) -> None:
    if "brokers" not in args and static.down:
        raise _Bad(f"brokers {_ids(sorted(static.down))} are not running at this step: list the brokers to restart",
                   field="brokers")


def _keeps_a_controller(args: dict[str, Any], static: _Static) -> None:
    """Stopping the last running controller candidate would leave nothing to observe the cluster with."""
    broker = args["broker"]
    if broker in static.controllers and all(c == broker or c in static.down for c in static.controllers):
        raise _Bad(f"broker {broker} is the last running controller candidate: the cluster would have no "
                   "controller (list more candidates in [cluster] controllers)", field="broker")


def _kill_controller_check(args: dict[str, Any], static: _Static) -> None:
    running = [c for c in static.controllers if c not in static.down]
    if len(running) < 2:
        raise _Bad(f"needs a second running controller candidate to take over; running candidates: "
                   f"{_ids(running) if running else 'none'}", field="action")


def _produce_check(args: dict[str, Any], static: _Static) -> None:
    count = static.topics[args["topic"]][0]
    if args.get("partition", 0) >= count:
        raise _Bad(f"{args['topic']} has partitions 0-{count - 1}", field="partition")


# --- expect ----------------------------------------------------------------------------------------


@functools.cache
def controller_metric_names() -> tuple[str, ...]:
    """The names :meth:`KafkaController.metrics` reports, read from an idle controller."""
    from kctl.controller import KafkaController
    from kctl.scheduler import SimulatedScheduler
    from kctl.stores.memory import MemoryStore
    from kctl.transports.inprocess import InProcessTransport

    scheduler = SimulatedScheduler()
    return tuple(KafkaController(0, MemoryStore(), InProcessTransport(scheduler=scheduler), clock=scheduler).metrics())


def _metrics(value: Any, static: _Static) -> dict[str, float]:
    known = controller_metric_names()
    expected = {}
    for name, number in _table(value).items():
        if name not in known:
            raise _Bad(f"unknown metric '{name}'{did_you_mean(name, known)}; metrics: {', '.join(known)}")
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise _Bad(f"{name}: expected a number, got {_shown(number)}")
        expected[name] = number
    return expected


def _leader(value: Any, static: _Static) -> int:
    return NO_LEADER if _integer(value) == NO_LEADER else static.broker(value)


def _controller(value: Any, static: _Static) -> int:
    broker = static.broker(value)
    if broker not in static.controllers:
        raise _Bad(f"broker {broker} is not a controller candidate; the candidates are {_ids(static.controllers)}")
    return broker


def _partitions_led(value: Any, static: _Static) -> dict[int, int]:
    led = {}
    for key, count in _table(value).items():
        led[_broker_key(key, static)] = _integer(count, 0)
    return led


def _true(value: Any, static: _Static) -> bool:
    if _boolean(value) is not True:
        raise _Bad("can only be true (invariants are checked after every step anyway)")
    return True


def _topic_names(value: Any, static: _Static) -> tuple[str, ...]:
    return tuple(sorted(_string(t) for t in _array(value)))


EXPECT_FIELDS: dict[str, Field] = {
    "invariants": Field(_true),
    "stable": Field(lambda v, s: _boolean(v)),
    "leaders": Field(lambda v, s: s.per_partition(v, lambda b: _leader(b, s))),
    "isr": Field(lambda v, s: s.per_partition(v, s.broker_list)),
    "replicas": Field(lambda v, s: s.per_partition(v, s.broker_list)),
    "offline_partitions": Field(lambda v, s: _integer(v, 0)),
    "unclean_elections": Field(lambda v, s: _integer(v, 0)),
    "metrics": Field(_metrics),
    "topics": Field(_topic_names),
    "controller": Field(_controller),
    "partitions_led": Field(_partitions_led),
    "reassigning": Field(lambda v, s: frozenset(s.partition_list(v))),
}


def _expect_check(args: dict[str, Any], static: _Static) -> None:
    if not args:
        raise _Bad(f"an expect step needs something to check: {', '.join(EXPECT_FIELDS)}", field="action")


_RUNNING_BROKER = Field(lambda v, s: s.running(v), required=True)
_TOPIC = Field(lambda v, s: s.topic(v), required=True)
_PARTITIONS_OR_TOPIC = {"partitions": Field(lambda v, s: s.partition_list(v)), "topic": Field(lambda v, s: s.topic(v))}

ACTIONS: dict[str, Action] = {
    "create_topic": Action(TOPIC_FIELDS, check=_topic_check, apply=_add_topic),
    "delete_topic": Action({"topic": _TOPIC}, apply=_remove_topic),
    "kill_broker": Action({"broker": _RUNNING_BROKER}, fault=True, check=_keeps_a_controller, apply=_set_down(True)),
    "start_broker": Action({"broker": Field(_stopped, required=True)}, apply=_set_down(False)),
    "shutdown_broker": Action({"broker": _RUNNING_BROKER}, fault=True, check=_keeps_a_controller,
                              apply=_set_down(True)),
    "rolling_restart": Action(
        {"brokers": Field(lambda v, s: tuple(s.running(b) for b in s.broker_list(v))),
         "interval": Field(lambda v, s: _seconds(v)),
         "controlled": Field(lambda v, s: _boolean(v))},
        fault=True, check=_rolling_restart_check),
    "reassign": Action(
        {"partitions": Field(lambda v, s: s.per_partition(v, s.broker_list)),
         "topic": Field(lambda v, s: s.topic(v)),
         "brokers": Field(lambda v, s: s.broker_list(v))},
        check=_reassign_check),
    "cancel_reassignment": Action(_PARTITIONS_OR_TOPIC, check=lambda a, s: _one_of(a, "partitions", "topic")),
    "elect_leaders": Action({"kind": Field(_elect_kind)} | _PARTITIONS_OR_TOPIC,
                            check=lambda a, s: _one_of(a, "partitions", "topic", required=False)),
    "kill_controller": Action(fault=True, check=_kill_controller_check),
    "update_config": Action({"properties": Field(_properties, required=True)}, apply=_update_config),
    "set_topic_config": Action({"topic": _TOPIC, "config": Field(lambda v, s: _topic_config(v), required=True)}),
    "produce": Action(
        {"topic": _TOPIC, "partition": Field(lambda v, s: _integer(v, 0)), "records": Field(lambda v, s: _integer(v, 1))},
        check=_produce_check),
    "advance": Action({"seconds": Field(lambda v, s: _seconds(v), required=True)}, settles=False),
    "wait_stable": Action({"timeout": Field(lambda v, s: _positive_seconds(v))}, settles=False),
    "fail_log_dir": Action({"broker": _RUNNING_BROKER} | _PARTITIONS_OR_TOPIC, fault=True,
                           check=lambda a, s: _one_of(a, "partitions", "topic", required=False)),
    "expect": Action(EXPECT_FIELDS, settles=False, check=_expect_check),
}
"""Every action, in the order docs/scenarios.md documents them."""

STEP_FIELDS = ("action", "at", "after", "note")
SETTLE_FIELDS = ("wait", "timeout")
"""Fields of the steps whose action changes the cluster (``Action.settles``)."""
CLUSTER_FIELDS = ("brokers", "racks", "controllers", "seed", "config")
TOP_FIELDS = ("name", "description", "cluster", "topics", "steps")


# --- Loading -----------------------------------------------------------------------------------------


def load_scenario(path: str | Path) -> Scenario:
    """Read and check a scenario file; raises :class:`ScenarioError` listing every problem."""
    try:
        data = load_toml(read_file(path))
    except OSError as e:
        raise ScenarioError([f"{path}: cannot read the scenario: {e.strerror}"]) from None
    except DocumentError as e:
        raise ScenarioError([f"{path}: {e}"]) from None
    return parse_scenario(data, str(path))


def parse_scenario(data: Mapping[str, Any], source: str = "<scenario>") -> Scenario:
    """Check a scenario given as TOML data (a dict); ``source`` names it in messages."""
    return _Loader(source).load(data)


class _Loader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []
        self.latest_at = 0.0

    def problem(self, where: str, name: str | None, message: str) -> None:
        self.problems.append(f"{self.source}: {where}: {name + ': ' if name else ''}{message}")

    def unknown(self, where: str, table: Mapping[str, Any], known: Sequence[str]) -> None:
        for key in table:
            if key not in known:
                self.problem(where, None, f"unknown field '{key}'{did_you_mean(key, known)}; expected {', '.join(known)}")

    def value(self, where: str, table: Mapping[str, Any], name: str, parse: Callable[[Any], Any]) -> Any:
        """``parse(table[name])``, or None (with a problem recorded) when it is wrong."""
        try:
            return parse(table[name])
        except _Bad as e:
            self.problem(where, e.field or name, str(e))
            return None

    def load(self, data: Mapping[str, Any]) -> Scenario:
        self.unknown("top level", data, TOP_FIELDS)
        meta = {k: self.value("top level", data, k, _string) for k in ("name", "description") if k in data}
        if "cluster" not in data:
            self.problem("top level", None, "missing the [cluster] table")
            raise ScenarioError(self.problems)
        cluster_table = self.value("top level", data, "cluster", _table)
        if cluster_table is None:
            raise ScenarioError(self.problems)
        cluster = self.cluster(cluster_table)
        if cluster is None:  # nothing else can be checked without the brokers
            raise ScenarioError(self.problems)
        static = _Static(cluster.brokers, cluster.controllers, ControllerConfig.from_properties(cluster.config))
        topics = tuple(self.tables("topics", data, lambda i, t: self.topic(i, t, static)))
        steps = tuple(self.tables("steps", data, lambda i, t: self.step(i, t, static)))
        if self.problems:
            raise ScenarioError(self.problems)
        return Scenario(self.source, cluster, topics, steps, meta.get("name") or "", meta.get("description") or "")

    def tables(self, key: str, data: Mapping[str, Any], parse: Callable[[int, dict[str, Any]], Any]) -> list[Any]:
        entries = self.value("top level", data, key, _array) if key in data else []
        parsed = []
        for number, entry in enumerate(entries or (), start=1):
            if not isinstance(entry, dict):
                self.problem(f"{key[:-1]} {number}", None, f"expected a table ([[{key}]]), got {_shown(entry)}")
                continue
            item = parse(number, entry)
            if item is not None:
                parsed.append(item)
        return parsed

    def cluster(self, table: dict[str, Any]) -> ClusterSpec | None:
        where = "[cluster]"
        self.unknown(where, table, CLUSTER_FIELDS)
        if "brokers" not in table:
            self.problem(where, "brokers", "required")
            return None
        brokers = self.value(where, table, "brokers", _broker_ids)
        if brokers is None:
            return None
        static = _Static(brokers)
        racks = self.value(where, table, "racks", lambda v: _racks(v, static)) if "racks" in table else None
        controllers = (self.value(where, table, "controllers", lambda v: _controllers(v, static))
                       if "controllers" in table else brokers[:3])
        seed = self.value(where, table, "seed", lambda v: _integer(v, maximum=None)) if "seed" in table else 0
        config = self.value(where, table, "config", _broker_config) if "config" in table else {}
        if controllers is None or seed is None or config is None:
            return None
        return ClusterSpec(brokers, racks, controllers, seed, config)

    def fields(self, where: str, table: dict[str, Any], fields: Mapping[str, Field], static: _Static,
               check: Callable[[dict[str, Any], _Static], None] | None) -> dict[str, Any] | None:
        """Parse ``table``'s fields in the order the action declares them; None if any is wrong."""
        before = len(self.problems)
        args: dict[str, Any] = {}
        for name, spec in fields.items():
            if name in table:
                args[name] = self.value(where, table, name, _bound(spec.parse, static))
            elif spec.required:
                self.problem(where, name, "required")
        if len(self.problems) == before and check is not None:
            try:
                check(args, static)
            except _Bad as e:
                self.problem(where, e.field, str(e))
        return args if len(self.problems) == before else None

    def topic(self, number: int, table: dict[str, Any], static: _Static) -> TopicSpec | None:
        where = f"topic {number}" + (f" ({table['name']})" if isinstance(table.get("name"), str) else "")
        self.unknown(where, table, tuple(TOPIC_FIELDS))
        args = self.fields(where, table, TOPIC_FIELDS, static, _topic_check)
        if args is None:
            return None
        _add_topic(args, static)
        return TopicSpec(**args)

    def step(self, number: int, table: dict[str, Any], static: _Static) -> Step | None:
        name = table.get("action")
        if not isinstance(name, str) or name not in ACTIONS:
            shown = "missing" if name is None else f"unknown action {name!r}" if isinstance(name, str) else (
                f"expected an action name, got {_shown(name)}")
            hint = did_you_mean(name, tuple(ACTIONS)) if isinstance(name, str) else ""
            self.problem(f"step {number}", "action", f"{shown}{hint}; actions: {', '.join(ACTIONS)}")
            return None
        where = f"step {number} ({name})"
        action = ACTIONS[name]
        common = STEP_FIELDS + (SETTLE_FIELDS if action.settles else ())
        self.unknown(where, table, tuple(action.fields) + common)
        before = len(self.problems)
        timing: dict[str, Any] = {}
        for key, parse in (("at", _seconds), ("after", _seconds), ("note", _string), ("wait", _boolean),
                           ("timeout", _positive_seconds)):
            if key in table and key in common:
                timing[key] = self.value(where, table, key, parse)
        if "at" in timing and "after" in timing:
            self.problem(where, "after", "give either at or after, not both")
        if timing.get("at") is not None:
            if timing["at"] < self.latest_at:
                self.problem(where, "at", f"{timing['at']:g} s is before an earlier step's at ({self.latest_at:g} s); "
                             "steps run in the order they are written")
            self.latest_at = max(self.latest_at, timing["at"])
        own = {k: v for k, v in table.items() if k in action.fields}
        args = self.fields(where, own, action.fields, static, action.check)
        if args is None or len(self.problems) != before:
            return None
        if action.apply is not None:
            action.apply(args, static)
        return Step(number, name, args, **timing)


def _broker_ids(value: Any) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        return tuple(range(1, _broker_count(_integer(value, 1)) + 1))
    ids = _array(value)
    _broker_count(len(ids))
    brokers = tuple(_integer(b, 0) for b in ids)
    if not brokers or len(set(brokers)) != len(brokers):
        raise _Bad(f"expected a broker count or a non-empty list of distinct broker ids, got {value!r}")
    return tuple(sorted(brokers))


def _broker_count(count: int) -> int:
    if count > MAX_BROKERS:
        raise _Bad(f"a simulated cluster has at most {MAX_BROKERS} brokers, got {count}")
    return count


def _racks(value: Any, static: _Static) -> dict[int, str]:
    brokers = static.brokers
    if isinstance(value, int) and not isinstance(value, bool):
        count = _integer(value, 1)
        return {b: f"r{1 + i % count}" for i, b in enumerate(brokers)}
    if isinstance(value, list):
        racks = [_string(r) for r in value]
        if len(racks) != len(brokers):
            raise _Bad(f"{len(racks)} racks for {len(brokers)} brokers: give one rack per broker")
        return dict(zip(brokers, racks))
    table = _table(value)
    racks_by_broker = {_broker_key(k, static): _string(r) for k, r in table.items()}
    missing = [b for b in brokers if b not in racks_by_broker]
    if missing:
        raise _Bad(f"no rack for brokers {_ids(missing)}: either every broker has a rack or none has")
    return racks_by_broker


def _controllers(value: Any, static: _Static) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        count = _integer(value, 1)
        if count > len(static.brokers):
            raise _Bad(f"{count} controller candidates but only {len(static.brokers)} brokers")
        return static.brokers[:count]
    controllers = static.broker_list(value)
    if not controllers:
        raise _Bad("needs at least one controller candidate")
    return tuple(sorted(controllers))


def _broker_config(value: Any) -> dict[str, Any]:
    properties = _scalar_table(value)
    _checked_config(lambda: ControllerConfig.from_properties(properties))
    return properties


def _checked_config(build: Callable[[], ControllerConfig]) -> None:
    """Build a config as the run will, its leader selectors looked up in the plugins the run will
    use (a misspelt one would leave partitions leaderless half-way through)."""
    try:
        get_plugin_host().leader_selectors().check_config(build())
    except KctlError as e:
        raise _Bad(str(e)) from None
