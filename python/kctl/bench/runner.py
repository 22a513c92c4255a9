"""Plays one fleet run (a grid's scenario for one seed and variant) and measures it as one row.

The scenario is played by :func:`kctl.sim.run_scenario` on a simulated
:class:`~kctl.cluster.EmbeddedCluster` (virtual clock, the seed), exactly as ``kctl sim`` would
play it. On top of the sim report a row adds what a fleet compares: request bytes on the wire
(:mod:`kctl.bench.request_bytes`) and leadership balance over time, sampled after every step from the
active controller's context: the preferred-replica imbalance (partitions not led by their
preferred replica) and the leader skew (partitions led by the busiest live broker over the mean
of the live brokers; 1.0 is perfectly even).

Rows are plain dicts whose keys and types are :data:`COLUMNS`. Everything in a row except
``wall_time_s`` is a function of the grid, the seed and the variant. A run that raises becomes a
row with ``error`` set, so one bad scenario never stops a fleet.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kctl.bench.grid import Grid, Variant
from kctl.bench.scenarios import FAULT_NOTE, generate
from kctl.bench.request_bytes import request_size
from kctl.cluster import EmbeddedCluster
from kctl.plugins import get_plugin_host
from kctl.sim import Report, parse_scenario, run_scenario
from kctl.sim.runner import StepResult

REQUEST_KINDS = {"LeaderAndIsr": "leader_and_isr", "UpdateMetadata": "update_metadata", "StopReplica": "stop_replica"}

COLUMNS: dict[str, str] = {
    # what ran
    "grid": "string", "seed": "bigint", "variant": "string", "selector": "string", "engine": "string",
    "fleet_partition": "bigint",
    # the scenario the seed drew
    "brokers": "bigint", "racks": "bigint", "topics": "bigint", "partitions": "bigint", "rf": "bigint",
    "faults": "bigint", "fault_kinds": "string",
    # availability
    "time_to_all_led_s": "double", "lost_leader": "bigint", "unavailable_partition_seconds": "double",
    "offline_at_end": "bigint", "leader_moves": "bigint", "unclean_elections": "bigint",
    # requests
    **{f"{kind}_{what}": "bigint" for kind in REQUEST_KINDS.values() for what in ("requests", "bytes")},
    # leadership balance over time
    "preferred_imbalance_mean": "double", "preferred_imbalance_max": "bigint", "preferred_imbalance_end": "bigint",
    "leader_skew_mean": "double", "leader_skew_max": "double",
    "sample_times": "array<double>", "preferred_imbalance": "array<bigint>", "leader_skew": "array<double>",
    # checks and cost
    "invariant_violations": "bigint", "first_violation": "string", "sim_seconds": "double",
    "wall_time_s": "double", "error": "string",
}
"""Every column of a fleet row and its Spark SQL type (the parquet schema)."""

NONDETERMINISTIC = ("wall_time_s", "fleet_partition")
"""Columns that may differ between two runs of the same grid and seeds (the Spark task depends on
the batch and on which pairs were missing)."""


def run_one(grid: Grid, seed: int, variant: Variant, *, fleet_partition: int = -1) -> dict[str, Any]:
    """Play ``seed``'s scenario under ``variant`` and measure it; never raises. The selector must be
    registered with this process's plugins (on an executor: the ones installed there)."""
    started = time.perf_counter()
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row |= {"grid": grid.name, "seed": seed, "variant": variant.label, "selector": variant.selector,
            "engine": variant.engine, "fleet_partition": fleet_partition}
    try:
        get_plugin_host().leader_selectors().get(variant.selector)  # a missing plugin is an error, not a slow run
        data = generate(grid, seed, variant)
        row |= _shape(data)
        probe = _Probe()
        report = run_scenario(parse_scenario(data, f"{grid.source} seed {seed}"), engine=variant.engine,
                              on_start=probe.start, on_step=probe.step)
        row |= _measure(report, probe)
    except Exception as e:  # noqa: BLE001 - a failing scenario is a result, the rest of the fleet goes on
        row["error"] = f"{type(e).__name__}: {e}"
    row["wall_time_s"] = time.perf_counter() - started
    return row


