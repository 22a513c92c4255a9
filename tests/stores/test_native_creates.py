"""The native engine creates a topic's partition and state znodes in the memory tree's state table
(``MemoryTree.native_create_partition_znodes``), with no Python call or object per partition: the
tree must end up as the store's own ``create_partition_states`` leaves it, which the engine leaves
every unusual creation to."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kctl import admin
from kctl.cluster import EmbeddedCluster
from kctl.model import TopicPartition
from kctl.stores import memtree
from kctl.stores.memory import MemoryStore

SIZES = {"t": 20, "u": 6}

PLANTED: dict[str, list[tuple[str, object]]] = {
    "usual": [],
    "partition znode there": [("/brokers/topics/u/partitions/1", None)],
    "partition znode with data": [("/brokers/topics/u/partitions/1", "data")],
    "state there": [("/brokers/topics/u/partitions/2/state", "not a state")],
    "far-off partition znode": [("/brokers/topics/u/partitions/5000", None)],
}
"""What is in the store before the controller creates topic ``u``'s partitions."""


def created(planted: list[tuple[str, object]]) -> tuple[Any, ...]:
    """Everything a creation leaves: znodes, stats and children, each partition's history, the
    changes since the start, the controller's events and state-change log, the invariants."""
    with EmbeddedCluster(4, engine="rust", seed=0) as cluster:
        store = cluster.store
        cluster.create_topic("t", SIZES["t"], 2)
        # Written as an admin writes it, the controller yet to hear of it: an admin's own znodes come first.
        admin.create_topic(store, "u", broker_racks=dict.fromkeys(cluster.broker_ids), partitions=SIZES["u"],
                           replication_factor=3, rng=random.Random(0))
        for path, data in planted:
            store.tree.set_raw(path, data)  # type: ignore[attr-defined]
        cluster.run_until(lambda: cluster.is_quiet(), what="the creation to settle")
        tps = [TopicPartition(t, p) for t, n in SIZES.items() for p in range(n)]
        client = store._client  # type: ignore[attr-defined]
        znodes = [f"/brokers/topics/{tp.topic}/partitions/{tp.partition}" for tp in tps]
        return (client.get_data(znodes), client.get_data([f"{p}/state" for p in znodes]),
                client.get_children([f"/brokers/topics/{t}/partitions" for t in SIZES] + znodes),
                [cluster.partition_history(tp) for tp in tps], store.changes_since(0),  # type: ignore[attr-defined]
                store.tree.zxid, cluster.state_change_log,  # type: ignore[attr-defined]
                cluster.controllers[cluster.active_controller.broker_id].event_manager.stats.processed,  # type: ignore[union-attr]
                cluster.check_invariants())


@pytest.mark.parametrize("case", list(PLANTED))
def test_a_creation_in_the_state_table_is_that_of_the_store(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    through_python = memtree.TreeClient.create_partition_states

    def counted(self: memtree.TreeClient, creates: Any, fence: int) -> Any:
        creates = list(creates)
        calls.append(len(creates))
        return through_python(self, creates, fence)

    with monkeypatch.context() as patched:
        patched.setattr(memtree.TreeClient, "create_partition_states", counted)
        in_table = created(PLANTED[case])
    # Only the unusual creations take the store's Python path, all of them (a fenced creation too:
    # tests/engine/test_partition_state_machine.py).
    assert calls == ([SIZES["u"]] if case in ("partition znode with data", "state there") else [])

    with monkeypatch.context() as patched:  # the engine without the memory store's fast path
        patched.delattr(MemoryStore, "native_begin")
        through_store = created(PLANTED[case])
    assert in_table == through_store
    failed = [line for line in in_table[6] if "failed to change state" in line]
    assert len(failed) == (case == "state there") and all("u-2" in line and "already exists" in line for line in failed)
    assert all(found is not None for found in in_table[1])  # every state znode is there
