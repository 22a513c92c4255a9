"""Time and scheduling, injected everywhere so the same code runs for real or simulated.

:class:`SimulatedScheduler` is a single-threaded discrete-event loop over a virtual clock: callbacks
run in (time, submission order), randomness comes from one seeded ``random.Random``, so a whole
cluster run is reproducible bit for bit from its seed. :class:`RealTimeScheduler` runs callbacks on
one timer thread against the wall clock. Callbacks must be short: they enqueue work, they do not
block.

Durations that come from outside (a timeout, a pause, a stretch of simulated time) are checked by
:func:`check_duration` before anything waits on them: a NaN, an infinity or a year of simulated
time would otherwise hang a run or crash a timer thread.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from kctl.errors import IllegalArgumentError

log = logging.getLogger(__name__)

MAX_DURATION = 86_400.0
"""The longest duration accepted from outside, in seconds: a day. Longer timeouts are no use to a
tool, and a day of simulated time is already some hundred thousand timer callbacks."""


def check_duration(seconds: object, name: str, *, positive: bool = False) -> float:
    """``seconds`` as a duration: a finite number, not negative (more than 0 when ``positive``)
    and at most :data:`MAX_DURATION`; otherwise an :class:`IllegalArgumentError` naming ``name``."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise IllegalArgumentError(f"{name} must be a number of seconds, got {seconds!r}")
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_DURATION or positive and seconds == 0:
        least = "more than 0" if positive else "at least 0"
        raise IllegalArgumentError(
            f"{name} must be {least} and at most {MAX_DURATION:g} seconds (a day), got {seconds!r}"
        )
    return float(seconds)


class Timer(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    rng: random.Random

    def now(self) -> float:
        """Seconds since the scheduler started."""

    def schedule(self, delay: float, fn: Callable[[], None], name: str = "") -> Timer:
        """Run ``fn`` after ``delay`` seconds (0: as soon as possible, after what is already due)."""


class _Entry:
    __slots__ = ("when", "seq", "fn", "name", "cancelled")

    def __init__(self, when: float, seq: int, fn: Callable[[], None], name: str) -> None:
        self.when, self.seq, self.fn, self.name, self.cancelled = when, seq, fn, name, False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: _Entry) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)


class _Scheduled(list):  # type: ignore[type-arg]
    """A simulated callback: the list ``[fn]``, cleared by cancelling (one small object per
    callback; a simulated cluster of a hundred brokers runs tens of thousands per operation)."""

    __slots__ = ()

    def cancel(self) -> None:
        self[0] = None


class _Batch:
    """Callbacks ``run(item)`` due at one instant, scheduled one after another with nothing
    between them (:meth:`SimulatedScheduler.schedule_batched`): one entry of the scheduler for a
    fan-out of messages instead of one per message, run as one call ``run(items)``."""

    __slots__ = ("items", "run")

    def __init__(self, run: Callable[[list[Any]], None], items: list[Any]) -> None:
        self.run, self.items = run, items

    def __call__(self) -> None:
        self.run(self.items)


