"""kctl's Kafka wire codec (kctl.kafka) against Kafka 3.9.1's own generated message classes.

Every api and version kctl speaks, both ways, through ``KafkaMessages.java`` (one JVM per test):
- kctl's bytes are parsed by Kafka's ``*Data`` class (nothing may be left over) and written back
  by Kafka byte for byte the same;
- Kafka's JSON of that message, read by Kafka's JSON converter and written by Kafka, is decoded by
  kctl into the same fields kctl decodes from its own bytes;
- the controller's requests come from a real request batch on each engine, at the versions
  ``inter.broker.protocol.version`` selects (the native engine's partition states written by the
  Rust extension, compared with the Python writer too), and Kafka's JSON must say what kctl's
  messages say;
- what brokers send kctl is written by Kafka from JSON composed here and must map to the kctl
  messages expected.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kctl.errors import Errors
from kctl.kafka import messages as km
from kctl.kafka import protocol as p
from kctl.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionResponse,
    ControlledShutdownResponse,
    ControllerRequest,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kctl.model import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.testing.kafka import KafkaInstallation

from tests.support.statemachine_harness import make_harness, topic_id

ORACLE = Path(__file__).with_name("KafkaMessages.java")

IBPS = ("0.8.2", "0.9.0", "0.10.0-IV1", "0.10.2-IV0", "1.0-IV0", "2.2-IV0", "2.4-IV0", "2.4-IV1", "2.6-IV0",
        "2.8-IV1", "3.2-IV0", "3.4-IV0", "3.9-IV0")
"""Every release where one of the controller's request versions changes (ControllerChannelManager)."""


def run_kafka(installation: KafkaInstallation, lines: Sequence[str]) -> list[str]:
    out = subprocess.run([installation.java, "-cp", installation.classpath, str(ORACLE)], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, timeout=300, check=True)
    answers = out.stdout.splitlines()
    assert len(answers) == len(lines), out.stderr
    return answers


@dataclasses.dataclass
class Case:
    api: p.Api
    version: int
    kind: str  # request | response
    data: bytes

    @property
    def schema(self) -> p.Struct:
        return self.api.request if self.kind == "request" else self.api.response

    def decode(self, data: bytes) -> dict[str, Any]:
        return p.decode(self.schema, data, self.version, self.api.flexible(self.version), self.api.name)


def round_trip(installation: KafkaInstallation, cases: Sequence[Case]) -> list[dict[str, Any]]:
    """Both ways through Kafka for each case; returns Kafka's JSON of each."""
    reads = run_kafka(installation, [f"read {c.api.key} {c.version} {c.kind} {c.data.hex()}" for c in cases])
    kafka_json = []
    for case, answer in zip(cases, reads):
        status, text, hex_back = answer.split(" ", 2)
        assert status == "ok", f"Kafka refused kctl's {case.api.name} v{case.version} {case.kind}: {answer}"
        assert bytes.fromhex(hex_back) == case.data, f"{case.api.name} v{case.version} {case.kind}: bytes differ"
        kafka_json.append(json.loads(text))
    writes = run_kafka(installation, [f"write {c.api.key} {c.version} {c.kind} {json.dumps(j)}"
                                      for c, j in zip(cases, kafka_json)])
    for case, answer in zip(cases, writes):
        status, _, hex_written = answer.split(" ", 2)
        assert status == "ok", answer
        assert case.decode(bytes.fromhex(hex_written)) == case.decode(case.data)
    return kafka_json


# --- The controller's requests ------------------------------------------------------------------------


