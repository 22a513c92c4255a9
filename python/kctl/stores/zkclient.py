"""The ZooKeeper client (Kafka's ``ZooKeeperClient``): a kazoo session, how it proves who it is
and protects its connection, pipelined requests, ACLs on what it creates, and persistent watches.

:class:`ZooKeeperClient` implements the :class:`~kctl.stores.znode.ZnodeClient` protocol that
Kafka's semantics (:class:`~kctl.stores.zookeeper.ZooKeeperStore`) are written over:

- fenced writes are multis that start with ``check(/controller_epoch, version)``; bulk writes are
  multis of up to ``max_multi_ops`` operations, each request kept under ``jute.maxbuffer``,
  pipelined (at most ``MULTIS_IN_FLIGHT`` unanswered); a multi fails as a whole, so the item that
  failed is reported and the rest are sent again;
- bulk reads use ZooKeeper's ``multiRead`` (3.6+; one request reads a thousand znodes), or
  pipelined ``get`` requests with ``multi_read=False`` for older servers;
- the native codec (``kctl._engine``) builds partition-state requests itself and the client only
  moves the bytes (:meth:`ZooKeeperClient.native_exchange`);
- a request lost with the connection is sent again once the client has reconnected (Kafka's
  ``retryRequestsUntilConnected``), which is why conditional writes and the election recognise
  their own earlier success;
- watches are persistent registrations: ZooKeeper's one-shot watches are re-armed before an event
  is delivered, and re-armed after a reconnect with the changes that were missed reported;
- after the session expires every call raises :class:`~kctl.errors.StoreUnavailableError` until
  :meth:`ZooKeeperClient.reconnect`.

kazoo is imported when a client is created, so kctl works without it; install it with
``pip install 'kctl[zookeeper]'``.

Security: TLS, SASL and digest.

ZooKeeper offers three things beyond a plain connection; kctl's processes, admin tools and Python
API take them with Kafka's names where Kafka has some:

- **TLS** to a server's ``secureClientPort`` (Kafka's ``zookeeper.ssl.*`` client properties,
  :class:`ZooKeeperTls`): the connection is encrypted, the server proves itself with a certificate
  that a trusted CA signed, and the client presents its own when it has a keystore (a server with
  ``ssl.clientAuth=need``, ZooKeeper's default, requires one);
- **SASL DIGEST-MD5** (in Kafka a JAAS ``Client`` section with ZooKeeper's ``DigestLoginModule``;
  in kctl ``--zk-sasl USER:PASSWORD``): a challenge-response login, so the password never crosses
  the wire; the session is ``sasl:USER`` in ACLs;
- ZooKeeper's **digest** scheme (``addauth digest``; kctl's ``--zk-auth USER:PASSWORD``): the
  password is sent as it is (readable on the wire unless the connection is TLS); the session is
  ``digest:USER:base64(sha1(USER:PASSWORD))`` in ACLs.

:class:`ClientSecurity` turns them into kazoo's options and names the identities a session gets,
in the form :mod:`kctl.stores.zkacl` policies are written in. SASL needs the ``pure-sasl`` package
(``pip install 'kctl[zookeeper]'``).
"""

from __future__ import annotations

import functools
import logging
import os
import select
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from kctl import extras
from kctl.errors import (
    BadVersionError,
    ControllerMovedError,
    InvalidConfigurationError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    StoreError,
    StoreUnavailableError,
)
from kctl.model import BrokerInfo, TopicPartition
from kctl.stores import paths
from kctl.stores.base import MATCH_ANY_VERSION, ChangeType, WatchEvent, WatchKind, WatchListener, check_watch_key
from kctl.stores.zkacl import (
    ADMIN,
    ALL,
    CONTROLLER_CREATED_PATHS,
    CREATE,
    DELETE,
    OPEN,
    READ,
    SASL_SCHEME,
    WORLD_READ,
    WRITE,
    AclEntry,
    AclPolicy,
    acl_entry,
    digest,
    parse_auth,
)
from kctl.stores.znode import Failure, Found, ItemResult, Op, Stat, controller_moved

logger = logging.getLogger(__name__)

SASL_ENV = "KCTL_ZK_SASL"
"""The process's SASL DIGEST-MD5 login, ``USER:PASSWORD`` (instead of ``--zk-sasl``)."""

ENABLE = "zookeeper.ssl.client.enable"
KEYSTORE = "zookeeper.ssl.keystore.location"
KEYSTORE_PASSWORD = "zookeeper.ssl.keystore.password"
KEYSTORE_TYPE = "zookeeper.ssl.keystore.type"
TRUSTSTORE = "zookeeper.ssl.truststore.location"
TRUSTSTORE_PASSWORD = "zookeeper.ssl.truststore.password"
TRUSTSTORE_TYPE = "zookeeper.ssl.truststore.type"
ENDPOINT_IDENTIFICATION = "zookeeper.ssl.endpoint.identification.algorithm"
CLIENT_CNXN_SOCKET = "zookeeper.clientCnxnSocket"
_ACCEPTED_AS_DEFAULT = {"zookeeper.ssl.crl.enable": "false", "zookeeper.ssl.ocsp.enable": "false"}
"""Kafka's properties kctl takes only at their default (Python's TLS checks neither)."""
PROPERTIES = (ENABLE, KEYSTORE, KEYSTORE_PASSWORD, KEYSTORE_TYPE, TRUSTSTORE, TRUSTSTORE_PASSWORD, TRUSTSTORE_TYPE,
              ENDPOINT_IDENTIFICATION, CLIENT_CNXN_SOCKET, *_ACCEPTED_AS_DEFAULT)
"""The ZooKeeper client properties of Kafka that kctl reads."""


def is_client_property(name: str) -> bool:
    """Whether ``name`` is one of Kafka's ZooKeeper client properties (TLS), not a broker's."""
    return name.startswith("zookeeper.ssl.") or name == CLIENT_CNXN_SOCKET


@dataclass(frozen=True)
class ZooKeeperTls:
    """A TLS connection to ZooKeeper's ``secureClientPort``, from Kafka's client properties.

    :param keystore: a PEM file holding the client's private key and certificate chain (Kafka's
        ``zookeeper.ssl.keystore.location`` with ``keystore.type=PEM``); None: no client certificate.
    :param keystore_password: the password of an encrypted private key in ``keystore``.
    :param truststore: a PEM file of the CA certificates that sign the servers' certificates;
        None: the system's trusted CAs.
    :param verify_hostname: the server's certificate must name the host of the connect string
        (Kafka's ``endpoint.identification.algorithm=HTTPS``, its default).

    The files are read when the object is made, so a wrong path, format or password is an error
    naming the property, not a failed handshake later.
    """

    keystore: str | None = None
    keystore_password: str | None = None
    truststore: str | None = None
    verify_hostname: bool = True

    def __post_init__(self) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if self.truststore is not None:
            _check_pem(TRUSTSTORE, self.truststore, ("CERTIFICATE",))
            try:
                context.load_verify_locations(self.truststore)
            except ssl.SSLError as exc:
                raise InvalidConfigurationError(f"{TRUSTSTORE}={self.truststore}: {exc}") from None
        if self.keystore is not None:
            _check_pem(KEYSTORE, self.keystore, ("PRIVATE KEY", "CERTIFICATE"))
            try:
                context.load_cert_chain(self.keystore, self.keystore, self.keystore_password)
            except ssl.SSLError as exc:
                raise InvalidConfigurationError(
                    f"{KEYSTORE}={self.keystore}: cannot load its key and certificate ({exc}); a wrong "
                    f"{KEYSTORE_PASSWORD}, or a key that does not match the certificate"
                ) from None

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> ZooKeeperTls | None:
        """The TLS settings of Kafka's ZooKeeper client properties; None unless
        ``zookeeper.ssl.client.enable=true``. kctl reads PEM stores only."""
        unknown = sorted(name for name in properties if is_client_property(name) and name not in PROPERTIES)
        if unknown:
            raise InvalidConfigurationError(
                f"{unknown[0]} is not supported: kctl's ZooKeeper client (kazoo on Python's ssl module) takes "
                f"{', '.join(PROPERTIES)}; protocols and cipher suites are Python's defaults (TLS 1.2 or later)"
            )
        for name, default in _ACCEPTED_AS_DEFAULT.items():
            if _flag(properties, name, default == "true") != (default == "true"):
                raise InvalidConfigurationError(f"{name}=true is not supported: Python's ssl module checks no CRL or OCSP")
        if not _flag(properties, ENABLE, False):
            return None
        for name in (KEYSTORE_TYPE, TRUSTSTORE_TYPE):
            kind = properties.get(name, "PEM").strip().upper()
            if kind != "PEM":
                raise InvalidConfigurationError(
                    f"{name}={kind}: kctl reads PEM stores only (keystore: the private key and certificate chain in one "
                    "file; truststore: CA certificates); convert a JKS or PKCS12 store with keytool -importkeystore "
                    "-deststoretype PKCS12 and openssl pkcs12 -nodes"
                )
        algorithm = properties.get(ENDPOINT_IDENTIFICATION, "HTTPS").strip()
        if algorithm.upper() not in ("HTTPS", ""):
            raise InvalidConfigurationError(f"{ENDPOINT_IDENTIFICATION}={algorithm}: expected HTTPS or nothing (no check)")
        return cls(
            keystore=properties.get(KEYSTORE) or None,
            keystore_password=properties.get(KEYSTORE_PASSWORD) or None,
            truststore=properties.get(TRUSTSTORE) or None,
            verify_hostname=algorithm != "",
        )


