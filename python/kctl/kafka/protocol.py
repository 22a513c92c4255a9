"""Kafka's binary protocol for what a ZooKeeper-mode 3.9 broker and its controller exchange.

The schemas below are Kafka 3.9's (``clients/src/main/resources/common/message/*.json``) for
LeaderAndIsr (4, v0–7), StopReplica (5, v0–4), UpdateMetadata (6, v0–8), ControlledShutdown (7,
v0–3), ApiVersions (18, v0–3), AlterPartition (56, v0–3) and AllocateProducerIds (67, v0),
requests and responses, written as
data: a struct is a tuple of fields, each with Kafka's name, type and the versions that carry it.
One generic reader and one writer walk them, so a message is a ``dict`` keyed by Kafka's field
names. Flexible versions use compact arrays and strings (unsigned varint of length + 1) and end
each struct with a tagged-field section; request headers are v1 (v2 when flexible, v0 for
ControlledShutdown v0), response headers v0 (v1 when flexible; ApiVersions always v0).

The bulk of LeaderAndIsr and UpdateMetadata, their partition states, is written by the Rust
extension on the native engine (``PartitionStates.kafka_encode``); :func:`encode` takes such bytes
for a field in place of its value (:class:`Encoded`).

Bytes from brokers are outside input: every read checks what is left, an array or string may not
announce more elements than bytes remain, counts may not be negative, varints are at most five
bytes, tagged fields must come in ascending order within the bytes they announce, and nothing may
follow the message. Nesting is the schema's (four structs at most), never the input's: unknown
tagged fields are skipped, not parsed. Any violation is one :class:`KafkaProtocolError` naming
the message, the field and the offset.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from kctl.errors import KctlError

MAX_FRAME_BYTES = 100 * 1024 * 1024
"""The largest frame accepted: Kafka's default ``socket.request.max.bytes``."""

MAX_TAGGED_FIELDS = 64
"""Tagged fields in one struct: Kafka's schemas here define at most four."""


class KafkaProtocolError(KctlError, ValueError):
    """Bytes that are not a valid Kafka message of the api and version they claim."""


class UnsupportedApiError(KafkaProtocolError):
    """An api key, or a version of it, that kctl does not speak (Kafka closes the connection on
    an unknown api key and answers UNSUPPORTED_VERSION for a version it lacks)."""


# --- Schemas ---------------------------------------------------------------------------------------

ALL = (0, 32767)


@dataclass(frozen=True, slots=True)
class Field:
    """``kind``: ``int8`` … ``int64``, ``bool``, ``string``, ``uuid``, ``[]int32``, or a struct
    (a tuple of fields) for an array of structs. ``nullable``: a nullable string."""

    name: str
    kind: Union[str, tuple["Field", ...]]
    versions: tuple[int, int] = ALL
    nullable: bool = False
    tag: int | None = None
    default: Any = None

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]


def _since(version: int) -> tuple[int, int]:
    return (version, ALL[1])


def _upto(version: int) -> tuple[int, int]:
    return (0, version)


Struct = tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    max_version: int
    flexible_from: int
    request: Struct
    response: Struct
    min_version: int = 0

    def flexible(self, version: int) -> bool:
        return version >= self.flexible_from

    def check_version(self, version: int) -> None:
        if not self.min_version <= version <= self.max_version:
            raise UnsupportedApiError(
                f"{self.name} version {version} is not supported "
                f"(versions {self.min_version} to {self.max_version})"
            )


def _leader_and_isr_partition(topic_until: int) -> Struct:
    return (
        Field("TopicName", "string", _upto(topic_until)),
        Field("PartitionIndex", "int32"),
        Field("ControllerEpoch", "int32"),
        Field("Leader", "int32"),
        Field("LeaderEpoch", "int32"),
        Field("Isr", "[]int32"),
        Field("PartitionEpoch", "int32"),
        Field("Replicas", "[]int32"),
        Field("AddingReplicas", "[]int32", _since(3), default=()),
        Field("RemovingReplicas", "[]int32", _since(3), default=()),
        Field("IsNew", "bool", _since(1), default=False),
        Field("LeaderRecoveryState", "int8", _since(6), default=0),
    )


