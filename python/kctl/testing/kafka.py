"""Real Apache Kafka brokers (3.9, ZooKeeper mode) for tests that compare kctl with the real thing.

kctl claims the behaviour of Kafka's ZooKeeper-mode controller; the differential tests
(``tests/kafka``) check the claim by playing a scenario on real brokers and on kctl's processes
against one ZooKeeper server, in separate chroots. This module runs the real brokers: Kafka 3.9.1
(the last line with ZooKeeper mode), its jars fetched from Maven Central into
``~/.cache/kctl/kafka-3.9.1`` (:mod:`kctl.testing.maven`; ``scripts/test`` and
``scripts/fetch-jars --kafka`` fetch them first; ``KCTL_KAFKA_LIBS`` names a directory of jars to use
instead, such as a distribution's ``libs/``).

Each broker is ``kafka.Kafka server.properties`` on a free loopback port (:mod:`kctl.testing.ports`,
so within ``KCTL_TEST_PORTS`` when set), with its own ``log.dirs`` and Kafka's log files
(``server.log``, ``controller.log`` at TRACE, ``state-change.log``) in its directory, settings small
enough for three brokers on two cores, and a chroot of its cluster's own. A cluster is up once every
broker has registered in ``/brokers/ids`` and a controller has been elected.

Fixtures (import them into a ``conftest.py`` next to ``zookeeper_server``):

- ``kafka_installation``: Java and Kafka's classpath (skips with the hint, fails under ``CI=true``);
- ``kafka_cluster``: three brokers on the session's ZooKeeper server, shared by a test module.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kctl.testing import maven
from kctl.testing.jvm import JavaProcess, tail
from kctl.testing.ports import LOOPBACK, free_ports, release_ports
from kctl.testing.zookeeper import JAVA_ENV, ZooKeeperEnsemble, in_ci

KAFKA = "kafka-3.9.1"
"""The release, as its directory in the cache is named (its coordinates: ``maven.PROGRAMS[KAFKA]``)."""
KAFKA_TOOLS = "kafka-tools-3.9.1"
"""Its command-line tools (``kafka-reassign-partitions`` …), fetched apart: the brokers do not need them."""
LIBS_ENV = "KCTL_KAFKA_LIBS"
"""A directory of Kafka's jars (a distribution's ``libs/``), used instead of the fetched ones."""
MAIN_CLASS = "kafka.Kafka"
JVM_OPTIONS = ("-Xms128m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
               "-Djava.net.preferIPv4Stack=true")
"""A small heap and a quick start: the C1 compiler only and one GC thread, for brokers that live
for a test module on a busy two-core machine."""
SHIPPED_JVM_OPTIONS = ("-Xms1g", "-Xmx1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                       "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                       "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true")
"""What Kafka's own ``kafka-server-start.sh`` runs a broker with (its default heap and
``KAFKA_JVM_PERFORMANCE_OPTS``): both JIT compilers, for measuring Kafka as it ships."""
START_TIMEOUT = 180.0
"""Seconds for brokers to register: a JVM start of Kafka takes 10–30 s on a loaded machine."""
STOP_TIMEOUT = 45.0
"""Seconds a broker gets for its controlled shutdown after SIGTERM before it is killed."""

LOG4J = """\
log4j.rootLogger=INFO, server
log4j.logger.kafka.controller=TRACE, controller
log4j.additivity.kafka.controller=false
log4j.logger.state.change.logger=TRACE, stateChange
log4j.additivity.state.change.logger=false
log4j.logger.org.apache.zookeeper=WARN
"""
"""Kafka's own logger layout: the controller's and the state-change loggers each to their own file."""
INTER_BROKER_LISTENER = "INTERNAL"
"""The inter-broker-only listener of a cluster started with ``inter_broker_listener=True``: the one
a kctl controller of the brokers registers its entry on, which clients (on PLAINTEXT) never see."""
APPENDERS = {"server": "server.log", "controller": "controller.log", "stateChange": "state-change.log"}


def properties(
    broker_id: int, port: int, zk_connect: str, data: Path, brokers: int, rack: str | None = None,
    overrides: Mapping[str, object] | None = None, inter_broker_port: int | None = None,
) -> dict[str, str]:
    """A broker's ``server.properties``: small thread pools and segments, topics only when asked
    for, internal topics replicated over at most the cluster's brokers, then ``overrides``. With an
    ``inter_broker_port``, brokers talk to each other (and to their controller) on a listener of
    their own, :data:`INTER_BROKER_LISTENER`, and clients on PLAINTEXT."""
    listeners = f"PLAINTEXT://{LOOPBACK}:{port}"
    internal: dict[str, object] = {}
    if inter_broker_port is not None:
        listeners += f",{INTER_BROKER_LISTENER}://{LOOPBACK}:{inter_broker_port}"
        internal = {"listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{INTER_BROKER_LISTENER}:PLAINTEXT",
                    "inter.broker.listener.name": INTER_BROKER_LISTENER}
    config: dict[str, object] = {
        "broker.id": broker_id,
        "listeners": listeners,
        **internal,
        "log.dirs": data,
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": 6000,
        "zookeeper.connection.timeout.ms": 30000,
        "num.network.threads": 1,
        "num.io.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "background.threads": 2,
        "log.segment.bytes": 1048576,
        "log.cleaner.enable": "false",
        "offsets.topic.replication.factor": min(3, brokers),
        "offsets.topic.num.partitions": 3,
        "transaction.state.log.replication.factor": min(3, brokers),
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "false",
        "auto.leader.rebalance.enable": "false",  # no leader moves a test did not ask for
        "controlled.shutdown.enable": "true",
        "controlled.shutdown.retry.backoff.ms": 200,  # as kctl's process tests set it
    }
    if rack is not None:
        config["broker.rack"] = rack
    config.update(overrides or {})
    return {name: str(value) for name, value in config.items()}


class KafkaNotInstalledError(RuntimeError):
    """Java or Kafka's jars cannot be found; the message says how to get them."""


