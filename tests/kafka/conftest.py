"""Fixtures of the differential tests: real Kafka brokers and kctl's processes on one ZooKeeper server.

Every test here is marked ``kafka`` (``-m kafka`` runs only them, ``-m "not kafka"`` leaves them out);
the whole catalogue is also marked ``kafka_full``, which ``./scripts/test`` leaves out and
``scripts/kafka-diff`` runs. A module shares one pair of clusters (starting three Kafka brokers takes
seconds of both cores), so its tests build on each other's state only through topics of their own.
A module runs on each engine in turn (``module_engine``: kctl's processes take it from
``KCTL_ENGINE``), each time beside Kafka brokers of its own, as its tests create the same topics.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from kctl.testing.kafka import KafkaCluster, KafkaInstallation, kafka_installation
from kctl.testing.zookeeper import ZooKeeperEnsemble, zookeeper_server

from tests.support.engines import module_engine
from tests.support.kafka_harness import RACKS, SideBySide, side_by_side

__all__ = ["kafka_installation", "module_engine", "zookeeper_server"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="module")
def kafka_overrides() -> Mapping[str, str]:
    """Broker properties of a module's clusters on both sides (a module overrides this fixture)."""
    return {}


@pytest.fixture(scope="module")
def kafka_cluster(zookeeper_server: ZooKeeperEnsemble, kafka_installation: KafkaInstallation,
                  kafka_overrides: Mapping[str, str], engine: str) -> Iterator[KafkaCluster]:
    """Three Kafka brokers in :data:`~tests.support.kafka_harness.RACKS` on the session's ZooKeeper
    server, for one module on one engine."""
    with KafkaCluster(zookeeper_server.hosts, 3, installation=kafka_installation, racks=RACKS,
                      overrides=kafka_overrides) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def sides(
    zookeeper_server: ZooKeeperEnsemble, kafka_cluster: KafkaCluster, kafka_overrides: Mapping[str, str],
    tmp_path_factory: pytest.TempPathFactory, engine: str,
) -> Iterator[SideBySide]:
    """The module's Kafka cluster and a kctl cluster on ``engine`` beside it: brokers 1–3 in the same
    racks with the same overrides, an active controller and a standby."""
    with side_by_side(zookeeper_server.hosts, kafka_cluster, tmp_path_factory.mktemp("kctl-procs"), kafka_overrides,
                      RACKS) as pair:
        yield pair
