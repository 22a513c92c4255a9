"""Fixtures of the admin-tool tests: a real ZooKeeper server (the embedded cluster needs none)."""

from __future__ import annotations

from kctl.testing.zookeeper import zookeeper_chroot, zookeeper_server

__all__ = ["zookeeper_chroot", "zookeeper_server"]
