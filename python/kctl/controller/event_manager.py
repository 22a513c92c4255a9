"""The controller's event queue and its one processing thread (Kafka's ControllerEventManager).

Two modes share everything but the worker: ``threaded`` runs a dedicated thread that blocks on the
queue (real clusters); otherwise each event is processed as a step of the injected simulated
scheduler, so event processing interleaves deterministically with broker and network activity.

Other threads read the controller's state through :meth:`ControllerEventManager.call`, which runs
the read on the event thread between two events: the state is only ever touched by one thread, as
in Kafka, where everything the controller does is an event.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kctl.controller.events import ControllerEvent, ControllerState, ShutdownEventThread
from kctl.scheduler import Scheduler

log = logging.getLogger(__name__)

T = TypeVar("T")

EVENT_QUEUE_TIME_TIMEOUT = 300.0
"""Seconds the queue stays empty before the queue-time histogram is cleared (Kafka's
``eventQueueTimeTimeoutMs``): an old burst does not linger in the metric of an idle controller."""

HISTOGRAM_SAMPLE_SIZE = 1028
"""Values the percentiles are computed from (the sample size of a Yammer histogram)."""

QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
"""The percentiles of a Yammer histogram's snapshot (its ``50thPercentile`` … ``999thPercentile``)."""


@dataclass(frozen=True)
class HistogramSnapshot:
    """A histogram at one moment: its count, the sum of its values and its :data:`QUANTILES`."""

    count: int
    total: float
    quantiles: tuple[float, ...]


class Histogram:
    """A Yammer histogram in milliseconds: Kafka's ``EventQueueTimeMs``, and the time part of each
    ``…RateAndTimeMs`` timer.

    As in Yammer, count, max and mean cover every value since the last :meth:`clear` and
    percentiles come from a sample of 1,028 values, interpolated as Yammer's snapshots do. Yammer
    samples with an exponentially decaying random reservoir; kctl keeps the most recent values
    instead, so that a simulated run stays reproducible.
    """

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.count = 0
        self.max = 0.0
        self.total = 0.0
        self._sample: collections.deque[float] = collections.deque(maxlen=HISTOGRAM_SAMPLE_SIZE)

    def update(self, value: float) -> None:
        self.count += 1
        if value > self.max:
            self.max = value
        self.total += value
        self._sample.append(value)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, quantile: float) -> float:
        """The ``quantile`` (0–1) of the sample, 0 when empty."""
        return self._percentiles((quantile,))[0]

    def snapshot(self) -> HistogramSnapshot:
        return HistogramSnapshot(self.count, self.total, self._percentiles(QUANTILES))

    def _percentiles(self, quantiles: tuple[float, ...]) -> tuple[float, ...]:
        values = sorted(self._sample)
        return tuple(_interpolate(values, q) for q in quantiles)


def _interpolate(values: list[float], quantile: float) -> float:
    if not values:
        return 0.0
    position = quantile * (len(values) + 1)
    if position < 1:
        return values[0]
    if position >= len(values):
        return values[-1]
    lower, upper = values[int(position) - 1], values[int(position)]
    return lower + (position - int(position)) * (upper - lower)


@dataclass
class EventStats:
    """Queue time, and each state's processing time (Kafka's ``EventQueueTimeMs`` and the
    ``ControllerStats`` rate-and-time timers; a timer's rate is its count over time)."""

    processed: int = 0
    queue_time_ms: Histogram = field(default_factory=Histogram)
    processing_time_ms: dict[ControllerState, Histogram] = field(default_factory=dict)
    _last: tuple[ControllerState | None, Histogram] = field(default_factory=lambda: (None, Histogram()), repr=False,
                                                            compare=False)

    def record(self, state: ControllerState, queued_for: float, took: float) -> None:
        self.processed += 1
        self.queue_time_ms.update(queued_for * 1000.0)
        last_state, histogram = self._last
        if state is not last_state:  # events come in runs of one kind; hashing an Enum runs Python code
            found = self.processing_time_ms.get(state)
            histogram = self.processing_time_ms[state] = Histogram() if found is None else found
            self._last = (state, histogram)
        histogram.update(took * 1000.0)


_IDLE = ControllerState.IDLE
"""An enum member read from a class costs more than a global: this one is read once per event."""


