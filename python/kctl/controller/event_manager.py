"""The controller's event queue and its one processing thread (Kafka's ControllerEventManager).

Two modes share everything but the worker: ``threaded`` runs a dedicated thread that blocks on the
queue (real clusters); otherwise each event is processed as a step of the injected simulated
scheduler, so event processing interleaves deterministically with broker and network activity.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kctl.controller.events import ControllerEvent, ControllerState, ShutdownEventThread
from kctl.scheduler import Scheduler

log = logging.getLogger(__name__)


@dataclass
class EventStats:
    """Queue size and time, and per-state processing rate and time (Kafka's event-manager metrics)."""

    processed: int = 0
    queue_time_total: float = 0.0
    queue_time_max: float = 0.0
    processing_time: dict[str, float] = field(default_factory=dict)
    processing_count: dict[str, int] = field(default_factory=dict)

    def record(self, state: ControllerState, queued_for: float, took: float) -> None:
        self.processed += 1
        self.queue_time_total += queued_for
        self.queue_time_max = max(self.queue_time_max, queued_for)
        self.processing_time[state.value] = self.processing_time.get(state.value, 0.0) + took
        self.processing_count[state.value] = self.processing_count.get(state.value, 0) + 1


class ControllerEventManager:
    def __init__(
        self,
        process: Callable[[ControllerEvent], None],
        scheduler: Scheduler,
        *,
        threaded: bool,
        name: str = "controller-event-thread",
    ) -> None:
        self._process = process
        self._scheduler = scheduler
        self._threaded = threaded
        self._queue: collections.deque[tuple[ControllerEvent, float]] = collections.deque()
        self._cond = threading.Condition()
        self._drain_scheduled = False
        self._running = False
        self._name = name
        self._thread: threading.Thread | None = None
        self.state = ControllerState.IDLE
        self.stats = EventStats()

    # --- Lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._running = True
        if self._threaded:
            self._thread = threading.Thread(target=self._run_thread, name=self._name, daemon=True)
            self._thread.start()
        else:
            self._schedule_drain()

    def close(self) -> None:
        """Drain the queue (preempting what is left) and stop the worker after ``ShutdownEventThread``."""
        self.clear_and_put(ShutdownEventThread())
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        self._running = False

    # --- Queue ---------------------------------------------------------------------------------

    def put(self, event: ControllerEvent) -> ControllerEvent:
        with self._cond:
            self._queue.append((event, self._scheduler.now()))
            self._cond.notify()
        if not self._threaded:
            self._schedule_drain()
        return event

    def clear_and_put(self, event: ControllerEvent) -> ControllerEvent:
        """Preempt everything queued, then queue ``event`` (session expiry, shutdown)."""
        with self._cond:
            drained = list(self._queue)
            self._queue.clear()
        for queued, _ in drained:
            queued.preempt()
        return self.put(event)

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    def is_empty(self) -> bool:
        return not self._queue and self.state is ControllerState.IDLE

    # --- Processing ----------------------------------------------------------------------------

    def _schedule_drain(self) -> None:
        if self._running and not self._drain_scheduled and self._queue:
            self._drain_scheduled = True
            self._scheduler.schedule(0.0, self._drain_one, name=self._name)

    def _drain_one(self) -> None:
        self._drain_scheduled = False
        if not self._queue:
            return
        event, enqueued = self._queue.popleft()
        self._handle(event, enqueued)
        self._schedule_drain()

    def _run_thread(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                event, enqueued = self._queue.popleft()
            if isinstance(event, ShutdownEventThread):
                return
            self._handle(event, enqueued)

    def _handle(self, event: ControllerEvent, enqueued: float) -> None:
        if isinstance(event, ShutdownEventThread):
            self._running = False
            return
        self.state = event.state
        started = time.perf_counter()
        try:
            self._process(event)
        except Exception:  # the processor handles its own errors; this guards the thread itself
            log.exception("Uncaught error processing event %s", event.name)
        finally:
            self.stats.record(event.state, self._scheduler.now() - enqueued, time.perf_counter() - started)
            self.state = ControllerState.IDLE