def _shape(data: dict[str, Any]) -> dict[str, Any]:
    """The scenario's size: drawn (counts) or recorded (broker ids, racks by broker, explicit assignments)."""
    topics, faults = data.get("topics", []), [s for s in data["steps"] if s.get("note") == FAULT_NOTE]
    brokers, racks = data["cluster"]["brokers"], data["cluster"].get("racks", 0)
    return {
        "brokers": len(brokers) if isinstance(brokers, list) else brokers,
        "racks": len(set(racks.values())) if isinstance(racks, dict) else racks, "topics": len(topics),
        "partitions": sum(t.get("partitions") or len(t["assignment"]) for t in topics),
        "rf": max((t.get("replication_factor") or len(t["assignment"][0]) for t in topics), default=0),
        "faults": len(faults), "fault_kinds": ",".join(s["action"] for s in faults),
    }


class _Probe:
    """Samples leadership balance from the active controller: at the start and after every step."""

    def __init__(self) -> None:
        self.cluster: EmbeddedCluster | None = None
        self.first_request = 0
        self.samples: list[tuple[float, int, float]] = []

    def start(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster
        self.first_request = len(cluster.sent_requests)
        self.sample(0.0)

    def step(self, result: StepResult) -> None:
        self.sample(result.end)

    def sample(self, at: float) -> None:
        controller = self.cluster.active_controller if self.cluster is not None else None
        if controller is None:  # between a controller's crash and its successor: nothing to read
            return
        ctx = controller.context
        live = ctx.live_broker_ids
        led = [n for broker, n in ctx.leader_counts().items() if broker in live]
        skew = max(led) * len(live) / sum(led) if led and sum(led) else 0.0
        self.samples.append((at, ctx.preferred_replica_imbalance_count, skew))


def _measure(report: Report, probe: _Probe) -> dict[str, Any]:
    assert probe.cluster is not None
    sizes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for sent in probe.cluster.sent_requests[probe.first_request:]:
        kind = REQUEST_KINDS[sent.request.api]
        counts[kind] += 1
        sizes[kind] += request_size(sent.request)
    losses = [f for f in report.faults if f.lost_leader]
    times, imbalance, skew = (list(column) for column in zip(*probe.samples)) if probe.samples else ([], [], [])
    violations = report.violations
    errors = [f"step {step}: {message}" for step, message in report.failures]
    return {
        "time_to_all_led_s": (None if any(f.all_led_after is None for f in losses)
                              else max((f.all_led_after or 0.0 for f in losses), default=0.0)),
        "lost_leader": sum(f.lost_leader for f in losses),
        "unavailable_partition_seconds": report.unavailable_partition_seconds,
        "offline_at_end": report.partitions_without_leader_at_end,
        "leader_moves": report.leader_moves,
        "unclean_elections": report.unclean_elections,
        **{f"{kind}_requests": counts[kind] for kind in REQUEST_KINDS.values()},
        **{f"{kind}_bytes": sizes[kind] for kind in REQUEST_KINDS.values()},
        "preferred_imbalance_mean": time_weighted_mean(times, imbalance),
        "preferred_imbalance_max": max(imbalance, default=0),
        "preferred_imbalance_end": imbalance[-1] if imbalance else 0,
        "leader_skew_mean": time_weighted_mean(times, skew),
        "leader_skew_max": max(skew, default=0.0),
        "sample_times": times, "preferred_imbalance": imbalance, "leader_skew": skew,
        "invariant_violations": len(violations),
        "first_violation": f"step {violations[0][0]}: {violations[0][1]}" if violations else None,
        "sim_seconds": report.duration,
        "error": "; ".join(errors) or None,
    }


def time_weighted_mean(times: Sequence[float], values: Sequence[float]) -> float:
    """The mean of a step function that holds ``values[i]`` from ``times[i]`` to ``times[i + 1]``."""
    if len(times) < 2 or times[-1] <= times[0]:
        return float(values[0]) if values else 0.0
    area = sum(v * (t1 - t0) for v, t0, t1 in zip(values, times, times[1:]))
    return area / (times[-1] - times[0])
