"""The broker side (seed 004): an agent that answers the controller, and a simulated data plane.

:class:`BrokerAgent` registers a broker and applies LeaderAndIsr, UpdateMetadata and StopReplica
with Kafka's epoch checks; :class:`SimulatedReplicaManager` models logs, follower fetching, high
watermarks and ISR changes; :class:`DataPlaneLedger` connects a cluster's simulated brokers and
checks that clean elections lose no committed record. :mod:`kctl.broker.native_data_plane` runs the
same data plane in the engine (what an embedded cluster runs by default).
"""

from __future__ import annotations

from kctl.broker.agent import UNKNOWN_CONTROLLER, BrokerAgent, BrokerStore, HandledRequest
from kctl.broker.metadata_cache import BrokerMetadataCache, ExpectedMetadata, MetadataSnapshot, PartitionMetadata
from kctl.broker.replica_manager import (
    BrokerServices,
    DataLossViolation,
    DataPlaneLedger,
    Ledger,
    ReplicaManager,
    ReplicaRole,
    ReplicaSnapshot,
    SimulatedReplicaManager,
)

__all__ = [
    "UNKNOWN_CONTROLLER",
    "BrokerAgent",
    "BrokerMetadataCache",
    "BrokerServices",
    "BrokerStore",
    "DataLossViolation",
    "DataPlaneLedger",
    "ExpectedMetadata",
    "HandledRequest",
    "Ledger",
    "MetadataSnapshot",
    "PartitionMetadata",
    "ReplicaManager",
    "ReplicaRole",
    "ReplicaSnapshot",
    "SimulatedReplicaManager",
]
