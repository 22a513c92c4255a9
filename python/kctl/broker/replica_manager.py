"""The data plane of a simulated broker: logs, follower fetching, high watermarks and the ISR.

:class:`SimulatedReplicaManager` models what a Kafka broker's ReplicaManager does with the
controller's decisions (seed 004, reference §6.13): a leader appends records and advances its high
watermark to the smallest log end offset of its ISR; followers fetch from the leader; the leader
adds a follower that caught up to its log end offset to the ISR and removes one that has not been
caught up for ``replica.lag.time.max.ms``, reporting the change with AlterPartition (IBP ≥ 2.7-IV2)
or, before, by writing the partition state itself and batching ISR-change notifications.

It scales to 100K partitions × RF 3 over 100 brokers in one process because work is batched per
broker and happens only where something changed: one fetch-round timer per follower broker walks
only the partitions with something to fetch (grouped by leader broker), one ISR-expiration timer
per leader broker walks only the partitions whose followers are not all caught up, and ISR changes
leave as one request per leader broker at a time. Periodic tasks keep Kafka's fixed rate and phase
but do not wake up while they have nothing to do.

:class:`DataPlaneLedger` is the god's view shared by every simulated broker of a cluster: it lets
followers reach their leader's replica manager, and it checks invariant I8 (no record below the
high watermark is lost by a clean election).
"""

from __future__ import annotations

import enum
import itertools
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar, overload

from kctl.config import ControllerConfig
from kctl.errors import Errors, IllegalArgumentError, IllegalStateError, StoreError
from kctl.model import EPOCH_DURING_DELETE, LeaderAndIsr, TopicPartition
from kctl.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerToControllerRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRow,
    StopReplicaPartitionState,
    StopReplicaRow,
    leader_and_isr_rows,
    stop_replica_rows,
)
from kctl.scheduler import Scheduler, Timer
from kctl.stores.base import MATCH_ANY_VERSION, StateStore

logger = logging.getLogger(__name__)

ISR_CHANGE_PROPAGATION_INTERVAL = 2.5
"""Seconds between checks for ISR changes to announce (pre-AlterPartition; not configurable in Kafka)."""
ISR_CHANGE_PROPAGATION_BLACKOUT = 5.0
"""Announce only after this many seconds without another ISR change…"""
ISR_CHANGE_PROPAGATION_MAX_DELAY = 60.0
"""…or when the last announcement is older than this."""
ALTER_PARTITION_RETRY_BACKOFF = 0.1
"""Seconds before re-sending ISR changes after a top-level error (no controller, stale epoch)."""

_AWAIT_LEADER_AND_ISR = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.FENCED_LEADER_EPOCH, Errors.INVALID_UPDATE_VERSION,
})
"""AlterPartition errors after which the leader keeps its proposal until the next LeaderAndIsr."""
_TIMED_OUT = AlterPartitionResponse(Errors.REQUEST_TIMED_OUT)
"""What an AlterPartition request unanswered for ``request.timeout.ms`` counts as (then retried)."""


# --- Interfaces --------------------------------------------------------------------------------------


class BrokerServices(Protocol):
    """What a replica manager uses of the broker it runs in (the broker agent provides it)."""

    @property
    def broker_id(self) -> int: ...

    @property
    def config(self) -> ControllerConfig: ...

    @property
    def scheduler(self) -> Scheduler: ...

    @property
    def store(self) -> StateStore:
        """The broker's own store session (pre-AlterPartition ISR writes and notifications)."""

    @property
    def broker_epoch(self) -> int: ...

    def send_to_controller(self, request: BrokerToControllerRequest, callback: Callable[[Any], None]) -> None:
        """Send to the current controller; the callback gets its response (``NOT_CONTROLLER`` when
        there is none)."""


S = TypeVar("S", LeaderAndIsrPartitionState, StopReplicaPartitionState)
R = TypeVar("R", LeaderAndIsrRow, StopReplicaRow)


class AcceptedStates(Sequence[S], Generic[S, R]):
    """The partition states of one request that the broker agent accepted, as it hands them to its
    replica manager: a sequence of the request's state objects (built when read: the native
    engine's payload makes none until then), and the same states as ``rows``
    (``kctl.messages.LeaderAndIsrRow`` or ``StopReplicaRow``, made by ``make_rows`` when first
    read), which the simulated replica manager reads instead. ``payload`` and ``indices`` are the
    request's states and the positions of those accepted, ascending (the native data plane reads
    a native payload there, without rows)."""

    __slots__ = ("_make_rows", "_rows", "indices", "payload")

    def __init__(
        self, states: Sequence[S], indices: list[int], make_rows: Callable[[Sequence[S], list[int]], list[R]]
    ) -> None:
        self.payload: Sequence[S] = states
        self.indices: list[int] = indices
        self._make_rows: Callable[[Sequence[S], list[int]], list[R]] = make_rows
        self._rows: list[R] | None = None

    @property
    def rows(self) -> list[R]:
        rows = self._rows
        if rows is None:
            rows = self._rows = self._make_rows(self.payload, self.indices)
        return rows

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, index: int) -> S: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[S]: ...

    def __getitem__(self, index: int | slice) -> S | Sequence[S]:
        if isinstance(index, slice):
            return [self.payload[i] for i in self.indices[index]]
        return self.payload[self.indices[index]]


class ReplicaManager(Protocol):
    """The data plane a :class:`~kctl.broker.agent.BrokerAgent` drives; replace the simulated one
    with a real one by passing it as ``replica_manager``.

    The agent has already applied Kafka's checks (broker, controller and leader epochs, log-dir
    state), so every call is a decision to carry out.
    """

    def startup(self, broker: BrokerServices) -> None:
        """The broker process started; logs kept from a previous run are loaded, none is hosted."""

    def shutdown(self) -> None:
        """The broker process stops (cleanly or by crashing): stop leading and fetching."""

    def become_leader_or_follower(self, states: Sequence[LeaderAndIsrPartitionState]) -> None:
        """Make this broker leader or follower of each partition, as the partition state says."""

    def stop_replicas(self, states: Sequence[StopReplicaPartitionState]) -> None:
        """Stop the replicas, deleting their logs where ``delete_partition`` is set."""

    def mark_offline(self, partitions: Sequence[TopicPartition]) -> None:
        """The log directory holding these replicas failed: they stop and their logs are lost."""


