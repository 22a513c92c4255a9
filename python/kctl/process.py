"""``kctl controller`` and ``kctl broker``: a controller candidate or a broker as a process of its own.

Each process opens its own ZooKeeper session (``--zk HOST:PORT[,…][/chroot]``), listens on
``--listen`` (the broker registers that address as its PLAINTEXT endpoint; a controller names it
in the requests it sends) and runs until SIGTERM or SIGINT:

- a controller process runs :class:`~kctl.controller.KafkaController` on its real-time event
  thread; several may run, ``/controller`` decides which one is active (reference §6.2). On
  SIGTERM it resigns and closes its session, so another takes over at once.
- a broker process runs a :class:`~kctl.broker.BrokerAgent` whose simulated data plane fetches from
  the other broker processes (:class:`~kctl.broker.fetcher.NetworkReplicaManager`). On SIGTERM it
  makes a controlled shutdown (``controlled.shutdown.*``) before closing its session.

A session that expires is replaced: the controller resigns (``Expire``) and runs for election
again on the new session; the broker re-registers with a new broker epoch. Logs go to stderr, or
with ``--log-dir`` to Kafka's log files (:mod:`kctl.logfiles`); at ``--log-level DEBUG`` a broker
also logs each answer to the controller with the request and the response in wire form
(:func:`read_answers` reads them back: the fault suite replays them). ``--metrics-listen`` serves
the process's metrics to Prometheus under Kafka's names (:mod:`kctl.metrics`).

With ``--zk-auth USER:PASSWORD`` (or ``KCTL_ZK_AUTH``) a process authenticates with ZooKeeper's
digest scheme, with ``--zk-sasl USER:PASSWORD`` (or ``KCTL_ZK_SASL``) by a SASL DIGEST-MD5 login;
Kafka's ``zookeeper.ssl.*`` client properties (``--config``, ``--config-file``, or a file given with
``--zk-tls-config-file``) make the connection TLS (:mod:`kctl.stores.zkclient`). With
``--zk-acl`` (or ``KCTL_ZK_ACL``) the cluster is secured by role (:mod:`kctl.stores.zkacl`): a
controller must then have a controller identity, a broker an identity that may register its id.

Properties come from ``--config-file`` (Kafka's ``server.properties`` format, repeatable) and
``--config NAME=VALUE`` (which wins). The security ones (``security.inter.broker.protocol``,
``ssl.*``, ``super.users``, ``kctl.authorization.enable``, ``kctl.broker.principal``; see
:mod:`kctl.security`) secure the process's listener and its connections: TLS, and which peer may
send which request.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import gc
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl import logfiles, wire
from kctl.broker import BrokerAgent
from kctl.broker.agent import HandledRequest
from kctl.broker.fetcher import NetworkReplicaManager
from kctl.config import ControllerConfig, describe_components
from kctl.engine_api import ENGINES, default_engine
from kctl.controller import KafkaController
from kctl.errors import IllegalArgumentError, KctlError, StoreUnavailableError
from kctl.model import validate_int
from kctl.net import Address, EventLoopThread, FrameClient, FrameServer, format_address, parse_address
from kctl.plugins import get_plugin_host
from kctl.properties import read_properties
from kctl.scheduler import RealTimeScheduler, check_duration
from kctl.security import ListenerSecurity, is_security_property
from kctl.stores import zkacl, zkclient
from kctl.stores.base import ChangeType, WatchEvent, WatchKind
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.transports.tcp import broker_address

logger = logging.getLogger("kctl.process")

RECONNECT_BACKOFF = 1.0
"""Seconds between attempts to open a new ZooKeeper session after the last one expired."""
YOUNG_COLLECTION_THRESHOLD = 50_000
"""New objects between two collections of the youngest generation in a controller process
(Python's default: 700): a transition of 20K partitions makes hundreds of thousands of
short-lived objects (log records, znode writes, requests), and with the default the collector
took a fifth of the controller's time creating such a topic."""


# --- Arguments -------------------------------------------------------------------------------------


def _property(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (a Kafka property), got {text!r}")
    return name.strip(), value.strip()


def int_argument(what: str, minimum: int = 0) -> Callable[[str], int]:
    """An argparse type for an integer Kafka reads as an ``Int`` (at least ``minimum``), such as
    ``--id``; the error names ``what`` and the value."""
    def parse(text: str) -> int:
        digits = text.strip()
        value: object = int(digits) if re.fullmatch(r"[+-]?[0-9]{1,20}", digits) else text
        try:
            return validate_int(what, value, minimum)
        except KctlError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def process_properties(args: argparse.Namespace) -> tuple[ControllerConfig, ListenerSecurity, dict[str, str]]:
    """The ``--config-file`` files in order, then ``--config``, split by who reads them: the broker
    properties, the listener's security built from its own properties (files checked,
    certificates validated), and Kafka's ZooKeeper client properties (``zookeeper.ssl.*``)."""
    properties: dict[str, str] = {}
    for path in getattr(args, "config_file", None) or ():
        properties.update(read_properties(path))
    properties.update(dict(args.config))
    client = {k: properties.pop(k) for k in list(properties) if zkclient.is_client_property(k)}
    security = ListenerSecurity.from_properties({k: v for k, v in properties.items() if is_security_property(k)})
    config = ControllerConfig.coerce({k: v for k, v in properties.items() if not is_security_property(k)})
    return config, security, client


def _positive(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def _file_size(text: str) -> int:
    try:
        return logfiles.parse_file_size(text)
    except IllegalArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_argument(text: str) -> float:
    """A command-line duration: more than 0 and at most a day (:func:`~kctl.scheduler.check_duration`)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    try:
        return check_duration(seconds, "the value", positive=True)
    except KctlError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _address(text: str) -> str:
    try:
        parse_address(text)
    except IllegalArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _kafka_listener(text: str) -> tuple[str, str]:
    """``NAME://HOST:PORT``, as an entry of Kafka's ``listeners``: (name, address)."""
    name, separator, address = text.partition("://")
    if not separator or not name:
        raise argparse.ArgumentTypeError(f"expected NAME://HOST:PORT, got {text!r}")
    return name, _address(address)


def add_zookeeper_arguments(parser: argparse.ArgumentParser) -> None:
    """``--zk`` (or Kafka's ``--zookeeper``), ``--zk-timeout``, ``--zk-auth`` and ``--zk-acl``, shared
    with the admin tools."""
    parser.add_argument("--zk", "--zookeeper", dest="zk", required=True, metavar="HOST:PORT[/CHROOT]",
                        help="ZooKeeper connect string, as Kafka's zookeeper.connect")
    parser.add_argument("--zk-timeout", type=seconds_argument, default=15.0, metavar="SECONDS",
                        help="give up connecting to ZooKeeper after this long (default: 15)")
    parser.add_argument("--zk-auth", default=None, metavar="USER:PASSWORD",
                        help=f"authenticate to ZooKeeper with this digest identity (default: ${zkacl.AUTH_ENV}, "
                             "which keeps the password off the command line)")
    parser.add_argument("--zk-sasl", default=None, metavar="USER:PASSWORD",
                        help="log in to ZooKeeper with SASL DIGEST-MD5 as this user, the identity sasl:USER (default: "
                             f"${zkclient.SASL_ENV}, which keeps the password off the command line)")
    parser.add_argument("--zk-tls-config-file", default=None, metavar="FILE",
                        help="Kafka's ZooKeeper TLS client properties (zookeeper.ssl.client.enable=true, "
                             "zookeeper.ssl.keystore.location, zookeeper.ssl.truststore.location, …; PEM files)")
    parser.add_argument("--zk-acl", default=None, metavar="ROLE=USER:DIGEST,…",
                        help="the cluster's ACL policy: the identities of the controller, broker and admin roles, "
                             "e.g. controller=ctl:…,broker=brk:…,broker.7=sasl:b7,admin=adm:… (default: "
                             f"${zkacl.ACL_ENV}; `kctl zk-digest USER:PASSWORD` prints a digest identity)")


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """A process's ZooKeeper logins and connection, and the cluster's ACL policy (see
    :mod:`kctl.stores.zkacl` and :mod:`kctl.stores.zkclient`)."""

    auth: tuple[str, str] | None = None
    acl: zkacl.AclPolicy | None = None
    sasl: tuple[str, str] | None = None
    tls: zkclient.ZooKeeperTls | None = None

    @classmethod
    def from_arguments(
        cls, args: argparse.Namespace, config: ControllerConfig, role: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> ZooKeeperSecurity:
        """``--zk-auth``, ``--zk-sasl``, ``--zk-acl`` (or their environment variables) and the TLS
        properties of ``--zk-tls-config-file`` and ``properties`` (which win), checked against
        ``role``: under a policy, a controller process must have a controller identity, a broker
        process one that may register its ``--id``."""
        auth, acl_text = zkacl.from_environment(getattr(args, "zk_auth", None), getattr(args, "zk_acl", None))
        sasl = zkclient.sasl_from_environment(getattr(args, "zk_sasl", None))
        file = getattr(args, "zk_tls_config_file", None)
        tls = zkclient.ZooKeeperTls.from_properties(
            {**(read_properties(file) if file else {}), **(properties or {})}
        )
        policy = None
        if acl_text is not None:
            policy = zkacl.AclPolicy.parse(acl_text, brokers_write_isr=not config.uses_alter_partition)
        if policy is not None and role is not None:
            identities = zkclient.ClientSecurity(auth, sasl).identities()
            if role == "controller":
                allowed, what = policy.controllers, "a controller identity of --zk-acl"
            else:
                allowed, what = policy.registrants(args.id), f"an identity of --zk-acl that may register broker {args.id}"
            if not set(identities) & set(allowed):
                shown = ", ".join(f"{i.partition(':')[0]!r}" if not i.startswith(zkacl.SASL_SCHEME) else repr(i)
                                  for i in identities) or "no --zk-auth or --zk-sasl"
                raise IllegalArgumentError(f"a {role} of this secured cluster authenticates as {what}; {shown} is not one")
        return cls(auth, policy, sasl, tls)

    def transport_options(self) -> dict[str, Any]:
        return {"auth": self.auth, "acl": self.acl, "sasl": self.sasl, "tls": self.tls}


def controller_arguments(parser: argparse.ArgumentParser) -> None:
    """``kctl controller``'s arguments."""
    add_process_arguments(parser, "controller")


def broker_arguments(parser: argparse.ArgumentParser) -> None:
    """``kctl broker``'s arguments."""
    add_process_arguments(parser, "broker")


def add_process_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    parser.add_argument("--id", type=int_argument("a broker id"), required=True, help=f"the {role}'s id (a broker id)")
    add_zookeeper_arguments(parser)
    parser.add_argument("--listen", type=_address, default="127.0.0.1:0", metavar="HOST:PORT",
                        help="where to accept connections (port 0: any free port; default 127.0.0.1:0)")
    parser.add_argument("--transport", default="tcp",
                        help="controller-broker transport: tcp (default), zkqueue, or (for a controller of real Kafka "
                             "brokers) kafka")
    parser.add_argument("--config", type=_property, action="append", default=[], metavar="NAME=VALUE",
                        help="a broker property by its Kafka name (repeatable), e.g. zookeeper.session.timeout.ms=6000, "
                             "or one of Kafka's ZooKeeper TLS client properties (zookeeper.ssl.*)")
    parser.add_argument("--config-file", action="append", default=[], metavar="PATH",
                        help="a properties file as Kafka's server.properties (repeatable; --config wins), e.g. the "
                             "ssl.* properties of docs/security.md")
    parser.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"), default="INFO",
                        help="log level (default: INFO)")
    parser.add_argument("--state-change-log-level", choices=("TRACE", "DEBUG", "INFO", "WARNING", "ERROR"),
                        default=None, help="log level of the state-change log, Kafka's state.change.logger (TRACE "
                                           "adds a line per replica; default: --log-level)")
    parser.add_argument("--log-dir", type=Path, default=None, metavar="DIR",
                        help="write Kafka's log files there in Kafka's layout: controller.log, state-change.log "
                             "and server.log (default: everything to stderr)")
    parser.add_argument("--log-max-file-size", type=_file_size, default=logfiles.DEFAULT_MAX_FILE_SIZE,
                        metavar="SIZE", help="roll a log file over at this size, as log4j's MaxFileSize: bytes, KB, "
                                             "MB or GB (default: 100MB)")
    parser.add_argument("--log-max-backup-index", type=_positive, default=logfiles.DEFAULT_MAX_BACKUP_INDEX, metavar="N",
                        help=f"rolled-over files kept of each log (default: {logfiles.DEFAULT_MAX_BACKUP_INDEX})")
    parser.add_argument("--metrics-listen", type=_address, default=None, metavar="HOST:PORT",
                        help=f"serve the {role}'s metrics over HTTP in Prometheus' text format, named as the JMX "
                             "exporter names Kafka's (port 0: any free port; default: not served)")
    if role == "controller":
        parser.add_argument("--store", choices=("zookeeper",), default="zookeeper", help="state store (zookeeper)")
        parser.add_argument("--engine", choices=ENGINES, default=default_engine(),
                            help="controller engine (default: %(default)s)")
        parser.add_argument("--kafka-listener", type=_kafka_listener, default=("PLAINTEXT", "127.0.0.1:0"),
                            metavar="NAME://HOST:PORT",
                            help="with --transport kafka: the brokers' inter-broker listener name and where the "
                                 "controller answers them on it (port 0: any free port; default "
                                 "PLAINTEXT://127.0.0.1:0); see docs/kafka-protocol.md")
    else:
        parser.add_argument("--rack", default=None, help="the broker's rack (broker.rack)")
        parser.add_argument("--fetch-interval", type=seconds_argument, default=0.5, metavar="SECONDS",
                            help="seconds between follower fetch rounds (default: 0.5)")


# --- Shared plumbing -------------------------------------------------------------------------------


def quiet_zookeeper_client() -> None:
    """An admin command's ZooKeeper client keeps its reconnection warnings to itself: when the
    ensemble cannot be reached, the command's one error line (which names kazoo's last error)
    says it all."""
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)


def configure_logging(args: argparse.Namespace, role: str) -> None:
    """Everything to stderr with a timestamp or, with ``--log-dir``, to Kafka's log files
    (:mod:`kctl.logfiles`) and what goes to server.log also to stderr; kazoo's chatter only from
    WARNING up."""
    level = args.log_level
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    if args.log_dir is None:
        root.handlers[:] = [handler]
    else:
        files = logfiles.LogFiles(args.log_dir, args.log_max_file_size, args.log_max_backup_index)
        root.handlers[:] = files.handlers(handler, role, args.id)
    root.setLevel(level)
    logging.getLogger("kctl.state_change").setLevel(args.state_change_log_level or level)
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, logging.getLevelName(level)))


