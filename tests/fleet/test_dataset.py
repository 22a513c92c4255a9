"""The fleet's dataset on a real local Spark: resuming and extending a grid plays only the missing
(seed, variant) pairs, a dataset written by several runs reports as one, every row is checked
against the schema."""

from __future__ import annotations

import dataclasses
import re
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

from kctl.bench.dataset import COLUMN_TYPES, RowSchemaError, read_runs, record, schema
from kctl.bench.grid import Grid, load_grid
from kctl.bench.job import report, run_fleet
from kctl.bench.queries import distributions, ecdf
from kctl.bench.stats import percentile
from kctl.plugins import PluginHost


def pairs(spark: Any, out: Path) -> dict[tuple[int, str], str]:
    """(seed, variant) → the run id that wrote it; a pair written twice fails the test."""
    rows = read_runs(spark, out).select("seed", "variant", "run_id").collect()
    raw = spark.read.schema(schema()).parquet(str(out / "runs")).count()
    assert raw == len(rows), "a pair was written twice"
    return {(r["seed"], r["variant"]): r["run_id"] for r in rows}


def only_selector(grid: Grid, selector: str) -> Grid:
    return dataclasses.replace(grid, axes={"selector": (selector,)})


def test_rerunning_a_grid_with_more_seeds_plays_only_the_new_ones(spark_local: Any, small_grid: Path,
                                                                  installed_plugins: PluginHost,
                                                                  tmp_path: Path) -> None:
    grid = load_grid(small_grid, installed_plugins)
    first = run_fleet(spark_local, grid.with_seeds(range(4)), tmp_path, batch_seeds=3)
    assert (first.executed, first.skipped) == (8, 0)
    again = run_fleet(spark_local, grid.with_seeds(range(4)), tmp_path)
    assert (again.executed, again.skipped) == (0, 8)  # nothing missing: nothing played
    # batch 1 (seeds 3-5) has seed 3 done, batch 2 (seed 6) none: an anti-join, then pairs made by the tasks
    extended = run_fleet(spark_local, grid.with_seeds(range(7)), tmp_path, batch_seeds=3)
    assert (extended.executed, extended.skipped, extended.errors) == (6, 8, 0)
    written = pairs(spark_local, tmp_path)
    labels = [v.label for v in grid.variants()]
    assert sorted(written) == sorted((s, v) for s in range(7) for v in labels)
    assert {written[s, v] for s in range(4) for v in labels} == {first.run_id}
    assert {written[s, v] for s in range(4, 7) for v in labels} == {extended.run_id}


def test_a_grid_extended_with_a_variant_plays_only_that_variant(spark_local: Any, small_grid: Path,
                                                                installed_plugins: PluginHost,
                                                                tmp_path: Path) -> None:
    grid = load_grid(small_grid, installed_plugins).with_seeds(range(3))
    first = run_fleet(spark_local, only_selector(grid, "offline"), tmp_path)
    both = run_fleet(spark_local, grid, tmp_path)
    assert (first.executed, both.executed, both.skipped) == (3, 3, 3)
    written = pairs(spark_local, tmp_path)
    assert {written[s, "least-loaded"] for s in range(3)} == {both.run_id}
    assert {written[s, "offline"] for s in range(3)} == {first.run_id}


def test_a_dataset_from_two_runs_reports_as_one_run_of_all_its_seeds(spark_local: Any, small_grid: Path,
                                                                      installed_plugins: PluginHost,
                                                                      tmp_path: Path, capsys: Any) -> None:
    grid = load_grid(small_grid, installed_plugins)
    run_fleet(spark_local, grid.with_seeds(range(3)), tmp_path / "two")
    run_fleet(spark_local, grid, tmp_path / "two")
    run_fleet(spark_local, grid, tmp_path / "one")
    for out in ("two", "one"):
        report(spark_local, grid, tmp_path / out, {})
    capsys.readouterr()
    summary, one = ((tmp_path / out / "summary.md").read_text() for out in ("two", "one"))
    machine = "wall time of a run"  # the one metric that is the machine's, not the runs'
    assert [line for line in summary.splitlines() if machine not in line] == [
        line for line in one.splitlines() if machine not in line]
    assert "| `least-loaded` | 6 |" in summary  # every seed of both runs, once
    plots = sorted(p.name for p in (tmp_path / "two" / "plots").glob("*.svg"))
    for name in plots:
        if "wall" not in name:
            assert (tmp_path / "two" / "plots" / name).read_text() == (tmp_path / "one" / "plots" / name).read_text()
    assert "fleet runs</th><td>2 (kctl " in (tmp_path / "two" / "report.html").read_text()


