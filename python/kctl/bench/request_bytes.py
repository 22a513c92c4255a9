"""Wire sizes of controller requests: the bytes Kafka would put on the network for them.

kctl's transports pass requests as objects, so a fleet measures request traffic by computing the
size of each request in Kafka's binary protocol, for the version the request carries: the 4-byte
size prefix, the request header (v1, or v2 for flexible versions, with the controller's broker id
as client id, as Kafka's ControllerChannelManager uses) and the body laid out by Kafka's message
schemas (``LeaderAndIsrRequest.json`` v0-7, ``UpdateMetadataRequest.json`` v0-8,
``StopReplicaRequest.json`` v0-4): compact arrays and strings and empty tagged-field sections
from the first flexible version on. Nothing is encoded; only lengths are added up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kctl.model import BrokerInfo
from kctl.messages import ControllerRequest, LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

FIRST_FLEXIBLE = {"LeaderAndIsr": 4, "UpdateMetadata": 6, "StopReplica": 2}
"""The first version of each request with compact fields and tagged-field sections."""
SECURITY_PROTOCOL_BYTES = 2
UUID_BYTES = 16


def uvarint_size(value: int) -> int:
    """Bytes of an unsigned varint (7 bits a byte)."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


class _Sizer:
    """Lengths of Kafka's primitive types at one version: flexible or not."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible

    def count(self, n: int) -> int:
        """An array's length prefix."""
        return uvarint_size(n + 1) if self.flexible else 4

    def string(self, text: str | None) -> int:
        """A (nullable) string: its length prefix and UTF-8 bytes."""
        if text is None:
            return 1 if self.flexible else 2
        length = len(text.encode())
        return (uvarint_size(length + 1) if self.flexible else 2) + length

    def ints(self, values: Sequence[int]) -> int:
        """An array of int32."""
        return self.count(len(values)) + 4 * len(values)

    @property
    def tags(self) -> int:
        """An empty tagged-field section, closing every struct of a flexible version."""
        return 1 if self.flexible else 0


def request_size(request: ControllerRequest) -> int:
    """The bytes of ``request`` on the wire: size prefix, header and body."""
    sizer = _Sizer(request.version >= FIRST_FLEXIBLE[request.api])
    # api key, api version, correlation id, client id (never a compact string), tagged fields
    header = 2 + 2 + 4 + _Sizer(False).string(str(request.controller_id)) + sizer.tags
    if isinstance(request, LeaderAndIsrRequest):
        body = _leader_and_isr(request, sizer)
    elif isinstance(request, UpdateMetadataRequest):
        body = _update_metadata(request, sizer)
    elif isinstance(request, StopReplicaRequest):
        body = _stop_replica(request, sizer)
    else:  # pragma: no cover - ControllerRequest is a closed union
        raise TypeError(f"not a controller request: {request!r}")
    return 4 + header + body


def _by_topic(states: Iterable[Any]) -> list[tuple[str, list[Any]]]:
    """Partition states grouped by topic, in order of first appearance (as the batch groups them)."""
    groups: dict[str, list[Any]] = {}
    for state in states:
        groups.setdefault(state.topic, []).append(state)
    return list(groups.items())


def _partition_states(s: _Sizer, states: Iterable[Any], partition: Callable[[Any], int], grouped: bool,
                      topic_ids: bool) -> int:
    """LeaderAndIsr's and UpdateMetadata's partition states: one array with the topic name in each
    state (old versions), or an array of topics (name, maybe id) each with its states."""
    listed = list(states)
    if not grouped:
        return s.count(len(listed)) + sum(s.string(state.topic) + partition(state) for state in listed)
    topics = _by_topic(listed)
    return s.count(len(topics)) + sum(
        s.string(topic) + (UUID_BYTES if topic_ids else 0) + s.count(len(group)) + sum(map(partition, group)) + s.tags
        for topic, group in topics
    )


def _leader_and_isr(request: LeaderAndIsrRequest, s: _Sizer) -> int:
    v = request.version

    def partition(state: Any) -> int:
        size = 4 * 4 + s.ints(state.isr) + 4 + s.ints(state.replicas)  # index, epochs, leader; ISR; zkVersion
        if v >= 3:
            size += s.ints(state.adding_replicas) + s.ints(state.removing_replicas)
        return size + (1 if v >= 1 else 0) + (1 if v >= 6 else 0) + s.tags  # isNew, leaderRecoveryState

    size = 4 + 4 + (1 if v >= 7 else 0) + (8 if v >= 2 else 0) + (1 if v >= 5 else 0)  # ids, epochs, type
    size += _partition_states(s, request.partition_states, partition, grouped=v >= 2, topic_ids=v >= 5)
    size += s.count(len(request.live_leaders)) + sum(
        4 + s.string(_host(b)) + 4 + s.tags for b in request.live_leaders
    )
    return size + s.tags


def _update_metadata(request: UpdateMetadataRequest, s: _Sizer) -> int:
    v = request.version

    def partition(state: Any) -> int:
        size = 4 * 4 + s.ints(state.isr) + 4 + s.ints(state.replicas)
        return size + (s.ints(state.offline_replicas) if v >= 4 else 0) + s.tags

    def broker(info: BrokerInfo) -> int:
        size = 4 + (s.string(_host(info)) + 4 if v == 0 else 0)
        if v >= 1:
            size += s.count(len(info.endpoints)) + sum(
                4 + s.string(e.host) + (s.string(e.listener_name) if v >= 3 else 0) + SECURITY_PROTOCOL_BYTES + s.tags
                for e in info.endpoints
            )
        return size + (s.string(info.rack) if v >= 2 else 0) + s.tags

    size = 4 + 4 + (1 if v >= 8 else 0) + (8 if v >= 5 else 0)
    size += _partition_states(s, request.partition_states, partition, grouped=v >= 5, topic_ids=v >= 7)
    size += s.count(len(request.live_brokers)) + sum(map(broker, request.live_brokers))
    return size + s.tags


def _stop_replica(request: StopReplicaRequest, s: _Sizer) -> int:
    v = request.version
    states = list(request.partition_states)
    size = 4 + 4 + (1 if v >= 4 else 0) + (8 if v >= 1 else 0) + (1 if v <= 2 else 0)  # ..., deletePartitions
    if v == 0:
        return size + s.count(len(states)) + sum(s.string(state.topic) + 4 for state in states) + s.tags
    topics = _by_topic(states)
    per_partition = 4 + 4 + 1 + s.tags if v >= 3 else 4  # index, leader epoch, delete flag; or the index alone
    size += s.count(len(topics)) + sum(
        s.string(topic) + s.count(len(group)) + per_partition * len(group) + s.tags for topic, group in topics
    )
    return size + s.tags


def _host(info: BrokerInfo) -> str:
    """The host a broker is reached at (its first listener's)."""
    return info.endpoints[0].host if info.endpoints else ""
