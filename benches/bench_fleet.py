"""Spark fleet scaling (DESIGN §8): 1,000 seeded scenario runs, ``local[2]`` at least 1.7x faster
than ``local[1]``.

Each run is kept small (4 brokers, 6 partitions, one broker crash and its return, two minutes of
scenario time) so that 1,000 of them take seconds, yet each task still does tens of milliseconds
of work: the ratio measures how the fleet spreads over cores, not Spark's per-task overhead. Both
sessions are warmed up (Python workers started, kctl imported) before the timed run. Group
``fleet:1000-runs`` times ``local[2]``; the ``local[1]`` time and the ratio are in ``extra_info``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from kctl.bench.grid import Grid, parse_grid
from kctl.bench.job import run_fleet
from kctl.bench.runner import NONDETERMINISTIC
from kctl.bench.session import build_session
from kctl.testing.spark import require_spark

RUNS = 1000
MIN_SPEEDUP = 1.7
GRID = parse_grid({
    "name": "bench-1000", "seeds": RUNS, "duration": 120, "sample_interval": 60,
    "cluster": {"brokers": 4, "controllers": 3},
    "topics": {"count": 1, "partitions": 6, "replication_factor": 3},
    "faults": {"count": 1, "kinds": ["kill_broker"], "window": 60, "downtime": 30},
}, "benches/bench_fleet.py")


def on(master: str, grid: Grid, timed: Any = run_fleet) -> tuple[float, list[dict[str, Any]]]:
    """Seconds to run ``grid`` with ``timed(spark, grid)`` on a fresh, warmed-up ``master`` session,
    and the rows."""
    spark = build_session(master, True, app_name=f"kctl bench {master}")
    try:
        run_fleet(spark, grid.with_seeds(range(RUNS, RUNS + 20)))  # warm-up, other seeds
        started = time.perf_counter()
        rows = timed(spark, grid)
        return time.perf_counter() - started, rows
    finally:
        spark.stop()


@pytest.mark.benchmark(group="fleet:1000-runs")
def test_fleet_of_1000_runs_scales_from_local_1_to_local_2(benchmark: Any) -> None:
    require_spark()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    one, rows_one = on("local[1]", GRID)
    two, rows_two = on("local[2]", GRID, lambda spark, grid: benchmark.pedantic(
        run_fleet, args=(spark, grid), rounds=1, iterations=1, warmup_rounds=0))
    speedup = one / two
    benchmark.extra_info |= {"engine": rows_two[0]["engine"], "runs": RUNS, "brokers": 4, "partitions": 6, "rf": 3,
                             "seed": f"0-{RUNS - 1}", "local_1_s": round(one, 2), "local_2_s": round(two, 2),
                             "speedup": round(speedup, 2)}
    print(f"\n{RUNS} runs: local[1] {one:.1f} s, local[2] {two:.1f} s, speedup {speedup:.2f}x")
    assert len(rows_two) == RUNS and not [r for r in rows_two if r["error"] is not None]
    drop = set(NONDETERMINISTIC)
    assert [{k: v for k, v in r.items() if k not in drop} for r in rows_one] == [
        {k: v for k, v in r.items() if k not in drop} for r in rows_two]
    assert speedup >= MIN_SPEEDUP, f"local[2] is only {speedup:.2f}x faster than local[1]"
