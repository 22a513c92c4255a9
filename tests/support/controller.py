"""Builders, readers and fault injection shared by the controller tests (tests/controller).

Every test runs a real :class:`~kctl.cluster.EmbeddedCluster`: simulated time, the memory store with
history, the in-process transport and simulated brokers. The helpers here only read what the
cluster exposes (its store, the active controller's context, ``describe``) or inject faults through
the ``controller_session`` affordance of the cluster: a :class:`FaultySession` wraps a controller
candidate's store session so that a test can expire it right after the controller's k-th write
(a crash at an exact step of an operation), hide watch events from it (a controller that does not
learn it was deposed), make some of its reads fail (data it cannot read) or lose the answer of a
write that landed (a connection lost while the answer was on its way).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from kctl.cluster import EmbeddedCluster, PartitionDescription
from kctl.controller import KafkaController
from kctl.errors import KctlError, StoreError, StoreUnavailableError
from kctl.model import LeaderAndIsr, ReplicaAssignment, TopicPartition
from kctl.stores.base import WatchEvent, WatchListener
from kctl.stores.memory import MemoryStore

TP = TopicPartition("t", 0)
"""The partition most tests work on."""


# --- Fault injection -------------------------------------------------------------------------------


class FaultySession:
    """A controller candidate's store session with injectable faults.

    Every method call is passed to the wrapped :class:`MemoryStore`; a call that advanced the tree's
    zxid wrote something (reads never do, and failed writes are rolled back), which is how writes
    are counted. After :meth:`expire_after` ``(k)``, the session expires right after the k-th write
    from then on: that write has landed, every later call of the controller fails, its ephemeral
    ``/controller`` is gone and the other candidates elect a successor — a crash between two store
    writes. With ``deaf`` set, watch events are not delivered (the controller misses the news, as a
    partitioned or paused process would). A store method named in ``failing`` raises
    :class:`StoreError` instead of answering (a znode this controller cannot read). After
    :meth:`lose_answer` ``(name)``, the next call of that store method is carried out but its answer
    is lost with the connection (kept in ``lost``, with the call's arguments).
    """

    def __init__(self, session: MemoryStore, failing: Iterable[str] = ()) -> None:
        self._session = session
        self._listeners: dict[WatchListener, WatchListener] = {}
        self._expire_at: int | None = None
        self.writes = 0
        """Writes since the last :meth:`expire_after`."""
        self.expired = False
        self.deaf = False
        self.failing = set(failing)
        self._lose: tuple[str, bool] | None = None
        self.lost: list[tuple[tuple[Any, ...], Any]] = []
        """``(arguments, answer)`` of each call whose answer was lost."""

    def lose_answer(self, name: str, resent: bool) -> None:
        """Lose the answer of the next call of store method ``name``, which the store carries out.
        ``resent``: the client sends the call again once reconnected and answers what the store
        says to the repeat (kctl's ZooKeeper client, like Kafka's ``retryRequestsUntilConnected``);
        otherwise it gives up (no reconnection within the session timeout) and raises
        :class:`StoreUnavailableError`."""
        self._lose = (name, resent)

    def expire_after(self, writes: int) -> None:
        self.writes, self._expire_at = 0, writes

    def add_listener(self, listener: WatchListener) -> None:
        def gated(event: WatchEvent) -> None:
            if not self.deaf:
                listener(event)

        self._listeners[listener] = gated
        self._session.add_listener(gated)

    def remove_listener(self, listener: WatchListener) -> None:
        gated = self._listeners.pop(listener, None)
        if gated is not None:
            self._session.remove_listener(gated)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._session, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if name in self.failing:
                raise StoreError(f"injected fault: {name} failed")
            before = self._session.tree.zxid
            try:
                if self._lose is not None and self._lose[0] == name:
                    resent = self._lose[1]
                    self._lose = None
                    self.lost.append((args, attribute(*args, **kwargs)))
                    if not resent:
                        raise StoreUnavailableError(f"injected fault: the connection was lost before {name} was answered")
                return attribute(*args, **kwargs)
            finally:
                if self._session.tree.zxid != before:
                    self._wrote()

        return call

    def _wrote(self) -> None:
        self.writes += 1
        if self._expire_at is not None and self.writes >= self._expire_at:
            self._expire_at = None
            self.expired = True
            self._session.expire_session()


class FaultySessions:
    """The ``controller_session`` factory of a cluster: one :class:`FaultySession` per candidate
    started, the latest one of each controller id kept; ``failing`` gives the store methods that
    fail from the start, by controller id."""

    def __init__(self, failing: Mapping[int, Iterable[str]] | None = None) -> None:
        self.by_controller: dict[int, FaultySession] = {}
        self._failing = dict(failing or {})

    def __call__(self, controller_id: int, session: Any) -> Any:
        faulty = FaultySession(session, self._failing.get(controller_id, ()))
        self.by_controller[controller_id] = faulty
        return faulty

    def __getitem__(self, controller_id: int) -> FaultySession:
        return self.by_controller[controller_id]


# --- Logs -------------------------------------------------------------------------------------------


def escaped(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Errors logged with a traceback: an exception that reached an event handler's catch-all."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.exc_info]


# --- Readers ---------------------------------------------------------------------------------------


def active(cluster: EmbeddedCluster) -> KafkaController:
    controller = cluster.active_controller
    assert controller is not None, "no active controller"
    return controller


def stored_state(cluster: EmbeddedCluster, tp: TopicPartition = TP) -> LeaderAndIsr:
    """The partition's state znode as the store holds it (not the controller's cache)."""
    read = cluster.store.get_partition_states([tp])
    assert tp in read.values, f"no readable state for {tp}: {read.errors.get(tp)}"
    return read.values[tp].leader_and_isr


def stored_assignment(cluster: EmbeddedCluster, tp: TopicPartition = TP) -> ReplicaAssignment:
    read = cluster.store.get_topic_assignments([tp.topic])
    assert tp.topic in read.values, f"no readable assignment for {tp.topic}: {read.errors.get(tp.topic)}"
    return read.values[tp.topic].partitions[tp.partition]


def partition(cluster: EmbeddedCluster, tp: TopicPartition = TP) -> PartitionDescription:
    return cluster.describe(tp.topic)[tp.partition]


def leaders(cluster: EmbeddedCluster, topic: str) -> dict[int, int]:
    return {p.partition: p.leader for p in cluster.describe(topic)}


CORE_METRICS = ("ActiveControllerCount", "OfflinePartitionsCount", "PreferredReplicaImbalanceCount",
                "GlobalTopicCount", "GlobalPartitionCount", "UncleanLeaderElections")


def core_metrics(cluster: EmbeddedCluster) -> dict[str, float]:
    """The controller metrics the tests follow (Kafka's names), from the active controller."""
    metrics = cluster.metrics()
    return {name: metrics[name] for name in CORE_METRICS}


def healthy(topics: int, partitions: int) -> dict[str, float]:
    """:func:`core_metrics` of a cluster with every partition led by its preferred replica."""
    return {"ActiveControllerCount": 1, "OfflinePartitionsCount": 0, "PreferredReplicaImbalanceCount": 0,
            "GlobalTopicCount": topics, "GlobalPartitionCount": partitions, "UncleanLeaderElections": 0}


def error_names(results: Mapping[TopicPartition, object]) -> dict[TopicPartition, str]:
    """Per-partition results as Kafka names them: the error's name, or NONE."""
    return {tp: r.error.name if isinstance(r, KctlError) else "NONE" for tp, r in results.items()}


Row = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], int, tuple[int, ...]]
"""(RS, AR, RR, leader, ISR) of one stored version of a partition."""


