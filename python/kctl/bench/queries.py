"""The report's numbers as Spark SQL aggregations over a fleet's dataset, of any size.

Each query groups by variant (and, for the seed-by-seed differences, joins each variant's runs to
the first variant's on the seed), so the executors do the work and the driver collects only
aggregates: a handful of rows per variant and metric, the plots' points (a bounded number per
curve: :data:`ECDF_POINTS`, the sample times, :data:`HISTOGRAM_BINS`). The definitions are those of
:mod:`kctl.bench.stats`: means, medians, nearest-rank 95th percentiles, paired differences with
Student's t intervals; runs that ended in an error are counted and left out of the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kctl.bench.grid import Grid
from kctl.bench.stats import PairedDifference

ECDF_POINTS = 1000
"""At most this many points per ECDF curve: every distinct value while there are fewer, else the
largest value of each 1/ECDF_POINTS of the runs."""
HISTOGRAM_BINS = 30
PERCENTILE_ACCURACY = 10_000_000
"""percentile_approx's accuracy: its rank error (count / accuracy) stays under one run, so the
95th percentile is exact, for fleets of up to ten million runs per variant."""


@dataclass(frozen=True)
class RunCounts:
    """One variant's runs: all of them, those that ended in an error, and over the others the
    invariant violations, unclean elections and runs where some partition was never led again."""

    runs: int
    errors: int
    violations: int
    unclean: int
    never_led: int


@dataclass(frozen=True)
class Bins:
    """A histogram: ``len(counts)`` equal bins from ``low`` to ``high``."""

    low: float
    high: float
    counts: list[int]


@dataclass(frozen=True)
class Aggregates:
    """Everything the report shows, by variant in grid order."""

    variants: list[str]
    runs: dict[str, RunCounts]
    distributions: dict[tuple[str, str], tuple[float, float, float]]
    """(column, variant) → mean, median, 95th percentile, for columns with a value."""
    paired: dict[tuple[str, str], PairedDifference]
    """(column, variant) → its differences from the first variant, seed by seed."""
    over_time: dict[str, dict[str, list[float]]]
    """Sampled column → variant → its mean over the runs at each of ``times``."""
    times: list[float]
    ecdf: dict[str, dict[str, tuple[list[float], list[float]]]]
    differences: dict[str, Bins]
    """Variant after the first → the histogram of its seed-by-seed differences in the plotted metric."""


def sample_times(grid: Grid) -> list[float]:
    """Where the over-time plots read every run's samples: each ``sample_interval`` and the end."""
    steps = int(grid.duration / grid.sample_interval)
    return [min(grid.duration, k * grid.sample_interval) for k in range(steps + 1)] + (
        [grid.duration] if steps * grid.sample_interval < grid.duration else [])


def variant_order(frame: Any, grid: Grid) -> list[str]:
    """The dataset's variants: the grid's in grid order, then any others (an older grid's) by name."""
    present = {r["variant"] for r in frame.select("variant").distinct().collect()}
    known = [v.label for v in grid.variants() if v.label in present]
    return known + sorted(present - set(known))


def _sum_when(condition: Any, value: Any = 1) -> Any:
    from pyspark.sql import functions as F

    return F.coalesce(F.sum(F.when(condition, value)), F.lit(0))


def run_counts(frame: Any) -> dict[str, RunCounts]:
    from pyspark.sql import functions as F

    ok = F.col("error").isNull()
    rows = frame.groupBy("variant").agg(
        F.count(F.lit(1)).alias("runs"), _sum_when(~ok).alias("errors"),
        _sum_when(ok, F.col("invariant_violations")).alias("violations"),
        _sum_when(ok, F.col("unclean_elections")).alias("unclean"),
        _sum_when(ok & F.col("time_to_all_led_s").isNull()).alias("never_led")).collect()
    return {r["variant"]: RunCounts(*(int(r[k]) for k in ("runs", "errors", "violations", "unclean", "never_led")))
            for r in rows}


