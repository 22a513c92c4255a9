"""The fleet report, read back as a person would: its HTML tables and SVG plots parsed, on rows
made by hand so that every number shown can be computed here (no simulation). Spark SQL computes
the report's aggregates from a DataFrame of those rows, as it does from a fleet's dataset."""

from __future__ import annotations

import math
import re
import statistics
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from kctl.bench import svg
from kctl.bench.grid import Grid, parse_grid
from kctl.bench.numbers import duration, fmt
from kctl.bench.dataset import COLUMN_TYPES, record, schema
from kctl.bench.report import METRICS, write_report
from kctl.bench.stats import mean_interval, paired_difference, percentile, t_quantile

NS = {"svg": "http://www.w3.org/2000/svg"}
SEEDS = range(5)


def row(seed: int, variant: str, **values: Any) -> dict[str, Any]:
    """A clean run where every metric is 0 unless given."""
    base = dict.fromkeys(COLUMN_TYPES) | {m.column: 0 for m in METRICS} | {
        "run_id": "hand", "kctl_version": "0", "grid": "hand", "seed": seed, "variant": variant, "selector": "offline", "engine": "rust",
        "sample_times": [0.0, 60.0, 120.0], "leader_skew": [1.0, 1.0, 1.0], "preferred_imbalance": [0, 0, 0]}
    return base | values


def grid() -> Grid:
    return parse_grid({"name": "hand", "description": "Rows made by hand.", "seeds": len(SEEDS), "duration": 120,
                       "sample_interval": 60}, "hand.toml")


