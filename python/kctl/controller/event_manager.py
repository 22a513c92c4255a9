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
import functools
import itertools
import logging
import operator
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

    def update(self, value: float, times: int = 1) -> None:
        """Add ``value`` (``times`` times: the same count, total and sample as one at a time)."""
        self.count += times
        if value > self.max:
            self.max = value
        self.total = functools.reduce(operator.add, itertools.repeat(value, times), self.total)  # one by one, in C
        self._sample.extend(itertools.repeat(value, min(times, HISTOGRAM_SAMPLE_SIZE)))

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

    def record(self, state: ControllerState, queued_for: float, took: float, times: int = 1) -> None:
        """``times`` events of ``state``, each queued for ``queued_for`` seconds and processed in
        ``took``."""
        self.processed += times
        self.queue_time_ms.update(queued_for * 1000.0, times)
        last_state, histogram = self._last
        if state is not last_state:  # events come in runs of one kind; hashing an Enum runs Python code
            found = self.processing_time_ms.get(state)
            histogram = self.processing_time_ms[state] = Histogram() if found is None else found
            self._last = (state, histogram)
        histogram.update(took * 1000.0, times)


_IDLE = ControllerState.IDLE
"""An enum member read from a class costs more than a global: this one is read once per event."""


def _no_turn() -> bool:
    return False


def _no_turns(turns: int) -> bool:
    return False


class _Queued:
    """An event in the queue, and when it was queued; ``times`` > 0 marks a repeatable event
    (:meth:`ControllerEventManager.put_repeatable`) standing for that many in a row."""

    __slots__ = ("enqueued", "event", "times")

    def __init__(self, event: ControllerEvent, enqueued: float, times: int) -> None:
        self.event, self.enqueued, self.times = event, enqueued, times


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
        self._take_turns: Callable[[int], bool] = getattr(scheduler, "take_turns", _no_turns)
        self._threaded = threaded
        self._queue: collections.deque[_Queued] = collections.deque()
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
        return self._put(event, 0)

    def put_repeatable(self, event: ControllerEvent, times: int = 1) -> ControllerEvent:
        """:meth:`put` of ``event`` ``times`` times in a row, for an event whose processing does
        nothing but be counted, so that any event of its kind would do as well (an accepted
        UpdateMetadata answer: Kafka only logs the errors). Simulated, repeatable events of one
        kind queued one after another at one instant share a queue entry: a fan-out's answers
        from every broker are one entry, whose event is processed once and counted, and each of
        them is an event of the statistics, a step of the scheduler and one of
        :attr:`queue_size`, exactly as if queued one by one."""
        if self._threaded:  # each is processed alone on the event thread
            for _ in range(times - 1):
                self._put(event, 1)
            return self._put(event, 1)
        with self._lock:
            queue = self._queue
            if queue:
                last = queue[-1]
                if last.times and type(last.event) is type(event) and last.enqueued == self._scheduler.now():
                    last.times += times  # its drain is scheduled already (or running, and reschedules)
                    return event
        return self._put(event, times)

    def _put(self, event: ControllerEvent, times: int) -> ControllerEvent:
        with self._lock:
            closed = self._closed
            if not closed:
                self._append(event, times)
        if closed:
            for _ in range(max(times, 1)):
                event.preempt()
        elif not self._threaded and not self._drain_scheduled:
            self._schedule_drain()
        return event

    def clear_and_put(self, event: ControllerEvent) -> ControllerEvent:
        """Preempt everything queued, then queue ``event`` (session expiry, shutdown)."""
        with self._cond:
            drained = list(self._queue)
            self._queue.clear()
            self._append(event, 0)
            self._closed = self._closed or isinstance(event, ShutdownEventThread)
        for queued in drained:
            for _ in range(max(queued.times, 1)):
                queued.event.preempt()
        if not self._threaded:
            self._schedule_drain()
        return event

    def _append(self, event: ControllerEvent, times: int) -> None:
        now = self._scheduler.now()
        if self._idle_since is not None:
            self._expire_queue_time(now)
            self._idle_since = None
        self._queue.append(_Queued(event, now, times))
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
        """Events queued, each repeatable event counted (see :meth:`put_repeatable`)."""
        with self._lock:
            return sum(max(queued.times, 1) for queued in self._queue)

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
        scheduler says that their own steps would come next (``take_turn``). The repeats of a
        repeatable event are counted without processing them again, all at once when the
        scheduler grants them all their turns (``take_turns``), else one per step."""
        self._drain_scheduled = False
        queue = self._queue
        while queue:
            queued = queue[0]
            if queued.times > 1:
                queued.times -= 1
            else:
                queue.popleft()
            took = self._handle(queued.event, queued.enqueued)
            repeats = queued.times if queue and queue[0] is queued else 0
            if repeats and not self._drain_scheduled and self._running and self._take_turns(repeats):
                queue.popleft()
                self._record(queued.event.state, queued.enqueued, took, repeats)
            if self._drain_scheduled or not (queue and self._running and self._take_turn()):
                break
        self._schedule_drain()

    def _run_thread(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._calls:
                    self._cond.wait()
                calls, self._calls = self._calls, []
                queued = self._queue.popleft() if self._queue and not calls else None  # threaded, each alone
                event, enqueued = (None, 0.0) if queued is None else (queued.event, queued.enqueued)
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

    def _handle(self, event: ControllerEvent, enqueued: float) -> float:
        """Process ``event``; returns the seconds it took."""
        if isinstance(event, ShutdownEventThread):
            self._running = False
            return 0.0
        state = self.state = event.state
        started = time.perf_counter()
        try:
            self._process(event)
        except Exception:  # the processor handles its own errors; this guards the thread itself
            log.exception("Uncaught error processing event %s", event.name)
        finally:
            took = time.perf_counter() - started
            self._record(state, enqueued, took, 1)
            self.state = _IDLE
        return took

    def _record(self, state: ControllerState, enqueued: float, took: float, times: int) -> None:
        """Count ``times`` events of ``state`` processed now; the controller is idle from now
        when nothing is left in the queue."""
        now = self._scheduler.now()
        with self._lock:
            self._stats.record(state, now - enqueued, took, times)
            if not self._queue:
                self._idle_since = now