class Ledger(Protocol):
    """The god's view simulated replica managers share (see :class:`DataPlaneLedger`).

    ``lock`` serialises the whole simulated data plane: replica managers call each other (a
    follower reads its leader's log), so they hold this one lock rather than one each.
    """

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

    def attach(self, broker_id: int, manager: SimulatedReplicaManager) -> None: ...

    def detach(self, broker_id: int, manager: SimulatedReplicaManager) -> None: ...

    def replica_manager(self, broker_id: int) -> SimulatedReplicaManager | None:
        """The running replica manager of a broker, or None when the broker is down."""

    def leader_elected(
        self, tp: TopicPartition, broker_id: int, leader_epoch: int, log_end_offset: int, isr: tuple[int, ...]
    ) -> PartitionRecord:
        """A broker became leader with this log end offset and ISR; the partition's record, to
        which the leader then reports its ISR changes."""

    def isr_changed(self, record: PartitionRecord, leader_epoch: int, isr: tuple[int, ...]) -> None:
        """The leader's maximal ISR (committed plus proposed members) changed; ``record`` is what
        :meth:`leader_elected` returned it (the leader holds it rather than have it looked up at
        every change). Called with ``lock`` held."""

    def high_watermark_advanced(self, tp: TopicPartition, high_watermark: int) -> None:
        """A leader's high watermark reached ``high_watermark``: records below it are committed."""

    def partition_deleted(self, tp: TopicPartition) -> None:
        """The partition's topic was deleted: a new topic of the same name starts from scratch."""


# --- The ledger --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataLossViolation:
    """An I8 violation: a leader elected from the ISR lacks records below the high watermark."""

    tp: TopicPartition
    broker_id: int
    leader_epoch: int
    log_end_offset: int
    committed_offset: int

    def __str__(self) -> str:
        return (
            f"{self.tp}: broker {self.broker_id} became leader (epoch {self.leader_epoch}) from the ISR "
            f"with log end offset {self.log_end_offset}, below the committed offset {self.committed_offset}"
        )


class PartitionRecord:
    """What the ledger knows of one partition: its committed offset, and its current leader's
    epoch and maximal ISR."""

    __slots__ = ("committed", "isr", "leader_epoch")

    def __init__(self) -> None:
        self.committed = 0
        self.leader_epoch = -1
        self.isr: tuple[int, ...] = ()


