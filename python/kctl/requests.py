"""Controller-to-broker requests and their batching (Kafka's ControllerChannelManager, reference §5).

``ControllerBrokerRequestBatch(controller_id, context, config)`` returns the request batch of the
context's engine: the abstract base every engine implements (:mod:`kctl.engine_api.request_batch`,
which documents it); this module loads the engine table, so the constructor finds every engine.
The messages themselves live in :mod:`kctl.messages` and are re-exported here.
"""

from __future__ import annotations

from kctl.engine_api.request_batch import ControllerBrokerRequestBatch, PendingRequests
from kctl.engines import TABLE as _TABLE  # noqa: F401  (loading the table registers every engine)
from kctl.messages import (
    ZERO_UUID,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerToControllerRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrResponseReceived,
    RequestChannel,
    ResponseReceived,
    SentRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaResponseReceived,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataResponseReceived,
    controller_error_response,
)

__all__ = [
    "ControllerBrokerRequestBatch",
    "PendingRequests",
    "ZERO_UUID",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "BrokerToControllerRequest",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "ControllerRequest",
    "ControllerResponse",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "LeaderAndIsrResponseReceived",
    "RequestChannel",
    "ResponseReceived",
    "SentRequest",
    "StopReplicaPartitionState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "StopReplicaResponseReceived",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "UpdateMetadataResponseReceived",
    "controller_error_response",
]
