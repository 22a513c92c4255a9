"""Spark for tests: a local session, and a real standalone master and workers on loopback ports.

The fleet tests run on Spark itself, never on a stand-in: ``spark_local`` is one ``local[2]``
session shared by the whole test session (a session takes seconds to start), and
``SparkStandalone`` starts ``org.apache.spark.deploy.master.Master`` and any number of
``...worker.Worker`` with the ``spark-class`` of the installed pyspark, on free ports of 127.0.0.1,
waits until the master reports every worker ALIVE, and stops them all by PID.

Every port Spark lets one choose comes from :func:`~kctl.testing.ports.free_ports` (so within
``KCTL_TEST_PORTS`` when set): the master's and each worker's (RPC and web UI; the master's REST
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
from dataclasses import dataclass
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
    """Spark properties that put a driver on ports of :func:`free_ports` (held for the rest of the
    test process): its RPC and block manager, no web UI, and the Python workers on Unix sockets
    instead of loopback ports. A :class:`SparkStandalone` worker gives its executors their block
    manager's port itself: one port in the driver's properties would be every executor's."""
    driver, block_manager = free_ports(2)
    return {
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.port": str(driver),
        "spark.driver.blockManager.port": str(block_manager),
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


@dataclass(frozen=True)
class StandaloneWorker:
    """One worker of a :class:`SparkStandalone`: its ports and the directory it runs executors in
    (one subdirectory per application, one per executor below that, with the executor's logs)."""

    port: int
    ui_port: int
    block_manager_port: int
    """Its executor's block manager (one executor per application, as a worker starts by default)."""
    work_dir: Path
    process: subprocess.Popen[bytes]

    def executor_logs(self, application: str = "app-*") -> str:
        """What this worker's executors of ``application`` (all by default) logged (INFO and up,
        Spark's default level)."""
        return "".join(log.read_text(errors="replace") for log in sorted(self.work_dir.glob(f"{application}/*/stderr")))

    def tasks_started(self, application: str = "app-*") -> int:
        """How many tasks this worker's executors of ``application`` started, from their logs."""
        return self.executor_logs(application).count("Executor: Running task ")


class SparkStandalone:
    """A standalone master and ``workers`` workers of ``cores`` cores each on 127.0.0.1; ``url``
    is the master. :meth:`add_worker` adds one more to a running cluster."""

    def __init__(self, workers: int = 1, cores: int = 2, memory: str = "1g") -> None:
        self.initial_workers, self.cores, self.memory = workers, cores, memory
        self.directory = Path(tempfile.mkdtemp(prefix="kctl-spark-"))
        self.port, self.ui_port = free_ports(2)
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[StandaloneWorker] = []

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def every_executor(self) -> dict[str, str]:
        """Spark properties that make a driver take every core of the cluster and schedule no task
        before all of its executors have registered, so that every worker runs some."""
        return {"spark.cores.max": str(self.cores * len(self.workers)),
                "spark.scheduler.minRegisteredResourcesRatio": "1.0"}

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        """The master's process, then each worker's."""
        return ([self.master] if self.master is not None else []) + [w.process for w in self.workers]

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _spawn(self, name: str, *args: str, conf_dir: Path | None = None) -> subprocess.Popen[bytes]:
        home = spark_home()
        properties = {**NO_PORT_RETRIES, "spark.master.rest.enabled": "false"}  # no REST submission port
        options = " ".join(f"-D{name}={value}" for name, value in properties.items())
        env = os.environ | {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": LOOPBACK, "SPARK_NO_DAEMONIZE": "1",
                            "SPARK_LOG_DIR": str(self.directory), "SPARK_DAEMON_JAVA_OPTS": options}
        if conf_dir is not None:
            env["SPARK_CONF_DIR"] = str(conf_dir)
        with (self.directory / f"{name}.log").open("ab") as log:
            return subprocess.Popen([str(home / "bin" / "spark-class"), *args], cwd=self.directory, env=env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def _spawn_worker(self) -> None:
        """A worker whose executors' block manager binds a port of its own: the JVMs a worker
        launches read the Java options in ``$SPARK_CONF_DIR/java-opts``, and a driver that does
        not set ``spark.blockManager.port`` (:func:`driver_conf`) leaves that one in force."""
        name, (port, ui_port, block_manager_port) = f"worker-{len(self.workers)}", free_ports(3)
        conf_dir, work_dir = self.directory / f"{name}-conf", self.directory / f"{name}-work"
        conf_dir.mkdir()
        (conf_dir / "java-opts").write_text(f"-Dspark.blockManager.port={block_manager_port}\n")
        process = self._spawn(name, "org.apache.spark.deploy.worker.Worker", self.url,
                              "--host", LOOPBACK, "--port", str(port), "--webui-port", str(ui_port),
                              "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work_dir),
                              conf_dir=conf_dir)
        self.workers.append(StandaloneWorker(port, ui_port, block_manager_port, work_dir, process))

    def start(self, timeout: float = 90.0) -> SparkStandalone:
        self.master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                                  "--port", str(self.port), "--webui-port", str(self.ui_port))
        for _ in range(self.initial_workers):
            self._spawn_worker()
        return self._wait(timeout)

    def add_worker(self, timeout: float = 90.0) -> SparkStandalone:
        """Start one more worker (``cores`` cores) and wait until the master has it ALIVE: the
        applications started from then on get its executor too."""
        self._spawn_worker()
        return self._wait(timeout)

    def _wait(self, timeout: float) -> SparkStandalone:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if any(p.poll() is not None for p in self.processes) or time.monotonic() > deadline:
                self.stop(keep_logs=True)
                raise SparkStartError(f"the standalone master and its {len(self.workers)} workers did not come up "
                                      f"within {timeout:.0f}s\n" + self.logs())
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
        """The master ALIVE, and every worker started ALIVE in its status (by the worker's port)."""
        status = self.status()
        alive = {w.get("port") for w in status.get("workers", []) if w.get("state") == "ALIVE"}
        return status.get("status") == "ALIVE" and alive >= {w.port for w in self.workers}

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}:\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
                         for p in sorted(self.directory.glob("*.log")))

    def stop(self, keep_logs: bool = False) -> None:
        """SIGTERM each process group by its leader's PID (``spark-class`` execs the JVM), workers
        first, then SIGKILL."""
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        release_ports([self.port, self.ui_port,
                       *(p for w in self.workers for p in (w.port, w.ui_port, w.block_manager_port))])
        self.master, self.workers = None, []
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
    """A standalone master with two workers of one core each, for one test module."""
    require_spark()
    with SparkStandalone(workers=2, cores=1) as cluster:
        yield cluster


__all__ = ["LOCAL_MASTER", "SparkStandalone", "SparkStartError", "StandaloneWorker", "driver_conf", "require_spark", "spark_home",
           "spark_local", "spark_standalone", "submit_args"]
