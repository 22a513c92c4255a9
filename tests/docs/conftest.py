"""Fixtures of the docs' tests: a real ZooKeeper server for the state-store guide's example."""

from __future__ import annotations

from kctl.testing.zookeeper import zookeeper_chroot, zookeeper_server

__all__ = ["zookeeper_chroot", "zookeeper_server"]
