"""TLS contexts for the ``tcp`` transport, from PEM files, checked before the first connection.

As Kafka's ``SslFactory`` does, a process builds its server and client contexts once and validates
them with a handshake between the two in memory: a certificate that the truststore does not
accept (signed by another CA, expired) is reported at startup, naming both files, rather than as
refused connections later. Every problem with the files is an
:class:`~kctl.errors.InvalidConfigurationError` naming the property and the file.
"""

from __future__ import annotations

import ssl
from typing import Any

from kctl.errors import InvalidConfigurationError
from kctl.security.config import SecurityConfig

MAX_PEM_BYTES = 1 << 20
"""A keystore or truststore larger than this is not a PEM file of certificates and a key."""

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class _NoPassword(Exception):
    """Raised by the password callback when no ``ssl.key.password`` is set (OpenSSL would prompt)."""


def _read_pem(name: str, path: str, what: str) -> str:
    """The file's text, or an error naming the property and why it cannot be read."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise InvalidConfigurationError(
            f"Failed to load PEM SSL {what} {path} ({name}): {exc.strerror or exc}"
        ) from None
    if len(data) > MAX_PEM_BYTES:
        raise InvalidConfigurationError(
            f"Failed to load PEM SSL {what} {path} ({name}): larger than {MAX_PEM_BYTES} bytes, not a PEM file"
        )
    text = data.decode("ascii", errors="replace")
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise InvalidConfigurationError(
            f"Failed to load PEM SSL {what} {path} ({name}): no certificate in it (-----BEGIN CERTIFICATE-----)"
        )
    return text


def _load_keystore(context: ssl.SSLContext, config: SecurityConfig) -> None:
    name, path = "ssl.keystore.location", config.keystore_location
    assert path is not None
    text = _read_pem(name, path, "keystore")
    if "PRIVATE KEY-----" not in text:
        raise InvalidConfigurationError(
            f"Failed to load PEM SSL keystore {path} ({name}): no private key in it; the file holds the private "
            "key and then the certificate chain"
        )
    encrypted = "ENCRYPTED PRIVATE KEY-----" in text or "Proc-Type: 4,ENCRYPTED" in text

    def password() -> str:
        if config.key_password is None:
            raise _NoPassword
        return config.key_password

    try:
        context.load_cert_chain(path, password=password)
    except _NoPassword:
        raise InvalidConfigurationError(
            f"The private key in {path} ({name}) is encrypted: set ssl.key.password"
        ) from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            problem = "the private key does not belong to the (first) certificate"
        elif encrypted:
            problem = "ssl.key.password does not decrypt the private key"
        else:
            problem = str(exc)
        raise InvalidConfigurationError(f"Failed to load PEM SSL keystore {path} ({name}): {problem}") from None


def _load_truststore(context: ssl.SSLContext, config: SecurityConfig) -> None:
    name, path = "ssl.truststore.location", config.truststore_location
    assert path is not None
    _read_pem(name, path, "truststore")
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise InvalidConfigurationError(f"Failed to load PEM SSL truststore {path} ({name}): {exc}") from None


def _context(config: SecurityConfig, server_side: bool, check_hostname: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = _VERSIONS[min(config.enabled_protocols)]
    context.maximum_version = _VERSIONS[max(config.enabled_protocols)]
    _load_truststore(context, config)
    _load_keystore(context, config)
    if server_side:
        context.verify_mode = _CLIENT_AUTH[config.client_auth]
    else:
        context.check_hostname = check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def server_context(config: SecurityConfig) -> ssl.SSLContext:
    """The listener's context: its own certificate, and client certificates checked as
    ``ssl.client.auth`` says."""
    return _context(config, True, False)


def client_context(config: SecurityConfig) -> ssl.SSLContext:
    """Outgoing connections: the server's certificate checked against the truststore (and the
    host, with ``ssl.endpoint.identification.algorithm=https``); this process's own presented."""
    return _context(config, False, config.endpoint_identification)


def validate(config: SecurityConfig) -> dict[str, Any]:
    """Handshake in memory between this process's server and client contexts, each checking the
    other's certificate (this process's own) against the truststore: Kafka's
    ``SslEngineValidator``. Host names are not checked here: the peer's are, when connecting.
    Returns the process's own certificate as its peers will see it (``getpeercert()``)."""
    server = _context(config, True, False)
    server.verify_mode = ssl.CERT_REQUIRED
    client = _context(config, False, False)
    ends = []
    for context, side in ((client, False), (server, True)):
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        ends.append((context.wrap_bio(incoming, outgoing, server_side=side), incoming, outgoing))
    done = [False, False]
    try:
        for _ in range(16):
            for i, (end, _incoming, outgoing) in enumerate(ends):
                if not done[i]:
                    try:
                        end.do_handshake()
                        done[i] = True
                    except ssl.SSLWantReadError:
                        pass
                ends[1 - i][1].write(outgoing.read())
            if all(done):
                return ends[1][0].getpeercert() or {}
    except ssl.SSLError as exc:
        reason = getattr(exc, "verify_message", None) or exc.reason or str(exc)
        raise InvalidConfigurationError(
            f"The certificate in {config.keystore_location} (ssl.keystore.location) is not accepted by the CA "
            f"certificates in {config.truststore_location} (ssl.truststore.location): {reason}"
        ) from None
    raise InvalidConfigurationError("The TLS handshake between this process's own contexts did not complete")


__all__ = ["MAX_PEM_BYTES", "client_context", "server_context", "validate"]