def _flag(properties: Mapping[str, str], name: str, default: bool) -> bool:
    value = properties.get(name, "true" if default else "false").strip().lower()
    if value not in ("true", "false"):
        raise InvalidConfigurationError(f"Invalid value {value!r} for configuration {name}: expected true or false")
    return value == "true"


def _check_pem(name: str, path: str, blocks: tuple[str, ...]) -> None:
    try:
        text = Path(path).read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        raise InvalidConfigurationError(f"{name}={path}: {exc.strerror or exc}") from None
    missing = [block for block in blocks if f"-----BEGIN {block}-----" not in text
               and f"-----BEGIN ENCRYPTED {block}-----" not in text]
    if missing:
        raise InvalidConfigurationError(
            f"{name}={path}: no PEM {' or '.join(missing)} in it; kctl reads PEM stores (type PEM) only"
        )


@dataclass(frozen=True)
class ClientSecurity:
    """What a ZooKeeper session authenticates with and how it connects.

    :param auth: ``(user, password)`` for ZooKeeper's digest scheme.
    :param sasl: ``(user, password)`` for a SASL DIGEST-MD5 login.
    :param tls: connect over TLS.
    """

    auth: tuple[str, str] | None = None
    sasl: tuple[str, str] | None = None
    tls: ZooKeeperTls | None = None

    def identities(self) -> tuple[str, ...]:
        """The session's identities as policies name them: ``user:digest``, ``sasl:user``."""
        found = [] if self.auth is None else [digest(*self.auth)]
        return (*found, *([] if self.sasl is None else [SASL_SCHEME + self.sasl[0]]))

    def creator_acl(self) -> tuple[AclEntry, ...]:
        """Kafka's ACL without a policy: the creating identities may do everything, everyone may
        read; open when the session has no identity."""
        identities = self.identities()
        return (*(acl_entry(ALL, identity) for identity in identities), WORLD_READ) if identities else OPEN

    def describe(self) -> str:
        """Who the session is, for error messages."""
        who = [f"digest user {self.auth[0]!r}"] if self.auth is not None else []
        who += [f"SASL user {self.sasl[0]!r}"] if self.sasl is not None else []
        return " and ".join(who) if who else "an unauthenticated session"

    def kazoo_options(self) -> dict[str, Any]:
        """``KazooClient`` keyword arguments (a fresh dict: kazoo changes its SASL options)."""
        options: dict[str, Any] = {}
        if self.auth is not None:
            options["auth_data"] = [("digest", f"{self.auth[0]}:{self.auth[1]}")]
        if self.sasl is not None:
            extras.require("puresasl", "SASL to ZooKeeper")  # kazoo's SASL
            options["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": self.sasl[0], "password": self.sasl[1]}
        if self.tls is not None:
            options.update(
                use_ssl=True, ca=self.tls.truststore, certfile=self.tls.keystore, keyfile=self.tls.keystore,
                keyfile_password=self.tls.keystore_password, verify_certs=True, check_hostname=self.tls.verify_hostname,
            )
        return options


def sasl_from_environment(sasl: str | None = None) -> tuple[str, str] | None:
    """The ``--zk-sasl`` value, or else ``KCTL_ZK_SASL``, as ``(user, password)`` (None when neither)."""
    text = sasl if sasl is not None else os.environ.get(SASL_ENV) or None
    return parse_auth(text) if text else None



JUTE_MAXBUFFER = 0xFFFFF
"""ZooKeeper's default ``jute.maxbuffer``: the largest request a server accepts (1 MiB - 1)."""

_OPCODES = {"create": 1, "delete": 2, "set": 5, "check": 13}  # ZooKeeper's, inside a multi
_EPHEMERAL, _SEQUENTIAL = 1, 2  # ZooKeeper's create flags
_GET_DATA = 4  # ZooKeeper's opcodes inside a multiRead
_GET_CHILDREN = 8
_MULTI_READ = 22
_MULTI = 14
_MULTI_HEADER = struct.Struct("!iBi")  # op type, done, error
_MULTI_END = _MULTI_HEADER.pack(-1, True, -1)
_OP_HEAD = struct.Struct("!iBii")  # an op's multi header, then its path's length
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")
_BAD_VERSION = -103  # ZooKeeper's BADVERSION, as the native codec reports it
_REQUEST_OVERHEAD = 1024  # xid, type and end header of a multi (17 bytes), and a margin
_TXN_SLACK = 8  # per op: how much larger than its request a multi's logged transaction may be
_RACE_ATTEMPTS = 10  # re-tries of a create-or-set or a recursive delete racing other writers
MULTI_OPS = 250
"""Operations per multi by default (``max_multi_ops``). A server takes a request through its stages
whole (prepared, logged, applied and answered), so smaller multis overlap better: the next is
prepared while the last is applied, its answer comes sooner and the client sends the next one
sooner. 1,000 left the server's stages waiting on each other (docs/performance.md)."""
MULTIS_IN_FLIGHT = 32
"""Multis a client has sent and not yet had answered, at most: 8,000 operations of the default
size. The server answers a session's requests in order, its heartbeats too: with every multi of a
20K-partition write sent at once, a ping waited behind 40,000 operations, and on a loaded machine
the client gave the connection up (kazoo: "outstanding heartbeat ping not received") in the middle
of the writes. 8,000 keep the server's request processors busy while the client takes each answer
and sends the next."""
_OPEN_PERMISSIONS = ((WRITE, "write"), (CREATE, "create"), (DELETE, "delete"), (ADMIN, "change the ACL of"))
"""What ``world:anyone`` may not do on a secured cluster's chroot, and the words for it."""
_PERMISSION_NEEDED = {
    "read": ("READ", False),
    "check": ("READ", False),
    "read the ACL of": ("READ or ADMIN", False),
    "set": ("WRITE", False),
    "create": ("CREATE", True),
    "delete": ("DELETE", True),
}
"""The permission an operation needs, and whether on the parent's ACL (ZooKeeper's checks)."""


# --- kazoo, imported on first use ------------------------------------------------------------------


@dataclass(frozen=True)
class _Kazoo:
    """The kazoo modules the store uses, and the polling handler class built on kazoo's."""

    client: Any
    exceptions: Any
    serialization: Any
    states: Any
    security: Any
    handler: Any


@functools.cache
def kazoo_modules() -> _Kazoo:
    try:
        import kazoo.client  # type: ignore[import-untyped]
        import kazoo.exceptions  # type: ignore[import-untyped]
        import kazoo.handlers.threading  # type: ignore[import-untyped]
        import kazoo.handlers.utils  # type: ignore[import-untyped]
        import kazoo.protocol.serialization  # type: ignore[import-untyped]
        import kazoo.protocol.states  # type: ignore[import-untyped]
        import kazoo.security  # type: ignore[import-untyped]
    except ImportError as exc:
        raise extras.missing("kazoo", "the zookeeper store", exc) from exc
    handler = _polling_handler(kazoo.handlers.threading.SequentialThreadingHandler, kazoo.handlers.utils.fileobj_to_fd)
    return _Kazoo(
        kazoo.client, kazoo.exceptions, kazoo.protocol.serialization, kazoo.protocol.states, kazoo.security, handler
    )


_POLL_READ = select.POLLIN | select.POLLPRI


def _polling_handler(base: type, fileobj_to_fd: Callable[[object], int]) -> type:
    """kazoo's threading handler with a ``select`` that keeps its ``poll`` object.

    kazoo's connection thread calls ``select`` for every request it sends and every response it
    reads; the stock handler builds and closes an epoll selector each time, which costs about half
    of the client's throughput. ``poll`` keeps no state in the kernel, so a poll object per set of
    descriptors can be kept (per thread) even when a reconnect reuses a descriptor number.
    """

    class PollingHandler(base):  # type: ignore[misc]
        name = "kctl_polling_threading_handler"

        def __init__(self) -> None:
            super().__init__()
            self._pollers = threading.local()

        def select(
            self, rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any], timeout: float | None = None
        ) -> tuple[list[Any], list[Any], list[Any]]:
            reads = tuple(map(fileobj_to_fd, rlist))
            writes = tuple(map(fileobj_to_fd, wlist))
            cache: dict[tuple[tuple[int, ...], tuple[int, ...]], Any] | None = getattr(self._pollers, "cache", None)
            if cache is None:
                cache = self._pollers.cache = {}
            poller = cache.get((reads, writes))
            if poller is None:
                if len(cache) > 16:  # descriptors of past connections
                    cache.clear()
                poller = cache[reads, writes] = select.poll()
                for fd in set(reads) | set(writes):
                    poller.register(fd, (_POLL_READ if fd in reads else 0) | (select.POLLOUT if fd in writes else 0))
            ready = dict(poller.poll(None if timeout is None else timeout * 1000))
            readable = [obj for obj, fd in zip(rlist, reads) if ready.get(fd, 0) & ~select.POLLOUT]
            writable = [obj for obj, fd in zip(wlist, writes) if ready.get(fd, 0) & ~_POLL_READ]
            return readable, writable, []

    return PollingHandler


