"""The PySpark job behind ``kctl fleet run``: ``main(spark, args)`` plays a grid, one seed per task.

Each Spark partition holds one seed; its task imports kctl (on the executor, from the installed
package or the packed environment), plays that seed's scenario once per variant and returns the
rows. The driver collects the rows, sorts them (seed, then variant), and writes ``runs.parquet``,
``report.html``, ``summary.md``, ``plots/*.svg`` and a copy of the grid into the output directory,
while a thread reports progress from Spark's status tracker.

``kctl fleet run`` builds the session (see :mod:`kctl.bench.session`) and calls :func:`main`; the
module also runs under ``spark-submit`` with the same arguments, taking the session Spark gives.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl import extras
from kctl.bench.grid import Grid, Variant, load_grid
from kctl.bench.numbers import duration, fmt
from kctl.bench.runner import COLUMNS

PARQUET_TYPES = {"string": "string", "bigint": "int64", "double": "float64"}


def run_parser() -> argparse.ArgumentParser:
    """The job's arguments under ``spark-submit``, the same as ``kctl fleet run``'s."""
    parser = argparse.ArgumentParser(prog="kctl fleet run", description="run a benchmark grid on Spark")
    run_arguments(parser)
    return parser


def run_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of a fleet run (registered by :mod:`kctl.bench.cli` for ``kctl fleet run``)."""
    parser.add_argument("grid", metavar="GRID.toml", type=Path, help="the grid file")
    parser.add_argument("--out", metavar="DIR", type=Path, required=True,
                        help="where runs.parquet, report.html, summary.md and plots/ go")
    parser.add_argument("--master", metavar="URL", default=None,
                        help="Spark master (default: KCTL_SPARK_MASTER, else Spark's own configuration, else local[*])")
    parser.add_argument("--seeds", metavar="N", type=int, default=None, help="run only the grid's first N seeds")
    parser.add_argument("--environment", metavar="ARCHIVE", type=Path, default=None,
                        help="executors' packed virtualenv for a cluster master (default: built and cached)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


@dataclass(frozen=True)
class Progress:
    """Where a running fleet is: seeds (tasks) done out of ``total``, and rows with an error."""

    done: int
    total: int
    running: int
    errors: int
    elapsed: float

    @property
    def remaining(self) -> float | None:
        """Seconds left at the rate so far (seeds done over time elapsed); None before the first
        seed is done."""
        if self.done == 0 or self.elapsed <= 0:
            return None
        return (self.total - self.done) * self.elapsed / self.done


def run_partition(grid: Grid, variants: Sequence[Variant], errors: Any, index: int,
                  seeds: Iterable[int]) -> Iterator[dict[str, Any]]:
    """One task: its seed's scenario under every variant. Runs on an executor, so kctl's runner
    is imported here, and kctl's logs go nowhere (a failed election is normal in a fault storm)."""
    import logging

    from kctl.bench.runner import run_one

    logger = logging.getLogger("kctl")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    for seed in seeds:
        for variant in variants:
            row = run_one(grid, seed, variant, fleet_partition=index)
            if row["error"] is not None:
                errors.add(1)
            yield row


def run_fleet(spark: Any, grid: Grid, progress: Callable[[Progress], None] | None = None,
              interval: float = 1.0, clock: Callable[[], float] = time.monotonic) -> list[dict[str, Any]]:
    """Every row of ``grid`` (seed by seed, variants in grid order), computed on ``spark``;
    ``progress`` is told where it is every ``interval`` seconds, timed by ``clock``."""
    sc = spark.sparkContext
    seeds, variants = list(grid.seeds), grid.variants()
    errors = sc.accumulator(0)
    rdd = sc.parallelize(seeds, len(seeds)).mapPartitionsWithIndex(
        functools.partial(run_partition, grid, variants, errors))
    group = f"kctl-fleet-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, f"kctl fleet {grid.name}: {len(seeds)} seeds x {len(variants)} variants")
    stop = threading.Event()
    started = clock()

    def report() -> None:
        tracker = sc.statusTracker()
        while not stop.wait(interval):
            done = running = 0
            for job in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job)
                for stage in info.stageIds if info is not None else ():
                    stage_info = tracker.getStageInfo(stage)
                    if stage_info is not None:
                        done += stage_info.numCompletedTasks
                        running += stage_info.numActiveTasks
            if progress is not None:
                progress(Progress(done, len(seeds), running, errors.value, clock() - started))

    watcher = threading.Thread(target=report, name="kctl-fleet-progress", daemon=True)
    watcher.start()
    try:
        rows: list[dict[str, Any]] = rdd.collect()
    finally:
        stop.set()
        watcher.join()
    if progress is not None:
        progress(Progress(len(seeds), len(seeds), 0, sum(r["error"] is not None for r in rows),
                          clock() - started))
    order = {v.label: i for i, v in enumerate(variants)}
    return sorted(rows, key=lambda row: (row["seed"], order[row["variant"]]))


