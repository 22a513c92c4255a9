"""Which Spark master a fleet runs on: ``--master``, else ``KCTL_SPARK_MASTER``, else whatever Spark
itself was configured with (``spark-defaults.conf``, ``spark-submit``), and ``local[*]`` only when
nothing sets one (docs/fleet.md, "On a Spark cluster"). The Spark cases run in a fresh interpreter:
Spark reads its configuration once, when its JVM gateway starts.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kctl.bench.session import MASTER_ENV, resolve_master
from kctl.testing.spark import require_spark


def test_the_flag_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MASTER_ENV, "spark://127.0.0.1:7077")
    assert resolve_master("local[2]") == ("local[2]", True)


def test_the_environment_comes_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MASTER_ENV, "spark://127.0.0.1:7077")
    assert resolve_master(None) == ("spark://127.0.0.1:7077", True)


def resolved_in_a_new_process(conf_dir: Path) -> tuple[str, bool]:
    env = {k: v for k, v in os.environ.items() if k not in (MASTER_ENV, "MASTER", "PYSPARK_SUBMIT_ARGS")}
    env |= {"SPARK_CONF_DIR": str(conf_dir), "SPARK_LOCAL_IP": "127.0.0.1"}
    code = "from kctl.bench.session import resolve_master; print(repr(resolve_master(None)))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    resolved: tuple[str, bool] = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    return resolved


def test_sparks_own_configuration_is_kept(tmp_path: Path) -> None:
    require_spark()
    (tmp_path / "spark-defaults.conf").write_text("spark.master local[3]\n")
    assert resolved_in_a_new_process(tmp_path) == ("local[3]", False)


def test_local_star_only_when_nothing_sets_a_master(tmp_path: Path) -> None:
    require_spark()
    assert resolved_in_a_new_process(tmp_path) == ("local[*]", False)