class DataPlaneLedger:
    """Registry of a simulated cluster's replica managers, and the I8 bookkeeping.

    Per partition it records the committed offset (the highest high watermark any leader reached)
    and the ISR of the current leader. When a broker becomes leader, an election from that ISR
    (clean) whose log ends below the committed offset is a :class:`DataLossViolation`; a leader
    from outside it (unclean) may truncate: it is counted, with the records it loses, and the
    committed offset restarts from its log end.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._managers: dict[int, SimulatedReplicaManager] = {}
        self._partitions: dict[TopicPartition, PartitionRecord] = {}
        self.violations: list[DataLossViolation] = []
        self.unclean_elections = 0
        self.truncated_records = 0

    def attach(self, broker_id: int, manager: SimulatedReplicaManager) -> None:
        with self.lock:
            if self._managers.get(broker_id, manager) is not manager:
                raise IllegalStateError(f"another replica manager is attached for broker {broker_id}")
            self._managers[broker_id] = manager

    def detach(self, broker_id: int, manager: SimulatedReplicaManager) -> None:
        with self.lock:
            if self._managers.get(broker_id) is manager:
                del self._managers[broker_id]

    def replica_manager(self, broker_id: int) -> SimulatedReplicaManager | None:
        return self._managers.get(broker_id)

    def committed_offset(self, tp: TopicPartition) -> int:
        record = self._partitions.get(tp)
        return 0 if record is None else record.committed

    def leader_elected(
        self, tp: TopicPartition, broker_id: int, leader_epoch: int, log_end_offset: int, isr: tuple[int, ...]
    ) -> PartitionRecord:
        with self.lock:
            record = self._partitions.get(tp)
            if record is None:
                record = self._partitions[tp] = PartitionRecord()
            if leader_epoch <= record.leader_epoch:
                return record  # a late report of an older leadership
            if record.leader_epoch < 0 or broker_id in record.isr:
                if log_end_offset < record.committed:
                    violation = DataLossViolation(tp, broker_id, leader_epoch, log_end_offset, record.committed)
                    logger.error("%s", violation)
                    self.violations.append(violation)
            else:
                self.unclean_elections += 1
                if log_end_offset < record.committed:
                    self.truncated_records += record.committed - log_end_offset
                    record.committed = log_end_offset
            record.leader_epoch = leader_epoch
            record.isr = isr
            return record

    def isr_changed(self, record: PartitionRecord, leader_epoch: int, isr: tuple[int, ...]) -> None:
        """Called with the lock held, by a leader's proposals and their answers (one call per
        partition each), so it does not take it again. (A record the partition's deletion dropped
        is written to no more: a partition of the same name has a record of its own, and a leader
        of the deleted one stops before it exists, as the controller completes a deletion only once
        every replica stopped.)"""
        if record.leader_epoch == leader_epoch:
            record.isr = isr

    def high_watermark_advanced(self, tp: TopicPartition, high_watermark: int) -> None:
        with self.lock:
            record = self._partitions.get(tp)
            if record is not None:  # None: a late report about a deleted partition
                record.committed = max(record.committed, high_watermark)

    def partition_deleted(self, tp: TopicPartition) -> None:
        with self.lock:
            self._partitions.pop(tp, None)


# --- The replica manager -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderLogView:
    """What a leader tells a fetching follower: its log end offset, high watermark and epoch
    history (``(leader epoch, start offset)`` pairs)."""

    log_end_offset: int
    high_watermark: int
    epochs: tuple[tuple[int, int], ...]


class ReplicaRole(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    STOPPED = "stopped"
    OFFLINE = "offline"


_LEADER, _FOLLOWER = ReplicaRole.LEADER, ReplicaRole.FOLLOWER
"""Read per partition on the hot paths: a global costs less than an enum member."""


@dataclass(frozen=True)
class ReplicaSnapshot:
    """One replica as its broker sees it; ``role`` is None for a log not hosted since start-up."""

    tp: TopicPartition
    role: ReplicaRole | None
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    pending_isr: tuple[int, ...] | None
    log_end_offset: int
    high_watermark: int


class _Follower:
    """A leader's view of one follower of a partition (Kafka's remote Replica)."""

    __slots__ = ("caught_up_at", "fetching", "last_fetch_at", "last_fetch_leo", "leo")

    def __init__(self, leo: int, caught_up_at: float, last_fetch_leo: int, last_fetch_at: float) -> None:
        self.leo = leo
        self.caught_up_at = caught_up_at
        self.last_fetch_leo = last_fetch_leo
        self.last_fetch_at = last_fetch_at
        self.fetching = False  # its fetcher is running at this leader epoch (it would keep fetching)


_UNRECORDED = PartitionRecord()
"""The ledger's record of a replica that never led: its leader epoch (-1) is no leader's, so no
report changes it."""

_NO_FOLLOWERS: Mapping[int, _Follower] = MappingProxyType({})
"""The followers a replica that did not lead knew of: none (one shared mapping, not a dict per role change)."""


class _Replica:
    """A local replica: its log (kept across restarts) and its current role."""

    __slots__ = ("adding", "controller_epoch", "epochs", "followers", "hw", "isr", "last_source", "leader",
                 "leader_epoch", "leo", "partition_epoch", "pending", "record", "replicas", "role", "source",
                 "source_follower", "source_followers", "tp", "truncate")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.role: ReplicaRole | None = None
        self.leo = 0
        self.hw = 0
        self.epochs: tuple[tuple[int, int], ...] = ()  # leader-epoch cache: (epoch, start offset)
        self.leader = -1
        self.leader_epoch = -1
        self.partition_epoch = 0
        self.controller_epoch = 0
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.adding: tuple[int, ...] = ()  # replicas a reassignment is adding
        self.followers: dict[int, _Follower] = {}  # when leading
        self.pending: tuple[int, ...] | None = None  # when leading: the ISR proposed to the controller
        self.truncate = False  # when following: reconcile the log with the leader's first
        self.record = _UNRECORDED  # when leading: the ledger's record of the partition
        # When following, from its first fetch at the leader epoch: the leader's replica, the leader's
        # followers (a dict per leadership: every change of the leader's role or epoch replaces it, so
        # that it still being the leader's ``followers`` says that the leadership is the one fetched
        # from) and this follower's entry among them. The next fetches and the stop read the leader's
        # replica from there instead of looking it up in the leader's table (a hundred brokers' tables
        # do not stay in the processor's caches).
        self.source: _Replica | None = None
        self.source_followers: dict[int, _Follower] | None = None
        self.source_follower: _Follower | None = None
        # The leader's replica that ``source`` last was, kept when the follower stops: the next
        # leadership of the partition is often on the same broker (an epoch bump, a preferred
        # leader back after a restart), where that replica object still leads it. Setting it clears
        # the leader replica's own, so that these references never form a cycle (each was set after
        # the one it leads to): a deleted partition's replicas are freed at once, not left to the
        # older generations' collections, which do not run while a simulation does.
        self.last_source: _Replica | None = None

    def truncate_to(self, offset: int) -> None:
        if offset < self.leo:
            self.leo = offset
            self.epochs = tuple(entry for entry in self.epochs if entry[1] < offset)
        self.hw = min(self.hw, self.leo)


def common_log_prefix(a: tuple[tuple[int, int], ...], a_leo: int, b: tuple[tuple[int, int], ...], b_leo: int) -> int:
    """Length of the common prefix of two logs, from their leader-epoch caches (what KIP-101/279
    truncation finds): records of one epoch are the same on every replica, so two logs agree up to
    the first offset where their epochs differ."""
    end = min(a_leo, b_leo)
    for entry_a, entry_b in zip(a, b):
        if entry_a != entry_b:
            return min(end, entry_a[1], entry_b[1])
    longer = a if len(a) > len(b) else b
    shorter = min(len(a), len(b))
    return min(end, longer[shorter][1]) if len(longer) > shorter else end


class _Periodic:
    """A fixed-rate task that stays asleep while it has nothing to do.

    Runs happen at ``origin + k * period`` (Kafka's ``scheduler.schedule(period=...)`` started at
    ``origin``); ``run`` returns whether the task still has work, and :meth:`arm` wakes it up for
    the next run when new work appears.
    """

    def __init__(self, name: str, run: Callable[[], bool], lock: AbstractContextManager[Any]) -> None:
        self._name = name
        self._run = run
        self._lock = lock
        self._scheduler: Scheduler | None = None
        self._origin = 0.0
        self._period = 1.0
        self._timer: Timer | None = None

    def start(self, scheduler: Scheduler, origin: float, period: float) -> None:
        self.cancel()
        self._scheduler, self._origin, self._period = scheduler, origin, period

    def arm(self) -> None:
        if self._timer is not None or self._scheduler is None:
            return
        now = self._scheduler.now()
        runs = math.floor((now - self._origin) / self._period + 1e-9) + 1
        self._timer = self._scheduler.schedule(self._origin + runs * self._period - now, self._fire, self._name)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            if self._run():
                self.arm()


class _ReplicaManagerBase:
    """What the simulated replica managers (this module's and the native data plane's) share
    word for word: the running broker, a flush of ISR proposals scheduled, and Kafka's
    ISR-change notifications (before AlterPartition)."""

    _broker: BrokerServices | None
    _broker_id: int
    _flush_timer: Timer | None
    _alter_in_flight: tuple[int, Timer] | None
    _isr_changes: dict[TopicPartition, None]
    _last_isr_change: float
    _last_isr_propagation: float

    @property
    def is_running(self) -> bool:
        return self._broker is not None

    def _running(self) -> BrokerServices:
        if self._broker is None:
            raise IllegalStateError("the replica manager is not running")
        return self._broker

    def _flush(self) -> None:
        """Send the queued ISR proposals (each manager's own)."""
        raise NotImplementedError

    def _schedule_flush(self, delay: float) -> None:
        """Send queued proposals soon: those of one step leave together, one request at a time."""
        if self._flush_timer is None and self._alter_in_flight is None and self._broker is not None:
            self._flush_timer = self._broker.scheduler.schedule(delay, self._flush, "alter-partition")

    def _propagate_isr_changes(self) -> bool:
        """Kafka's maybePropagateIsrChanges: one notification for every pending change, once no
        change happened for 5 s or the last notification is older than 60 s."""
        broker = self._broker
        if broker is None or not self._isr_changes:
            return False
        now = broker.scheduler.now()
        if (self._last_isr_change + ISR_CHANGE_PROPAGATION_BLACKOUT < now
                or self._last_isr_propagation + ISR_CHANGE_PROPAGATION_MAX_DELAY < now):
            try:
                broker.store.create_isr_change_notification(list(self._isr_changes))
            except StoreError as exc:
                logger.warning("Broker %d: cannot announce ISR changes: %s", self._broker_id, exc)
                return True
            self._isr_changes.clear()
            self._last_isr_propagation = now
            return False
        return True


class SimulatedReplicaManager(_ReplicaManagerBase):
    """Simulated logs and replication for one broker (implements :class:`ReplicaManager`).

    :param ledger: shared by every broker of the cluster (followers find their leaders through it);
        a private one by default, which suits a single broker only.
    :param fetch_interval: seconds between a follower broker's fetch rounds.
    :param max_fetch_records: records a follower copies per partition and round (None: all), to
        simulate slow followers.
    """

    def __init__(
        self, ledger: Ledger | None = None, *, fetch_interval: float = 0.5, max_fetch_records: int | None = None
    ) -> None:
        if fetch_interval <= 0 or (max_fetch_records is not None and max_fetch_records < 1):
            raise IllegalArgumentError(
                f"fetch_interval must be > 0 and max_fetch_records >= 1, not {fetch_interval}, {max_fetch_records}"
            )
        self.ledger: Ledger = ledger if ledger is not None else DataPlaneLedger()
        self.fetch_interval = fetch_interval
        self.max_fetch_records = max_fetch_records
        self._broker: BrokerServices | None = None
        self._broker_id = -1
        self._replicas: dict[TopicPartition, _Replica] = {}
        self._fetch_from: dict[int, dict[TopicPartition, _Replica]] = {}  # leader → replicas to fetch
        self._paused = False
        self._isr_watch: dict[TopicPartition, None] = {}  # led partitions whose followers are not all in sync
        self._alter_queue: dict[TopicPartition, tuple[_Replica, tuple[int, ...]]] = {}  # led replica, its ISR to propose
        self._alter_requests = itertools.count(1)
        self._alter_in_flight: tuple[int, Timer] | None = None  # the request awaiting its answer, its timeout
        self._flush_timer: Timer | None = None
        self._isr_changes: dict[TopicPartition, None] = {}
        self._isr_expands = self._isr_shrinks = 0  # ISR changes this leader made (Kafka's meters)
        self._last_isr_change = 0.0
        self._last_isr_propagation = 0.0
        lock = self.ledger.lock
        self._fetcher = _Periodic("replica-fetcher", self._fetch_round, lock)
        self._isr_expiration = _Periodic("isr-expiration", self._check_isr, lock)
        self._isr_propagation = _Periodic("isr-change-propagation", self._propagate_isr_changes, lock)

    # --- Lifecycle ---------------------------------------------------------------------------------

    def idle(self) -> bool:
        """Nothing in progress: no ISR change queued, in flight or awaiting its notification, and no
        follower still fetching from a live leader. (The ISR-expiration task may keep watching a
        partition whose follower is on a dead broker; that is waiting, not work.)"""
        with self.ledger.lock:
            if self._alter_queue or self._alter_in_flight is not None or self._isr_changes:
                return False
            return not any(
                pending and self.ledger.replica_manager(leader) is not None for leader, pending in self._fetch_from.items()
            )

    def startup(self, broker: BrokerServices) -> None:
        with self.ledger.lock:
            if self._broker is not None:
                raise IllegalStateError(f"the replica manager of broker {self._broker_id} is already running")
            self._broker, self._broker_id = broker, broker.broker_id
            # A failed log directory was replaced while the broker was down: its logs are gone.
            for tp in [tp for tp, r in self._replicas.items() if r.role is ReplicaRole.OFFLINE]:
                del self._replicas[tp]
            now = broker.scheduler.now()
            self._fetcher.start(broker.scheduler, now, self.fetch_interval)
            self._isr_expiration.start(broker.scheduler, now, broker.config.replica_lag_time_max_ms / 2000)
            self._isr_propagation.start(broker.scheduler, now, ISR_CHANGE_PROPAGATION_INTERVAL)
            self._last_isr_change = self._last_isr_propagation = now
            self.ledger.attach(self._broker_id, self)

    def shutdown(self) -> None:
        with self.ledger.lock:
            broker = self._broker
            if broker is None:
                return
            now = broker.scheduler.now()
            for r in self._replicas.values():
                if r.role is not ReplicaRole.OFFLINE:
                    self._leave_role(r, now)
                    r.role = None
            for task in (self._fetcher, self._isr_expiration, self._isr_propagation):
                task.cancel()
            if self._flush_timer is not None:
                self._flush_timer.cancel()
            if self._alter_in_flight is not None:
                self._alter_in_flight[1].cancel()
            self._flush_timer = self._alter_in_flight = None  # answers to this run's requests are void
            self._isr_changes.clear()
            self._paused = False
            self.ledger.detach(self._broker_id, self)
            self._broker = None

    # --- Controller decisions ----------------------------------------------------------------------

    def become_leader_or_follower(self, states: Sequence[LeaderAndIsrPartitionState]) -> None:
        rows = states.rows if type(states) is AcceptedStates else leader_and_isr_rows(states)
        with self.ledger.lock:
            now = self._running().scheduler.now()
            replicas, broker_id = self._replicas, self._broker_id
            leave_role, become_leader, start_fetching = self._leave_role, self._become_leader, self._start_fetching
            for tp, controller_epoch, leader, leader_epoch, isr, partition_epoch, assigned, adding, _ in rows:
                r = replicas.get(tp)  # thousands of rows when a broker starts or a topic is created
                if r is None:
                    r = replicas[tp] = _Replica(tp)
                role = r.role
                previous = r.followers if role is _LEADER else _NO_FOLLOWERS
                if role is _LEADER or role is _FOLLOWER:  # the other roles have nothing to leave
                    leave_role(r, now)
                r.leader, r.leader_epoch, r.partition_epoch = leader, leader_epoch, partition_epoch
                r.controller_epoch, r.isr, r.replicas, r.adding = controller_epoch, isr, assigned, adding
                if leader == broker_id:
                    become_leader(r, previous, now)
                else:  # Kafka's makeFollower: fetch from the leader, reconciling the log first
                    r.role, r.truncate = _FOLLOWER, True
                    start_fetching(r)

    def stop_replicas(self, states: Sequence[StopReplicaPartitionState]) -> None:
        rows = states.rows if type(states) is AcceptedStates else stop_replica_rows(states)
        with self.ledger.lock:
            now = self._running().scheduler.now()
            for tp, leader_epoch, delete in rows:
                r = self._replicas.get(tp)
                if r is not None and r.role is not ReplicaRole.OFFLINE:
                    self._leave_role(r, now)
                    r.role = ReplicaRole.STOPPED
                    if delete:
                        del self._replicas[tp]
                if delete and leader_epoch == EPOCH_DURING_DELETE:
                    self.ledger.partition_deleted(tp)

    def mark_offline(self, partitions: Sequence[TopicPartition]) -> None:
        with self.ledger.lock:
            now = self._running().scheduler.now()
            for tp in partitions:
                r = self._replicas.get(tp)
                if r is None:
                    r = self._replicas[tp] = _Replica(tp)
                self._leave_role(r, now)
                r.role = ReplicaRole.OFFLINE

    # --- Clients and inspection --------------------------------------------------------------------

    def produce(self, tp: TopicPartition, records: int) -> Errors:
        """Append ``records`` records to the leader replica of ``tp``; the error a producer would get."""
        if records < 1:
            raise IllegalArgumentError(f"cannot produce {records} records")
        with self.ledger.lock:
            r = self._replicas.get(tp)
            if r is None or self._broker is None:
                return Errors.UNKNOWN_TOPIC_OR_PARTITION
            if r.role is ReplicaRole.OFFLINE:
                return Errors.KAFKA_STORAGE_ERROR
            if r.role is not ReplicaRole.LEADER:
                return Errors.NOT_LEADER_OR_FOLLOWER
            now = self._broker.scheduler.now()
            if not r.epochs or r.epochs[-1][0] != r.leader_epoch:
                r.epochs += ((r.leader_epoch, r.leo),)
            previous_leo = r.leo
            r.leo += records
            for follower in r.followers.values():
                if follower.fetching and follower.leo >= previous_leo:
                    follower.caught_up_at = now  # it was caught up until now
            self._wake_followers(r)
            if r.followers:
                self._watch(tp)
            self._maybe_advance_high_watermark(r)
            return Errors.NONE

    def pause_fetching(self) -> None:
        """Stop every fetcher of this broker (a stuck follower); leaders stop hearing from it."""
        with self.ledger.lock:
            now = self._running().scheduler.now()
            self._paused = True
            for r in self._replicas.values():
                if r.role is ReplicaRole.FOLLOWER:
                    self._stop_fetching(r, now)

    def resume_fetching(self) -> None:
        with self.ledger.lock:
            self._running()
            self._paused = False
            for r in self._replicas.values():
                if r.role is ReplicaRole.FOLLOWER:
                    self._start_fetching(r)

    def replica_state(self, tp: TopicPartition) -> ReplicaSnapshot | None:
        with self.ledger.lock:
            r = self._replicas.get(tp)
            if r is None:
                return None
            return ReplicaSnapshot(
                tp, r.role, r.leader, r.leader_epoch, r.partition_epoch, r.isr, r.pending, r.leo, r.hw
            )

    def metrics(self) -> dict[str, float]:
        """Kafka's ``ReplicaManager`` metrics of this broker: the replicas it hosts (those with a role)
        and leads, its under-replicated partitions (led, fewer in sync than replicas not being added)
        and offline replicas, and how many ISR expansions and shrinks it made (all time)."""
        with self.ledger.lock:
            hosted = [r for r in self._replicas.values() if r.role is not None]
            led = [r for r in hosted if r.role is ReplicaRole.LEADER]
            return {
                "LeaderCount": len(led),
                "PartitionCount": len(hosted),
                "UnderReplicatedPartitions": sum(len(r.isr) < len(r.replicas) - len(r.adding) for r in led),
                "OfflineReplicaCount": sum(r.role is ReplicaRole.OFFLINE for r in hosted),
                "IsrExpands": self._isr_expands,
                "IsrShrinks": self._isr_shrinks,
            }

    def hosted_partitions(self) -> list[TopicPartition]:
        """Partitions with a local log, in the order they were first hosted."""
        with self.ledger.lock:
            return list(self._replicas)

    # --- Roles -------------------------------------------------------------------------------------

    def _leave_role(self, r: _Replica, now: float) -> None:
        if r.role is _FOLLOWER:
            self._stop_fetching(r, now)
        elif r.role is _LEADER:
            r.followers = {}
            r.pending = None
            self._alter_queue.pop(r.tp, None)
            self._isr_watch.pop(r.tp, None)

    def _become_leader(self, r: _Replica, previous: Mapping[int, _Follower], now: float) -> None:
        """Kafka's makeLeader: the ISR's followers count as caught up now, others as never; a
        leader that keeps its role (epoch bump) keeps what it knew of its followers' logs."""
        r.role, r.truncate = _LEADER, False
        me, isr, leo = self._broker_id, r.isr, r.leo
        followers: dict[int, _Follower] = {}
        r.followers = followers
        for b in r.replicas:
            if b != me:
                known = previous.get(b)
                followers[b] = _Follower(-1 if known is None else known.leo, now if b in isr else 0.0, leo, now)
        r.record = self.ledger.leader_elected(r.tp, me, r.leader_epoch, leo, isr)
        if followers:
            self._watch(r.tp)
        self._maybe_advance_high_watermark(r)

    def _start_fetching(self, r: _Replica) -> None:
        if r.leader >= 0 and not self._paused:
            pending = self._fetch_from.get(r.leader)
            if pending is None:
                self._fetch_from[r.leader] = {r.tp: r}
            else:
                pending[r.tp] = r
            self._fetcher.arm()

    def _stop_fetching(self, r: _Replica, now: float) -> None:
        pending = self._fetch_from.get(r.leader)
        if pending is not None:
            pending.pop(r.tp, None)
            if not pending:
                del self._fetch_from[r.leader]
        lr, follower = r.source, r.source_follower
        if lr is not None and follower is not None:  # it fetched at this epoch: the leader learns that it stopped
            if lr.followers is r.source_followers:
                self._follower_left(lr, follower, now)
            r.source = r.source_followers = r.source_follower = None

    # --- Fetching (follower side, reading the leader's replica manager) ----------------------------

    def _wake(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """The leader has new records or a new high watermark for this follower to fetch."""
        r = self._replicas.get(tp)
        if r is not None and r.role is _FOLLOWER and (r.leader, r.leader_epoch) == (leader_id, leader_epoch):
            self._start_fetching(r)

    def _fetch_round(self) -> bool:
        """This follower broker's fetch round: per leader broker, each partition with something to
        fetch, in one loop. A partition's leader replica is read in place: from the leader's table
        at the first fetch of a leadership (the epoch history first when truncating), then from
        where that fetch found it, kept in the follower's replica. A partition leaves the round's
        work once the follower had already caught up."""
        broker = self._broker
        if broker is None or self._paused:
            return False
        now = broker.scheduler.now()
        me, fetch_from, apply_fetch = self._broker_id, self._fetch_from, self._apply_fetch
        for leader_id in list(fetch_from):
            leader = self.ledger.replica_manager(leader_id)
            if leader is None:
                continue  # the leader's broker is down: retry next round, as a fetcher reconnects
            pending, served, record_fetch = fetch_from[leader_id], leader._replicas, leader._record_fetch
            for tp, r in list(pending.items()):
                lr, follower = r.source, r.source_follower
                if lr is None or follower is None or lr.followers is not r.source_followers:
                    lr = r.last_source
                    if lr is None or lr.leader != leader_id or lr.role is not _LEADER or lr.leader_epoch != r.leader_epoch:
                        lr = served.get(tp)
                        if lr is None or lr.role is not _LEADER or lr.leader_epoch != r.leader_epoch:
                            continue  # not (yet) led there at this epoch: fetch again next round
                        r.last_source, lr.last_source = lr, None
                    follower = lr.followers.get(me)
                    if follower is None:
                        continue
                    r.source, r.source_followers, r.source_follower = lr, lr.followers, follower
                if r.truncate:
                    self._truncate(r, lr.epochs, lr.leo)
                fetch_offset = r.leo
                record_fetch(lr, me, follower, fetch_offset, now)
                if apply_fetch(r, fetch_offset, lr.leo, lr.hw, lr.epochs):
                    del pending[tp]
            if not pending:
                del fetch_from[leader_id]
        return bool(fetch_from)

    def _truncate(self, r: _Replica, epochs: tuple[tuple[int, int], ...], log_end_offset: int) -> None:
        """Kafka's truncation on becoming a follower: to the common prefix of the epoch histories
        (the leader's ``epochs`` and ``log_end_offset``). An empty log (every replica of a new
        partition) has nothing to truncate, and its high watermark is 0 already."""
        if r.leo:
            r.truncate_to(common_log_prefix(r.epochs, r.leo, epochs, log_end_offset))
        r.truncate = False

    def _apply_fetch(
        self, r: _Replica, fetch_offset: int, log_end_offset: int, high_watermark: int, epochs: tuple[tuple[int, int], ...]
    ) -> bool:
        """Copy what the leader returned (its log's end, high watermark and epochs after the
        fetch); True when the follower had already caught up."""
        available = log_end_offset - fetch_offset
        copied = available if self.max_fetch_records is None else min(available, self.max_fetch_records)
        if copied > 0:
            r.leo += copied
            r.epochs = epochs if copied == available else tuple(e for e in epochs if e[1] < r.leo)
        r.hw = min(high_watermark, r.leo)
        return available <= 0

    def _serving(self, tp: TopicPartition, follower_id: int, leader_epoch: int) -> _Replica | None:
        """This broker's replica of ``tp`` when it leads it at ``leader_epoch`` and knows the
        follower; None answers NOT_LEADER / FENCED / UNKNOWN_LEADER_EPOCH."""
        lr = self._replicas.get(tp)
        if lr is None or lr.role is not _LEADER or lr.leader_epoch != leader_epoch or follower_id not in lr.followers:
            return None
        return lr

    def serve_fetch(
        self, tp: TopicPartition, follower_id: int, leader_epoch: int, fetch_offset: int | None, now: float
    ) -> LeaderLogView | None:
        """The leader's half of a fetch (call with the ledger's lock held): record the follower's
        fetch offset (None: only asking for the epoch history, as OffsetsForLeaderEpoch) and return
        the log's end, high watermark and epochs; None when this broker does not lead ``tp`` at
        ``leader_epoch`` (NOT_LEADER / FENCED / UNKNOWN_LEADER_EPOCH) or does not know the follower."""
        lr = self._serving(tp, follower_id, leader_epoch)
        if lr is None:
            return None
        if fetch_offset is not None:
            self._record_fetch(lr, follower_id, lr.followers[follower_id], fetch_offset, now)
        return LeaderLogView(lr.leo, lr.hw, lr.epochs)

    # --- Leading: follower state, high watermark, ISR ----------------------------------------------

    def _record_fetch(self, r: _Replica, follower_id: int, follower: _Follower, fetch_offset: int, now: float) -> None:
        """Kafka's updateFollowerFetchState, then maybeExpandIsr and maybeIncrementLeaderHW."""
        if fetch_offset >= r.leo:
            follower.caught_up_at = now
        elif fetch_offset >= follower.last_fetch_leo:
            follower.caught_up_at = max(follower.caught_up_at, follower.last_fetch_at)
        follower.last_fetch_leo, follower.last_fetch_at = r.leo, now
        follower.leo, follower.fetching = fetch_offset, True
        if fetch_offset >= r.leo and r.pending is None and follower_id not in r.isr:
            self._propose_isr(r, r.isr + (follower_id,))
        if r.hw < r.leo:
            self._maybe_advance_high_watermark(r)

    def _follower_stopped(self, tp: TopicPartition, follower_id: int, leader_epoch: int, now: float) -> None:
        r = self._replicas.get(tp)
        if r is None or r.role is not _LEADER or r.leader_epoch != leader_epoch:
            return
        follower = r.followers.get(follower_id)
        if follower is not None:
            self._follower_left(r, follower, now)

    @staticmethod
    def _follower_left(r: _Replica, follower: _Follower, now: float) -> None:
        """A follower of ``r`` (led here) stopped fetching: caught up until now if it was."""
        if follower.fetching:
            if follower.leo >= r.leo:
                follower.caught_up_at = now
            follower.fetching = False

    def _maybe_advance_high_watermark(self, r: _Replica) -> None:
        """HW = the smallest log end offset of the maximal ISR (committed plus proposed, KIP-497)."""
        if r.hw >= r.leo:
            return  # it is at the log's end already (as every HW of a cluster without records)
        isr = r.isr if r.pending is None else dict.fromkeys(r.isr + r.pending)
        hw = r.leo
        for broker_id in isr:
            if broker_id != self._broker_id:
                follower = r.followers.get(broker_id)
                hw = min(hw, -1 if follower is None else follower.leo)
        if hw > r.hw:
            r.hw = hw
            self.ledger.high_watermark_advanced(r.tp, hw)
            self._wake_followers(r)  # a new HW completes their pending fetches (they learn it)

    def _wake_followers(self, r: _Replica) -> None:
        for broker_id in r.followers:
            manager = self.ledger.replica_manager(broker_id)
            if manager is not None:
                manager._wake(r.tp, self._broker_id, r.leader_epoch)

    def _watch(self, tp: TopicPartition) -> None:
        self._isr_watch[tp] = None
        self._isr_expiration.arm()

    def _check_isr(self) -> bool:
        """The isr-expiration task: shrink out followers not caught up for replica.lag.time.max.ms
        (Kafka: LEO behind the leader's and last caught up too long ago), and add caught-up ones
        whose expansion waited for an earlier proposal."""
        broker = self._broker
        if broker is None:
            return False
        now = broker.scheduler.now()
        max_lag = broker.config.replica_lag_time_max_ms / 1000
        replicas, watch = self._replicas, self._isr_watch
        for tp in list(watch):
            r = replicas[tp]
            if r.pending is not None:
                continue
            leo, isr, settled = r.leo, r.isr, True
            out: tuple[int, ...] = ()
            joining: tuple[int, ...] = ()
            for broker_id, follower in r.followers.items():
                if follower.leo < leo:
                    settled = False
                    if broker_id in isr and now - follower.caught_up_at > max_lag:
                        out += (broker_id,)
                elif follower.fetching:
                    follower.caught_up_at = now
                    if broker_id not in isr:
                        settled = False
                        joining += (broker_id,)
                elif broker_id not in isr:
                    settled = False
            if out:
                self._propose_isr(r, tuple(b for b in isr if b not in out))
            elif joining:
                self._propose_isr(r, isr + joining)
            elif settled:
                del watch[tp]
        return bool(watch)

    def _propose_isr(self, r: _Replica, isr: tuple[int, ...]) -> None:
        """Propose ``isr``: the committed ISR with members added, or with members removed (never
        both at once), so the maximal ISR (their union) is the longer of the two."""
        r.pending = isr
        self.ledger.isr_changed(r.record, r.leader_epoch, isr if len(isr) > len(r.isr) else r.isr)
        self._alter_queue[r.tp] = (r, isr)
        if self._flush_timer is None and self._alter_in_flight is None:
            self._schedule_flush(0.0)

    def _adopt_isr(self, r: _Replica, isr: tuple[int, ...], partition_epoch: int) -> None:
        """The controller committed ``isr`` (usually the proposal). The ledger holds the maximal ISR
        reported with the proposal and hears of ``isr`` only when it differs: an expansion committed
        as proposed changes nothing there."""
        pending, committed = r.pending, r.isr
        held = pending if pending is not None and len(pending) > len(committed) else committed
        if len(isr) > len(committed):
            self._isr_expands += 1
        elif len(isr) < len(committed):
            self._isr_shrinks += 1
        r.isr, r.partition_epoch, r.pending = isr, partition_epoch, None
        if isr != held:
            self.ledger.isr_changed(r.record, r.leader_epoch, isr)
        self._watch(r.tp)
        if r.hw < r.leo:
            self._maybe_advance_high_watermark(r)

    def _drop_proposal(self, r: _Replica) -> None:
        """Forget a rejected proposal; the next ISR check proposes again if still needed."""
        r.pending = None
        self.ledger.isr_changed(r.record, r.leader_epoch, r.isr)
        self._watch(r.tp)

    # --- Reporting ISR changes ---------------------------------------------------------------------

    def _flush(self) -> None:
        with self.ledger.lock:
            self._flush_timer = None
            broker = self._broker
            if broker is None or self._alter_in_flight is not None or not self._alter_queue:
                return
            queue, me = self._alter_queue, self._broker_id
            batch = {tp: LeaderAndIsr(me, isr, r.leader_epoch, r.partition_epoch) for tp, (r, isr) in queue.items()}
            proposers = [r for r, _ in queue.values()]  # the replicas of ``batch``, in its order
            queue.clear()
            if broker.config.uses_alter_partition:
                request_id = next(self._alter_requests)
                timeout = broker.scheduler.schedule(
                    broker.config.request_timeout_ms / 1000,
                    lambda: self._alter_partition_done(request_id, batch, proposers, _TIMED_OUT),
                    "alter-partition-timeout",
                )
                self._alter_in_flight = (request_id, timeout)
                broker.send_to_controller(
                    AlterPartitionRequest(self._broker_id, broker.broker_epoch, batch),
                    lambda response: self._alter_partition_done(request_id, batch, proposers, response),
                )
            else:
                self._write_isr(broker, batch)

    def _alter_partition_done(
        self, request_id: int, batch: dict[TopicPartition, LeaderAndIsr], proposers: list[_Replica],
        response: AlterPartitionResponse,
    ) -> None:
        """The answer to ``batch``, proposed by ``proposers`` (a replica deleted since is stopped:
        it no longer leads)."""
        with self.ledger.lock:
            in_flight = self._alter_in_flight
            if in_flight is None or in_flight[0] != request_id:
                return  # answered already (response or timeout), or the broker restarted since
            in_flight[1].cancel()
            self._alter_in_flight = None
            error, results, adopt_isr = response.error, response.partitions, self._adopt_isr
            for (tp, sent), r in zip(batch.items(), proposers):
                if r.role is not _LEADER or r.leader_epoch != sent.leader_epoch or r.pending != sent.isr:
                    continue  # superseded by a LeaderAndIsr
                if error is not Errors.NONE:
                    self._alter_queue[tp] = (r, sent.isr)  # retried, as Kafka's AlterIsrManager does
                    continue
                result = results.get(tp, Errors.UNKNOWN_SERVER_ERROR)
                if isinstance(result, LeaderAndIsr):
                    if result.leader_epoch == r.leader_epoch and result.partition_epoch >= r.partition_epoch:
                        adopt_isr(r, result.isr, result.partition_epoch)
                elif result not in _AWAIT_LEADER_AND_ISR:
                    logger.warning("Broker %d: AlterPartition for %s failed with %s", self._broker_id, tp, result.name)
                    self._drop_proposal(r)
            if self._alter_queue:
                self._schedule_flush(0.0 if response.error is Errors.NONE else ALTER_PARTITION_RETRY_BACKOFF)

    def _write_isr(self, broker: BrokerServices, batch: dict[TopicPartition, LeaderAndIsr]) -> None:
        """Before AlterPartition: conditional writes of the state znodes at the versions the leader
        holds (one bulk write per controller epoch), then a notification for the controller."""
        by_controller_epoch: dict[int, dict[TopicPartition, LeaderAndIsr]] = {}
        for tp, state in batch.items():
            by_controller_epoch.setdefault(self._replicas[tp].controller_epoch, {})[tp] = state
        for controller_epoch, updates in by_controller_epoch.items():
            try:
                result = broker.store.update_partition_states(updates, controller_epoch, MATCH_ANY_VERSION)
            except StoreError as exc:
                logger.warning("Broker %d: cannot write ISR changes: %s", self._broker_id, exc)
                for tp in updates:
                    self._drop_proposal(self._replicas[tp])
                continue
            for tp, written in result.successful.items():
                self._adopt_isr(self._replicas[tp], written.isr, written.partition_epoch)
                self._isr_changes[tp] = None
            for tp in [*result.to_retry, *result.failed]:  # a stale version: wait for LeaderAndIsr
                self._drop_proposal(self._replicas[tp])
            if result.successful:
                self._last_isr_change = broker.scheduler.now()
                self._isr_propagation.arm()



__all__ = [
    "ALTER_PARTITION_RETRY_BACKOFF",
    "AcceptedStates",
    "ISR_CHANGE_PROPAGATION_BLACKOUT",
    "ISR_CHANGE_PROPAGATION_INTERVAL",
    "ISR_CHANGE_PROPAGATION_MAX_DELAY",
    "BrokerServices",
    "DataLossViolation",
    "DataPlaneLedger",
    "Ledger",
    "LeaderLogView",
    "PartitionRecord",
    "ReplicaManager",
    "ReplicaRole",
    "ReplicaSnapshot",
    "SimulatedReplicaManager",
    "common_log_prefix",
]
