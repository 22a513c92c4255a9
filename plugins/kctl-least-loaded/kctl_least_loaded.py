"""kctl-least-loaded: elect the eligible replica that leads the fewest partitions.

Kafka's offline election takes the first live in-sync replica in assignment order, so after a
broker failure its leadership tends to pile onto the same few brokers. This selector keeps Kafka's
eligibility rule (it only ever picks from ``batch.allowed``) but, among the eligible replicas,
picks the one currently leading the fewest partitions, counting the leaders it has already picked
earlier in the same batch. Ties go to the replica Kafka prefers. The current leadership comes from
the batch's view of the cluster (``batch.cluster.leader_counts``).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import kctl
from kctl.model import NO_LEADER
from kctl.selectors import ElectionBatch, ElectionKind

if TYPE_CHECKING:
    from kctl.config import ControllerConfig
    from kctl.registry import LeaderSelectorRegistry


class LeastLoadedSelector:
    """Offline elections that spread leadership across the eligible replicas."""

    kind: ElectionKind = ElectionKind.OFFLINE

    def select_leaders(self, batch: ElectionBatch) -> list[int]:
        load = Counter(batch.cluster.leader_counts)
        leaders = []
        for allowed in batch.allowed:
            if not allowed:
                leaders.append(NO_LEADER)
                continue
            leader = min(allowed, key=lambda broker: load[broker])  # min keeps the first of equals
            load[leader] += 1
            leaders.append(leader)
        return leaders


def least_loaded_selector(config: ControllerConfig) -> LeastLoadedSelector:
    return LeastLoadedSelector()


@kctl.hookimpl
def kctl_register_leader_selectors(register: LeaderSelectorRegistry) -> None:
    register.add("least-loaded", least_loaded_selector, kind=ElectionKind.OFFLINE)
