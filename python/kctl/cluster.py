"""A whole cluster in one process: controller candidates, broker agents, store and transport.

``EmbeddedCluster`` is what ``kctl demo``, ``kctl sim``, the benchmark fleets and most tests run on.
By default it is simulated: one :class:`~kctl.scheduler.SimulatedScheduler` drives every component
on a virtual clock, so a run is reproducible bit for bit from its seed and a minute of cluster time
passes as fast as the work allows. With ``simulated=False`` the same components run on threads and
the wall clock.

Controller candidates run beside brokers with the same ids (as in Kafka, where every broker hosts a
candidate): killing a broker kills its candidate too. :meth:`EmbeddedCluster.kill_controller`
crashes only the active controller, and a fresh candidate replaces it once another has taken over.

In real time, every public method may be called from any thread: what reads a controller's state
runs on that controller's event thread, between two of its events (as everything a Kafka
controller does is an event), what reads a broker's state holds the broker's lock, and starting or
stopping brokers and controllers is serialised.
"""

from __future__ import annotations

import itertools
import os
import operator
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kctl import admin
from kctl.broker import BrokerAgent, DataPlaneLedger, ExpectedMetadata, MetadataSnapshot, SimulatedReplicaManager
from kctl.broker.native_data_plane import NativeDataPlaneLedger, NativeReplicaManager
from kctl.config import ControllerConfig
from kctl.engine_api import default_engine
from kctl.controller import KafkaController
from kctl.errors import IllegalArgumentError, IllegalStateError, KctlError, UnknownTopicOrPartitionError
from kctl.model import NO_LEADER, ReplicaAssignment, TopicPartition, validate_int, validate_partition_id
from kctl.plugins import PluginHost, get_plugin_host
from kctl.messages import ControllerRequest, Outgoing, built_request, send_all
from kctl.scheduler import (
    RealTimeScheduler,
    Scheduler,
    SimulatedScheduler,
    check_duration,
    hold_young_collections,
    young_collections_only,
)
from kctl.statechange import KeptLines
from kctl.stores.base import StateStore
from kctl.stores.memory import MemoryTree, PartitionSnapshot

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from kctl.tools.status import ClusterStatus

T = TypeVar("T")

DEFAULT_TIMEOUT = 120.0
"""Seconds (virtual when simulated) an operation may take before the cluster gives up on it."""
MAX_BROKERS = 10_000
"""The most brokers a cluster may have: each is a broker agent with its own session, and every
broadcast reaches all of them (5,000 brokers take about a second per operation)."""


DATA_PLANES = ("native", "python")
"""The simulated data planes an :class:`EmbeddedCluster` can run (``data_plane=``, ``KCTL_DATA_PLANE``)."""


def data_plane_name(name: str | None) -> str:
    """The data plane ``name`` chooses: itself, else ``KCTL_DATA_PLANE``, else the native one."""
    chosen = name or os.environ.get("KCTL_DATA_PLANE") or "native"
    if chosen not in DATA_PLANES:
        raise IllegalArgumentError(f"data plane {chosen!r} is not one of {', '.join(DATA_PLANES)}")
    return chosen


def check_broker_count(count: int) -> None:
    """Refuse a cluster of more than :data:`MAX_BROKERS` brokers, before anything is built."""
    if count > MAX_BROKERS:
        raise IllegalArgumentError(f"a cluster has at most {MAX_BROKERS} brokers, got {count}")


