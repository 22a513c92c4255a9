"""Plugin leader selectors, called by the native engine once per election batch.

The reference's validation of a selector's answers (``Election._call_selector``) is reused so that
a misbehaving plugin fails the same partitions with the same errors on both engines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kctl.election import Election
from kctl.errors import KctlError
from kctl.model import TopicPartition
from kctl.selectors import ElectionBatch


def select(
    election: Election,
    partitions: Sequence[TopicPartition],
    scanned: Sequence[Sequence[int]],
    isrs: Sequence[Sequence[int]],
    allowed: Sequence[Sequence[int]],
    unclean: Sequence[bool],
    leader_counts: Mapping[int, int],
) -> list[int | KctlError]:
    batch = ElectionBatch(
        kind=election.kind,
        partitions=partitions,
        assignments=[tuple(s) for s in scanned],
        isrs=[tuple(i) for i in isrs],
        allowed=[list(a) for a in allowed],
        unclean=list(unclean),
        leader_counts=dict(leader_counts),
    )
    return election._call_selector(batch)
