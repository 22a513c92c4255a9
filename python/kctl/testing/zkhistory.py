"""A kctl cluster's history in Kafka's terms, replayed from ZooKeeper's transaction log.

:class:`ZooKeeperHistory` replays the transactions of one chroot (:mod:`kctl.testing.zktxnlog`)
and keeps what the controller invariants are about: each controller registration with its epoch
and session, every version of every partition (assignment and state, as the
:class:`~kctl.stores.memory.PartitionSnapshot` rows the memory store records), the broker
registrations, and every write made under the controller-epoch fence. Because the log holds every
committed write, including a deposed controller's, the checks below decide rather than sample:

- I1: epochs are registered one at a time, each by one controller; every partition state written
  carries the epoch current when it committed; every fenced write (a multi that starts with
  ``check(/controller_epoch)``, how kctl's store fences) came from a session of the controller
  that registered the current epoch — sessions are known from the registrations and from the
  renewed sessions the caller attributes to each controller (``kctl controller`` logs them);
- I1 (monotone controller epoch per partition), I2, I3 and I4 on each partition's versions, by
  :func:`kctl.invariants.check_partition_history`.

A partition's versions restart when its state znode is deleted (a deleted topic created again is a
new partition). A znode whose data cannot be decoded is named in :attr:`ZooKeeperHistory.undecodable`
and counts as a violation: the history must be complete to be trusted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kctl.errors import StoreError
from kctl.invariants import check_partition_history
from kctl.model import LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.stores import paths
from kctl.stores.base import TopicAssignment
from kctl.stores.memory import PartitionSnapshot
from kctl.stores.zkdata import ControllerEpochZNode, ControllerZNode, TopicPartitionStateZNode, TopicZNode
from kctl.testing.zktxnlog import CREATES, DELETES, OpCode, Operation, Transaction, read_transactions

_TOPIC = re.compile(r"/brokers/topics/(?P<topic>[^/]+)")
_STATE = re.compile(r"/brokers/topics/(?P<topic>[^/]+)/partitions/(?P<partition>[0-9]+)/state")
_BROKER = re.compile(r"/brokers/ids/(?P<id>[0-9]+)")
BAD_VERSION = -103
"""ZooKeeper's BADVERSION: the error of a refused fenced write (its epoch check failed)."""


@dataclass(frozen=True)
class ControllerRegistration:
    """A controller won an epoch: ``/controller`` created and ``/controller_epoch`` set in one multi."""

    epoch: int
    controller_id: int
    session: int
    zxid: int


@dataclass(frozen=True)
class FencedWrite:
    """A committed multi that began with ``check(/controller_epoch)``, and the epoch it committed in."""

    zxid: int
    session: int
    epoch: int
    paths: tuple[str, ...]


@dataclass(frozen=True)
class BrokerRegistration:
    """A ``/brokers/ids/<id>`` znode: its creating zxid is the broker epoch; ``ended`` the zxid of
    its deletion (None while registered)."""

    broker_id: int
    session: int
    zxid: int
    ended: int | None = None


