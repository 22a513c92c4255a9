"""Plugin leader selectors, called by the native engine once per election batch.

The engine hands over the batch as flat buffers (``kctl.columns`` reads them in place) and the
brokers' table (epochs, controlled shutdowns, leader and replica counts, kept by the engine); the
racks come from the context's broker registrations. The engine checks each answer natively and asks
the election for the error of a refused one, so a misbehaving plugin fails the same partitions with
the same errors on both engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kctl.clusterview import ClusterView, TopicConfigSource, broker_views
from kctl.columns import IntRows, Partitions, int32_buffer
from kctl.election import Election
from kctl.errors import PluginError
from kctl.native.context import NativeContext
from kctl.selectors import ElectionBatch

Rows = tuple[bytes, bytes]
"""A column of rows: int32 offsets (one more than rows) and int32 values."""
Columns = tuple[list[str], bytes, bytes, Rows, Rows, Rows, bytes]
"""Distinct topics, each row's topic index and partition id, assignments, ISRs, allowed replicas,
unclean flags (a byte per row)."""
Brokers = tuple[int, list[tuple[int, int]], list[int], list[tuple[int, int]], list[tuple[int, int]]]
"""Controller epoch, registered brokers' epochs, brokers shutting down, leader and replica counts."""


def _rows(column: Rows) -> IntRows:
    offsets, values = column
    return IntRows(int32_buffer(offsets), int32_buffer(values))


@dataclass(frozen=True)
class NativeSelection:
    """An election whose selector is a plugin, with what its view reads besides the engine's data."""

    election: Election
    context: NativeContext
    configs: TopicConfigSource

    def select(self, columns: Columns, brokers: Brokers) -> tuple[ElectionBatch, Sequence[object] | PluginError]:
        """The batch built from the engine's buffers, and the selector's answers for it."""
        topics, topic_index, ids, scanned, isrs, allowed, unclean = columns
        epoch, epochs, shutting_down, leader_counts, replica_counts = brokers
        partitions = Partitions(topics, int32_buffer(topic_index), int32_buffer(ids))
        view = ClusterView(
            epoch,
            lambda: broker_views(dict(epochs), frozenset(shutting_down), self.context.live_or_shutting_down_brokers()),
            lambda: leader_counts,
            lambda: replica_counts,
            self.configs,
            lambda: partitions.topics,
        )
        batch = ElectionBatch(
            kind=self.election.kind,
            partitions=partitions,
            assignments=_rows(scanned),
            isrs=_rows(isrs),
            allowed=_rows(allowed),
            unclean=tuple(memoryview(unclean).cast("?")),
            cluster=view,
        )
        return batch, self.election.answers(batch)

    def refusal(self, batch: ElectionBatch, index: int, leader: object) -> PluginError:
        return self.election.refusal(batch, index, leader)
