"""The bytes kctl's processes exchange: msgpack-encoded messages in length-prefixed frames.

A frame is a 4-byte big-endian length followed by that many bytes of msgpack. Messages are the
frozen dataclasses of :mod:`kctl.messages` (and the data-plane fetch of
:mod:`kctl.broker.fetcher`); each travels as an extension value naming its type and listing its
fields in declaration order, so the encoding needs no schema of its own and a peer of another
kctl version fails loudly (:class:`WireError`) instead of misreading a field.

Both the ``tcp`` transport (frames on a socket) and the ``zkqueue`` transport (one message per
znode) use this codec, so a request means the same thing whichever way it travelled.

The bytes come from other processes, so decoding is bounded: msgpack decodes an extension value's
payload with a nested call (and C stack) of its own, and a few hundred bytes of extension values
nested in each other once overflowed the process's stack. Extension values may nest
:data:`MAX_EXTENSION_DEPTH` deep and the containers of each payload :data:`MAX_CONTAINER_DEPTH`
deep; strings and byte strings are at most :data:`MAX_STRING_BYTES` long and arrays, maps and
extension values no longer than their frame. Anything else is one :class:`WireError`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
import reprlib
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kctl import extras
from kctl.errors import Errors, KctlError
from kctl.limits import check_depth
from kctl.model import BrokerInfo, EndPoint, LeaderAndIsr, LeaderRecoveryState, TopicPartition
from kctl.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)

FRAME_HEADER = struct.Struct("!I")
"""The length prefix of a frame."""
MAX_FRAME_BYTES = 64 * 1024 * 1024
"""The largest frame accepted (Kafka's ``socket.request.max.bytes`` is 100 MiB): a larger
announced length means a corrupt or hostile stream, and the connection is closed."""

MAX_EXTENSION_DEPTH = 8
"""Extension values inside extension values (kctl's messages need 3: a request, a partition state
or broker in it, and that one's TopicPartition, enum or endpoint)."""
MAX_CONTAINER_DEPTH = 8
"""Arrays and maps inside each other within one payload (kctl's messages need 5: a broker's
feature bounds)."""
MAX_STRING_BYTES = 1024 * 1024
"""The longest string or byte string (kctl's are names, hosts and error messages)."""

_DATACLASS, _TOPIC_PARTITION, _ERRORS, _RECOVERY = 1, 2, 3, 4  # msgpack extension codes
_CONTAINER_HEADERS = bytes(int(0x80 <= b <= 0x9F or 0xDC <= b <= 0xDF) for b in range(256))
"""A translation table marking (1) the bytes that start a msgpack array or map: how many of them a
payload holds bounds how many containers, and so how deep a nesting, it can have."""


class WireError(KctlError):
    """Bytes that are not a kctl message: a bad frame, unknown type or wrong field count."""


@functools.cache
def _msgpack() -> Any:
    """msgpack, imported on first use so that kctl without the multi-process extras still works."""
    return extras.require("msgpack", "kctl's network messages")


def check_installed() -> None:
    """Raise :class:`~kctl.extras.MissingDependencyError` now if msgpack is missing: a process
    checks before it starts anything, rather than fail on its first message."""
    _msgpack()


_TYPES: dict[str, type] = {}
_ENCODERS: dict[type, Callable[[Any], Any]] = {}
"""How ``_default`` encodes each type it knows, found by the exact type: a request carries
thousands of partition states, each a registered dataclass, and a chain of ``isinstance`` checks
and ``dataclasses.fields`` per value made encoding them most of a controller's work."""
_FIELD_COUNTS: dict[type, int] = {}


def register_message(cls: type) -> type:
    """Make a frozen dataclass encodable (class decorator; the name must be unique)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    if _TYPES.get(cls.__name__, cls) is not cls:
        raise TypeError(f"another message type is already called {cls.__name__}")
    _TYPES[cls.__name__] = cls
    names = tuple(f.name for f in dataclasses.fields(cls))
    _FIELD_COUNTS[cls] = len(names)
    _ENCODERS[cls] = functools.partial(_encode_dataclass, cls.__name__, operator.attrgetter(*names) if len(names) > 1
                                       else lambda obj: tuple(getattr(obj, name) for name in names))
    return cls


def _encode_dataclass(name: str, values: Callable[[Any], tuple[Any, ...]], obj: Any) -> Any:
    """A registered dataclass: its name and its field values in declaration order (tuples as the
    lists ``_default`` would make of them, without a call back for each)."""
    return _msgpack().ExtType(_DATACLASS, _pack([name, [list(v) if type(v) is tuple else v for v in values(obj)]]))


for _cls in (
    LeaderAndIsrRequest, LeaderAndIsrResponse, LeaderAndIsrPartitionState,
    UpdateMetadataRequest, UpdateMetadataResponse, UpdateMetadataPartitionState,
    StopReplicaRequest, StopReplicaResponse, StopReplicaPartitionState,
    ControlledShutdownRequest, ControlledShutdownResponse, AlterPartitionRequest, AlterPartitionResponse,
    BrokerInfo, EndPoint, LeaderAndIsr,
):
    register_message(_cls)


def _default(obj: Any) -> Any:
    """msgpack's hook for what it cannot encode itself (``strict_types``: every tuple comes here)."""
    encoder = _ENCODERS.get(type(obj))
    if encoder is not None:
        return encoder(obj)
    if isinstance(obj, enum.Enum):
        raise TypeError(f"cannot encode {obj!r}: only Errors and LeaderRecoveryState travel")
    if isinstance(obj, (tuple, Sequence, frozenset, set)) and not isinstance(obj, (str, bytes)):
        return list(obj)  # tuples, and the native engine's lazy partition-state sequences
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"cannot encode a {type(obj).__name__}: {obj!r}")


def _constant_encoders(code: int, members: Iterable[enum.Enum], value: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The encoder of an enumeration: each member's extension value made once."""
    return {member: _msgpack().ExtType(code, _pack(value(member))) for member in members}.__getitem__


def _install_encoders() -> None:
    """The encoders of the values that are not registered dataclasses (msgpack imported here, on
    first use, as everywhere in this module)."""
    if TopicPartition not in _ENCODERS:
        _ENCODERS[TopicPartition] = lambda tp: _msgpack().ExtType(_TOPIC_PARTITION, _pack([tp.topic, tp.partition]))
        _ENCODERS[Errors] = _constant_encoders(_ERRORS, Errors, lambda e: e.value)
        _ENCODERS[LeaderRecoveryState] = _constant_encoders(_RECOVERY, LeaderRecoveryState, int)


def _pack(value: Any) -> bytes:
    return _msgpack().packb(value, default=_default, strict_types=True, use_bin_type=True)  # type: ignore[no-any-return]


class _Decoder:
    """One message being decoded: msgpack calls :meth:`ext_hook` once per extension value, from
    inside the decoding of the payload that holds it, so :attr:`depth` counts how deep it is."""

    __slots__ = ("depth",)

    def __init__(self) -> None:
        self.depth = 0

    def unpack(self, data: bytes) -> Any:
        value = _msgpack().unpackb(
            data, ext_hook=self.ext_hook, use_list=False, strict_map_key=False, raw=False,
            max_str_len=MAX_STRING_BYTES, max_bin_len=MAX_STRING_BYTES,  # the other lengths: at most len(data)
        )
        if data.translate(_CONTAINER_HEADERS).count(1) > MAX_CONTAINER_DEPTH:  # else too few to nest deeper
            check_depth(value, MAX_CONTAINER_DEPTH, (tuple, dict))
        return value

    def ext_hook(self, code: int, data: bytes) -> Any:
        if self.depth >= MAX_EXTENSION_DEPTH:
            raise WireError(f"extension values nested more than {MAX_EXTENSION_DEPTH} deep")
        self.depth += 1
        try:
            value = self.unpack(data)
        finally:
            self.depth -= 1
        if code == _TOPIC_PARTITION:
            topic, partition = value
            return TopicPartition(topic, partition)
        if code == _ERRORS:
            return Errors(value)
        if code == _RECOVERY:
            return LeaderRecoveryState(value)
        if code == _DATACLASS:
            name, values = value
            cls = _TYPES.get(name)
            if cls is None:
                raise WireError(f"unknown message type {reprlib.repr(name)}")
            count = _FIELD_COUNTS[cls]
            if len(values) != count:
                raise WireError(f"{name} has {count} fields, the message carries {len(values)}")
            return cls(*values)
        raise WireError(f"unknown msgpack extension {code}")


def encode(message: Any) -> bytes:
    """msgpack bytes of a message (any structure of registered types, containers and scalars)."""
    try:
        _install_encoders()
        return _pack(message)
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireError(f"cannot encode {type(message).__name__}: {exc}") from exc


def decode(data: bytes) -> Any:
    """The message ``encode`` made of ``data``; :class:`WireError` for anything else."""
    try:
        return _Decoder().unpack(data)
    except (WireError, ImportError):
        raise
    except Exception as exc:  # msgpack's errors, and wrong shapes inside extensions
        raise WireError(f"undecodable message ({len(data)} bytes): {type(exc).__name__}: {exc}") from exc


def frame(message: Any) -> bytes:
    """A whole frame: the length prefix, then the encoded message."""
    body = encode(message)
    if len(body) > MAX_FRAME_BYTES:
        raise WireError(f"a {len(body)}-byte message exceeds the {MAX_FRAME_BYTES}-byte frame limit")
    return FRAME_HEADER.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    """The body length a frame header announces; :class:`WireError` when it is over the limit."""
    (length,) = FRAME_HEADER.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise WireError(f"a frame announces {length} bytes, over the {MAX_FRAME_BYTES}-byte limit")
    return int(length)


def split_frames(buffer: bytes) -> tuple[list[Any], bytes]:
    """Decode every complete frame at the start of ``buffer``; returns them and the rest."""
    messages = []
    view = memoryview(buffer)
    offset = 0
    while len(view) - offset >= FRAME_HEADER.size:
        length = frame_length(bytes(view[offset : offset + FRAME_HEADER.size]))
        end = offset + FRAME_HEADER.size + length
        if end > len(view):
            break
        messages.append(decode(bytes(view[offset + FRAME_HEADER.size : end])))
        offset = end
    return messages, bytes(view[offset:])


def registered_types() -> Iterable[str]:
    """Names of the message types the codec knows, sorted."""
    return sorted(_TYPES)


__all__ = [
    "check_installed",
    "FRAME_HEADER",
    "MAX_CONTAINER_DEPTH",
    "MAX_EXTENSION_DEPTH",
    "MAX_FRAME_BYTES",
    "MAX_STRING_BYTES",
    "WireError",
    "decode",
    "encode",
    "frame",
    "frame_length",
    "register_message",
    "registered_types",
    "split_frames",
]
