"""Spark fleets (DESIGN §8): 1,000 seeded scenario runs, ``local[2]`` at least 1.7x faster than
``local[1]``; 2,000 on a standalone cluster, 2 workers at least 1.7x faster than 1; and a
100,000-seed fleet whose driver stays small, then extended by 10,000 seeds.

Each run is kept small (4 brokers, 6 partitions, one broker crash and its return, two minutes of
scenario time) so that 1,000 of them take seconds, yet each task still does tens of milliseconds
of work: the ratio measures how the fleet spreads over cores, not Spark's per-task overhead. Both
sessions are warmed up (Python workers started, kctl imported) before the timed run. Group
``fleet:1000-runs`` times ``local[2]``; the ``local[1]`` time and the ratio are in ``extra_info``.

Group ``fleet:standalone`` plays the same small scenario for 2,000 seeds (at the ``full`` scale; 40
at ``smoke``, what CI runs, where only the rows and the workers' tasks are checked, not the
ratio) on a real standalone master (:class:`~kctl.testing.spark.SparkStandalone`) with one worker
of one core, then again once a second such worker has joined, each on a fresh warmed-up session
whose executors run the packed environment, as ``kctl fleet run --master spark://…`` ships it.
It times the two workers; the one worker's time and the ratio are in ``extra_info``.

Group ``fleet:large`` plays the same small scenario for 100,000 seeds on ``local[2]`` (at the
``full`` scale; 200 at ``smoke``, what CI runs; ``KCTL_BENCH_FLEET_SEEDS=N+M`` for any other size)
into a dataset, writes its report, then extends the grid by 10,000 seeds (20 at smoke) and checks
that only those are played. It records the peak RSS of the driver's Python process and of its
JVM (``VmHWM`` in ``/proc``) and asserts that the Python driver grew by less than
:data:`DRIVER_GROWTH`, whatever the seed count: rows go from the executors to parquet, and only
aggregates come back.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from kctl.bench.dataset import read_runs
from kctl.bench.environment import pack_environment
from kctl.bench.grid import Grid, parse_grid
from kctl.bench.job import ProgressLine, report, run_fleet
from kctl.bench.runner import NONDETERMINISTIC
from kctl.bench.session import build_session
from kctl.testing.spark import SparkStandalone, driver_conf, require_spark

if TYPE_CHECKING:
    from conftest import Scale

RUNS = 1000
MIN_SPEEDUP = 1.7
GRID = parse_grid({
    "name": "bench-1000", "seeds": RUNS, "duration": 120, "sample_interval": 60,
    "cluster": {"brokers": 4, "controllers": 3},
    "topics": {"count": 1, "partitions": 6, "replication_factor": 3},
    "faults": {"count": 1, "kinds": ["kill_broker"], "window": 60, "downtime": 30},
}, "benches/bench_fleet.py")


STANDALONE_SEEDS = {"smoke": 40, "full": 2000}
"""Seeds of the standalone fleet, by scale."""

LARGE = {"smoke": (200, 20), "full": (100_000, 10_000)}
"""Seeds of the large fleet and of its extension, by scale."""
SEEDS_ENV = "KCTL_BENCH_FLEET_SEEDS"
DRIVER_GROWTH = 128 * 1024 * 1024
"""How much the driver's Python process may grow during the large fleet (its rows would take
about 250 MiB as Python dicts at 100,000 seeds)."""


class Timed(NamedTuple):
    seconds: float
    rows: list[dict[str, Any]]
    """The rows written, by seed."""
    application: str
    """The Spark application's id."""


def on(master: str, grid: Grid, timed: Any = run_fleet, archive: Path | None = None,
       conf: Mapping[str, str] | None = None) -> Timed:
    """Run ``grid`` with ``timed(spark, grid, out)`` on a fresh, warmed-up ``master`` session
    (executors with the packed environment ``archive``, more properties ``conf``)."""
    spark = build_session(master, True, archive, app_name=f"kctl bench {master}", conf=conf)
    try:
        with tempfile.TemporaryDirectory(prefix="kctl-bench-fleet-") as out:
            run_fleet(spark, grid.with_seeds(range(RUNS, RUNS + 20)), f"{out}/warm-up")  # other seeds
            started = time.perf_counter()
            timed(spark, grid, f"{out}/timed")
            elapsed = time.perf_counter() - started
            rows = [r.asDict(recursive=True) for r in read_runs(spark, f"{out}/timed").orderBy("seed").collect()]
        return Timed(elapsed, rows, spark.sparkContext.applicationId)
    finally:
        spark.stop()


def same_runs(one: list[dict[str, Any]], two: list[dict[str, Any]]) -> bool:
    """Whether two fleets' rows are the same but for what depends on the machine and the run."""
    drop = {*NONDETERMINISTIC, "run_id"}
    return [{k: v for k, v in r.items() if k not in drop} for r in one] == [
        {k: v for k, v in r.items() if k not in drop} for r in two]