def distributions(ok: Any, columns: Sequence[str]) -> dict[tuple[str, str], tuple[float, float, float]]:
    """Mean, median (the middle value, or the mean of the two middle ones) and nearest-rank 95th
    percentile of each column per variant, over the non-null values."""
    from pyspark.sql import functions as F

    aggregates = []
    for i, column in enumerate(columns):
        value = F.col(column).cast("double")
        aggregates += [F.avg(value).alias(f"mean{i}"), F.percentile(value, 0.5).alias(f"median{i}"),
                       F.percentile_approx(value, 0.95, PERCENTILE_ACCURACY).alias(f"p95{i}")]
    found = {}
    for r in ok.groupBy("variant").agg(*aggregates).collect():
        for i, column in enumerate(columns):
            if r[f"mean{i}"] is not None:
                found[column, r["variant"]] = (float(r[f"mean{i}"]), float(r[f"median{i}"]), float(r[f"p95{i}"]))
    return found


def _differences(ok: Any, first: str, columns: Sequence[str]) -> Any:
    """Each run of another variant than ``first`` beside the first's run of its seed: ``variant``,
    ``seed`` and ``d_COLUMN`` (its value minus the first's; null if either is)."""
    from pyspark.sql import functions as F

    base = ok.where(F.col("variant") == first).select("grid", "seed", *(F.col(c).alias(f"b_{c}") for c in columns))
    return (ok.where(F.col("variant") != first).join(base, ["grid", "seed"])
            .select("variant", "seed", *((F.col(c).cast("double") - F.col(f"b_{c}")).alias(f"d_{c}") for c in columns)))


def paired(differences: Any, columns: Sequence[str]) -> dict[tuple[str, str], PairedDifference]:
    """Per variant and column: count, mean and sample standard deviation of the differences, and
    how many were negative, zero and positive."""
    from pyspark.sql import functions as F

    aggregates = []
    for i, column in enumerate(columns):
        d = F.col(f"d_{column}")
        aggregates += [F.count(d).alias(f"n{i}"), F.avg(d).alias(f"mean{i}"), F.stddev_samp(d).alias(f"sd{i}"),
                       _sum_when(d < 0).alias(f"better{i}"), _sum_when(d == 0).alias(f"same{i}"),
                       _sum_when(d > 0).alias(f"worse{i}")]
    found = {}
    for r in differences.groupBy("variant").agg(*aggregates).collect():
        for i, column in enumerate(columns):
            if r[f"n{i}"]:
                found[column, r["variant"]] = PairedDifference(
                    int(r[f"n{i}"]), float(r[f"mean{i}"]), float(r[f"sd{i}"] or 0.0),
                    int(r[f"better{i}"]), int(r[f"same{i}"]), int(r[f"worse{i}"]))
    return found


def histograms(differences: Any, column: str, bins: int = HISTOGRAM_BINS) -> dict[str, Bins]:
    """Per variant, the differences in ``column`` counted in ``bins`` equal bins between their
    smallest and largest (one bin's width around a single value)."""
    from pyspark.sql import functions as F

    d = F.col(f"d_{column}")
    values = differences.where(d.isNotNull()).select("variant", d.alias("d"))
    ranges = {r["variant"]: (float(r["low"]), float(r["high"])) for r in values.groupBy("variant").agg(
        F.min("d").alias("low"), F.max("d").alias("high")).collect()}
    ranges = {v: (low - 0.5, high + 0.5) if high <= low else (low, high) for v, (low, high) in ranges.items()}
    if not ranges:
        return {}
    edges = values.sparkSession.createDataFrame([(v, low, (high - low) / bins) for v, (low, high) in ranges.items()],
                                                "variant string, low double, width double")
    counted = (values.join(F.broadcast(edges), "variant")
               .select("variant", F.least(F.lit(bins - 1), F.floor((F.col("d") - F.col("low")) / F.col("width"))
                                          .cast("int")).alias("bin"))
               .groupBy("variant", "bin").count().collect())
    found = {v: Bins(low, high, [0] * bins) for v, (low, high) in ranges.items()}
    for r in counted:
        found[r["variant"]].counts[r["bin"]] = int(r["count"])
    return found


