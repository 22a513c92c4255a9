"""Fixtures of the store tests: real ZooKeeper servers for the ``zookeeper`` store.

The servers come from :mod:`kctl.testing.zookeeper`, the launcher kctl ships for its users'
tests too; importing the fixtures here makes them available to this directory only.
"""

from __future__ import annotations

from kctl.testing.zookeeper import (
    zookeeper_chroot,
    zookeeper_ensemble,
    zookeeper_release,
    zookeeper_release_server,
    zookeeper_server,
)

__all__ = ["zookeeper_chroot", "zookeeper_ensemble", "zookeeper_release", "zookeeper_release_server", "zookeeper_server"]