def good_row() -> dict[str, Any]:
    return dict.fromkeys(COLUMN_TYPES) | {"grid": "g", "seed": 1, "variant": "v", "selector": "offline",
                                          "engine": "rust", "run_id": "r", "kctl_version": "0",
                                          "sample_times": [0, 1.5], "leader_skew": [1.0, 1.2]}


@pytest.mark.parametrize(("change", "message"), [
    ({"seed": "1"}, "column 'seed' is bigint, not str '1'"),
    ({"leader_skew": [1.0, "x"]}, "column 'leader_skew' is array<double>, not list"),
    ({"unclean_elections": True}, "column 'unclean_elections' is bigint, not bool True"),
    ({"variant": None}, "column 'variant' (string) is null"),
    ({"leader_skw": 1.0}, "unknown column 'leader_skw'"),
])
def test_the_schema_check_names_the_column_of_a_bad_row(change: dict[str, Any], message: str) -> None:
    assert record(good_row())[list(COLUMN_TYPES).index("sample_times")] == [0.0, 1.5]  # ints widened
    bad = good_row() | change
    where = f"row of seed {bad['seed']!r}, variant {bad['variant']!r}: "
    with pytest.raises(RowSchemaError, match=re.escape(where + message)):
        record(bad)
    missing = good_row()
    del missing["run_id"]
    with pytest.raises(RowSchemaError, match="column 'run_id' is missing"):
        record(missing)


def test_a_bad_row_on_an_executor_fails_the_write_naming_the_column(spark_local: Any, tmp_path: Path) -> None:
    rows = spark_local.sparkContext.parallelize([good_row(), good_row() | {"rf": 3.5}], 2).map(record)
    with pytest.raises(Exception, match="column 'rf' is bigint, not float 3.5"):
        spark_local.createDataFrame(rows, schema(), verifySchema=False).write.parquet(str(tmp_path / "runs"))
    assert not list((tmp_path / "runs").glob("*.parquet"))


def test_spark_aggregates_match_the_statistics_definitions(spark_local: Any) -> None:
    rng = random.Random(7)
    rows = [good_row() | {"seed": s, "variant": f"v{n}", "leader_moves": rng.randrange(50),
                          "leader_skew_mean": rng.random()}
            for n in (1, 2, 5, 19, 20, 21, 40, 100) for s in range(n)]
    frame = spark_local.createDataFrame([record(r) for r in rows], schema())
    found = distributions(frame, ["leader_moves", "leader_skew_mean"])
    for n in (1, 2, 5, 19, 20, 21, 40, 100):
        for column in ("leader_moves", "leader_skew_mean"):
            values = [float(r[column]) for r in rows if r["variant"] == f"v{n}"]
            mean, median, p95 = found[column, f"v{n}"]
            assert mean == pytest.approx(statistics.fmean(values))
            assert (median, p95) == (statistics.median(values), percentile(values, 95)), (n, column)
    curve = ecdf(frame, "leader_skew_mean", points=10)["v100"]
    values = sorted(r["leader_skew_mean"] for r in rows if r["variant"] == "v100")
    assert curve == ([values[k * 10 - 1] for k in range(1, 11)], [k / 10 for k in range(1, 11)])
    exact = ecdf(frame, "leader_moves")["v5"]
    moves = sorted(r["leader_moves"] for r in rows if r["variant"] == "v5")
    assert exact == (sorted(set(map(float, moves))), [sum(m <= x for m in moves) / 5 for x in sorted(set(moves))])