def means_over_time(ok: Any, columns: Sequence[str], times: Sequence[float]) -> dict[str, dict[str, list[float]]]:
    """Per sampled column and variant, the mean over the runs of each run's step function (its
    last sample at or before the time) at each of ``times``."""
    from pyspark.sql import functions as F

    at = F.array(*(F.lit(float(t)) for t in times))

    def resampled(column: str) -> Any:
        values = F.col(column).cast("array<double>")
        return F.transform(at, lambda t: F.when(F.size(values) == 0, F.lit(0.0)).otherwise(F.try_element_at(
            values, F.greatest(F.lit(1), F.size(F.filter("sample_times", lambda s: s <= t + 1e-9))))))

    exploded = ok.select("variant", F.posexplode(F.arrays_zip(*(resampled(c).alias(c) for c in columns))))
    rows = exploded.groupBy("variant", "pos").agg(
        *(F.avg(F.col("col")[c]).alias(c) for c in columns)).collect()
    found: dict[str, dict[str, list[float]]] = {c: {} for c in columns}
    for r in rows:
        for c in columns:
            found[c].setdefault(r["variant"], [0.0] * len(times))[r["pos"]] = float(r[c])
    return found


def ecdf(ok: Any, column: str, points: int = ECDF_POINTS) -> dict[str, tuple[list[float], list[float]]]:
    """Per variant, the empirical distribution of ``column``'s non-null values: (value, fraction
    of runs at or below it) at each distinct value, or at most ``points`` of them (see
    :data:`ECDF_POINTS`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    counts = ok.where(F.col(column).isNotNull()).groupBy("variant", F.col(column).cast("double").alias("x")).count()
    so_far = Window.partitionBy("variant").orderBy("x").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    cumulative = (counts.withColumn("at_or_below", F.sum("count").over(so_far))
                  .withColumn("n", F.sum("count").over(Window.partitionBy("variant"))))
    rows = (cumulative.groupBy("variant", F.ceil(F.col("at_or_below") * points / F.col("n")).alias("bucket"))
            .agg(F.max("x").alias("x"), F.max(F.col("at_or_below") / F.col("n")).alias("y"))
            .orderBy("variant", "x").collect())
    found: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        xs, ys = found.setdefault(r["variant"], ([], []))
        xs.append(float(r["x"]))
        ys.append(float(r["y"]))
    return found


def aggregate(frame: Any, grid: Grid, metrics: Sequence[str], paired_metrics: Sequence[str],
              sampled: Sequence[str], distributions_of: Sequence[str], difference_plot: str) -> Aggregates:
    """Every aggregate of the report over ``frame`` (one grid's rows of the dataset)."""
    from pyspark.sql import functions as F

    variants = variant_order(frame, grid)
    ok = frame.where(F.col("error").isNull())
    times = sample_times(grid)
    differences = _differences(ok, variants[0], paired_metrics) if len(variants) > 1 else None
    return Aggregates(
        variants=variants, runs=run_counts(frame), distributions=distributions(ok, metrics),
        paired=paired(differences, paired_metrics) if differences is not None else {},
        over_time=means_over_time(ok, sampled, times), times=times,
        ecdf={c: ecdf(ok, c) for c in distributions_of},
        differences=histograms(differences, difference_plot) if differences is not None else {})


def dataset_facts(frame: Any) -> Mapping[str, Any]:
    """The seeds, runs, fleet runs and kctl versions in ``frame``, and its failed runs."""
    from pyspark.sql import functions as F

    failed = F.col("error").isNotNull() | (F.col("invariant_violations") > 0)
    (r,) = frame.agg(F.min("seed").alias("first"), F.max("seed").alias("last"),
                     F.count_distinct("seed").alias("seeds"), F.count(F.lit(1)).alias("runs"),
                     F.count_distinct("run_id").alias("fleet_runs"),
                     F.array_sort(F.collect_set("kctl_version")).alias("versions"),
                     _sum_when(failed).alias("failed")).collect()
    facts: dict[str, Any] = r.asDict()
    return facts


def failed_runs(frame: Any, limit: int = 5) -> list[Any]:
    """The first ``limit`` runs (by seed) that ended in an error or violated an invariant."""
    from pyspark.sql import functions as F

    failed = F.col("error").isNotNull() | (F.col("invariant_violations") > 0)
    return list(frame.where(failed).select("seed", "variant", "error", "first_violation")
                .orderBy("seed", "variant").limit(limit).collect())