def connect(
    zk: str, config: ControllerConfig, timeout: float, security: ZooKeeperSecurity | None = None
) -> ZooKeeperStore:
    """A session on the ensemble; a clear :class:`StoreUnavailableError` when none answers
    within ``timeout`` seconds (more than 0, at most a day)."""
    timeout = check_duration(timeout, "the ZooKeeper connection timeout", positive=True)
    security = security or ZooKeeperSecurity()
    try:
        return ZooKeeperStore(
            zk, session_timeout=config.zookeeper_session_timeout_ms / 1000, connection_timeout=timeout,
            **security.transport_options(),
        )
    except ValueError as exc:  # a malformed chroot
        raise IllegalArgumentError(f"--zk {zk!r}: {exc}") from None
    except StoreUnavailableError as exc:
        raise StoreUnavailableError(f"ZooKeeper is unreachable: {exc}") from None


class _SessionKeeper:
    """Opens a new session when the store's expires, then runs ``on_new_session`` (off the
    store's thread: a watch listener must not block)."""

    def __init__(self, store: ZooKeeperStore, on_new_session: Callable[[], object], stopping: threading.Event) -> None:
        self._store = store
        self._on_new_session = on_new_session
        self._stopping = stopping
        store.add_listener(self._on_watch)

    def _on_watch(self, event: WatchEvent) -> None:
        if event.kind is WatchKind.SESSION and event.change is ChangeType.EXPIRED:
            logger.warning("ZooKeeper session expired; opening a new one")
            threading.Thread(target=self._renew, name="kctl-session-renewal", daemon=True).start()

    def _renew(self) -> None:
        while not self._stopping.is_set():
            try:
                self._store.reconnect()
                self._on_new_session()
                logger.info("New ZooKeeper session %#x", self._store.session_id)
                return
            except KctlError as exc:
                logger.warning("Cannot renew the ZooKeeper session yet: %s", exc)
                self._stopping.wait(RECONNECT_BACKOFF)