def kazoo_client(hosts: str, security: ClientSecurity, **options: Any) -> Any:
    """A ``KazooClient`` logging in and connecting as ``security`` says.

    A server that requires SASL answers a failed login with "session closed, SASL required",
    which kazoo (2.11) lets escape its connection loop: the thread dies and requests wait for
    ever. Turned into the ``AuthFailedError`` of any refused login, kazoo ends the session, and
    every request fails with it.
    """
    kz = kazoo_modules()
    client = kz.client.KazooClient(hosts=hosts, **options, **security.kazoo_options())
    connection = client._connection
    connect = connection._connect

    def connect_or_fail(*args: Any) -> Any:
        try:
            return connect(*args)
        except kz.exceptions.SessionClosedRequireSaslError as exc:
            raise kz.exceptions.AuthFailedError("the server closed the session after the SASL login") from exc

    connection._connect = connect_or_fail
    return client


def kazoo_acl(acl: Sequence[AclEntry]) -> list[Any]:
    """An ACL as kazoo's ``ACL`` objects."""
    security = kazoo_modules().security
    return [security.ACL(a.perms, security.Id(a.scheme, a.id)) for a in acl]


class _MultiRead:
    """ZooKeeper's ``multiRead`` request (3.6+): many getData/getChildren reads, one round trip.

    kazoo has no API for it but sends any object shaped like its requests (``type``,
    ``serialize``, ``deserialize``). Each result is ``(data, stat)``, a list of child names, or the
    kazoo exception of that read (NoNodeError …); one failed read does not affect the others.
    """

    __slots__ = ("_kazoo", "_reads")
    type = _MULTI_READ

    def __init__(self, reads: Sequence[tuple[int, str]], kz: _Kazoo) -> None:
        self._reads = reads
        self._kazoo = kz

    def __repr__(self) -> str:
        return f"MultiRead({len(self._reads)} reads, first {self._reads[0][1] if self._reads else None})"

    def serialize(self) -> bytearray:
        out = bytearray()
        for opcode, path in self._reads:
            encoded = path.encode()
            out += _MULTI_HEADER.pack(opcode, False, -1)
            out += _INT.pack(len(encoded))
            out += encoded
            out.append(0)  # no watch
        out += _MULTI_END
        return out

    def deserialize(self, buffer: bytes, offset: int) -> list[object]:
        """The results; a length or count the reply cannot hold is an error (as in jute, where only
        a buffer's length may be -1, for null), so that a hostile reply cannot make it loop."""
        results: list[object] = []
        stat_type = self._kazoo.states.ZnodeStat

        def length_at(at: int, nullable: bool = False) -> int:
            length: int = _INT.unpack_from(buffer, at)[0]
            if not (nullable and length == -1) and not 0 <= length <= len(buffer) - at - _INT.size:
                raise ValueError(f"a multiRead reply announces {length} bytes at byte {at} of {len(buffer)}")
            return length

        while True:
            opcode, done, _ = _MULTI_HEADER.unpack_from(buffer, offset)
            offset += _MULTI_HEADER.size
            if done:
                return results
            if opcode == _GET_DATA:
                length = length_at(offset, nullable=True)
                offset += _INT.size
                data = bytes(buffer[offset : offset + length]) if length >= 0 else None
                offset += max(length, 0)
                results.append((data, stat_type._make(_STAT.unpack_from(buffer, offset))))
                offset += _STAT.size
            elif opcode == _GET_CHILDREN:
                count = length_at(offset)  # each child takes at least its 4-byte length
                offset += _INT.size
                children = []
                for _ in range(count):
                    length = length_at(offset)
                    offset += _INT.size
                    children.append(bytes(buffer[offset : offset + length]).decode())
                    offset += length
                results.append(children)
            else:  # an error result
                code = _INT.unpack_from(buffer, offset)[0]
                offset += _INT.size
                results.append(self._kazoo.exceptions.EXCEPTIONS[code]())


class _Raw:
    """A request whose body the native engine encoded (``kctl._engine``'s ZooKeeper codec) and
    whose answer it decodes: kazoo sends the bytes and hands back the response body as it came.

    kazoo post-processes a multi's answer (it "unchroots" the paths of created nodes) by iterating
    it, so the body is answered inside a one-item list.
    """

    __slots__ = ("_body", "type")

    def __init__(self, opcode: int, body: bytes) -> None:
        self.type = opcode
        self._body = body

    def __repr__(self) -> str:
        return f"Raw(type {self.type}, {len(self._body)} bytes)"

    def serialize(self) -> bytes:
        return self._body

    def deserialize(self, buffer: bytes, offset: int) -> list[bytes]:
        return [bytes(buffer[offset:])]


class _Multi(_Raw):
    """ZooKeeper's multi request (opcode 14) from operations the client encoded already.

    kazoo's own ``Transaction`` is encoded op by op on kazoo's connection thread, where it competes
    for the GIL with the caller preparing the next multis; this one is a single ``bytes``. Answers
    are decoded (and unchrooted, by opcode) as kazoo's.
    """

    __slots__ = ("_kazoo",)

    def __init__(self, body: bytes, kz: _Kazoo) -> None:
        super().__init__(_MULTI, body)
        self._kazoo = kz

    def serialize(self) -> bytes:
        return self._body + _MULTI_END

    def deserialize(self, buffer: bytes, offset: int) -> list[object]:  # type: ignore[override]
        return self._kazoo.serialization.Transaction.deserialize(buffer, offset)  # type: ignore[no-any-return]


def _string(text: str) -> bytes:
    """A jute string: its UTF-8 length, then its bytes."""
    encoded = text.encode()
    return _INT.pack(len(encoded)) + encoded


# --- Multi transactions ------------------------------------------------------------------------------


class _Failure(NamedTuple):
    """Why an item's multi failed: which of the item's ops failed, and kazoo's error (see
    :class:`~kctl.stores.znode.Failure` for the error as kctl's)."""

    op: int
    error: Exception


_ItemResult = list[Any] | _Failure


# --- Watches -------------------------------------------------------------------------------------------

_EXISTENCE = frozenset({ChangeType.CREATED, ChangeType.DELETED})
_DATA = frozenset({ChangeType.DATA_CHANGED})
_CHILDREN = frozenset({ChangeType.CHILDREN_CHANGED})


class _Target(NamedTuple):
    """What a watch kind observes: the znode for a key, whether its children, the changes reported."""

    path: Callable[[Any], str]
    children: bool
    changes: frozenset[ChangeType]


_TARGETS = {
    WatchKind.CONTROLLER: _Target(lambda _: paths.CONTROLLER, False, _EXISTENCE | _DATA),
    WatchKind.BROKER_IDS: _Target(lambda _: paths.BROKER_IDS, True, _CHILDREN),
    WatchKind.BROKER: _Target(paths.broker, False, _DATA),
    WatchKind.TOPICS: _Target(lambda _: paths.BROKER_TOPICS, True, _CHILDREN),
    WatchKind.TOPIC: _Target(paths.topic, False, _DATA),
    WatchKind.DELETE_TOPICS: _Target(lambda _: paths.DELETE_TOPICS, True, _CHILDREN),
    WatchKind.REASSIGN_PARTITIONS: _Target(lambda _: paths.REASSIGN_PARTITIONS, False, _EXISTENCE | _DATA),
    WatchKind.PREFERRED_REPLICA_ELECTION: _Target(lambda _: paths.PREFERRED_REPLICA_ELECTION, False, _EXISTENCE),
    WatchKind.ISR_CHANGE_NOTIFICATION: _Target(lambda _: paths.ISR_CHANGE_NOTIFICATION, True, _CHILDREN),
    WatchKind.LOG_DIR_EVENT_NOTIFICATION: _Target(lambda _: paths.LOG_DIR_EVENT_NOTIFICATION, True, _CHILDREN),
    WatchKind.PARTITION_STATE: _Target(paths.partition_state, False, _DATA),
    WatchKind.TOPIC_CONFIG: _Target(paths.topic_config, False, frozenset({ChangeType.CREATED}) | _DATA),
}
"""Every kind but SESSION, whose events reach the listeners without a ZooKeeper watch."""

_FIRED = {"CREATED": ChangeType.CREATED, "DELETED": ChangeType.DELETED, "CHANGED": ChangeType.DATA_CHANGED}
"""The change a fired data or existence watch reports, by kazoo's event type."""

_Snapshot = tuple[int, int] | None
"""What a watch last saw: (czxid, mzxid) of a znode, (czxid, cversion) of a parent, None if absent."""


class _Watch:
    """A registration, and the callable kazoo calls when its one-shot ZooKeeper watch fires."""

    __slots__ = ("active", "armed", "children", "changes", "key", "kind", "path", "snapshot", "store")

    def __init__(self, store: ZooKeeperClient, kind: WatchKind, key: object, target: _Target) -> None:
        self.store = store
        self.kind = kind
        self.key = key
        self.path = target.path(key)
        self.children = target.children
        self.changes = target.changes
        self.active = True  # registered (watch() without a later unwatch())
        self.armed = False  # a ZooKeeper watch is set on the server
        self.snapshot: _Snapshot = None

    def __call__(self, event: Any) -> None:
        self.store._fired(self, event)

    def events(self, changes: Iterable[ChangeType]) -> list[WatchEvent]:
        return [WatchEvent(self.kind, change, self.key) for change in changes if change in self.changes]


