"""kctl's messages (:mod:`kctl.messages`) to and from Kafka's wire messages (:mod:`kctl.kafka.protocol`).

The controller's requests go out at the versions ``inter.broker.protocol.version`` selects, as
Kafka's ``ControllerChannelManager`` picks them (``ControllerConfig.leader_and_isr_version`` and
its siblings); the broker→controller requests come in at whatever version the broker chose within
:data:`CONTROLLER_API_VERSIONS`, which the controller's listener advertises in its ApiVersions
response. Partition states of a native request (``kctl._engine.PartitionStates``) are written by the
Rust extension; those of the reference engine, a tuple of dataclasses, here.

Topics travel by id from LeaderAndIsr v5, UpdateMetadata v7 and AlterPartition v2; kctl's messages
carry ids as Kafka prints them (22 characters of URL-safe base64), the wire as 16 bytes. Error
codes kctl has no name for become ``UNKNOWN_SERVER_ERROR``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kctl.errors import Errors
from kctl.kafka import protocol as p
from kctl.messages import (
    ZERO_UUID,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kctl.model import BrokerInfo, EndPoint, LeaderAndIsr, LeaderRecoveryState, TopicPartition

CONTROLLER_API_VERSIONS: Mapping[int, tuple[int, int]] = {
    p.CONTROLLED_SHUTDOWN.key: (0, p.CONTROLLED_SHUTDOWN.max_version),
    p.API_VERSIONS.key: (0, p.API_VERSIONS.max_version),
    p.ALTER_PARTITION.key: (0, p.ALTER_PARTITION.max_version),
    p.ALLOCATE_PRODUCER_IDS.key: (0, p.ALLOCATE_PRODUCER_IDS.max_version),
}
"""What kctl's controller listener answers: api key → (min, max) version."""

UNSUPPORTED_VERSION = 35
"""Kafka's error code for an api version the receiver lacks (ApiVersions answers with it)."""
UNKNOWN_TOPIC_ID = 100
"""Kafka's error code for a topic id the controller does not know."""

SECURITY_PROTOCOLS: Mapping[str, int] = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's ``SecurityProtocol`` ids, as UpdateMetadata carries them."""

_ERRORS = {e.value: e for e in Errors}


def error(code: int) -> Errors:
    return _ERRORS.get(code, Errors.UNKNOWN_SERVER_ERROR)


def topic_id_bytes(topic_id: str) -> bytes:
    """Kafka's printed topic id as its 16 wire bytes."""
    try:
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    except (binascii.Error, ValueError) as e:
        raise p.KafkaProtocolError(f"topic id {topic_id!r} is not base64") from e
    if len(raw) != 16:
        raise p.KafkaProtocolError(f"topic id {topic_id!r} is {len(raw)} bytes, not 16")
    return raw


def topic_id_text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_ZERO_ID = topic_id_bytes(ZERO_UUID)


# --- The controller's requests ---------------------------------------------------------------------


def api_of(request: ControllerRequest) -> p.Api:
    if isinstance(request, LeaderAndIsrRequest):
        return p.LEADER_AND_ISR
    if isinstance(request, UpdateMetadataRequest):
        return p.UPDATE_METADATA
    return p.STOP_REPLICA


def _group(states: Iterable[Any]) -> dict[str, list[Any]]:
    """States by topic, topics in order of first appearance (as Kafka's request builders group)."""
    groups: dict[str, list[Any]] = {}
    for state in states:
        groups.setdefault(state.topic, []).append(state)
    return groups


def _leader_and_isr_state(s: Any) -> dict[str, Any]:
    return {"TopicName": s.topic, "PartitionIndex": s.partition, "ControllerEpoch": s.controller_epoch,
            "Leader": s.leader, "LeaderEpoch": s.leader_epoch, "Isr": s.isr, "PartitionEpoch": s.partition_epoch,
            "Replicas": s.replicas, "AddingReplicas": s.adding_replicas, "RemovingReplicas": s.removing_replicas,
            "IsNew": s.is_new, "LeaderRecoveryState": int(s.leader_recovery_state)}


