"""Which Spark master a fleet runs on: ``--master``, else ``KCTL_SPARK_MASTER``, else whatever Spark
itself was configured with (``spark-defaults.conf``, ``spark-submit``), and ``local[*]`` only when
nothing sets one (docs/fleet.md, "On a Spark cluster"); and the session's JVMs compile with C1 only,
before any Java options given. The Spark configuration cases run in a fresh interpreter: Spark
reads its configuration once, when its JVM gateway starts.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kctl.bench.session import JIT_OPTIONS, MASTER_ENV, jit_options, resolve_master
from kctl.testing.spark import require_spark


def test_the_flag_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MASTER_ENV, "spark://127.0.0.1:7077")
    assert resolve_master("local[2]") == ("local[2]", True)


def test_the_environment_comes_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MASTER_ENV, "spark://127.0.0.1:7077")
    assert resolve_master(None) == ("spark://127.0.0.1:7077", True)


def in_a_new_process(conf_dir: Path, code: str) -> Any:
    """What ``code`` prints last, evaluated, run with Spark's configuration in ``conf_dir``."""
    env = {k: v for k, v in os.environ.items() if k not in (MASTER_ENV, "MASTER", "PYSPARK_SUBMIT_ARGS")}
    env |= {"SPARK_CONF_DIR": str(conf_dir), "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def resolved_in_a_new_process(conf_dir: Path) -> tuple[str, bool]:
    resolved: tuple[str, bool] = in_a_new_process(
        conf_dir, "from kctl.bench.session import resolve_master; print(repr(resolve_master(None)))")
    return resolved


def test_sparks_own_configuration_is_kept(tmp_path: Path) -> None:
    require_spark()
    (tmp_path / "spark-defaults.conf").write_text("spark.master local[3]\n")
    assert resolved_in_a_new_process(tmp_path) == ("local[3]", False)


def test_local_star_only_when_nothing_sets_a_master(tmp_path: Path) -> None:
    require_spark()
    assert resolved_in_a_new_process(tmp_path) == ("local[*]", False)


def test_the_jit_options_come_before_those_given() -> None:
    given = jit_options({"spark.executor.defaultJavaOptions": "-XX:TieredStopAtLevel=4 -Dx=1"})
    assert given["spark.executor.defaultJavaOptions"] == f"{JIT_OPTIONS} -XX:TieredStopAtLevel=4 -Dx=1"
    assert JIT_OPTIONS in given["spark.driver.defaultJavaOptions"].split()
    assert jit_options(given) == given  # not twice


def test_the_jit_options_come_before_sparks_own_configuration(tmp_path: Path) -> None:
    require_spark()
    (tmp_path / "spark-defaults.conf").write_text("spark.executor.defaultJavaOptions -Dkctl.admin=1\n")
    code = ("from pyspark import SparkContext; SparkContext._ensure_initialized(); "
            "from kctl.bench.session import jit_options; print(repr(jit_options({})))")
    assert in_a_new_process(tmp_path, code) == {"spark.driver.defaultJavaOptions": JIT_OPTIONS,
                                                "spark.executor.defaultJavaOptions": f"{JIT_OPTIONS} -Dkctl.admin=1"}


@pytest.mark.parametrize("line", ["spark.driver.defaultJavaOptions -Dkctl.admin=1 -Da=b",
                                  "spark.driver.defaultJavaOptions=-Dkctl.admin=1 -Da=b",
                                  "  spark.driver.defaultJavaOptions :  -Dkctl.admin=1 -Da=b  "])
def test_with_a_master_given_the_configured_options_are_kept(tmp_path: Path, line: str) -> None:
    """``--master`` given: Spark's JVM has not read spark-defaults.conf yet, so kctl reads it rather
    than replacing the configured options with its own."""
    (tmp_path / "spark-defaults.conf").write_text(f"# the team's options\n{line}\n")
    code = "from kctl.bench.session import jit_options; print(repr(jit_options({})))"
    assert in_a_new_process(tmp_path, code) == {"spark.driver.defaultJavaOptions": f"{JIT_OPTIONS} -Dkctl.admin=1 -Da=b",
                                                "spark.executor.defaultJavaOptions": JIT_OPTIONS}


def test_the_drivers_jvm_compiles_with_c1_only(spark_local: Any) -> None:
    jvm = spark_local.sparkContext._jvm
    assert JIT_OPTIONS in list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
