"""``kctl fleet run`` against a real Spark standalone master and two workers on 127.0.0.1.

The executors are separate JVMs started by the workers; they run the tasks with the packed
virtualenv that ``kctl fleet run`` ships through ``spark.archives``, so kctl and the
kctl-least-loaded plugin reach them as files, not through this process's ``sys.path``. The
driver waits until both workers' executors have registered before it schedules a task, so that
both run tasks of the fleet, whatever the order they came up in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kctl.bench.environment import ARCHIVE_ALIAS, CACHE_ENV
from kctl.bench.job import main
from kctl.bench.session import JIT_OPTIONS
from kctl.bench.report import METRICS
from kctl.plugins import PluginHost
from kctl.testing.ports import listening_ports
from kctl.testing.spark import SparkStandalone, driver_conf, submit_args

from test_local import comparable, rows_of

KCTL = Path(sys.executable).with_name("kctl")
SEEDS = 4

pytestmark = pytest.mark.spark_standalone


def report_files(out: Path) -> dict[str, str]:
    """The report's files that depend only on the runs: the plots, and the tables but for the
    wall time of a run (this machine's, not the variant's)."""
    wall_time = METRICS[-1].label
    files = {p.relative_to(out).as_posix(): p.read_text() for p in sorted((out / "plots").glob("*.svg"))}
    summary = (out / "summary.md").read_text().splitlines()
    files["summary.md"] = "\n".join(line for line in summary if wall_time not in line)
    return files


def test_a_grid_on_two_workers_runs_in_the_packed_environment_as_it_runs_locally(
        spark_standalone: SparkStandalone, spark_local: Any, small_grid: Path, installed_plugins: PluginHost,
        tmp_path: Path) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KCTL_", "PYSPARK_"))}
    env |= {CACHE_ENV: str(cache), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_SUBMIT_ARGS": submit_args(driver_conf() | spark_standalone.every_executor())}
    done = subprocess.run([str(KCTL), "fleet", "run", str(small_grid), "--out", str(out), "--seeds", str(SEEDS),
                           "--master", spark_standalone.url], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: a run violated an invariant (shown in the report)
    assert "kctl fleet: 8/8 runs (100%), 0 running, 0 errors" in done.stderr
    assert "8 runs in" in done.stdout and spark_standalone.url in done.stdout
    rows = rows_of(spark_local, out)  # the executors' files, partitioned by grid and variant
    assert sorted((r["seed"], r["selector"], r["error"]) for r in rows) == sorted(
        (seed, selector, None) for seed in range(SEEDS) for selector in ("offline", "least-loaded"))
    (archive,) = cache.glob("kctl-environment-*.tar.gz")
    for worker in spark_standalone.workers:
        assert worker.tasks_started() > 0, f"the worker on port {worker.port} ran no task"
        assert f"'org.apache.spark.network.netty.NettyBlockTransferService' on port {worker.block_manager_port}." \
            in worker.executor_logs()  # its executor's block manager on the port the worker was given
        commands = [line for line in worker.executor_logs().splitlines() if line.startswith("Spark Executor Command:")]
        assert commands and all(JIT_OPTIONS in command.split('" "') for command in commands)  # C1 only
        unpacked = sorted(worker.work_dir.glob(f"app-*/*/{ARCHIVE_ALIAS}/lib/python3*/site-packages"))
        assert unpacked, f"no executor of the worker on port {worker.port} unpacked {archive.name}"
        for site in unpacked:
            assert next(site.glob("kctl/_engine*.so")) and (site / "kctl_least_loaded.py").is_file()
            assert not list(site.glob("*.pth")), "an editable install leaked into the archive"
            assert not (site / "pyspark").exists()  # executors use their Spark's own
    # The same grid and seeds on local[2], in this process: the same rows and the same report.
    here = tmp_path / "local"
    assert main(spark_local, [str(small_grid), "--out", str(here), "--seeds", str(SEEDS)]) == done.returncode
    assert comparable(rows_of(spark_local, here)) == comparable(rows)
    assert report_files(here) == report_files(out) and len(report_files(out)) > 1


def test_the_master_and_the_workers_listen_only_on_their_ports(spark_standalone: SparkStandalone) -> None:
    """RPC and web UI each, all from kctl.testing.ports (within KCTL_TEST_PORTS when set); no REST server."""
    assert spark_standalone.master is not None and len(spark_standalone.workers) == 2
    assert listening_ports(spark_standalone.master.pid) == {spark_standalone.port, spark_standalone.ui_port}
    for worker in spark_standalone.workers:
        assert listening_ports(worker.process.pid) == {worker.port, worker.ui_port}
