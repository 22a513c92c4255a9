"""Fixtures of the multi-process tests: real ZooKeeper servers and ``kctl`` processes.

Processes are started from the virtualenv's ``kctl`` script on free loopback ports and are always
killed by PID at teardown (SIGKILL; a test that wants a clean stop sends SIGTERM itself).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kctl.testing.zookeeper import (
    ZooKeeperEnsemble,
    zookeeper_chroot,
    zookeeper_ensemble,
    zookeeper_release,
    zookeeper_release_server,
    zookeeper_server,
)
from process_harness import ProcessCluster

__all__ = ["zookeeper_chroot", "zookeeper_ensemble", "zookeeper_release", "zookeeper_release_server", "zookeeper_server"]


@pytest.fixture
def cluster(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessCluster]:
    """Controller and broker processes on the shared ZooKeeper server, in a chroot of their own."""
    with ProcessCluster(zookeeper_server.hosts + zookeeper_chroot, tmp_path_factory.mktemp("kctl-procs")) as c:
        yield c
