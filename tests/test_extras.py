"""A missing optional dependency: one ``kctl: error:`` line naming the extra, never a traceback.

Each test runs the ``kctl`` script with a directory first on ``PYTHONPATH`` in which the package
is a stub that fails to import, as it would if it were not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kctl.extras import EXTRAS, MissingDependencyError, install_hint, require

KCTL_SCRIPT = Path(sys.executable).with_name("kctl")
ROOT = Path(__file__).resolve().parents[1]
UNREACHABLE_ZK = "127.0.0.1:1"  # nothing listens there; the dependency check must come first


def run_without(module: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    stubs = tmp_path / "stubs"
    (stubs / module).mkdir(parents=True)
    (stubs / module / "__init__.py").write_text(
        f"raise ModuleNotFoundError({f'No module named {module!r}'!r}, name={module!r})\n"
    )
    path = os.pathsep.join(p for p in (str(stubs), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run([str(KCTL_SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": path}, cwd=tmp_path)


def assert_one_error_line(done: subprocess.CompletedProcess[str], module: str, needed_by: str) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"kctl: error: {needed_by} needs {EXTRAS[module][0]} (No module named {module!r}): {install_hint(module)}"
    ]


@pytest.mark.parametrize("command", [
    ["topics", "list", "--zk", UNREACHABLE_ZK],
    ["controller", "--id", "1", "--zk", UNREACHABLE_ZK],
], ids=["topics", "controller"])
def test_without_kazoo_zookeeper_commands_name_the_zookeeper_extra(command: list[str], tmp_path: Path) -> None:
    assert_one_error_line(run_without("kazoo", tmp_path, *command), "kazoo", "the zookeeper store")


def test_without_pure_sasl_a_sasl_login_names_the_zookeeper_extra(tmp_path: Path) -> None:
    done = run_without("puresasl", tmp_path, "topics", "list", "--zk", UNREACHABLE_ZK, "--zk-sasl", "admin:secret")
    assert_one_error_line(done, "puresasl", "SASL to ZooKeeper")


@pytest.mark.parametrize("role", ["controller", "broker"])
def test_without_msgpack_a_process_refuses_to_start_naming_the_tcp_extra(role: str, tmp_path: Path) -> None:
    done = run_without("msgpack", tmp_path, role, "--id", "1", "--zk", UNREACHABLE_ZK)
    assert_one_error_line(done, "msgpack", "kctl's network messages")


@pytest.mark.parametrize("module", ["pyspark", "pyarrow"])
def test_without_spark_or_arrow_a_fleet_names_the_fleet_extra(module: str, tmp_path: Path) -> None:
    done = run_without(module, tmp_path, "fleet", "run", str(ROOT / "examples" / "fleet-selectors.toml"),
                       "--out", str(tmp_path / "out"), "--master", "local[1]")
    assert_one_error_line(done, module, "kctl fleet")


def test_the_error_is_an_import_error_too() -> None:
    """Code that guards an optional import with ``except ImportError`` keeps working."""
    with pytest.raises(ImportError) as raised:
        require("msgpack.no_such_module", "a test")
    assert isinstance(raised.value, MissingDependencyError)
    assert str(raised.value).endswith(": pip install 'kctl[tcp]'")