def sent_requests(ibp: str, engine: str) -> list[ControllerRequest]:
    """A flush of LeaderAndIsr, UpdateMetadata and StopReplica from a real request batch."""
    h = make_harness((1, 2, 3), config={"inter.broker.protocol.version": ibp}, engine=engine)
    h.create_topic("foo", {0: [1, 2, 3], 1: [2, 3, 1], 2: ReplicaAssignment((3, 1, 2), (2,), (3,))})
    h.create_topic("bar", {0: [3, 1]}, with_topic_id=False)
    tps = [TopicPartition("foo", 0), TopicPartition("bar", 0), TopicPartition("foo", 1), TopicPartition("foo", 2)]
    for i, tp in enumerate(tps):
        recovery = LeaderRecoveryState.RECOVERING if i == 3 else LeaderRecoveryState.RECOVERED
        lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(1 + i % 3, (1 + i % 3, 3), 4 + i, 7 + i, recovery), 1)
        h.context.put_partition_leadership(tp, lice)
        h.batch.add_leader_and_isr_request_for_brokers([1, 2, 3], tp, lice,
                                                       h.context.partition_full_replica_assignment(tp), i % 2 == 0)
    h.batch.add_update_metadata_request_for_brokers([1, 2], tps)
    h.batch.add_stop_replica_request_for_brokers([2], tps[0], True)
    h.batch.add_stop_replica_request_for_brokers([2], tps[1], False)
    h.batch.send_requests_to_brokers(1)
    return [s.request for s in h.channel.sent]


def python_states(request: ControllerRequest) -> ControllerRequest:
    """The request with its states as a tuple, so that the Python writer writes them."""
    return dataclasses.replace(request, partition_states=tuple(request.partition_states))  # type: ignore[arg-type]


def kafka_states(j: dict[str, Any], grouped_from: int, version: int) -> dict[tuple[str, int], dict[str, Any]]:
    if version < grouped_from:
        return {(s["topicName"], s["partitionIndex"]): s for s in j["ungroupedPartitionStates"]}
    return {(t["topicName"], s["partitionIndex"]): dict(s, topicId=t.get("topicId"))
            for t in j["topicStates"] for s in t["partitionStates"]}


def check_meaning(request: ControllerRequest, j: dict[str, Any]) -> None:
    """Kafka's reading of the request says what kctl's message says, field by field."""
    v = request.version
    assert (j["controllerId"], j["controllerEpoch"]) == (request.controller_id, request.controller_epoch)
    if isinstance(request, LeaderAndIsrRequest):
        states = kafka_states(j, 2, v)
        assert len(states) == len(request.partition_states)
        for s in request.partition_states:
            k = states[(s.topic, s.partition)]
            assert (k["leader"], k["leaderEpoch"], k["isr"], k["partitionEpoch"], k["replicas"], k["controllerEpoch"]) == (
                s.leader, s.leader_epoch, list(s.isr), s.partition_epoch, list(s.replicas), s.controller_epoch)
            if v >= 1:
                assert k["isNew"] == s.is_new
            if v >= 3:
                assert (k["addingReplicas"], k["removingReplicas"]) == (list(s.adding_replicas), list(s.removing_replicas))
            if v >= 5:
                assert k["topicId"] == request.topic_ids.get(s.topic, km.ZERO_UUID)
            if v >= 6:
                assert k["leaderRecoveryState"] == int(s.leader_recovery_state)
        assert [(x["brokerId"], x["hostName"], x["port"]) for x in j["liveLeaders"]] == [
            (b.id, b.endpoints[0].host, b.endpoints[0].port) for b in request.live_leaders]
        if v >= 2:
            assert j["brokerEpoch"] == request.broker_epoch
    elif isinstance(request, UpdateMetadataRequest):
        states = kafka_states(j, 5, v)
        assert len(states) == len(request.partition_states)
        for s in request.partition_states:
            k = states[(s.topic, s.partition)]
            assert (k["leader"], k["leaderEpoch"], k["isr"], k["zkVersion"], k["replicas"]) == (
                s.leader, s.leader_epoch, list(s.isr), s.partition_epoch, list(s.replicas))
            if v >= 4:
                assert k["offlineReplicas"] == list(s.offline_replicas)
            if v >= 7:
                assert k["topicId"] == request.topic_ids.get(s.topic, km.ZERO_UUID)
        brokers = {b["id"]: b for b in j["liveBrokers"]}
        assert sorted(brokers) == sorted(b.id for b in request.live_brokers)
        for b in request.live_brokers:
            e = b.endpoints[0]
            if v == 0:
                assert (brokers[b.id]["v0Host"], brokers[b.id]["v0Port"]) == (e.host, e.port)
            else:
                assert (brokers[b.id]["endpoints"][0]["host"], brokers[b.id]["endpoints"][0]["port"]) == (e.host, e.port)
            if v >= 2:
                assert brokers[b.id]["rack"] == b.rack
    else:
        assert isinstance(request, StopReplicaRequest)
        if v >= 3:
            got = {(t["topicName"], s["partitionIndex"]): (s["deletePartition"], s["leaderEpoch"])
                   for t in j["topicStates"] for s in t["partitionStates"]}
            assert got == {(s.topic, s.partition): (s.delete_partition, s.leader_epoch) for s in request.partition_states}
        else:
            assert j["deletePartitions"] == request.delete_partitions
            got_parts = ({(x["topicName"], x["partitionIndex"]) for x in j["ungroupedPartitions"]} if v == 0 else
                         {(t["name"], i) for t in j["topics"] for i in t["partitionIndexes"]})
            assert got_parts == {(s.topic, s.partition) for s in request.partition_states}


