"""Fixtures of the fault suite: a ZooKeeper server of its own per test, and the cluster on it.

Each test's verdict (faults injected, losses, what was checked) goes to its ``user_properties``
under ``chaos``, where the hardening report (:mod:`kctl.testing.hardening`) counts it. Every test
runs on each engine (``on_each_engine``: the controller processes take it from ``KCTL_ENGINE``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.testing.zookeeper import ZooKeeperEnsemble, require_zookeeper

from tests.support.chaos_harness import ChaosCluster
from tests.support.engines import on_each_engine

__all__ = ["on_each_engine"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is a ``chaos`` test (``-m chaos`` selects the suite, ``-m "not chaos"`` skips it)."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.chaos)


@pytest.fixture
def chaos(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosCluster]:
    """A cluster on a fresh standalone ZooKeeper server (its transaction log is this test's history)."""
    with ZooKeeperEnsemble(1, installation=require_zookeeper()) as zookeeper:
        cluster = ChaosCluster(zookeeper, tmp_path_factory.mktemp("chaos"))
        try:
            yield cluster
        finally:
            cluster.close()
            request.node.user_properties.append(("chaos", cluster.summary()))
