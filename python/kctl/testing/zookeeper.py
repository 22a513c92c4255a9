"""Real ZooKeeper servers for tests: a standalone server or a 3-server ensemble on loopback ports.

The store tests must run against the real thing (ZooKeeper's multi, watch and session semantics
are what the ``zookeeper`` store is about), so this module starts ``QuorumPeerMain`` from Debian's
``zookeeper`` package (or any classpath given in ``KCTL_ZOOKEEPER_CLASSPATH``) with a config of
its own: free ports on 127.0.0.1 (:mod:`kctl.testing.ports`: within ``KCTL_TEST_PORTS`` when set),
a temporary data directory, and readiness decided by the ``srvr`` four-letter word reporting a Mode
(``ruok`` answers before the server can serve).

Releases behave differently where security is concerned (3.8.4+ and 3.9.2+ refuse ``exists``
without READ, ZOOKEEPER-2590), so a test can also ask for a release by name (:data:`RELEASES`):
``3.8`` is Debian's package, ``3.9`` a current 3.9 release fetched from Maven Central into
``~/.cache/kctl`` (:mod:`kctl.testing.maven`; ``scripts/test`` fetches it first). A server can
require TLS on a ``secureClientPort`` and SASL logins (:class:`ServerSecurity`).

Fixtures (enable with ``pytest_plugins = ["kctl.testing.zookeeper"]`` in a root ``conftest.py``,
or import them into a ``conftest.py``):

- ``zookeeper_server``: one standalone server for the whole test session;
- ``zookeeper_ensemble``: a fresh 3-server ensemble for one test (members can be killed);
- ``zookeeper_chroot``: a unique chroot per test, so tests sharing a server never see each other;
- ``zookeeper_release``: the installation of each release of :data:`RELEASES` in turn (a test
  using it runs once per release), and ``zookeeper_release_server``, a standalone server of it
  shared by the session.

Without Java or ZooKeeper (or Maven for 3.9) the fixtures skip with the install hint, except under
``CI=true`` where they fail: CI must never pass by skipping the ZooKeeper tests.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import ssl
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

from kctl.testing import maven
from kctl.testing.jvm import JavaProcess, tail
from kctl.testing.ports import LOOPBACK, free_ports, release_ports

INSTALL_HINT = "apt-get update && apt-get install -y zookeeper  (Debian's ZooKeeper, which pulls in Java)"
CLASSPATH_ENV = "KCTL_ZOOKEEPER_CLASSPATH"
"""A classpath holding ZooKeeper's server and its dependencies, instead of Debian's jars."""
JAVA_ENV = "KCTL_JAVA"
"""The ``java`` executable to run ZooKeeper with, instead of the one found on ``PATH``."""
DEBIAN_JARS = (
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-simple.jar",
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
)
"""Debian's server jar (its manifest lists its dependencies) and, when present, a log binding and
the two Netty jars its TLS port needs that the manifest leaves out."""
RELEASES = ("3.8", "3.9")
"""The releases a test can ask for: Debian's package (3.8.0 on bookworm) and a current 3.9."""
MAVEN_RELEASES = {
    "3.9": (
        "zookeeper-3.9.5",
        (
            "org.apache.zookeeper:zookeeper:3.9.5",
            # what the release's own lib/ holds beyond the pom's runtime scope (provided there)
            "io.dropwizard.metrics:metrics-core:4.1.12.1",
            "org.xerial.snappy:snappy-java:1.1.10.5",
            "commons-cli:commons-cli:1.5.0",
            "org.slf4j:slf4j-simple:2.0.13",
        ),
    ),
}
"""Releases fetched from Maven Central: the cache directory's name and the artifacts
(``scripts/test`` fetches the same ones with ``scripts/fetch-jars``)."""
SESSION_LOG_OPTIONS = (
    "-Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.ZooKeeperServer=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat='['yyyy-MM-dd HH:mm:ss,SSS']'",
)
"""With ``log_sessions``: the server's session lines (``Expiring session 0x…``) in its log, stamped
as log4j stamps Kafka's lines (``[%d]``), so that a session's expiry can be timed against them."""
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_COLLECTOR = re.compile(r"-XX:\+Use\w+GC")
"""A JVM option choosing the garbage collector: given in ``jvm_options``, it replaces the default
(the JVM refuses two)."""