class SimulatedScheduler:
    """A virtual clock; nothing happens until :meth:`run_until` / :meth:`run_until_idle` is called.

    Callbacks run in (time, submission order). They are kept per instant, in submission order,
    with a heap of the distinct instants: most callbacks of a simulation are due at one of a few
    instants (a message's latency from now), so scheduling one is usually an append and running
    one a ``popleft``, not a heap operation among thousands of entries.
    """

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self._now = 0.0
        self._times: list[float] = []  # a heap of the instants in _at
        self._at: dict[float, deque[_Scheduled]] = {}
        self.steps = 0
        self.open_batch: list[Any] | None = None
        """The items of the batch (:meth:`schedule_batched`) scheduled last, while nothing else has
        been scheduled since and it has not started running: appending an item to it is exactly
        :meth:`schedule_batched` of that item for the same ``run`` and instant. A transport handing
        out a fan-out appends the rest of it so, without a call per message."""
        self._unwatched = False  # inside run_until, with nothing checked between callbacks of an instant

    def now(self) -> float:
        return self._now

    def schedule(self, delay: float, fn: Callable[[], None], name: str = "") -> Timer:
        if not 0.0 <= delay < math.inf:  # one comparison for the usual delay; NaN fails it too
            delay = _delay(delay, name)
        when = self._now + delay
        entry = _Scheduled((fn,))
        self.open_batch = None
        due = self._at.get(when)
        if due is None:
            due = self._at[when] = deque()
            heapq.heappush(self._times, when)
        due.append(entry)
        return entry

    def schedule_batched(self, run: Callable[[list[Any]], None], delay: float, item: Any) -> list[Any]:
        """Run ``run([item])`` after ``delay`` seconds, exactly as ``schedule(delay, lambda:
        run([item]))`` would, but sharing the entry of the callback scheduled just before when
        that one is ``run`` of other items due at the same instant (and not cancellable): the
        entry then makes one call, ``run(items)``. ``run`` must handle a list as it would each
        item in turn. A transport delivering a fan-out to every broker schedules one entry and
        makes one call, not one per broker, and the callbacks still run in submission order: the
        items of an entry are consecutive callbacks. Returns the entry's items (see
        :attr:`open_batch`)."""
        if not 0.0 <= delay < math.inf:
            delay = _delay(delay, "a batched callback")
        when = self._now + delay
        due = self._at.get(when)
        if due is None:
            due = self._at[when] = deque()
            heapq.heappush(self._times, when)
        elif due:
            last = due[-1][0]
            if type(last) is _Batch and last.run == run:
                items = self.open_batch = last.items
                items.append(item)
                return items
        items = self.open_batch = [item]
        due.append(_Scheduled((_Batch(run, items),)))
        return items

    def take_turn(self) -> bool:
        """Whether a callback that would reschedule itself at once may go on instead: true (and
        counted as a step) when the rescheduled callback would run next with nothing checked
        before it, i.e. inside :meth:`run_until` with no per-callback condition and nothing else
        due now. The controller's event loop drains a burst of events this way, one scheduler
        entry per burst instead of per event, in exactly the order of one entry per event."""
        if not self._unwatched:
            return False
        due = self._at.get(self._now)
        while due and due[0][0] is None:
            due.popleft()
        if due:
            return False
        self.steps += 1
        return True

    def take_turns(self, turns: int) -> bool:
        """:meth:`take_turn` for ``turns`` callbacks in a row that schedule and cancel nothing:
        each is granted when the first is (nothing they do can change the answer), so all are
        counted at once or none is."""
        if not self.take_turn():
            return False
        self.steps += turns - 1
        return True

    def pending(self) -> int:
        return sum(_count(entry[0]) for due in self._at.values() for entry in due)

    def next_time(self) -> float | None:
        """When the next callback is due (cancelled ones and spent instants are dropped on the way)."""
        times, at = self._times, self._at
        while times:
            when = times[0]
            due = at[when]
            while due and due[0][0] is None:
                due.popleft()
            if due:
                return when
            heapq.heappop(times)
            del at[when]
        return None

    def step(self) -> bool:
        """Run the next due callback; False when nothing is scheduled."""
        when = self.next_time()
        if when is None:
            return False
        due = self._at[when]
        fn = due[0][0]
        self._now = max(self._now, when)
        self.steps += 1
        if type(fn) is _Batch and len(fn.items) > 1:  # one step is one callback: the batch's first
            fn.run([fn.items.pop(0)])
        else:
            due.popleft()
            if type(fn) is _Batch and fn.items is self.open_batch:
                self.open_batch = None  # running: closed to more items
            fn()
        return True

    def run_until(self, deadline: float, until: Callable[[], bool] | None = None, settled: bool = False) -> bool:
        """Run callbacks due up to ``deadline`` (virtual seconds), stopping early once ``until()``
        holds; the clock ends at ``deadline`` unless stopped early. Returns whether ``until`` held.

        ``until`` is checked before each callback, or with ``settled`` only between instants of
        virtual time (before the first callback and once every callback due at the current
        instant has run): a check for a settled state, such as a cluster being stable, need not
        look at the moments in the middle of a broadcast, and a large cluster runs tens of
        thousands of callbacks per operation.
        """
        if math.isnan(deadline):
            raise IllegalArgumentError("a simulation cannot run until a NaN deadline")
        unwatched = self._unwatched
        self._unwatched = until is None or settled
        try:
            return self._run_until(deadline, until, settled)
        finally:
            self._unwatched = unwatched

    def _run_until(self, deadline: float, until: Callable[[], bool] | None, settled: bool) -> bool:
        times, at, pop = self._times, self._at, heapq.heappop
        first = True
        while True:  # next_time() and step() inlined: this loop runs every callback of a simulation
            when: float | None = None
            while times:
                due = at[times[0]]
                while due and due[0][0] is None:
                    due.popleft()
                if due:
                    when = times[0]
                    break
                del at[pop(times)]
            if until is not None and (first or not settled or when is None or when > self._now):
                first = False
                if until():
                    return True
            if when is None or when > deadline:
                break
            fn = due.popleft()[0]
            if when > self._now:
                self._now = when
            if type(fn) is _Batch:
                self.steps += len(fn.items)
                if fn.items is self.open_batch:
                    self.open_batch = None  # running: closed to more items
                if until is not None and not settled:  # checked between the batch's callbacks too
                    if self._run_watched(fn, due, until):
                        return True
                    continue
            else:
                self.steps += 1
            fn()
        self._now = max(self._now, deadline)
        return until() if until is not None else False

    def _run_watched(self, batch: _Batch, due: deque[_Scheduled], until: Callable[[], bool]) -> bool:
        """Run ``batch`` checking ``until`` before each callback after the first, as if each were
        an entry of its own; when it holds, the rest of the batch stays first in line."""
        run, items = batch.run, batch.items
        for i, item in enumerate(items):
            if i and until():
                due.appendleft(_Scheduled((_Batch(run, items[i:]),)))
                self.steps -= len(items) - i
                return True
            run([item])
        return False

    def advance(self, seconds: float) -> None:
        self.run_until(self._now + check_duration(seconds, "seconds"))