@pytest.mark.parametrize("engine", ["rust", "reference"])
def test_controller_requests_at_every_version_match_kafka(kafka_installation: KafkaInstallation, engine: str) -> None:
    cases, requests = [], []
    for ibp in IBPS:
        for request in sent_requests(ibp, engine):
            body = p.encode(km.api_of(request).request, km.controller_request_body(request),
                            request.version, km.api_of(request).flexible(request.version))
            python_body = p.encode(km.api_of(request).request, km.controller_request_body(python_states(request)),
                                   request.version, km.api_of(request).flexible(request.version))
            assert body == python_body, f"{request.api} v{request.version}: Rust and Python writers differ"
            cases.append(Case(km.api_of(request), request.version, "request", body))
            requests.append(request)
    versions = {(c.api.name, c.version) for c in cases}
    assert versions == ({("LeaderAndIsr", v) for v in range(8)} | {("UpdateMetadata", v) for v in range(9)}
                        | {("StopReplica", v) for v in range(5)})
    if engine == "rust":
        assert any(hasattr(r.partition_states, "kafka_encode") for r in requests), "no native payload was tested"
    for request, j in zip(requests, round_trip(kafka_installation, cases)):
        check_meaning(request, j)


def test_request_and_response_headers_match_kafka(kafka_installation: KafkaInstallation) -> None:
    """Header v0 (ControlledShutdown v0), v1 and v2 (flexible versions; a null client id too), and
    response headers v0 and v1, as Kafka's header classes read and write them."""
    headers = [p.RequestHeader(7, 0, 1), p.RequestHeader(4, 3, 42, "kctl-controller-0"),
               p.RequestHeader(4, 7, 43, "kctl-controller-0"), p.RequestHeader(6, 8, 44, None),
               p.RequestHeader(56, 3, -5, "broker-2")]
    lines = [f"read header {p.request_header_version(p.api(h.api_key), h.api_version)} request "
             f"{p.encode_request_header(h).hex()}" for h in headers]
    lines += [f"read header {v} response {(2**31 - 1).to_bytes(4, 'big').hex()}{'00' * v}" for v in (0, 1)]
    answers = run_kafka(kafka_installation, lines)
    for h, answer in zip(headers, answers):
        status, text, hex_back = answer.split(" ", 2)
        assert status == "ok", answer
        assert bytes.fromhex(hex_back) == p.encode_request_header(h)
        j = json.loads(text)
        assert (j["requestApiKey"], j["requestApiVersion"], j["correlationId"], j.get("clientId")) == (
            h.api_key, h.api_version, h.correlation_id, h.client_id)
    for answer in answers[len(headers):]:
        assert answer.startswith("ok") and json.loads(answer.split(" ", 2)[1])["correlationId"] == 2**31 - 1
    a = p.LEADER_AND_ISR
    framed = p.encode_response(a, 7, 9, {"ErrorCode": 0, "Topics": []})
    assert framed[:5] == bytes([0, 0, 0, 9, 0]) and p.decode_response(a, 7, framed) == (9, {"ErrorCode": 0, "Topics": []})


# --- Responses from brokers, requests from brokers, kctl's answers ------------------------------------

FOO_ID = topic_id("foo")


def kafka_writes(installation: KafkaInstallation, items: Sequence[tuple[p.Api, int, str, dict[str, Any]]]) -> list[bytes]:
    answers = run_kafka(installation, [f"write {a.key} {v} {kind} {json.dumps(j)}" for a, v, kind, j in items])
    out = []
    for answer in answers:
        status, _, hex_written = answer.split(" ", 2)
        assert status == "ok", answer
        out.append(bytes.fromhex(hex_written))
    return out


