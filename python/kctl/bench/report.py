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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from kctl.bench import queries, svg
from kctl.bench.dataset import write_files
from kctl.bench.grid import Grid
from kctl.bench.numbers import fmt
from kctl.bench.queries import Aggregates, Bins
from kctl.bench.stats import CONFIDENCE
from kctl.tables import markdown_table


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


SAMPLED = ("leader_skew", "preferred_imbalance")
"""The sampled columns drawn over time."""
DISTRIBUTIONS = ("leader_skew_mean", "unavailable_partition_seconds")
"""The columns drawn as distributions (ECDF)."""
REQUEST_BYTES = {"LeaderAndIsr": "leader_and_isr_bytes", "UpdateMetadata": "update_metadata_bytes",
                 "StopReplica": "stop_replica_bytes"}


def aggregate(frame: Any, grid: Grid) -> Aggregates:
    """The report's aggregates of ``frame`` (one grid's runs), computed by Spark."""
    return queries.aggregate(frame, grid, [m.column for m in METRICS], [m.column for m in METRICS[:-1]],
                             SAMPLED, DISTRIBUTIONS, DIFFERENCE_PLOT)


def runs_table(agg: Aggregates) -> tuple[list[str], list[list[str]]]:
    header = ["variant", "runs", "errors", "invariant violations", "unclean elections", "never led again"]
    body = []
    for variant in agg.variants:
        c = agg.runs[variant]
        body.append([variant, *(fmt(n) for n in (c.runs, c.errors, c.violations, c.unclean, c.never_led))])
    return header, body


def summary_table(agg: Aggregates) -> tuple[list[str], list[list[str]]]:
    """Per metric and variant: mean, median and 95th percentile."""
    header = ["metric", *(f"{v}: mean / median / p95" for v in agg.variants)]
    body = []
    for metric in METRICS:
        cells = [metric.label]
        for variant in agg.variants:
            values = agg.distributions.get((metric.column, variant))
            cells.append(" / ".join(fmt(v, metric.unit) for v in values) if values else "-")
        body.append(cells)
    return header, body


def paired_table(agg: Aggregates) -> tuple[list[str], list[list[str]]]:
    """Each variant against the first, seed by seed: the mean difference with its confidence
    interval, and the seeds better, the same and worse."""
    header = ["metric", "variant", "vs", "seeds", "mean difference", f"{CONFIDENCE:.0%} CI",
              "better", "same", "worse"]
    body = []
    for variant in agg.variants[1:]:
        for metric in METRICS[:-1]:  # wall time is the machine's, not the variant's
            paired = agg.paired.get((metric.column, variant))
            if paired is None:
                continue
            interval = paired.interval
            body.append([metric.label, variant, agg.variants[0], fmt(paired.n),
                         fmt(paired.mean, metric.unit, signed=True),
                         "-" if interval is None else " to ".join(fmt(v, metric.unit, signed=True) for v in interval),
                         *(fmt(n) for n in (paired.better, paired.same, paired.worse))])
    return header, body


PAIRED_NOTE = (f"Differences are the variant's value minus the first variant's on the same seed (lower is better). "
               f"The {CONFIDENCE:.0%} CI is Student's t interval of their mean (seeds - 1 degrees of freedom); "
               "one that excludes 0 means the variant changed the metric beyond seed-to-seed noise.")


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def charts(agg: Aggregates) -> dict[str, str]:
    """Every plot of the report, by file name."""
    variants, times = agg.variants, agg.times
    over_time, ecdf = agg.over_time, agg.ecdf
    plots = {
        "leader-skew-over-time": svg.line_chart(
            "Leader skew over time (mean of all seeds)", "scenario time (s)", "busiest broker / mean",
            {v: (times, over_time["leader_skew"].get(v, [])) for v in variants}, step=True),
        "preferred-imbalance-over-time": svg.line_chart(
            "Partitions not led by their preferred replica (mean)", "scenario time (s)", "partitions",
            {v: (times, over_time["preferred_imbalance"].get(v, [])) for v in variants}, step=True),
        "leader-skew-ecdf": svg.line_chart(
            "Time-averaged leader skew per run (ECDF)", "leader skew", "fraction of runs",
            {v: ecdf["leader_skew_mean"].get(v, ([], [])) for v in variants}, step=True, distribution=True),
        "unavailability-ecdf": svg.line_chart(
            "Unavailable partition-seconds per run (ECDF)", "partition-seconds", "fraction of runs",
            {v: ecdf["unavailable_partition_seconds"].get(v, ([], [])) for v in variants}, step=True,
            distribution=True),
        "request-bytes": svg.bar_chart(
            "Controller request bytes per run (mean)", "bytes", list(REQUEST_BYTES),
            {v: [agg.distributions.get((c, v), (0.0,))[0] for c in REQUEST_BYTES.values()] for v in variants}),
    }
    for k, variant in enumerate(variants[1:], 1):
        paired = agg.paired.get((DIFFERENCE_PLOT, variant))
        bins = agg.differences.get(variant, Bins(0.0, 1.0, [0] * queries.HISTOGRAM_BINS))
        plots[f"leader-skew-difference-{k}-{_slug(variant)}"] = svg.histogram(
            f"Leader skew, {variant} minus {variants[0]}, seed by seed", "difference in time-averaged skew",
            bins.low, bins.high, bins.counts,
            mean=paired.mean if paired else None, interval=paired.interval if paired else None)
    return plots


def markdown(agg: Aggregates, grid: Grid) -> str:
    """The report's tables in Markdown (what docs quote)."""
    sections = [f"# Fleet `{grid.name}`", grid.description.strip()]
    for title, (header, body) in (("Runs", runs_table(agg)), ("Metrics", summary_table(agg)),
                                  ("Seed by seed", paired_table(agg))):
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


def html(agg: Aggregates, grid: Grid, meta: Mapping[str, str], plots: Mapping[str, str]) -> str:
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>kctl fleet {escape(grid.name)}</title><style>{STYLE}</style></head><body>",
        f"<h1>Fleet <code>{escape(grid.name)}</code></h1>", f"<p>{escape(grid.description.strip())}</p>",
        '<table class="meta">' + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
                                         for k, v in meta.items()) + "</table>",
    ]
    for title, (header, body) in (("Runs", runs_table(agg)), ("Metrics", summary_table(agg)),
                                  ("Seed by seed, against the first variant", paired_table(agg))):
        parts += [f"<h2>{escape(title)}</h2>", _html_table(header, body)]
    parts += [f"<p>{escape(PAIRED_NOTE)}</p>", "<h2>Plots</h2>", f"<p>{escape(LOG_NOTE)}</p>"]
    parts += [f"<figure>{chart}</figure>" for chart in plots.values()]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(frame: Any, grid: Grid, out: str | Path, meta: Mapping[str, str],
                 agg: Aggregates | None = None) -> list[str]:
    """``report.html``, ``summary.md`` and ``plots/*.svg`` under ``out`` (any Hadoop path) from
    ``frame``'s aggregates (``agg`` when already computed); returns the locations written."""
    agg = agg if agg is not None else aggregate(frame, grid)
    plots = charts(agg)
    files = {"report.html": html(agg, grid, meta, plots), "summary.md": markdown(agg, grid)}
    files |= {f"plots/{name}.svg": chart + "\n" for name, chart in plots.items()}
    return write_files(frame.sparkSession, out, files)
