"""Invariants I1–I8 (DESIGN §7), checked against a running :class:`~kctl.cluster.EmbeddedCluster`.

Most checks read the store's history (every stored version of every partition) rather than the
controller's memory, so they judge what was actually written, including by deposed controllers.
Each violation is one line naming the invariant, the partition or broker, and what was seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from kctl.errors import Errors
from kctl.model import NO_LEADER, TopicPartition
from kctl.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from kctl.stores.base import TopicAssignment
from kctl.stores.memory import PartitionSnapshot

if TYPE_CHECKING:
    from kctl.broker.agent import BrokerAgent, HandledRequest
    from kctl.cluster import EmbeddedCluster
    from kctl.controller import KafkaController


def check_invariants(cluster: EmbeddedCluster) -> list[str]:
    violations: list[str] = []
    violations += _i1_one_active_controller_per_epoch(cluster)
    history_check = _HISTORY_CHECKS.get(cluster.store)
    if history_check is None:
        history_check = _HISTORY_CHECKS[cluster.store] = HistoryCheck()
    unclean: dict[TopicPartition, int] = {}
    for tp, (found, problems) in history_check.judge(cluster).items():
        if found:
            unclean[tp] = found
        violations += problems
    unclean_seen, counted = sum(unclean.values()), cluster.unclean_leader_elections()
    where = _first_partitions(unclean)
    if unclean_seen > counted:  # fewer is fine: a deleted topic's history goes with it
        violations.append(
            f"I3: {unclean_seen} unclean leader changes in the store ({where}) but {counted} counted by the controllers"
        )
    if unclean_seen and not _unclean_permitted(cluster):
        violations.append(f"I3: {unclean_seen} unclean elections ({where}) although unclean election was never enabled")
    violations += _i5_brokers_fence_stale_requests(cluster)
    violations += _i6_reassignments_tracked(cluster)
    violations += _i7_converged_when_quiet(cluster)
    violations += [f"I8: {v}" for v in cluster.ledger.violations]
    return violations


def check_partition_history(tp: TopicPartition, history: Sequence[PartitionSnapshot]) -> tuple[int, list[str]]:
    """I1 (no older controller overwrites a newer one's state), I2, I3 and I4 on one partition's
    stored versions, oldest first, wherever they were recorded (a store's history, or ZooKeeper's
    transaction log replayed by :mod:`kctl.testing.zkhistory`). Returns the number of unclean
    leader changes (a leader from outside the previous ISR) and the violations."""
    rows = _state_rows(history)  # what each check reads, found once
    unclean, violations = _i3_elections(tp, rows)
    return unclean, [*_i1_fenced_writes(tp, rows), *_i2_leader_epochs(tp, rows), *violations, *_i4_isr_never_empty(tp, rows)]


class HistoryCheck:
    """:func:`check_partition_history` of every stored partition, kept between checks of one
    cluster's store: a simulation checks the invariants after every step, and a step changes few of the
    partitions' histories. With a store that reports what changed since a zxid
    (``MemoryStore.changes_since``) only the partitions of changed topic znodes and the changed
    partition states are judged again, and a topic nothing changed in is not even listed (a
    simulation creating 1M partitions checks after each of its topics); other stores' partitions
    are judged whole every time."""

    def __init__(self) -> None:
        self._zxid = -1
        self._findings: dict[str, dict[int, tuple[int, list[str]]]] = {}
        """Per topic judged, its partitions whose history has unclean leader changes or violations."""

    def judge(self, cluster: EmbeddedCluster) -> dict[TopicPartition, tuple[int, list[str]]]:
        """The stored partitions whose history has unclean leader changes or violations (the
        others have none), with them, in the store's order."""
        store = cluster.store
        changes_since = getattr(store, "changes_since", None)
        stale: dict[str, list[int]] = {}
        if changes_since is None:
            self._findings.clear()
        else:  # the zxid comes first: what is written while the histories are read is judged next time
            self._zxid, topics, states = changes_since(self._zxid)
            for topic in topics:
                self._findings.pop(topic, None)
            for topic, partition in states:
                stale.setdefault(topic, []).append(partition)
        assignments = store.get_topic_assignments(sorted(store.get_all_topics())).values
        findings: dict[str, dict[int, tuple[int, list[str]]]] = {}
        for topic, assignment in assignments.items():
            found = self._findings.get(topic)
            if found is None:
                found = self._judged(cluster, topic, assignment.partitions)
            else:
                changed = {p for p in stale.get(topic, ()) if p in assignment.partitions}
                found = {p: f for p, f in found.items() if p not in changed} | self._judged(cluster, topic, sorted(changed))
            findings[topic] = found
        self._findings = findings
        return {TopicPartition(topic, p): found[p] for topic, found in findings.items() for p in sorted(found)}

    @staticmethod
    def _judged(cluster: EmbeddedCluster, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, list[str]]]:
        judged = {}
        for partition in partitions:
            tp = TopicPartition(topic, partition)
            found = check_partition_history(tp, cluster.partition_history(tp))
            if found[0] or found[1]:
                judged[partition] = found
        return judged


