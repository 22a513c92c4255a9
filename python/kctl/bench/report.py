"""The fleet report: summary tables and plots of a grid's rows, as one self-contained HTML page
(inline SVG) plus the same tables in Markdown and each plot as an SVG file.

Every metric is "lower is better", so variants are compared pair by pair on the same seeds: for
each metric and each variant against the first, the mean of the per-seed differences with its
t-based confidence interval (:mod:`kctl.bench.stats`), and how many seeds it made better, left
the same or made worse; and for each variant a histogram of its per-seed differences in leader
skew. Runs that ended in an error are counted but left out of the statistics. Every number is
written by :func:`kctl.bench.numbers.fmt`.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from kctl.bench import svg
from kctl.bench.grid import Grid
from kctl.bench.numbers import fmt
from kctl.bench.stats import CONFIDENCE, ecdf, paired_difference, percentile
from kctl.tables import markdown_table

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Metric:
    column: str
    label: str
    unit: str = ""


METRICS = (
    Metric("time_to_all_led_s", "time until every partition had a leader again (worst fault)", "s"),
    Metric("unavailable_partition_seconds", "unavailable partition-seconds"),
    Metric("leader_moves", "leader moves"),
    Metric("preferred_imbalance_mean", "partitions not led by their preferred replica (time average)"),
    Metric("leader_skew_mean", "leader skew: busiest broker / mean (time average)"),
    Metric("leader_skew_max", "leader skew (worst sample)"),
    Metric("leader_and_isr_requests", "LeaderAndIsr requests"),
    Metric("leader_and_isr_bytes", "LeaderAndIsr bytes", "B"),
    Metric("update_metadata_requests", "UpdateMetadata requests"),
    Metric("update_metadata_bytes", "UpdateMetadata bytes", "B"),
    Metric("stop_replica_requests", "StopReplica requests"),
    Metric("stop_replica_bytes", "StopReplica bytes", "B"),
    Metric("unclean_elections", "unclean leader elections"),
    Metric("invariant_violations", "invariant violations"),
    Metric("wall_time_s", "wall time of a run", "s"),
)
"""What the tables show, in order; each is a row column where lower is better."""

DIFFERENCE_PLOT = "leader_skew_mean"
"""The metric whose per-seed differences each variant gets a histogram of."""


def variants_of(rows: Sequence[Row]) -> list[str]:
    return list(dict.fromkeys(row["variant"] for row in rows))


def _ok(rows: Sequence[Row], variant: str) -> list[Row]:
    return [r for r in rows if r["variant"] == variant and r["error"] is None]


def _values(rows: Sequence[Row], column: str) -> list[float]:
    return [float(r[column]) for r in rows if r[column] is not None]


def seed_differences(first: Sequence[Row], other: Sequence[Row], column: str) -> list[float]:
    """``column`` of ``other`` minus ``column`` of ``first``, seed by seed, over the seeds both
    measured it on (in ``other``'s order)."""
    base = {r["seed"]: r[column] for r in first if r[column] is not None}
    return [float(r[column]) - float(base[r["seed"]]) for r in other if r[column] is not None and r["seed"] in base]


def runs_table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    header = ["variant", "runs", "errors", "invariant violations", "unclean elections", "never led again"]
    body = []
    for variant in variants_of(rows):
        mine = [r for r in rows if r["variant"] == variant]
        ok = [r for r in mine if r["error"] is None]
        body.append([variant, *(fmt(n) for n in (
            len(mine), len(mine) - len(ok), sum(r["invariant_violations"] for r in ok),
            sum(r["unclean_elections"] for r in ok), sum(1 for r in ok if r["time_to_all_led_s"] is None)))])
    return header, body


def summary_table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    """Per metric and variant: mean, median and 95th percentile."""
    variants = variants_of(rows)
    header = ["metric", *(f"{v}: mean / median / p95" for v in variants)]
    body = []
    for metric in METRICS:
        cells = [metric.label]
        for variant in variants:
            values = _values(_ok(rows, variant), metric.column)
            cells.append(" / ".join(fmt(f(values), metric.unit) for f in (
                statistics.fmean, statistics.median, lambda v: percentile(v, 95))) if values else "-")
        body.append(cells)
    return header, body


def paired_table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    """Each variant against the first, seed by seed: the mean difference with its confidence
    interval, and the seeds better, the same and worse."""
    variants = variants_of(rows)
    header = ["metric", "variant", "vs", "seeds", "mean difference", f"{CONFIDENCE:.0%} CI",
              "better", "same", "worse"]
    body = []
    first = _ok(rows, variants[0]) if variants else []
    for variant in variants[1:]:
        mine = _ok(rows, variant)
        for metric in METRICS[:-1]:  # wall time is the machine's, not the variant's
            diffs = seed_differences(first, mine, metric.column)
            if not diffs:
                continue
            paired = paired_difference(diffs)
            interval = paired.interval
            body.append([metric.label, variant, variants[0], fmt(paired.n), fmt(paired.mean, metric.unit, signed=True),
                         "-" if interval is None else " to ".join(fmt(v, metric.unit, signed=True) for v in interval),
                         *(fmt(n) for n in (paired.better, paired.same, paired.worse))])
    return header, body


PAIRED_NOTE = (f"Differences are the variant's value minus the first variant's on the same seed (lower is better). "
               f"The {CONFIDENCE:.0%} CI is Student's t interval of their mean (seeds - 1 degrees of freedom); "
               "one that excludes 0 means the variant changed the metric beyond seed-to-seed noise.")


def resampled_mean(rows: Sequence[Row], column: str, times: Sequence[float]) -> list[float]:
    """The mean over ``rows`` of each row's sampled step function ``column`` at ``times``."""
    totals = [0.0] * len(times)
    for row in rows:
        samples, values, j = row["sample_times"], row[column], 0
        for i, t in enumerate(times):
            while j + 1 < len(samples) and samples[j + 1] <= t + 1e-9:
                j += 1
            totals[i] += values[j] if values else 0.0
    return [total / len(rows) for total in totals] if rows else []


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def charts(rows: Sequence[Row], grid: Grid) -> dict[str, str]:
    """Every plot of the report, by file name."""
    variants = variants_of(rows)
    ok = {v: _ok(rows, v) for v in variants}
    steps = int(grid.duration / grid.sample_interval)
    times = [min(grid.duration, k * grid.sample_interval) for k in range(steps + 1)] + (
        [grid.duration] if steps * grid.sample_interval < grid.duration else [])
    plots = {
        "leader-skew-over-time": svg.line_chart(
            "Leader skew over time (mean of all seeds)", "scenario time (s)", "busiest broker / mean",
            {v: (times, resampled_mean(ok[v], "leader_skew", times)) for v in variants}, step=True),
        "preferred-imbalance-over-time": svg.line_chart(
            "Partitions not led by their preferred replica (mean)", "scenario time (s)", "partitions",
            {v: (times, resampled_mean(ok[v], "preferred_imbalance", times)) for v in variants}, step=True),
        "leader-skew-ecdf": svg.line_chart(
            "Time-averaged leader skew per run (ECDF)", "leader skew", "fraction of runs",
            {v: ecdf(_values(ok[v], "leader_skew_mean")) for v in variants}, step=True, distribution=True),
        "unavailability-ecdf": svg.line_chart(
            "Unavailable partition-seconds per run (ECDF)", "partition-seconds", "fraction of runs",
            {v: ecdf(_values(ok[v], "unavailable_partition_seconds")) for v in variants}, step=True,
            distribution=True),
        "request-bytes": svg.bar_chart(
            "Controller request bytes per run (mean)", "bytes",
            ["LeaderAndIsr", "UpdateMetadata", "StopReplica"],
            {v: [statistics.fmean(_values(ok[v], c)) if ok[v] else 0.0
                 for c in ("leader_and_isr_bytes", "update_metadata_bytes", "stop_replica_bytes")] for v in variants}),
    }
    for k, variant in enumerate(variants[1:], 1):
        diffs = seed_differences(ok[variants[0]], ok[variant], DIFFERENCE_PLOT)
        paired = paired_difference(diffs) if diffs else None
        plots[f"leader-skew-difference-{k}-{_slug(variant)}"] = svg.histogram(
            f"Leader skew, {variant} minus {variants[0]}, seed by seed", "difference in time-averaged skew", diffs,
            mean=paired.mean if paired else None, interval=paired.interval if paired else None)
    return plots


def markdown(rows: Sequence[Row], grid: Grid) -> str:
    """The report's tables in Markdown (what docs quote)."""
    sections = [f"# Fleet `{grid.name}`", grid.description.strip()]
    for title, (header, body) in (("Runs", runs_table(rows)), ("Metrics", summary_table(rows)),
                                  ("Seed by seed", paired_table(rows))):
        sections += [f"## {title}", markdown_table(header, body) if body else "(no pairs)"]
    sections.append(PAIRED_NOTE)
    return "\n\n".join(s for s in sections if s) + "\n"


def _html_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    cells = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>"


LOG_NOTE = (f"An axis of values (not time) is logarithmic, and says so, when none is negative and the largest "
            f"is at least {fmt(svg.LOG_RATIO)} times the smallest positive one. Curves that coincide exactly are "
            "drawn dashed over one another and marked \"identical to\" in the legend.")

STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}figure{display:inline-block;margin:.5em}
.meta td{text-align:left}"""


def html(rows: Sequence[Row], grid: Grid, meta: Mapping[str, str], plots: Mapping[str, str]) -> str:
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>kctl fleet {escape(grid.name)}</title><style>{STYLE}</style></head><body>",
        f"<h1>Fleet <code>{escape(grid.name)}</code></h1>", f"<p>{escape(grid.description.strip())}</p>",
        '<table class="meta">' + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
                                         for k, v in meta.items()) + "</table>",
    ]
    for title, (header, body) in (("Runs", runs_table(rows)), ("Metrics", summary_table(rows)),
                                  ("Seed by seed, against the first variant", paired_table(rows))):
        parts += [f"<h2>{escape(title)}</h2>", _html_table(header, body)]
    parts += [f"<p>{escape(PAIRED_NOTE)}</p>", "<h2>Plots</h2>", f"<p>{escape(LOG_NOTE)}</p>"]
    parts += [f"<figure>{chart}</figure>" for chart in plots.values()]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(rows: Sequence[Row], grid: Grid, out: Path, meta: Mapping[str, str]) -> list[Path]:
    """``report.html``, ``summary.md`` and ``plots/*.svg`` in ``out``; returns the paths written."""
    plots = charts(rows, grid)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    written = [out / "report.html", out / "summary.md"]
    written[0].write_text(html(rows, grid, meta, plots), encoding="utf-8")
    written[1].write_text(markdown(rows, grid), encoding="utf-8")
    for name, chart in plots.items():
        path = out / "plots" / f"{name}.svg"
        path.write_text(chart + "\n", encoding="utf-8")
        written.append(path)
    return written
