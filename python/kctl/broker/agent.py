"""A broker as the controller sees it: registration, the controller requests, controlled shutdown.

:class:`BrokerAgent` is the control plane of one broker process (Kafka's KafkaServer and
KafkaApis for LeaderAndIsr, UpdateMetadata and StopReplica, reference §6.12, §6.14, §6.15). It
registers the ephemeral broker znode (whose czxid is the broker epoch), fences requests from stale
controllers and for stale broker or leader epochs (invariant I5), keeps a metadata cache, and hands
the decisions that pass to its replica manager — the simulated one by default, or any
:class:`~kctl.broker.replica_manager.ReplicaManager`.

All timing goes through the injected scheduler, so a simulated run is reproducible from its seed;
in real-time mode requests arrive on the scheduler's thread while the caller's thread starts, kills
or shuts the broker down, so the agent's state is guarded by one lock.
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import kctl.native  # noqa: F401  # binds the classes HostedPartitions' answers are made of
from kctl._engine import HostedPartitions
from kctl.broker.metadata_cache import BrokerMetadataCache
from kctl.broker.replica_manager import AcceptedStates, Ledger, ReplicaManager, SimulatedReplicaManager
from kctl.config import ControllerConfig
from kctl.errors import Errors, IllegalArgumentError, IllegalStateError, StaleControllerEpochError, StoreError
from kctl.model import (
    MAX_PORT,
    UNKNOWN_BROKER_EPOCH,
    BrokerInfo,
    EndPoint,
    TopicPartition,
    validate_int,
)
from kctl.messages import (
    BrokerToControllerRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataFanOut,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    built_request,
    controller_error_response,
    leader_and_isr_rows,
    stop_replica_rows,
)
from kctl.scheduler import Scheduler
from kctl.stores.base import StateStore
from kctl.transports.base import Transport, answers_fan_outs

logger = logging.getLogger(__name__)

T = TypeVar("T")

UNKNOWN_CONTROLLER = -1
"""The controller id a broker sends to when it knows of none (the transport answers NOT_CONTROLLER)."""


@dataclass(frozen=True)
class HandledRequest:
    """One controller request a broker answered, and when (scheduler seconds); ``broker_epoch`` is
    the epoch of the process that answered (each restart has a larger one)."""

    time: float
    request: ControllerRequest
    response: ControllerResponse
    broker_epoch: int = UNKNOWN_BROKER_EPOCH


UPDATE_METADATA_ACCEPTED = UpdateMetadataResponse(Errors.NONE)
"""The answer to an accepted UpdateMetadata (immutable, so shared by every broker)."""


class BrokerStore(StateStore, Protocol):
    """A store session a broker process can lose and replace (``MemoryStore`` is one)."""

    def expire_session(self) -> None:
        """Expire the session as ZooKeeper does when the process stops heart-beating."""

    def new_session(self) -> BrokerStore:
        """Another session on the same ensemble (the next process)."""


class BrokerAgent:
    """One broker process: its registration, its answers to the controller, its data plane.

    :param store: the broker's own store session (``MemoryStore(tree)`` or ``store.new_session()``);
        :meth:`restart` opens the next one with ``store.new_session()``.
    :param config: the broker's properties (``controlled.shutdown.*``, ``replica.lag.time.max.ms``,
        ``inter.broker.protocol.version`` …), a :class:`ControllerConfig` or a mapping of names.
    :param port: the port it registers (default ``9092 + broker_id``).
    :param security_protocol: its listener's (``PLAINTEXT``, or ``SSL`` over TLS), also the
        listener's name in the registration, as Kafka names its default listeners.
    :param replica_manager: the data plane; a :class:`SimulatedReplicaManager` on ``ledger`` by default.
    :param ledger: shared by the simulated replica managers of one cluster (followers find their
        leaders through it); only for the default replica manager.
    :param on_answer: called with each answered controller request, in order, under the agent's
        lock (a broker process logs them).
    :param keep_answers: record every answer in ``handled``; a long-running broker process passes
        False, since the record would grow with every request it ever answers. ``"notable"``
        keeps only :attr:`notable` and counts the others (:attr:`answer_count`), ``handled``
        being refused: a long simulation answers millions of UpdateMetadata requests.

    ``handled`` records every controller request answered, with its response and time, across
    restarts (for tests and invariant checks).
    """

    def __init__(
        self,
        broker_id: int,
        store: BrokerStore,
        transport: Transport,
        scheduler: Scheduler,
        config: ControllerConfig | Mapping[str, Any] | None = None,
        *,
        rack: str | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        security_protocol: str = "PLAINTEXT",
        replica_manager: ReplicaManager | None = None,
        ledger: Ledger | None = None,
        on_answer: Callable[[HandledRequest], None] | None = None,
        keep_answers: bool | Literal["notable"] = True,
    ) -> None:
        if replica_manager is not None and ledger is not None:
            raise IllegalArgumentError("pass the ledger to the replica manager, not to the agent")
        validate_int("broker id", broker_id, 0)
        if port is None:  # a simulated broker's listener: 9092 + id, kept a valid port for any id
            port = 9092 + broker_id % (MAX_PORT - 9092 + 1)
        validate_int("port", port, 0, MAX_PORT)
        self.broker_id = broker_id
        self.transport = transport
        self.scheduler = scheduler
        self.config = ControllerConfig.coerce(config)
        self.info = BrokerInfo(broker_id, (EndPoint(host, port, security_protocol, security_protocol),), rack)
        self.replica_manager: ReplicaManager = (
            replica_manager if replica_manager is not None else SimulatedReplicaManager(ledger)
        )
        self._answers: list[HandledRequest | UpdateMetadataRequest | UpdateMetadataFanOut] = []
        """``handled``, with each accepted UpdateMetadata that is not notable kept as its request
        (or fan-out) alone until ``handled`` is read, its time and broker epoch in
        ``_answered_at`` and ``_answered_by`` at its index: a reassignment's fan-outs make
        millions, and a tuple each kept the garbage collector busy."""
        self._answered_at = array("d")
        self._answered_by = array("q")
        self._built = 0  # _answers[:_built] are all HandledRequests
        self.notable: list[HandledRequest] = []
        """The answers in ``handled`` other than an UpdateMetadata accepted from the controller
        epoch that the answering process last accepted a request of (from an older one on): the
        ones that can change what a broker leads or break invariant I5, which the leadership
        replay of ``kctl sim`` and the I5 check read (a reassignment's fan-outs are answered
        millions of times with the others)."""
        self._accepted: tuple[int, int] = (UNKNOWN_BROKER_EPOCH, -1)  # (process, controller epoch) for notable
        self._on_answer = on_answer
        self._keep_answers = keep_answers is True
        self._keep_notable = keep_answers is not False
        self._unkept = 0  # answers not in _answers (with keep_answers="notable")
        self._store = store
        self._lock = threading.RLock()
        self._incarnation = 0  # bumped when the process starts or stops: older timers and callbacks are void
        self._running = False
        self._shutdown: Future[bool] | None = None
        self._attempt = 0
        self._reset()

    def _reset(self) -> None:
        """What a broker process holds in memory, as a fresh process has it."""
        self.broker_epoch = UNKNOWN_BROKER_EPOCH
        self.cluster_id: str | None = None
        """``/cluster/id``, read (or created, by the first broker) at start-up."""
        self.metadata_cache = BrokerMetadataCache()
        self._controller_epoch = -1  # the highest controller epoch seen
        self._hosted = HostedPartitions()  # leader epochs, and the partitions on a failed log directory
        self._log_dir_failed = False

    @property
    def handled(self) -> list[HandledRequest]:
        """Every controller request answered, in order (see the class)."""
        with self._lock:
            if self._keep_notable and not self._keep_answers:
                raise IllegalStateError(f"broker {self.broker_id} keeps only its notable answers (keep_answers='notable')")
            answers, times, processes = self._answers, self._answered_at, self._answered_by
            for i in range(self._built, len(answers)):
                answer = answers[i]
                if not isinstance(answer, HandledRequest):
                    request = built_request(answer, self.broker_id)
                    answers[i] = HandledRequest(times[i], request, UPDATE_METADATA_ACCEPTED, processes[i])
            self._built = len(answers)
            return answers  # type: ignore[return-value]  # every entry built above

    @property
    def answer_count(self) -> int:
        """``len(handled)``, without building the records."""
        return len(self._answers) + self._unkept

    def _keep(self, now: float, answer: HandledRequest | UpdateMetadataRequest | UpdateMetadataFanOut, process: int) -> None:
        """Add to ``handled`` (an accepted UpdateMetadata as its request: see ``_answers``)."""
        self._answers.append(answer)
        self._answered_at.append(now)
        self._answered_by.append(process)

    @property
    def store(self) -> BrokerStore:
        return self._store

    @property
    def is_running(self) -> bool:
        return self._running

    def idle(self) -> bool:
        """No controlled shutdown in progress and, for a replica manager that can tell, no data-plane
        work in progress (a stopped broker is idle)."""
        if not self._running:
            return True
        if self._shutdown is not None and not self._shutdown.done():
            return False
        idle = getattr(self.replica_manager, "idle", None)
        return True if idle is None else bool(idle())

    def metrics(self) -> dict[str, float]:
        """Kafka's broker metrics as far as this broker has them: ``BrokerState`` (Kafka's numbers:
        3 running, 6 in a controlled shutdown, 0 stopped) and its replica manager's, when it keeps any."""
        with self._lock:
            if not self._running:
                state = 0
            else:
                state = 6 if self._shutdown is not None and not self._shutdown.done() else 3
        replica_metrics = getattr(self.replica_manager, "metrics", None)
        return {"BrokerState": state, **(replica_metrics() if replica_metrics is not None else {})}

    def inspect(self, read: Callable[[BrokerAgent], T]) -> T:
        """``read(self)`` under the agent's lock: what another thread sees of the broker is never
        a request half-applied."""
        with self._lock:
            return read(self)

    def leader_epoch(self, tp: TopicPartition) -> int | None:
        """The leader epoch this broker holds for ``tp`` (None: not hosted or offline)."""
        return self._hosted.leader_epoch(tp)

    # --- Lifecycle ---------------------------------------------------------------------------------

    def startup(self) -> int:
        """Start the process: read the cluster id (Kafka's ``getOrGenerateClusterId``: created by
        the first broker; an unreadable one stops the start-up with its error), serve the
        controller, start the replica manager, then register the ephemeral broker znode. Returns
        the broker epoch."""
        with self._lock:
            if self._running:
                raise IllegalStateError(f"broker {self.broker_id} is already running")
            self.cluster_id = self._store.get_or_create_cluster_id()
            self._running = True
            self._incarnation += 1
            self._shutdown = None
            self.transport.bind_broker(self.broker_id, self.handle_request)
            self.replica_manager.startup(self)
            try:
                self.broker_epoch = self._store.register_broker(self.info)
            except BaseException:
                self._stop(False)
                raise
            logger.info("Broker %d registered with epoch %d", self.broker_id, self.broker_epoch)
            return self.broker_epoch

    def reregister(self) -> int:
        """Register again after the store session expired and a new one began (Kafka re-creates
        its broker znode on every new ZooKeeper session); returns the new, larger broker epoch.
        The process keeps its state: the controller treats it as a bounced broker."""
        with self._lock:
            if not self._running:
                raise IllegalStateError(f"broker {self.broker_id} is not running")
            self.broker_epoch = self._store.register_broker(self.info)
            logger.info("Broker %d re-registered with epoch %d", self.broker_id, self.broker_epoch)
            return self.broker_epoch

    def kill(self) -> None:
        """Crash the process: it stops answering, its data plane stops, its session expires (the
        broker znode disappears) and its client goes with the process. A controlled shutdown in
        progress completes with False."""
        with self._lock:
            if not self._running:
                return
            self._stop(False)
            self._store.expire_session()
            self._store.close()

    def restart(self) -> int:
        """Start again on a fresh store session after :meth:`kill` or :meth:`shutdown`; the new
        registration has a larger broker epoch."""
        with self._lock:
            if self._running:
                raise IllegalStateError(f"broker {self.broker_id} is running; kill or shut it down first")
            self._store = self._store.new_session()
            self._reset()
            return self.startup()

    def shutdown(self) -> Future[bool]:
        """Stop the process; with ``controlled.shutdown.enable`` first ask the controller to move
        leadership away, up to ``controlled.shutdown.max.retries`` times, waiting
        ``controlled.shutdown.retry.backoff.ms`` between attempts, and stop anyway after the last.
        The future completes when the broker has stopped, with whether the controlled shutdown
        succeeded."""
        with self._lock:
            if self._shutdown is not None:
                return self._shutdown
            future: Future[bool] = Future()
            self._shutdown = future
            if not self._running:
                future.set_result(False)
            elif self.config.controlled_shutdown_enable and self.config.controlled_shutdown_max_retries > 0:
                self._attempt_controlled_shutdown(self.config.controlled_shutdown_max_retries)
            else:
                self._finish_shutdown(False)
            return future

    def _attempt_controlled_shutdown(self, attempts_left: int) -> None:
        self._attempt += 1
        attempt, incarnation = self._attempt, self._incarnation

        def done(response: ControlledShutdownResponse | None) -> None:
            with self._lock:
                if attempt != self._attempt or incarnation != self._incarnation:
                    return  # answered already (response or timeout), or the broker stopped
                self._attempt += 1
                timeout.cancel()
                if response is not None and response.error is Errors.NONE and not response.remaining_partitions:
                    self._finish_shutdown(True)
                    return
                logger.info("Broker %d: controlled shutdown attempt failed: %s", self.broker_id, response)
                if attempts_left > 1:
                    self.scheduler.schedule(
                        self.config.controlled_shutdown_retry_backoff_ms / 1000,
                        lambda: self._retry_controlled_shutdown(incarnation, attempts_left - 1),
                        "controlled-shutdown-backoff",
                    )
                else:
                    logger.warning("Broker %d: controlled shutdown failed; shutting down anyway", self.broker_id)
                    self._finish_shutdown(False)

        timeout = self.scheduler.schedule(
            self.config.request_timeout_ms / 1000, lambda: done(None), "controlled-shutdown-timeout"
        )
        self.send_to_controller(ControlledShutdownRequest(self.broker_id, self.broker_epoch), done)

    def _retry_controlled_shutdown(self, incarnation: int, attempts_left: int) -> None:
        with self._lock:
            if incarnation == self._incarnation:
                self._attempt_controlled_shutdown(attempts_left)

    def _finish_shutdown(self, controlled: bool) -> None:
        self._stop(controlled)
        self._store.close()
        logger.info("Broker %d shut down (controlled: %s)", self.broker_id, controlled)

    def _stop(self, controlled: bool) -> None:
        self._running = False
        self._incarnation += 1
        self.transport.unbind_broker(self.broker_id)
        self.replica_manager.shutdown()
        if self._shutdown is not None and not self._shutdown.done():
            self._shutdown.set_result(controlled)

    # --- Broker → controller -----------------------------------------------------------------------

    def controller_id(self) -> int | None:
        """The controller named by the metadata cache, else the one registered in the store."""
        if self.metadata_cache.controller_id is not None:
            return self.metadata_cache.controller_id
        try:
            return self._store.get_controller_id()
        except StoreError:
            return None

    def send_to_controller(self, request: BrokerToControllerRequest, callback: Callable[[Any], None]) -> None:
        controller_id = self.controller_id()
        self.transport.send_to_controller(
            UNKNOWN_CONTROLLER if controller_id is None else controller_id, request, callback
        )

    # --- Log directories ---------------------------------------------------------------------------

    def fail_log_dir(self, partitions: Iterable[TopicPartition]) -> str:
        """Simulate the failure of the log directory holding ``partitions``: their replicas go
        offline and the broker announces it with a log-dir event notification (reference §6.14).
        Returns the notification's name."""
        with self._lock:
            if not self._running:
                raise IllegalStateError(f"broker {self.broker_id} is not running")
            lost = list(dict.fromkeys(partitions))
            self._log_dir_failed = True
            self._hosted.mark_offline(lost)
            self.replica_manager.mark_offline(lost)
            return self._store.create_log_dir_event_notification(self.broker_id)

    # --- Controller → broker -----------------------------------------------------------------------

    @answers_fan_outs
    def handle_request(self, sent: ControllerRequest | UpdateMetadataFanOut) -> ControllerResponse:
        """Answer a controller request (the transport's BrokerHandler) and record it; an
        UpdateMetadata fan-out is answered as its request for this broker, built only when the
        answer takes more than the short path (or ``handled`` is read)."""
        with self._lock:
            if not self._running:  # it crashed while the request was on the way: the send fails
                raise IllegalStateError(f"broker {self.broker_id} is not running")
            if type(sent) is UpdateMetadataFanOut or type(sent) is UpdateMetadataRequest:  # one per partition change and broker
                process, epoch = self.broker_epoch, sent.controller_epoch
                broker_epoch = (sent.broker_epochs.get(self.broker_id, UNKNOWN_BROKER_EPOCH)
                                if isinstance(sent, UpdateMetadataFanOut) else sent.broker_epoch)
                if (epoch == self._controller_epoch and self._on_answer is None and self._accepted == (process, epoch)
                        and not process > broker_epoch != UNKNOWN_BROKER_EPOCH):
                    # Nearly all of them, answered in short: _fenced would pass them (the epochs
                    # are those last accepted) and the answer is not notable (see _note).
                    self.metadata_cache.update(sent)
                    if self._keep_answers:
                        self._keep(self.scheduler.now(), sent, process)
                    else:
                        self._unkept += self._keep_notable
                    return UPDATE_METADATA_ACCEPTED
            request = built_request(sent, self.broker_id)
            if isinstance(request, UpdateMetadataRequest):
                response: ControllerResponse = self._update_metadata(request)
            elif isinstance(request, LeaderAndIsrRequest):
                response = self._leader_and_isr(request)
            elif isinstance(request, StopReplicaRequest):
                response = self._stop_replica(request)
            else:
                raise IllegalArgumentError(f"broker {self.broker_id} cannot handle {request!r}")
            now, process = self.scheduler.now(), self.broker_epoch
            if (response is UPDATE_METADATA_ACCEPTED and type(request) is UpdateMetadataRequest
                    and self._on_answer is None and self._accepted == (process, request.controller_epoch)):
                if self._keep_answers:  # most answers, and not notable (see _note)
                    self._keep(now, request, process)
                else:
                    self._unkept += self._keep_notable
                return response
            handled = HandledRequest(now, request, response, process)
            if self._keep_answers:
                self._keep(now, handled, process)
                self._note(handled)
            elif self._keep_notable:
                self._unkept += 1
                self._note(handled)
            if self._on_answer is not None:
                self._on_answer(handled)
            return response

    def _note(self, handled: HandledRequest) -> None:
        """Keep ``handled`` in :attr:`notable` unless it is an UpdateMetadata accepted from the
        controller epoch the process last accepted (tracked as the I5 check tracks it)."""
        request, accepted = handled.request, handled.response.error is Errors.NONE
        process, epoch = handled.broker_epoch, request.controller_epoch
        if not (accepted and type(request) is UpdateMetadataRequest and self._accepted == (process, epoch)):
            self.notable.append(handled)
        if accepted and (self._accepted[0] != process or epoch >= self._accepted[1]):
            self._accepted = (process, epoch)

    def _fenced(self, request: ControllerRequest) -> Errors:
        """KafkaApis' checks, in its order: a stale broker epoch (-1 always passes), then a
        controller epoch older than the highest seen; the latter becomes the highest seen.

        Unlike Kafka, a controller epoch higher than the highest seen must also not be ahead of
        ``/controller_epoch``: every controller writes its epoch there before sending, so only a
        forged request is ahead, and accepting it would make the broker refuse its real controller
        for good. That costs one store read per new controller epoch, not per request."""
        if request.broker_epoch != UNKNOWN_BROKER_EPOCH and request.broker_epoch < self.broker_epoch:
            logger.info("Broker %d: %s with stale broker epoch %d (current %d)", self.broker_id,
                        request.api, request.broker_epoch, self.broker_epoch)
            return Errors.STALE_BROKER_EPOCH
        if request.controller_epoch < self._controller_epoch:
            logger.warning("Broker %d: %s from controller %d with stale controller epoch %d (latest %d)",
                           self.broker_id, request.api, request.controller_id, request.controller_epoch,
                           self._controller_epoch)
            return Errors.STALE_CONTROLLER_EPOCH
        if request.controller_epoch > self._controller_epoch:
            self._check_controller_epoch_is_stored(request)
        self._controller_epoch = request.controller_epoch
        return Errors.NONE

    def _check_controller_epoch_is_stored(self, request: ControllerRequest) -> None:
        """Refuse a controller epoch ahead of ``/controller_epoch`` by raising, so that the request
        is not answered: a real controller whose epoch this broker's store session does not show
        yet (a ZooKeeper server lagging behind the ensemble) sends it again, as after a lost
        connection, and a forged request changes nothing."""
        stored = self._store.get_controller_epoch()
        stored_epoch = -1 if stored is None else stored[0]
        if request.controller_epoch > stored_epoch:
            message = (f"Broker {self.broker_id}: refused {request.api} from controller {request.controller_id}: its "
                       f"controller epoch {request.controller_epoch} is ahead of /controller_epoch ({stored_epoch})")
            logger.warning(message)
            raise StaleControllerEpochError(message)

    def _leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        error = self._fenced(request)
        if error is not Errors.NONE:
            return controller_error_response(request, error)
        # Thousands of partitions when a broker starts or a topic is created: checked natively in
        # one call (ReplicaManager.becomeLeaderOrFollower's checks); the replica manager reads the accepted.
        states = request.partition_states
        indices, errors = self._hosted.become_leader_or_follower(states, self.broker_id, self._log_dir_failed)
        self.replica_manager.become_leader_or_follower(AcceptedStates(states, indices, leader_and_isr_rows))
        return LeaderAndIsrResponse(Errors.NONE, errors)

    def _update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        error = self._fenced(request)
        if error is not Errors.NONE:
            return UpdateMetadataResponse(error)
        self.metadata_cache.update(request)
        return UPDATE_METADATA_ACCEPTED

    def _stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        error = self._fenced(request)
        if error is not Errors.NONE:
            return controller_error_response(request, error)
        states = request.partition_states  # thousands when a broker shuts down
        indices, errors = self._hosted.stop_replicas(states)  # ReplicaManager.stopReplicas' checks
        self.replica_manager.stop_replicas(AcceptedStates(states, indices, stop_replica_rows))
        return StopReplicaResponse(Errors.NONE, errors)


__all__ = ["UNKNOWN_CONTROLLER", "BrokerAgent", "BrokerStore", "HandledRequest"]
