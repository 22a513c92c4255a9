"""Fleet tests share one local Spark session and, for the cluster test, a standalone master."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.plugins import LOAD_PLUGINS_ENV, PluginHost, get_plugin_host, reset_plugin_host
from kctl.testing.spark import spark_local, spark_standalone

__all__ = ["spark_local", "spark_standalone"]

SMALL_GRID = """
name = "small"
description = "A few seeds of small clusters, for the tests."
seeds = 6
duration = 240
sample_interval = 30

[cluster]
brokers = { between = [4, 6] }
racks = { one_of = [0, 2] }
controllers = 3

[topics]
count = { between = [1, 2] }
partitions = { between = [4, 10] }
replication_factor = { one_of = [2, 3] }

[faults]
count = { between = [1, 3] }
kinds = ["kill_broker", "shutdown_broker", "kill_controller", "fail_log_dir"]
window = 150
downtime = { between = [10, 90] }
max_down = 2

[grid]
selector = ["offline", "least-loaded"]
"""


@pytest.fixture
def small_grid(tmp_path: Path) -> Path:
    path = tmp_path / "small.toml"
    path.write_text(SMALL_GRID)
    return path


@pytest.fixture
def installed_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[PluginHost]:
    """The process-wide plugin host as an executor has it, with kctl-least-loaded's entry point
    loaded (kctl's tests otherwise never load entry points); the usual host again afterwards."""
    monkeypatch.setenv(LOAD_PLUGINS_ENV, "kctl-least-loaded")
    monkeypatch.delattr(sys, "_called_from_test")
    reset_plugin_host()
    yield get_plugin_host()
    reset_plugin_host()
