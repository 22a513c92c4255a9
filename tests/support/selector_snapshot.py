"""What a leader selector sees, as plain values: shared by the cluster-view tests and the
engine-equivalence test, which compare what selectors saw on each engine."""

from __future__ import annotations

from typing import Any

from kctl.selectors import ElectionBatch


def snapshot(batch: ElectionBatch) -> dict[str, Any]:
    """Everything a selector can read of ``batch`` and its view (during the call)."""
    view = batch.cluster
    topics = sorted(batch.topics)
    assert list(batch.topics) == list(dict.fromkeys(tp.topic for tp in batch.partitions))
    return {
        "kind": batch.kind,
        "partitions": list(batch.partitions),
        "assignments": [list(r) for r in batch.assignments],
        "isrs": [list(r) for r in batch.isrs],
        "allowed": [list(r) for r in batch.allowed],
        "unclean": list(batch.unclean),
        "epoch": view.controller_epoch,
        "brokers": {b: (v.rack, v.epoch) for b, v in view.brokers.items()},
        "shutting_down": sorted(b for b, v in view.brokers.items() if v.shutting_down),
        "live": list(view.live_brokers),
        "leaders": dict(view.leader_counts),
        "replicas": dict(view.replica_counts),
        "configs": {t: dict(view.topic_config(t)) for t in topics},
        "unclean_enabled": {t: unclean_enabled(batch, t) for t in topics},
    }


def unclean_enabled(batch: ElectionBatch, topic: str) -> bool | str:
    """The topic's effective unclean flag, or the error reading it raised."""
    try:
        return batch.cluster.unclean_leader_election_enable(topic)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
