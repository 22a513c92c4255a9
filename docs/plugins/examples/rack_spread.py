"""rack-spread: offline elections that spread leadership across racks.

Kafka's offline election makes the first live in-sync replica (in assignment order) the leader, so
when a broker fails, the partitions it led can all move to brokers of the same rack. This selector
keeps Kafka's eligibility rule (it only picks from ``batch.allowed``) but picks the allowed replica
whose rack leads the fewest partitions, counting the leaders it picks as it goes. Racks and the
current leadership come from the batch's view of the cluster, ``batch.cluster``. A broker without a
rack counts as a rack of its own; ties go to the replica Kafka prefers.
"""

from __future__ import annotations

import kctl
from kctl.config import ControllerConfig
from kctl.model import NO_LEADER
from kctl.registry import LeaderSelectorRegistry
from kctl.selectors import ElectionBatch, ElectionKind


class RackSpreadSelector:
    kind = ElectionKind.OFFLINE

    def select_leaders(self, batch: ElectionBatch) -> list[int]:
        view = batch.cluster
        # Allowed replicas are live brokers, so every one of them is in view.brokers.
        racks = {b: broker.rack or f"broker {b}" for b, broker in view.brokers.items()}
        load = dict.fromkeys(racks.values(), 0)  # partitions led per rack
        for broker, led in view.leader_counts.items():
            rack = racks.get(broker, f"broker {broker}")  # a dead broker may still lead some
            load[rack] = load.get(rack, 0) + led

        def rack_load(broker: int) -> int:
            return load[racks[broker]]

        leaders = []
        for allowed in batch.allowed:
            if not allowed:
                leaders.append(NO_LEADER)
                continue
            leader = min(allowed, key=rack_load)  # the first of equals: Kafka's preference
            load[racks[leader]] += 1
            leaders.append(leader)
        return leaders


def rack_spread_selector(config: ControllerConfig) -> RackSpreadSelector:
    return RackSpreadSelector()


@kctl.hookimpl
def kctl_register_leader_selectors(register: LeaderSelectorRegistry) -> None:
    register.add("rack-spread", rack_spread_selector, kind=ElectionKind.OFFLINE)