class KafkaStartError(RuntimeError):
    """Brokers did not come up; the message ends with the tail of their logs."""


@dataclass(frozen=True)
class KafkaInstallation:
    """The Java runtime and Kafka's classpath."""

    java: str
    classpath: str

    @classmethod
    def find(cls) -> KafkaInstallation:
        """``KCTL_KAFKA_LIBS``, else the jars in the cache, fetched now (with ``mvn``) if missing."""
        java = shutil.which(os.environ.get(JAVA_ENV) or "java")
        if not java:
            raise KafkaNotInstalledError(f"no java executable on PATH (or at {JAVA_ENV}); install: apt-get install "
                                         "openjdk-17-jre-headless (scripts/test installs it)")
        libs = os.environ.get(LIBS_ENV)
        if libs:
            if not any(Path(libs).glob("kafka_*.jar")):
                raise KafkaNotInstalledError(f"{LIBS_ENV}={libs!r} holds no kafka_*.jar")
            return cls(java, maven.classpath(Path(libs)))
        try:
            directory = maven.fetch_jars(maven.PROGRAMS[KAFKA], maven.cached(KAFKA))
        except maven.FetchError as exc:
            raise KafkaNotInstalledError(f"{KAFKA} could not be fetched ({exc}); run scripts/fetch-jars --kafka") from None
        return cls(java, maven.classpath(directory))


class KafkaBroker(JavaProcess):
    """One ``kafka.Kafka`` process; its directory (config, data, logs) outlives it, so ``start()``
    after ``stop()`` or ``kill()`` is a restart of the same broker with its logs."""

    def __init__(self, installation: KafkaInstallation, directory: Path, config: Mapping[str, str],
                 jvm_options: Sequence[str] = JVM_OPTIONS) -> None:
        self.installation = installation
        self.directory = directory
        self.config = dict(config)
        self.jvm_options = tuple(jvm_options)
        self.broker_id = int(self.config["broker.id"])
        super().__init__()

    def __repr__(self) -> str:
        return f"KafkaBroker({self.broker_id}, {self.config['listeners']}, pid={self.pid})"

    @property
    def logs_dir(self) -> Path:
        """Where ``server.log``, ``controller.log`` and ``state-change.log`` are."""
        return self.directory / "logs"

    def start(self) -> None:
        if self.running:
            return
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        config = self.directory / "server.properties"
        config.write_text("".join(f"{name}={value}\n" for name, value in self.config.items()))
        log4j = self.directory / "log4j.properties"
        log4j.write_text(LOG4J + "".join(_appender(name, file) for name, file in APPENDERS.items()))
        command = [
            self.installation.java, *self.jvm_options, f"-Dkafka.logs.dir={self.logs_dir}",
            f"-Dlog4j.configuration=file:{log4j}", "-cp", self.installation.classpath, MAIN_CLASS, str(config),
        ]
        self.launch(command, self.directory, self.logs_dir / "stdout.log")

    def log_tail(self, name: str = "server.log", lines: int = 30) -> str:
        return tail(self.logs_dir / name, lines)


