"""How a ZooKeeper session proves who it is and protects its connection: TLS, SASL and digest.

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

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kctl import extras
from kctl.errors import InvalidConfigurationError
from kctl.stores.zkacl import ALL, OPEN, SASL_SCHEME, WORLD_READ, AclEntry, acl_entry, digest, parse_auth

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


__all__ = [
    "CLIENT_CNXN_SOCKET",
    "ClientSecurity",
    "PROPERTIES",
    "SASL_ENV",
    "ZooKeeperTls",
    "is_client_property",
    "sasl_from_environment",
]