class ZooKeeperNotInstalledError(RuntimeError):
    """Java or ZooKeeper's jars cannot be found; the message says how to install them."""


class ZooKeeperStartError(RuntimeError):
    """A server did not come up; the message ends with the tail of its log."""


@dataclass(frozen=True)
class ZooKeeperInstallation:
    """Where the Java runtime and ZooKeeper's classpath are; ``release`` names it for test ids."""

    java: str
    classpath: str
    release: str = ""

    @classmethod
    def find(cls) -> ZooKeeperInstallation:
        """Look in ``KCTL_JAVA`` / ``PATH`` and ``KCTL_ZOOKEEPER_CLASSPATH`` / Debian's jars."""
        classpath = os.environ.get(CLASSPATH_ENV)
        return cls(_java(), classpath) if classpath else cls.of_release("3.8")

    @classmethod
    def of_release(cls, release: str) -> ZooKeeperInstallation:
        """The installation of a release of :data:`RELEASES`: Debian's jars for 3.8; for 3.9 the
        jars fetched from Maven Central, fetched now (with ``mvn``) when the cache lacks them."""
        java = _java()
        if release == "3.8":
            if not os.path.exists(DEBIAN_JARS[0]):
                raise ZooKeeperNotInstalledError(
                    f"ZooKeeper's jars are missing ({DEBIAN_JARS[0]}; or set {CLASSPATH_ENV}); install: {INSTALL_HINT}"
                )
            return cls(java, os.pathsep.join(jar for jar in DEBIAN_JARS if os.path.exists(jar)), "3.8 (Debian)")
        if release not in MAVEN_RELEASES:
            raise ValueError(f"unknown ZooKeeper release {release!r}; known: {', '.join(RELEASES)}")
        name, coordinates = MAVEN_RELEASES[release]
        try:
            directory = maven.fetch_jars(coordinates, maven.cached(name))
        except maven.FetchError as exc:
            raise ZooKeeperNotInstalledError(
                f"ZooKeeper {release} could not be fetched ({exc}); scripts/fetch-jars {name} {' '.join(coordinates)}"
            ) from None
        return cls(java, maven.classpath(directory), name.removeprefix("zookeeper-"))


def _java() -> str:
    java = shutil.which(os.environ.get(JAVA_ENV) or "java")
    if not java:
        raise ZooKeeperNotInstalledError(
            f"no java executable on PATH (or at {JAVA_ENV}={os.environ.get(JAVA_ENV, '')!r}); install: {INSTALL_HINT}"
        )
    return java


