"""Seeded scenario generators: from a grid and a seed, one ``kctl sim`` scenario.

The output is a scenario as TOML data, checked by :func:`kctl.sim.parse_scenario` and played by
the same runner as ``kctl sim``, so a fleet row can be replayed alone (``kctl fleet scenario GRID
--seed N > s.toml && kctl sim s.toml``). Each concern (cluster shape and config, topic mix, fault
schedule) draws from its own random stream derived from the seed, so changing how faults are drawn
never changes the cluster a seed gets. A variant only adds its properties: every variant of a seed
plays the same scenario.

Faults never wait for the cluster to settle (``wait = false``): the schedule is exact in scenario
time, and recovery is measured from what the brokers answered, not by waiting. ``advance`` steps of
0 s every ``sample_interval`` seconds mark where leadership balance is sampled.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from random import Random
from typing import Any

from kctl.bench.grid import FaultSchedule, Grid, TopicMix, Variant

FAULT_NOTE, RESTART_NOTE, SAMPLE_NOTE = "fault", "restart", "sample"
"""The notes of generated steps: a fault, a broker's return, an ``advance`` that only marks a sample."""


@dataclass(frozen=True)
class Shape:
    """The cluster a seed drew: broker ids 1…``brokers``."""

    brokers: int
    racks: int
    controllers: int
    config: dict[str, Any]

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    @property
    def controller_ids(self) -> list[int]:
        return self.broker_ids[: self.controllers]


def generate(grid: Grid, seed: int, variant: Variant | None = None) -> dict[str, Any]:
    """The scenario of ``seed`` (with ``variant``'s properties) as ``kctl sim`` TOML data."""
    if grid.recorded:
        return recorded(grid, seed, variant)
    shape = draw_shape(grid, Random(f"{seed}/cluster"))
    cluster: dict[str, Any] = {"brokers": shape.brokers, "controllers": shape.controllers, "seed": seed}
    if shape.racks:
        cluster["racks"] = shape.racks
    config = shape.config | (dict(variant.properties) if variant is not None else {})
    if config:
        cluster["config"] = config
    events = draw_faults(grid.faults, shape, grid.duration, Random(f"{seed}/faults"))
    events += _samples(grid.duration, grid.sample_interval)
    steps = [step for _, _, step in sorted(events, key=lambda e: (e[0], e[1]))]
    return {
        "name": f"{grid.name}-{seed}",
        "description": f"Seed {seed} of the fleet grid {grid.source}.",
        "cluster": cluster,
        "topics": draw_topics(grid.topics, shape, Random(f"{seed}/topics")),
        "steps": steps,
    }


def recorded(grid: Grid, seed: int, variant: Variant | None = None) -> dict[str, Any]:
    """Recorded scenario ``seed`` of ``grid``, its cluster's config under ``variant``'s properties."""
    if not 0 <= seed < len(grid.recorded):
        raise IndexError(f"seed {seed}: the grid has {len(grid.recorded)} recorded scenarios (seeds 0-{len(grid.recorded) - 1})")
    data = copy.deepcopy(dict(grid.recorded[seed]))
    cluster = data.setdefault("cluster", {})
    cluster["config"] = dict(cluster.get("config", {})) | (dict(variant.properties) if variant is not None else {})
    return data


def draw_shape(grid: Grid, rng: Random) -> Shape:
    spec = grid.cluster
    brokers = spec.brokers.draw(rng)
    racks = spec.racks.draw(rng)
    controllers = min(spec.controllers.draw(rng), brokers)
    config = {name: param.draw(rng) for name, param in spec.config.items()}
    return Shape(brokers, racks, controllers, config)


def draw_topics(mix: TopicMix, shape: Shape, rng: Random) -> list[dict[str, Any]]:
    return [
        {"name": f"topic-{i}", "partitions": mix.partitions.draw(rng),
         "replication_factor": min(mix.replication_factor.draw(rng), shape.brokers)}
        for i in range(mix.count.draw(rng))
    ]


Event = tuple[float, int, dict[str, Any]]
"""(time, order at that time, step): restarts, then faults, then samples."""
RESTART, FAULT, SAMPLE = 0, 1, 2


def draw_faults(spec: FaultSchedule, shape: Shape, duration: float, rng: Random) -> list[Event]:
    """A fault schedule that ``kctl sim`` accepts: at most ``max_down`` brokers down at once, and a
    running controller candidate always left (a fault that would break either is not drawn)."""
    count, window, max_down = spec.count.draw(rng), spec.window.draw(rng), spec.max_down.draw(rng)
    times = sorted(rng.uniform(0.0, window) for _ in range(count))
    down: dict[int, float] = {}  # broker -> when it starts again
    events: list[Event] = []
    for at in times:
        for broker, back in sorted(down.items(), key=lambda item: item[1]):
            if back <= at:
                del down[broker]
        kind = rng.choice(spec.kinds)
        if kind == "kill_controller":
            if sum(1 for c in shape.controller_ids if c not in down) >= 2:
                events.append((round(at, 3), FAULT, _step(at, "kill_controller", FAULT_NOTE)))
            continue
        eligible = [b for b in shape.broker_ids if b not in down and _keeps_a_controller(b, shape, down)]
        downtime = spec.downtime.draw(rng)
        if len(down) >= max_down or not eligible:
            continue
        broker = rng.choice(eligible)
        events.append((round(at, 3), FAULT, _step(at, kind, FAULT_NOTE, broker=broker)))
        back = at + downtime
        down[broker] = back
        if back < duration:
            restart = ["kill_broker", "start_broker"] if kind == "fail_log_dir" else ["start_broker"]
            events += [(round(back, 3), RESTART, _step(back, action, RESTART_NOTE, broker=broker)) for action in restart]
    return events


def _keeps_a_controller(broker: int, shape: Shape, down: dict[int, float]) -> bool:
    return any(c != broker and c not in down for c in shape.controller_ids)


def _step(at: float, action: str, note: str, **fields: Any) -> dict[str, Any]:
    return {"at": round(at, 3), "action": action, **fields, "wait": False, "note": note}


def _samples(duration: float, interval: float) -> list[Event]:
    times = [interval * k for k in range(1, int(duration / interval) + 1)]
    if not times or times[-1] < duration:
        times.append(duration)
    return [(round(t, 3), SAMPLE, {"at": round(t, 3), "action": "advance", "seconds": 0, "note": SAMPLE_NOTE})
            for t in times]


# --- As a file -------------------------------------------------------------------------------------


def scenario_toml(data: dict[str, Any]) -> str:
    """A generated scenario as a ``kctl sim`` file."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict | list)]
    for key, value in data.items():
        if isinstance(value, dict):
            lines += ["", f"[{key}]", *(f"{_key(k)} = {_value(v)}" for k, v in value.items())]
        elif isinstance(value, list):
            for item in value:
                lines += ["", f"[[{key}]]", *(f"{_key(k)} = {_value(v)}" for k, v in item.items())]
    return "\n".join(lines) + "\n"


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_value, value)) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value))
