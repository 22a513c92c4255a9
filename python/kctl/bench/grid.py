"""Grid files for ``kctl fleet run``: a family of random scenarios, and the variants compared on them.

A grid does not list steps as a ``kctl sim`` scenario does: it says how to draw scenarios. Each
field of ``[cluster]``, ``[topics]`` and ``[faults]`` is a fixed value, or is drawn per seed from
``{ between = [low, high] }`` or ``{ one_of = [...] }``. ``[grid]`` lists axes (the offline leader
selector, the engine, Kafka properties) that are crossed with every seed: all the runs of one seed
play the same scenario, so variants are compared pair by pair on the same faults.

A grid is checked completely before any Spark work starts: unknown keys, values of the wrong type,
impossible shapes (a replication factor above the broker count), unknown properties, selectors or
engines are all reported at once, each naming the file and the field. ``docs/fleet.md`` documents
the format.

A grid can replay recorded incidents instead: ``scenarios = "DIR"`` names a directory of ``kctl
sim`` scenarios (what ``kctl fleet import-logs`` writes), read and checked when the grid is loaded;
seed k plays the k-th file in name order, under each variant's properties.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

from kctl.config import ControllerConfig, property_docs
from kctl.engine_api import ENGINES, default_engine
from kctl.errors import KctlError, did_you_mean
from kctl.limits import DocumentError, load_toml, read_file
from kctl.plugins import PluginHost, get_plugin_host
from kctl.sim.scenario import ScenarioError

SELECTOR_PROPERTY = "kctl.leader.selector.offline"
"""The property the ``selector`` axis sets: the leader selector of offline elections."""

FAULT_KINDS = ("kill_broker", "shutdown_broker", "kill_controller", "fail_log_dir")
"""The ``kctl sim`` fault actions a generated schedule can use."""


class GridError(ScenarioError):
    """A grid that cannot run as written (it would draw scenarios that cannot); ``problems`` holds
    one line per mistake."""


@dataclass(frozen=True)
class Param:
    """A generator parameter: ``options`` to pick from (one option: a fixed value), or an
    inclusive ``between`` range (integers unless ``real``)."""

    options: tuple[Any, ...] = ()
    between: tuple[float, float] | None = None
    real: bool = False

    @classmethod
    def fixed(cls, value: Any) -> Param:
        return cls((value,))

    def draw(self, rng: Random) -> Any:
        if self.between is not None:
            low, high = self.between
            return rng.uniform(low, high) if self.real else rng.randint(int(low), int(high))
        return self.options[0] if len(self.options) == 1 else rng.choice(self.options)

    @property
    def values(self) -> tuple[Any, ...]:
        """Every value a draw can give (the two ends for a range)."""
        return self.options if self.between is None else self.between

    @property
    def low(self) -> Any:
        return min(self.values)

    @property
    def high(self) -> Any:
        return max(self.values)


@dataclass(frozen=True)
class ClusterShape:
    brokers: Param
    racks: Param
    """Rack count; 0 means brokers without racks."""
    controllers: Param
    config: Mapping[str, Param] = field(default_factory=dict)
    """Kafka properties of every run, fixed or drawn per seed."""


@dataclass(frozen=True)
class TopicMix:
    count: Param
    partitions: Param
    replication_factor: Param


@dataclass(frozen=True)
class FaultSchedule:
    count: Param
    kinds: tuple[str, ...]
    window: Param
    """Faults begin at uniformly drawn times in the first ``window`` seconds."""
    downtime: Param
    """Seconds until a stopped broker (or one with a failed disk) starts again."""
    max_down: Param
    """At most this many brokers are down at once."""


@dataclass(frozen=True)
class Variant:
    """One combination of the ``[grid]`` axes."""

    engine: str
    selector: str
    properties: Mapping[str, Any]
    """Kafka properties set by the axes (the selector's included)."""
    label: str
    """The axes' values, short: ``least-loaded``, ``rust, auto.leader.rebalance.enable=false``."""


@dataclass(frozen=True)
class Grid:
    source: str
    name: str
    description: str
    seeds: range
    duration: float
    """Scenario seconds each run lasts."""
    sample_interval: float
    """Seconds between samples of leadership balance."""
    cluster: ClusterShape
    topics: TopicMix
    faults: FaultSchedule
    axes: Mapping[str, tuple[Any, ...]]
    """``selector``, ``engine`` and Kafka property names → the values crossed."""
    recorded: tuple[Mapping[str, Any], ...] = ()
    """The scenarios of ``scenarios = "DIR"`` (TOML data, in file name order): the seeds' own, not drawn."""

    def variants(self) -> list[Variant]:
        """Every combination of the axes, in file order."""
        names = list(self.axes)
        variants = []
        for values in itertools.product(*(self.axes[n] for n in names)):
            chosen = dict(zip(names, values))
            label = ", ".join(_text(v) if n in AXES else f"{n}={_text(v)}" for n, v in chosen.items()) or "default"
            engine = chosen.pop("engine", None) or default_engine()
            selector = chosen.pop("selector", ControllerConfig().leader_selector_offline)
            variants.append(Variant(engine, selector, {SELECTOR_PROPERTY: selector} | chosen, label))
        return variants

    def with_seeds(self, seeds: range) -> Grid:
        return Grid(self.source, self.name, self.description, seeds, self.duration, self.sample_interval,
                    self.cluster, self.topics, self.faults, self.axes, self.recorded)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# --- Loading -------------------------------------------------------------------------------------

TOP_FIELDS = ("name", "description", "seeds", "duration", "sample_interval", "cluster", "topics", "faults", "grid",
              "scenarios")
RECORDED_EXCLUDES = ("seeds", "duration", "cluster", "topics", "faults")
"""What a grid of recorded scenarios does not draw, so does not take."""
CLUSTER_FIELDS = ("brokers", "racks", "controllers", "config")
TOPIC_FIELDS = ("count", "partitions", "replication_factor")
FAULT_FIELDS = ("count", "kinds", "window", "downtime", "max_down")
AXES = ("selector", "engine")
"""Axes with names of their own; any other ``[grid]`` key is a Kafka property."""
DEFAULTS: dict[str, Any] = {"duration": 600.0, "sample_interval": 30.0}


class _Bad(Exception):
    pass


def load_grid(path: str | Path, plugins: PluginHost | None = None) -> Grid:
    """Read and check a grid file (and its recorded scenarios, relative to it); raises
    :class:`GridError` listing every problem. Selector names are checked against ``plugins``
    (default: the process-wide host), the plugins the executors will load too."""
    try:
        data = load_toml(read_file(path))
    except OSError as e:
        raise GridError([f"{path}: cannot read the grid: {e.strerror}"]) from None
    except DocumentError as e:
        raise GridError([f"{path}: {e}"]) from None
    return parse_grid(data, str(path), plugins, recorded_from=Path(path).parent)


def parse_grid(data: Mapping[str, Any], source: str = "<grid>", plugins: PluginHost | None = None,
               recorded_from: Path | None = None) -> Grid:
    """Check a grid given as TOML data; ``source`` names it in messages. Its recorded scenarios
    are read from ``scenarios`` relative to ``recorded_from``; without it (a report, which plays
    nothing) they are not read."""
    return _Loader(source, plugins if plugins is not None else get_plugin_host()).load(data, recorded_from)


class _Loader:
    def __init__(self, source: str, plugins: PluginHost) -> None:
        self.source = source
        self.plugins = plugins
        self.problems: list[str] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{self.source}: {where}: {message}")

    def table(self, data: Mapping[str, Any], key: str, known: Sequence[str]) -> dict[str, Any]:
        """``data[key]`` as a table (empty when absent), with its keys not in ``known`` reported."""
        value = data.get(key, {})
        if not isinstance(value, dict):
            self.problem(key, f"expected a table ([{key}]), got {value!r}")
            return {}
        self.unknown(f"[{key}]", value, known)
        return value

    def unknown(self, where: str, table: Mapping[str, Any], known: Sequence[str]) -> None:
        for key in table:
            if key not in known:
                self.problem(where, f"unknown key '{key}'{did_you_mean(key, known)}; expected {', '.join(known)}")

    def check(self, where: str, parse: Callable[..., Any], *args: Any) -> Any:
        """``parse(*args)``, or None with the problem recorded under ``where``."""
        try:
            return parse(*args)
        except (_Bad, KctlError) as e:
            self.problem(where, str(e))
            return None

    def param(self, table: Mapping[str, Any], where: str, key: str, default: Any, minimum: float,
              real: bool = False) -> Param:
        value = table.get(key, default)
        parsed = self.check(f"{where} {key}", _param, value, functools.partial(_number, minimum=minimum, real=real), real)
        return parsed if parsed is not None else Param.fixed(minimum)

    def load(self, data: Mapping[str, Any], recorded_from: Path | None = None) -> Grid:
        self.unknown("top level", data, TOP_FIELDS)
        recorded: tuple[Mapping[str, Any], ...] = ()
        if "scenarios" in data:
            for key in RECORDED_EXCLUDES:
                if key in data:
                    self.problem(key, "a grid of recorded scenarios (scenarios = ...) replays them as recorded: "
                                 f"remove {key}")
            directory = self.check("scenarios", _string, data["scenarios"])
            if directory is not None and recorded_from is not None:
                recorded = self.recorded(recorded_from / directory)
        name = self.check("name", _string, data.get("name", Path(self.source).stem))
        description = self.check("description", _string, data.get("description", ""))
        seeds = self.check("seeds", _seeds, data.get("seeds", 1))
        duration = self.check("duration", _number, data.get("duration", DEFAULTS["duration"]), 1, True)
        interval = self.check("sample_interval", _number, data.get("sample_interval", DEFAULTS["sample_interval"]),
                              0.001, True)
        cluster = self.cluster(self.table(data, "cluster", CLUSTER_FIELDS))
        topics = self.topics(self.table(data, "topics", TOPIC_FIELDS), cluster)
        faults = self.faults(self.table(data, "faults", FAULT_FIELDS), cluster, duration)
        axes = self.axes(self.table(data, "grid", AXES + tuple(property_docs())), cluster)
        if self.problems:
            raise GridError(self.problems)
        if recorded:
            seeds = range(len(recorded))
        return Grid(self.source, name, description, seeds, duration, interval, cluster, topics, faults, axes, recorded)

    def recorded(self, directory: Path) -> tuple[Mapping[str, Any], ...]:
        """The scenarios in ``directory`` (``*.toml``, name order), each checked as ``kctl sim`` checks it."""
        from kctl.sim import parse_scenario

        paths = sorted(directory.glob("*.toml")) if directory.is_dir() else []
        if not paths:
            self.problem("scenarios", f"no scenario files (*.toml) in {directory}")
        scenarios = []
        for path in paths:
            try:
                data = load_toml(read_file(path))
                parse_scenario(data, str(path))
            except OSError as e:
                self.problem("scenarios", f"cannot read {path}: {e.strerror}")
            except DocumentError as e:
                self.problem("scenarios", f"{path}: {e}")
            except ScenarioError as e:
                self.problems += e.problems
            else:
                scenarios.append(data)
        return tuple(scenarios)

    def cluster(self, table: Mapping[str, Any]) -> ClusterShape:
        where = "[cluster]"
        brokers = self.param(table, where, "brokers", 3, 1)
        racks = self.param(table, where, "racks", 0, 0)
        controllers = self.param(table, where, "controllers", min(3, brokers.low), 1)
        if controllers.high > brokers.low:
            self.problem(f"{where} controllers", f"can be {controllers.high} controller candidates but the "
                         f"brokers can be as few as {brokers.low}")
        config = table.get("config", {})
        properties: dict[str, Param] = {}
        if not isinstance(config, dict):
            self.problem(f"{where} config", f"expected a table of Kafka properties, got {config!r}")
        else:
            for key, value in config.items():
                parsed = self.check(f"{where} config {key}", _param, value, functools.partial(self.property, key))
                if parsed is not None:
                    properties[key] = parsed
        return ClusterShape(brokers, racks, controllers, properties)

    def topics(self, table: Mapping[str, Any], cluster: ClusterShape) -> TopicMix:
        where = "[topics]"
        mix = TopicMix(self.param(table, where, "count", 1, 1), self.param(table, where, "partitions", 1, 1),
                       self.param(table, where, "replication_factor", min(3, cluster.brokers.low), 1))
        if mix.replication_factor.high > cluster.brokers.low:
            self.problem(f"{where} replication_factor",
                         f"impossible shape: the replication factor can be {mix.replication_factor.high} but the "
                         f"brokers can be as few as {cluster.brokers.low}")
        return mix

    def faults(self, table: Mapping[str, Any], cluster: ClusterShape, duration: float | None) -> FaultSchedule:
        where = "[faults]"
        kinds = self.check(f"{where} kinds", _kinds, table.get("kinds", ["kill_broker"]))
        schedule = FaultSchedule(
            self.param(table, where, "count", 1, 0),
            kinds or (),
            self.param(table, where, "window", (duration or DEFAULTS["duration"]) / 2, 0, real=True),
            self.param(table, where, "downtime", 60, 0, real=True),
            self.param(table, where, "max_down", 1, 1),
        )
        if duration is not None and schedule.window.high > duration:
            self.problem(f"{where} window", f"faults could begin at {schedule.window.high:g} s, after the end of "
                         f"the run (duration = {duration:g})")
        if "kill_controller" in schedule.kinds and cluster.controllers.low < 2:
            self.problem(f"{where} kinds", "kill_controller needs at least 2 controller candidates "
                         "([cluster] controllers)")
        return schedule

    def axes(self, table: Mapping[str, Any], cluster: ClusterShape) -> dict[str, tuple[Any, ...]]:
        axes: dict[str, tuple[Any, ...]] = {}
        for key, values in table.items():
            where = f"[grid] {key}"
            if not isinstance(values, list) or not values:
                self.problem(where, f"expected a non-empty array of values to cross, got {values!r}")
                continue
            if key == "engine":
                unknown = [v for v in values if v not in ENGINES]
                if unknown:
                    self.problem(where, f"unknown engine {unknown[0]!r}; engines: {', '.join(ENGINES)}")
            elif key == "selector":
                self.check(where, list, map(self.selector, values))
            elif key not in property_docs():
                continue  # reported as unknown
            elif key in cluster.config or key == SELECTOR_PROPERTY:
                self.problem(where, "set both as an axis and in [cluster] config (or as the selector axis): "
                             "give it once")
            else:
                self.check(where, list, map(functools.partial(self.property, key), values))
            axes[key] = tuple(values)
        if SELECTOR_PROPERTY in cluster.config:
            self.problem(f"[cluster] config {SELECTOR_PROPERTY}", "use the [grid] selector axis instead")
        return axes

    def selector(self, name: Any) -> str:
        return str(self.property(SELECTOR_PROPERTY, name))

    def property(self, name: str, value: Any) -> Any:
        """A Kafka property's value, checked as a run's config checks it (a leader selector's name
        against the plugins the fleet runs with; on Spark, those installed on the executors)."""
        if isinstance(value, list | dict):
            raise _Bad(f"expected a string, number or boolean, got {value!r}")
        config = ControllerConfig.from_properties({name: value})  # unknown names and bad values raise
        self.plugins.leader_selectors().check_config(config)
        return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad(f"expected a string, got {value!r}")
    return value


def _number(value: Any, minimum: float, real: bool = False) -> Any:
    kinds = (int, float) if real else (int,)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
        raise _Bad(f"expected {'a number' if real else 'an integer'}, got {value!r}")
    if value < minimum:
        raise _Bad(f"must be at least {minimum:g}, got {value!r}")
    return float(value) if real else value


def _param(value: Any, check: Callable[[Any], Any], real: bool = False) -> Param:
    """A fixed value, ``{ between = [low, high] }`` or ``{ one_of = [...] }``, each value checked."""
    if not isinstance(value, dict):
        return Param.fixed(check(value))
    if set(value) == {"between"}:
        ends = value["between"]
        if not isinstance(ends, list) or len(ends) != 2:
            raise _Bad(f"between takes [low, high], got {ends!r}")
        low, high = check(ends[0]), check(ends[1])
        if low > high:
            raise _Bad(f"between [{low}, {high}]: the low end is above the high end")
        return Param(between=(low, high), real=real)
    if set(value) == {"one_of"}:
        options = value["one_of"]
        if not isinstance(options, list) or not options:
            raise _Bad(f"one_of takes a non-empty array, got {options!r}")
        return Param(tuple(check(v) for v in options))
    raise _Bad(f"expected a value, {{ between = [low, high] }} or {{ one_of = [...] }}, got {value!r}")


def _seeds(value: Any) -> range:
    if isinstance(value, dict):
        unknown = set(value) - {"first", "count"}
        if unknown:
            raise _Bad(f"unknown key {sorted(unknown)[0]!r}; expected first, count")
        first, count = _number(value.get("first", 0), 0), _number(value.get("count", 1), 1)
        return range(first, first + count)
    count = _number(value, 1)
    return range(count)


def _kinds(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise _Bad(f"expected a non-empty array of fault kinds, got {value!r}")
    for kind in value:
        if kind not in FAULT_KINDS:
            raise _Bad(f"unknown fault kind {kind!r}; kinds: {', '.join(FAULT_KINDS)}")
    return tuple(dict.fromkeys(value))
