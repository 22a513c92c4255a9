"""A third-party leader selector choosing the leaders of a real Kafka cluster: kctl's controller
with ``kctl.leader.selector.offline=least-loaded`` (plugins/kctl-least-loaded, loaded through its
entry point) in charge of three Kafka 3.9.1 brokers.

Partitions 0–3 of ``spread`` are led by broker 1 with replicas [1, 2, 3]; partitions 4–7 by broker 2
with [2, 3, 1], so broker 3 leads nothing. When broker 1 is killed, Kafka's offline election would
give partitions 0–3 to broker 2 (the first live in-sync replica); least-loaded gives them to broker 3,
which leads the fewest. Broker 3's own state-change.log shows it: it becomes their leader at
kctl's request.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.testing.kafka import KafkaInstallation
from kctl.testing.zookeeper import ZooKeeperEnsemble
from kctl.tools.client import AdminClient

from tests.support.kctl_kafka import BROKERS, CONTROLLER, IBP, TIMEOUT, chroot, kctl_in_charge, logged, settled
from tests.support.process_harness import ProcessCluster

__all__ = ["chroot"]

SELECTOR = {"kctl.leader.selector.offline": "least-loaded"}
ASSIGNMENT = {p: [1, 2, 3] if p < 4 else [2, 3, 1] for p in range(8)}


@pytest.fixture
def kctl(zookeeper_server: ZooKeeperEnsemble, chroot: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    with ProcessCluster(zookeeper_server.hosts + chroot, tmp_path, {**IBP, **SELECTOR}, transport="kafka") as cluster:
        yield cluster


def test_least_loaded_chooses_the_leaders_of_a_real_cluster(
    zookeeper_server: ZooKeeperEnsemble, kafka_installation: KafkaInstallation, kctl: ProcessCluster, chroot: str,
) -> None:
    with kctl_in_charge(kctl, zookeeper_server, kafka_installation, chroot) as (kafka, _):
        epoch = kctl.controller_epoch()
        AdminClient(kctl.admin).create_topic("spread", assignment=ASSIGNMENT)
        kctl.wait_until(lambda: settled(kctl, "spread", BROKERS, epoch), TIMEOUT, "kctl to lead every partition")
        kafka.kill(1)
        moved = kctl.wait_until(lambda: settled(kctl, "spread", BROKERS - {1}, epoch), TIMEOUT,
                                "kctl to lead without broker 1")
        assert {p: s.leader_and_isr.leader for p, s in moved.items()} == {p: 3 if p < 4 else 2 for p in ASSIGNMENT}
        for p in range(4):  # Kafka's own rule would have chosen broker 2
            line = (f"from controller {CONTROLLER} epoch {epoch} starting the become-leader transition for "
                    f"partition spread-{p}")
            kctl.wait_until(functools.partial(logged, kafka.brokers[3], "state-change.log", line), TIMEOUT,
                            f"broker 3 to log its leadership of spread-{p}")
