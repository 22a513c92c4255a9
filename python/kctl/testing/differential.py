"""What a controller left in ZooKeeper, read back raw, and compared between two clusters.

The differential tests (``tests/kafka``) play one scenario on real Kafka brokers and on kctl, each
in a chroot of one ZooKeeper server, and after every step compare what the two controllers wrote:
the topic znodes, every partition's state znode and the admin znodes, each with its znode version.
The reading here is kazoo and JSON, not kctl's store, so that kctl's decoders are not the judge of
their own output.

A partition state compares on its leader, leader epoch, ISR as a set and any other field Kafka
writes (the JSON ``version``, ``leader_recovery_state``), plus the znode version; the controller
epoch is left out, as the two clusters elect their controllers independently.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kctl.model import TopicPartition

ADMIN_ZNODES = ("/admin/reassign_partitions", "/admin/preferred_replica_election")
"""The admin requests a controller acts on and deletes, read as single znodes."""
DELETE_TOPICS = "/admin/delete_topics"
QUIET = 1.0
"""Seconds a snapshot must stay the same before a cluster counts as settled."""
_STATE_FIELDS = ("leader", "leader_epoch", "isr", "controller_epoch")


@dataclass(frozen=True)
class Znode:
    """A znode's decoded JSON (None when it holds no data) and its version (``stat.version``)."""

    data: Any
    version: int


@dataclass(frozen=True)
class PartitionState:
    """A ``/brokers/topics/<t>/partitions/<p>/state`` znode; ``other`` holds the fields besides
    leader, leader epoch, ISR and controller epoch."""

    leader: int
    leader_epoch: int
    isr: frozenset[int]
    controller_epoch: int
    version: int
    other: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        extra = "".join(f" {name}={value}" for name, value in self.other)
        return f"leader={self.leader} leader_epoch={self.leader_epoch} isr={sorted(self.isr)} zk_version={self.version}" + (
            f" (data:{extra})" if extra else "")


@dataclass(frozen=True)
class Snapshot:
    """A chroot's topics, partition states and admin znodes at one moment (paths without the chroot)."""

    topics: dict[str, Znode] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    admin: dict[str, Znode] = field(default_factory=dict)

    def leaders(self, topic: str) -> dict[int, int]:
        return {tp.partition: state.leader for tp, state in self.partitions.items() if tp.topic == topic}


def snapshot(zk: Any, chroot: str) -> Snapshot:
    """Read ``chroot``'s topics, partition states and admin znodes with the kazoo session ``zk``.

    Reads are pipelined (kazoo's async calls); a znode deleted between listing and reading is
    left out, as if listed a moment later.
    """
    from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped]

    def children(path: str) -> list[str]:
        try:
            return sorted(zk.get_children(chroot + path))
        except NoNodeError:
            return []

    def read_all(paths: Iterable[str]) -> dict[str, Znode]:
        pending = [(path, zk.get_async(chroot + path)) for path in paths]
        found = {}
        for path, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                continue
            found[path] = Znode(json.loads(data) if data else None, stat.version)
        return found

    topics = children("/brokers/topics")
    partition_lists = {t: children(f"/brokers/topics/{t}/partitions") for t in topics}
    states = read_all(f"/brokers/topics/{t}/partitions/{p}/state" for t, ps in partition_lists.items() for p in ps)
    partitions = {}
    for path, znode in states.items():
        _, _, _, topic, _, partition, _ = path.split("/")
        partitions[TopicPartition(topic, int(partition))] = _partition_state(znode)
    admin = read_all([*ADMIN_ZNODES, *(f"{DELETE_TOPICS}/{t}" for t in children(DELETE_TOPICS))])
    return Snapshot(read_all(f"/brokers/topics/{t}" for t in topics), dict(sorted(partitions.items())), admin)


def _partition_state(znode: Znode) -> PartitionState:
    data = dict(znode.data)
    other = tuple(sorted((name, json.dumps(value)) for name, value in data.items() if name not in _STATE_FIELDS))
    return PartitionState(int(data["leader"]), int(data["leader_epoch"]), frozenset(data["isr"]),
                          int(data["controller_epoch"]), znode.version, other)


def differences(kafka: Snapshot, kctl: Snapshot) -> list[str]:
    """Every way ``kctl``'s snapshot differs from ``kafka``'s, one line each ([] when they agree)."""
    found = []
    for kind, theirs, ours in (("topic", kafka.topics, kctl.topics), ("admin znode", kafka.admin, kctl.admin)):
        found += _compare(kind, theirs, ours, lambda a, b: a == b)
    found += _compare("partition", kafka.partitions, kctl.partitions, _same_state)
    return found


def _same_state(kafka: PartitionState, kctl: PartitionState) -> bool:
    return (kafka.leader, kafka.leader_epoch, kafka.isr, kafka.version, kafka.other) == (
        kctl.leader, kctl.leader_epoch, kctl.isr, kctl.version, kctl.other)


def _compare(kind: str, kafka: dict[Any, Any], kctl: dict[Any, Any], same: Callable[[Any, Any], bool]) -> list[str]:
    lines = []
    for key in sorted(set(kafka) | set(kctl), key=str):
        if key not in kctl:
            lines.append(f"{kind} {key}: only on Kafka: {kafka[key]}")
        elif key not in kafka:
            lines.append(f"{kind} {key}: only on kctl: {kctl[key]}")
        elif not same(kafka[key], kctl[key]):
            lines.append(f"{kind} {key}: Kafka {kafka[key]}, kctl {kctl[key]}")
    return lines


def settled(
    zk: Any, chroot: str, condition: Callable[[Snapshot], bool], timeout: float, what: str, quiet: float = QUIET
) -> Snapshot:
    """The snapshot of ``chroot`` once ``condition`` holds and it has stayed the same for ``quiet``
    seconds (a controller may still be writing when the condition first holds).

    :raises AssertionError: at ``timeout``, naming ``what`` and showing the last snapshot.
    """
    deadline = time.monotonic() + timeout
    last: Snapshot | None = None
    since = time.monotonic()
    while True:
        current = snapshot(zk, chroot)
        if current != last:
            last, since = current, time.monotonic()
        elif condition(current) and time.monotonic() - since >= quiet:
            return current
        if time.monotonic() > deadline:
            states = "\n".join(f"  {tp}: {state}" for tp, state in current.partitions.items())
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what} in {chroot}; last seen:\n{states}")
        time.sleep(0.1)


__all__ = ["PartitionState", "Snapshot", "Znode", "differences", "settled", "snapshot"]