def history_rows(cluster: EmbeddedCluster, tp: TopicPartition = TP) -> list[Row]:
    """The partition's stored versions as (RS, AR, RR, leader, ISR), consecutive duplicates collapsed."""
    rows: list[Row] = []
    for s in cluster.partition_history(tp):
        row = (s.replicas, s.adding_replicas, s.removing_replicas, s.leader, s.isr)
        if not rows or rows[-1] != row:
            rows.append(row)
    return rows


def is_ordered_subsequence(expected: Sequence[Any], rows: Sequence[Any], matches: Callable[[Any, Any], bool]) -> bool:
    """Whether ``rows`` passes through every entry of ``expected``, in order."""
    remaining = iter(rows)
    return all(any(matches(e, row) for row in remaining) for e in expected)


SEED_002_ROWS: list[Row] = [
    # RS                AR         RR         leader  ISR         (the table of seed 002, sets there)
    ((1, 2, 3), (), (), 1, (1, 2, 3)),  # initial state
    ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 1, (1, 2, 3)),  # step A2
    ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 1, (1, 2, 3, 4, 5, 6)),  # phase B
    ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 4, (1, 2, 3, 4, 5, 6)),  # step B3
    ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3), 4, (4, 5, 6)),  # step B4
    ((4, 5, 6), (), (), 4, (4, 5, 6)),  # step B6
]
SEED_000_ROWS: list[tuple[tuple[int, ...], int, tuple[int, ...]]] = [
    # AR (the full replica list)  leader/isr   (seed 000, before KIP-455's AR/RR)
    ((1, 2, 3), 1, (1, 2, 3)),  # initial state
    ((1, 2, 3, 4, 5, 6), 1, (1, 2, 3)),  # step 2
    ((1, 2, 3, 4, 5, 6), 1, (1, 2, 3, 4, 5, 6)),  # step 4
    ((1, 2, 3, 4, 5, 6), 4, (1, 2, 3, 4, 5, 6)),  # step 7
    ((1, 2, 3, 4, 5, 6), 4, (4, 5, 6)),  # step 8
    ((4, 5, 6), 4, (4, 5, 6)),  # step 10
]


