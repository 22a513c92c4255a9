"""Fixtures of the multi-process tests: real ZooKeeper servers and ``kctl`` processes.

Processes are started from the virtualenv's ``kctl`` script on free loopback ports and are always
killed by PID at teardown (SIGKILL; a test that wants a clean stop sends SIGTERM itself). A test
of the ``cluster`` runs on each engine: its processes take it from ``KCTL_ENGINE``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kctl.scheduler import RealTimeScheduler
from kctl.testing.zookeeper import (
    ZooKeeperEnsemble,
    zookeeper_chroot,
    zookeeper_ensemble,
    zookeeper_release,
    zookeeper_release_server,
    zookeeper_server,
)
from tests.support.process_harness import ProcessCluster
from tests.support.tls_harness import Certificates, make_certificates

__all__ = ["zookeeper_chroot", "zookeeper_ensemble", "zookeeper_release", "zookeeper_release_server", "zookeeper_server"]


@pytest.fixture
def cluster(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory, engine: str
) -> Iterator[ProcessCluster]:
    """Controller and broker processes on ``engine``, on the shared ZooKeeper server, in a chroot of their own."""
    with ProcessCluster(zookeeper_server.hosts + zookeeper_chroot, tmp_path_factory.mktemp("kctl-procs")) as c:
        yield c


@pytest.fixture
def scheduler() -> Iterator[RealTimeScheduler]:
    s = RealTimeScheduler()
    yield s
    s.shutdown()


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """The CA, keys, certificates and properties files docs/security.md makes."""
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """The same made again: another CA, whose certificates carry the very same names."""
    return make_certificates(tmp_path_factory.mktemp("other-ca"))
