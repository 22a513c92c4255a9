"""The PySpark job behind ``kctl fleet run``: ``main(spark, args)`` plays a grid, seed ranges per task.

The grid's (seed, variant) pairs that the output's dataset (:mod:`kctl.bench.dataset`) lacks are
counted per batch of seeds, so a fleet that was interrupted, or whose grid gained seeds or
variants, plays only what is missing. A batch with nothing done (every batch of a new dataset)
costs no Spark job but its own: each task makes its seeds' pairs; a batch partly done is
anti-joined with the dataset and its pairs shuffled to their tasks. Each task plays a contiguous
range of seeds, each pair once; its rows are checked against the dataset's schema on the executor
and appended to the parquet dataset by Spark's DataFrame writer, one job (one commit) per batch of
seeds, while a thread reports progress from an accumulator and Spark's status tracker. The driver
then computes the report with Spark SQL (:mod:`kctl.bench.queries`) and writes ``report.html``,
``summary.md``, ``plots/*.svg``, ``meta.json`` and a copy of the grid next to the dataset. It never
holds the rows.

``kctl fleet run`` builds the session (see :mod:`kctl.bench.session`) and calls :func:`main`; the
module also runs under ``spark-submit`` with the same arguments, taking the session Spark gives.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kctl
from kctl.bench.dataset import (PARTITION_COLUMNS, STALE_COMMIT, FleetPathError, HadoopFiles, runs_uri, schema,
                                write_files)
from kctl.bench.grid import Grid, Variant, load_grid
from kctl.bench.numbers import duration, fmt
from kctl.errors import KctlError

BATCH_SEEDS = 10_000
"""Seeds per Spark job: an interrupted fleet loses at most the batch under way."""
TASK_RUNS = 250
"""Runs per task at most (fewer when a batch has too few seeds to keep every core busy)."""


def run_parser() -> argparse.ArgumentParser:
    """The job's arguments under ``spark-submit``, the same as ``kctl fleet run``'s."""
    parser = argparse.ArgumentParser(prog="kctl fleet run", description="run a benchmark grid on Spark")
    run_arguments(parser)
    return parser


def run_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of a fleet run (registered by :mod:`kctl.bench.cli` for ``kctl fleet run``)."""
    parser.add_argument("grid", metavar="GRID.toml", type=Path, help="the grid file")
    parser.add_argument("--out", metavar="DIR", required=True,
                        help="where the runs/ dataset, report.html, summary.md and plots/ go: a path or a Hadoop "
                             "URI (file://, s3a://, hdfs://); runs already there are not played again")
    parser.add_argument("--master", metavar="URL", default=None,
                        help="Spark master (default: KCTL_SPARK_MASTER, else Spark's own configuration, else local[*])")
    parser.add_argument("--seeds", metavar="N", type=int, default=None, help="run only the grid's first N seeds")
    parser.add_argument("--environment", metavar="ARCHIVE", type=Path, default=None,
                        help="executors' packed virtualenv for a cluster master (default: built and cached)")
    parser.add_argument("--batch", metavar="SEEDS", type=int, default=BATCH_SEEDS,
                        help=f"seeds per Spark job and commit (default {BATCH_SEEDS:,})")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


@dataclass(frozen=True)
class Progress:
    """Where a running fleet is: runs done out of ``total`` (the runs it has to play), tasks
    running, and runs that ended in an error."""

    done: int
    total: int
    running: int
    errors: int
    elapsed: float

    @property
    def remaining(self) -> float | None:
        """Seconds left at the rate so far (runs done over time elapsed); None before the first
        task is done."""
        if self.done == 0 or self.elapsed <= 0:
            return None
        return (self.total - self.done) * self.elapsed / self.done


@dataclass(frozen=True)
class FleetResult:
    """What one ``kctl fleet run`` did: its run id, the runs it played (counted by an
    accumulator as the executors play them), the (seed, variant) pairs it skipped because the
    dataset had them, and how many of its runs ended in an error."""

    run_id: str
    executed: int
    skipped: int
    errors: int