def _update_metadata_state(s: Any) -> dict[str, Any]:
    return {"TopicName": s.topic, "PartitionIndex": s.partition, "ControllerEpoch": s.controller_epoch,
            "Leader": s.leader, "LeaderEpoch": s.leader_epoch, "Isr": s.isr, "ZkVersion": s.partition_epoch,
            "Replicas": s.replicas, "OfflineReplicas": s.offline_replicas}


def _partition_states(request: LeaderAndIsrRequest | UpdateMetadataRequest, version: int,
                      a: p.Api) -> dict[str, Any]:
    """The states field of a LeaderAndIsr or UpdateMetadata body: the Rust extension's bytes for a
    native payload, dicts otherwise."""
    grouped = version >= (2 if a is p.LEADER_AND_ISR else 5)
    field = "TopicStates" if grouped else "UngroupedPartitionStates"
    states = request.partition_states
    ids = {topic: topic_id_bytes(tid) for topic, tid in request.topic_ids.items()}
    native = getattr(states, "kafka_encode", None)
    if native is not None:
        try:
            return {field: p.Encoded(native(version, ids))}
        except ValueError as e:
            raise p.KafkaProtocolError(str(e)) from e
    to_dict = _leader_and_isr_state if a is p.LEADER_AND_ISR else _update_metadata_state
    if not grouped:
        return {field: [to_dict(s) for s in states]}
    return {field: [{"TopicName": topic, "TopicId": ids.get(topic, _ZERO_ID),
                     "PartitionStates": [to_dict(s) for s in members]}
                    for topic, members in _group(states).items()]}


def _endpoint(broker: BrokerInfo, listener: str | None) -> EndPoint:
    for endpoint in broker.endpoints:
        if listener is None or endpoint.listener_name == listener:
            return endpoint
    raise p.KafkaProtocolError(f"broker {broker.id} has no endpoint on listener {listener}")


def _live_broker(broker: BrokerInfo, version: int) -> dict[str, Any]:
    body: dict[str, Any] = {"Id": broker.id, "Rack": broker.rack}
    if version == 0:
        plaintext = _endpoint(broker, "PLAINTEXT")
        body.update(V0Host=plaintext.host, V0Port=plaintext.port)
    body["Endpoints"] = [{"Port": e.port, "Host": e.host, "Listener": e.listener_name,
                          "SecurityProtocol": SECURITY_PROTOCOLS[e.security_protocol]}
                         for e in broker.endpoints]
    return body


def controller_request_body(request: ControllerRequest, listener: str | None = None) -> dict[str, Any]:
    """The wire body of one of the controller's requests at its own ``version``; ``listener``
    names the inter-broker listener whose endpoints LeaderAndIsr's live leaders carry (None: each
    leader's first)."""
    a = api_of(request)
    version = request.version
    a.check_version(version)
    body: dict[str, Any] = {"ControllerId": request.controller_id, "ControllerEpoch": request.controller_epoch,
                            "BrokerEpoch": request.broker_epoch}
    if isinstance(request, LeaderAndIsrRequest):
        body.update(_partition_states(request, version, a))
        body["LiveLeaders"] = [{"BrokerId": b.id, "HostName": e.host, "Port": e.port}
                               for b in request.live_leaders for e in (_endpoint(b, listener),)]
    elif isinstance(request, UpdateMetadataRequest):
        body.update(_partition_states(request, version, a))
        body["LiveBrokers"] = [_live_broker(b, version) for b in request.live_brokers]
    else:
        body["DeletePartitions"] = request.delete_partitions
        groups = _group(request.partition_states)
        if version == 0:
            body["UngroupedPartitions"] = [{"TopicName": s.topic, "PartitionIndex": s.partition}
                                           for s in request.partition_states]
        elif version <= 2:
            body["Topics"] = [{"Name": t, "PartitionIndexes": tuple(s.partition for s in ss)}
                              for t, ss in groups.items()]
        else:
            body["TopicStates"] = [{"TopicName": t, "PartitionStates": [
                {"PartitionIndex": s.partition, "LeaderEpoch": s.leader_epoch, "DeletePartition": s.delete_partition}
                for s in ss]} for t, ss in groups.items()]
    return body