@pytest.mark.benchmark(group="fleet:1000-runs")
def test_fleet_of_1000_runs_scales_from_local_1_to_local_2(benchmark: Any) -> None:
    require_spark()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    one, rows_one, _ = on("local[1]", GRID)
    two, rows_two, _ = on("local[2]", GRID, lambda spark, grid, out: benchmark.pedantic(
        run_fleet, args=(spark, grid, out), rounds=1, iterations=1, warmup_rounds=0))
    speedup = one / two
    benchmark.extra_info |= {"engine": rows_two[0]["engine"], "runs": RUNS, "brokers": 4, "partitions": 6, "rf": 3,
                             "seed": f"0-{RUNS - 1}", "local_1_s": round(one, 2), "local_2_s": round(two, 2),
                             "speedup": round(speedup, 2)}
    print(f"\n{RUNS} runs: local[1] {one:.1f} s, local[2] {two:.1f} s, speedup {speedup:.2f}x")
    assert len(rows_two) == RUNS and not [r for r in rows_two if r["error"] is not None]
    assert same_runs(rows_one, rows_two)
    assert speedup >= MIN_SPEEDUP, f"local[2] is only {speedup:.2f}x faster than local[1]"


@pytest.mark.benchmark(group="fleet:standalone")
def test_a_fleet_on_a_standalone_cluster_scales_from_1_to_2_workers(benchmark: Any, bench_scale: Scale) -> None:
    require_spark()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    seeds = STANDALONE_SEEDS.get(bench_scale.name, STANDALONE_SEEDS["smoke"])
    grid, archive = GRID.with_seeds(range(seeds)), pack_environment()
    with SparkStandalone(workers=1, cores=1) as cluster:
        one = on(cluster.url, grid, archive=archive, conf=driver_conf() | cluster.every_executor())
        cluster.add_worker()
        two = on(cluster.url, grid, lambda spark, grid, out: benchmark.pedantic(
            run_fleet, args=(spark, grid, out), rounds=1, iterations=1, warmup_rounds=0),
            archive, driver_conf() | cluster.every_executor())
        tasks = [worker.tasks_started(two.application) for worker in cluster.workers]
    speedup = one.seconds / two.seconds
    benchmark.extra_info |= {"engine": two.rows[0]["engine"], "runs": seeds, "brokers": 4, "partitions": 6, "rf": 3,
                             "seed": f"0-{seeds - 1}", "workers_1_s": round(one.seconds, 2),
                             "workers_2_s": round(two.seconds, 2), "speedup": round(speedup, 2),
                             "tasks_by_worker": tasks, "load_average": round(os.getloadavg()[0], 2)}
    print(f"\n{seeds} runs on {cluster.cores}-core workers: 1 worker {one.seconds:.1f} s, 2 workers "
          f"{two.seconds:.1f} s, speedup {speedup:.2f}x (tasks by worker {tasks}, load {os.getloadavg()[0]:.1f})")
    assert len(two.rows) == seeds and not [r for r in two.rows if r["error"] is not None]
    assert same_runs(one.rows, two.rows)
    assert all(tasks), f"a worker ran no task of the 2-worker fleet: {tasks}"
    if bench_scale.name == "full":  # a smoke-sized fleet is mostly Spark's overhead
        assert speedup >= MIN_SPEEDUP, f"2 workers are only {speedup:.2f}x faster than 1"


def peak_rss(pid: int | str = "self") -> int:
    """A process's peak resident set size in bytes (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def large_size(scale: Scale) -> tuple[int, int]:
    given = os.environ.get(SEEDS_ENV)
    if given:
        seeds, _, more = given.partition("+")
        return int(seeds), int(more or 0)
    return LARGE.get(scale.name, LARGE["smoke"])


@pytest.mark.benchmark(group="fleet:large")
def test_a_large_fleet_keeps_the_driver_small_and_its_extension_plays_only_new_seeds(
        benchmark: Any, bench_scale: Scale, tmp_path: Path) -> None:
    require_spark()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    seeds, more = large_size(bench_scale)
    spark = build_session("local[2]", True, app_name="kctl bench large fleet")
    try:
        jvm = spark.sparkContext._gateway.jvm.ProcessHandle.current().pid()
        before = peak_rss()
        started = time.perf_counter()
        first = benchmark.pedantic(run_fleet, args=(spark, GRID.with_seeds(range(seeds)), tmp_path),
                                   kwargs={"progress": ProgressLine()}, rounds=1, iterations=1, warmup_rounds=0)
        fleet_s = time.perf_counter() - started
        started = time.perf_counter()
        status, _ = report(spark, GRID.with_seeds(range(seeds)), tmp_path, {})
        report_s = time.perf_counter() - started
        started = time.perf_counter()
        extended = run_fleet(spark, GRID.with_seeds(range(seeds + more)), tmp_path, ProgressLine())
        extension_s = time.perf_counter() - started
        stored = read_runs(spark, tmp_path).count()
        python_peak, jvm_peak = peak_rss(), peak_rss(jvm)
    finally:
        spark.stop()
    numbers = {"seeds": seeds, "extension": more, "fleet_s": round(fleet_s, 1), "report_s": round(report_s, 1),
               "extension_s": round(extension_s, 1), "driver_python_peak_rss_mib": round(python_peak / 2**20),
               "driver_python_growth_mib": round((python_peak - before) / 2**20),
               "driver_jvm_peak_rss_mib": round(jvm_peak / 2**20)}
    benchmark.extra_info |= numbers
    print("\n" + ", ".join(f"{k} {v}" for k, v in numbers.items()))
    assert (first.executed, first.errors) == (seeds, 0) and status == 0
    assert (extended.executed, extended.skipped) == (more, seeds) and stored == seeds + more
    assert python_peak - before < DRIVER_GROWTH, f"the driver grew by {(python_peak - before) / 2**20:.0f} MiB"
