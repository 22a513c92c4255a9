"""The fleet job on a real local Spark (``local[2]``): the dataset's rows, determinism, error rows, outputs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import kctl
from kctl.bench.dataset import COLUMN_TYPES, read_runs
from kctl.bench.grid import load_grid
from kctl.bench.job import Progress, main, run_fleet
from kctl.bench.runner import NONDETERMINISTIC, run_one
from kctl.plugins import PluginHost
from kctl.testing.ports import listening_ports, port_range


IGNORED = (*NONDETERMINISTIC, "run_id")


def comparable(rows: list[dict[str, Any]], *ignored: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in (*IGNORED, *ignored)} for row in rows]


def rows_of(spark: Any, out: Path) -> list[dict[str, Any]]:
    """The dataset under ``out``, seed by seed."""
    return [r.asDict(recursive=True) for r in read_runs(spark, out).orderBy("seed", "variant").collect()]


def test_a_small_grid_on_local_2(spark_local: Any, small_grid: Path, installed_plugins: PluginHost,
                                 tmp_path: Path) -> None:
    grid = load_grid(small_grid, installed_plugins)
    seen: list[Progress] = []
    ticks = iter([1000.0])  # a fake clock: the start, then a minute later for every report
    result = run_fleet(spark_local, grid, tmp_path, seen.append, interval=0.2, clock=lambda: next(ticks, 1060.0))
    runs = len(grid.seeds) * len(grid.variants())
    assert (result.executed, result.skipped, result.errors) == (runs, 0, 0)
    assert seen[-1] == Progress(runs, runs, 0, 0, 60.0)
    assert all(p.elapsed == 60.0 and p.remaining == (None if p.done == 0 else (p.total - p.done) * 60.0 / p.done)
               for p in seen)
    frame = spark_local.read.parquet(str(tmp_path / "runs" / "grid=small" / "variant=least-loaded"))
    assert frame.count() == len(grid.seeds)  # partitioned by grid and variant
    rows = sorted(rows_of(spark_local, tmp_path), key=lambda r: (r["seed"], r["selector"] != "offline"))
    assert [(r["seed"], r["selector"]) for r in rows] == [
        (seed, selector) for seed in grid.seeds for selector in ("offline", "least-loaded")]
    assert {(r["run_id"], r["kctl_version"]) for r in rows} == {(result.run_id, kctl.__version__)}
    # Spark's parallelism changes nothing: the same rows as playing each run here, one by one.
    here = [run_one(grid, seed, v) | {"kctl_version": kctl.__version__} for seed in grid.seeds for v in grid.variants()]
    assert comparable(rows) == comparable(here)


def test_the_same_grid_and_seeds_give_the_same_rows(spark_local: Any, small_grid: Path,
                                                    installed_plugins: PluginHost, tmp_path: Path) -> None:
    grid = load_grid(small_grid, installed_plugins)
    run_fleet(spark_local, grid, tmp_path / "first")
    run_fleet(spark_local, grid, tmp_path / "again", batch_seeds=2)  # other batches and tasks
    first, again = rows_of(spark_local, tmp_path / "first"), rows_of(spark_local, tmp_path / "again")
    key = lambda r: (r["seed"], r["variant"])  # noqa: E731
    assert comparable(sorted(first, key=key)) == comparable(sorted(again, key=key))
    assert len({r["wall_time_s"] for r in first}) > 1  # measured, not copied


def test_a_scenario_raising_in_a_task_is_a_row_and_the_rest_completes(spark_local: Any, small_grid: Path,
                                                                      installed_plugins: PluginHost,
                                                                      tmp_path: Path) -> None:
    grid = load_grid(small_grid, installed_plugins).with_seeds(range(12))
    broken = dataclasses.replace(grid, faults=dataclasses.replace(grid.faults, kinds=("kill_broker", "meteor")))
    seen: list[Progress] = []
    result = run_fleet(spark_local, broken, tmp_path, seen.append)
    rows = rows_of(spark_local, tmp_path)
    failed = [r for r in rows if r["error"] is not None]
    assert len(rows) == 24 and 0 < len(failed) < 24 and seen[-1].errors == result.errors == len(failed)
    assert all("unknown action 'meteor'" in r["error"] for r in failed)
    assert all(r["unavailable_partition_seconds"] is not None for r in rows if r["error"] is None)


def test_main_writes_a_dataset_that_spark_reads_back_and_a_report(spark_local: Any, small_grid: Path,
                                                                   installed_plugins: PluginHost, tmp_path: Path,
                                                                   capsys: Any) -> None:
    out = tmp_path / "out"
    status = main(spark_local, [str(small_grid), "--out", out.as_uri(), "--seeds", "3"])  # a file:// URI
    assert status in (0, 1)  # 1 only for an invariant violation, which the report shows
    captured = capsys.readouterr()
    assert "kctl fleet: 6/6 runs (100%), 0 running, 0 errors" in captured.err
    assert "6 runs in" in captured.out and "leader skew: busiest broker / mean (time average)" in captured.out
    frame = spark_local.read.parquet(str(out / "runs"))
    assert sorted(frame.columns) == sorted(COLUMN_TYPES)
    assert dict(frame.dtypes)["preferred_imbalance"] == "array<bigint>" and frame.count() == 6
    assert sorted(r.seed for r in frame.select("seed").collect()) == [0, 0, 1, 1, 2, 2]
    report = (out / "report.html").read_text()
    assert "<svg" in report and "local[2]" in report and "seeds</th><td>0-2 (3)" in report
    assert not list(out.glob(".*.crc"))  # the driver's files have no checksum files beside them


def test_the_session_listens_only_on_its_configured_ports_and_the_py4j_gateway(spark_local: Any) -> None:
    """Every port the driver's JVM listens on is one kctl.testing.spark.driver_conf chose (within
    KCTL_TEST_PORTS when set), except the Py4J gateway's, which Spark lets nobody choose."""
    context = spark_local.sparkContext
    assert context.parallelize(range(100), 4).map(lambda x: 2 * x).sum() == 9900  # the Python workers ran
    conf = context.getConf()
    configured = {int(conf.get(name)) for name in ("spark.driver.port", "spark.driver.blockManager.port")}
    assert conf.get("spark.ui.enabled") == "false" and conf.get("spark.port.maxRetries") == "0"
    jvm = context._gateway.jvm.ProcessHandle.current().pid()
    assert listening_ports(jvm) == configured | {context._gateway.gateway_parameters.port}
    confined = port_range()
    assert confined is None or configured <= set(confined)