LEADER_AND_ISR = Api(4, "LeaderAndIsr", 7, 4, request=(
    Field("ControllerId", "int32"),
    Field("IsKRaftController", "bool", _since(7), default=False),
    Field("ControllerEpoch", "int32"),
    Field("BrokerEpoch", "int64", _since(2), default=-1),
    Field("Type", "int8", _since(5), default=0),
    Field("UngroupedPartitionStates", _leader_and_isr_partition(1), _upto(1)),
    Field("TopicStates", (
        Field("TopicName", "string"),
        Field("TopicId", "uuid", _since(5)),
        Field("PartitionStates", _leader_and_isr_partition(1)),
    ), _since(2)),
    Field("LiveLeaders", (
        Field("BrokerId", "int32"),
        Field("HostName", "string"),
        Field("Port", "int32"),
    )),
), response=(
    Field("ErrorCode", "int16"),
    Field("PartitionErrors", (
        Field("TopicName", "string"),
        Field("PartitionIndex", "int32"),
        Field("ErrorCode", "int16"),
    ), _upto(4)),
    Field("Topics", (
        Field("TopicId", "uuid"),
        Field("PartitionErrors", (
            Field("PartitionIndex", "int32"),
            Field("ErrorCode", "int16"),
        )),
    ), _since(5)),
))

_STOP_REPLICA_ERRORS = Field("PartitionErrors", (
    Field("TopicName", "string"),
    Field("PartitionIndex", "int32"),
    Field("ErrorCode", "int16"),
))

STOP_REPLICA = Api(5, "StopReplica", 4, 2, request=(
    Field("ControllerId", "int32"),
    Field("IsKRaftController", "bool", _since(4), default=False),
    Field("ControllerEpoch", "int32"),
    Field("BrokerEpoch", "int64", _since(1), default=-1),
    Field("DeletePartitions", "bool", _upto(2)),
    Field("UngroupedPartitions", (
        Field("TopicName", "string"),
        Field("PartitionIndex", "int32"),
    ), _upto(0)),
    Field("Topics", (
        Field("Name", "string"),
        Field("PartitionIndexes", "[]int32"),
    ), (1, 2)),
    Field("TopicStates", (
        Field("TopicName", "string"),
        Field("PartitionStates", (
            Field("PartitionIndex", "int32"),
            Field("LeaderEpoch", "int32", default=-1),
            Field("DeletePartition", "bool", default=False),
        )),
    ), _since(3)),
), response=(Field("ErrorCode", "int16"), _STOP_REPLICA_ERRORS))


def _update_metadata_partition() -> Struct:
    return (
        Field("TopicName", "string", _upto(4)),
        Field("PartitionIndex", "int32"),
        Field("ControllerEpoch", "int32"),
        Field("Leader", "int32"),
        Field("LeaderEpoch", "int32"),
        Field("Isr", "[]int32"),
        Field("ZkVersion", "int32"),
        Field("Replicas", "[]int32"),
        Field("OfflineReplicas", "[]int32", _since(4), default=()),
    )


UPDATE_METADATA = Api(6, "UpdateMetadata", 8, 6, request=(
    Field("ControllerId", "int32"),
    Field("IsKRaftController", "bool", _since(8), default=False),
    Field("ControllerEpoch", "int32"),
    Field("BrokerEpoch", "int64", _since(5), default=-1),
    Field("UngroupedPartitionStates", _update_metadata_partition(), _upto(4)),
    Field("TopicStates", (
        Field("TopicName", "string"),
        Field("TopicId", "uuid", _since(7)),
        Field("PartitionStates", _update_metadata_partition()),
    ), _since(5)),
    Field("LiveBrokers", (
        Field("Id", "int32"),
        Field("V0Host", "string", _upto(0)),
        Field("V0Port", "int32", _upto(0)),
        Field("Endpoints", (
            Field("Port", "int32"),
            Field("Host", "string"),
            Field("Listener", "string", _since(3)),
            Field("SecurityProtocol", "int16"),
        ), _since(1)),
        Field("Rack", "string", _since(2), nullable=True),
    )),
    Field("Type", "int8", _since(8), tag=0, default=0),
), response=(Field("ErrorCode", "int16"),))

CONTROLLED_SHUTDOWN = Api(7, "ControlledShutdown", 3, 3, request=(
    Field("BrokerId", "int32"),
    Field("BrokerEpoch", "int64", _since(2), default=-1),
), response=(
    Field("ErrorCode", "int16"),
    Field("RemainingPartitions", (
        Field("TopicName", "string"),
        Field("PartitionIndex", "int32"),
    )),
))

API_VERSIONS = Api(18, "ApiVersions", 3, 3, request=(
    Field("ClientSoftwareName", "string", _since(3)),
    Field("ClientSoftwareVersion", "string", _since(3)),
), response=(
    Field("ErrorCode", "int16"),
    Field("ApiKeys", (
        Field("ApiKey", "int16"),
        Field("MinVersion", "int16"),
        Field("MaxVersion", "int16"),
    )),
    Field("ThrottleTimeMs", "int32", _since(1), default=0),
))