@dataclass(frozen=True)
class PartitionDescription:
    """One partition as ``kafka-topics --describe`` shows it, plus its controller state."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    isr: tuple[int, ...]
    state: str


@dataclass(frozen=True)
class SentRecord:
    """A controller request as it left the controller (at ``time`` on the cluster clock)."""

    time: float
    controller: int
    broker: int
    request: ControllerRequest


class _SentLog:
    """What the controllers sent, in order, with each fan-out kept as one entry (its time, its
    controller, its brokers and what it handed them) until the records are read: a reassignment at
    50 brokers sends over a million UpdateMetadata requests, whose records (:class:`SentRecord`),
    and the requests themselves (:meth:`~kctl.messages.UpdateMetadataFanOut.request`), are built
    only if someone reads them, once. An UpdateMetadata fan-out hands every broker the same object,
    kept once: not as a tuple per broker, which the garbage collector would walk (a rolling
    restart of 100 brokers sends 700K).

    Without ``keep`` (a cluster made with ``record_requests=False``) only how many requests of each
    API were sent, in order, is kept (runs of one API): a simulation of 1M partitions sends
    millions, whose entries and fan-outs nothing reads."""

    def __init__(self, keep: bool = True) -> None:
        self._lock = threading.Lock()  # sends on the scheduler's thread, reads on the caller's
        self._keep = keep
        self._records: list[SentRecord] = []
        # Sent after every record: (time, controller, brokers, requests), ``requests`` being the
        # one object every broker was handed, or a list of each broker's.
        self._fan_outs: list[tuple[float, int, list[int], Any]] = []
        self._runs: list[list[Any]] = []  # without keep: [api, requests] in order, one per run of an API
        self.count = 0

    def add(self, record: SentRecord) -> None:
        with self._lock:
            if not self._keep:
                self._counted([record.request.api])
            elif self._fan_outs:
                self._fan_outs.append((record.time, record.controller, [record.broker], record.request))
            else:
                self._records.append(record)
            self.count += 1

    def add_fan_out(self, time: float, controller: int, outgoing: list[Outgoing]) -> None:
        with self._lock:
            requests = list(map(_REQUEST, outgoing))
            if self._keep:
                shared = len(set(map(id, requests))) == 1
                self._fan_outs.append((time, controller, list(map(_BROKER, outgoing)), requests[0] if shared else requests))
            else:
                self._counted(map(_API, requests))
            self.count += len(outgoing)

    def _counted(self, apis: Iterable[str]) -> None:
        runs = self._runs
        for api, run in itertools.groupby(apis):
            if runs and runs[-1][0] == api:
                runs[-1][1] += len(list(run))
            else:
                runs.append([api, len(list(run))])

    def records(self) -> list[SentRecord]:
        with self._lock:
            if not self._keep:
                raise IllegalStateError("the requests sent are not recorded: "
                                        "make the cluster with EmbeddedCluster(record_requests=True)")
            for time, controller, brokers, requests in self._fan_outs:
                each = requests if type(requests) is list else itertools.repeat(requests)
                self._records.extend([SentRecord(time, controller, broker, built_request(request, broker))
                                      for broker, request in zip(brokers, each)])
            self._fan_outs.clear()
            return list(self._records)

    def apis(self, start: int) -> Counter[str]:
        """How many requests of each API were sent from the ``start``-th on, without the records."""
        with self._lock:
            if not self._keep:
                return self._counted_apis(start)
            apis = Counter(r.request.api for r in self._records[start:])
            position = len(self._records)
            for _, _, brokers, requests in self._fan_outs:
                skipped = max(start - position, 0)
                if len(brokers) > skipped:
                    if type(requests) is list:
                        apis.update(map(_API, requests[skipped:]))  # in C: a reassignment sends millions
                    else:
                        apis[requests.api] += len(brokers) - skipped
                position += len(brokers)
            return apis

    def _counted_apis(self, start: int) -> Counter[str]:
        apis: Counter[str] = Counter()
        position = 0
        for api, requests in self._runs:
            if position + requests > start:
                apis[api] += requests - max(start - position, 0)
            position += requests
        return apis


_BROKER, _REQUEST, _API = operator.itemgetter(0), operator.itemgetter(1), operator.attrgetter("api")


class _RecordingChannel:
    """Wraps a controller's channel to keep a log of everything it sends."""

    def __init__(self, inner: Any, controller_id: int, cluster: EmbeddedCluster) -> None:
        self._inner, self._controller_id = inner, controller_id
        self._log, self._now = cluster._sent, cluster.scheduler.now

    def send_request(self, broker_id: int, request: ControllerRequest, callback: Any) -> None:
        self._log.add(SentRecord(self._now(), self._controller_id, broker_id, request))
        self._inner.send_request(broker_id, request, callback)

    def send_requests(self, outgoing: list[Outgoing]) -> None:
        self._log.add_fan_out(self._now(), self._controller_id, outgoing)
        send_all(self._inner, outgoing)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _RecordingTransport:
    def __init__(self, inner: Any, cluster: EmbeddedCluster) -> None:
        self._inner, self._cluster = inner, cluster

    def idle(self) -> bool:
        """The transport's (asked between every two instants of a simulation: no ``__getattr__``)."""
        return bool(self._inner.idle())

    def controller_channel(self, controller_id: int) -> Any:
        return _RecordingChannel(self._inner.controller_channel(controller_id), controller_id, self._cluster)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Resigned(Exception):
    """The controller a read was meant for is no longer active."""