class FleetWriteError(KctlError):
    """An executor's row did not match the dataset's schema: the executor's message, without
    Spark's stack traces around it. Nothing of that batch was committed."""


def new_run_id() -> str:
    """A run id that sorts by start time and is unique across machines."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def run_pairs(grid: Grid, variants: Sequence[Variant], stamp: dict[str, str], executed: Any, errors: Any,
              index: int, pairs: Iterable[tuple[int, int]]) -> Iterator[tuple[Any, ...]]:
    """One task: its (seed, variant index) pairs in order, each played and checked against the
    dataset's schema. Runs on an executor, so kctl's runner is imported here, and kctl's logs go
    nowhere (a failed election is normal in a fault storm)."""
    import logging

    from kctl.bench.dataset import record
    from kctl.bench.runner import run_one

    logger = logging.getLogger("kctl")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    for seed, k in sorted(pairs):
        row = run_one(grid, seed, variants[k], fleet_partition=index) | stamp
        executed.add(1)
        if row["error"] is not None:
            errors.add(1)
        yield record(row)


def done_pairs(spark: Any, grid: Grid, location: str) -> Any:
    """The (seed, variant) pairs of the grid's seeds and variants that the dataset at ``location``
    already holds, each once; None when there is no dataset yet."""
    from pyspark.sql import functions as F

    if not HadoopFiles(spark).exists(location):
        return None
    return (spark.read.schema(schema()).option("basePath", location).parquet(location)
            .where((F.col("grid") == grid.name) & (F.col("seed") >= grid.seeds.start) & (F.col("seed") < grid.seeds.stop)
                   & F.col("variant").isin([v.label for v in grid.variants()]))
            .select("seed", "variant").distinct())


def missing_runs(done: Any, grid: Grid, batch_seeds: int) -> dict[int, int]:
    """Runs missing per batch of ``batch_seeds`` seeds (batches with none left out): every pair of
    the batch less those ``done`` (a Spark job that only counts), all of them when ``done`` is None."""
    from pyspark.sql import functions as F

    missing = {b: min(batch_seeds, len(grid.seeds) - b * batch_seeds) * len(grid.variants())
               for b in range(-(-len(grid.seeds) // batch_seeds))}
    if done is not None:
        for r in done.groupBy(F.floor((F.col("seed") - grid.seeds.start) / batch_seeds).alias("batch")).count().collect():
            missing[int(r["batch"])] -= int(r["count"])
    return {b: n for b, n in missing.items() if n}


def task_pairs(low: int, stop: int, per_task: int, variants: int, index: int) -> Iterator[tuple[int, int]]:
    """Task ``index``'s (seed, variant index) pairs in a batch that has none done: its ``per_task``
    seeds from ``low`` (not past ``stop``), each with every variant."""
    start = low + index * per_task
    return ((seed, k) for seed in range(start, min(start + per_task, stop)) for k in range(variants))


def batch_pairs(spark: Any, grid: Grid, done: Any, low: int, seeds: int, per_task: int, tasks: int, full: bool) -> Any:
    """The RDD of a batch's missing (seed, variant index) pairs, task ``i``'s in partition ``i``.
    A ``full`` batch (none done) is made by its tasks themselves, without a shuffle; else its pairs
    are anti-joined with those ``done`` and sent to their task by a shuffle."""
    variants = grid.variants()
    if full:
        count = len(variants)  # the closure ships an int, not the grid's variants
        return spark.sparkContext.parallelize(range(tasks), tasks).mapPartitionsWithIndex(
            lambda index, _: task_pairs(low, low + seeds, per_task, count, index))
    labels = spark.createDataFrame([(v.label, k) for k, v in enumerate(variants)], "variant string, variant_index int")
    pairs = spark.range(low, low + seeds).withColumnRenamed("id", "seed").crossJoin(labels)
    return (pairs.join(done, ["seed", "variant"], "left_anti").select("seed", "variant_index").rdd
            .map(lambda r: ((r[0] - low) // per_task, (r[0], r[1])))
            .partitionBy(tasks, lambda key: int(key)).values())


def run_fleet(spark: Any, grid: Grid, out: str | Path, progress: Callable[[Progress], None] | None = None,
              interval: float = 1.0, clock: Callable[[], float] = time.monotonic,
              batch_seeds: int = BATCH_SEEDS) -> FleetResult:
    """Play the runs of ``grid`` that the dataset under ``out`` lacks and append them to it, one
    Spark job (one commit) per :data:`BATCH_SEEDS` seeds, so an interrupted fleet keeps every
    batch it finished; ``progress`` is told where it is every ``interval`` seconds, timed by
    ``clock``. The driver holds only counts: rows go from the executors to parquet."""
    sc = spark.sparkContext
    location = runs_uri(out)
    files = HadoopFiles(spark)
    if files.exists(f"{location}/{STALE_COMMIT}"):
        files.remove(f"{location}/{STALE_COMMIT}")
    variants, run_id = grid.variants(), new_run_id()
    done = done_pairs(spark, grid, location)
    batches = missing_runs(done, grid, batch_seeds)
    total = sum(batches.values())
    executed, errors = sc.accumulator(0), sc.accumulator(0)
    stamp = {"run_id": run_id, "kctl_version": kctl.__version__}
    group = f"kctl-fleet-{run_id}"
    sc.setJobGroup(group, f"kctl fleet {grid.name}: {total} runs of {len(grid.seeds)} seeds x {len(variants)} variants")
    stop = threading.Event()
    started = clock()

    def report() -> None:
        tracker = sc.statusTracker()
        while not stop.wait(interval):
            running = 0
            for job in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job)
                for stage in info.stageIds if info is not None else ():
                    stage_info = tracker.getStageInfo(stage)
                    if stage_info is not None:
                        running += stage_info.numActiveTasks
            if progress is not None:
                progress(Progress(executed.value, total, running, errors.value, clock() - started))

    watcher = threading.Thread(target=report, name="kctl-fleet-progress", daemon=True)
    watcher.start()
    try:
        for batch in sorted(batches):
            low = grid.seeds.start + batch * batch_seeds
            seeds = min(batch_seeds, grid.seeds.stop - low)
            per_task = max(1, min(-(-TASK_RUNS // len(variants)), -(-seeds // (4 * sc.defaultParallelism))))
            tasks = -(-seeds // per_task)
            pairs = batch_pairs(spark, grid, done, low, seeds, per_task, tasks,
                                full=batches[batch] == seeds * len(variants))
            rdd = pairs.mapPartitionsWithIndex(functools.partial(run_pairs, grid, variants, stamp, executed, errors))
            (spark.createDataFrame(rdd, schema(), verifySchema=False)
             .write.mode("append").partitionBy(*PARTITION_COLUMNS).parquet(location))
    except Exception as e:
        problem = re.search(r"kctl\.bench\.dataset\.RowSchemaError: ([^\n]+)", str(e))
        if problem is not None:
            raise FleetWriteError(f"a row does not match the fleet's schema: {problem[1]}") from e
        raise
    finally:
        stop.set()
        watcher.join()
    if progress is not None:
        progress(Progress(executed.value, total, 0, errors.value, clock() - started))
    return FleetResult(run_id, executed.value, len(grid.seeds) * len(variants) - total, errors.value)


class ProgressLine:
    """Progress on stderr: redrawn in place on a terminal, a line every 10% or 30 s in a log. Until
    the fleet is done it ends with an ETA from the rate so far."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.decile, self.shown_at, self.finished = -1, 0.0, False

    def __call__(self, p: Progress) -> None:
        if self.finished:
            return
        self.finished = p.done == p.total and p.running == 0
        decile = 10 * p.done // max(1, p.total)
        remaining = p.remaining
        eta = "" if self.finished else f", ETA {'unknown' if remaining is None else duration(remaining)}"
        line = (f"kctl fleet: {fmt(p.done)}/{fmt(p.total)} runs ({100 * p.done // max(1, p.total)}%), "
                f"{fmt(p.running)} running, {fmt(p.errors)} errors, {duration(p.elapsed)}{eta}")
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K" + ("\n" if self.finished else ""))  # erase a longer line
        elif self.finished or decile > self.decile or p.elapsed - self.shown_at >= 30:
            self.stream.write(line + "\n")
            self.decile, self.shown_at = decile, p.elapsed
        self.stream.flush()


