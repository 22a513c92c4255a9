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
again on the new session; the broker re-registers with a new broker epoch. Logs go to stderr.

With ``--zk-auth USER:PASSWORD`` (or ``KCTL_ZK_AUTH``) a process authenticates with ZooKeeper's
digest scheme; with ``--zk-acl`` (or ``KCTL_ZK_ACL``) the cluster is secured by role
(:mod:`kctl.stores.zkacl`): a controller must then have the controller identity, a broker a
broker identity.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kctl.broker import BrokerAgent
from kctl.broker.fetcher import NetworkReplicaManager
from kctl.config import ControllerConfig
from kctl.context import DEFAULT_ENGINE, ENGINES
from kctl.controller import KafkaController
from kctl.errors import IllegalArgumentError, KctlError, StoreUnavailableError
from kctl.model import validate_int
from kctl.net import Address, EventLoopThread, FrameClient, FrameServer, format_address, parse_address
from kctl.plugins import get_plugin_host
from kctl.scheduler import RealTimeScheduler
from kctl.stores import zkacl
from kctl.stores.base import ChangeType, WatchEvent, WatchKind
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.transports.tcp import broker_address

logger = logging.getLogger("kctl.process")

RECONNECT_BACKOFF = 1.0
"""Seconds between attempts to open a new ZooKeeper session after the last one expired."""


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


def _address(text: str) -> str:
    try:
        parse_address(text)
    except IllegalArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_zookeeper_arguments(parser: argparse.ArgumentParser) -> None:
    """``--zk``, ``--zk-timeout``, ``--zk-auth`` and ``--zk-acl``, shared with the admin tools."""
    parser.add_argument("--zk", required=True, metavar="HOST:PORT[/CHROOT]",
                        help="ZooKeeper connect string, as Kafka's zookeeper.connect")
    parser.add_argument("--zk-timeout", type=float, default=15.0, metavar="SECONDS",
                        help="give up connecting to ZooKeeper after this long (default: 15)")
    parser.add_argument("--zk-auth", default=None, metavar="USER:PASSWORD",
                        help=f"authenticate to ZooKeeper with this digest identity (default: ${zkacl.AUTH_ENV}, "
                             "which keeps the password off the command line)")
    parser.add_argument("--zk-acl", default=None, metavar="ROLE=USER:DIGEST,…",
                        help="the cluster's ACL policy: the digest identities of the controller, broker and admin "
                             f"roles, e.g. controller=ctl:…,broker=brk:…,admin=adm:… (default: ${zkacl.ACL_ENV}; "
                             "`kctl zk-digest USER:PASSWORD` prints an identity)")


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """A process's ZooKeeper identity and the cluster's ACL policy (see :mod:`kctl.stores.zkacl`)."""

    auth: tuple[str, str] | None = None
    acl: zkacl.AclPolicy | None = None

    @classmethod
    def from_arguments(cls, args: argparse.Namespace, config: ControllerConfig, role: str | None = None) -> ZooKeeperSecurity:
        """``--zk-auth`` / ``--zk-acl`` (or their environment variables), checked against ``role``:
        under a policy, a controller or broker process must have that role's identity."""
        auth, acl_text = zkacl.from_environment(getattr(args, "zk_auth", None), getattr(args, "zk_acl", None))
        policy = None
        if acl_text is not None:
            policy = zkacl.AclPolicy.parse(acl_text, brokers_write_isr=not config.uses_alter_partition)
        if policy is not None and role is not None:
            identity = None if auth is None else zkacl.digest(*auth)
            members = policy.controllers if role == "controller" else policy.brokers
            if identity not in members:
                shown = "no --zk-auth" if identity is None else f"--zk-auth identity {identity.partition(':')[0]!r}"
                raise IllegalArgumentError(
                    f"a {role} of this secured cluster authenticates as a {role} identity of --zk-acl; {shown} is not one"
                )
        return cls(auth, policy)

    def transport_options(self) -> dict[str, Any]:
        return {"auth": self.auth, "acl": self.acl}


def add_process_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    parser.add_argument("--id", type=int_argument("a broker id"), required=True, help=f"the {role}'s id (a broker id)")
    add_zookeeper_arguments(parser)
    parser.add_argument("--listen", type=_address, default="127.0.0.1:0", metavar="HOST:PORT",
                        help="where to accept connections (port 0: any free port; default 127.0.0.1:0)")
    parser.add_argument("--transport", default="tcp", help="controller-broker transport: tcp (default) or zkqueue")
    parser.add_argument("--config", type=_property, action="append", default=[], metavar="NAME=VALUE",
                        help="a broker property by its Kafka name (repeatable), e.g. zookeeper.session.timeout.ms=6000")
    parser.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"), default="INFO",
                        help="log level of the stderr log (default: INFO)")
    if role == "controller":
        parser.add_argument("--store", choices=("zookeeper",), default="zookeeper", help="state store (zookeeper)")
        parser.add_argument("--engine", choices=ENGINES, default=DEFAULT_ENGINE,
                            help=f"controller engine (default: {DEFAULT_ENGINE})")
    else:
        parser.add_argument("--rack", default=None, help="the broker's rack (broker.rack)")
        parser.add_argument("--fetch-interval", type=float, default=0.5, metavar="SECONDS",
                            help="seconds between follower fetch rounds (default: 0.5)")


