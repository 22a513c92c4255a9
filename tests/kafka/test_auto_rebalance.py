"""The automatic preferred election (``auto.leader.rebalance.enable``), compared on Kafka 3.9 and
kctl: clusters of their own (marker ``kafka_full``), as every other scenario needs leaders to stay
where a step left them. A broker killed and restarted gets its preferred leaderships back from the
periodic imbalance check on both sides, with the same leader epochs and znode versions.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from tests.support.kafka_harness import ASSIGNMENT, SideBySide, others, rejoined, without

pytestmark = pytest.mark.kafka_full



@pytest.fixture(scope="module")
def kafka_overrides() -> Mapping[str, str]:
    """Rebalancing every 5 s on both sides (Kafka's default is every 300 s)."""
    return {"auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "5"}


def test_the_automatic_rebalance_gives_a_restarted_broker_its_leaderships_back_alike(sides: SideBySide) -> None:
    sides.create_and_compare("rebalanced")
    victim = others(sides)[0]

    sides.kill(victim)
    kafka = sides.compare(without(victim), f"kill -9 of broker {victim}")
    assert kafka.leaders("rebalanced")[victim - 1] != victim

    sides.restart(victim)
    preferred = {p: replicas[0] for p, replicas in ASSIGNMENT.items()}
    kafka = sides.compare(lambda s: rejoined(victim)(s) and s.leaders("rebalanced") == preferred,
                          f"restart of broker {victim}, then the automatic rebalance")
    assert {tp.partition: s.leader_epoch for tp, s in kafka.partitions.items()} == {
        p: 2 if p == victim - 1 else 1 for p in ASSIGNMENT}