def main(spark: Any, args: Sequence[str] | argparse.Namespace, grid: Grid | None = None) -> int:
    """Run the missing runs of a grid on ``spark``, then write the report of all its runs in the
    dataset; 0 if every one of them ended without an error or an invariant violation, 1 if not
    (the outputs are written either way). ``grid``: the grid file already loaded (``kctl fleet
    run`` checks it before Spark starts)."""
    options = args if isinstance(args, argparse.Namespace) else run_parser().parse_args(list(args))
    grid = grid if grid is not None else load_grid(options.grid)
    if options.seeds is not None:
        grid = grid.with_seeds(range(grid.seeds.start, grid.seeds.start + options.seeds))
    started = time.perf_counter()
    result = run_fleet(spark, grid, options.out, ProgressLine() if not options.quiet else None,
                       batch_seeds=options.batch)
    elapsed = time.perf_counter() - started
    meta = {"grid": grid.source, "variants": ", ".join(v.label for v in grid.variants()),
            "this run": f"{result.run_id}: {fmt(result.executed)} runs played, {fmt(result.skipped)} already there",
            "Spark master": str(spark.sparkContext.master), "Spark version": str(spark.version),
            "fleet wall time": fmt(elapsed, "s")}
    files = {"meta.json": json.dumps(meta, indent=2) + "\n"}
    if Path(grid.source).is_file():
        files["grid.toml"] = Path(grid.source).read_text(encoding="utf-8")
    written = write_files(spark, options.out, files)
    status, written = report(spark, grid, options.out, meta, written)
    print(f"\n{fmt(result.executed)} runs in {fmt(elapsed, 's')} on {spark.sparkContext.master} "
          f"({fmt(result.skipped)} already in the dataset); wrote " + ", ".join(written[:5]))
    return status