def encode_controller_request(request: ControllerRequest, correlation_id: int, client_id: str | None,
                              listener: str | None = None) -> bytes:
    """The request's bytes (header and body; the frame's size prefix is the transport's)."""
    header = p.RequestHeader(api_of(request).key, request.version, correlation_id, client_id)
    return p.encode_request(header, controller_request_body(request, listener))


def controller_response(request: ControllerRequest, body: Mapping[str, Any]) -> ControllerResponse:
    """A broker's answer to ``request`` (decoded with the request's api and version) in kctl's terms;
    LeaderAndIsr v5+ names topics by id, resolved through the request's topic ids."""
    top = error(body["ErrorCode"])
    if isinstance(request, UpdateMetadataRequest):
        return UpdateMetadataResponse(top)
    if isinstance(request, StopReplicaRequest):
        return StopReplicaResponse(top, {TopicPartition(e["TopicName"], e["PartitionIndex"]): error(e["ErrorCode"])
                                         for e in body["PartitionErrors"]})
    if request.version < 5:
        return LeaderAndIsrResponse(top, {TopicPartition(e["TopicName"], e["PartitionIndex"]): error(e["ErrorCode"])
                                          for e in body["PartitionErrors"]})
    names = {tid: topic for topic, tid in request.topic_ids.items()}
    errors: dict[TopicPartition, Errors] = {}
    for t in body["Topics"]:
        topic = names.get(topic_id_text(t["TopicId"]))
        if topic is None:
            raise p.KafkaProtocolError(f"LeaderAndIsr response names topic id {topic_id_text(t['TopicId'])}, "
                                       "which the request did not carry")
        for e in t["PartitionErrors"]:
            errors[TopicPartition(topic, e["PartitionIndex"])] = error(e["ErrorCode"])
    return LeaderAndIsrResponse(top, errors)


# --- What brokers send the controller --------------------------------------------------------------


def controlled_shutdown_request(body: Mapping[str, Any]) -> ControlledShutdownRequest:
    return ControlledShutdownRequest(body["BrokerId"], body["BrokerEpoch"])


@dataclass(frozen=True)
class AlterPartitionReceived:
    """An AlterPartition request in kctl's terms (``request``), with what kctl's message does not
    carry: v3's broker epochs of each proposed ISR's members (KIP-903; empty before) and, from v2,
    the partitions of topic ids the controller does not know, which Kafka's controller answers
    ``UNKNOWN_TOPIC_ID`` without acting on them."""

    request: AlterPartitionRequest
    isr_broker_epochs: Mapping[TopicPartition, tuple[int, ...]]
    unknown_topic_ids: Mapping[bytes, tuple[int, ...]]


def alter_partition_request(body: Mapping[str, Any], topic_names: Mapping[str, str]) -> AlterPartitionReceived:
    """``topic_names``: topic id (as Kafka prints it) → name, for v2+."""
    changes: dict[TopicPartition, LeaderAndIsr] = {}
    isr_epochs: dict[TopicPartition, tuple[int, ...]] = {}
    unknown: dict[bytes, tuple[int, ...]] = {}
    for t in body["Topics"]:
        if "TopicId" in t:
            topic = topic_names.get(topic_id_text(t["TopicId"]))
            if topic is None:
                unknown[t["TopicId"]] = tuple(part["PartitionIndex"] for part in t["Partitions"])
                continue
        else:
            topic = t["TopicName"]
        for part in t["Partitions"]:
            tp = TopicPartition(topic, part["PartitionIndex"])
            members = part.get("NewIsrWithEpochs")
            if members is not None:
                isr = tuple(m["BrokerId"] for m in members)
                isr_epochs[tp] = tuple(m["BrokerEpoch"] for m in members)
            else:
                isr = part["NewIsr"]
            recovery = LeaderRecoveryState.RECOVERING if part["LeaderRecoveryState"] == 1 else LeaderRecoveryState.RECOVERED
            changes[tp] = LeaderAndIsr(body["BrokerId"], isr, part["LeaderEpoch"], part["PartitionEpoch"], recovery)
    return AlterPartitionReceived(AlterPartitionRequest(body["BrokerId"], body["BrokerEpoch"], changes), isr_epochs,
                                  unknown)