def _appender(name: str, file: str) -> str:
    prefix = f"log4j.appender.{name}"
    return (f"{prefix}=org.apache.log4j.FileAppender\n{prefix}.File=${{kafka.logs.dir}}/{file}\n"
            f"{prefix}.layout=org.apache.log4j.PatternLayout\n{prefix}.layout.ConversionPattern=[%d] %p %m (%c)%n\n")


class KafkaCluster:
    """``size`` Kafka brokers (ids ``first_id``, ``first_id`` + 1 …; 1..size by default) in the
    chroot ``chroot`` of the ZooKeeper ``hosts``.

    Use as a context manager, or ``start()`` / ``stop()``. ``racks`` gives a ``broker.rack`` per
    broker id, ``overrides`` more broker properties (``broker_overrides`` more for some broker ids
    alone, such as a shorter session for the broker a test kills), ``jvm_options`` the JVM's
    (:data:`JVM_OPTIONS`; :data:`SHIPPED_JVM_OPTIONS` for Kafka as it ships). ``kill(id)``, ``stop_broker(id)`` and
    ``restart(id)`` act on one broker; ``zk`` is the connect string of the cluster's chroot.
    """

    def __init__(
        self,
        hosts: str,
        size: int = 3,
        *,
        chroot: str | None = None,
        installation: KafkaInstallation | None = None,
        racks: Mapping[int, str] | None = None,
        overrides: Mapping[str, object] | None = None,
        first_id: int = 1,
        inter_broker_listener: bool = False,
        jvm_options: Sequence[str] = JVM_OPTIONS,
        broker_overrides: Mapping[int, Mapping[str, object]] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one broker, not {size}")
        self.jvm_options = tuple(jvm_options)
        self.hosts = hosts
        self.size = size
        self.first_id = first_id
        self.chroot = chroot or f"/kafka-{uuid.uuid4().hex}"
        self.installation = installation if installation is not None else KafkaInstallation.find()
        self._racks = dict(racks or {})
        self._overrides = dict(overrides or {})
        self._broker_overrides = {broker_id: dict(found) for broker_id, found in (broker_overrides or {}).items()}
        self._inter_broker_listener = inter_broker_listener
        self._directory: Path | None = None
        self._ports: list[int] = []
        self.brokers: dict[int, KafkaBroker] = {}

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def zk(self) -> str:
        """Kafka's ``zookeeper.connect`` for this cluster: the hosts and the chroot."""
        return self.hosts + self.chroot

    def start(self, timeout: float = START_TIMEOUT) -> KafkaCluster:
        """Start every broker at once and wait until each has registered and a controller is elected."""
        self._directory = Path(tempfile.mkdtemp(prefix="kctl-kafka-"))
        atexit.register(self.stop)
        self._ports = free_ports(self.size * (2 if self._inter_broker_listener else 1))
        internal = self._ports[self.size:] if self._inter_broker_listener else [None] * self.size
        for broker_id, port, internal_port in zip(range(self.first_id, self.first_id + self.size), self._ports, internal):
            directory = self._directory / f"broker-{broker_id}"
            config = properties(broker_id, port, self.zk, directory / "data", self.size, self._racks.get(broker_id),
                                {**self._overrides, **self._broker_overrides.get(broker_id, {})}, internal_port)
            self.brokers[broker_id] = KafkaBroker(self.installation, directory, config, self.jvm_options)
        for broker in self.brokers.values():
            broker.start()
        try:
            self.wait_registered(self.brokers, timeout)
        except KafkaStartError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every broker (SIGTERM at once, SIGKILL for those still up after the timeout), give
        their ports back and remove their directories."""
        for broker in self.brokers.values():
            broker.signal(signal.SIGTERM)
        with ThreadPoolExecutor(max(1, len(self.brokers))) as pool:
            list(pool.map(lambda broker: broker.wait(STOP_TIMEOUT), self.brokers.values()))
        release_ports(self._ports)
        self._ports = []
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
        atexit.unregister(self.stop)

    def kill(self, broker_id: int) -> None:
        """kill -9 one broker (it stays registered until its ZooKeeper session expires)."""
        self.brokers[broker_id].kill()

    def stop_broker(self, broker_id: int, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM one broker: a controlled shutdown."""
        self.brokers[broker_id].stop(timeout)

    def restart(self, broker_id: int, timeout: float = START_TIMEOUT) -> None:
        """Start a stopped or killed broker again (same port, data and logs) and wait until it is
        registered. Kafka refuses to start while its old registration lives on (a killed broker's
        session has not expired yet), so this waits for that first, as an operator would."""
        broker = self.brokers[broker_id]
        path = f"{self.chroot}/brokers/ids/{broker_id}"
        deadline = time.monotonic() + timeout
        with _zookeeper(self.hosts) as zk:
            while zk.exists(path) is not None:
                if time.monotonic() > deadline:
                    self._fail(f"{path} outlived broker {broker_id} for {timeout:.0f}s")
                time.sleep(0.2)
        broker.start()
        self.wait_registered({broker_id: broker}, deadline - time.monotonic())

    def wait_registered(self, brokers: Mapping[int, KafkaBroker], timeout: float) -> None:
        """Wait until every one of ``brokers`` is in ``/brokers/ids`` and accepts connections, and
        ``/controller`` exists."""
        deadline = time.monotonic() + timeout
        with _zookeeper(self.hosts) as zk:
            while True:
                exited = [broker for broker in brokers.values() if not broker.running]
                if exited:
                    self._fail(f"{exited} exited")
                if all(_registered(zk, self.chroot, broker) for broker in brokers.values()) and zk.exists(
                    f"{self.chroot}/controller"
                ):
                    return
                if time.monotonic() > deadline:
                    self._fail(f"brokers {sorted(brokers)} did not register within {timeout:.0f}s")
                time.sleep(0.2)

    def _fail(self, reason: str) -> None:
        tails = "\n".join(f"--- {broker} server.log:\n{broker.log_tail()}\n--- stdout:\n"
                          f"{broker.log_tail('stdout.log', 10)}" for broker in self.brokers.values())
        raise KafkaStartError(f"{reason}\n{tails}")


def _registered(zk: Any, chroot: str, broker: KafkaBroker) -> bool:
    """Whether ``broker``'s registration znode exists and its listener accepts connections."""
    found = zk.exists(f"{chroot}/brokers/ids/{broker.broker_id}")
    return found is not None and _accepts(broker.config["listeners"])


def _accepts(listener: str) -> bool:
    host, _, port = listener.rpartition("//")[2].rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=2.0).close()
    except OSError:
        return False
    return True