@dataclass(frozen=True)
class ServerSecurity:
    """What a test server asks of its clients beyond its plain client port.

    :param keystore: a PEM file with the server's private key and certificate: the server then
        also serves TLS on a ``secureClientPort`` (Netty's connection factory serves both ports).
    :param truststore: a PEM file of the CA certificates client certificates must chain to.
    :param client_auth: ZooKeeper's ``ssl.clientAuth``: ``need`` (its default), ``want`` or ``none``.
    :param sasl_users: users and passwords that may log in with SASL DIGEST-MD5 (a JAAS ``Server``
        section with ZooKeeper's ``DigestLoginModule``); a session that does is ``sasl:user``.
    :param require_sasl: close every session that does not log in with SASL
        (``enforce.auth.enabled=true``, ``enforce.auth.schemes=sasl``).
    """

    keystore: Path | None = None
    truststore: Path | None = None
    client_auth: str = "need"
    sasl_users: Mapping[str, str] = field(default_factory=dict)
    require_sasl: bool = False

    def config_lines(self, secure_port: int | None) -> list[str]:
        lines = []
        if self.keystore is not None and secure_port is not None:
            lines += [
                f"secureClientPort={secure_port}",
                f"secureClientPortAddress={LOOPBACK}",
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"ssl.keyStore.location={self.keystore}",
                "ssl.keyStore.type=PEM",
                f"ssl.clientAuth={self.client_auth}",
            ]
            if self.truststore is not None:
                lines += [f"ssl.trustStore.location={self.truststore}", "ssl.trustStore.type=PEM"]
        if self.sasl_users:
            lines.append("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
        if self.require_sasl:
            lines += ["enforce.auth.enabled=true", "enforce.auth.schemes=sasl"]
        return lines

    def jaas(self) -> str:
        """The JAAS configuration of the SASL users ("" without any)."""
        if not self.sasl_users:
            return ""
        users = "\n".join(f'  user_{user}="{password}"' for user, password in self.sasl_users.items())
        return f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n{users};\n}};\n"


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter command to the server on ``port``; the reply, or "" if it cannot answer."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer(JavaProcess):
    """One ``QuorumPeerMain`` process: a standalone server or an ensemble member.

    ``start()`` writes its config and returns once the process runs; the ensemble waits for it to
    serve. ``stop()`` is a clean shutdown (SIGTERM, then SIGKILL after ``timeout``), ``kill()`` a
    crash (SIGKILL); either way the data directory survives, so ``start()`` brings the member back.
    """

    def __init__(
        self,
        installation: ZooKeeperInstallation,
        directory: Path,
        myid: int,
        client_port: int,
        quorum: dict[int, tuple[int, int]] | None,
        tick_time_ms: int,
        force_sync: bool,
        security: ServerSecurity | None = None,
        secure_port: int | None = None,
        log_sessions: bool = False,
        jvm_options: Sequence[str] = (),
    ) -> None:
        self.installation = installation
        self.directory = directory
        self.myid = myid
        self.client_port = client_port
        self.secure_port = secure_port
        self._quorum = quorum
        self._tick_time_ms = tick_time_ms
        self._force_sync = force_sync
        self._security = security
        self._log_sessions = log_sessions
        self._jvm_options = tuple(jvm_options)
        super().__init__()

    def __repr__(self) -> str:
        return f"ZooKeeperServer(myid={self.myid}, {self.address}, pid={self.pid})"

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.client_port}"

    @property
    def secure_address(self) -> str:
        """Where the server serves TLS (with a keystore in its :class:`ServerSecurity`)."""
        if self.secure_port is None:
            raise ValueError(f"{self} has no secureClientPort: give its ensemble a ServerSecurity with a keystore")
        return f"{LOOPBACK}:{self.secure_port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` once the server serves clients, else None."""
        for line in four_letter_word(self.client_port, "srvr").splitlines():
            if line.startswith("Mode: "):
                return line.removeprefix("Mode: ").strip()
        return None

    def answers_tls(self, timeout: float = 10.0) -> bool:
        """Whether the TLS port answers a handshake (True without one): the first handshake of a
        JVM is slow (on a busy machine, longer than a client's connection timeout), so an ensemble
        waits for this one. Refusing this client, which has no certificate, counts as answering."""
        if self.secure_port is None:
            return True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            sock = socket.create_connection((LOOPBACK, self.secure_port), timeout=timeout)
        except OSError:
            return False  # not listening yet
        with sock:
            try:
                context.wrap_socket(sock).close()
            except TimeoutError:
                return False
            except OSError:
                pass  # refused with an alert or a reset: the server's TLS stack ran
        return True

    def start(self) -> None:
        if self.running:
            return
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{self.myid}\n")
        config = self.directory / "zoo.cfg"
        config.write_text(self._config(data))
        jaas = self._security.jaas() if self._security is not None else ""
        options = list(SESSION_LOG_OPTIONS) if self._log_sessions else []
        if jaas:
            (self.directory / "jaas.conf").write_text(jaas)
            options.append(f"-Djava.security.auth.login.config={self.directory / 'jaas.conf'}")
        command = [
            self.installation.java,
            "-Xms64m",
            "-Xmx1g",
            *(() if any(_COLLECTOR.fullmatch(o) for o in self._jvm_options) else ("-XX:+UseSerialGC",)),
            "-Djava.net.preferIPv4Stack=true",
            f"-Dzookeeper.forceSync={'yes' if self._force_sync else 'no'}",
            "-Dzookeeper.admin.enableServer=false",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            *options,
            *self._jvm_options,
            "-cp",
            self.installation.classpath,
            MAIN_CLASS,
            str(config),
        ]
        self.launch(command, self.directory, self.log_path)

    def log_tail(self, lines: int = 30) -> str:
        return tail(self.log_path, lines)

    def _config(self, data: Path) -> str:
        lines = [
            f"tickTime={self._tick_time_ms}",
            f"dataDir={data}",
            f"clientPort={self.client_port}",
            f"clientPortAddress={LOOPBACK}",
            f"minSessionTimeout={2 * self._tick_time_ms}",
            "maxSessionTimeout=60000",
            "maxClientCnxns=0",
            "4lw.commands.whitelist=srvr,ruok,mntr",
            "admin.enableServer=false",
        ]
        if self._security is not None:
            lines += self._security.config_lines(self.secure_port)
        if self._quorum is not None:
            lines += ["initLimit=20", "syncLimit=10", "standaloneEnabled=false"]
            lines += [f"server.{i}={LOOPBACK}:{peer}:{election}" for i, (peer, election) in self._quorum.items()]
        return "\n".join(lines) + "\n"


