"""The admin tools' operations, as a Python API over a cluster's store (Kafka's ZooKeeper-mode tools).

:class:`AdminClient` is what ``kctl topics``, ``kctl reassign`` and ``kctl elect-leaders`` are a thin
layer over. Like Kafka's tools run with ``--zookeeper``, it talks to no broker or controller: it
reads the znodes and writes the admin znodes the controller watches (through :mod:`kctl.admin`, so
every request is validated before anything is written), then, where a tool reports an outcome,
waits for the controller's work to show in the store.

It runs on any :class:`~kctl.stores.base.StateStore`: :meth:`AdminClient.connect` opens a
ZooKeeper session on a real ensemble (waits use the wall clock), :meth:`AdminClient.for_cluster`
uses an :class:`~kctl.cluster.EmbeddedCluster`'s store (waits advance the cluster's clock).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kctl import admin
from kctl.controller.events import ElectionType  # --election-type: the controller's own kinds
from kctl.errors import (
    AdminCommandFailedError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidTopicError,
    KctlError,
    NodeExistsError,
    NoNodeError,
    PreferredLeaderNotAvailableError,
    RequestTimedOutError,
    TopicAlreadyMarkedForDeletionError,
    UnknownTopicOrPartitionError,
)
from kctl.model import NO_LEADER, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.scheduler import check_duration
from kctl.stores.base import MATCH_ANY_VERSION, StateStore, TopicAssignment

if TYPE_CHECKING:
    from kctl.cluster import EmbeddedCluster
    from kctl.tools.status import ClusterStatus
    from kctl.stores.zkacl import AclPolicy
    from kctl.stores.zkclient import ZooKeeperTls

Waiter = Callable[[Callable[[], bool], float], bool]
"""``wait(condition, timeout)``: True once ``condition()`` holds, False if ``timeout`` seconds pass first."""

DEFAULT_TIMEOUT = 30.0
"""Seconds a tool waits for the controller to act on its request."""
UNCLEAN_CONFIG = "unclean.leader.election.enable"
_RACE_ATTEMPTS = 10


def poll_until(condition: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """The wall-clock :data:`Waiter`: poll ``condition`` every ``interval`` seconds until ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


class ReassignmentStatus(enum.Enum):
    """What ``kafka-reassign-partitions --verify`` reports for a partition."""

    COMPLETE = "complete"
    IN_PROGRESS = "in progress"
    FAILED = "failed"  # no reassignment running, and the replicas are not the target


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as ``kafka-topics --describe`` shows it."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def replication_factor(self) -> int:
        """Replicas less the adding ones (Kafka's ``getReplicationFactor`` during a reassignment)."""
        return len(self.replicas) - len(self.adding_replicas)


@dataclass(frozen=True)
class TopicDescription:
    """A topic as ``kafka-topics --describe`` shows it."""

    name: str
    topic_id: str | None
    partitions: tuple[PartitionInfo, ...]
    config: Mapping[str, str] = field(default_factory=dict)
    marked_for_deletion: bool = False

    @property
    def replication_factor(self) -> int:
        return self.partitions[0].replication_factor if self.partitions else 0


@dataclass(frozen=True)
class VerifiedReassignment:
    """The ``--verify`` status of one partition, with its replicas now and the target."""

    status: ReassignmentStatus
    current: tuple[int, ...]
    target: tuple[int, ...]


@dataclass(frozen=True)
class Cancellation:
    """What ``--cancel`` did: the partitions whose reassignment it cancelled, and the rest."""

    cancelled: tuple[TopicPartition, ...]
    not_active: tuple[TopicPartition, ...]