_HISTORY_CHECKS: WeakKeyDictionary[object, HistoryCheck] = WeakKeyDictionary()
"""The history check of each cluster's store checked so far."""


def _first_partitions(partitions: Iterable[TopicPartition], limit: int = 10) -> str:
    """The partitions a violation is about, named (the first ``limit`` of them)."""
    names = [str(tp) for tp in partitions]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _state_rows(history: Iterable[PartitionSnapshot]) -> list[PartitionSnapshot]:
    """Rows where the state znode was (re)written; assignment-only rows repeat the previous state."""
    rows: list[PartitionSnapshot] = []
    for row in history:
        if row.controller_epoch < 0:
            continue
        if rows and (row.leader, row.leader_epoch, row.isr, row.controller_epoch) == (
            rows[-1].leader, rows[-1].leader_epoch, rows[-1].isr, rows[-1].controller_epoch
        ):
            continue
        rows.append(row)
    return rows


def _i1_one_active_controller_per_epoch(cluster: EmbeddedCluster) -> list[str]:
    by_epoch: dict[int, list[int]] = {}
    for controller in list(cluster.controllers.values()):
        if controller.is_active:
            by_epoch.setdefault(controller.epoch, []).append(controller.broker_id)
    return [f"I1: controllers {ids} are all active in epoch {epoch}" for epoch, ids in sorted(by_epoch.items()) if len(ids) > 1]


def _i1_fenced_writes(tp: TopicPartition, rows: Sequence[PartitionSnapshot]) -> list[str]:
    """A state written by a newer controller is never overwritten by an older one (``rows``: the
    :func:`_state_rows` of the partition's history, as for the next three)."""
    newest = -1
    for row in rows:
        if row.controller_epoch < newest:
            return [f"I1: {tp} was written by controller epoch {row.controller_epoch} after epoch {newest}"]
        newest = row.controller_epoch
    return []


def _i2_leader_epochs(tp: TopicPartition, rows: Sequence[PartitionSnapshot]) -> list[str]:
    for previous, row in zip(rows, rows[1:]):
        if row.leader_epoch < previous.leader_epoch:
            return [f"I2: leader epoch of {tp} went back from {previous.leader_epoch} to {row.leader_epoch}"]
        if row.leader != previous.leader and row.leader_epoch <= previous.leader_epoch:
            return [f"I2: leader of {tp} changed {previous.leader}->{row.leader} without a new epoch ({row.leader_epoch})"]
    return []


def _i3_elections(tp: TopicPartition, rows: Sequence[PartitionSnapshot]) -> tuple[int, list[str]]:
    """Count leader changes to a replica outside the previous ISR (unclean ones)."""
    unclean = 0
    for previous, row in zip(rows, rows[1:]):
        if row.leader != NO_LEADER and row.leader != previous.leader and row.leader not in previous.isr:
            unclean += 1
            if row.isr != (row.leader,):
                return unclean, [f"I3: {tp} elected {row.leader} outside the ISR {previous.isr} but kept ISR {row.isr}"]
    return unclean, []