def matches_seed_002(expected: Row, row: Row) -> bool:
    """The seed writes RS, AR, RR and the ISR as sets; the leader is a broker id."""
    rs, ar, rr, leader, isr = expected
    return (set(rs), set(ar), set(rr), leader, set(isr)) == (set(row[0]), set(row[1]), set(row[2]), row[3], set(row[4]))


def matches_seed_000(expected: tuple[tuple[int, ...], int, tuple[int, ...]], row: Row) -> bool:
    replicas, leader, isr = expected
    return (set(replicas), leader, set(isr)) == (set(row[0]), row[3], set(row[4]))


def cluster_view(cluster: EmbeddedCluster) -> tuple[object, ...]:
    """Everything a caller can observe of the cluster's state: the store's last zxid (any write
    changes it), every topic as described, the reassignments in flight and the active controller."""
    controller = active(cluster)
    topics = sorted(controller.context.all_topics)
    return (
        cluster.store.tree.zxid,
        {t: cluster.describe(t) for t in topics},
        cluster.list_reassignments(),
        controller.broker_id,
        controller.epoch,
    )


@contextmanager
def unchanged(cluster: EmbeddedCluster) -> Iterator[None]:
    """Assert that what the block does changes nothing observable, once the cluster is quiet again."""
    before = cluster_view(cluster)
    yield
    cluster.run_until(cluster.is_quiet, what="the cluster to be quiet")
    assert cluster_view(cluster) == before


# --- Scenario builders -----------------------------------------------------------------------------


def make_isr_all_dead(cluster: EmbeddedCluster, topic: str) -> None:
    """Leave every partition of ``topic`` (replicas [a, b]) with its whole ISR dead and one live
    replica outside it: b fails (ISR [a]), a fails (no leader, ISR [a]), b comes back."""
    first, second = cluster.describe(topic)[0].replicas
    cluster.kill_broker(second)
    cluster.run_until(lambda: all(p.isr == (first,) for p in cluster.describe(topic)), what=f"{second} out of the ISR")
    cluster.kill_broker(first)
    cluster.run_until(lambda: all(p.leader == -1 for p in cluster.describe(topic)), what=f"{topic} to go offline")
    cluster.start_broker(second)
    cluster.run_until(lambda: second in active(cluster).context.live_broker_ids, what=f"broker {second} to be back")
    cluster.run_until(cluster.is_quiet, what="the cluster to be quiet")


def wait_for_isr(cluster: EmbeddedCluster, isr: Iterable[int], tp: TopicPartition = TP) -> None:
    expected = set(isr)
    cluster.run_until(lambda: set(stored_state(cluster, tp).isr) == expected, what=f"ISR {sorted(expected)} of {tp}")


def digest(cluster: EmbeddedCluster) -> tuple[str, str]:
    """SHA-256 of the state-change log and of every request sent (with time and addressee)."""
    log = hashlib.sha256("\n".join(cluster.state_change_log).encode()).hexdigest()
    sent = hashlib.sha256("\n".join(map(repr, cluster.sent_requests)).encode()).hexdigest()
    return log, sent


def scripted_run(seed: int) -> EmbeddedCluster:
    """A scenario touching most operations, on a rack-aware 5-broker cluster; returns the stopped
    cluster (its logs stay readable)."""
    t0, u1, v0 = TopicPartition("t", 0), TopicPartition("u", 1), TopicPartition("v", 0)
    with EmbeddedCluster(5, racks=["a", "a", "b", "b", "c"], seed=seed) as cluster:
        cluster.create_topic("t", partitions=4, replication_factor=3)
        cluster.create_topic("u", partitions=3, replication_factor=2)
        cluster.create_topic("v", assignment={0: [1, 2, 3]})
        for tp in (t0, u1):
            cluster.produce(tp, 25)
        cluster.advance(3)
        cluster.kill_broker(2)
        cluster.run_until_stable()
        cluster.reassign({v0: [3, 4, 5]})
        cluster.start_broker(2)
        cluster.run_until_stable()
        cluster.elect_leaders([t0, u1], "preferred")
        cluster.shutdown_broker(4)
        cluster.kill_controller()
        cluster.delete_topic("u")
        cluster.start_broker(4)
        cluster.run_until_stable()
        cluster.advance(320)  # an auto-rebalance check
        return cluster