class ZooKeeperEnsemble:
    """``size`` ZooKeeper servers on loopback ports (1: a standalone server; 3: a quorum of three).

    Use as a context manager, or ``start()`` / ``stop()``. ``hosts`` is the connect string for
    clients (``secure_hosts`` for TLS, given a ``security`` with a keystore). ``force_sync=False`` (the default) skips fsync on every write, as test servers usually
    do: it measures the client and the protocol rather than this machine's disk.
    ``log_sessions=True`` logs each session's expiry with a timestamp (:data:`SESSION_LOG_OPTIONS`).
    ``jvm_options`` go after the defaults (``-Xms64m -Xmx1g -XX:+UseSerialGC``), so a later
    ``-Xmx`` wins: a server holding millions of znodes needs more heap than a test's; a collector
    named there (``-XX:+UseG1GC``) replaces the serial one.
    """

    def __init__(
        self,
        size: int = 1,
        *,
        installation: ZooKeeperInstallation | None = None,
        tick_time_ms: int = 500,
        force_sync: bool = False,
        security: ServerSecurity | None = None,
        log_sessions: bool = False,
        jvm_options: Sequence[str] = (),
    ) -> None:
        if size < 1:
            raise ValueError(f"an ensemble needs at least one server, not {size}")
        self.size = size
        self.installation = installation if installation is not None else ZooKeeperInstallation.find()
        self._tick_time_ms = tick_time_ms
        self._force_sync = force_sync
        self._security = security
        self._log_sessions = log_sessions
        self._jvm_options = tuple(jvm_options)
        self._directory: Path | None = None
        self._ports: list[int] = []
        self.servers: list[ZooKeeperServer] = []

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def hosts(self) -> str:
        return ",".join(server.address for server in self.servers)

    @property
    def secure_hosts(self) -> str:
        """The connect string of the servers' TLS ports."""
        return ",".join(server.secure_address for server in self.servers)

    def start(self, timeout: float = 60.0, attempts: int = 3) -> ZooKeeperEnsemble:
        """Start every server and wait until each one serves; retried on fresh ports if a port was
        taken in between."""
        attempt = 1
        while True:
            self._directory = Path(tempfile.mkdtemp(prefix="kctl-zookeeper-"))
            self.servers = self._members(self._directory)
            atexit.register(self.stop)
            for server in self.servers:
                server.start()
            try:
                self._wait(self.servers, timeout)
                return self
            except ZooKeeperStartError:
                again = attempt < attempts and "Address already in use" in self._logs()
                self.stop()
                if not again:
                    raise
            attempt += 1

    def stop(self) -> None:
        """Stop every server, remove their data and give their ports back."""
        for server in self.servers:
            server.stop()
        release_ports(self._ports)
        self._ports = []
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
        atexit.unregister(self.stop)

    def wait_until_serving(self, timeout: float = 60.0) -> None:
        """Wait until every running member reports a Mode (an ensemble's quorum: one leader)."""
        running = [server for server in self.servers if server.running]
        if not running:
            self._fail("no ZooKeeper server is running")
        self._wait(running, timeout)

    def _wait(self, members: list[ZooKeeperServer], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            exited = [server for server in members if not server.running]
            if exited:
                self._fail(f"{exited} exited")
            modes = [server.mode() for server in members]
            if all(modes) and (self.size == 1 or "leader" in modes) and all(s.answers_tls() for s in members):
                return
            if time.monotonic() > deadline:
                self._fail(f"ZooKeeper did not serve within {timeout:.0f}s (modes: {modes})")
            time.sleep(0.1)

    def leader(self) -> ZooKeeperServer:
        """The member whose ``srvr`` says it leads (the standalone server for size 1)."""
        for server in self.servers:
            if server.running and server.mode() in ("leader", "standalone"):
                return server
        raise ZooKeeperStartError(f"no leader among {self.servers}")

    def _members(self, directory: Path) -> list[ZooKeeperServer]:
        """The servers, on as few ports as they need (from :func:`free_ports`, so ``KCTL_TEST_PORTS``
        confines them): a client port each, a peer and an election port each in a quorum, and a
        TLS port each with a keystore."""
        quorate = self.size > 1
        secure = self._security is not None and self._security.keystore is not None
        self._ports = free_ports(self.size * (1 + 2 * quorate + secure))
        ports = iter(self._ports)
        members = [
            (next(ports), (next(ports), next(ports)) if quorate else None, next(ports) if secure else None)
            for _ in range(self.size)
        ]
        quorum = {i + 1: peers for i, (_, peers, _) in enumerate(members) if peers is not None} or None
        return [
            ZooKeeperServer(
                self.installation,
                directory / f"server-{i + 1}",
                i + 1,
                client,
                quorum,
                self._tick_time_ms,
                self._force_sync,
                self._security,
                secure_port,
                self._log_sessions,
                self._jvm_options,
            )
            for i, (client, _, secure_port) in enumerate(members)
        ]

    def _logs(self) -> str:
        return "\n".join(server.log_tail(200) for server in self.servers)

    def _fail(self, reason: str) -> NoReturn:
        tails = "\n".join(f"--- {server} log:\n{server.log_tail()}" for server in self.servers)
        raise ZooKeeperStartError(f"{reason}\n{tails}")


# --- pytest fixtures -----------------------------------------------------------------------------


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``), where a missing service is a failure."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_zookeeper(release: str | None = None) -> ZooKeeperInstallation:
    """The installation (of ``release``, else the default one), or skip the test with the install
    hint (fail it under ``CI=true``)."""
    try:
        return ZooKeeperInstallation.find() if release is None else ZooKeeperInstallation.of_release(release)
    except ZooKeeperNotInstalledError as exc:
        reason = str(exc)
    if in_ci():
        pytest.fail(f"CI=true and ZooKeeper cannot run: {reason}", pytrace=False)
    pytest.skip(f"ZooKeeper cannot run: {reason}")


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperEnsemble]:
    """A standalone ZooKeeper server shared by the whole session (give each test its own chroot)."""
    with ZooKeeperEnsemble(1, installation=require_zookeeper()) as ensemble:
        yield ensemble