class EmbeddedCluster:
    """A cluster of ``brokers`` brokers (ids 1…N) with controller candidates on the first few.

    Simulated (the default), the cluster runs only inside its own calls, on the caller's thread.
    In real time (``simulated=False``) the components run on threads of their own and every public
    method is safe to call from any thread, concurrently: reads of a controller's state run on its
    event thread (:meth:`KafkaController.inspect`), reads of a broker's under its lock, and
    brokers and controllers start and stop one at a time.
    """

    def __init__(
        self,
        brokers: int | Sequence[int] = 3,
        racks: Sequence[str] | Mapping[int, str] | None = None,
        config: ControllerConfig | Mapping[str, Any] | None = None,
        engine: str | None = None,
        store: str = "memory",
        transport: str = "inprocess",
        seed: int = 0,
        simulated: bool = True,
        *,
        controllers: int | Sequence[int] = 3,
        record_history: bool = True,
        record_requests: bool = True,
        record_state_changes: bool = True,
        plugins: PluginHost | None = None,
        store_options: Mapping[str, Any] | None = None,
        transport_options: Mapping[str, Any] | None = None,
        broker_options: Mapping[str, Any] | None = None,
        controller_session: Callable[[int, StateStore], StateStore] | None = None,
        data_plane: str | None = None,
    ) -> None:
        """``controller_session(controller_id, session)``, when given, wraps the store session of
        every controller candidate started (fault injection: tests use it to expire a controller's
        session at a chosen write, or to hide watch events from it). Without ``record_requests``
        the cluster counts the requests sent (:meth:`sent_request_count`,
        :meth:`sent_request_apis`) without keeping them (:attr:`sent_requests` is refused), and its
        brokers keep only their notable answers (``BrokerAgent(keep_answers="notable")``): what a
        long simulation needs, in a fraction of the memory. Without ``record_state_changes`` the
        cluster keeps no state-change lines (:attr:`state_change_log` is refused): the controllers
        make them only for the ``kctl.state_change`` logger's handlers, at its level (a rolling
        restart of 100 brokers and 100K partitions makes millions of TRACE lines). ``data_plane``:
        the simulated brokers' replica managers, ``"native"`` (:mod:`kctl.broker.native_data_plane`)
        or ``"python"`` (the reference, :class:`~kctl.broker.SimulatedReplicaManager`); by default
        ``KCTL_DATA_PLANE``, else the native one."""
        if isinstance(brokers, int):  # brokers 1…N
            check_broker_count(validate_int("brokers", brokers, 1, error=IllegalStateError))
            self.broker_ids = list(range(1, brokers + 1))
        else:
            check_broker_count(len(brokers))
            self.broker_ids = sorted(validate_int("broker id", b, 0, error=IllegalStateError) for b in brokers)
        if not self.broker_ids or len(set(self.broker_ids)) != len(self.broker_ids):
            raise IllegalStateError(f"broker ids must be distinct non-negative integers, got {self.broker_ids}")
        self.racks = self._rack_map(racks)
        self.config = ControllerConfig.coerce(config)
        self.engine = engine or default_engine()
        self.seed = seed
        self.simulated = simulated
        candidates = self.broker_ids[: controllers] if isinstance(controllers, int) else sorted(controllers)
        if not candidates or not set(candidates) <= set(self.broker_ids):
            raise IllegalStateError(f"controller candidates {candidates} must be some of the brokers {self.broker_ids}")
        self.controller_ids = candidates
        self.plugins = plugins if plugins is not None else get_plugin_host()
        # Every name is checked before anything starts (a store may open a session).
        self.plugins.leader_selectors().check_config(self.config)
        store_factory = self.plugins.state_stores().get(store).factory
        transport_factory = self.plugins.transports().get(transport).factory
        self.scheduler: Scheduler = SimulatedScheduler(seed) if simulated else RealTimeScheduler(seed)
        options = dict(store_options or {})
        if store == "memory" and "tree" not in options:
            options["tree"] = MemoryTree(record_history=record_history, rng=random.Random(seed))
        self.store: StateStore = store_factory(**options)
        self.transport = _RecordingTransport(transport_factory(scheduler=self.scheduler, **(transport_options or {})), self)
        self._expected_metadata = ExpectedMetadata(self.store)
        self.ledger: DataPlaneLedger | NativeDataPlaneLedger = (
            NativeDataPlaneLedger() if data_plane_name(data_plane) == "native" else DataPlaneLedger()
        )
        self._broker_options = dict(broker_options or {})
        if not record_requests:
            self._broker_options.setdefault("keep_answers", "notable")
        self._controller_session = controller_session
        self._state_change_log = KeptLines() if record_state_changes else None
        self._sent = _SentLog(record_requests)
        self.brokers: dict[int, BrokerAgent] = {}
        self.controllers: dict[int, KafkaController] = {}
        self._lifecycle = threading.RLock()  # starting and stopping brokers and controllers
        self._retired_unclean = 0
        self.unclean_elections_requested = False
        self._started = False
        self._release_collector: Callable[[], None] = lambda: None  # see start()
        self.on_progress: Callable[[], None] | None = None
        """Called after each slice (at most 50 ms) of simulated time while the cluster runs towards
        a condition: ``kctl sim`` shows the progress of a long step from it."""

    def _rack_map(self, racks: Sequence[str] | Mapping[int, str] | None) -> dict[int, str | None]:
        if racks is None:
            return dict.fromkeys(self.broker_ids)
        if isinstance(racks, Mapping):
            unknown = set(racks) - set(self.broker_ids)
            if unknown:
                raise IllegalStateError(f"racks given for unknown brokers {sorted(unknown)}")
            return {b: racks.get(b) for b in self.broker_ids}
        if len(racks) != len(self.broker_ids):
            raise IllegalStateError(f"{len(racks)} racks given for {len(self.broker_ids)} brokers")
        return dict(zip(self.broker_ids, racks))

    # --- Lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> EmbeddedCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start every broker and controller and wait until the cluster is stable. A simulated
        cluster collects only young objects from now until :meth:`stop`
        (:func:`kctl.scheduler.hold_young_collections`): between its waits too, so that what each
        wait built is not walked again by the older generations' collections as soon as it ends."""
        with self._lifecycle:
            if self._started:
                return
            self._started = True
            if isinstance(self.scheduler, SimulatedScheduler):
                self._release_collector = hold_young_collections()
            for broker_id in self.broker_ids:
                self._start_broker_agent(broker_id)
            for controller_id in self.controller_ids:
                self._start_controller(controller_id)
        try:
            self.run_until(lambda: self.active_controller is not None, what="a controller to be elected")
            self.run_until_stable()
        except BaseException:
            self._release_collector()  # the caller may never stop a cluster that did not start
            raise

    def stop(self) -> None:
        with self._lifecycle:
            if not self._started:
                return
            self._started = False
            self._release_collector()
            for controller_id in list(self.controllers):
                self._retire_controller(controller_id, crashed=False)
            for agent in self.brokers.values():
                agent.kill()
            if isinstance(self.scheduler, RealTimeScheduler):
                self.scheduler.shutdown()
            self.store.close()  # the cluster's own session: reads after stop() see the store no more

    def _data_plane_options(self) -> dict[str, Any]:
        """How a broker agent gets its replica manager: the native one, or the Python reference's
        on the cluster's ledger."""
        if isinstance(self.ledger, NativeDataPlaneLedger):
            return {"replica_manager": NativeReplicaManager(self.ledger)}
        return {"ledger": self.ledger}

    def _start_broker_agent(self, broker_id: int) -> BrokerAgent:
        agent = BrokerAgent(
            broker_id,
            self.store.new_session(),  # type: ignore[attr-defined]
            self.transport,
            self.scheduler,
            self.config,
            rack=self.racks[broker_id],
            **self._data_plane_options(),
            **self._broker_options,
        )
        self.brokers[broker_id] = agent
        agent.startup()
        return agent

    def _start_controller(self, controller_id: int) -> KafkaController:
        session: StateStore = self.store.new_session()  # type: ignore[attr-defined]
        if self._controller_session is not None:
            session = self._controller_session(controller_id, session)
        controller = KafkaController(
            controller_id,
            session,
            self.transport,
            self.config,
            self.engine,
            self.scheduler,
            state_change_log=self._state_change_log,
            plugins=self.plugins,
        )
        self.controllers[controller_id] = controller
        controller.startup()
        return controller

    def _retire_controller(self, controller_id: int, crashed: bool) -> None:
        """Stop a candidate with its process: a crash lets its session expire (its ephemeral
        ``/controller`` goes with it), a clean stop closes the session."""
        with self._lifecycle:
            controller = self.controllers.pop(controller_id, None)
            if controller is None:
                return
            store: Any = controller.store
            if crashed:
                store.expire_session()
            controller.shutdown()
            self._retired_unclean += controller.inspect(_unclean_elections)
            store.close()  # a crashed process's client goes with it

    # --- Time ----------------------------------------------------------------------------------

    def now(self) -> float:
        return self.scheduler.now()

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of cluster time pass (virtual when simulated): a finite number, not
        negative, at most a day (:func:`~kctl.scheduler.check_duration`)."""
        seconds = check_duration(seconds, "seconds")
        if isinstance(self.scheduler, SimulatedScheduler):
            self.scheduler.advance(seconds)
        else:
            time.sleep(seconds)

    def run_until(
        self, condition: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT, what: str = "", settled: bool = False
    ) -> bool:
        """Advance until ``condition()`` holds; raise :class:`IllegalStateError` naming ``what`` on timeout
        (or return False when ``what`` is empty). With ``settled``, a simulated cluster checks the
        condition only between instants of virtual time, not between the callbacks of one instant
        (see :meth:`SimulatedScheduler.run_until`): right for conditions on settled states, and
        cheaper. ``timeout`` is checked as :meth:`advance` checks its seconds."""
        deadline = self.now() + check_duration(timeout, "timeout")
        with young_collections_only() if isinstance(self.scheduler, SimulatedScheduler) else nullcontext():
            while not condition():
                if self.now() >= deadline:
                    if what:
                        raise IllegalStateError(f"timed out after {timeout} s waiting for {what}")
                    return False
                if isinstance(self.scheduler, SimulatedScheduler):
                    next_time = self.scheduler.next_time()
                    step_to = min(deadline, max(self.now() + 0.05, next_time if next_time is not None else deadline))
                    self.scheduler.run_until(step_to, until=condition, settled=settled)
                    if self.on_progress is not None:
                        self.on_progress()
                else:
                    time.sleep(0.02)
        return True

    def wait(self, future: Future[T], timeout: float = DEFAULT_TIMEOUT, what: str = "the request") -> T:
        self.run_until(future.done, timeout, what)
        return future.result()

    def is_quiet(self) -> bool:
        """A controller is active, and no controller, request or broker has work in progress."""
        return self._quiet(self.active_controller)

    def _quiet(self, active: KafkaController | None) -> bool:
        if active is None or any(not c.event_manager.is_empty() for c in self.controllers.values()):
            return False
        return bool(self.transport.idle()) and all(a.idle() for a in self.brokers.values())

    def is_stable(self) -> bool:
        """Quiet, with nothing the controller can still finish: reassignments and deletions are
        done (or wait for a dead broker), every live replica that can be in its ISR is, and every
        live broker's metadata matches the store."""
        if not self.transport.idle():  # the usual answer in the middle of a step: requests in flight
            return False
        controller = self.active_controller
        if controller is None or not self._quiet(controller):
            return False
        return controller.inspect(_nothing_left_to_finish) and self._metadata_converged()

    def run_until_stable(self, timeout: float = DEFAULT_TIMEOUT, what: str = "") -> bool:
        """Advance until :meth:`is_stable`, checked between instants of virtual time; False if it
        did not become stable within ``timeout`` (an :class:`IllegalStateError` naming ``what``,
        if given)."""
        return self.run_until(self.is_stable, timeout, what, settled=True)

    # --- Brokers and controllers ---------------------------------------------------------------

    @property
    def active_controller(self) -> KafkaController | None:
        active = [c for c in list(self.controllers.values()) if c.is_active]
        if not active:
            return None
        return max(active, key=lambda c: c.epoch)

    def _on_active_controller(self, read: Callable[[KafkaController], T]) -> T:
        """``read`` of the active controller's state, on its event thread (see
        :meth:`KafkaController.inspect`); on its successor if it resigned before the read ran."""

        def while_active(controller: KafkaController) -> T:
            if not controller.is_active:
                raise _Resigned
            return read(controller)

        while True:
            try:
                return self._controller().inspect(while_active)
            except _Resigned:
                continue

    def _controller(self) -> KafkaController:
        controller = self.active_controller
        if controller is None and not self.controllers:
            raise IllegalStateError(
                f"no controller is running: every controller candidate (brokers {self.controller_ids}) is down"
            )
        if controller is None:
            self.run_until(lambda: self.active_controller is not None, what="an active controller")
            controller = self.active_controller
        assert controller is not None
        return controller

    def live_brokers(self) -> list[int]:
        return [b for b, agent in sorted(self.brokers.items()) if agent.is_running]

    def kill_broker(self, broker_id: int) -> None:
        """Crash a broker (and the controller candidate beside it): no controlled shutdown."""
        with self._lifecycle:
            self._agent(broker_id).kill()
            self._retire_controller(broker_id, crashed=True)

    def start_broker(self, broker_id: int) -> None:
        """Restart a stopped broker with a new session (a larger broker epoch)."""
        with self._lifecycle:
            agent = self._agent(broker_id)
            if agent.is_running:
                raise IllegalStateError(f"broker {broker_id} is already running")
            agent.restart()  # same logs (replica manager), new session and epoch
            if broker_id in self.controller_ids and broker_id not in self.controllers:
                self._start_controller(broker_id)

    def shutdown_broker(self, broker_id: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Controlled shutdown: leadership moves away first, then the broker stops."""
        check_duration(timeout, "timeout")
        self.wait(self._agent(broker_id).shutdown(), timeout, f"the controlled shutdown of broker {broker_id}")
        self._retire_controller(broker_id, crashed=False)

    def kill_controller(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Crash the active controller; once another candidate has taken over, a fresh candidate
        replaces the crashed one. Returns the id of the new active controller."""
        check_duration(timeout, "timeout")
        old = self._controller()
        old_id = old.broker_id
        self._retire_controller(old_id, crashed=True)
        self.run_until(
            lambda: self.active_controller is not None and self.active_controller.broker_id != old_id,
            timeout, "another controller to take over",
        )
        with self._lifecycle:
            if self._agent(old_id).is_running and old_id not in self.controllers:
                self._start_controller(old_id)
        new = self.active_controller
        assert new is not None
        return new.broker_id

    def _agent(self, broker_id: int) -> BrokerAgent:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise IllegalStateError(f"no broker {broker_id} in this cluster (brokers {self.broker_ids})") from None

    def update_config(self, properties: Mapping[str, Any]) -> None:
        """A dynamic broker-config change on every broker (e.g. enabling unclean election)."""
        with self._lifecycle:
            config = self.config.with_properties(properties)
            self.plugins.leader_selectors().check_config(config)  # refused before any broker has it
            self.config = config
            for controller in self.controllers.values():
                controller.update_config(properties)

    # --- Admin operations ----------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        assignment: Mapping[int, Sequence[int]] | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        wait: bool = True,
    ) -> dict[int, tuple[int, ...]]:
        """Create a topic and (with ``wait``) run until the cluster is stable again; returns its
        replica assignment. Invalid requests raise the Kafka-named error."""
        spec: dict[str, Any] = {"name": name}
        for key, value in (("partitions", partitions), ("replication_factor", replication_factor),
                           ("assignment", assignment), ("config", config)):
            if value is not None:
                spec[key] = value
        results = self.wait(self._controller().create_topics([spec]), what=f"the creation of topic {name}")
        error = results.get(name)
        if error is not None:
            raise error
        self.run_until(lambda: self._on_active_controller(lambda c: name in c.context.all_topics),
                       what=f"topic {name} to be loaded")
        if wait:
            self.run_until_stable()
        # read from the store, which holds what the controller loaded (looking each partition up in
        # the controller's context cost as much as placing the replicas)
        stored = self.store.get_topic_assignments([name]).values.get(name)
        return {} if stored is None else {p: a.replicas for p, a in sorted(stored.partitions.items())}

    def create_partitions(self, topic: str, total: int, assignment: Mapping[int, Sequence[int]] | None = None) -> None:
        future = self._controller().create_partitions({topic: total}, {topic: assignment} if assignment else None)
        error = self.wait(future, what=f"new partitions for {topic}").get(topic)
        if error is not None:
            raise error
        self.run_until(lambda: self._on_active_controller(lambda c: len(c.context.partitions_for_topic(topic))) >= total,
                       what=f"{topic} to have {total} partitions")
        self.run_until_stable()

    def delete_topic(self, name: str, wait: bool = True) -> None:
        error = self.wait(self._controller().delete_topics([name]), what=f"the deletion of {name}").get(name)
        if error is not None:
            raise error
        if wait:
            self.run_until_stable()

    def reassign(self, targets: Mapping[TopicPartition, Sequence[int]], wait: bool = True) -> dict[TopicPartition, KctlError | None]:
        """Start reassignments (the AlterPartitionReassignments API); per partition None or its error."""
        results = self.wait(self._controller().alter_partition_reassignments(dict(targets)), what="the reassignment")
        if wait:
            self.run_until_stable()
        return results

    def cancel_reassignment(self, partitions: Iterable[TopicPartition], wait: bool = True) -> dict[TopicPartition, KctlError | None]:
        cancel: dict[TopicPartition, Sequence[int] | None] = dict.fromkeys(partitions)
        results = self.wait(self._controller().alter_partition_reassignments(cancel), what="the cancellation")
        if wait:
            self.run_until_stable()
        return results

    def list_reassignments(self) -> dict[TopicPartition, ReplicaAssignment]:
        return self.wait(self._controller().list_partition_reassignments())

    def elect_leaders(self, partitions: Iterable[TopicPartition], kind: str = "preferred", wait: bool = True) -> dict[TopicPartition, int | KctlError]:
        self.unclean_elections_requested |= kind == "unclean"
        results = self.wait(self._controller().elect_leaders(list(partitions), kind), what=f"the {kind} election")
        if wait:
            self.run_until_stable()
        return results

    def set_topic_config(self, topic: str, config: Mapping[str, Any]) -> None:
        """Replace a topic's config overrides (what ``kafka-configs --alter`` does); they are
        validated as Kafka's topic configs (:mod:`kctl.topic_config`) before anything is written."""
        admin.change_topic_config(self.store, topic, config)

    def produce(self, tp: TopicPartition, records: int = 1) -> None:
        """Append records on the partition's current leader (the simulated data plane)."""
        checked = validate_partition_id(tp)
        leadership = self._on_active_controller(lambda c: c.context.partition_leadership(checked))
        if leadership is None or leadership.leader_and_isr.leader == NO_LEADER:
            raise UnknownTopicOrPartitionError(f"partition {tp} has no leader")
        manager = self._agent(leadership.leader_and_isr.leader).replica_manager
        if not isinstance(manager, SimulatedReplicaManager | NativeReplicaManager):
            raise IllegalStateError("produce needs the simulated replica manager")
        manager.produce(tp, records)

    def fail_log_dir(self, broker_id: int, partitions: Iterable[TopicPartition]) -> None:
        self._agent(broker_id).fail_log_dir([validate_partition_id(tp) for tp in partitions])

    # --- Inspection ----------------------------------------------------------------------------

    def describe(self, topic: str) -> list[PartitionDescription]:
        return self._on_active_controller(lambda c: _describe(c, topic))

    def partition_history(self, tp: TopicPartition) -> list[PartitionSnapshot]:
        """Every stored version of the partition, oldest first."""
        return self.store.partition_history(validate_partition_id(tp))  # type: ignore[attr-defined, no-any-return]

    @property
    def state_change_log(self) -> list[str]:
        if self._state_change_log is None:
            raise IllegalStateError("the state-change lines are not kept: "
                                    "make the cluster with EmbeddedCluster(record_state_changes=True)")
        return self._state_change_log.lines()

    @property
    def sent_requests(self) -> list[SentRecord]:
        return self._sent.records()

    def sent_request_count(self) -> int:
        """``len(sent_requests)`` without the copy."""
        return self._sent.count

    def sent_request_apis(self, start: int = 0) -> Counter[str]:
        """How many requests of each API (``request.api``) ``sent_requests[start:]`` holds, without
        building the records."""
        return self._sent.apis(start)

    def status(self) -> ClusterStatus:
        """What ``kctl cluster status`` shows of this cluster, read from its store as from ZooKeeper
        (:func:`kctl.tools.status.cluster_status`)."""
        from kctl.tools.status import cluster_status

        return cluster_status(self.store)

    def metrics(self) -> dict[str, float]:
        """The active controller's metrics (Kafka's names); unclean elections counted cluster-wide."""
        controller = self._controller()
        metrics = controller.metrics()
        metrics["UncleanLeaderElections"] = self.unclean_leader_elections()
        return metrics

    def metrics_registry(self) -> CollectorRegistry:
        """Every controller candidate's and running broker's metrics under the names a Kafka cluster
        scraped by the Prometheus JMX exporter has, labelled by ``node_id`` (:mod:`kctl.metrics`);
        ``prometheus_client.generate_latest(registry)`` renders them."""
        from kctl.metrics import nodes_registry

        return nodes_registry(self._running_nodes)

    def _running_nodes(self) -> list[tuple[int, KafkaController | BrokerAgent]]:
        """Every controller candidate, then every running broker, by id."""
        with self._lifecycle:
            controllers = sorted(self.controllers.items(), key=lambda item: item[0])
            brokers = sorted(((b, a) for b, a in self.brokers.items() if a.is_running), key=lambda item: item[0])
        return [*controllers, *brokers]

    def unclean_leader_elections(self) -> int:
        with self._lifecycle:
            return self._retired_unclean + sum(c.inspect(_unclean_elections) for c in self.controllers.values())

    def _metadata_converged(self) -> bool:
        """Every live broker's metadata cache agrees with the store, digest for digest (what
        :meth:`metadata_mismatches` finds, at the cost of one comparison per broker)."""
        digest = self._expected_metadata.digest()
        controller_id = self.store.get_controller_id()
        brokers = self.store.get_all_brokers().keys()
        return all(self.brokers[b].inspect(lambda a: a.metadata_cache.agrees_with(controller_id, brokers, digest))
                   for b in self.live_brokers())

    def metadata_mismatches(self, limit: int | None = None) -> list[str]:
        """Live brokers whose metadata cache disagrees with the store (I7 once quiet)."""
        if self.active_controller is None:
            return ["no active controller"]
        if self._metadata_converged():
            return []  # every digest agrees: reading the store whole and comparing would find nothing
        expected = MetadataSnapshot.from_store(self.store)
        controller_id, brokers, digest = expected.controller_id, expected.brokers, expected.digest

        def differences(agent: BrokerAgent) -> list[str]:
            cache = agent.metadata_cache
            if cache.agrees_with(controller_id, brokers, digest):
                return []  # the digests agree: comparing every partition would find nothing
            return cache.differences(expected)

        mismatches: list[str] = []
        for broker_id in self.live_brokers():
            for problem in self.brokers[broker_id].inspect(differences):
                mismatches.append(f"broker {broker_id}: {problem}")
                if limit is not None and len(mismatches) >= limit:
                    return mismatches
        return mismatches

    def check_invariants(self) -> list[str]:
        """Violations of invariants I1–I8 (DESIGN §7); empty when they all hold."""
        from kctl.invariants import check_invariants

        return check_invariants(self)


