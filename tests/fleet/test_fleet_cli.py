"""``kctl fleet``: bad input fails before any Spark work; one seed replays alone with ``kctl sim``;
``kctl fleet report`` reports a dataset again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kctl.bench import job
from kctl.bench.grid import load_grid
from kctl.bench.runner import run_one
from kctl.cli import main
from kctl.plugins import PluginHost
from kctl.testing.ports import free_ports
from kctl.testing.spark import driver_conf, submit_args


def test_fleet_is_a_kctl_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "fleet" in capsys.readouterr().out
    assert main(["fleet"]) == 2
    assert "SUBCOMMAND" in capsys.readouterr().err


def test_an_invalid_grid_exits_2_listing_its_problems_and_starts_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grid = tmp_path / "bad.toml"
    grid.write_text('[cluster]\nbrokers = 2\nbrokres = 3\n[topics]\nreplication_factor = 3\n')
    started = time.monotonic()
    assert main(["fleet", "run", str(grid), "--out", str(tmp_path / "out")]) == 2
    assert time.monotonic() - started < 5 and not (tmp_path / "out").exists()
    assert capsys.readouterr().err.splitlines() == [
        f"kctl fleet: {grid} is not a valid grid:",
        f"  {grid}: [cluster]: unknown key 'brokres' (did you mean 'brokers'?); expected brokers, racks, "
        "controllers, config",
        f"  {grid}: [topics] replication_factor: impossible shape: the replication factor can be 3 but the brokers "
        "can be as few as 2",
    ]


@pytest.mark.parametrize(("master", "message"), [
    ("spark://127.0.0.1:{port}", "Spark master spark://127.0.0.1:{port} is unreachable (127.0.0.1:{port}: "
                                 "Connection refused); is the master running? (nothing was started)"),
    ("sc://127.0.0.1:{port}", "master 'sc://127.0.0.1:{port}' is Spark Connect, which has no RDD API"),
    ("mars://x", "unknown Spark master 'mars://x': expected local[N], spark://host:port, yarn or k8s://"),
])
def test_an_unusable_master_fails_before_spark_starts(master: str, message: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    grid = tmp_path / "g.toml"
    grid.write_text("seeds = 2\n")
    (port,) = free_ports(1)  # nothing listens there
    started = time.monotonic()
    assert main(["fleet", "run", str(grid), "--out", str(tmp_path / "out"), "--master", master.format(port=port)]) == 1
    assert time.monotonic() - started < 10 and not (tmp_path / "out").exists()
    assert capsys.readouterr().err.startswith("kctl: error: " + message.format(port=port))


def test_a_seed_replays_alone_with_kctl_sim(small_grid: Path, installed_plugins: PluginHost, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "scenario", str(small_grid), "--seed", "4", "--variant", "1"]) == 0
    scenario = tmp_path / "seed-4.toml"
    scenario.write_text(capsys.readouterr().out)
    main(["sim", str(scenario), "--json", str(tmp_path / "report.json"), "--no-color"])
    capsys.readouterr()
    report = json.loads((tmp_path / "report.json").read_text())
    grid = load_grid(small_grid)
    row = run_one(grid, 4, grid.variants()[1])
    assert report["seed"] == 4 and report["engine"] == row["engine"]
    assert report["unavailable_partition_seconds"] == row["unavailable_partition_seconds"]
    assert report["leader_moves"] == row["leader_moves"] and report["unclean_elections"] == row["unclean_elections"]
    assert main(["fleet", "scenario", str(small_grid), "--seed", "4", "--variant", "2"]) == 2
    assert "--variant must be 0-1: 0: offline; 1: least-loaded" in capsys.readouterr().err


def test_fleet_report_writes_the_report_again_from_the_dataset(spark_local: Any, small_grid: Path,
                                                               installed_plugins: PluginHost, tmp_path: Path) -> None:
    """In a process of its own (its own Spark session), as a user runs it after a fleet."""
    out = tmp_path / "out"
    assert job.main(spark_local, [str(small_grid), "--out", str(out), "--seeds", "2", "--quiet"]) in (0, 1)
    (out / "report.html").unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KCTL_", "PYSPARK_"))}
    env |= {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_SUBMIT_ARGS": submit_args(driver_conf())}
    kctl = [str(Path(sys.executable).with_name("kctl")), "fleet", "report", "--master", "local[1]"]
    done = subprocess.run([*kctl, str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{out.as_uri()}/report.html" in done.stdout.splitlines()
    assert "seeds</th><td>0-1 (2)" in (out / "report.html").read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([*kctl, str(empty)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and f"kctl fleet: {empty.as_uri()}/grid.toml: no such file" in done.stderr
