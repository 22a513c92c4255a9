"""Hostile Kafka frames against kctl's Kafka codec (kctl.kafka.protocol): truncated, oversized
lengths, negative counts, unknown api keys and versions, bad varints, tagged-field abuse, trailing
bytes, bad UTF-8, and fuzzed mutations of valid frames. Each must be one KafkaProtocolError naming
the problem, never another exception."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.kafka import messages as km
from kctl.kafka import protocol as p
from kctl.messages import LeaderAndIsrRequest
from kctl.model import TopicPartition

ALTER_PARTITION_V3 = {"BrokerId": 2, "BrokerEpoch": 77, "Topics": [{"TopicId": bytes(range(16)), "Partitions": [
    {"PartitionIndex": 0, "LeaderEpoch": 5, "NewIsrWithEpochs": [{"BrokerId": 2, "BrokerEpoch": 70}],
     "LeaderRecoveryState": 0, "PartitionEpoch": 9}]}]}


def request(api_key: int, version: int, body: dict[str, object]) -> bytes:
    return p.encode_request(p.RequestHeader(api_key, version, 1, "broker-2"), body)


VALID = [
    request(7, 3, {"BrokerId": 2, "BrokerEpoch": 77}),
    request(7, 1, {"BrokerId": 2}),
    request(56, 3, ALTER_PARTITION_V3),
    request(18, 3, {"ClientSoftwareName": "apache-kafka-java", "ClientSoftwareVersion": "3.9.1"}),
    request(67, 0, {"BrokerId": 2, "BrokerEpoch": 77}),
]


def test_every_truncation_is_a_clear_error() -> None:
    for data in VALID:
        p.decode_request(data)
        for cut in range(len(data)):
            with pytest.raises(p.KafkaProtocolError, match="truncated|bytes left|tagged|count"):
                p.decode_request(data[:cut])


def test_trailing_bytes_are_refused() -> None:
    with pytest.raises(p.KafkaProtocolError, match="1 unexpected bytes after the message"):
        p.decode_request(VALID[0] + b"\x00")


def test_unknown_api_keys_and_versions() -> None:
    with pytest.raises(p.UnsupportedApiError, match="api key 0 is not one kctl speaks"):
        p.decode_request(struct.pack(">hhi", 0, 9, 1) + b"\xff\xff")
    with pytest.raises(p.UnsupportedApiError, match="AlterPartition version 4 is not supported"):
        p.decode_request(struct.pack(">hhi", 56, 4, 1) + b"\xff\xff\x00")
    with pytest.raises(p.UnsupportedApiError, match="AllocateProducerIds version 1 is not supported"):
        p.decode_request(struct.pack(">hhi", 67, 1, 1) + b"\xff\xff\x00")
    with pytest.raises(p.UnsupportedApiError, match="ControlledShutdown version -1"):
        p.decode_request(struct.pack(">hhi", 7, -1, 1))


def test_oversized_and_negative_counts() -> None:
    # ControlledShutdown v2 response: error code, then an int32 count of remaining partitions.
    a = p.CONTROLLED_SHUTDOWN
    for count, message in ((2**31 - 1, "announces 2147483647 elements"), (-2, "negative count -2")):
        data = struct.pack(">ihi", 1, 0, count)
        with pytest.raises(p.KafkaProtocolError, match=message):
            p.decode_response(a, 2, data)
    # A non-nullable string with length -1, and one longer than the frame.
    for length, message in ((-1, "negative length -1 for string TopicName"), (300, "truncated TopicName")):
        data = struct.pack(">ihih", 1, 0, 1, length) + b"x" * 10
        with pytest.raises(p.KafkaProtocolError, match=message):
            p.decode_response(a, 2, data)


def test_bad_utf8_is_refused() -> None:
    data = struct.pack(">ihih", 1, 0, 1, 2) + b"\xff\xfe" + struct.pack(">i", 0)
    with pytest.raises(p.KafkaProtocolError, match="TopicName is not UTF-8"):
        p.decode_response(p.CONTROLLED_SHUTDOWN, 2, data)


def test_bad_varints() -> None:
    header = p.encode_request_header(p.RequestHeader(56, 3, 1, "b"))
    body_start = struct.pack(">iq", 2, 77)
    for varint, message in ((b"\xff" * 6, "more than 5 bytes|more than 32 bits"), (b"\xff\xff\xff\xff\x7f", "more than 32 bits")):
        with pytest.raises(p.KafkaProtocolError, match=message):
            p.decode_request(header + body_start + varint)


def test_tagged_field_abuse() -> None:
    header = p.encode_request_header(p.RequestHeader(7, 3, 1, "b"))
    body = struct.pack(">iq", 2, 77)
    cases = {
        b"\x7f": "127 tagged fields announced",
        b"\x02\x05\x00\x03\x00": "tagged field 3 out of order",
        b"\x02\x05\x00\x05\x00": "tagged field 5 out of order",
        b"\x01\x05\x40": "truncated tagged field 5",
    }
    for tagged, message in cases.items():
        with pytest.raises(p.KafkaProtocolError, match=message):
            p.decode_request(header + body + tagged)
    # Unknown tags in order are skipped, as Kafka skips them.
    _, decoded = p.decode_request(header + body + b"\x02\x01\x01x\x09\x00")
    assert decoded == {"BrokerId": 2, "BrokerEpoch": 77}
    # A known tagged field (UpdateMetadata v8's Type, an int8) with bytes over.
    body8 = struct.pack(">i?iq", 0, False, 1, -1) + b"\x01\x01" + b"\x01\x00\x02\x01\x02"
    with pytest.raises(p.KafkaProtocolError, match="tagged field Type: 1 unexpected bytes"):
        p.decode(p.UPDATE_METADATA.request, body8, 8, True, "UpdateMetadata")


def test_allocate_producer_ids_bounds() -> None:
    header = p.encode_request_header(p.RequestHeader(67, 0, 1, "b"))
    assert p.decode_request(header + struct.pack(">iq", 2, 77) + b"\x00")[1] == {"BrokerId": 2, "BrokerEpoch": 77}
    with pytest.raises(p.KafkaProtocolError, match="truncated BrokerEpoch"):
        p.decode_request(header + struct.pack(">i", 2) + b"\x00\x00")
    with pytest.raises(p.KafkaProtocolError, match="unexpected bytes after the message"):
        p.decode_request(header + struct.pack(">iq", 2, 77) + b"\x00\x00")
    with pytest.raises(p.KafkaProtocolError, match="130 tagged fields announced"):
        p.decode_request(header + struct.pack(">iq", 2, 77) + b"\x82\x01")


def test_request_header_bounds() -> None:
    with pytest.raises(p.KafkaProtocolError, match="truncated"):
        p.decode_request(b"\x00\x07\x00")
    with pytest.raises(p.KafkaProtocolError, match="truncated client_id"):
        p.decode_request(struct.pack(">hhih", 7, 1, 1, 50) + b"abc")


def test_frame_sizes() -> None:
    assert p.frame_size(p.frame(b"abc")[:4]) == 3
    for size in (-1, p.MAX_FRAME_BYTES + 1):
        with pytest.raises(p.KafkaProtocolError, match=f"frame size {size} is outside"):
            p.frame_size(struct.pack(">i", size))


def test_mapping_keeps_unknown_topic_ids_apart() -> None:
    _, body = p.decode_request(VALID[2])
    received = km.alter_partition_request(body, {})
    assert (received.request.changes, received.unknown_topic_ids) == ({}, {bytes(range(16)): (0,)})
    request = LeaderAndIsrRequest(7, 0, 1, 5, (), {"foo": "AAAAAAAAAAAAAAAAAAAAAQ"}, ())
    response = {"ErrorCode": 0, "Topics": [{"TopicId": bytes(range(16)), "PartitionErrors": []}]}
    with pytest.raises(p.KafkaProtocolError, match="which the request did not carry"):
        km.controller_response(request, response)
    received = km.alter_partition_request(body, {"AAECAwQFBgcICQoLDA0ODw": "foo"})
    assert received.isr_broker_epochs == {TopicPartition("foo", 0): (70,)} and received.unknown_topic_ids == {}


def test_writer_refuses_values_kafka_cannot_carry() -> None:
    with pytest.raises(p.KafkaProtocolError, match="BrokerId: 2147483648 does not fit int32"):
        request(7, 3, {"BrokerId": 2**31, "BrokerEpoch": 1})
    with pytest.raises(p.KafkaProtocolError, match="longer than Kafka's 32767"):
        p.encode(p.CONTROLLED_SHUTDOWN.response, {"ErrorCode": 0, "RemainingPartitions": [
            {"TopicName": "x" * 40000, "PartitionIndex": 0}]}, 3, True)
    with pytest.raises(p.KafkaProtocolError, match="topic id 'AAAA' is 3 bytes"):
        km.topic_id_bytes("AAAA")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
       st.integers(0, 10_000))
def test_fuzzed_frames_decode_or_fail_cleanly(data: bytes, flips: list[tuple[int, int]], cut: int) -> None:
    mutated = bytearray(data)
    for at, value in flips:
        mutated[at % len(mutated)] = value
    try:
        p.decode_request(bytes(mutated[:max(cut, 8)]))
    except p.KafkaProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(sorted(p.APIS)), st.integers(0, 8))
def test_random_responses_decode_or_fail_cleanly(data: bytes, key: int, version: int) -> None:
    try:
        p.decode_response(p.APIS[key], version, data)
    except p.KafkaProtocolError:
        pass