def controlled_shutdown_response_body(response: ControlledShutdownResponse) -> dict[str, Any]:
    return {"ErrorCode": response.error.value, "RemainingPartitions": [
        {"TopicName": tp.topic, "PartitionIndex": tp.partition} for tp in response.remaining_partitions]}


def _partition_error(partition: int, code: int) -> dict[str, Any]:
    return {"PartitionIndex": partition, "ErrorCode": code, "LeaderId": -1, "LeaderEpoch": -1, "Isr": (),
            "LeaderRecoveryState": 0, "PartitionEpoch": -1}


def alter_partition_response_body(response: AlterPartitionResponse, version: int, topic_ids: Mapping[str, str],
                                  unknown_topic_ids: Mapping[bytes, tuple[int, ...]] | None = None) -> dict[str, Any]:
    """``topic_ids``: name → id, for v2+ (a topic without one gets Kafka's zero id);
    ``unknown_topic_ids``: partitions of unknown topic ids, answered ``UNKNOWN_TOPIC_ID``."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, outcome in response.partitions.items():
        entry: dict[str, Any]
        if isinstance(outcome, Errors):
            entry = _partition_error(tp.partition, outcome.value)
        else:
            entry = {"PartitionIndex": tp.partition, "ErrorCode": 0, "LeaderId": outcome.leader,
                     "LeaderEpoch": outcome.leader_epoch, "Isr": outcome.isr,
                     "LeaderRecoveryState": int(outcome.leader_recovery_state),
                     "PartitionEpoch": outcome.partition_epoch}
        by_topic.setdefault(tp.topic, []).append(entry)
    topics = []
    for topic, partitions in by_topic.items():
        named: dict[str, Any] = {"TopicName": topic, "Partitions": partitions}
        if version >= 2:
            named["TopicId"] = topic_id_bytes(topic_ids.get(topic, ZERO_UUID))
        topics.append(named)
    for raw_id, indexes in (unknown_topic_ids or {}).items():
        topics.append({"TopicId": raw_id, "Partitions": [_partition_error(i, UNKNOWN_TOPIC_ID) for i in indexes]})
    return {"ThrottleTimeMs": 0, "ErrorCode": response.error.value, "Topics": topics}


def allocate_producer_ids_request(body: Mapping[str, Any]) -> AllocateProducerIdsRequest:
    return AllocateProducerIdsRequest(body["BrokerId"], body["BrokerEpoch"])


def allocate_producer_ids_response_body(response: AllocateProducerIdsResponse) -> dict[str, Any]:
    return {"ThrottleTimeMs": 0, "ErrorCode": response.error.value, "ProducerIdStart": response.producer_id_start,
            "ProducerIdLen": response.producer_id_len}


def api_versions_response_body(error_code: int = 0) -> dict[str, Any]:
    """What the controller's listener answers (with ``UNSUPPORTED_VERSION`` to a version it lacks)."""
    return {"ErrorCode": error_code, "ThrottleTimeMs": 0, "ApiKeys": [
        {"ApiKey": key, "MinVersion": lo, "MaxVersion": hi} for key, (lo, hi) in CONTROLLER_API_VERSIONS.items()]}


__all__ = [
    "AlterPartitionReceived", "allocate_producer_ids_request", "allocate_producer_ids_response_body", "CONTROLLER_API_VERSIONS", "SECURITY_PROTOCOLS", "UNKNOWN_TOPIC_ID", "UNSUPPORTED_VERSION", "alter_partition_request", "api_of", "alter_partition_response_body",
    "api_versions_response_body", "controlled_shutdown_request", "controlled_shutdown_response_body",
    "controller_request_body", "controller_response", "encode_controller_request", "error", "topic_id_bytes",
    "topic_id_text",
]
