"""The simulated data plane in the native engine: the same replication as
:class:`~kctl.broker.replica_manager.SimulatedReplicaManager`, at a native call per request, fetch
round, ISR check or answer instead of Python work per partition.

:class:`NativeDataPlaneLedger` holds one ``kctl._engine.DataPlane`` per cluster: every broker's
replica table (a follower reads its leader's replica directly) and the ledger's per-partition
records. :class:`NativeReplicaManager` is one broker's view of it; it keeps in Python what is cold
or talks to the rest of the broker: the timers (each native call reports the timers it armed, in
the order the Python reference arms them), the AlterPartition requests, the pre-2.7 ISR writes
and their notifications. Same seed, same events: the reference stays the specification
(``tests/broker/test_native_data_plane.py`` runs both).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Sequence

from kctl._engine import DataPlane, PartitionStates
from kctl.broker.replica_manager import (
    _AWAIT_LEADER_AND_ISR,
    _TIMED_OUT,
    ALTER_PARTITION_RETRY_BACKOFF,
    ISR_CHANGE_PROPAGATION_INTERVAL,
    AcceptedStates,
    BrokerServices,
    DataLossViolation,
    ReplicaRole,
    ReplicaSnapshot,
    _Periodic,
    _ReplicaManagerBase,
)
from kctl.errors import Errors, IllegalArgumentError, IllegalStateError, StoreError
from kctl.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    LeaderAndIsrPartitionState,
    StopReplicaPartitionState,
    leader_and_isr_rows,
    stop_replica_rows,
)
from kctl.model import LeaderAndIsr, TopicPartition
from kctl.scheduler import Timer
from kctl.stores.base import MATCH_ANY_VERSION

logger = logging.getLogger(__name__)

_FETCH, _WATCH_ISR, _FLUSH = 0, 1, 2
"""The timers a native call reports it armed: a broker's fetcher, ISR-expiration task, flush."""