def test_broker_responses_from_kafka_map_to_kctl(kafka_installation: KafkaInstallation) -> None:
    by_version = {r.version: r for ibp in IBPS for r in sent_requests(ibp, "reference")}
    items: list[tuple[p.Api, int, str, dict[str, Any]]] = []
    expected: list[Any] = []
    requests: list[ControllerRequest] = []
    for ibp in IBPS:
        for request in sent_requests(ibp, "reference"):
            v = request.version
            if isinstance(request, UpdateMetadataRequest):
                items.append((p.UPDATE_METADATA, v, "response", {"errorCode": 11}))
                expected.append(UpdateMetadataResponse(Errors.STALE_CONTROLLER_EPOCH))
            elif isinstance(request, LeaderAndIsrRequest):
                if v < 5:
                    j = {"errorCode": 0, "partitionErrors": [{"topicName": "foo", "partitionIndex": 1, "errorCode": 0},
                                                             {"topicName": "bar", "partitionIndex": 0, "errorCode": 74}]}
                else:
                    j = {"errorCode": 0, "topics": [{"topicId": FOO_ID, "partitionErrors": [
                        {"partitionIndex": 1, "errorCode": 0}, {"partitionIndex": 0, "errorCode": 74}]}]}
                items.append((p.LEADER_AND_ISR, v, "response", j))
                errors = ({TopicPartition("foo", 1): Errors.NONE, TopicPartition("bar", 0): Errors.FENCED_LEADER_EPOCH}
                          if v < 5 else {TopicPartition("foo", 1): Errors.NONE, TopicPartition("foo", 0): Errors.FENCED_LEADER_EPOCH})
                expected.append(LeaderAndIsrResponse(Errors.NONE, errors))
            else:
                items.append((p.STOP_REPLICA, v, "response", {"errorCode": 0, "partitionErrors": [
                    {"topicName": "foo", "partitionIndex": 0, "errorCode": 56}]}))
                expected.append(StopReplicaResponse(Errors.NONE, {TopicPartition("foo", 0): Errors.KAFKA_STORAGE_ERROR}))
            requests.append(request)
    assert by_version  # every version above came from a real batch
    for request, data, want, (a, v, _, _) in zip(requests, kafka_writes(kafka_installation, items), expected, items):
        framed = (7).to_bytes(4, "big") + (b"\x00" if a.flexible(v) else b"") + data
        correlation_id, body = p.decode_response(a, v, framed)
        assert correlation_id == 7
        assert km.controller_response(request, body) == want


def test_broker_requests_from_kafka_map_to_kctl(kafka_installation: KafkaInstallation) -> None:
    items: list[tuple[p.Api, int, str, dict[str, Any]]] = []
    for v in range(4):
        items.append((p.CONTROLLED_SHUTDOWN, v, "request", {"brokerId": 2, "brokerEpoch": 77}))
    for v in range(4):
        part: dict[str, Any] = {"partitionIndex": 1, "leaderEpoch": 5, "partitionEpoch": 9}
        if v >= 1:
            part["leaderRecoveryState"] = 1
        if v < 3:
            part["newIsr"] = [2, 3]
        else:
            part["newIsrWithEpochs"] = [{"brokerId": 2, "brokerEpoch": 70}, {"brokerId": 3, "brokerEpoch": 71}]
        topic = {"topicName": "foo"} if v < 2 else {"topicId": FOO_ID}
        items.append((p.ALTER_PARTITION, v, "request", {"brokerId": 2, "brokerEpoch": 77,
                                                        "topics": [dict(topic, partitions=[part])]}))
    for v in range(4):
        items.append((p.API_VERSIONS, v, "request", {"clientSoftwareName": "apache-kafka-java",
                                                     "clientSoftwareVersion": "3.9.1"}))
    items.append((p.ALLOCATE_PRODUCER_IDS, 0, "request", {"brokerId": 2, "brokerEpoch": 77}))
    for (a, v, _, _), data in zip(items, kafka_writes(kafka_installation, items)):
        # ControlledShutdown v0 takes header v0, which has no client id.
        header = p.RequestHeader(a.key, v, 5, None if p.request_header_version(a, v) == 0 else "broker-2")
        got_header, body = p.decode_request(p.encode_request_header(header) + data)
        assert got_header == header
        if a is p.CONTROLLED_SHUTDOWN:
            request = km.controlled_shutdown_request(body)
            assert (request.broker_id, request.broker_epoch) == (2, 77 if v >= 2 else -1)
        elif a is p.ALTER_PARTITION:
            received = km.alter_partition_request(body, {FOO_ID: "foo"})
            request, epochs = received.request, received.isr_broker_epochs
            tp = TopicPartition("foo", 1)
            assert request.changes == {tp: LeaderAndIsr(2, (2, 3), 5, 9, LeaderRecoveryState.RECOVERING if v >= 1 else
                                                         LeaderRecoveryState.RECOVERED)}
            assert epochs == ({tp: (70, 71)} if v == 3 else {})
        elif a is p.ALLOCATE_PRODUCER_IDS:
            assert km.allocate_producer_ids_request(body) == AllocateProducerIdsRequest(2, 77)
        else:
            assert body.get("ClientSoftwareName") == ("apache-kafka-java" if v >= 3 else None)