def _deactivate(entries: Iterable[_Watch]) -> None:
    for entry in entries:
        entry.active = False


def _node_snapshot(stat: Any) -> _Snapshot:
    """What a data or existence watch sees of a node: (czxid, mzxid), None when it is absent."""
    return None if stat is None else (int(stat.czxid), int(stat.mzxid))


def _fired_changes(children: bool, event_type: str, after: _Snapshot) -> list[ChangeType]:
    """The changes a fired ZooKeeper watch reports, given what re-arming it found: a node that was
    created (or changed) and is gone again was also deleted, one deleted and back was recreated,
    and one created and written since (its mzxid past its czxid) also changed."""
    if children:
        return [ChangeType.CHILDREN_CHANGED] if event_type == "CHILD" else []
    change = _FIRED[event_type]
    if (event_type != "DELETED") == (after is not None):
        if event_type == "CREATED" and after is not None and after[1] != after[0]:
            return [change, ChangeType.DATA_CHANGED]
        return [change]
    return [change, ChangeType.CREATED if after is not None else ChangeType.DELETED]


def _missed_changes(children: bool, before: _Snapshot, after: _Snapshot) -> list[ChangeType]:
    """The changes made while the connection was down (the watch fired for nobody)."""
    if before == after:
        return []
    if children:
        return [ChangeType.CHILDREN_CHANGED] if before is not None and after is not None else []
    if before is None:
        return [ChangeType.CREATED]
    if after is None:
        return [ChangeType.DELETED]
    if before[0] != after[0]:
        return [ChangeType.DELETED, ChangeType.CREATED]
    return [ChangeType.DATA_CHANGED]


def split_connect_string(hosts: str, chroot: str) -> tuple[str, str]:
    """Kafka's ``zookeeper.connect`` may end with the chroot (``h1:2181,h2:2181/kafka``)."""
    servers, slash, suffix = hosts.partition("/")
    if slash and chroot:
        raise ValueError(f"the chroot is given twice: in hosts {hosts!r} and as chroot={chroot!r}")
    chroot = f"/{suffix}" if slash else chroot
    if chroot and not chroot.startswith("/"):
        raise ValueError(f"a chroot is an absolute path, not {chroot!r}")
    return servers, chroot.rstrip("/")



