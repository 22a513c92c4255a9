"""``kctl fleet run`` against a real Spark standalone master and worker on 127.0.0.1.

The executors are separate JVMs started by the worker; they run the tasks with the packed
virtualenv that ``kctl fleet run`` ships through ``spark.archives``, so kctl and the
kctl-least-loaded plugin reach them as files, not through this process's ``sys.path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kctl.bench.environment import ARCHIVE_ALIAS, CACHE_ENV
from kctl.testing.ports import listening_ports
from kctl.testing.spark import SparkStandalone, driver_conf, submit_args

KCTL = Path(sys.executable).with_name("kctl")

pytestmark = pytest.mark.spark_standalone


def test_a_grid_on_a_standalone_cluster_runs_in_the_packed_environment(spark_standalone: SparkStandalone,
                                                                       small_grid: Path, tmp_path: Path) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KCTL_", "PYSPARK_"))}
    env |= {CACHE_ENV: str(cache), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_SUBMIT_ARGS": submit_args(driver_conf())}
    done = subprocess.run([str(KCTL), "fleet", "run", str(small_grid), "--out", str(out), "--seeds", "4",
                           "--master", spark_standalone.url], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: a run violated an invariant (shown in the report)
    assert "kctl fleet: 8/8 runs (100%), 0 running, 0 errors" in done.stderr
    assert "8 runs in" in done.stdout and spark_standalone.url in done.stdout
    rows = pq.read_table(out / "runs").to_pylist()  # the executors' files, partitioned by grid and variant
    assert sorted((r["seed"], r["selector"], r["error"]) for r in rows) == sorted(
        (seed, selector, None) for seed in range(4) for selector in ("offline", "least-loaded"))
    (archive,) = cache.glob("kctl-environment-*.tar.gz")
    unpacked = sorted(spark_standalone.work_dir.glob(f"app-*/*/{ARCHIVE_ALIAS}/lib/python3*/site-packages"))
    assert unpacked, f"no executor unpacked {archive.name}"
    for site in unpacked:
        assert next(site.glob("kctl/_engine*.so")) and (site / "kctl_least_loaded.py").is_file()
        assert not list(site.glob("*.pth")), "an editable install leaked into the archive"
        assert not (site / "pyspark").exists()  # executors use their Spark's own


def test_the_master_and_the_worker_listen_only_on_their_ports(spark_standalone: SparkStandalone) -> None:
    """RPC and web UI each, all from kctl.testing.ports (within KCTL_TEST_PORTS when set); no REST server."""
    master, worker = spark_standalone.processes
    assert listening_ports(master.pid) == {spark_standalone.port, spark_standalone.ui_port}
    assert listening_ports(worker.pid) == {spark_standalone.worker_port, spark_standalone.worker_ui_port}