GC_THRESHOLDS = (500_000, 1_000_000_000, 1_000_000_000)
"""The collector's thresholds while a simulation runs (Python's default: 700, 10, 10): young
collections every 500,000 new objects, the older generations never. A young collection walks
every object made since the last one that is still alive (in a rolling restart, mostly the
replicas' follower records, which live until the next leadership change) and finds no garbage:
at 50,000 a full-size rolling restart ran 36 of them, 0.8 s of its CPU time."""


class _YoungCollections:
    """The holds on :data:`GC_THRESHOLDS`: the first saves the collector's thresholds and sets
    them, the last released restores them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0
        self.saved = gc.get_threshold()

    def hold(self) -> Callable[[], None]:
        with self.lock:
            if not self.holders:
                self.saved = gc.get_threshold()
                gc.set_threshold(*GC_THRESHOLDS)
            self.holders += 1
        released: list[bool] = []

        def release() -> None:
            with self.lock:
                if released:
                    return
                released.append(True)
                self.holders -= 1
                if not self.holders:
                    gc.set_threshold(*self.saved)
        return release


_young_collections = _YoungCollections()


def hold_young_collections() -> Callable[[], None]:
    """Collect only young objects (and less often) until the returned function is called (once
    counts; later calls do nothing). Holds nest: the collector's thresholds are set by the first
    and restored when the last is released.

    A simulated cluster keeps every request and answer and builds a data plane of objects per
    replica: at 100K partitions, millions of objects that each collection of the older
    generations walks again (41 such collections, two fifths of the CPU time, when such a cluster
    created its partitions; in a rolling restart, collections of the middle generation walking
    each wait's new objects as soon as the wait ended, a tenth of it). The cyclic garbage a
    simulation makes dies young (the collections of a full-size creation and rolling restart
    find none at all), so young collections suffice while it runs; cyclic garbage that outlives
    one stays until the thresholds come back, and what was built is walked by the first
    collections of the older generations after that.
    """
    return _young_collections.hold()


@contextmanager
def young_collections_only() -> Iterator[None]:
    """:func:`hold_young_collections` for the block."""
    release = hold_young_collections()
    try:
        yield
    finally:
        release()


class RealTimeScheduler:
    """Callbacks on one daemon thread, against the wall clock."""

    def __init__(self, seed: int | None = None, name: str = "kctl-scheduler") -> None:
        self.rng = random.Random(seed)
        self._start = time.monotonic()
        self._queue: list[_Entry] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def now(self) -> float:
        return time.monotonic() - self._start

    def schedule(self, delay: float, fn: Callable[[], None], name: str = "") -> Timer:
        with self._cond:
            entry = _Entry(self.now() + _delay(delay, name), next(self._seq), fn, name)
            heapq.heappush(self._queue, entry)
            self._cond.notify()
        return entry

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    if self._queue and self._queue[0].cancelled:
                        heapq.heappop(self._queue)
                        continue
                    wait = self._queue[0].when - self.now() if self._queue else None
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(None if wait is None else min(wait, threading.TIMEOUT_MAX))
                if self._stopped:
                    return
                entry = heapq.heappop(self._queue)
            try:
                entry.fn()
            except Exception:  # a failing callback must not stop every other timer
                log.exception("scheduled callback %s failed", entry.name or entry.fn)

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)


def _count(fn: Callable[[], None] | None) -> int:
    """Callbacks an entry of the simulated scheduler holds (0 once cancelled)."""
    if fn is None:
        return 0
    return len(fn.items) if type(fn) is _Batch else 1


def _delay(delay: float, name: str) -> float:
    """A callback's delay: at least 0; NaN or infinite is a programming error."""
    if not math.isfinite(delay):
        raise IllegalArgumentError(f"cannot schedule {name or 'a callback'} after {delay} seconds")
    return max(0.0, delay)