class AdminClient:
    """Kafka's admin-tool operations on a cluster's store; ``wait`` decides how time passes."""

    def __init__(self, store: StateStore, wait: Waiter = poll_until, *, owns_store: bool = False) -> None:
        self.store = store
        self._wait = wait
        self._owns_store = owns_store

    @classmethod
    def connect(
        cls, zk: str, timeout: float = 15.0, *, auth: tuple[str, str] | None = None, acl: AclPolicy | None = None,
        sasl: tuple[str, str] | None = None, tls: ZooKeeperTls | None = None,
    ) -> AdminClient:
        """A client on its own ZooKeeper session (``zk`` is Kafka's ``zookeeper.connect``),
        logged in as ``auth`` (digest) or ``sasl`` (an admin identity of a secured cluster's ``acl``
        policy), over TLS with ``tls`` (:class:`~kctl.stores.zookeeper.ZooKeeperStore`'s options)."""
        from kctl.config import ControllerConfig
        from kctl.process import ZooKeeperSecurity, connect

        security = ZooKeeperSecurity(auth, acl, sasl, tls)
        return cls(connect(zk, ControllerConfig(), timeout, security), owns_store=True)

    @classmethod
    def for_cluster(cls, cluster: EmbeddedCluster) -> AdminClient:
        """A client on an embedded cluster's store; waiting runs the cluster (virtual time when simulated)."""
        return cls(cluster.store, lambda condition, timeout: cluster.run_until(condition, timeout))

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- Reads ---------------------------------------------------------------------------------

    def list_topics(self) -> list[str]:
        return sorted(self.store.get_all_topics())

    def _broker_racks(self) -> dict[int, str | None]:
        return {b: info.rack for b, (info, _) in self.store.get_all_brokers().items()}

    def _assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """The topics' assignments; a missing one is left out, a corrupt one raises (naming the path)."""
        read = self.store.get_topic_assignments(sorted(set(topics)))
        for error in read.errors.values():
            if not isinstance(error, NoNodeError):
                raise error
        return read.values

    def _replica_assignments(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ReplicaAssignment]:
        tps = list(partitions)
        assignments = self._assignments(tp.topic for tp in tps)
        found = {}
        for tp in tps:
            assignment = assignments.get(tp.topic)
            if assignment is not None and tp.partition in assignment.partitions:
                found[tp] = assignment.partitions[tp.partition]
        return found

    def _states(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        return self.store.get_partition_states(list(partitions)).values

    def describe_topics(self, topics: Sequence[str] | None = None) -> list[TopicDescription]:
        """Every topic (or those named, each of which must exist), sorted by name."""
        names = sorted(set(topics)) if topics is not None else self.list_topics()
        assignments = self._assignments(names)
        missing = [t for t in names if t not in assignments]
        if missing:
            raise UnknownTopicOrPartitionError(f"Topic '{missing[0]}' does not exist as expected")
        tps = [TopicPartition(t, p) for t in names for p in sorted(assignments[t].partitions)]
        states = self._states(tps)
        configs = self.store.get_topic_configs(names).values
        deleting = set(self.store.get_topic_deletions())
        described = []
        for topic in names:
            partitions = []
            for p, ra in sorted(assignments[topic].partitions.items()):
                state = states.get(TopicPartition(topic, p))
                lai = None if state is None else state.leader_and_isr
                partitions.append(PartitionInfo(
                    p, NO_LEADER if lai is None else lai.leader, ra.replicas, () if lai is None else lai.isr,
                    ra.adding_replicas, ra.removing_replicas,
                ))
            described.append(TopicDescription(topic, assignments[topic].topic_id, tuple(partitions),
                                              dict(sorted(configs.get(topic, {}).items())), topic in deleting))
        return described

    def live_brokers(self) -> set[int]:
        """The registered brokers (``/brokers/ids``)."""
        return set(self.store.get_all_brokers())

    def cluster_status(self) -> ClusterStatus:
        """What ``kctl cluster status`` shows (:func:`kctl.tools.status.cluster_status`)."""
        from kctl.tools.status import cluster_status

        return cluster_status(self.store)

    # --- Topics ----------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        assignment: Mapping[int, Sequence[int]] | None = None,
        config: Mapping[str, object] | None = None,
    ) -> dict[int, list[int]]:
        """Write a new topic (placed over the registered brokers unless ``assignment`` is given)."""
        return admin.create_topic(self.store, name, broker_racks=self._broker_racks(), partitions=partitions,
                                  replication_factor=replication_factor, assignment=assignment, config=config)

    def create_partitions(
        self, topic: str, total: int, assignment: Mapping[int, Sequence[int]] | None = None
    ) -> dict[int, list[int]]:
        """Grow ``topic`` to ``total`` partitions; ``assignment`` gives the new ones' replicas."""
        return admin.add_partitions(self.store, topic, total, broker_racks=self._broker_racks(), manual=assignment)

    def delete_topic(self, topic: str) -> bool:
        """Mark ``topic`` for deletion; False if it was marked already."""
        try:
            admin.delete_topic(self.store, topic)
        except TopicAlreadyMarkedForDeletionError:
            return False
        return True

    # --- Reassignments ---------------------------------------------------------------------------

    def execute_reassignment(self, targets: Mapping[TopicPartition, Sequence[int]]) -> dict[TopicPartition, tuple[int, ...]]:
        """Request the reassignments (``/admin/reassign_partitions``); returns the current replicas of
        each partition, what a rollback file holds."""
        current = self._replica_assignments(targets)
        unknown = sorted(tp for tp in targets if tp not in current)
        if unknown:
            raise AdminCommandFailedError(
                f"The proposed assignment contains non-existent partitions: {', '.join(map(str, unknown))}"
            )
        brokers = self.live_brokers()
        absent = sorted({b for replicas in targets.values() for b in replicas} - brokers)
        if absent:
            raise AdminCommandFailedError(
                f"The proposed assignment contains non-existent brokerIDs: {','.join(map(str, absent))}"
            )
        try:
            admin.request_reassignment(self.store, targets)
        except NodeExistsError:
            raise AdminCommandFailedError(
                "Cannot execute because there is an existing partition assignment: wait for it to complete "
                "(--verify) or cancel it (--cancel)"
            ) from None
        return {tp: current[tp].replicas for tp in sorted(targets)}

    def verify_reassignment(self, targets: Mapping[TopicPartition, Sequence[int]]) -> dict[TopicPartition, VerifiedReassignment]:
        """Each partition's status: in progress while the controller works on it (adding or removing
        replicas, or still requested), complete once its replicas are the target, failed otherwise."""
        current = self._replica_assignments(targets)
        requested = self.store.get_partition_reassignments() or {}
        results = {}
        for tp in sorted(targets):
            target = tuple(targets[tp])
            assignment = current.get(tp)
            replicas = () if assignment is None else assignment.replicas
            if assignment is not None and (assignment.is_being_reassigned or tp in requested):
                status = ReassignmentStatus.IN_PROGRESS
            elif replicas == target:
                status = ReassignmentStatus.COMPLETE
            else:
                status = ReassignmentStatus.FAILED
            results[tp] = VerifiedReassignment(status, replicas, target)
        return results

    def cancel_reassignment(self, partitions: Iterable[TopicPartition]) -> Cancellation:
        """Cancel the partitions' reassignments: the controller takes each back to its origin
        replicas (as the API's cancellation does); requests it has not picked up yet are withdrawn."""
        wanted = sorted(set(partitions))
        for _ in range(_RACE_ATTEMPTS):
            requested = self.store.get_partition_reassignments()
            pending = dict(requested or {})
            current = self._replica_assignments(wanted)
            started = {tp: current[tp].origin_replicas for tp in wanted
                       if tp in current and current[tp].is_being_reassigned}
            withdrawn = [tp for tp in wanted if tp in pending and tp not in started]
            cancelled = sorted([*started, *withdrawn])
            if not cancelled:
                return Cancellation((), tuple(wanted))
            remaining: dict[TopicPartition, Sequence[int]] = {tp: r for tp, r in pending.items() if tp not in cancelled}
            remaining.update(started)
            if requested is not None:
                self.store.delete_partition_reassignments(MATCH_ANY_VERSION)
            if not remaining:
                break
            try:
                admin.request_reassignment(self.store, remaining)
                break
            except NodeExistsError:
                continue  # the controller rewrote the request meanwhile: start over from what it holds
        else:
            raise AdminCommandFailedError("the reassignment request kept changing; try --cancel again")
        return Cancellation(tuple(cancelled), tuple(tp for tp in wanted if tp not in cancelled))

    # --- Leader elections ------------------------------------------------------------------------

    def all_partitions(self) -> list[TopicPartition]:
        assignments = self._assignments(self.list_topics())
        return [TopicPartition(t, p) for t, a in sorted(assignments.items()) for p in sorted(a.partitions)]

    def elect_leaders(
        self,
        election_type: ElectionType | str,
        partitions: Iterable[TopicPartition] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> dict[TopicPartition, int | KctlError]:
        """Elect leaders of ``partitions`` (all partitions when None); per partition the new
        leader, or the error Kafka's ElectLeaders reports (ELECTION_NOT_NEEDED, …).

        A preferred election writes ``/admin/preferred_replica_election`` and waits until the
        controller has processed it (it deletes the znode). ZooKeeper-mode Kafka has no znode for
        an unclean election: it is made the way an operator makes one there, by enabling
        ``unclean.leader.election.enable`` on the partitions' topics until they have a leader (the
        controller then elects every leaderless partition of those topics), then restoring the
        topics' previous configs.
        """
        kind = ElectionType(election_type)
        check_duration(timeout, "the election timeout", positive=True)
        tps = sorted(set(self.all_partitions() if partitions is None else partitions))
        assignments = self._replica_assignments(tps)
        states = self._states(assignments)
        live = self.live_brokers()
        deleting = set(self.store.get_topic_deletions())
        results: dict[TopicPartition, int | KctlError] = {}
        electable = []
        for tp in tps:
            leader = states[tp].leader_and_isr.leader if tp in states else NO_LEADER
            if tp not in assignments:
                results[tp] = UnknownTopicOrPartitionError("The partition does not exist.")
            elif tp.topic in deleting:
                results[tp] = InvalidTopicError("The topic is being deleted")
            elif (leader == assignments[tp].replicas[0] if kind is ElectionType.PREFERRED
                  else leader != NO_LEADER and leader in live):
                results[tp] = ElectionNotNeededError("Leader election not needed for topic partition")
            elif kind is ElectionType.UNCLEAN and not live.intersection(assignments[tp].replicas):
                results[tp] = EligibleLeadersNotAvailableError(
                    f"No replica of partition {tp} is alive: replicas {list(assignments[tp].replicas)}, live brokers "
                    f"{sorted(live)}"
                )
            else:
                electable.append(tp)
        if electable:
            elect = self._elect_preferred if kind is ElectionType.PREFERRED else self._elect_unclean
            results.update(elect(electable, assignments, timeout))
        return results

    def _elect_preferred(
        self, tps: list[TopicPartition], assignments: Mapping[TopicPartition, ReplicaAssignment], timeout: float
    ) -> dict[TopicPartition, int | KctlError]:
        try:
            admin.request_preferred_replica_election(self.store, tps)
        except NodeExistsError:
            raise AdminCommandFailedError(
                "Preferred replica leader election currently in progress for "
                f"{sorted(map(str, self.store.get_preferred_replica_election() or ()))}. Aborting operation"
            ) from None
        if not self._wait(lambda: self.store.get_preferred_replica_election() is None, timeout):
            raise RequestTimedOutError(
                f"The controller did not process the preferred replica election within {timeout:g}s "
                "(is a controller running?); the request stays in /admin/preferred_replica_election"
            )
        states = self._states(tps)
        results: dict[TopicPartition, int | KctlError] = {}
        for tp in tps:
            preferred = assignments[tp].replicas[0]
            leader = states[tp].leader_and_isr.leader if tp in states else NO_LEADER
            results[tp] = preferred if leader == preferred else PreferredLeaderNotAvailableError(
                f"Failed to elect leader for partition {tp} under strategy PreferredReplicaPartitionLeaderElectionStrategy: "
                f"the preferred replica {preferred} is not alive or not in the ISR"
            )
        return results

    def _elect_unclean(
        self, tps: list[TopicPartition], assignments: Mapping[TopicPartition, ReplicaAssignment], timeout: float
    ) -> dict[TopicPartition, int | KctlError]:
        topics = sorted({tp.topic for tp in tps})
        previous = self.store.get_topic_configs(topics).values
        live = self.live_brokers()

        def led() -> bool:
            states = self._states(tps)
            return all(tp in states and states[tp].leader_and_isr.leader in live for tp in tps)

        try:
            for topic in topics:
                self.store.set_topic_config(topic, {**previous.get(topic, {}), UNCLEAN_CONFIG: "true"})
            self._wait(led, timeout)
        finally:
            for topic in topics:
                self.store.set_topic_config(topic, previous.get(topic, {}))
        states = self._states(tps)
        results: dict[TopicPartition, int | KctlError] = {}
        for tp in tps:
            leader = states[tp].leader_and_isr.leader if tp in states else NO_LEADER
            results[tp] = leader if leader in live else EligibleLeadersNotAvailableError(
                f"Failed to elect leader for partition {tp} under strategy OfflinePartitionLeaderElectionStrategy"
                f"(true) within {timeout:g}s: replicas {list(assignments[tp].replicas)}, live brokers {sorted(live)}"
            )
        return results


__all__ = [
    "AdminClient",
    "Cancellation",
    "ElectionType",
    "PartitionInfo",
    "ReassignmentStatus",
    "TopicDescription",
    "VerifiedReassignment",
    "poll_until",
]