@pytest.fixture
def zookeeper_ensemble() -> Iterator[ZooKeeperEnsemble]:
    """A fresh 3-server ensemble for one test, which may kill and restart its members."""
    with ZooKeeperEnsemble(3, installation=require_zookeeper()) as ensemble:
        yield ensemble


@pytest.fixture
def zookeeper_chroot() -> str:
    """A chroot no other test uses (the kazoo harness's ``/kazootests<uuid>`` idea)."""
    return f"/kctl-tests-{uuid.uuid4().hex}"


@pytest.fixture(scope="session", params=RELEASES, ids=[f"zookeeper-{release}" for release in RELEASES])
def zookeeper_release(request: pytest.FixtureRequest) -> ZooKeeperInstallation:
    """Each release of :data:`RELEASES` in turn: a test using this runs once per release."""
    return require_zookeeper(request.param)


@pytest.fixture(scope="session")
def zookeeper_release_server(zookeeper_release: ZooKeeperInstallation) -> Iterator[ZooKeeperEnsemble]:
    """A standalone server of each release in turn, shared by the session (use a chroot per test)."""
    with ZooKeeperEnsemble(1, installation=zookeeper_release) as ensemble:
        yield ensemble


__all__ = [
    "CLASSPATH_ENV",
    "INSTALL_HINT",
    "JAVA_ENV",
    "MAVEN_RELEASES",
    "RELEASES",
    "SESSION_LOG_OPTIONS",
    "ServerSecurity",
    "ZooKeeperEnsemble",
    "ZooKeeperInstallation",
    "ZooKeeperNotInstalledError",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "four_letter_word",
    "free_ports",
    "in_ci",
    "require_zookeeper",
    "zookeeper_chroot",
    "zookeeper_ensemble",
    "zookeeper_release",
    "zookeeper_release_server",
    "zookeeper_server",
]