def report(spark: Any, grid: Grid, out: str | Path, meta: Mapping[str, str], written: Sequence[str] = ()) -> tuple[int, list[str]]:
    """Write the report of ``grid``'s runs in the dataset under ``out`` and print its main table
    and the first failed runs; 1 when a run failed or violated an invariant, else 0, and the
    locations written."""
    from pyspark.sql import functions as F

    from kctl.bench.dataset import read_runs
    from kctl.bench.queries import dataset_facts, failed_runs
    from kctl.bench.report import METRICS, aggregate, summary_table, write_report
    from kctl.tables import table

    frame = read_runs(spark, out).where(F.col("grid") == grid.name)
    facts = dataset_facts(frame)
    if not facts["runs"]:
        raise FleetPathError(f"{runs_uri(out)}: no runs of grid {grid.name!r}")
    meta = {"seeds": f"{facts['first']}-{facts['last']} ({fmt(facts['seeds'])})", "runs": fmt(facts["runs"]),
            "fleet runs": f"{fmt(facts['fleet_runs'])} (kctl {', '.join(facts['versions'])})", **meta}
    agg = aggregate(frame, grid)
    written = [*written, *write_report(frame, grid, out, meta, agg)]
    header, body = summary_table(agg)
    shown = {m.label for m in METRICS[:6]}
    print(table([h.upper() for h in header], [r for r in body if r[0] in shown]))
    for row in failed_runs(frame):
        print(f"seed {row['seed']} ({row['variant']}): {row['error'] or row['first_violation']}", file=sys.stderr)
    return (1 if facts["failed"] else 0), written


if __name__ == "__main__":  # spark-submit …/kctl/bench/job.py GRID --out DIR
    from pyspark.sql import SparkSession

    sys.exit(main(SparkSession.builder.appName("kctl fleet").getOrCreate(), sys.argv[1:]))
