"""Fixtures of the hostile-input tests: real ZooKeeper servers (for the ``zkqueue`` transport's
queues and the controller and broker processes), from :mod:`kctl.testing.zookeeper`."""

from __future__ import annotations

from kctl.testing.zookeeper import zookeeper_chroot, zookeeper_server

__all__ = ["zookeeper_chroot", "zookeeper_server"]