class ZooKeeperClient:
    """A session on a ZooKeeper ensemble, with Kafka's znode layout under ``chroot``: the znode
    client of :class:`~kctl.stores.zookeeper.ZooKeeperStore`.

    :param hosts: ZooKeeper's connect string, ``host:port[,host:port…][/chroot]``.
    :param chroot: the znode under which the cluster lives (created if missing).
    :param session_timeout: seconds without contact before the server expires the session.
    :param auth: ``(user, password)`` for ZooKeeper's digest scheme. Without ``acl``, every znode
        this store creates is then writable by its identities only and readable by anyone.
    :param sasl: ``(user, password)`` for a SASL DIGEST-MD5 login (the identity ``sasl:user``).
    :param tls: connect over TLS (:class:`~kctl.stores.zkclient.ZooKeeperTls`); ``hosts`` then
        names the servers' ``secureClientPort``.
    :param acl: the cluster's :class:`~kctl.stores.zkacl.AclPolicy`: every znode this store
        creates gets the policy's ACL for its path (whose identity may write what, by role). A
        store with the controller identity creates Kafka's persistent paths; any other waits up
        to ``connection_timeout`` for them. A store under a policy warns when the chroot's own
        ACL lets anyone change it, and ignores broker registrations that
        :meth:`~kctl.stores.zkacl.AclPolicy.genuine_registration` refuses.
    :param connection_timeout: seconds to wait for the first connection.
    :param jute_maxbuffer: the servers' ``jute.maxbuffer``; no request is made larger.
    :param max_multi_ops: operations per multi at most.
    :param max_read_ops: reads per ``multiRead`` at most.
    :param multi_read: False for servers older than 3.6, which lack ``multiRead``: bulk reads are
        then pipelined single reads.

    :raises StoreUnavailableError: when no server answers within ``connection_timeout``.

    ``hosts`` and ``chroot`` hold the connect string's servers and the chroot, ``identities`` the
    session's identities as policies name them, ``acl_policy`` the policy (read them only).
    """

    def __init__(
        self,
        hosts: str,
        chroot: str = "",
        *,
        session_timeout: float = 18.0,
        auth: tuple[str, str] | None = None,
        sasl: tuple[str, str] | None = None,
        tls: ZooKeeperTls | None = None,
        acl: AclPolicy | None = None,
        connection_timeout: float = 15.0,
        jute_maxbuffer: int = JUTE_MAXBUFFER,
        max_multi_ops: int = MULTI_OPS,
        max_read_ops: int = 1000,
        multi_read: bool = True,
    ) -> None:
        kz = self._kazoo = kazoo_modules()
        servers, chroot = split_connect_string(hosts, chroot)
        self.chroot = ""  # until it exists: requests carry it, and kazoo's, from then on
        self.hosts = servers
        self._options: dict[str, Any] = dict(
            session_timeout=session_timeout,
            auth=auth,
            sasl=sasl,
            tls=tls,
            acl=acl,
            connection_timeout=connection_timeout,
            jute_maxbuffer=jute_maxbuffer,
            max_multi_ops=max_multi_ops,
            max_read_ops=max_read_ops,
            multi_read=multi_read,
        )
        self._session_timeout = session_timeout
        self._response_timeout = max(60.0, 3 * session_timeout)
        self._max_request_bytes = jute_maxbuffer - _REQUEST_OVERHEAD
        self._max_multi_ops = max_multi_ops
        self._max_read_ops = max_read_ops
        self._multi_read = multi_read
        self._lock = threading.Lock()
        self._listeners: tuple[WatchListener, ...] = ()
        self._watches: dict[tuple[WatchKind, object], _Watch] = {}
        self._connected = threading.Event()
        self._expired = threading.Event()
        self._closed = False
        self._suspended = False
        self._session_id = 0

        self._security = ClientSecurity(auth, sasl, tls)
        self.identities = self._security.identities()
        self.acl_policy = acl
        self._creating_chroot = False  # the chroot and its ancestors get the policy's root ACL
        self._acl_wires: dict[tuple[AclEntry, ...], bytes] = {}
        self._creator_acl = acl.acl("") if acl is not None else self._security.creator_acl()
        self._connection_log = _ConnectionLog(logging.getLogger("kazoo.client"))
        self._client = kazoo_client(
            servers,
            self._security,
            timeout=session_timeout,
            handler=kz.handler(),
            default_acl=kazoo_acl(self._creator_acl),
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 1.5, "max_delay": 1.0},
            logger=self._connection_log,
        )
        self._client.add_listener(self._on_state)
        try:
            self._client.start(timeout=connection_timeout)
        except self._client.handler.timeout_exception:
            if self._client.client_state == kz.states.KeeperState.AUTH_FAILED or self._connection_log.login_refused():
                raise self._login_refused() from None
            over = " over TLS" if tls is not None else ""
            raise StoreUnavailableError(
                f"cannot connect to ZooKeeper at {servers}{over} within {connection_timeout:g}s"
                + self._connection_log.last_error()
            ) from None
        try:
            if chroot:
                self._creating_chroot = True
                try:
                    self.ensure_paths([chroot])
                finally:
                    self._creating_chroot = False
                self._client.chroot = self.chroot = chroot
            if acl is not None or self.identities:
                self._warn_if_open_chroot()
            if acl is None or acl.is_controller(self.identities):
                self.ensure_paths(paths.PERSISTENT_PATHS if acl is None else CONTROLLER_CREATED_PATHS)
            else:
                self._await_paths(CONTROLLER_CREATED_PATHS, connection_timeout)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        state = "closed" if self._closed else "expired" if self._expired.is_set() else "live"
        return f"{self.hosts}{self.chroot}, session={self._session_id:#x}, {state}"

    def acl_of(self, path: str) -> list[tuple[int, str, str]]:
        """The ACL of the znode at ``path``: ``(permission bits, scheme, id)`` entries."""
        return [(e.perms, e.scheme, e.id) for e in self._acl_and_stat(path)[0]]

    def _acl_and_stat(self, path: str) -> tuple[list[AclEntry], Any]:
        acls, stat = self._result(self._ask(lambda: self._client.get_acls_async(path)), path, "read the ACL of")
        return [AclEntry(int(a.perms), str(a.id.scheme), str(a.id.id)) for a in acls], stat

    def _warn_if_open_chroot(self) -> None:
        """Log a warning when anyone may change the chroot (the root znode without one): its
        children, such as ``/controller``, may then be deleted and created by anyone."""
        try:
            acl, _ = self._acl_and_stat("/")
        except StoreError as exc:
            logger.warning("Cannot read the ACL of %s to check it: %s", self.chroot or "/", exc)
            return
        allowed = [name for bit, name in _OPEN_PERMISSIONS
                   for e in acl if e.scheme == "world" and e.id == "anyone" and e.perms & bit]
        if allowed:
            where = f"the chroot {self.chroot}" if self.chroot else "the root znode / (no chroot)"
            logger.warning(
                "The ACL of %s lets anyone %s its children: any ZooKeeper client can then delete and create "
                "/controller, /controller_epoch and every top-level znode of the cluster, whatever their own ACLs. "
                "Give it an ACL like the policy's (setAcl %s %s) or move the cluster to a new chroot.",
                where, " and ".join(allowed), self.chroot or "/",
                ",".join(f"{e.scheme}:{e.id}:{_perms(e.perms)}" for e in self._creator_acl),
            )

    @property
    def session_id(self) -> int:
        """ZooKeeper's id of the current session."""
        return self._session_id

    # --- Session and watches -------------------------------------------------------------------

    def expire_session(self) -> None:
        """Have the server expire this session, as a long network partition would.

        The test harnesses' way: a second client takes the session over (same id and password) and
        closes it; the server deletes its ephemeral nodes and this client then learns that the
        session expired. Returns once it has (``SESSION``/``EXPIRED`` is on its way to listeners).
        """
        deadline = time.monotonic() + max(30.0, 2 * self._session_timeout)
        while not self._expired.is_set() and not self._closed:
            client_id = self._client.client_id
            if client_id is not None:
                twin = kazoo_client(self.hosts, self._security, client_id=client_id, timeout=self._session_timeout)
                try:
                    twin.start(timeout=self._options["connection_timeout"])
                    twin.stop()
                except twin.handler.timeout_exception:
                    pass
                finally:
                    twin.close()
            # The original client may win the session back before the twin closes it: try again.
            if not self._expired.wait(0.5) and time.monotonic() > deadline:
                raise StoreUnavailableError(f"could not expire session {self._session_id:#x} at {self.hosts}")

    def reconnect(self) -> None:
        """After expiry, continue on a new session with the same listeners and watches.

        Listeners get ``SESSION``/``RECONNECTED`` once the watches are armed again. A live session
        is left as it is; a closed store cannot reconnect.
        """
        if self._closed:
            raise StoreUnavailableError("the store was closed")
        if not self._expired.is_set():
            return
        timeout = self._options["connection_timeout"]
        if not self._connected.wait(timeout):
            raise StoreUnavailableError(f"cannot connect to ZooKeeper at {self.hosts} within {timeout:g}s")
        self._expired.clear()
        resumed = threading.Event()
        self._dispatch(self._resume, resumed)
        if not resumed.wait(self._response_timeout):
            raise StoreUnavailableError(f"could not re-arm the watches at {self.hosts}")

    def close(self) -> None:
        """End the session: the server deletes its ephemeral nodes; listeners hear nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._connected.clear()
        self._client.stop()
        self._client.close()

    def add_listener(self, listener: WatchListener) -> None:
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def remove_listener(self, listener: WatchListener) -> None:
        with self._lock:
            if listener in self._listeners:
                listeners = list(self._listeners)
                listeners.remove(listener)
                self._listeners = tuple(listeners)

    def watch(self, kind: WatchKind, key: object = None) -> None:
        """Register a watch; while the session is expired it is only recorded, and armed by
        :meth:`reconnect` (registrations belong to the client, as in the memory store)."""
        self.watch_all(kind, [key])

    def watch_all(self, kind: WatchKind, keys: Iterable[object]) -> None:
        """:meth:`watch` for many keys of one kind (a failover watches every topic and broker):
        the watches of nodes' data are set by pipelined requests, one round trip for them all. A
        key whose watch cannot be set is left unregistered, and the first such error is raised
        once the others are set."""
        targets = [(key, _target(kind, key)) for key in keys]  # every key's type checked first
        entries: list[_Watch] = []
        with self._lock:
            for key, target in targets:
                if target is None:
                    continue  # SESSION events reach every listener
                entry = self._watches.get((kind, key))
                if entry is None or not entry.active:
                    # A new watcher: an unwatched one may still fire for a change made before now.
                    entry = self._watches[kind, key] = _Watch(self, kind, key, target)
                elif entry.armed:
                    continue
                entries.append(entry)
        if not entries:
            return
        try:
            failed = self._arm_all(entries)
        except StoreUnavailableError:
            if self._closed or self._expired.is_set():
                return  # recorded: armed by reconnect()
            _deactivate(entries)
            raise
        except BaseException:
            _deactivate(entries)
            raise
        if failed is not None:
            raise failed

    def unwatch(self, kind: WatchKind, key: object = None) -> None:
        with self._lock:
            entry = self._watches.get((kind, key))
            if entry is not None:
                entry.active = False  # ZooKeeper cannot drop a watch: its next firing is ignored
                if not entry.armed:
                    del self._watches[kind, key]

    # --- The znode client protocol (kctl.stores.znode) ----------------------------------------------

    @property
    def options(self) -> dict[str, Any]:
        """The keyword arguments this client was made with (another session of the same cluster)."""
        return dict(self._options)

    @property
    def multi_read(self) -> bool:
        return self._multi_read

    def get_data(self, paths: Sequence[str], per_request: int | None = None) -> list[Found | StoreError]:
        no_node = self._kazoo.exceptions.NoNodeError
        found: list[Found | StoreError] = []
        for path, answer in zip(paths, self._read([(_GET_DATA, path) for path in paths], per_request)):
            if isinstance(answer, no_node):
                found.append(None)
            elif isinstance(answer, Exception):
                found.append(self._error(answer, path, "read"))
            else:
                found.append((answer[0], _stat(answer[1])))
        return found

    def get_children(self, paths: Sequence[str]) -> list[list[str] | None]:
        no_node = self._kazoo.exceptions.NoNodeError
        return [
            None if isinstance(answer, no_node) else sorted(self._result(answer, path))
            for path, answer in zip(paths, self._read([(_GET_CHILDREN, path) for path in paths]))
        ]

    def get_partition_states(self, partitions: Sequence[TopicPartition],
                             per_request: int | None = None) -> list[Found | StoreError]:
        return self.get_data([paths.partition_state(tp) for tp in partitions], per_request)

    def set_partition_states(self, partitions: Sequence[TopicPartition], data: Sequence[object],
                             versions: Sequence[int], fence: int) -> list[int | StoreError]:
        items = ([Op("set", paths.partition_state(tp), value, version)]
                 for tp, value, version in zip(partitions, data, versions))
        return [outcome.error if isinstance(outcome, Failure) else outcome[0].version  # type: ignore[union-attr]  # a set answers its stat
                for outcome in self.multi(items, fence)]

    def exists(self, path: str) -> Stat | None:
        stat = self._result(self._ask(lambda: self._client.exists_async(path)), path)
        return None if stat is None else _stat(stat)

    def create(self, path: str, data: object, *, ephemeral: bool = False) -> Stat:
        answer = self._ask(
            lambda: self._client.create_async(
                path, data, acl=kazoo_acl(self._acl(path)), ephemeral=ephemeral, include_data=True
            )
        )
        return _stat(self._result(answer, path, "create")[1])

    def multi(self, items: Iterable[Sequence[Op]], fence: int) -> list[ItemResult]:
        """See :meth:`_multi`; results and errors as kctl's. ``items`` is consumed as the multis
        fill (a generator's first multis are on their way while it makes the rest)."""
        listed: list[Sequence[Op]] = []

        def consumed() -> Iterator[Sequence[Op]]:
            for ops in items:
                listed.append(ops)
                yield ops

        outcomes = self._multi(consumed(), fence)
        return [
            Failure(outcome.op, self._op_error(ops[outcome.op], outcome.error)) if isinstance(outcome, _Failure)
            else [_stat(r) if isinstance(r, self._kazoo.states.ZnodeStat) else r if isinstance(r, str) else None
                  for r in outcome]
            for ops, outcome in zip(listed, outcomes)
        ]

    def drop_unproven_registrations(self, brokers: dict[int, tuple[BrokerInfo, int]]) -> None:
        """Remove (with a warning) the registrations of ids with identities of their own that the
        policy cannot trust to be that broker's: another broker identity created them."""
        policy = self.acl_policy
        assert policy is not None
        checked = [broker_id for broker_id in brokers if policy.has_own_identities(broker_id)]
        answers = self._gather([functools.partial(self._client.get_acls_async, paths.broker(b)) for b in checked])
        for broker_id, answer in zip(checked, answers):
            path = paths.broker(broker_id)
            if isinstance(answer, self._kazoo.exceptions.NoNodeError):
                reason: str | None = "it is gone"
            elif isinstance(answer, Exception):
                reason = str(self._error(answer, path, "read the ACL of"))
            elif int(answer[1].czxid) != brokers[broker_id][1]:
                reason = "it was registered again while being read"
            else:
                acl = [AclEntry(int(a.perms), str(a.id.scheme), str(a.id.id)) for a in answer[0]]
                reason = policy.genuine_registration(
                    broker_id, acl, int(answer[1].version), int(answer[1].aversion), self.identities
                )
            if reason is not None:
                del brokers[broker_id]
                logger.warning("Ignoring the registration of broker %d at %s: %s", broker_id, path, reason)

    # --- The native codec's transport (kctl._engine) ---------------------------------------------

    def native_zk(self) -> tuple[str, int, int, int, bool, bytes | None]:
        """What the native codec needs to build requests: the chroot, the ops per multi, the reads
        per multiRead, the bytes of ops per request, whether the servers have multiRead, and the
        ACL (jute-encoded) of every znode this client creates, None when an ACL policy decides
        it per path."""
        acl = self._creator_acl_wire if self.acl_policy is None else None
        return self.chroot, self._max_multi_ops, self._max_read_ops, self._max_request_bytes, self._multi_read, acl

    def native_exchange(self, opcode: int, requests: Sequence[tuple[bytes, str]]) -> list[bytes]:
        """Send complete request bodies of type ``opcode`` (multi or multiRead), pipelined, and
        return the response bodies in order. Each ``(body, path)`` names the znode an error of
        the request as a whole is reported for. Requests lost with the connection are sent again
        once the client has reconnected, as every request of the store."""
        answers = self._gather([functools.partial(self._send_raw, opcode, body) for body, _ in requests],
                               MULTIS_IN_FLIGHT if opcode == _MULTI else None)
        return [self._result(answer, path)[0] for answer, (_, path) in zip(answers, requests)]

    def native_error(self, path: str, code: int) -> StoreError:
        """kctl's error for ZooKeeper's error ``code`` on ``path`` (without the chroot)."""
        return self._error(self._kazoo.exceptions.EXCEPTIONS[code](), path)

    def native_create_error(self, path: str, code: int) -> StoreError:
        """kctl's error for a create of ``path`` (without the chroot) that failed with ``code``."""
        return self._op_error(Op("create", path), self._kazoo.exceptions.EXCEPTIONS[code]())

    def native_fence_error(self, code: int, fence: int) -> ControllerMovedError:
        """The error of a multi whose ``check(/controller_epoch, fence)`` failed with ``code``."""
        return self._fence_failed(fence, self._kazoo.exceptions.EXCEPTIONS[code]())

    def native_limit_error(self, path: str, size: int) -> StoreError:
        """The error of a write to ``path`` too large for any request."""
        return self._too_large(path, size)

    def native_wire_error(self, message: str) -> StoreError:
        """A response the native codec could not decode."""
        return StoreError(f"ZooKeeper at {self.hosts}: {message}")

    def _send_raw(self, opcode: int, body: bytes) -> Any:
        result = self._client.handler.async_result()
        self._client._call(_Raw(opcode, body), result)  # kazoo's request queue
        return result

    # --- Requests ------------------------------------------------------------------------------

    def _check_live(self) -> None:
        if self._closed:
            raise StoreUnavailableError("the store was closed")
        if self._expired.is_set():
            raise StoreUnavailableError(
                f"session {self._session_id:#x} at {self.hosts} has expired; reconnect() opens a new session"
            )

    def _gather(self, sends: Iterable[Callable[[], Any]], in_flight: int | None = None) -> list[Any]:
        """Send requests pipelined, each as soon as it is produced (and, with ``in_flight``, once
        fewer than that many are unanswered), and wait for every answer: a value, or kazoo's
        exception for that request. Requests lost with the connection are sent again once the
        client has reconnected (the session lives on); an ended session raises."""
        exceptions = self._kazoo.exceptions
        timeout_error = self._client.handler.timeout_exception
        self._check_live()
        calls: list[Callable[[], Any]] = []
        started: list[tuple[int, Any]] = []
        for send in sends:
            if in_flight is not None and len(started) >= in_flight:
                started[-in_flight][1].wait(self._response_timeout)  # its outcome is read below
            started.append((len(calls), send()))
            calls.append(send)
        answers: list[Any] = [None] * len(calls)
        deadline = None
        while True:
            lost = []
            for i, result in started:
                try:
                    answers[i] = result.get(timeout=self._response_timeout)
                except exceptions.ConnectionLoss:
                    lost.append(i)
                except exceptions.SessionExpiredError as exc:  # also ConnectionClosedError
                    self._check_live()
                    raise StoreUnavailableError(f"the ZooKeeper session at {self.hosts} ended") from exc
                except exceptions.SessionClosedRequireSaslError:
                    raise StoreUnavailableError(
                        f"ZooKeeper at {self.hosts} closes sessions without a SASL login, and {self._security.describe()} "
                        "made none (--zk-sasl)"
                    ) from None
                except exceptions.AuthFailedError:
                    raise self._login_refused() from None
                except exceptions.KazooException as exc:
                    answers[i] = exc
                except timeout_error:
                    raise StoreUnavailableError(
                        f"no answer from ZooKeeper at {self.hosts} within {self._response_timeout:g}s"
                    ) from None
            if not lost:
                return answers
            if deadline is None:
                deadline = time.monotonic() + self._session_timeout
            self._await_connection(deadline)
            started = [(i, calls[i]()) for i in lost]

    def _login_refused(self) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"ZooKeeper at {self.hosts} refused the login of {self._security.describe()} "
            "(a wrong SASL user or password, or a server without SASL)" + self._connection_log.last_error()
        )

    def _await_connection(self, deadline: float) -> None:
        """Wait until the client has reconnected, noticing meanwhile that the store was closed or
        its session expired; past ``deadline`` (the connection keeps being lost) give up."""
        while True:
            self._check_live()
            if time.monotonic() > deadline:
                raise StoreUnavailableError(
                    f"the connection to ZooKeeper at {self.hosts} was lost and not usable again within "
                    f"{self._session_timeout:g}s (a server drops a request larger than its jute.maxbuffer)"
                )
            if self._connected.wait(0.25):
                return

    def _ask(self, send: Callable[[], Any]) -> Any:
        return self._gather([send])[0]

    def _result(self, answer: Any, path: str, operation: str = "read") -> Any:
        """The answer, or the store error its failure stands for."""
        if isinstance(answer, Exception):
            raise self._error(answer, path, operation)
        return answer

    def _error(self, exc: Exception, path: str, operation: str = "access") -> StoreError:
        """kazoo's error for ``operation`` on ``path`` as kctl's (ZooKeeper's codes keep their names)."""
        exceptions = self._kazoo.exceptions
        if isinstance(exc, exceptions.NoNodeError):
            return NoNodeError(f"{path} does not exist", path)
        if isinstance(exc, exceptions.NodeExistsError):
            return NodeExistsError(f"{path} already exists", path)
        if isinstance(exc, exceptions.BadVersionError):
            return BadVersionError(f"{path} is not at the expected version", path)
        if isinstance(exc, exceptions.NotEmptyError):
            return StoreError(f"cannot delete {path}: it has children", path)
        if isinstance(exc, exceptions.NoAuthError):
            return self._no_auth(path, operation)
        if isinstance(exc, exceptions.NoChildrenForEphemeralsError):
            return StoreError(f"cannot create {path}: its parent is ephemeral", path)
        return StoreError(f"{path}: ZooKeeper error {type(exc).__name__} {exc}", path)

    def _op_error(self, op: Op, exc: Exception) -> StoreError:
        if op.kind == "create" and isinstance(exc, self._kazoo.exceptions.NoNodeError):
            return NoNodeError(f"cannot create {op.path}: its parent does not exist", op.path)
        return self._error(exc, op.path, op.kind)

    def _no_auth(self, path: str, operation: str) -> NoAuthError:
        """ZooKeeper refused ``operation`` on ``path``: say which ACL lacks which permission for
        whom (creating and deleting are decided by the parent's ACL)."""
        needed = _PERMISSION_NEEDED.get(operation)
        if needed is None:
            reason = f"its ACL gives {self._security.describe()} no permission to"
        else:
            permission, of_parent = needed
            node = path.rpartition("/")[0] if of_parent else path
            shown = node or ("/" if not self.chroot else f"the chroot {self.chroot}")
            reason = f"the ACL of {shown} gives {self._security.describe()} no {permission} permission"
        return NoAuthError(f"not authorised to {operation} {path}: {reason}", path)

    # --- Reads -----------------------------------------------------------------------------------

    def _read(self, reads: Sequence[tuple[int, str]], per_request: int | None = None) -> list[Any]:
        """Bulk reads (``(opcode, path)``), answered in order: ``(data, stat)`` for getData, a
        list of names for getChildren, or kazoo's exception (NoNodeError …) for that read."""
        if not reads:
            return []
        if not self._multi_read or len(reads) == 1:  # a single read needs no multiRead
            client = self._client
            return self._gather(
                [
                    functools.partial(client.get_async if opcode == _GET_DATA else client.get_children_async, path)
                    for opcode, path in reads
                ]
            )
        size = min(per_request or self._max_read_ops, self._max_read_ops)
        chroot = self.chroot
        requests = [[(op, chroot + path) for op, path in reads[i : i + size]] for i in range(0, len(reads), size)]
        answers = self._gather([functools.partial(self._send_multi_read, request) for request in requests])
        results: list[Any] = []
        for request, answer in zip(requests, answers):
            results.extend(self._result(answer, request[0][1]))
        return results

    def _send_multi_read(self, reads: Sequence[tuple[int, str]]) -> Any:
        result = self._client.handler.async_result()
        self._client._call(_MultiRead(reads, self._kazoo), result)  # kazoo's request queue
        return result

    # --- Writes ----------------------------------------------------------------------------------

    def _multi(self, items: Iterable[Sequence[Op]], fence: int) -> list[_ItemResult]:
        """Apply each item's operations atomically: the results of its ops, or a :class:`_Failure`.

        Items are packed into multis of at most ``max_multi_ops`` operations and under
        ``jute.maxbuffer``, each starting with ``check(/controller_epoch, fence)`` unless ``fence``
        is -1; each multi is sent as soon as it is full, so that encoding the next ones overlaps
        the server's work (``items`` may be a generator). A multi fails as a whole: the item whose
        op failed gets the failure, the other items of that multi are sent again. Raises
        :class:`ControllerMovedError` when the fence check fails (even with no items).
        """
        check = [Op("check", paths.CONTROLLER_EPOCH, version=fence)] if fence != MATCH_ANY_VERSION else []
        head = b"".join(map(self._wire, check))
        batch: list[Sequence[Op]] = []  # the items, as they are consumed
        wires: list[bytes] = []  # each item's ops encoded, once: sent again as they are
        results: list[_ItemResult | None] = []

        def consume() -> Iterator[int]:
            for ops in items:
                batch.append(ops)
                wires.append(b"".join(map(self._wire, ops)))
                results.append(None)
                yield len(batch) - 1

        todo: Iterable[int] = consume()
        while True:
            chunks: list[list[int]] = []
            answers = self._gather(self._multi_sends(todo, batch, wires, check, head, chunks), MULTIS_IN_FLIGHT)
            if not chunks and check and not batch:  # nothing to write: a deposed controller still learns it
                self._committed(check, [], batch, self._ask(lambda: self._send_multi([head])), results, [])
            retry: list[int] = []
            for chunk, answer in zip(chunks, answers):
                self._committed(check, chunk, batch, answer, results, retry)
            if not retry:
                return results  # type: ignore[return-value]
            todo = sorted(retry)  # the caller's order

    def _multi_sends(
        self,
        todo: Iterable[int],
        batch: list[Sequence[Op]],
        wires: list[bytes],
        check: list[Op],
        head: bytes,
        chunks: list[list[int]],
    ) -> Iterator[Callable[[], Any]]:
        """One send per multi of the items in ``todo``, recording each multi's items in ``chunks``."""
        for chunk in self._chunks(todo, batch, wires, len(check), len(head)):
            chunks.append(chunk)
            yield functools.partial(self._send_multi, [head, *(wires[i] for i in chunk)])

    def _committed(
        self,
        check: list[Op],
        chunk: list[int],
        items: Sequence[Sequence[Op]],
        outcome: Any,
        results: list[_ItemResult | None],
        todo: list[int],
    ) -> None:
        """Sort one multi's answer into per-item results; the innocent items of a failed multi go
        back to ``todo``."""
        if isinstance(outcome, Exception):  # the request as a whole was refused
            raise self._error(outcome, (check or items[chunk[0]])[0].path)
        rolled_back = (self._kazoo.exceptions.RolledBackError, self._kazoo.exceptions.RuntimeInconsistency)
        failed_at = next(
            (n for n, r in enumerate(outcome) if isinstance(r, Exception) and not isinstance(r, rolled_back)), None
        )
        if failed_at is not None and failed_at < len(check):
            raise self._fence_failed(check[0].version, outcome[failed_at])
        position = len(check)
        for i in chunk:
            count = len(items[i])
            if failed_at is None:
                results[i] = outcome[position : position + count]
            elif position <= failed_at < position + count:
                results[i] = _Failure(failed_at - position, outcome[failed_at])
            else:
                todo.append(i)
            position += count

    def _chunks(
        self, todo: Iterable[int], items: Sequence[Sequence[Op]], wires: list[bytes], base_ops: int, base_size: int
    ) -> Iterator[list[int]]:
        """The items in ``todo`` in runs that each fit one multi, each yielded once full; the
        server logs a multi as a transaction a few bytes per op larger than the request, hence the
        slack per op."""
        limit = self._max_request_bytes
        current: list[int] = []
        ops, size = base_ops, base_size + _TXN_SLACK * base_ops
        for i in todo:
            count = len(items[i])
            item_size = len(wires[i]) + _TXN_SLACK * count
            if base_size + item_size > limit:
                raise self._too_large(items[i][0].path, item_size)
            if current and (ops + count > self._max_multi_ops or size + item_size > limit):
                yield current
                current, ops, size = [], base_ops, base_size + _TXN_SLACK * base_ops
            current.append(i)
            ops += count
            size += item_size
        if current:
            yield current

    def _fence_failed(self, fence: int, error: Exception) -> ControllerMovedError:
        """Kafka's error when the ``check(/controller_epoch)`` of a fenced multi fails."""
        moved = controller_moved(fence)
        moved.__cause__ = self._error(error, paths.CONTROLLER_EPOCH)
        return moved

    def _too_large(self, path: str, size: int) -> StoreError:
        return StoreError(
            f"{path}: a write of {size} bytes does not fit ZooKeeper's jute.maxbuffer "
            f"({self._max_request_bytes + _REQUEST_OVERHEAD} bytes)",
            path,
        )

    def _wire(self, op: Op) -> bytes:
        """``op`` as a multi request carries it (ZooKeeper's jute encoding, the path under the
        chroot). Encoding here, once per op, keeps kazoo's connection thread to writing bytes; a
        20K-partition creation encodes 40K creates before its last multi leaves, so the common
        case (no ACL policy: every znode the creator's ACL) takes no lookup."""
        path = (self.chroot + op.path).encode()
        kind = op.kind
        if kind == "create":
            data: bytes = op.data or b""  # type: ignore[assignment]
            flags = (_EPHEMERAL if op.ephemeral else 0) | (_SEQUENTIAL if op.sequential else 0)
            acl = self._acl_wire(op.path) if self.acl_policy is not None else self._creator_acl_wire
            return b"".join((_OP_HEAD.pack(1, False, -1, len(path)), path, _INT.pack(len(data)), data, acl,
                             _INT.pack(flags)))
        head = _OP_HEAD.pack(_OPCODES[kind], False, -1, len(path)) + path
        if kind == "set":
            data = op.data or b""  # type: ignore[assignment]
            return head + _INT.pack(len(data)) + data + _INT.pack(op.version)
        return head + _INT.pack(op.version)  # check, delete

    def _acl(self, path: str) -> tuple[AclEntry, ...]:
        """The ACL a znode created at ``path`` (under the chroot) gets."""
        if self.acl_policy is None or self._creating_chroot:
            return self._creator_acl
        return self.acl_policy.acl(path)

    @functools.cached_property
    def _creator_acl_wire(self) -> bytes:
        return self._acl_bytes(self._creator_acl)

    def _acl_wire(self, path: str) -> bytes:
        acl = self._acl(path)
        wire = self._acl_wires.get(acl)
        if wire is None:
            wire = self._acl_wires[acl] = self._acl_bytes(acl)
        return wire

    @staticmethod
    def _acl_bytes(acl: tuple[AclEntry, ...]) -> bytes:
        return _INT.pack(len(acl)) + b"".join(_INT.pack(a.perms) + _string(a.scheme) + _string(a.id) for a in acl)

    def _send_multi(self, wires: list[bytes]) -> Any:
        result = self._client.handler.async_result()
        self._client._call(_Multi(b"".join(wires), self._kazoo), result)  # kazoo's request queue
        return result

    def delete_recursive(self, doomed: Iterable[str], fence: int) -> None:
        """Fenced recursive deletes of whichever of the paths exist (Kafka's ``deletePath``):
        children first, in multis; a node created meanwhile under a doomed one is listed again."""
        roots = list(dict.fromkeys(doomed))
        not_empty = self._kazoo.exceptions.NotEmptyError
        for _ in range(_RACE_ATTEMPTS):
            nodes = self._subtrees(roots)[::-1]
            items = [[Op("delete", path)] for path in nodes]
            again = False
            for ops, outcome in zip(items, self._multi(items, fence)):
                if not isinstance(outcome, _Failure) or isinstance(outcome.error, self._kazoo.exceptions.NoNodeError):
                    continue  # deleted, or gone already
                if not isinstance(outcome.error, not_empty):
                    raise self._op_error(ops[0], outcome.error)
                again = True
            if not again:
                return
        raise StoreError(f"could not delete {roots}: children kept appearing", roots[0])

    def _subtrees(self, roots: list[str]) -> list[str]:
        """The existing nodes among ``roots`` and their descendants, parents before children."""
        found: list[str] = []
        level = roots
        while level:
            answers = self._read([(_GET_CHILDREN, path) for path in level])
            below: list[str] = []
            for path, answer in zip(level, answers):
                if isinstance(answer, self._kazoo.exceptions.NoNodeError):
                    continue
                found.append(path)
                below.extend(f"{path}/{child}" for child in self._result(answer, path))
            level = below
        return found

    def ensure_paths(self, wanted: Iterable[str]) -> None:
        """Create the missing ones of ``wanted`` and of their ancestors, without data."""
        needed = sorted(
            {path[:i] for path in wanted for i in range(1, len(path) + 1) if i == len(path) or path[i] == "/"}
        )
        for _ in range(_RACE_ATTEMPTS):
            missing = self._missing(needed)
            if not missing:
                return
            ops = [Op("create", path) for path in missing]
            outcome = self._multi([ops], MATCH_ANY_VERSION)[0]
            if not isinstance(outcome, _Failure):
                return
            if not isinstance(outcome.error, self._kazoo.exceptions.NodeExistsError):
                raise self._op_error(ops[outcome.op], outcome.error)
        raise StoreError(f"could not create {needed}", needed[0])

    def _missing(self, wanted: Sequence[str]) -> list[str]:
        """The paths of ``wanted`` that do not exist, read from their parents' children rather
        than with ``exists``: ZooKeeper 3.8.4+ and 3.9.2+ refuse ``exists`` without READ on the
        node (ZOOKEEPER-2590), and not every role may read every node (``/config/users``)."""
        parents = sorted({path.rpartition("/")[0] or "/" for path in wanted})
        no_node = self._kazoo.exceptions.NoNodeError
        listings = self._gather([functools.partial(self._client.get_children_async, p) for p in parents])
        children = {
            parent: set() if isinstance(answer, no_node) else set(self._result(answer, parent))
            for parent, answer in zip(parents, listings)
        }
        return [path for path in wanted if path.rpartition("/")[2] not in children[path.rpartition("/")[0] or "/"]]

    def _await_paths(self, wanted: Sequence[str], timeout: float) -> None:
        """Wait until every path of ``wanted`` exists: in a secured cluster only the controller
        identity creates them."""
        deadline = time.monotonic() + timeout
        while True:
            missing = self._missing(wanted)
            if not missing:
                return
            if time.monotonic() > deadline:
                raise StoreUnavailableError(
                    f"the secured cluster at {self.hosts}{self.chroot} has no {missing[0]} yet: its controller "
                    f"identity creates Kafka's paths, and none did within {timeout:g}s (start a controller first)"
                )
            time.sleep(0.1)

    # --- Watch machinery (runs on kazoo's watch thread) -----------------------------------------

    def _dispatch(self, function: Callable[..., None], *args: object) -> None:
        """Run ``function`` on kazoo's watch thread, in order with the watch callbacks, so that
        listeners are always called from that one thread."""
        self._client.handler.dispatch_callback(self._kazoo.states.Callback("watch", function, args))

    def _deliver(self, *events: WatchEvent) -> None:
        for event in events:
            for listener in self._listeners:
                try:
                    listener(event)
                except Exception:
                    logger.exception("Watch listener %r failed on %s", listener, event)

    def _arm(self, entry: _Watch) -> _Snapshot:
        """Set the ZooKeeper watch of ``entry``; returns what it sees now."""
        client, no_node = self._client, self._kazoo.exceptions.NoNodeError
        while True:
            if entry.children:
                answer = self._ask(lambda: client.get_children_async(entry.path, entry, True))
                if not isinstance(answer, no_node):
                    stat = self._result(answer, entry.path)[1]
                    entry.armed = True
                    return int(stat.czxid), int(stat.cversion)
            stat = self._result(self._ask(lambda: client.exists_async(entry.path, entry)), entry.path)
            if stat is None or not entry.children:
                entry.armed = True
                return _node_snapshot(stat)
            # the parent of a children watch appeared meanwhile: watch its children instead

    def _arm_all(self, entries: Sequence[_Watch]) -> StoreError | None:
        """Set the entries' ZooKeeper watches, those on nodes' data with pipelined requests; an
        entry whose watch cannot be set is made inactive, and the first such error returned."""
        if any(entry.children for entry in entries):  # at most one: children kinds take no key
            for entry in entries:
                entry.snapshot = self._arm(entry)
            return None
        client = self._client
        failed: StoreError | None = None
        answers = self._gather([functools.partial(client.exists_async, entry.path, entry) for entry in entries])
        for entry, answer in zip(entries, answers):
            try:
                stat = self._result(answer, entry.path)
            except StoreError as exc:
                entry.active = False
                failed = failed or exc
                continue
            entry.armed = True
            entry.snapshot = _node_snapshot(stat)
        return failed

    def _fired(self, entry: _Watch, event: Any) -> None:
        """A one-shot watch fired: re-arm it, then tell the listeners (who re-read afterwards, so
        nothing between the firing and the re-arming goes unseen)."""
        with self._lock:
            entry.armed = False
            if not entry.active or self._watches.get((entry.kind, entry.key)) is not entry:
                if self._watches.get((entry.kind, entry.key)) is entry:
                    del self._watches[entry.kind, entry.key]
                return
        if event.type == self._kazoo.states.EventType.NONE:
            return  # connection lost or session ended: re-armed on reconnection
        try:
            entry.snapshot = after = self._arm(entry)
        except StoreError as exc:
            logger.warning("Could not re-arm the %s watch on %s: %s", entry.kind.name, entry.path, exc)
            return
        self._deliver(*entry.events(_fired_changes(entry.children, event.type, after)))

    def _rearm(self, report_missed: bool) -> None:
        """Arm every registered watch the client dropped; with ``report_missed`` (same session
        after a reconnect), tell listeners what changed while the connection was down."""
        with self._lock:
            entries = [entry for entry in self._watches.values() if entry.active and not entry.armed]
        for entry in entries:
            before = entry.snapshot
            try:
                entry.snapshot = after = self._arm(entry)
            except StoreError as exc:
                logger.warning("Could not re-arm the %s watch on %s: %s", entry.kind.name, entry.path, exc)
                continue
            if report_missed:
                self._deliver(*entry.events(_missed_changes(entry.children, before, after)))

    def _resume(self, done: threading.Event) -> None:
        """The new session after expiry: watches armed again, then ``SESSION``/``RECONNECTED``."""
        try:
            self._rearm(report_missed=False)
            self._deliver(WatchEvent(WatchKind.SESSION, ChangeType.RECONNECTED))
        finally:
            done.set()

    def _on_state(self, state: str) -> None:
        """kazoo's connection-state listener; it runs on kazoo's connection thread, so it only
        records the state and hands work to the watch thread."""
        states = self._kazoo.states
        if state == states.KazooState.CONNECTED:
            client_id = self._client.client_id
            if client_id is not None:
                self._session_id = client_id[0]
            resumed = self._suspended and not self._expired.is_set()
            self._suspended = False
            self._connected.set()
            if resumed:
                self._dispatch(self._rearm, True)
        elif state == states.KazooState.SUSPENDED:
            self._connected.clear()
            self._suspended = True
        else:  # LOST: the session expired, or the client was closed
            self._connected.clear()
            self._suspended = False
            expired = self._client.client_state == states.KeeperState.EXPIRED_SESSION
            if expired and not self._closed and not self._expired.is_set():
                self._expired.set()
                self._dispatch(self._deliver, WatchEvent(WatchKind.SESSION, ChangeType.EXPIRED))