def _no_turn() -> bool:
    return False


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
        self._take_turn: Callable[[], bool] = getattr(scheduler, "take_turn", _no_turn)
        self._threaded = threaded
        self._queue: collections.deque[tuple[ControllerEvent, float]] = collections.deque()
        self._lock = threading.RLock()  # what needs no waiting takes the lock alone: cheaper
        self._cond = threading.Condition(self._lock)
        self._drain_scheduled = False
        self._running = False
        self._closed = False  # after close(), events are preempted rather than queued
        self._name = name
        self._thread: threading.Thread | None = None
        self._calls: list[tuple[Callable[[], Any], Future[Any]]] = []
        self._taking_calls = False  # the event thread is there to run them
        self._direct = threading.RLock()  # serialises calls once there is no event thread
        self.state = ControllerState.IDLE
        self._stats = EventStats()
        self._idle_since: float | None = None  # when the last event finished with nothing queued

    # --- Lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._running, self._closed = True, False
        if self._threaded:
            self._thread = threading.Thread(target=self._run_thread, name=self._name, daemon=True)
            self._taking_calls = True
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
        """Queue ``event``; once the manager is closed, preempt it at once instead (its caller is
        answered, as it would have been had the event been queued before the close)."""
        with self._lock:
            closed = self._closed
            if not closed:
                if self._idle_since is None and not self._threaded:  # _append's usual case: once per broker answer
                    self._queue.append((event, self._scheduler.now()))
                else:
                    self._append(event)
        if closed:
            event.preempt()
        elif not self._threaded and not self._drain_scheduled:
            self._schedule_drain()
        return event

    def clear_and_put(self, event: ControllerEvent) -> ControllerEvent:
        """Preempt everything queued, then queue ``event`` (session expiry, shutdown)."""
        with self._cond:
            drained = list(self._queue)
            self._queue.clear()
            self._append(event)
            self._closed = self._closed or isinstance(event, ShutdownEventThread)
        for queued, _ in drained:
            queued.preempt()
        if not self._threaded:
            self._schedule_drain()
        return event

    def _append(self, event: ControllerEvent) -> None:
        now = self._scheduler.now()
        if self._idle_since is not None:
            self._expire_queue_time(now)
            self._idle_since = None
        self._queue.append((event, now))
        if self._threaded:
            self._cond.notify()

    def call(self, read: Callable[[], T]) -> T:
        """Run ``read`` on the event thread, between two events, and return its result (or raise
        its exception): how another thread sees the controller's state whole, never in the middle
        of an event. Without an event thread (a simulation), from the event thread itself, and once
        the thread has stopped, ``read`` runs at once on the calling thread."""
        if not self._threaded or threading.current_thread() is self._thread:
            return read()
        future: Future[T] = Future()
        with self._cond:
            queued = self._taking_calls
            if queued:
                self._calls.append((read, future))
                self._cond.notify()
        if queued:
            return future.result()
        with self._direct:  # no event thread: one such call at a time
            return read()

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    @property
    def stats(self) -> EventStats:
        """The statistics as of now: the queue-time histogram is empty once the queue has been
        empty for :data:`EVENT_QUEUE_TIME_TIMEOUT` seconds."""
        with self._cond:
            self._expire_queue_time(self._scheduler.now())
        return self._stats

    def _expire_queue_time(self, now: float) -> None:
        """Kafka's event thread polls with a timeout once it has recorded queue times, and clears
        the histogram when the poll times out."""
        if self._idle_since is not None and now - self._idle_since >= EVENT_QUEUE_TIME_TIMEOUT:
            self._stats.queue_time_ms.clear()
            self._idle_since = None

    def is_empty(self) -> bool:
        return not self._queue and self.state is ControllerState.IDLE

    # --- Processing ----------------------------------------------------------------------------

    def _schedule_drain(self) -> None:
        if self._running and not self._drain_scheduled and self._queue:
            self._drain_scheduled = True
            self._scheduler.schedule(0.0, self._drain, name=self._name)

    def _drain(self) -> None:
        """Process the next event, as one scheduler step; the following ones too while the
        scheduler says that their own steps would come next (``take_turn``)."""
        self._drain_scheduled = False
        queue = self._queue
        while queue:
            event, enqueued = queue.popleft()
            self._handle(event, enqueued)
            if self._drain_scheduled or not (queue and self._running and self._take_turn()):
                break
        self._schedule_drain()

    def _run_thread(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._calls:
                    self._cond.wait()
                calls, self._calls = self._calls, []
                event, enqueued = self._queue.popleft() if self._queue and not calls else (None, 0.0)
                if isinstance(event, ShutdownEventThread):
                    self._taking_calls = False  # later calls run on their own threads
            if calls:
                self._run_calls(calls)
            elif isinstance(event, ShutdownEventThread):
                return
            elif event is not None:
                self._handle(event, enqueued)

    @staticmethod
    def _run_calls(calls: list[tuple[Callable[[], Any], Future[Any]]]) -> None:
        for read, future in calls:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(read())
                except BaseException as e:  # the caller gets it, the event thread goes on
                    future.set_exception(e)

    def _handle(self, event: ControllerEvent, enqueued: float) -> None:
        if isinstance(event, ShutdownEventThread):
            self._running = False
            return
        state = self.state = event.state
        started = time.perf_counter()
        try:
            self._process(event)
        except Exception:  # the processor handles its own errors; this guards the thread itself
            log.exception("Uncaught error processing event %s", event.name)
        finally:
            took = time.perf_counter() - started
            now = self._scheduler.now()
            with self._lock:
                self._stats.record(state, now - enqueued, took)
                if not self._queue:
                    self._idle_since = now
            self.state = _IDLE
