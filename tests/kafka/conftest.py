"""Fixtures of the differential tests: real Kafka brokers and kctl's processes on one ZooKeeper server.

Every test here is marked ``kafka`` (``-m kafka`` runs only them, ``-m "not kafka"`` leaves them out).
A module shares one pair of clusters (starting three Kafka brokers takes seconds of both cores), so
its tests build on each other's state only through topics of their own.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "process"))  # process_harness, shared

from kafka_harness import KCTL_CONTROLLER, SideBySide  # noqa: E402
from process_harness import ProcessCluster  # noqa: E402

from kctl.testing.kafka import KafkaCluster, kafka_cluster, kafka_installation  # noqa: E402
from kctl.testing.zookeeper import ZooKeeperEnsemble, zookeeper_server  # noqa: E402

__all__ = ["kafka_cluster", "kafka_installation", "zookeeper_server"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="module")
def sides(
    zookeeper_server: ZooKeeperEnsemble, kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SideBySide]:
    """The module's Kafka cluster and a kctl cluster with the same broker ids (1–3) beside it."""
    import kazoo.client  # type: ignore[import-untyped]

    chroot = f"/kctl-{uuid.uuid4().hex}"
    zk = kazoo.client.KazooClient(hosts=zookeeper_server.hosts, timeout=10.0)
    zk.start(timeout=30.0)
    with ProcessCluster(zookeeper_server.hosts + chroot, tmp_path_factory.mktemp("kctl-procs")) as kctl:
        kctl.start_controller(KCTL_CONTROLLER)
        for broker in kafka_cluster.brokers:
            kctl.start_broker(broker)
        kctl.wait_until(lambda: kctl.active_controller() == KCTL_CONTROLLER, 60, "kctl's controller to be elected")
        pair = SideBySide(kafka_cluster, kctl, chroot, zk)
        try:
            yield pair
        finally:
            pair.close()
            zk.stop()
            zk.close()