class Tables(HTMLParser):
    """The report's tables as lists of rows of cell texts, by the heading before each."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.heading = ""
        self.in_heading = False
        self.cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "h2":
            self.in_heading, self.heading = True, ""
        elif tag == "tr" and self.heading:
            self.tables.setdefault(self.heading, []).append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self.in_heading = False
        elif tag in ("td", "th") and self.cell is not None and self.heading in self.tables:
            self.tables[self.heading][-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.in_heading:
            self.heading += data
        elif self.cell is not None:
            self.cell.append(data)


def frame(spark: Any, rows: list[dict[str, Any]]) -> Any:
    return spark.createDataFrame([record(r) for r in rows], schema())


def report(spark: Any, tmp_path: Path, rows: list[dict[str, Any]]) -> tuple[dict[str, list[list[str]]], dict[str, ET.Element]]:
    """Write the report of ``rows``; its tables (header row first) and its plots, parsed."""
    write_report(frame(spark, rows), grid(), tmp_path, {"Spark master": "local[2]"})
    tables = Tables((tmp_path / "report.html").read_text()).tables
    plots = {p.stem: ET.parse(p).getroot() for p in sorted((tmp_path / "plots").glob("*.svg"))}
    return tables, plots


def texts(plot: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in plot.iterfind("svg:text", NS)]


def x_ticks(plot: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in plot.iterfind("svg:text", NS) if t.get("y") == str(svg.HEIGHT - svg.BOTTOM + 16)]


def by_metric(table: list[list[str]], variant: str) -> dict[str, dict[str, str]]:
    header, *body = table
    return {r[0]: dict(zip(header, r)) for r in body if r[1] == variant}


def test_every_variant_gets_a_seed_by_seed_difference_plot_against_the_first(spark_local: Any, tmp_path: Path) -> None:
    skew = {"a": [1.2, 1.3, 1.4, 1.5, 1.6], "b": [1.1, 1.3, 1.3, 1.5, 1.5], "c, x=1": [1.2, 1.4, 1.4, 1.7, 1.6]}
    rows = [row(s, v, leader_skew_mean=skew[v][s]) for s in SEEDS for v in skew]
    _, plots = report(spark_local, tmp_path, rows)
    differences = {name: plot for name, plot in plots.items() if "difference" in name}
    assert sorted(differences) == ["leader-skew-difference-1-b", "leader-skew-difference-2-c-x-1"]
    for name, variant in (("leader-skew-difference-1-b", "b"), ("leader-skew-difference-2-c-x-1", "c, x=1")):
        plot = differences[name]
        assert plot.findtext("svg:title", namespaces=NS) == f"Leader skew, {variant} minus a, seed by seed"
        diffs = [x - y for x, y in zip(skew[variant], skew["a"])]
        assert f"mean {fmt(statistics.fmean(diffs), signed=True)}" in texts(plot)
        bars = [r for r in plot.iterfind("svg:rect", NS) if r.get("fill") == svg.COLORS[0]]
        assert len(bars) == len({round(d, 9) for d in diffs})  # one bar per distinct difference, none hidden


def test_the_t_quantile_matches_published_tables_for_small_and_large_samples() -> None:
    # Two-sided 95% critical values of Student's t, as printed in every statistics table.
    table = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 9: 2.2622, 10: 2.2281, 20: 2.0860,
             30: 2.0423, 60: 2.0003, 120: 1.9799, 1000: 1.9623, 5000: 1.9604, 10**6: 1.9600}
    for df, value in table.items():
        assert t_quantile(0.975, df) == pytest.approx(value, abs=6e-5), df
    assert t_quantile(0.995, 3) == pytest.approx(5.8409, abs=6e-5) and t_quantile(0.9, 7) == pytest.approx(
        1.4149, abs=6e-5)
    assert t_quantile(0.975, 1000) > t_quantile(0.975, 1001) > t_quantile(0.975, 1002)  # the two methods meet


def test_a_paired_interval_on_a_known_sample_equals_the_hand_computed_one(spark_local: Any, tmp_path: Path) -> None:
    diffs = [1, 2, 3, 4, 10]
    # By hand: mean 4, sample variance (9 + 4 + 1 + 0 + 36) / 4 = 12.5, t(0.975, 4) = 2.776445.
    half = 2.776445 * math.sqrt(12.5) / math.sqrt(5)
    paired = paired_difference(diffs)
    assert (paired.n, paired.mean, paired.sd) == (5, 4.0, pytest.approx(math.sqrt(12.5)))
    assert (paired.better, paired.same, paired.worse) == (0, 0, 5)
    assert paired.interval == pytest.approx((4 - half, 4 + half), abs=1e-5)
    assert mean_interval(5, 4.0, math.sqrt(12.5)) == paired.interval  # the same from aggregates alone
    assert mean_interval(1, 4.0, 0.0) is None

    moves = [10, 20, 30, 40, 50]
    rows = [row(s, v, leader_moves=moves[s] + (diffs[s] if v == "b" else 0)) for s in SEEDS for v in ("a", "b")]
    tables, _ = report(spark_local, tmp_path, rows)
    cells = by_metric(tables["Seed by seed, against the first variant"], "b")["leader moves"]
    assert (cells["vs"], cells["seeds"], cells["mean difference"]) == ("a", "5", "+4")
    assert cells["95% CI"] == "-0.39 to +8.39" == f"{fmt(4 - half, signed=True)} to {fmt(4 + half, signed=True)}"
    assert (cells["better"], cells["same"], cells["worse"]) == ("0", "0", "5")
    unchanged = by_metric(tables["Seed by seed, against the first variant"], "b")["leader skew (worst sample)"]
    assert (unchanged["mean difference"], unchanged["95% CI"], unchanged["same"]) == ("0", "0 to 0", "5")


def test_identical_curves_are_drawn_both_and_marked(spark_local: Any, tmp_path: Path) -> None:
    skew = {"a": [1.5, 1.2, 1.1], "b": [1.5, 1.4, 1.3], "c": [1.5, 1.2, 1.1], "d": [1.5, 1.2, 1.1]}
    rows = [row(s, v, leader_skew=skew[v]) for s in SEEDS for v in skew]
    _, plots = report(spark_local, tmp_path, rows)
    lines = {"".join(p.itertext()): p for p in plots["leader-skew-over-time"].iterfind("svg:polyline", NS)}
    assert sorted(lines) == ["a", "b", "c (identical to a)", "d (identical to a)"]
    assert lines["c (identical to a)"].get("points") == lines["a"].get("points")  # drawn where a is, on top
    dashes = [lines[name].get("stroke-dasharray") for name in ("a", "b", "c (identical to a)", "d (identical to a)")]
    assert dashes[:2] == [None, None] and None not in dashes[2:] and dashes[2] != dashes[3]
    assert texts(plots["leader-skew-over-time"]).count("identical to a") == 2
    # Identical distributions are marked the same way.
    assert "identical to a" in texts(plots["leader-skew-ecdf"])


def test_a_skewed_distribution_gets_a_labelled_log_axis_and_an_even_one_does_not(spark_local: Any, tmp_path: Path) -> None:
    unavailable = [0.0, 0.02, 0.5, 3.0, 900.0]  # a long tail: most runs recover at once
    rows = [row(s, v, unavailable_partition_seconds=unavailable[s], leader_skew_mean=1.0 + s / 10,
                leader_and_isr_bytes=20_000, update_metadata_bytes=5000, stop_replica_bytes=150) for s in SEEDS for v in ("a", "b")]
    _, plots = report(spark_local, tmp_path, rows)
    labels = texts(plots["unavailability-ecdf"])
    assert "partition-seconds (log scale, 0 drawn at its start)" in labels
    assert x_ticks(plots["unavailability-ecdf"]) == ["0.01", "0.1", "1", "10", "100", "1,000"]
    assert "leader skew" in texts(plots["leader-skew-ecdf"])  # 1.0 to 1.4: linear
    assert not any("log scale" in t for t in texts(plots["leader-skew-ecdf"]))
    assert "bytes (log scale)" in texts(plots["request-bytes"])  # 20,000 against 150
    # Ten times apart is not skewed, a hundred is; negative values never are.
    assert not svg.skewed([1, 9.9]) and svg.skewed([0, 1, 100]) and not svg.skewed([-1, 1, 1000])


def test_a_histogram_with_one_crowded_bin_gets_a_log_count_axis(spark_local: Any, tmp_path: Path) -> None:
    seeds = range(300)
    rows = [row(s, v, leader_skew_mean=1.0 - (0.1 if v == "b" and s < 2 else 0.0)) for s in seeds for v in "ab"]
    write_report(frame(spark_local, rows), grid(), tmp_path, {})
    (path,) = (tmp_path / "plots").glob("leader-skew-difference*.svg")
    labels = texts(ET.parse(path).getroot())
    assert "runs (log scale)" in labels and "1" in labels and "100" in labels  # 298 runs unchanged, 2 better


def test_one_number_format_everywhere(spark_local: Any, tmp_path: Path) -> None:
    assert [fmt(v) for v in (0, -0.0, 1.5, 2.0, 1.27164, 99.96, 141919.4, 1234567.8, 0.0025, -8.57e-05)] == [
        "0", "0", "1.5", "2", "1.27", "100", "141,919", "1,234,568", "0.0025", "-8.57e-5"]
    assert fmt(213.2, "B", signed=True) == "+213 B" and fmt(-0.5, "s", signed=True) == "-0.5 s"
    assert [duration(s) for s in (0.4, 59.6, 125, 3900)] == ["0 s", "1 min 00 s", "2 min 05 s", "1 h 05 min"]

    skew = [1.27164, 1.1, 1.3, 1.2, 1.25]
    rows = [row(s, v, leader_skew_mean=skew[s], update_metadata_bytes=141_919 + (s if v == "b" else 0),
                time_to_all_led_s=0.0025 * (s + 1), wall_time_s=0.3) for s in SEEDS for v in ("a", "b")]
    tables, plots = report(spark_local, tmp_path, rows)
    metrics = {r[0]: r[1:] for r in tables["Metrics"][1:]}
    values = sorted(skew)
    assert metrics["leader skew: busiest broker / mean (time average)"][0] == " / ".join(
        fmt(v) for v in (statistics.fmean(skew), statistics.median(skew), percentile(values, 95)))
    assert metrics["UpdateMetadata bytes"] == ["141,919 B / 141,919 B / 141,919 B", "141,921 B / 141,921 B / 141,923 B"]
    assert metrics["time until every partition had a leader again (worst fault)"][0] == (
        "0.0075 s / 0.0075 s / 0.0125 s")
    assert tables["Runs"][1] == ["a", "5", "0", "0", "0", "0"]
    cells = by_metric(tables["Seed by seed, against the first variant"], "b")["UpdateMetadata bytes"]
    assert cells["mean difference"] == "+2 B"
    number = re.compile(r"[+-]?(\d{1,3}(,\d{3})*(\.\d+)?|\d(\.\d+)?e-\d+)( [a-zA-Z-]+)?")
    numeric = {"Runs": 1, "Metrics": 1, "Seed by seed, against the first variant": 3}  # the first numeric column
    for title, first in numeric.items():
        for r in tables[title][1:]:
            for part in (p for cell in r[first:] for p in re.split(r" / | to ", cell)):
                assert part == "-" or number.fullmatch(part), (title, r)
    ticks = [t for t in texts(plots["request-bytes"]) if t[:1].isdigit()]
    assert "100,000" in ticks and all(number.fullmatch(t) for t in ticks)