def _describe(controller: KafkaController, topic: str) -> list[PartitionDescription]:
    """The topic as the controller knows it (on its event thread)."""
    ctx = controller.context
    if topic not in ctx.all_topics:
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
    described = []
    for tp in ctx.partitions_for_topic(topic):
        assignment = ctx.partition_full_replica_assignment(tp)
        leadership = ctx.partition_leadership(tp)
        leader_and_isr = None if leadership is None else leadership.leader_and_isr
        described.append(PartitionDescription(
            tp.partition,
            NO_LEADER if leader_and_isr is None else leader_and_isr.leader,
            -1 if leader_and_isr is None else leader_and_isr.leader_epoch,
            assignment.replicas,
            assignment.adding_replicas,
            assignment.removing_replicas,
            () if leader_and_isr is None else leader_and_isr.isr,
            ctx.partition_state(tp).kafka_name,
        ))
    return described


def _unclean_elections(controller: KafkaController) -> int:
    return controller.context.unclean_leader_elections


def _nothing_left_to_finish(controller: KafkaController) -> bool:
    """Reassignments and deletions are done (or wait for a dead broker) and every partition the
    controller can bring online with a full ISR is (on its event thread)."""
    ctx = controller.context
    for tp in ctx.partitions_being_reassigned:
        if all(b in ctx.live_broker_ids for b in ctx.partition_full_replica_assignment(tp).target_replicas):
            return False
    for topic in ctx.topics_to_be_deleted:
        if not ctx.is_topic_ineligible_for_deletion(topic):
            return False
    return not ctx.unconverged_partitions(limit=1)