_ALTER_PARTITION_TOPIC = (Field("TopicName", "string", _upto(1)), Field("TopicId", "uuid", _since(2)))
"""AlterPartition names topics by name until v1, by id from v2."""

ALTER_PARTITION = Api(56, "AlterPartition", 3, 0, request=(
    Field("BrokerId", "int32"),
    Field("BrokerEpoch", "int64"),
    Field("Topics", (
        *_ALTER_PARTITION_TOPIC,
        Field("Partitions", (
            Field("PartitionIndex", "int32"),
            Field("LeaderEpoch", "int32"),
            Field("NewIsr", "[]int32", _upto(2)),
            Field("NewIsrWithEpochs", (
                Field("BrokerId", "int32"),
                Field("BrokerEpoch", "int64", default=-1),
            ), _since(3)),
            Field("LeaderRecoveryState", "int8", _since(1), default=0),
            Field("PartitionEpoch", "int32"),
        )),
    )),
), response=(
    Field("ThrottleTimeMs", "int32"),
    Field("ErrorCode", "int16"),
    Field("Topics", (
        *_ALTER_PARTITION_TOPIC,
        Field("Partitions", (
            Field("PartitionIndex", "int32"),
            Field("ErrorCode", "int16"),
            Field("LeaderId", "int32"),
            Field("LeaderEpoch", "int32"),
            Field("Isr", "[]int32"),
            Field("LeaderRecoveryState", "int8", _since(1), default=0),
            Field("PartitionEpoch", "int32"),
        )),
    )),
))

ALLOCATE_PRODUCER_IDS = Api(67, "AllocateProducerIds", 0, 0, request=(
    Field("BrokerId", "int32"),
    Field("BrokerEpoch", "int64"),
), response=(
    Field("ThrottleTimeMs", "int32"),
    Field("ErrorCode", "int16"),
    Field("ProducerIdStart", "int64"),
    Field("ProducerIdLen", "int32"),
))

APIS: Mapping[int, Api] = {api.key: api for api in (
    LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN, API_VERSIONS, ALTER_PARTITION,
    ALLOCATE_PRODUCER_IDS)}


def api(key: int) -> Api:
    try:
        return APIS[key]
    except KeyError:
        raise UnsupportedApiError(f"api key {key} is not one kctl speaks ({sorted(APIS)})") from None


# --- Writing ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Encoded:
    """A field's bytes written elsewhere (the Rust extension's partition states), length prefix
    included, taken by :func:`encode` as they are."""

    data: bytes


_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_FIXED = {"int8": _I8, "int16": _I16, "int32": _I32, "int64": _I64}


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


class _Writer:
    def __init__(self, flexible: bool) -> None:
        self.out = bytearray()
        self.flexible = flexible

    def length(self, n: int | None) -> None:
        """An array's or string's length (``None``: null)."""
        if self.flexible:
            _uvarint(self.out, 0 if n is None else n + 1)
        else:
            self.out += _I32.pack(-1 if n is None else n)

    def string(self, text: str | None, name: str) -> None:
        if text is None:
            if self.flexible:
                self.out.append(0)
            else:
                self.out += _I16.pack(-1)
            return
        data = text.encode()
        if len(data) > 32767:
            raise KafkaProtocolError(f"{name}: a string of {len(data)} bytes is longer than Kafka's 32767")
        if self.flexible:
            _uvarint(self.out, len(data) + 1)
        else:
            self.out += _I16.pack(len(data))
        self.out += data

    def value(self, f: Field, value: Any, version: int) -> None:
        kind = f.kind
        if isinstance(value, Encoded):
            self.out += value.data
        elif isinstance(kind, tuple):
            self.length(len(value))
            for item in value:
                self.struct(kind, item, version)
        elif kind in _FIXED:
            try:
                self.out += _FIXED[kind].pack(value)
            except struct.error as e:
                raise KafkaProtocolError(f"{f.name}: {value!r} does not fit {kind}") from e
        elif kind == "bool":
            self.out.append(1 if value else 0)
        elif kind == "string":
            self.string(value, f.name)
        elif kind == "uuid":
            if len(value) != 16:
                raise KafkaProtocolError(f"{f.name}: a uuid is 16 bytes, not {len(value)}")
            self.out += value
        else:  # []int32
            self.length(len(value))
            for x in value:
                self.out += _I32.pack(x)

    def struct(self, fields: Struct, values: Mapping[str, Any], version: int) -> None:
        tagged = []
        for f in fields:
            if not f.present(version):
                continue
            value = values.get(f.name, f.default)
            if f.tag is not None:
                if self.flexible and value != f.default:
                    tagged.append((f, value))
                continue
            if value is None and not f.nullable:
                raise KafkaProtocolError(f"{f.name} is missing")
            self.value(f, value, version)
        if self.flexible:
            _uvarint(self.out, len(tagged))
            for f, value in tagged:
                inner = _Writer(True)
                inner.value(f, value, version)
                assert f.tag is not None
                _uvarint(self.out, f.tag)
                _uvarint(self.out, len(inner.out))
                self.out += inner.out