_GENERIC_CONNECTION_WARNINGS = ("Failed connecting to Zookeeper", "Transition to ")
"""kazoo's warnings that follow the one saying why (which is kept)."""


class _ConnectionLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """kazoo's logger, remembering the last warning of the connection (a refused TLS handshake or
    login, a dropped connection) for the error of a store that cannot connect."""

    def __init__(self, target: logging.Logger) -> None:
        super().__init__(target, {})
        self._last = ""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if level >= logging.WARNING:
            try:
                text = str(msg) % args if args else str(msg)
            except (TypeError, ValueError):
                text = str(msg)
            if not text.startswith(_GENERIC_CONNECTION_WARNINGS):
                self._last = text
        super().log(level, msg, *args, **kwargs)

    def last_error(self) -> str:
        return f" (last error: {self._last})" if self._last else ""

    def login_refused(self) -> bool:
        """Whether the last warning was a refused login (kazoo may still be retrying when the
        connection times out, before its state says AUTH_FAILED)."""
        return self._last.startswith("AUTH_FAILED")


def _perms(bits: int) -> str:
    """ZooKeeper's letters for permission bits (``cdrwa``)."""
    return "".join(letter for bit, letter in ((CREATE, "c"), (DELETE, "d"), (READ, "r"), (WRITE, "w"), (ADMIN, "a"))
                   if bits & bit)


def _target(kind: WatchKind, key: object) -> _Target | None:
    """What ``kind`` observes (None for SESSION), after checking the key's type."""
    check_watch_key(kind, key)
    return _TARGETS.get(kind)



def _stat(stat: Any) -> Stat:
    """kazoo's ``ZnodeStat`` as kctl's."""
    return Stat(int(stat.version), int(stat.czxid), int(stat.mzxid), int(stat.ephemeralOwner))


__all__ = [
    "CLIENT_CNXN_SOCKET",
    "JUTE_MAXBUFFER",
    "ClientSecurity",
    "PROPERTIES",
    "SASL_ENV",
    "ZooKeeperClient",
    "ZooKeeperTls",
    "is_client_property",
    "kazoo_acl",
    "kazoo_client",
    "kazoo_modules",
    "sasl_from_environment",
    "split_connect_string",
]