def write_parquet(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """The rows with the :data:`~kctl.bench.runner.COLUMNS` schema (Spark reads it back as is)."""
    pa = extras.require("pyarrow", "writing the fleet's Parquet file")
    pq = extras.require("pyarrow.parquet", "writing the fleet's Parquet file")

    def arrow(kind: str) -> Any:
        if kind.startswith("array<"):
            return pa.list_(arrow(kind[6:-1]))
        return pa.type_for_alias(PARQUET_TYPES[kind])

    schema = pa.schema([(name, arrow(kind)) for name, kind in COLUMNS.items()])
    table = pa.Table.from_pylist([{name: row[name] for name in COLUMNS} for row in rows], schema=schema)
    pq.write_table(table, path)


def read_parquet(path: Path) -> list[dict[str, Any]]:
    pq = extras.require("pyarrow.parquet", "reading the fleet's Parquet file")
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def write_outputs(rows: Sequence[dict[str, Any]], grid: Grid, out: Path, meta: dict[str, str]) -> list[Path]:
    """Everything a fleet leaves in ``out``; returns the paths written."""
    from kctl.bench.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    write_parquet(rows, out / "runs.parquet")
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    written = [out / "runs.parquet", out / "meta.json"]
    if Path(grid.source).is_file() and Path(grid.source).resolve() != (out / "grid.toml").resolve():
        shutil.copyfile(grid.source, out / "grid.toml")
        written.append(out / "grid.toml")
    return written + write_report(rows, grid, out, meta)


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
        line = (f"kctl fleet: {fmt(p.done)}/{fmt(p.total)} seeds ({100 * p.done // max(1, p.total)}%), "
                f"{fmt(p.running)} running, {fmt(p.errors)} errors, {duration(p.elapsed)}{eta}")
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K" + ("\n" if self.finished else ""))  # erase a longer line
        elif self.finished or decile > self.decile or p.elapsed - self.shown_at >= 30:
            self.stream.write(line + "\n")
            self.decile, self.shown_at = decile, p.elapsed
        self.stream.flush()


def main(spark: Any, args: Sequence[str] | argparse.Namespace, grid: Grid | None = None) -> int:
    """Run a grid on ``spark`` and write its outputs; 0 if every run ended without an error or an
    invariant violation, 1 if not (the outputs are written either way). ``grid``: the grid file
    already loaded (``kctl fleet run`` checks it before Spark starts)."""
    from kctl.bench.report import METRICS, summary_table
    from kctl.tables import table

    options = args if isinstance(args, argparse.Namespace) else run_parser().parse_args(list(args))
    grid = grid if grid is not None else load_grid(options.grid)
    if options.seeds is not None:
        grid = grid.with_seeds(range(grid.seeds.start, grid.seeds.start + options.seeds))
    started = time.perf_counter()
    rows = run_fleet(spark, grid, ProgressLine() if not options.quiet else None)
    elapsed = time.perf_counter() - started
    meta = {"grid": grid.source, "seeds": f"{grid.seeds.start}-{grid.seeds.stop - 1} ({fmt(len(grid.seeds))})",
            "variants": ", ".join(v.label for v in grid.variants()), "runs": fmt(len(rows)),
            "Spark master": str(spark.sparkContext.master), "Spark version": str(spark.version),
            "fleet wall time": fmt(elapsed, "s")}
    written = write_outputs(rows, grid, Path(options.out), meta)
    header, body = summary_table(rows)
    shown = {m.label for m in METRICS[:6]}
    print(table([h.upper() for h in header], [r for r in body if r[0] in shown]))
    print(f"\n{fmt(len(rows))} runs in {fmt(elapsed, 's')} on {spark.sparkContext.master}; wrote "
          + ", ".join(str(p) for p in written[:4]))
    failed = [r for r in rows if r["error"] is not None or r["invariant_violations"]]
    for row in failed[:5]:
        print(f"seed {row['seed']} ({row['variant']}): {row['error'] or row['first_violation']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":  # spark-submit …/kctl/bench/job.py GRID --out DIR
    from pyspark.sql import SparkSession

    sys.exit(main(SparkSession.builder.appName("kctl fleet").getOrCreate(), sys.argv[1:]))