def encode(schema: Struct, values: Mapping[str, Any], version: int, flexible: bool) -> bytes:
    """The bytes of one message body."""
    w = _Writer(flexible)
    w.struct(schema, values, version)
    return bytes(w.out)


# --- Reading ---------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes, flexible: bool, what: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.flexible = flexible
        self.what = what

    def fail(self, message: str) -> KafkaProtocolError:
        return KafkaProtocolError(f"{self.what}: {message} at byte {self.pos}")

    def take(self, n: int, name: str) -> memoryview:
        if n > len(self.data) - self.pos:
            raise self.fail(f"truncated {name} ({n} bytes needed, {len(self.data) - self.pos} left)")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def fixed(self, s: struct.Struct, name: str) -> int:
        value: int = s.unpack(self.take(s.size, name))[0]
        return value

    def uvarint(self, name: str) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1, name)[0]
            if shift == 28 and byte > 0x0F:
                raise self.fail(f"bad varint in {name} (more than 32 bits)")
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise self.fail(f"bad varint in {name} (more than 5 bytes)")

    def length(self, name: str, min_item: int, nullable: bool = False) -> int | None:
        """An array's element count, refused when negative or larger than the bytes left allow."""
        n = self.uvarint(name) - 1 if self.flexible else self.fixed(_I32, name)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.fail(f"negative count {n} for {name}")
        if n * min_item > len(self.data) - self.pos:
            raise self.fail(f"{name} announces {n} elements, more than the {len(self.data) - self.pos} bytes left")
        return n

    def string(self, name: str, nullable: bool) -> str | None:
        if self.flexible:
            n = self.uvarint(name) - 1
        else:
            n = self.fixed(_I16, name)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.fail(f"negative length {n} for string {name}")
        try:
            return str(self.take(n, name), "utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{name} is not UTF-8 ({e.reason})") from None

    def value(self, f: Field, version: int) -> Any:
        kind = f.kind
        if isinstance(kind, tuple):
            n = self.length(f.name, 1)
            assert n is not None
            return [self.struct(kind, version) for _ in range(n)]
        if kind in _FIXED:
            return self.fixed(_FIXED[kind], f.name)
        if kind == "bool":
            return self.take(1, f.name)[0] != 0
        if kind == "string":
            return self.string(f.name, f.nullable)
        if kind == "uuid":
            return bytes(self.take(16, f.name))
        n = self.length(f.name, 4)
        assert n is not None
        return struct.unpack(f">{n}i", self.take(4 * n, f.name))

    def struct(self, fields: Struct, version: int) -> dict[str, Any]:
        values: dict[str, Any] = {}
        tagged: dict[int, Field] = {}
        for f in fields:
            if not f.present(version):
                if f.default is not None or f.nullable:
                    values[f.name] = f.default
            elif f.tag is not None:
                tagged[f.tag] = f
                values[f.name] = f.default
            else:
                values[f.name] = self.value(f, version)
        if self.flexible:
            self.tagged_fields(tagged, values, version)
        return values

    def tagged_fields(self, known: Mapping[int, Field], values: dict[str, Any], version: int) -> None:
        count = self.uvarint("tagged field count")
        if count > MAX_TAGGED_FIELDS or count * 2 > len(self.data) - self.pos:
            raise self.fail(f"{count} tagged fields announced")
        previous = -1
        for _ in range(count):
            tag = self.uvarint("tag")
            if tag <= previous:
                raise self.fail(f"tagged field {tag} out of order (after {previous})")
            previous = tag
            size = self.uvarint(f"size of tagged field {tag}")
            body = self.take(size, f"tagged field {tag}")
            f = known.get(tag)
            if f is not None:
                inner = _Reader(bytes(body), True, f"{self.what} tagged field {f.name}")
                values[f.name] = inner.value(f, version)
                inner.finish()

    def finish(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} unexpected bytes after the message")


