"""Spark for tests: a local session, and a real standalone master and worker on loopback ports.

The fleet tests run on Spark itself, never on a stand-in: ``spark_local`` is one ``local[2]``
session shared by the whole test session (a session takes seconds to start), and
``SparkStandalone`` starts ``org.apache.spark.deploy.master.Master`` and ``...worker.Worker`` with
the ``spark-class`` of the installed pyspark, on free ports of 127.0.0.1, waits until the master
reports the worker ALIVE, and stops both by PID.

Every port Spark lets one choose comes from :func:`~kctl.testing.ports.free_ports` (so within
``KCTL_TEST_PORTS`` when set): the master's and the worker's (RPC and web UI; the master's REST
submission server is off), and a driver's with
:func:`driver_conf` (RPC, block managers; no web UI; Python workers on Unix sockets), with
``spark.port.maxRetries=0`` so that a taken port fails the start instead of Spark trying the next
ones, outside the range. The one listener left to the kernel is the Py4J gateway between a
PySpark driver and its JVM, on a loopback port that Spark does not let one choose.

Fixtures (import them into a ``conftest.py``): ``spark_local`` and ``spark_standalone``. Without
pyspark or Java they skip with the install hint, except under ``CI=true`` where they fail: CI must
never pass by skipping the Spark tests.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kctl.testing.ports import LOOPBACK, free_ports, release_ports
from kctl.testing.zookeeper import in_ci

LOCAL_MASTER = "local[2]"
NO_PORT_RETRIES = {"spark.port.maxRetries": "0"}
"""Fail on a taken port rather than bind the next ones, which may lie outside the range."""


class SparkStartError(RuntimeError):
    """The standalone master or worker did not come up; the message ends with their logs."""


def require_spark() -> None:
    """pyspark and Java, or skip the test with the install hint (fail it under ``CI=true``)."""
    from kctl.bench.session import FleetSetupError, require_spark as check

    try:
        check()
        return
    except FleetSetupError as exc:
        reason = str(exc)
    if in_ci():
        pytest.fail(f"CI=true and Spark cannot run: {reason}", pytrace=False)
    pytest.skip(f"Spark cannot run: {reason}")


def driver_conf() -> dict[str, str]:
    """Spark properties that put a driver and its executors on ports of :func:`free_ports` (held
    for the rest of the test process): the driver's RPC and block manager, one block manager port
    for the executors (one executor per machine, as a standalone worker starts by default), no
    web UI, and the Python workers on Unix sockets instead of loopback ports."""
    driver, block_manager, executors = free_ports(3)
    return {
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.port": str(driver),
        "spark.driver.blockManager.port": str(block_manager),
        "spark.blockManager.port": str(executors),
        "spark.ui.enabled": "false",
        "spark.python.unix.domain.socket.enabled": "true",
        **NO_PORT_RETRIES,
    }


def submit_args(conf: Mapping[str, str]) -> str:
    """``PYSPARK_SUBMIT_ARGS`` giving ``conf`` to the PySpark driver of another process."""
    return shlex.join([arg for name, value in conf.items() for arg in ("--conf", f"{name}={value}")] + ["pyspark-shell"])


def spark_home() -> Path:
    """The Spark distribution inside the pyspark package (its ``bin/spark-class`` and jars)."""
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandalone:
    """A standalone master and one worker (``cores`` cores) on 127.0.0.1; ``url`` is the master."""

    def __init__(self, cores: int = 2, memory: str = "1g") -> None:
        self.cores, self.memory = cores, memory
        self.directory = Path(tempfile.mkdtemp(prefix="kctl-spark-"))
        self.port, self.ui_port, self.worker_port, self.worker_ui_port = free_ports(4)
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def work_dir(self) -> Path:
        """Where the worker runs executors (one directory per application)."""
        return self.directory / "work"

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _spawn(self, name: str, *args: str) -> None:
        home = spark_home()
        properties = {**NO_PORT_RETRIES, "spark.master.rest.enabled": "false"}  # no REST submission port
        options = " ".join(f"-D{name}={value}" for name, value in properties.items())
        env = os.environ | {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": LOOPBACK, "SPARK_NO_DAEMONIZE": "1",
                            "SPARK_LOG_DIR": str(self.directory), "SPARK_WORKER_DIR": str(self.work_dir),
                            "SPARK_DAEMON_JAVA_OPTS": options}
        with (self.directory / f"{name}.log").open("ab") as log:
            self.processes.append(subprocess.Popen(
                [str(home / "bin" / "spark-class"), *args], cwd=self.directory, env=env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def start(self, timeout: float = 90.0) -> SparkStandalone:
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        self._spawn("worker", "org.apache.spark.deploy.worker.Worker", self.url, "--host", LOOPBACK,
                    "--port", str(self.worker_port), "--webui-port", str(self.worker_ui_port),
                    "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(self.work_dir))
        deadline = time.monotonic() + timeout
        while not self.ready():
            if any(p.poll() is not None for p in self.processes) or time.monotonic() > deadline:
                self.stop(keep_logs=True)
                raise SparkStartError(f"the standalone master and worker did not come up within {timeout:.0f}s\n"
                                      + self.logs())
            time.sleep(0.25)
        return self

    def status(self) -> dict[str, Any]:
        """The master's JSON status (its web UI's ``/json``), or {} while it cannot answer."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui_port}/json/", timeout=2) as answer:
                return dict(json.load(answer))
        except (OSError, ValueError):
            return {}

    def ready(self) -> bool:
        status = self.status()
        return status.get("status") == "ALIVE" and any(w.get("state") == "ALIVE" for w in status.get("workers", []))

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}:\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
                         for p in sorted(self.directory.glob("*.log")))

    def stop(self, keep_logs: bool = False) -> None:
        """SIGTERM each process group by its leader's PID (``spark-class`` execs the JVM), then SIGKILL."""
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        self.processes.clear()
        release_ports([self.port, self.ui_port, self.worker_port, self.worker_ui_port])
        if not keep_logs:
            shutil.rmtree(self.directory, ignore_errors=True)


# --- pytest fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark_local() -> Iterator[Any]:
    """One ``local[2]`` SparkSession for the whole test session, on 127.0.0.1 and ports of
    :func:`driver_conf`."""
    require_spark()
    from kctl.bench.session import build_session

    os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    spark = build_session(LOCAL_MASTER, True, app_name="kctl tests", conf=driver_conf())
    yield spark
    spark.stop()


@pytest.fixture(scope="module")
def spark_standalone() -> Iterator[SparkStandalone]:
    """A standalone master with one 2-core worker, for one test module."""
    require_spark()
    with SparkStandalone() as cluster:
        yield cluster


__all__ = ["LOCAL_MASTER", "SparkStandalone", "SparkStartError", "driver_conf", "require_spark", "spark_home",
           "spark_local", "spark_standalone", "submit_args"]