def _i4_isr_never_empty(tp: TopicPartition, rows: Sequence[PartitionSnapshot]) -> list[str]:
    for row in rows:
        if not row.isr:
            return [f"I4: {tp} was stored with an empty ISR (leader {row.leader}, epoch {row.leader_epoch})"]
    return []


def _unclean_permitted(cluster: EmbeddedCluster) -> bool:
    if cluster.config.unclean_leader_election_enable or cluster.unclean_elections_requested:
        return True
    topics = cluster.store.get_all_topics()
    configs = cluster.store.get_topic_configs(topics).values
    return any(str(c.get("unclean.leader.election.enable", "")).lower() == "true" for c in configs.values())


def _i5_brokers_fence_stale_requests(cluster: EmbeddedCluster) -> list[str]:
    violations = []
    for broker_id, agent in sorted(cluster.brokers.items()):
        check = _ANSWER_CHECKS.get(agent)
        if check is None:
            check = _ANSWER_CHECKS[agent] = BrokerAnswerCheck(broker_id)
        violations += agent.inspect(check.feed_from)
    return violations


def check_broker_answers(broker_id: int, handled: Iterable[HandledRequest]) -> list[str]:
    """I5 on what one broker answered, in order (its agent's record, or a broker process's log):
    a request from an older controller epoch than one it accepted before is rejected, and a
    partition state's leader epoch is applied only if newer than the one the broker holds — none
    once a StopReplica deleted the partition (reference §6.15: a partition the broker instantiates
    anew holds -1, e.g. a topic deleted and created again). Each process (broker epoch) starts afresh."""
    return BrokerAnswerCheck(broker_id).feed(list(handled))