def decode(schema: Struct, data: bytes, version: int, flexible: bool, what: str) -> dict[str, Any]:
    """One whole message body; anything left over is an error."""
    reader = _Reader(data, flexible, what)
    values = reader.struct(schema, version)
    reader.finish()
    return values


# --- Headers and frames ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def request_header_version(a: Api, version: int) -> int:
    if a is CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if a.flexible(version) else 1


def response_header_version(a: Api, version: int) -> int:
    return 1 if a.flexible(version) and a is not API_VERSIONS else 0


def encode_request(header: RequestHeader, body: Mapping[str, Any]) -> bytes:
    """A request's bytes (header and body, without the frame's size prefix)."""
    a = api(header.api_key)
    return encode_request_header(header) + encode(a.request, body, header.api_version, a.flexible(header.api_version))


def encode_request_header(header: RequestHeader) -> bytes:
    """The header alone, at the header version its api and version take."""
    a = api(header.api_key)
    a.check_version(header.api_version)
    w = _Writer(False)
    w.out += struct.pack(">hhi", header.api_key, header.api_version, header.correlation_id)
    header_version = request_header_version(a, header.api_version)
    if header_version >= 1:
        w.string(header.client_id, "client_id")
    if header_version >= 2:
        w.out.append(0)
    return bytes(w.out)


def decode_request(data: bytes) -> tuple[RequestHeader, dict[str, Any]]:
    """A request received: its header, then its body by the header's api and version."""
    if len(data) < 8:
        raise KafkaProtocolError(f"request header: truncated ({len(data)} bytes)")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", data)
    a = api(api_key)
    a.check_version(api_version)
    reader = _Reader(data, False, f"{a.name} v{api_version} request header")
    reader.pos = 8
    header_version = request_header_version(a, api_version)
    client_id = reader.string("client_id", nullable=True) if header_version >= 1 else None
    if header_version >= 2:
        reader.flexible = True
        reader.tagged_fields({}, {}, api_version)
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    body = decode(a.request, bytes(reader.data[reader.pos:]), api_version, a.flexible(api_version),
                  f"{a.name} v{api_version} request")
    return header, body


def encode_response(a: Api, version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    a.check_version(version)
    head = _I32.pack(correlation_id) + (b"\x00" if response_header_version(a, version) else b"")
    return head + encode(a.response, body, version, a.flexible(version))


def decode_response(a: Api, version: int, data: bytes) -> tuple[int, dict[str, Any]]:
    """A response to a request of ``a`` at ``version``: its correlation id and body."""
    a.check_version(version)
    reader = _Reader(data, response_header_version(a, version) == 1, f"{a.name} v{version} response header")
    correlation_id = reader.fixed(_I32, "correlation_id")
    if reader.flexible:
        reader.tagged_fields({}, {}, version)
    body = decode(a.response, bytes(reader.data[reader.pos:]), version, a.flexible(version),
                  f"{a.name} v{version} response")
    return correlation_id, body


def frame(payload: bytes) -> bytes:
    """A frame: the 4-byte size, then the payload."""
    return _I32.pack(len(payload)) + payload


def read_frame(sock: socket.socket, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """The next frame's payload from ``sock`` (its size checked by :func:`frame_size` before anything
    is read); a ``ConnectionError`` when the peer closes the connection first."""
    return _read_exactly(sock, frame_size(_read_exactly(sock, 4), max_bytes))


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError(f"the peer closed the connection with {n - len(data)} bytes of a frame unread")
        data += chunk
    return bytes(data)


def frame_size(prefix: bytes, max_bytes: int = MAX_FRAME_BYTES) -> int:
    """The size a frame's 4-byte prefix announces, refused when negative or above ``max_bytes``."""
    size: int = _I32.unpack(prefix)[0]
    if not 0 <= size <= max_bytes:
        raise KafkaProtocolError(f"frame size {size} is outside 0 to {max_bytes} bytes")
    return size


__all__ = [
    "ALTER_PARTITION", "APIS", "API_VERSIONS", "Api", "CONTROLLED_SHUTDOWN", "Encoded", "Field",
    "KafkaProtocolError", "LEADER_AND_ISR", "MAX_FRAME_BYTES", "RequestHeader", "STOP_REPLICA",
    "UPDATE_METADATA", "UnsupportedApiError", "api", "decode", "decode_request", "decode_response",
    "encode", "encode_request", "encode_request_header", "encode_response", "frame", "frame_size", "read_frame",
]
