"""Security of the ``tcp`` transport: TLS, the peer's principal, and who may send what.

:class:`ListenerSecurity` is what a process's listener and its outgoing connections need, built
once from the security properties (:mod:`kctl.security.config`): the TLS contexts
(:mod:`kctl.security.tls`), the principal of an authenticated peer
(:mod:`kctl.security.principal`) and the authorizer (:mod:`kctl.security.authorizer`). The default,
:data:`PLAINTEXT_SECURITY`, is Kafka's PLAINTEXT listener without an authorizer: every peer is
``User:ANONYMOUS`` and every request is allowed.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from kctl.errors import InvalidConfigurationError
from kctl.security import tls
from kctl.security.authorizer import ClusterAuthorizer
from kctl.security.config import PLAINTEXT, PROPERTIES, SSL, SecurityConfig, is_security_property
from kctl.security.principal import ANONYMOUS, KafkaPrincipal, NoMatchingRule, Peer, SslPrincipalMapper


class ListenerSecurity:
    """A process's TLS contexts (None for PLAINTEXT), principal mapper and authorizer.

    :raises InvalidConfigurationError: unreadable or mismatched key and certificate files, a
        certificate the truststore does not accept, a mapping rule that does not parse.
    """

    def __init__(self, config: SecurityConfig | None = None) -> None:
        self.config = config or SecurityConfig()
        self.mapper = SslPrincipalMapper(self.config.principal_mapping_rules)
        self.authorizer = ClusterAuthorizer(self.config)
        self.server_context: ssl.SSLContext | None = None
        self.client_context: ssl.SSLContext | None = None
        self.own_certificate: dict[str, Any] = {}
        if self.config.tls:
            self.server_context = tls.server_context(self.config)
            self.client_context = tls.client_context(self.config)
            self.own_certificate = tls.validate(self.config)

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ListenerSecurity:
        return cls(SecurityConfig.from_properties(properties))

    @property
    def protocol(self) -> str:
        return self.config.security_protocol

    def check_identity(self, role: str, broker_id: int) -> None:
        """With authorization on, a controller's own certificate must make it a super user and a
        broker's make it its broker's principal: otherwise every peer would refuse it, which is
        better said at startup. :raises InvalidConfigurationError: saying which principal it has."""
        authorizer = self.authorizer
        if not authorizer.enabled:
            return
        try:
            own = self.principal(self.own_certificate)
        except NoMatchingRule as exc:
            raise InvalidConfigurationError(
                f"The certificate in {self.config.keystore_location} (ssl.keystore.location) has no principal: {exc}"
            ) from None
        if role == "controller" and own not in authorizer.super_users:
            raise InvalidConfigurationError(
                f"This controller's certificate ({self.config.keystore_location}) makes it {own}, which super.users "
                "does not name: brokers would refuse its requests"
            )
        if role == "broker" and own != authorizer.principal_of_broker(broker_id):
            raise InvalidConfigurationError(
                f"Broker {broker_id}'s certificate ({self.config.keystore_location}) makes it {own}, but "
                f"kctl.broker.principal makes broker {broker_id} {authorizer.principal_of_broker(broker_id)}: "
                "the controller and other brokers would refuse its requests"
            )

    def principal(self, peercert: dict[str, Any] | None) -> KafkaPrincipal:
        """The principal of a peer whose certificate the handshake verified (``getpeercert()``);
        :class:`NoMatchingRule` when ``ssl.principal.mapping.rules`` has no rule for it."""
        return self.mapper.principal(peercert)


PLAINTEXT_SECURITY = ListenerSecurity()
"""No TLS, no authorization: Kafka's PLAINTEXT listener without an authorizer."""


__all__ = [
    "ANONYMOUS",
    "PLAINTEXT",
    "PLAINTEXT_SECURITY",
    "PROPERTIES",
    "SSL",
    "ClusterAuthorizer",
    "KafkaPrincipal",
    "ListenerSecurity",
    "NoMatchingRule",
    "Peer",
    "SecurityConfig",
    "SslPrincipalMapper",
    "is_security_property",
]
