"""Bulk reads of the Kafka semantics ask the znode client in chunks (kctl.stores.kafkazk.READ_CHUNK):
what one request returns stays alive only until it is decoded, so a failover's read of every
partition state does not push a whole cluster's nodes and stats into the collector's oldest
generation (a 100K-partition failover paid two extra full collections for it)."""

from __future__ import annotations

from typing import Any

import pytest

from kctl.errors import NoNodeError
from kctl.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.stores import kafkazk
from kctl.stores.memory import MemoryStore


def test_partition_states_are_read_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    count = 2 * kafkazk.READ_CHUNK + 7
    store.create_topic("t", {p: ReplicaAssignment((p % 3, (p + 1) % 3)) for p in range(count)})
    states = {
        TopicPartition("t", p): LeaderIsrAndControllerEpoch(LeaderAndIsr(p % 3, (p % 3, (p + 1) % 3)), 1)
        for p in range(count)
    }
    store.create_partition_states(states, -1)
    asked: list[int] = []
    get_partition_states = store._znodes.get_partition_states

    def recording(partitions: Any, per_request: int | None = None) -> Any:
        asked.append(len(partitions))
        return get_partition_states(partitions, per_request)

    monkeypatch.setattr(store._znodes, "get_partition_states", recording)
    missing = TopicPartition("t", count)
    read = store.get_partition_states(iter([*states, missing]))

    assert asked == [kafkazk.READ_CHUNK, kafkazk.READ_CHUNK, 8]
    assert {tp: s.leader_and_isr.isr for tp, s in read.values.items()} == {
        tp: s.leader_and_isr.isr for tp, s in states.items()
    }
    assert list(read.errors) == [missing] and isinstance(read.errors[missing], NoNodeError)
