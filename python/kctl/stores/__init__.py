"""State stores: the controller's view of ZooKeeper (the protocol) and the embedded default store.

Everything the controller and the plugins need is importable from here: the
:class:`StateStore` protocol with its result and watch types, and :class:`MemoryStore`, the
in-memory store with ZooKeeper's semantics that simulations and tests run on, and
:class:`ZooKeeperStore`, the same protocol on a real ensemble with Kafka's znode layout (kazoo is
imported only when one is created).
"""

from __future__ import annotations

from kctl.stores.base import (
    MATCH_ANY_VERSION,
    ChangeType,
    ReadResult,
    StateStore,
    TopicAssignment,
    UpdateResult,
    WatchEvent,
    WatchKind,
    WatchListener,
)
from kctl.stores.memory import MemoryStore
from kctl.stores.memtree import MemoryTree, PartitionSnapshot
from kctl.stores.zookeeper import ZooKeeperStore

__all__ = [
    "MATCH_ANY_VERSION",
    "ChangeType",
    "MemoryStore",
    "MemoryTree",
    "PartitionSnapshot",
    "ReadResult",
    "StateStore",
    "TopicAssignment",
    "UpdateResult",
    "WatchEvent",
    "WatchKind",
    "WatchListener",
    "ZooKeeperStore",
]