def test_kctl_answers_to_brokers_match_kafka(kafka_installation: KafkaInstallation) -> None:
    tp0, tp1 = TopicPartition("foo", 0), TopicPartition("foo", 1)
    cases, meanings = [], []
    for v in range(4):
        response = ControlledShutdownResponse(Errors.NONE, (tp0, tp1))
        cases.append(Case(p.CONTROLLED_SHUTDOWN, v, "response",
                          p.encode(p.CONTROLLED_SHUTDOWN.response, km.controlled_shutdown_response_body(response), v, v >= 3)))
        meanings.append(lambda j: j["remainingPartitions"] == [{"topicName": "foo", "partitionIndex": 0},
                                                               {"topicName": "foo", "partitionIndex": 1}])
    for v in range(4):
        ap = AlterPartitionResponse(Errors.NONE, {tp0: LeaderAndIsr(1, (1, 2), 6, 10), tp1: Errors.FENCED_LEADER_EPOCH})
        cases.append(Case(p.ALTER_PARTITION, v, "response",
                          p.encode(p.ALTER_PARTITION.response, km.alter_partition_response_body(ap, v, {"foo": FOO_ID}), v, True)))
        meanings.append(lambda j, v=v: (j["topics"][0].get("topicId", FOO_ID) == FOO_ID
                                        and [(x["partitionIndex"], x["errorCode"], x["leaderId"], x["isr"], x["partitionEpoch"])
                                             for x in j["topics"][0]["partitions"]] == [(0, 0, 1, [1, 2], 10), (1, 74, -1, [], -1)]))
    for v in range(4):
        cases.append(Case(p.API_VERSIONS, v, "response",
                          p.encode(p.API_VERSIONS.response, km.api_versions_response_body(), v, v >= 3)))
        meanings.append(lambda j: {(k["apiKey"], k["minVersion"], k["maxVersion"]) for k in j["apiKeys"]}
                        == {(7, 0, 3), (18, 0, 3), (56, 0, 3), (67, 0, 0)})
    allocated = AllocateProducerIdsResponse(Errors.NONE, 3000, 1000)
    cases.append(Case(p.ALLOCATE_PRODUCER_IDS, 0, "response", p.encode(
        p.ALLOCATE_PRODUCER_IDS.response, km.allocate_producer_ids_response_body(allocated), 0, True)))
    meanings.append(lambda j: (j["errorCode"], j["producerIdStart"], j["producerIdLen"]) == (0, 3000, 1000))
    for case, j, meaning in zip(cases, round_trip(kafka_installation, cases), meanings):
        assert meaning(j), (case.api.name, case.version, j)


def test_live_leaders_take_the_named_listener() -> None:
    broker = BrokerInfo(1, (EndPoint("h1", 9092, "CLIENT"), EndPoint("h1", 9093, "INTERNAL")))
    request = LeaderAndIsrRequest(7, 0, 1, 5, (), {}, (broker,))
    assert km.controller_request_body(request, "INTERNAL")["LiveLeaders"] == [{"BrokerId": 1, "HostName": "h1", "Port": 9093}]
    with pytest.raises(p.KafkaProtocolError, match="broker 1 has no endpoint on listener OTHER"):
        km.controller_request_body(request, "OTHER")
