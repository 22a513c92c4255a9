"""The security properties of the ``tcp`` transport, by Kafka's names where Kafka has them.

Kafka configures a listener's TLS with ``ssl.*`` properties and its authorization with an
authorizer, ``super.users`` and ACLs. kctl takes the same names, adapted as Kafka's own PEM support
has them (``ssl.keystore.type=PEM``: one file holding the private key and the certificate chain;
``ssl.truststore.type=PEM``: the CA certificates), plus two properties of its own for the one rule
its authorizer knows (the controller/broker split of Kafka's ClusterAction; see
:mod:`kctl.security.authorizer`). Every property is checked up front: an unknown ``ssl.*`` name, a
value of the wrong kind or a combination that cannot work is an
:class:`~kctl.errors.InvalidConfigurationError` naming the property.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kctl.errors import InvalidConfigurationError
from kctl.security.principal import KafkaPrincipal, parse_principals

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
CLIENT_AUTH = ("none", "requested", "required")
BROKER_ID_PLACEHOLDER = "{id}"

PROPERTIES: dict[str, str] = {
    "security.inter.broker.protocol":
        "PLAINTEXT (default) or SSL: the protocol of every tcp connection between controllers and brokers.",
    "ssl.keystore.type": "PEM (the only type kctl reads; Kafka's default is JKS).",
    "ssl.keystore.location": "A PEM file with this process's private key and its certificate chain.",
    "ssl.keystore.password": "Not used with PEM: Kafka refuses it, and so does kctl (use ssl.key.password).",
    "ssl.key.password": "The password of the encrypted private key in ssl.keystore.location.",
    "ssl.truststore.type": "PEM (the only type kctl reads).",
    "ssl.truststore.location": "A PEM file with the CA certificates that sign every process's certificate.",
    "ssl.truststore.password": "Not used with PEM: Kafka refuses it, and so does kctl.",
    "ssl.client.auth": "none (default), requested or required: whether peers must present a certificate.",
    "ssl.endpoint.identification.algorithm":
        "https (default): a server's certificate must name the host connected to; empty: no host check.",
    "ssl.enabled.protocols": "TLS versions allowed (default TLSv1.2,TLSv1.3).",
    "ssl.principal.mapping.rules": "Rules turning a certificate's distinguished name into a principal name "
                                   "(default DEFAULT: the name is the distinguished name).",
    "super.users": "Principals (;-separated, e.g. User:controller) allowed every request: the controllers.",
    "kctl.authorization.enable": "kctl: refuse controller requests from principals outside super.users, and "
                                 "ControlledShutdown, AlterPartition and Fetch not sent by the broker's own "
                                 "principal (default false).",
    "kctl.broker.principal": "kctl: the principal of broker N, with {id} standing for N (e.g. User:broker-{id}).",
}
"""Every property :class:`SecurityConfig` accepts, with what it means."""


def is_security_property(name: str) -> bool:
    """Whether a property belongs to :class:`SecurityConfig` (every ``ssl.*`` name does, so that a
    misspelt one is reported there)."""
    return name in PROPERTIES or name.startswith("ssl.")


def _text(name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidConfigurationError(f"Invalid value {value!r} for configuration {name}: expected a string")
    return str(value).strip()


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    text = _text(name, value)
    for choice in choices:
        if text.lower() == choice.lower():
            return choice
    raise InvalidConfigurationError(
        f"Invalid value {text!r} for configuration {name}: expected one of {', '.join(c or '(empty)' for c in choices)}"
    )


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return _choice(name, value, ("true", "false")) == "true"


@dataclass(frozen=True)
class SecurityConfig:
    """The tcp transport's security settings (see :data:`PROPERTIES` for each one's meaning)."""

    security_protocol: str = PLAINTEXT
    keystore_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    truststore_location: str | None = None
    client_auth: str = "none"
    endpoint_identification: bool = True
    enabled_protocols: tuple[str, ...] = TLS_VERSIONS
    principal_mapping_rules: str = "DEFAULT"
    super_users: frozenset[KafkaPrincipal] = frozenset()
    authorization_enable: bool = False
    broker_principal: str | None = None

    @property
    def tls(self) -> bool:
        return self.security_protocol == SSL

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> SecurityConfig:
        """Build and check a config from Kafka property names (see the module docstring)."""
        unknown = sorted(set(properties) - set(PROPERTIES))
        if unknown:
            raise InvalidConfigurationError(
                f"Unknown configuration {unknown[0]!r}; known security properties: {', '.join(sorted(PROPERTIES))}"
            )
        p = dict(properties)
        protocol = _text("security.inter.broker.protocol", p.get("security.inter.broker.protocol", PLAINTEXT)).upper()
        if protocol not in (PLAINTEXT, SSL):
            raise InvalidConfigurationError(
                f"Invalid value {protocol!r} for configuration security.inter.broker.protocol: kctl's tcp transport "
                "speaks PLAINTEXT or SSL (SASL is not supported)"
            )
        for store in ("keystore", "truststore"):
            _choice(f"ssl.{store}.type", p.get(f"ssl.{store}.type", "PEM"), ("PEM",))
        if "ssl.keystore.password" in p:
            raise InvalidConfigurationError(
                "SSL key store password cannot be specified with PEM format, only key password may be specified "
                "(ssl.keystore.password; the private key's password is ssl.key.password)"
            )
        if "ssl.truststore.password" in p:
            raise InvalidConfigurationError(
                "SSL trust store password cannot be specified for PEM format (ssl.truststore.password)"
            )
        enabled = tuple(
            _choice("ssl.enabled.protocols", v, TLS_VERSIONS)
            for v in _text("ssl.enabled.protocols", p.get("ssl.enabled.protocols", ",".join(TLS_VERSIONS))).split(",")
            if v.strip()
        )
        if not enabled:
            raise InvalidConfigurationError("Invalid value '' for configuration ssl.enabled.protocols: name a TLS version")
        config = cls(
            security_protocol=protocol,
            keystore_location=_optional_path("ssl.keystore.location", p),
            key_password=None if "ssl.key.password" not in p else _text("ssl.key.password", p["ssl.key.password"]),
            truststore_location=_optional_path("ssl.truststore.location", p),
            client_auth=_choice("ssl.client.auth", p.get("ssl.client.auth", "none"), CLIENT_AUTH),
            endpoint_identification=_choice(
                "ssl.endpoint.identification.algorithm", p.get("ssl.endpoint.identification.algorithm", "https"),
                ("https", ""),
            ) == "https",
            enabled_protocols=tuple(sorted(set(enabled))),
            principal_mapping_rules=_text("ssl.principal.mapping.rules", p.get("ssl.principal.mapping.rules", "DEFAULT")),
            super_users=parse_principals("super.users", _text("super.users", p.get("super.users", ""))),
            authorization_enable=_flag("kctl.authorization.enable", p.get("kctl.authorization.enable", False)),
            broker_principal=_broker_principal(p.get("kctl.broker.principal")),
        )
        config._check()
        return config

    def _check(self) -> None:
        """Combinations that cannot work are refused now rather than at the first connection."""
        if self.tls:
            for name, value in (("ssl.keystore.location", self.keystore_location),
                                ("ssl.truststore.location", self.truststore_location)):
                if value is None:
                    raise InvalidConfigurationError(f"security.inter.broker.protocol=SSL needs {name}")
        if not self.authorization_enable:
            return
        if not self.tls or self.client_auth != "required":
            raise InvalidConfigurationError(
                "kctl.authorization.enable=true needs authenticated peers: security.inter.broker.protocol=SSL and "
                "ssl.client.auth=required"
            )
        if not self.super_users:
            raise InvalidConfigurationError(
                "kctl.authorization.enable=true needs super.users: the principals of the controllers"
            )
        if self.broker_principal is None:
            raise InvalidConfigurationError(
                "kctl.authorization.enable=true needs kctl.broker.principal: the principal of broker N, with {id} "
                "for N (e.g. User:broker-{id})"
            )


def _optional_path(name: str, properties: Mapping[str, Any]) -> str | None:
    if name not in properties:
        return None
    path = _text(name, properties[name])
    if not path:
        raise InvalidConfigurationError(f"Invalid value '' for configuration {name}: expected a file")
    return path


def _broker_principal(value: Any) -> str | None:
    if value is None:
        return None
    name = "kctl.broker.principal"
    text = _text(name, value)
    if text.count(BROKER_ID_PLACEHOLDER) != 1:
        raise InvalidConfigurationError(
            f"Invalid value {text!r} for configuration {name}: expected a principal with {BROKER_ID_PLACEHOLDER} "
            "once, where the broker id goes (e.g. User:broker-{id})"
        )
    try:
        KafkaPrincipal.parse(text)
    except InvalidConfigurationError as exc:
        raise InvalidConfigurationError(f"Invalid value {text!r} for configuration {name}: {exc}") from None
    return text


__all__ = ["PLAINTEXT", "PROPERTIES", "SSL", "SecurityConfig", "is_security_property"]
