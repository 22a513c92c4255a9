"""What the hostile-input tests feed kctl's decoders: the regression inputs of issue 11 and the
hypothesis strategies and settings every fuzz test here shares.

The settings are derandomized (examples follow from each test's name), so a CI failure reproduces
locally; ``KCTL_HOSTILE_EXAMPLES`` scales the number of examples for a longer local run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import msgpack  # type: ignore[import-untyped]
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kctl import wire

SCALE = float(os.environ.get("KCTL_HOSTILE_EXAMPLES", "1"))


def fuzz(examples: int) -> settings:
    """Reproducible settings for a fuzz test of ``examples`` examples (scaled by KCTL_HOSTILE_EXAMPLES)."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )


# --- The regression input of defect 1 ---------------------------------------------------------------


def nested_extensions(depth: int = 200, code: int = 2) -> bytes:
    """msgpack of ``depth`` extension values, each the payload of the next (issue 11, defect 1):
    200 levels make 714 bytes, which overflowed the C stack of the decoding process."""
    data = msgpack.packb(None)
    for _ in range(depth):
        data = msgpack.packb(msgpack.ExtType(code, data))
    return bytes(data)


def nested_arrays(depth: int) -> bytes:
    """msgpack of ``depth`` arrays, each the only item of the next."""
    return b"\x91" * depth + b"\xc0"


def deep_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# --- Strategies -----------------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=20)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)
"""Any JSON value."""


def _ext(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """An extension value of kctl's codes (and a few others) around a packed value."""
    return st.builds(
        lambda code, value: msgpack.ExtType(code, msgpack.packb(value, use_bin_type=True)),
        st.sampled_from([1, 2, 3, 4, 5, 127]),
        inner,
    )


msgpack_values = st.recursive(
    scalars | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(scalars.filter(lambda k: k == k), inner, max_size=5)  # NaN keys never compare equal
        | _ext(inner)
    ),
    max_leaves=40,
)
"""Any msgpack value, with extension values nested in each other and in containers."""


def valid_frames() -> list[bytes]:
    """The bodies of well-formed frames, one per kind of message kctl sends (to mutate)."""
    from kctl.broker.fetcher import FetchPartition, FetchRequest
    from kctl.errors import Errors
    from kctl.model import BrokerInfo, EndPoint, LeaderAndIsr, TopicPartition
    from kctl.net import Header
    from kctl.requests import (
        AlterPartitionRequest,
        ControlledShutdownResponse,
        UpdateMetadataPartitionState,
        UpdateMetadataRequest,
    )

    tp = TopicPartition("orders", 3)
    broker = BrokerInfo(2, (EndPoint("127.0.0.1", 9092),), "rack-a", (("metadata.version", (1, 7)),))
    update = UpdateMetadataRequest(
        7, 1, 4, 10, (UpdateMetadataPartitionState("orders", 3, 4, 2, 5, (2, 1), 9, (2, 1, 3), (3,)),),
        (broker,), {"orders": "AAAAAAAAAAAAAAAAAAAAAA"},
    )
    messages = [
        ("req", 1, "UpdateMetadata", Header(1, 4, 10, "127.0.0.1:9000"), update),
        ("req", 2, "AlterPartition", Header(), AlterPartitionRequest(2, 10, {tp: LeaderAndIsr(2, (2, 1), 5, 9)})),
        ("req", 3, "Fetch", Header(broker_epoch=10), FetchRequest(2, 10, (FetchPartition(tp, 5, 100),))),
        ("resp", 4, ControlledShutdownResponse(Errors.NONE, (tp,))),
        ("err", 5, "no handler for Nope requests here"),
    ]
    return [wire.encode(message) for message in messages]


def valid_json_documents() -> list[bytes]:
    """Well-formed documents of every znode kind and admin file (to mutate)."""
    documents = [
        {"version": 1, "brokerid": 1, "timestamp": "1700000000000"},
        {"features": {"metadata.version": {"min_version": 1, "max_version": 7}},
         "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "endpoints": ["PLAINTEXT://h:9092"],
         "jmx_port": -1, "port": 9092, "host": "h", "version": 5, "timestamp": "1", "rack": "a"},
        {"version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "partitions": {"0": [1, 2], "1": [2, 3]},
         "adding_replicas": {"0": [2]}, "removing_replicas": {}},
        {"controller_epoch": 2, "leader": 1, "version": 1, "leader_epoch": 5, "isr": [1, 2]},
        {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]},
        {"version": 1, "partitions": [{"topic": "t", "partition": 0}]},
        {"version": 1, "broker": 1, "event": 1},
        {"version": 1, "config": {"retention.ms": "1000"}},
        {"version": 2, "entity_path": "topics/t"},
        {"version": "1", "id": "cluster"},
        {"version": 1, "status": 1, "features": {"f": {"min_version_level": 1, "max_version_level": 2}}},
        {"version": 1, "broker": 0, "block_start": "0", "block_end": "999"},
    ]
    return [json.dumps(d).encode() for d in documents]


@st.composite
def mutated(draw: st.DrawFn, originals: list[bytes]) -> bytes:
    """One of ``originals`` with a few bytes replaced, inserted or deleted, or cut short."""
    data = bytearray(draw(st.sampled_from(originals)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["replace", "insert", "delete", "truncate"]))
        if kind == "replace" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        else:
            del data[at:]
    return bytes(data)


@st.composite
def with_a_replaced_value(
    draw: st.DrawFn,
    originals: list[bytes],
    values: st.SearchStrategy[Any] = json_values,
    loads: Callable[[str], Any] = json.loads,
    dumps: Callable[[Any], str] = json.dumps,
) -> bytes:
    """A well-formed document with one value (at any depth) replaced by one of ``values``, or
    deleted, written back with ``dumps``."""
    document = loads(draw(st.sampled_from(originals)).decode())
    holder: Any = document
    while True:
        keys = list(holder) if isinstance(holder, dict) else list(range(len(holder)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        if isinstance(holder[key], (dict, list)) and holder[key] and draw(st.integers(0, 3)):
            holder = holder[key]
            continue
        if draw(st.integers(0, 4)) == 0:
            del holder[key]
        else:
            holder[key] = draw(values)
        break
    return dumps(document).encode()


hostile_json = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 5000).map(deep_json),
    st.binary(min_size=1, max_size=20).map(lambda b: b'{"version":1,"partitions":"' + b + b'"}'),
)
"""Bytes a JSON decoder may be given by an attacker or a bad disk: random, any JSON, too deep,
not UTF-8."""