class NativeDataPlaneLedger:
    """The native data plane of a simulated cluster, and its I8 bookkeeping (what
    :class:`~kctl.broker.replica_manager.DataPlaneLedger` is to the Python replica managers)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.plane = DataPlane()
        self._managers: dict[int, NativeReplicaManager] = {}
        self._violations: list[DataLossViolation] = []

    def attach(self, broker_id: int, manager: NativeReplicaManager) -> None:
        with self.lock:
            if self._managers.get(broker_id, manager) is not manager:
                raise IllegalStateError(f"another replica manager is attached for broker {broker_id}")
            self._managers[broker_id] = manager

    def detach(self, broker_id: int, manager: NativeReplicaManager) -> None:
        with self.lock:
            if self._managers.get(broker_id) is manager:
                del self._managers[broker_id]

    def replica_manager(self, broker_id: int) -> NativeReplicaManager | None:
        return self._managers.get(broker_id)

    @property
    def violations(self) -> list[DataLossViolation]:
        return self._violations

    @property
    def unclean_elections(self) -> int:
        return self.plane.unclean_elections

    @property
    def truncated_records(self) -> int:
        return self.plane.truncated_records

    def committed_offset(self, tp: TopicPartition) -> int:
        return self.plane.committed_offset(tp)

    def apply(self, effects: list[tuple[int, int]]) -> None:
        """Arm the timers a native call armed, in its order."""
        managers = self._managers
        for kind, broker_id in effects:
            manager = managers[broker_id]
            if kind == _FETCH:
                manager._fetcher.arm()
            elif kind == _WATCH_ISR:
                manager._isr_expiration.arm()
            else:
                manager._schedule_flush(0.0)

    def note_violations(self, found: int) -> None:
        """Keep (and log) the I8 violations the last LeaderAndIsr found."""
        if found:
            for tp, broker_id, leader_epoch, leo, committed in self.plane.violations(len(self._violations)):
                violation = DataLossViolation(tp, broker_id, leader_epoch, leo, committed)
                logger.error("%s", violation)
                self._violations.append(violation)


class NativeReplicaManager(_ReplicaManagerBase):
    """One simulated broker's replica manager in a :class:`NativeDataPlaneLedger` (implements
    :class:`~kctl.broker.replica_manager.ReplicaManager`; the parameters are
    :class:`~kctl.broker.replica_manager.SimulatedReplicaManager`'s)."""

    def __init__(
        self, ledger: NativeDataPlaneLedger, *, fetch_interval: float = 0.5, max_fetch_records: int | None = None
    ) -> None:
        if fetch_interval <= 0 or (max_fetch_records is not None and max_fetch_records < 1):
            raise IllegalArgumentError(
                f"fetch_interval must be > 0 and max_fetch_records >= 1, not {fetch_interval}, {max_fetch_records}"
            )
        self.ledger = ledger
        self.fetch_interval = fetch_interval
        self.max_fetch_records = max_fetch_records
        self._plane = ledger.plane
        self._broker: BrokerServices | None = None
        self._broker_id = -1
        self._fresh = True  # not started yet: no logs of its own
        self._alter_requests = itertools.count(1)
        self._alter_in_flight: tuple[int, Timer] | None = None  # the request awaiting its answer, its timeout
        self._flush_timer: Timer | None = None
        self._isr_changes: dict[TopicPartition, None] = {}
        self._last_isr_change = 0.0
        self._last_isr_propagation = 0.0
        lock = ledger.lock
        self._fetcher = _Periodic("replica-fetcher", self._fetch_round, lock)
        self._isr_expiration = _Periodic("isr-expiration", self._check_isr, lock)
        self._isr_propagation = _Periodic("isr-change-propagation", self._propagate_isr_changes, lock)

    # --- Lifecycle ---------------------------------------------------------------------------------

    def idle(self) -> bool:
        """Nothing in progress (as :meth:`SimulatedReplicaManager.idle`)."""
        with self.ledger.lock:
            if self._alter_in_flight is not None or self._isr_changes:
                return False
            return not self._plane.busy(self._broker_id)

    def startup(self, broker: BrokerServices) -> None:
        with self.ledger.lock:
            if self._broker is not None:
                raise IllegalStateError(f"the replica manager of broker {self._broker_id} is already running")
            self.ledger.attach(broker.broker_id, self)
            self._broker, self._broker_id = broker, broker.broker_id
            self._plane.startup(self._broker_id, self.max_fetch_records, self._fresh)
            self._fresh = False
            now = broker.scheduler.now()
            self._fetcher.start(broker.scheduler, now, self.fetch_interval)
            self._isr_expiration.start(broker.scheduler, now, broker.config.replica_lag_time_max_ms / 2000)
            self._isr_propagation.start(broker.scheduler, now, ISR_CHANGE_PROPAGATION_INTERVAL)
            self._last_isr_change = self._last_isr_propagation = now

    def shutdown(self) -> None:
        with self.ledger.lock:
            broker = self._broker
            if broker is None:
                return
            self.ledger.apply(self._plane.shutdown(self._broker_id, broker.scheduler.now()))
            for task in (self._fetcher, self._isr_expiration, self._isr_propagation):
                task.cancel()
            if self._flush_timer is not None:
                self._flush_timer.cancel()
            if self._alter_in_flight is not None:
                self._alter_in_flight[1].cancel()
            self._flush_timer = self._alter_in_flight = None  # answers to this run's requests are void
            self._isr_changes.clear()
            self.ledger.detach(self._broker_id, self)
            self._broker = None

    # --- Controller decisions ----------------------------------------------------------------------

    def become_leader_or_follower(self, states: Sequence[LeaderAndIsrPartitionState]) -> None:
        """A native payload (the agent's accepted states of the native engine's request) is read
        in place; other states as rows."""
        with self.ledger.lock:
            now = self._running().scheduler.now()
            if type(states) is AcceptedStates and type(states.payload) is PartitionStates:
                effects, violations = self._plane.leader_and_isr_states(self._broker_id, states.payload, states.indices, now)
            else:
                rows = states.rows if type(states) is AcceptedStates else leader_and_isr_rows(states)
                effects, violations = self._plane.leader_and_isr(self._broker_id, rows, now)
            self.ledger.apply(effects)
            self.ledger.note_violations(violations)

    def stop_replicas(self, states: Sequence[StopReplicaPartitionState]) -> None:
        with self.ledger.lock:
            now = self._running().scheduler.now()
            if type(states) is AcceptedStates and type(states.payload) is PartitionStates:
                effects = self._plane.stop_replica_states(self._broker_id, states.payload, states.indices, now)
            else:
                rows = states.rows if type(states) is AcceptedStates else stop_replica_rows(states)
                effects = self._plane.stop_replicas(self._broker_id, rows, now)
            self.ledger.apply(effects)

    def mark_offline(self, partitions: Sequence[TopicPartition]) -> None:
        with self.ledger.lock:
            now = self._running().scheduler.now()
            self.ledger.apply(self._plane.mark_offline(self._broker_id, list(partitions), now))

    # --- Clients and inspection --------------------------------------------------------------------

    def produce(self, tp: TopicPartition, records: int) -> Errors:
        """Append ``records`` records to the leader replica of ``tp``; the error a producer would get."""
        if records < 1:
            raise IllegalArgumentError(f"cannot produce {records} records")
        with self.ledger.lock:
            if self._broker is None:
                return Errors.UNKNOWN_TOPIC_OR_PARTITION
            error, effects = self._plane.produce(self._broker_id, tp, records, self._broker.scheduler.now())
            self.ledger.apply(effects)
            return Errors[error]

    def pause_fetching(self) -> None:
        """Stop every fetcher of this broker (a stuck follower); leaders stop hearing from it."""
        with self.ledger.lock:
            now = self._running().scheduler.now()
            self.ledger.apply(self._plane.pause_fetching(self._broker_id, now))

    def resume_fetching(self) -> None:
        with self.ledger.lock:
            self._running()
            self.ledger.apply(self._plane.resume_fetching(self._broker_id))

    def replica_state(self, tp: TopicPartition) -> ReplicaSnapshot | None:
        with self.ledger.lock:
            state = self._plane.replica_state(self._broker_id, tp)
            if state is None:
                return None
            role, leader, leader_epoch, partition_epoch, isr, pending, leo, hw = state
            return ReplicaSnapshot(
                tp, None if role is None else ReplicaRole(role), leader, leader_epoch, partition_epoch,
                tuple(isr), None if pending is None else tuple(pending), leo, hw,
            )

    def metrics(self) -> dict[str, float]:
        """Kafka's ``ReplicaManager`` metrics of this broker (as :meth:`SimulatedReplicaManager.metrics`)."""
        with self.ledger.lock:
            led, hosted, under_replicated, offline, expands, shrinks = self._plane.metrics(self._broker_id)
            return {
                "LeaderCount": led,
                "PartitionCount": hosted,
                "UnderReplicatedPartitions": under_replicated,
                "OfflineReplicaCount": offline,
                "IsrExpands": expands,
                "IsrShrinks": shrinks,
            }

    def hosted_partitions(self) -> list[TopicPartition]:
        """Partitions with a local log, in the order they were first hosted."""
        with self.ledger.lock:
            return self._plane.hosted_partitions(self._broker_id)

    def lose_records(self, tp: TopicPartition, offset: int) -> None:
        """Fault injection: this broker's log of ``tp`` silently loses its records from ``offset``
        on (a disk that lies), unknown to everyone: what invariant I8 exists to catch."""
        with self.ledger.lock:
            self._plane.lose_records(self._broker_id, tp, offset)

    # --- Periodic tasks ----------------------------------------------------------------------------

    def _fetch_round(self) -> bool:
        broker = self._broker
        if broker is None:
            return False
        more, effects = self._plane.fetch_round(self._broker_id, broker.scheduler.now())
        self.ledger.apply(effects)
        return more

    def _check_isr(self) -> bool:
        broker = self._broker
        if broker is None:
            return False
        max_lag = broker.config.replica_lag_time_max_ms / 1000
        more, effects = self._plane.check_isr(self._broker_id, broker.scheduler.now(), max_lag)
        self.ledger.apply(effects)
        return more

    # --- Reporting ISR changes ---------------------------------------------------------------------

    def _flush(self) -> None:
        with self.ledger.lock:
            self._flush_timer = None
            broker = self._broker
            if broker is None or self._alter_in_flight is not None:
                return
            uses_alter_partition = broker.config.uses_alter_partition
            batch, controller_epochs = self._plane.flush(self._broker_id, uses_alter_partition)
            if not batch:
                return
            if uses_alter_partition:
                request_id = next(self._alter_requests)
                timeout = broker.scheduler.schedule(
                    broker.config.request_timeout_ms / 1000,
                    lambda: self._alter_partition_done(request_id, _TIMED_OUT),
                    "alter-partition-timeout",
                )
                self._alter_in_flight = (request_id, timeout)
                broker.send_to_controller(
                    AlterPartitionRequest(self._broker_id, broker.broker_epoch, batch),
                    lambda response: self._alter_partition_done(request_id, response),
                )
            else:
                self._write_isr(broker, batch, controller_epochs)

    def _alter_partition_done(self, request_id: int, response: AlterPartitionResponse) -> None:
        with self.ledger.lock:
            in_flight = self._alter_in_flight
            if in_flight is None or in_flight[0] != request_id:
                return  # answered already (response or timeout), or the broker restarted since
            in_flight[1].cancel()
            self._alter_in_flight = None
            results = response.partitions if response.error is Errors.NONE else None
            failed, queued, effects = self._plane.alter_partition_done(
                self._broker_id, results, _AWAIT_LEADER_AND_ISR
            )
            self.ledger.apply(effects)
            for tp in failed:
                error = response.partitions.get(tp, Errors.UNKNOWN_SERVER_ERROR)
                logger.warning("Broker %d: AlterPartition for %s failed with %s", self._broker_id, tp,
                               error.name if isinstance(error, Errors) else error)
            if queued:
                self._schedule_flush(0.0 if response.error is Errors.NONE else ALTER_PARTITION_RETRY_BACKOFF)

    def _write_isr(
        self, broker: BrokerServices, batch: dict[TopicPartition, LeaderAndIsr], controller_epochs: list[int]
    ) -> None:
        """Before AlterPartition: conditional writes of the state znodes at the versions the leader
        holds (one bulk write per controller epoch), then a notification for the controller."""
        by_controller_epoch: dict[int, dict[TopicPartition, LeaderAndIsr]] = {}
        for (tp, state), controller_epoch in zip(batch.items(), controller_epochs):
            by_controller_epoch.setdefault(controller_epoch, {})[tp] = state
        for controller_epoch, updates in by_controller_epoch.items():
            outcomes: list[tuple[TopicPartition, tuple[tuple[int, ...], int] | None]]
            try:
                result = broker.store.update_partition_states(updates, controller_epoch, MATCH_ANY_VERSION)
            except StoreError as exc:
                logger.warning("Broker %d: cannot write ISR changes: %s", self._broker_id, exc)
                self.ledger.apply(self._plane.isr_written(self._broker_id, [(tp, None) for tp in updates]))
                continue
            outcomes = [(tp, (written.isr, written.partition_epoch)) for tp, written in result.successful.items()]
            outcomes += [(tp, None) for tp in [*result.to_retry, *result.failed]]  # a stale version: wait for LeaderAndIsr
            self.ledger.apply(self._plane.isr_written(self._broker_id, outcomes))
            for tp in result.successful:
                self._isr_changes[tp] = None
            if result.successful:
                self._last_isr_change = broker.scheduler.now()
                self._isr_propagation.arm()



__all__ = ["NativeDataPlaneLedger", "NativeReplicaManager"]