class BrokerAnswerCheck:
    """:func:`check_broker_answers` as answers arrive: a simulation checks the invariants after
    every step, and a broker's record grows by a request per fan-out, so each answer is judged
    once, with what the broker held when it came."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._start()

    def _start(self) -> None:
        self.violations: list[str] = []
        self._checked = 0
        self._newest_controller: dict[int, int] = {}  # per process (broker epoch)
        self._leader_epochs: dict[tuple[int, TopicPartition], int] = {}

    def feed(self, handled: Sequence[HandledRequest]) -> list[str]:
        """Judge the answers of ``handled`` (the whole record so far) not seen yet; returns every
        violation found so far."""
        if len(handled) < self._checked:  # not the record fed before: start over
            self._start()
        newest_controller, judge = self._newest_controller, self._judge
        for answer in handled[self._checked:]:
            # Most answers accept an UpdateMetadata of the newest controller epoch seen, which only
            # confirms that epoch: judged here without a call (a step answers a million of them).
            request = answer.request
            if (type(request) is UpdateMetadataRequest and answer.response.error is Errors.NONE
                    and request.controller_epoch == newest_controller.get(answer.broker_epoch)):
                continue
            judge(answer)
        self._checked = len(handled)
        return list(self.violations)

    def feed_from(self, agent: BrokerAgent) -> list[str]:
        """:meth:`feed` with the agent's notable answers (call it under the agent's lock): the
        others are the UpdateMetadata answers :meth:`feed` passes over."""
        return self.feed(agent.notable)

    def _judge(self, answer: HandledRequest) -> None:
        request, response, process = answer.request, answer.response, answer.broker_epoch
        newest_controller, leader_epochs, broker_id = self._newest_controller, self._leader_epochs, self.broker_id
        if request.controller_epoch < newest_controller.get(process, -1):
            if response.error is not Errors.STALE_CONTROLLER_EPOCH:
                self.violations.append(
                    f"I5: broker {broker_id} answered {response.error.name} to a {request.api} request of "
                    f"controller epoch {request.controller_epoch} after accepting epoch {newest_controller[process]}"
                )
            return
        if response.error is not Errors.NONE:
            return
        newest_controller[process] = request.controller_epoch
        if isinstance(request, LeaderAndIsrRequest):
            partition_errors = response.partition_errors  # type: ignore[union-attr]
            for state in request.partition_states:
                key = (process, state.tp)
                applied = partition_errors.get(state.tp) is Errors.NONE
                if applied and state.leader_epoch <= leader_epochs.get(key, -1):
                    self.violations.append(
                        f"I5: broker {broker_id} applied leader epoch {state.leader_epoch} of {state.tp} "
                        f"after epoch {leader_epochs[key]}"
                    )
                if applied:
                    leader_epochs[key] = state.leader_epoch
        elif isinstance(request, StopReplicaRequest):
            stop_errors = response.partition_errors  # type: ignore[union-attr]
            for stop in request.partition_states:
                if stop.delete_partition and stop_errors.get(stop.tp) is Errors.NONE:
                    leader_epochs.pop((process, stop.tp), None)


_ANSWER_CHECKS: WeakKeyDictionary[BrokerAgent, BrokerAnswerCheck] = WeakKeyDictionary()
"""The I5 check of each broker agent checked so far."""


def _i6_reassignments_tracked(cluster: EmbeddedCluster) -> list[str]:
    """Every reassignment recorded in the store is being driven by the active controller."""
    controller = cluster.active_controller
    if controller is None or not controller.event_manager.is_empty():
        return []
    stored = cluster.store.get_topic_assignments(sorted(cluster.store.get_all_topics())).values
    tracked = controller.inspect(lambda c: set(c.context.partitions_being_reassigned))
    reassigning = _REASSIGNING.get(cluster.store)
    if reassigning is None:
        reassigning = _REASSIGNING[cluster.store] = {}
    found = []
    for t, assignment in stored.items():
        known = reassigning.get(t)
        if known is None or known[0] is not assignment:
            known = reassigning[t] = (assignment, [p for p, a in sorted(assignment.partitions.items()) if a.is_being_reassigned])
        found += [f"I6: {TopicPartition(t, p)} is being reassigned in the store ({assignment.partitions[p]}) but the "
                  "controller does not track it" for p in known[1] if TopicPartition(t, p) not in tracked]
    for t in reassigning.keys() - stored.keys():
        del reassigning[t]
    return found


_REASSIGNING: WeakKeyDictionary[object, dict[str, tuple[TopicAssignment, list[int]]]] = WeakKeyDictionary()
"""Per store checked, the partitions of each topic's stored assignment that are being reassigned,
found once per assignment object: the memory store hands back the very object it holds until the
znode is rewritten, so the check after each step of a simulation does not pass over every
partition of every topic again (other stores decode a new object per read, found again each time)."""


def _unconverged_with_replicas_up(controller: KafkaController) -> list[TopicPartition]:
    ctx = controller.context
    return [
        tp for tp in ctx.unconverged_partitions()
        if all(ctx.is_replica_online(r, tp) for r in ctx.partition_replica_assignment(tp))
    ]


def _i7_converged_when_quiet(cluster: EmbeddedCluster) -> list[str]:
    """With every broker up and nothing in flight, partitions are online and metadata agrees.

    A replica on a failed log directory is not up although its broker is (reference §1.4
    isReplicaOnline, §6.14): a partition with one is judged only once the directory is back."""
    if len(cluster.live_brokers()) != len(cluster.broker_ids) or not cluster.is_quiet():
        return []
    controller = cluster.active_controller
    assert controller is not None
    unconverged = controller.inspect(_unconverged_with_replicas_up)
    problems = [f"I7: {tp} is not online with a full ISR" for tp in unconverged[:10]]
    return problems + [f"I7: {m}" for m in cluster.metadata_mismatches(limit=10)]