class _zookeeper:
    """A kazoo session for the duration of a ``with`` block (kazoo is imported on first use)."""

    def __init__(self, hosts: str) -> None:
        import kazoo.client  # type: ignore[import-untyped]

        self.client = kazoo.client.KazooClient(hosts=hosts, timeout=10.0)

    def __enter__(self) -> Any:
        self.client.start(timeout=30.0)
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.stop()
        self.client.close()


# --- pytest fixtures -----------------------------------------------------------------------------


def require_kafka() -> KafkaInstallation:
    """The installation, or skip the test with the hint (fail it under ``CI=true``)."""
    try:
        return KafkaInstallation.find()
    except KafkaNotInstalledError as exc:
        reason = str(exc)
    if in_ci():
        pytest.fail(f"CI=true and Kafka cannot run: {reason}", pytrace=False)
    pytest.skip(f"Kafka cannot run: {reason}")


@pytest.fixture(scope="session")
def kafka_installation() -> KafkaInstallation:
    return require_kafka()


@pytest.fixture(scope="module")
def kafka_cluster(zookeeper_server: ZooKeeperEnsemble, kafka_installation: KafkaInstallation) -> Iterator[KafkaCluster]:
    """Three Kafka brokers on the session's ZooKeeper server, in a chroot of their own, for one module."""
    with KafkaCluster(zookeeper_server.hosts, 3, installation=kafka_installation) as cluster:
        yield cluster


__all__ = [
    "INTER_BROKER_LISTENER", "KAFKA", "KAFKA_TOOLS", "LIBS_ENV", "KafkaBroker", "KafkaCluster", "KafkaInstallation", "KafkaNotInstalledError",
    "KafkaStartError", "kafka_cluster", "kafka_installation", "properties", "require_kafka",
]