# --- Shared plumbing -------------------------------------------------------------------------------


def configure_logging(level: str) -> None:
    """Everything to stderr with a timestamp; kazoo's chatter only from WARNING up."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, logging.getLevelName(level)))


def connect(
    zk: str, config: ControllerConfig, timeout: float, security: ZooKeeperSecurity | None = None
) -> ZooKeeperStore:
    """A session on the ensemble; a clear :class:`StoreUnavailableError` when none answers."""
    security = security or ZooKeeperSecurity()
    try:
        return ZooKeeperStore(
            zk, session_timeout=config.zookeeper_session_timeout_ms / 1000, connection_timeout=timeout,
            auth=security.auth, acl=security.acl,
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
    def start(cls, listen: str) -> _Network:
        loop = EventLoopThread()
        server = FrameServer(loop, parse_address(listen))
        try:
            address = server.start()
        except KctlError:
            loop.stop()
            raise
        return cls(loop, server, FrameClient(loop), address)

    def close(self) -> None:
        self.client.close()
        self.server.close()
        self.loop.stop()


def _transport(
    name: str, scheduler: RealTimeScheduler, network: _Network, zk: str, config: ControllerConfig,
    security: ZooKeeperSecurity,
) -> Any:
    """The named transport plugin, given what the built-ins need (others get the scheduler only)."""
    factory = get_plugin_host().transports().get(name).factory
    options: Mapping[str, Any] = {}
    if name == "tcp":
        options = {"server": network.server, "request_timeout": config.request_timeout_ms / 1000}
    elif name == "zkqueue":
        options = {"hosts": zk, "session_timeout": config.zookeeper_session_timeout_ms / 1000,
                   **security.transport_options()}
    return factory(scheduler=scheduler, **options)


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
    configure_logging(args.log_level)
    config = ControllerConfig.coerce(dict(args.config))
    stopping = _wait_for_termination()
    security = ZooKeeperSecurity.from_arguments(args, config, role)
    with contextlib.ExitStack() as stack:
        store = connect(args.zk, config, args.zk_timeout, security)
        stack.callback(store.close)  # also ends the registrations after a failed start
        network = _Network.start(args.listen)
        stack.callback(network.close)
        scheduler = RealTimeScheduler(name=f"{role}-{args.id}-timer")
        stack.callback(scheduler.shutdown)
        transport = _transport(args.transport, scheduler, network, args.zk, config, security)
        stack.callback(transport.close)
        yield _Runtime(config, stopping, store, network, scheduler, transport)


# --- kctl controller -------------------------------------------------------------------------------


def run_controller(args: argparse.Namespace) -> int:
    """Run a controller candidate until SIGTERM/SIGINT; exit status 0 after a clean stop."""
    with _runtime(args, "controller") as rt:
        controller = KafkaController(args.id, rt.store, rt.transport, rt.config, args.engine, rt.scheduler)
        try:
            controller.startup()
            _SessionKeeper(rt.store, lambda: None, rt.stopping)  # RECONNECTED makes the controller re-elect
            logger.info("Controller %d started (ZooKeeper %s, listening on %s, transport %s)",
                        args.id, args.zk, format_address(rt.network.address), args.transport)
            _run_until_stopped(rt.stopping)
        finally:
            controller.shutdown()
    logger.info("Controller %d stopped", args.id)
    return 0


# --- kctl broker -----------------------------------------------------------------------------------


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
                            port=port, replica_manager=replica_manager)
        epoch = agent.startup()
        _SessionKeeper(rt.store, agent.reregister, rt.stopping)
        logger.info("Broker %d started (ZooKeeper %s, listening on %s, broker epoch %d, transport %s)",
                    args.id, args.zk, format_address(rt.network.address), epoch, args.transport)
        _run_until_stopped(rt.stopping)
        started = time.monotonic()
        controlled = agent.shutdown().result()
        logger.info("Broker %d shut down in %.3fs (controlled: %s)", args.id, time.monotonic() - started, controlled)
    return 0


__all__ = [
    "ZooKeeperSecurity",
    "add_process_arguments",
    "add_zookeeper_arguments",
    "configure_logging",
    "connect",
    "int_argument",
    "run_broker",
    "run_controller",
]
