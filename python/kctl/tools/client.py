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

import contextlib
import enum
import random
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kctl import admin
from kctl.assignment import RackAwareMode, assign_replicas_to_brokers, broker_metadatas
from kctl.model import ElectionType  # --election-type: the controller's own kinds
from kctl.errors import (
    AdminCommandFailedError,
    AdminOperationError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidTopicError,
    KctlError,
    NodeExistsError,
    NoNodeError,
    PreferredLeaderNotAvailableError,
    RequestTimedOutError,
    TopicAlreadyMarkedForDeletionError,
    TopicDeletionDisabledError,
    UnknownTopicOrPartitionError,
)
from kctl.model import NO_LEADER, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.scheduler import check_duration
from kctl.stores.base import MATCH_ANY_VERSION, StateStore, TopicAssignment
from kctl.topic_config import parse_topic_config

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
MIN_INSYNC_REPLICAS = "min.insync.replicas"
_RACE_ATTEMPTS = 10


def poll_until(condition: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """The wall-clock :data:`Waiter`: poll ``condition`` every ``interval`` seconds until ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def _leader(states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], tp: TopicPartition) -> int:
    """The leader a partition's stored state names, :data:`NO_LEADER` without a state."""
    state = states.get(tp)
    return NO_LEADER if state is None else state.leader_and_isr.leader


def _existing_reassignment() -> AdminCommandFailedError:
    return AdminCommandFailedError(
        "Cannot execute because there is an existing partition assignment. Wait for it to complete (--verify) "
        "or cancel it (--cancel)."
    )


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

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0  # neither NO_LEADER nor LEADER_DURING_DELETE


class PartitionFilter(enum.Enum):
    """The partition filters of ``kafka-topics --describe``, with the rules of Kafka 3.9's
    ``TopicCommand.PartitionDescription``; given several, a partition matching any is shown."""

    UNDER_REPLICATED = "under-replicated-partitions"
    """Fewer in-sync replicas than the replication factor."""
    UNDER_MIN_ISR = "under-min-isr-partitions"
    """No leader, or fewer in-sync replicas than the topic's ``min.insync.replicas``."""
    AT_MIN_ISR = "at-min-isr-partitions"
    """Exactly ``min.insync.replicas`` in-sync replicas (leader or not, as Kafka)."""
    UNAVAILABLE = "unavailable-partitions"
    """No leader, or a leader that is not a live broker."""

    def matches(self, partition: PartitionInfo, min_insync_replicas: int, live_brokers: Collection[int]) -> bool:
        isr = len(partition.isr)
        if self is PartitionFilter.UNDER_REPLICATED:
            return isr < partition.replication_factor
        if self is PartitionFilter.UNDER_MIN_ISR:
            return not partition.has_leader or isr < min_insync_replicas
        if self is PartitionFilter.AT_MIN_ISR:
            return isr == min_insync_replicas
        return not partition.has_leader or partition.leader not in live_brokers


@dataclass(frozen=True)
class TopicDescription:
    """A topic as ``kafka-topics --describe`` shows it."""

    name: str
    topic_id: str | None
    partitions: tuple[PartitionInfo, ...]
    config: Mapping[str, str] = field(default_factory=dict)
    marked_for_deletion: bool = False
    min_insync_replicas: int = 1
    """The topic's ``min.insync.replicas``: its override, else the brokers' default."""

    @property
    def replication_factor(self) -> int:
        return self.partitions[0].replication_factor if self.partitions else 0

    def filtered(self, filters: Collection[PartitionFilter], live_brokers: Collection[int]) -> tuple[PartitionInfo, ...]:
        """The partitions matching any of ``filters``."""
        return tuple(p for p in self.partitions
                     if any(f.matches(p, self.min_insync_replicas, live_brokers) for f in filters))


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
    """Kafka's admin-tool operations on a cluster's store; ``wait`` decides how time passes.

    ``min_insync_replicas`` is the brokers' default, for topics without an override (Kafka's tool
    asks a broker; a store does not hold the brokers' static configs).
    """

    def __init__(
        self, store: StateStore, wait: Waiter = poll_until, *, owns_store: bool = False, min_insync_replicas: int = 1
    ) -> None:
        self.store = store
        self._wait = wait
        self._owns_store = owns_store
        self.min_insync_replicas = min_insync_replicas

    @classmethod
    def connect(
        cls, zk: str, timeout: float = 15.0, *, auth: tuple[str, str] | None = None, acl: AclPolicy | None = None,
        sasl: tuple[str, str] | None = None, tls: ZooKeeperTls | None = None, min_insync_replicas: int = 1,
    ) -> AdminClient:
        """A client on its own ZooKeeper session (``zk`` is Kafka's ``zookeeper.connect``),
        logged in as ``auth`` (digest) or ``sasl`` (an admin identity of a secured cluster's ``acl``
        policy), over TLS with ``tls`` (:class:`~kctl.stores.zookeeper.ZooKeeperStore`'s options)."""
        from kctl.config import ControllerConfig
        from kctl.process import ZooKeeperSecurity, connect

        security = ZooKeeperSecurity(auth, acl, sasl, tls)
        return cls(connect(zk, ControllerConfig(), timeout, security), owns_store=True,
                   min_insync_replicas=min_insync_replicas)

    @classmethod
    def for_cluster(cls, cluster: EmbeddedCluster) -> AdminClient:
        """A client on an embedded cluster's store; waiting runs the cluster (virtual time when simulated)."""
        return cls(cluster.store, lambda condition, timeout: cluster.run_until(condition, timeout),
                   min_insync_replicas=cluster.config.min_insync_replicas)

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
        """The brokers replicas may be assigned to: a controller's entry is none."""
        return {b: info.rack for b, (info, _) in self.store.get_all_brokers().items() if not info.controller_only}

    def _assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """The topics' assignments; a missing one is left out, a corrupt one raises (naming the path)."""
        read = self.store.get_topic_assignments(sorted(set(topics)))
        for error in read.errors.values():
            if not isinstance(error, NoNodeError):
                raise error
        return read.values

    def _replica_assignments(
        self, partitions: Iterable[TopicPartition], assignments: Mapping[str, TopicAssignment] | None = None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """The partitions' assignments (those that exist), from ``assignments`` when already read."""
        tps = list(partitions)
        if assignments is None:
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
                leader_and_isr = None if state is None else state.leader_and_isr
                leader = NO_LEADER if leader_and_isr is None else leader_and_isr.leader
                partitions.append(PartitionInfo(
                    p, leader, ra.replicas, () if leader_and_isr is None else leader_and_isr.isr,
                    ra.adding_replicas, ra.removing_replicas,
                ))
            config = dict(sorted(configs.get(topic, {}).items()))
            described.append(TopicDescription(topic, assignments[topic].topic_id, tuple(partitions), config,
                                              topic in deleting, self._min_insync_replicas(config)))
        return described

    def _min_insync_replicas(self, config: Mapping[str, str]) -> int:
        """The topic's override when it is a valid one (the broker refuses others), else the default."""
        try:
            value = parse_topic_config(MIN_INSYNC_REPLICAS, config[MIN_INSYNC_REPLICAS])
        except (KeyError, KctlError):
            return self.min_insync_replicas
        return value if isinstance(value, int) else self.min_insync_replicas

    def live_brokers(self) -> set[int]:
        """The registered brokers (``/brokers/ids``), without a controller's entry."""
        return set(self._broker_racks())

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

    def delete_topic(self, topic: str, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        """Delete ``topic`` as Kafka 3.9's DeleteTopics does: mark it for deletion (a topic marked
        already is no error), then wait until the controller has deleted it.

        ``timeout=None`` returns once the deletion is requested. A controller with
        ``delete.topic.enable=false`` drops the request and keeps the topic: that is a
        :class:`~kctl.errors.TopicDeletionDisabledError`; a topic still there after ``timeout``
        seconds (no controller, or a replica on a dead broker halting the deletion) is a
        :class:`~kctl.errors.RequestTimedOutError`, and the request stays for the controller.
        """
        if timeout is not None:
            check_duration(timeout, "the deletion timeout", positive=True)
        with contextlib.suppress(TopicAlreadyMarkedForDeletionError):
            admin.delete_topic(self.store, topic)
        if timeout is None:
            return

        def settled() -> bool:
            requested = topic in self.store.get_topic_deletions()  # read first: the controller deletes it last
            return not requested or topic not in self.store.get_all_topics()

        self._wait(settled, timeout)
        requested = topic in self.store.get_topic_deletions()
        if topic not in self.store.get_all_topics():
            return
        if not requested:
            raise TopicDeletionDisabledError("Topic deletion is disabled.")
        raise RequestTimedOutError(
            f"Topic '{topic}' was not deleted within {timeout:g}s (is a controller running? a deletion waits for "
            f"every broker holding a replica); it stays marked for deletion in /admin/delete_topics/{topic}"
        )

    # --- Reassignments ---------------------------------------------------------------------------

    def list_reassignments(self) -> dict[TopicPartition, ReplicaAssignment]:
        """The partitions being reassigned (adding or removing replicas), as the controller lists them;
        requests it has not picked up yet are not among them."""
        assignments = self._assignments(self.list_topics())
        return {TopicPartition(t, p): ra for t, a in sorted(assignments.items())
                for p, ra in sorted(a.partitions.items()) if ra.is_being_reassigned}

    def execute_reassignment(self, targets: Mapping[TopicPartition, Sequence[int]]) -> dict[TopicPartition, tuple[int, ...]]:
        """Request the reassignments (``/admin/reassign_partitions``); returns the current replicas of
        each partition, what a rollback file holds. Refused, as Kafka 3.9's tool refuses it without
        ``--additional``, while another reassignment is requested or in progress."""
        if self.store.get_partition_reassignments() is not None or self.list_reassignments():
            raise _existing_reassignment()
        unknown_brokers = sorted({b for replicas in targets.values() for b in replicas} - self.live_brokers())
        if unknown_brokers:
            raise AdminCommandFailedError(f"Unknown broker id {unknown_brokers[0]}")
        topics = self._assignments(tp.topic for tp in targets)
        unknown_topics = sorted({tp.topic for tp in targets} - topics.keys())
        if unknown_topics:
            raise UnknownTopicOrPartitionError(f"Topic {unknown_topics[0]} not found.")
        current = self._replica_assignments(targets, topics)
        missing = sorted(tp for tp in targets if tp not in current)
        if missing:
            raise UnknownTopicOrPartitionError(f"Unable to find partition: {', '.join(map(str, missing))}")
        try:
            admin.request_reassignment(self.store, targets)
        except NodeExistsError:
            raise _existing_reassignment() from None
        return {tp: current[tp].replicas for tp in sorted(targets)}

    def generate_reassignment(
        self, topics: Sequence[str], brokers: Sequence[int], rack_aware: bool = True, rng: random.Random | None = None
    ) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[TopicPartition, list[int]]]:
        """Kafka's ``--generate``: the topics' current assignment, and a proposal moving every
        partition of them onto ``brokers`` with Kafka's (rack-aware) replica assignment, keeping each
        topic's partition count and replication factor. Brokers of ``brokers`` that are not
        registered are left out, as Kafka's tool leaves them out."""
        assignments = self._assignments(topics)
        unknown = [t for t in topics if t not in assignments]
        if unknown:
            raise UnknownTopicOrPartitionError(f"Topic {unknown[0]} not found.")
        wanted = set(brokers)
        racks = {b: rack for b, rack in self._broker_racks().items() if b in wanted}
        try:
            metadata = broker_metadatas(racks, RackAwareMode.ENFORCED if rack_aware else RackAwareMode.DISABLED)
        except AdminOperationError:
            raise AdminOperationError(
                "Not all brokers have rack information. Add --disable-rack-aware in command line to make replica "
                "assignment without rack information."
            ) from None
        current: dict[TopicPartition, tuple[int, ...]] = {}
        proposed: dict[TopicPartition, list[int]] = {}
        for topic in sorted(set(topics)):
            partitions = assignments[topic].partitions
            current.update({TopicPartition(topic, p): ra.replicas for p, ra in sorted(partitions.items())})
            # The replication factor describe shows: the replicas a reassignment is adding do not count.
            replication_factor = len(partitions[min(partitions)].origin_replicas) if partitions else 0
            placed = assign_replicas_to_brokers(metadata, len(partitions), replication_factor, rng=rng)
            proposed.update({TopicPartition(topic, p): replicas for p, replicas in placed.items()})
        return current, proposed

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
        leader, or the error Kafka's ElectLeaders reports (ELECTION_NOT_NEEDED, …). Over all
        partitions, as Kafka's, the partitions that needed no election are left out.

        A preferred election writes ``/admin/preferred_replica_election`` and waits until the
        controller has processed it (it deletes the znode). ZooKeeper-mode Kafka has no znode for
        an unclean election: it is made the way an operator makes one there, by enabling
        ``unclean.leader.election.enable`` on the partitions' topics until they have a leader, then
        restoring the topics' previous configs. The controller then elects every leaderless partition
        of those topics (Kafka's TopicUncleanLeaderElectionEnable), so the results also hold the
        partitions not asked for that it gave a leader.
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
            leader = _leader(states, tp)
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
        if partitions is None:  # as Kafka's ElectLeaders over all partitions: only elections and errors
            return {tp: r for tp, r in results.items() if not isinstance(r, ElectionNotNeededError)}
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
            leader = _leader(states, tp)
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
        # Every leaderless partition of these topics with a live replica gets a leader, asked for or not.
        replicas = {TopicPartition(t, p): ra.replicas
                    for t, a in self._assignments(topics).items() for p, ra in a.partitions.items()}
        before = self._states(replicas)
        leaderless = sorted({*tps, *(tp for tp, r in replicas.items()
                                     if _leader(before, tp) not in live and live.intersection(r))})

        def led() -> bool:
            states = self._states(leaderless)
            return all(_leader(states, tp) in live for tp in leaderless)

        try:
            for topic in topics:
                self.store.set_topic_config(topic, {**previous.get(topic, {}), UNCLEAN_CONFIG: "true"})
            self._wait(led, timeout)
        finally:
            for topic in topics:
                self.store.set_topic_config(topic, previous.get(topic, {}))
        states = self._states(leaderless)
        asked = set(tps)
        results: dict[TopicPartition, int | KctlError] = {}
        for tp in leaderless:
            leader = _leader(states, tp)
            if leader in live:
                results[tp] = leader
            elif tp in asked:
                results[tp] = EligibleLeadersNotAvailableError(
                    f"Failed to elect leader for partition {tp} under strategy OfflinePartitionLeaderElectionStrategy"
                    f"(true) within {timeout:g}s: replicas {list(assignments[tp].replicas)}, live brokers {sorted(live)}"
                )
        return results


__all__ = [
    "AdminClient",
    "Cancellation",
    "ElectionType",
    "PartitionFilter",
    "PartitionInfo",
    "ReassignmentStatus",
    "TopicDescription",
    "VerifiedReassignment",
    "poll_until",
]