def _wait_for_termination() -> threading.Event:
    """An event set by SIGTERM or SIGINT (installed now, in the main thread)."""
    stopping = threading.Event()

    def handle(signum: int, frame: Any) -> None:
        logger.info("Received %s; shutting down", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stopping


@dataclass
class _Network:
    """The process's network: one loop, its listener and its outgoing connections."""

    loop: EventLoopThread
    server: FrameServer
    client: FrameClient
    address: Address

    @classmethod
    def start(cls, listen: str, security: ListenerSecurity) -> _Network:
        loop = EventLoopThread()
        server = FrameServer(loop, parse_address(listen), security)
        try:
            address = server.start()
        except KctlError:
            loop.stop()
            raise
        return cls(loop, server, FrameClient(loop, security=security), address)

    def describe(self) -> str:
        security = self.server.security
        authorization = ", authorization on" if security.authorizer.enabled else ""
        return f"{format_address(self.address)} ({security.protocol}{authorization})"

    def close(self) -> None:
        self.client.close()
        self.server.close()
        self.loop.stop()


def _transport(
    args: argparse.Namespace, scheduler: RealTimeScheduler, network: _Network, config: ControllerConfig,
    security: ZooKeeperSecurity,
) -> Any:
    """The named transport plugin, given what the built-ins need (others get the scheduler only)."""
    name, zk = args.transport, args.zk
    factory = get_plugin_host().transports().get(name).factory
    options: Mapping[str, Any] = {}
    if name == "kafka":
        listener, listen = getattr(args, "kafka_listener", ("PLAINTEXT", "127.0.0.1:0"))
        options = {"listener": listener, "listen": listen, "request_timeout": config.request_timeout_ms / 1000}
    elif name == "tcp":
        options = {"server": network.server, "request_timeout": config.request_timeout_ms / 1000}
    elif name == "zkqueue":
        options = {"hosts": zk, "session_timeout": config.zookeeper_session_timeout_ms / 1000,
                   **security.transport_options()}
    return factory(scheduler=scheduler, **options)


def _check_plugin_names(args: argparse.Namespace, config: ControllerConfig, role: str) -> None:
    """Refuse a misspelt transport or (for a controller) leader selector before the process
    connects: a controller that won the election could not elect a leader and would block the
    standbys."""
    plugins = get_plugin_host()
    plugins.transports().get(args.transport)
    if role == "controller":
        plugins.leader_selectors().check_config(config)


@contextlib.contextmanager
def _serving_metrics(listen: str | None, node: KafkaController | BrokerAgent) -> Iterator[None]:
    """Serve the node's metrics at ``--metrics-listen`` for the duration of the block (if given)."""
    if listen is None:
        yield
        return
    from kctl import metrics  # prometheus_client, only when asked for

    server = metrics.MetricsServer(metrics.node_registry(node), listen)
    logger.info("Serving metrics at %s", server.describe())
    try:
        yield
    finally:
        server.close()


def _run_until_stopped(stopping: threading.Event) -> None:
    while not stopping.wait(0.5):
        pass


@dataclass
class _Runtime:
    """What both kinds of process run on; closed in reverse order of creation."""

    config: ControllerConfig
    stopping: threading.Event
    store: ZooKeeperStore
    network: _Network
    scheduler: RealTimeScheduler
    transport: Any


@contextlib.contextmanager
def _runtime(args: argparse.Namespace, role: str) -> Iterator[_Runtime]:
    wire.check_installed()
    configure_logging(args, role)
    config, listener_security, client = process_properties(args)
    _check_plugin_names(args, config, role)
    listener_security.check_identity(role, args.id)
    stopping = _wait_for_termination()
    security = ZooKeeperSecurity.from_arguments(args, config, role, client)
    with contextlib.ExitStack() as stack:
        store = connect(args.zk, config, args.zk_timeout, security)
        stack.callback(store.close)  # also ends the registrations after a failed start
        network = _Network.start(args.listen, listener_security)
        stack.callback(network.close)
        scheduler = RealTimeScheduler(name=f"{role}-{args.id}-timer")
        stack.callback(scheduler.shutdown)
        transport = _transport(args, scheduler, network, config, security)
        stack.callback(transport.close)
        yield _Runtime(config, stopping, store, network, scheduler, transport)


# --- kctl controller -------------------------------------------------------------------------------


def keep_collector_aside() -> None:
    """Freeze what the process has made so far (modules, clients, the controller: it lives as
    long as the process, and every collection of the oldest generation walked it again) and
    collect the youngest generation every :data:`YOUNG_COLLECTION_THRESHOLD` new objects; the
    older generations keep their thresholds, so cyclic garbage is still freed."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, older, oldest)



def run_controller(args: argparse.Namespace) -> int:
    """Run a controller candidate until SIGTERM/SIGINT; exit status 0 after a clean stop."""
    with _runtime(args, "controller") as rt:
        controller = KafkaController(args.id, rt.store, rt.transport, rt.config, args.engine, rt.scheduler)
        try:
            with _serving_metrics(args.metrics_listen, controller):
                controller.startup()
                keep_collector_aside()
                _SessionKeeper(rt.store, lambda: None, rt.stopping)  # RECONNECTED makes the controller re-elect
                logger.info("Controller %d started (ZooKeeper %s, listening on %s; %s)", args.id, args.zk,
                            rt.network.describe(),
                            describe_components(args.engine, args.store, args.transport, rt.config))
                _run_until_stopped(rt.stopping)
        finally:
            controller.shutdown()
    logger.info("Controller %d stopped", args.id)
    return 0


# --- kctl broker -----------------------------------------------------------------------------------

TRACE = " wire="
"""What precedes the base64 wire form of an answer in a broker's DEBUG log line."""


def log_answer(handled: HandledRequest) -> None:
    """Log a broker's answer to the controller at DEBUG, request and response in wire form."""
    if logger.isEnabledFor(logging.DEBUG):
        request, response = handled.request, handled.response
        blob = wire.encode((handled.time, handled.broker_epoch, request, response))
        logger.debug("Answered %s of controller %d (epoch %d) with %s;%s%s", request.api, request.controller_id,
                     request.controller_epoch, response.error.name, TRACE, base64.b64encode(blob).decode())


def read_answers(log: str) -> list[HandledRequest]:
    """The answers a broker process logged at DEBUG, oldest first (a line that is not a whole
    answer, say the last one while the process writes it, is left out)."""
    answers = []
    for line in log.splitlines():
        _, found, blob = line.partition(TRACE)
        if not found:
            continue
        try:
            time_, broker_epoch, request, response = wire.decode(base64.b64decode(blob, validate=True))
        except (binascii.Error, wire.WireError, TypeError, ValueError):
            continue
        answers.append(HandledRequest(time_, request, response, broker_epoch))
    return answers


def run_broker(args: argparse.Namespace) -> int:
    """Run a broker until SIGTERM/SIGINT, then shut it down (controlled when enabled)."""
    with _runtime(args, "broker") as rt:
        agent: BrokerAgent | None = None

        def resolve(broker_id: int) -> Address | None:
            info = agent.metadata_cache.broker(broker_id) if agent is not None else None
            return None if info is None else broker_address(info)

        replica_manager = NetworkReplicaManager(rt.network.client, resolve, fetch_interval=args.fetch_interval,
                                                request_timeout=rt.config.request_timeout_ms / 1000)
        replica_manager.serve(rt.network.server)
        host, port = rt.network.address
        agent = BrokerAgent(args.id, rt.store, rt.transport, rt.scheduler, rt.config, rack=args.rack, host=host,
                            port=port, security_protocol=rt.network.server.security.protocol,
                            replica_manager=replica_manager, on_answer=log_answer, keep_answers=False)
        with _serving_metrics(args.metrics_listen, agent):
            epoch = agent.startup()
            _SessionKeeper(rt.store, agent.reregister, rt.stopping)
            logger.info("Broker %d started (ZooKeeper %s, listening on %s, broker epoch %d, transport %s)",
                        args.id, args.zk, rt.network.describe(), epoch, args.transport)
            _run_until_stopped(rt.stopping)
            started = time.monotonic()
            controlled = agent.shutdown().result()
            logger.info("Broker %d shut down in %.3fs (controlled: %s)", args.id, time.monotonic() - started,
                        controlled)
    return 0


__all__ = [
    "ZooKeeperSecurity",
    "add_process_arguments",
    "broker_arguments",
    "controller_arguments",
    "add_zookeeper_arguments",
    "configure_logging",
    "quiet_zookeeper_client",
    "connect",
    "int_argument",
    "log_answer",
    "process_properties",
    "read_answers",
    "run_broker",
    "run_controller",
]