class ZooKeeperHistory:
    """The replayed history of the cluster under ``chroot`` (``""``: the whole tree)."""

    def __init__(self, transactions: Iterable[Transaction], chroot: str = "") -> None:
        self.chroot = chroot.rstrip("/")
        self.registrations: list[ControllerRegistration] = []
        self.fenced_writes: list[FencedWrite] = []
        self.refused_fenced_writes: list[Transaction] = []
        self._ended_brokers: list[BrokerRegistration] = []
        self.partitions: list[tuple[TopicPartition, list[PartitionSnapshot]]] = []
        """Every partition's versions, oldest first; one entry per incarnation of its state znode."""
        self.undecodable: list[str] = []
        self.problems: list[str] = []
        """I1 violations found while replaying (stale or unfenced state writes, epoch jumps)."""
        self.transactions = 0
        self._nodes: dict[str, tuple[bytes, int]] = {}  # path → (data, ephemeral owner or 0)
        self._epoch = 0
        self._current: dict[TopicPartition, list[PartitionSnapshot]] = {}
        self._assignments: dict[str, TopicAssignment] = {}
        self._states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self._live_brokers: dict[int, BrokerRegistration] = {}
        for txn in transactions:
            self._replay(txn)

    @classmethod
    def read(cls, data_dir: Path, chroot: str = "") -> ZooKeeperHistory:
        """The history a ZooKeeper server logged in ``data_dir`` (its ``dataDir``)."""
        return cls(read_transactions(data_dir), chroot)

    # --- The final tree ----------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The controller epoch in ``/controller_epoch`` at the end."""
        return self._epoch

    def node(self, path: str) -> bytes | None:
        """The data of a znode (chroot-relative path) at the end; None if it does not exist."""
        found = self._nodes.get(path)
        return None if found is None else found[0]

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self._nodes if p.startswith(prefix)})

    def topics(self) -> dict[str, TopicAssignment]:
        return dict(sorted(self._assignments.items()))

    def states(self) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        return dict(sorted(self._states.items()))

    def live_brokers(self) -> list[int]:
        return sorted(self._live_brokers)

    @property
    def brokers(self) -> list[BrokerRegistration]:
        """Every broker registration, ended or not, in the order they were made."""
        return sorted([*self._ended_brokers, *self._live_brokers.values()], key=lambda b: b.zxid)

    # --- Checks ------------------------------------------------------------------------------------

    def unclean_elections(self) -> int:
        """Leader changes to a replica outside the previous ISR, over every partition."""
        return sum(check_partition_history(tp, rows)[0] for tp, rows in self.partitions)

    def violations(self, controller_sessions: Mapping[int, Iterable[int]] | None = None) -> list[str]:
        """I1–I4 as the history decides them (see the module's docstring). ``controller_sessions``
        attributes further sessions to controller ids (renewed after an expiry)."""
        violations = [f"history: undecodable znode {what}" for what in self.undecodable] + list(self.problems)
        owners: dict[int, int] = {}
        for controller_id, sessions in (controller_sessions or {}).items():
            owners.update((session, controller_id) for session in sessions)
        by_epoch: dict[int, ControllerRegistration] = {}
        for registration in self.registrations:
            owners[registration.session] = registration.controller_id
            by_epoch[registration.epoch] = registration
        for write in self.fenced_writes:
            owner = by_epoch.get(write.epoch)
            writer = owners.get(write.session)
            if owner is None or writer != owner.controller_id:
                who = "an unattributed session" if writer is None else f"controller {writer}"
                holder = "no registered controller" if owner is None else f"controller {owner.controller_id}"
                violations.append(
                    f"I1: zxid {write.zxid:#x}: {who} ({write.session:#x}) made a fenced write to "
                    f"{', '.join(write.paths[:3])} in epoch {write.epoch}, which belongs to {holder}"
                )
        for tp, rows in self.partitions:
            violations += check_partition_history(tp, rows)[1]
        return violations

    # --- Replay ------------------------------------------------------------------------------------

    def _relative(self, path: str | None) -> str | None:
        if path is None:
            return None
        if not self.chroot:
            return path
        if path == self.chroot:
            return "/"
        return path[len(self.chroot):] if path.startswith(self.chroot + "/") else None

    def _replay(self, txn: Transaction) -> None:
        ops = txn.operations
        if txn.failed:
            first = ops[0] if ops else None
            if txn.multi and first is not None and first.code is OpCode.ERROR and first.error == BAD_VERSION:
                self.refused_fenced_writes.append(txn)
            return
        if ops and ops[0].code is OpCode.CLOSE_SESSION:
            self._close_session(txn)
            return
        relative = [(op, self._relative(op.path)) for op in ops]
        if not any(path is not None for _, path in relative):
            return  # another chroot's, or a session's creation
        self.transactions += 1
        fenced = txn.multi and relative[0][0].code is OpCode.CHECK and relative[0][1] == paths.CONTROLLER_EPOCH
        registered = next((op for op, path in relative if path == paths.CONTROLLER and op.code in CREATES), None)
        for op, path in relative:
            if path is not None and op.code is not OpCode.CHECK:
                self._apply(txn, op, path, fenced)
        if registered is not None:
            self._registered(txn, registered)
        if fenced:
            written = tuple(path for op, path in relative[1:] if path is not None)
            self.fenced_writes.append(FencedWrite(txn.zxid, txn.session, self._epoch, written))

    def _apply(self, txn: Transaction, op: Operation, path: str, fenced: bool) -> None:
        if op.code in DELETES:
            self._nodes.pop(path, None)
            self._deleted(txn, path)
            return
        if op.code not in CREATES and op.code is not OpCode.SET_DATA:
            return
        data = op.data or b""
        owner = txn.session if op.code in CREATES and op.ephemeral else self._nodes.get(path, (b"", 0))[1]
        self._nodes[path] = (data, owner)
        version = 0 if op.code in CREATES else (op.version or 0)
        if path == paths.CONTROLLER_EPOCH:
            self._epoch_written(txn, data)
        elif (match := _STATE.fullmatch(path)) is not None:
            self._state_written(txn, TopicPartition(match["topic"], int(match["partition"])), data, version, fenced)
        elif (match := _TOPIC.fullmatch(path)) is not None:
            self._topic_written(match["topic"], data, path)
        elif (match := _BROKER.fullmatch(path)) is not None and op.code in CREATES:
            registration = BrokerRegistration(int(match["id"]), txn.session, txn.zxid)
            self._live_brokers[registration.broker_id] = registration

    def _epoch_written(self, txn: Transaction, data: bytes) -> None:
        try:
            epoch = ControllerEpochZNode.decode(data)
        except StoreError as exc:
            self.undecodable.append(f"at zxid {txn.zxid:#x}: {exc}")
            return
        creating = any(self._relative(op.path) == paths.CONTROLLER and op.code in CREATES for op in txn.operations)
        if self._epoch and (epoch != self._epoch + 1 or not creating):
            self.problems.append(
                f"I1: zxid {txn.zxid:#x}: /controller_epoch went from {self._epoch} to {epoch}"
                + ("" if creating else " without a controller registering")
            )
        self._epoch = epoch

    def _registered(self, txn: Transaction, created: Operation) -> None:
        try:
            controller_id = ControllerZNode.decode(created.data)
        except StoreError as exc:
            self.undecodable.append(f"at zxid {txn.zxid:#x}: {exc}")
            return
        self.registrations.append(ControllerRegistration(self._epoch, controller_id, txn.session, txn.zxid))

    def _state_written(self, txn: Transaction, tp: TopicPartition, data: bytes, version: int, fenced: bool) -> None:
        path = TopicPartitionStateZNode.path(tp)
        try:
            state = TopicPartitionStateZNode.decode(data, path, version)
        except StoreError as exc:
            self.undecodable.append(f"at zxid {txn.zxid:#x}: {exc}")
            return
        if not fenced:
            self.problems.append(f"I1: zxid {txn.zxid:#x}: {path} was written outside a fenced multi")
        if state.controller_epoch != self._epoch:
            self.problems.append(
                f"I1: zxid {txn.zxid:#x}: {tp} was written with controller epoch {state.controller_epoch} "
                f"while the epoch was {self._epoch}"
            )
        self._states[tp] = state
        self._row(tp)

    def _topic_written(self, topic: str, data: bytes, path: str) -> None:
        try:
            assignment = TopicZNode.decode(data, path)
        except StoreError as exc:
            self.undecodable.append(str(exc))
            return
        previous = self._assignments.get(topic)
        self._assignments[topic] = assignment
        for partition, replicas in assignment.partitions.items():
            tp = TopicPartition(topic, partition)
            if tp in self._states and (previous is None or previous.partitions.get(partition) != replicas):
                self._row(tp)

    def _row(self, tp: TopicPartition) -> None:
        """A version of ``tp``: its current assignment and state (as the memory store records them)."""
        state = self._states[tp]
        topic = self._assignments.get(tp.topic)
        ra = topic.partitions.get(tp.partition, ReplicaAssignment(())) if topic is not None else ReplicaAssignment(())
        leader_and_isr = state.leader_and_isr
        rows = self._current.get(tp)
        if rows is None:
            rows = self._current[tp] = []
            self.partitions.append((tp, rows))
        rows.append(PartitionSnapshot(ra.replicas, ra.adding_replicas, ra.removing_replicas, leader_and_isr.leader,
                                      leader_and_isr.leader_epoch, leader_and_isr.isr, state.controller_epoch))

    def _deleted(self, txn: Transaction, path: str) -> None:
        if (match := _STATE.fullmatch(path)) is not None:
            tp = TopicPartition(match["topic"], int(match["partition"]))
            self._states.pop(tp, None)
            self._current.pop(tp, None)
        elif (match := _TOPIC.fullmatch(path)) is not None:
            self._assignments.pop(match["topic"], None)
        elif (match := _BROKER.fullmatch(path)) is not None:
            self._broker_gone(int(match["id"]), txn.zxid)

    def _close_session(self, txn: Transaction) -> None:
        """A session closed or expired: its ephemerals go with it."""
        for path, (_, owner) in list(self._nodes.items()):
            if owner == txn.session:
                del self._nodes[path]
                match = _BROKER.fullmatch(path)
                if match is not None:
                    self._broker_gone(int(match["id"]), txn.zxid)

    def _broker_gone(self, broker_id: int, zxid: int) -> None:
        registration = self._live_brokers.pop(broker_id, None)
        if registration is not None:
            self._ended_brokers.append(
                BrokerRegistration(registration.broker_id, registration.session, registration.zxid, zxid)
            )


__all__ = ["BAD_VERSION", "BrokerRegistration", "ControllerRegistration", "FencedWrite", "ZooKeeperHistory"]
