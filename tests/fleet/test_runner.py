"""One fleet run measured as a row, a task's rows, the progress line, and the report of a few rows."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest

from kctl.bench.dataset import COLUMN_TYPES, record, schema
from kctl.bench.grid import Grid, load_grid
from kctl.bench.job import Progress, ProgressLine, run_pairs
from kctl.bench.report import write_report
from kctl.bench.runner import COLUMNS, NONDETERMINISTIC, run_one, time_weighted_mean
from kctl.bench.scenarios import generate
from kctl.plugins import PluginHost
from kctl.sim import parse_scenario, run_scenario


class Counter:
    """Counts as a Spark accumulator does, for a task run here."""

    def __init__(self) -> None:
        self.value = 0

    def add(self, n: int) -> None:
        self.value += n


def rows_of(grid: Grid) -> list[dict[str, Any]]:
    return [run_one(grid, seed, v) for seed in grid.seeds for v in grid.variants()]


def test_a_row_measures_what_kctl_sim_reports(small_grid: Path, installed_plugins: PluginHost) -> None:
    grid = load_grid(small_grid, installed_plugins)
    for seed in grid.seeds:
        variant = grid.variants()[1]
        row = run_one(grid, seed, variant, fleet_partition=seed)
        assert set(row) == set(COLUMNS) and row["error"] is None
        report = run_scenario(parse_scenario(generate(grid, seed, variant)))
        assert row["invariant_violations"] == len(report.violations)
        assert row["unavailable_partition_seconds"] == report.unavailable_partition_seconds
        assert row["leader_moves"] == report.leader_moves
        assert {k: row[f"{k}_requests"] for k in ("leader_and_isr", "update_metadata", "stop_replica")} == {
            "leader_and_isr": report.requests_by_type.get("LeaderAndIsr", 0),
            "update_metadata": report.requests_by_type.get("UpdateMetadata", 0),
            "stop_replica": report.requests_by_type.get("StopReplica", 0)}
        assert row["leader_and_isr_bytes"] > 50 * row["leader_and_isr_requests"] > 0
        assert row["sample_times"][0] == 0.0 and row["sample_times"][-1] == grid.duration
        assert len(row["sample_times"]) == len(row["preferred_imbalance"]) == len(row["leader_skew"])
        assert all(skew >= 1.0 for skew in row["leader_skew"])
        assert row["preferred_imbalance_max"] == max(row["preferred_imbalance"])
        assert row["faults"] == len(row["fault_kinds"].split(",")) and (seed, row["selector"]) == (
            row["fleet_partition"], "least-loaded")


def test_the_selectors_differ_only_where_an_offline_election_chose(small_grid: Path,
                                                                  installed_plugins: PluginHost) -> None:
    grid = load_grid(small_grid, installed_plugins).with_seeds(range(30))
    rows = rows_of(grid)
    offline, least = rows[0::2], rows[1::2]
    assert [r["seed"] for r in offline] == [r["seed"] for r in least] == list(range(30))
    differing = [(a, b) for a, b in zip(offline, least) if a["leader_skew"] != b["leader_skew"]]
    assert differing, "the least-loaded selector never chose another leader in 30 seeds"
    assert all("kill_broker" in a["fault_kinds"] or "fail_log_dir" in a["fault_kinds"] for a, _ in differing)


def test_a_scenario_that_raises_becomes_a_row_with_its_error(small_grid: Path, installed_plugins: PluginHost) -> None:
    grid = load_grid(small_grid, installed_plugins)
    broken = dataclasses.replace(grid, faults=dataclasses.replace(grid.faults, kinds=("kill_broker", "meteor")))
    executed, errors = Counter(), Counter()
    pairs = [(seed, k) for seed in reversed(broken.seeds) for k in range(len(broken.variants()))]
    stamp = {"run_id": "r", "kctl_version": "0"}
    rows = [dict(zip(COLUMN_TYPES, r)) for r in run_pairs(broken, broken.variants(), stamp, executed, errors, 3, pairs)]
    assert [(r["seed"], r["variant"]) for r in rows] == [(s, v.label) for s in broken.seeds for v in broken.variants()]
    failed = [r for r in rows if r["error"] is not None]
    assert failed and len(failed) < len(rows) and errors.value == len(failed) and executed.value == len(rows)
    assert all(r["error"].startswith("ScenarioError: ") and "unknown action 'meteor'" in r["error"] for r in failed)
    assert all(r["fleet_partition"] == 3 and r["wall_time_s"] > 0 for r in rows)
    assert all(r["unavailable_partition_seconds"] is not None for r in rows if r["error"] is None)


def test_time_weighted_mean() -> None:
    assert time_weighted_mean([0, 10, 40], [2, 6, 100]) == pytest.approx((2 * 10 + 6 * 30) / 40)
    assert time_weighted_mean([5], [3]) == 3.0 and time_weighted_mean([], []) == 0.0


def test_the_report_counts_error_rows_and_is_self_contained(spark_local: Any, tmp_path: Path, small_grid: Path,
                                                            installed_plugins: PluginHost) -> None:
    grid = load_grid(small_grid, installed_plugins).with_seeds(range(4))
    stamp = {"run_id": "r", "kctl_version": "0"}
    rows = [row | stamp for row in rows_of(grid)]
    rows[3] = dict.fromkeys(COLUMN_TYPES) | {k: rows[3][k] for k in ("grid", "seed", "variant", "selector", "engine")} | {
        "error": "ValueError: boom", "wall_time_s": 0.1} | stamp
    frame = spark_local.createDataFrame([record(r) for r in rows], schema())
    written = write_report(frame, grid, tmp_path / "out", {"Spark master": "local[2]"})
    assert {w.rsplit("/", 1)[1] for w in written} >= {
        "report.html", "summary.md", "leader-skew-over-time.svg", "leader-skew-difference-1-least-loaded.svg"}
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count("<svg") == 6 and "<script" not in html and "local[2]" in html
    assert "<td>offline</td><td>4</td><td>0</td>" in html and "<td>least-loaded</td><td>4</td><td>1</td>" in html
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| `leader skew: busiest broker / mean (time average)` | " in summary
    assert "least-loaded | offline |" in summary  # the seed-by-seed comparison


def test_progress_is_a_line_per_tenth_in_a_log_with_an_eta_from_the_rate_so_far() -> None:
    stream = io.StringIO()
    show = ProgressLine(stream)
    for done in (0, 1, 2, 5, 10, 10):  # a run every 12 s
        show(Progress(done, 10, 0 if done == 10 else 2, 1, 12.0 * done))
    assert stream.getvalue().splitlines() == [
        "kctl fleet: 0/10 runs (0%), 2 running, 1 errors, 0 s, ETA unknown",
        "kctl fleet: 1/10 runs (10%), 2 running, 1 errors, 12 s, ETA 1 min 48 s",
        "kctl fleet: 2/10 runs (20%), 2 running, 1 errors, 24 s, ETA 1 min 36 s",
        "kctl fleet: 5/10 runs (50%), 2 running, 1 errors, 1 min 00 s, ETA 1 min 00 s",
        "kctl fleet: 10/10 runs (100%), 0 running, 1 errors, 2 min 00 s",
    ]


def test_the_eta_follows_the_rate_so_far_in_runs_per_second() -> None:
    assert Progress(0, 100, 2, 0, 30.0).remaining is None
    assert Progress(25, 100, 2, 0, 50.0).remaining == 150.0  # 0.5 runs/s, 75 to go
    assert Progress(1000, 4000, 2, 0, 1800.0).remaining == 5400.0
    stream = io.StringIO()
    ProgressLine(stream)(Progress(1000, 4000, 2, 0, 1800.0))
    assert stream.getvalue() == "kctl fleet: 1,000/4,000 runs (25%), 2 running, 0 errors, 30 min 00 s, ETA 1 h 30 min\n"


def test_rows_do_not_depend_on_anything_but_grid_seed_and_variant(small_grid: Path,
                                                                  installed_plugins: PluginHost) -> None:
    grid = load_grid(small_grid, installed_plugins).with_seeds(range(3))
    first, again = rows_of(grid), rows_of(grid)
    assert [{k: v for k, v in r.items() if k not in NONDETERMINISTIC} for r in first] == [
        {k: v for k, v in r.items() if k not in NONDETERMINISTIC} for r in again]
