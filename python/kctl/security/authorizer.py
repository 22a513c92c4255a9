"""Who may send what on the ``tcp`` transport: Kafka's ClusterAction, split by role.

Kafka lets any principal with ClusterAction on the cluster (in practice every broker, listed in
``super.users``) send LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown, AlterPartition
and follower Fetches. kctl's controllers are not brokers, so it can be stricter: with
``kctl.authorization.enable=true``,

- controller requests (LeaderAndIsr, UpdateMetadata, StopReplica) are accepted only from
  ``super.users`` — the controllers' principals;
- ControlledShutdown, AlterPartition and Fetch are accepted only from the principal of the broker
  they are sent for (``kctl.broker.principal`` with its id), or from a super user. That the broker
  is currently registered, with that epoch, the controller checks as Kafka's does;
- a client's Produce to a broker's simulated log only from a super user (kctl has no topic ACLs).

A refusal is answered with Kafka's error (CLUSTER_AUTHORIZATION_FAILED; TOPIC_AUTHORIZATION_FAILED
per partition for a Fetch) and logged on the ``kctl.authorizer`` logger in the form of Kafka's
authorizer log, with the peer's address and principal.
"""

from __future__ import annotations

import logging

from kctl.security.config import BROKER_ID_PLACEHOLDER, SecurityConfig
from kctl.security.principal import KafkaPrincipal, Peer

logger = logging.getLogger("kctl.authorizer")


class ClusterAuthorizer:
    """The rule above; with authorization off (the default) every request is allowed."""

    def __init__(self, config: SecurityConfig | None = None) -> None:
        config = config or SecurityConfig()
        self.enabled = config.authorization_enable
        self.super_users = config.super_users
        self.broker_principal = config.broker_principal

    def principal_of_broker(self, broker_id: int) -> KafkaPrincipal | None:
        """The principal broker ``broker_id`` authenticates as (None: no rule configured)."""
        if self.broker_principal is None:
            return None
        return KafkaPrincipal.parse(self.broker_principal.replace(BROKER_ID_PLACEHOLDER, str(broker_id)))

    def authorize_controller_request(self, peer: Peer, api: str) -> bool:
        """LeaderAndIsr, UpdateMetadata, StopReplica: from a controller (a super user) only."""
        if not self.enabled or peer.principal in self.super_users:
            return True
        self._denied(peer, api, "not a controller: only super.users may send controller requests")
        return False

    def authorize_broker_request(self, peer: Peer, api: str, broker_id: int) -> bool:
        """ControlledShutdown, AlterPartition, Fetch for ``broker_id``: from that broker only."""
        own = self.principal_of_broker(broker_id)
        if not self.enabled or peer.principal in self.super_users or peer.principal == own:
            return True
        self._denied(peer, api, f"sent for broker {broker_id}, whose principal is {own}")
        return False

    def authorize_client_request(self, peer: Peer, api: str) -> bool:
        """Produce to a broker's simulated log: from a super user only."""
        if not self.enabled or peer.principal in self.super_users:
            return True
        self._denied(peer, api, "only super.users may write to the simulated logs")
        return False

    @staticmethod
    def _denied(peer: Peer, api: str, why: str) -> None:
        logger.warning(
            "Principal = %s is Denied Operation = ClusterAction from host = %s on resource = "
            "Cluster:LITERAL:kafka-cluster for request = %s (%s)", peer.principal, peer.address, api, why,
        )


__all__ = ["ClusterAuthorizer"]
