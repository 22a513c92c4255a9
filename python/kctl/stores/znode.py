"""The znode client protocol: what Kafka's semantics (:mod:`kctl.stores.kafkazk`) need of ZooKeeper.

Kafka splits its ZooKeeper access in two: ``ZooKeeperClient`` (the session, pipelined requests,
watches) and ``KafkaZkClient`` (Kafka's znodes and their meaning). This module is the line between
them: bulk reads of data and children, creates, atomic multis fenced by ``/controller_epoch``'s
version, recursive deletes, and persistent watches by :class:`~kctl.stores.base.WatchKind`. Two
clients implement it, :class:`~kctl.stores.memtree.TreeClient` (a session on the in-memory tree,
data as Python objects) and :class:`~kctl.stores.zkclient.ZooKeeperClient` (kazoo, data as bytes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from kctl.errors import ControllerMovedError, StoreError
from kctl.model import TopicPartition
from kctl.stores.base import MATCH_ANY_VERSION, WatchKind, WatchListener


class Stat(NamedTuple):
    """A znode's metadata, as ZooKeeper's ``Stat``; ``ephemeral_owner`` is 0 for persistent nodes."""

    version: int
    czxid: int
    mzxid: int
    ephemeral_owner: int


class Op(NamedTuple):
    """One operation of a multi."""

    kind: str  # "check", "create", "set" or "delete"
    path: str
    data: object = None
    version: int = MATCH_ANY_VERSION
    ephemeral: bool = False
    sequential: bool = False


class Failure(NamedTuple):
    """Why an item of a multi failed: which of the item's ops, and the error."""

    op: int
    error: StoreError


OpResult = str | Stat | None
"""What an op of a multi returns: the created path, the stat a ``set`` left, None for check/delete."""

ItemResult = list[OpResult] | Failure

Found = tuple[object, Stat] | None
"""A read znode's data and stat, or None when it does not exist."""


def controller_moved(fence: int) -> ControllerMovedError:
    """Kafka's error when the ``check(/controller_epoch, fence)`` of a fenced multi fails."""
    return ControllerMovedError(f"Controller epoch zkVersion check fails. Expected zkVersion = {fence}")


class ZnodeClient(Protocol):
    """One ZooKeeper session, in znodes: the operations ``KafkaZkClient`` is written over."""

    @property
    def session_id(self) -> int: ...

    def expire_session(self) -> None:
        """Have the session expire (tests and simulations inject ZooKeeper's session expiry)."""

    def reconnect(self) -> None:
        """After expiry, a new session with the same listeners and watches (none after ``close``)."""

    def close(self) -> None: ...

    def add_listener(self, listener: WatchListener) -> None: ...

    def remove_listener(self, listener: WatchListener) -> None: ...

    def watch(self, kind: WatchKind, key: object = None) -> None:
        """A persistent watch: the client re-arms ZooKeeper's one-shot watches."""

    def unwatch(self, kind: WatchKind, key: object = None) -> None: ...

    def get_data(self, paths: Sequence[str], per_request: int | None = None) -> list[Found | StoreError]:
        """Each node's data and stat (None when absent, the error of a failed read), in order;
        ``per_request`` bounds the reads of one request where they are batched."""

    def get_children(self, paths: Sequence[str]) -> list[list[str] | None]:
        """Each node's children, sorted (None when the node does not exist), in order."""

    def get_partition_states(self, partitions: Sequence[TopicPartition],
                             per_request: int | None = None) -> list[Found | StoreError]:
        """:meth:`get_data` of the partitions' state znodes, named by partition: the bulk of a
        controller's reads, which a client may serve without making and parsing their paths."""

    def set_partition_states(self, partitions: Sequence[TopicPartition], data: Sequence[object],
                             versions: Sequence[int], fence: int) -> list[int | StoreError]:
        """:meth:`multi` of one conditional ``set`` of each partition's state znode (``data`` and
        ``versions`` in the partitions' order): per partition, the znode's new version or the error."""

    def exists(self, path: str) -> Stat | None: ...

    def create(self, path: str, data: object, *, ephemeral: bool = False) -> Stat:
        """Create one node; its stat (an ephemeral's czxid is a broker epoch)."""

    def multi(self, items: Iterable[Sequence[Op]], fence: int) -> list[ItemResult]:
        """Apply each item's ops atomically, each item after ``check(/controller_epoch, fence)``
        unless ``fence`` is -1: per item, the ops' results or the :class:`Failure`. Raises
        :class:`~kctl.errors.ControllerMovedError` when the fence fails (even with no items)."""

    def delete_recursive(self, paths: Iterable[str], fence: int) -> None:
        """Fenced deletes of whichever of ``paths`` exist, with their descendants."""

    def ensure_paths(self, paths: Iterable[str]) -> None:
        """Create the missing ones of ``paths`` and of their ancestors, without data."""


__all__ = ["Failure", "Found", "ItemResult", "Op", "OpResult", "Stat", "ZnodeClient", "controller_moved"]
