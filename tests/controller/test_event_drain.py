"""A simulated controller drains a burst of events in one scheduler entry (``take_turn``), in
exactly the order, with the steps and the checks of one entry per event."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from kctl.controller.event_manager import ControllerEventManager
from kctl.controller.events import ControllerEvent, ControllerState
from kctl.scheduler import SimulatedScheduler, Timer


@dataclass(frozen=True)
class Probe(ControllerEvent):
    n: int = 0


class CountingScheduler(SimulatedScheduler):
    """Counts the entries scheduled under each name."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[str, int] = {}

    def schedule(self, delay: float, fn: Callable[[], None], name: str = "") -> Timer:
        self.entries[name] = self.entries.get(name, 0) + 1
        return super().schedule(delay, fn, name)


@pytest.fixture
def scheduler() -> CountingScheduler:
    return CountingScheduler()


def manager(scheduler: SimulatedScheduler, seen: list[Any], on_event: Callable[[int], None] = lambda n: None
            ) -> ControllerEventManager:
    def process(event: ControllerEvent) -> None:
        assert isinstance(event, Probe)
        seen.append(event.n)
        on_event(event.n)

    events = ControllerEventManager(process, scheduler, threaded=False, name="events")
    events.start()
    return events


def test_a_burst_of_events_is_one_scheduler_entry_and_one_step_per_event(scheduler: CountingScheduler) -> None:
    seen: list[Any] = []
    events = manager(scheduler, seen)
    for n in range(5):
        events.put(Probe(n))
    scheduler.advance(0.0)
    assert seen == [0, 1, 2, 3, 4]
    assert scheduler.entries["events"] == 1
    assert scheduler.steps == 5  # each event still counts as a step of the simulation
    assert events.stats.processed == 5 and events.stats.queue_time_ms.count == 5


def test_callbacks_due_at_the_same_instant_keep_their_place_between_events(scheduler: CountingScheduler) -> None:
    """Event 0 schedules a callback for now, and one was due before event 1 was queued: both run
    before event 1, as when each event was an entry of its own."""
    seen: list[Any] = []
    events = manager(scheduler, seen, lambda n: scheduler.schedule(0.0, lambda: seen.append(f"after {n}")))
    events.put(Probe(0))
    scheduler.schedule(0.0, lambda: seen.append("queued"))
    events.put(Probe(1))
    events.put(Probe(2))
    scheduler.advance(0.0)
    assert seen == [0, "queued", "after 0", 1, "after 1", 2, "after 2"]


def test_a_condition_checked_before_each_callback_sees_every_event(scheduler: CountingScheduler) -> None:
    seen: list[Any] = []
    events = manager(scheduler, seen)
    for n in range(4):
        events.put(Probe(n))
    assert scheduler.run_until(1.0, until=lambda: len(seen) == 2)
    assert seen == [0, 1] and events.queue_size == 2
    assert scheduler.run_until(1.0, until=lambda: not events.queue_size, settled=True)
    assert seen == [0, 1, 2, 3]


def test_a_scheduler_step_runs_one_event(scheduler: CountingScheduler) -> None:
    seen: list[Any] = []
    events = manager(scheduler, seen)
    for n in range(3):
        events.put(Probe(n))
    assert scheduler.step() and seen == [0]
    assert scheduler.step() and seen == [0, 1]


@dataclass(frozen=True)
class Answer(ControllerEvent):
    """An event whose processing does nothing but be counted (queued with ``put_repeatable``)."""

    broker: int = 0
    preempted: list[int] | None = field(default=None, compare=False)
    state: ClassVar[ControllerState] = ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED

    def preempt(self) -> None:
        if self.preempted is not None:
            self.preempted.append(self.broker)


def burst(events: ControllerEventManager, repeatable: bool, preempted: list[int] | None = None) -> None:
    """Three answers, an ordinary event, two answers: queued one by one or as repeatable events."""
    put = events.put_repeatable if repeatable else events.put
    for broker in (1, 2, 3):
        put(Answer(broker, preempted))
    events.put(Probe(7))
    for broker in (4, 5):
        put(Answer(broker, preempted))


def answers_manager(scheduler: SimulatedScheduler, seen: list[Any], start: bool = True) -> ControllerEventManager:
    events = ControllerEventManager(seen.append, scheduler, threaded=False, name="events")
    if start:
        events.start()
    return events


def counted(events: ControllerEventManager, scheduler: SimulatedScheduler) -> tuple[object, ...]:
    """What a run shows of the events: processed, queue times, each state's count, steps."""
    stats = events.stats
    queue_time = stats.queue_time_ms
    return (stats.processed, queue_time.count, queue_time.total, queue_time.max, queue_time.snapshot().quantiles,
            sorted((s.name, h.count) for s, h in stats.processing_time_ms.items()), scheduler.steps)


def test_repeatable_events_of_one_instant_share_an_entry_and_count_as_each() -> None:
    runs = {}
    for repeatable in (True, False):
        scheduler, seen = SimulatedScheduler(), []
        events = answers_manager(scheduler, seen)
        burst(events, repeatable)
        assert events.queue_size == 6 and not events.is_empty()
        scheduler.advance(0.0)
        assert events.queue_size == 0 and events.is_empty()
        runs[repeatable] = counted(events, scheduler), [e.broker if isinstance(e, Answer) else "probe" for e in seen]

    assert runs[True][0] == runs[False][0]
    assert runs[True][0][0] == 6 and runs[True][0][-1] == 6  # six events, six steps
    assert runs[False][1] == [1, 2, 3, "probe", 4, 5]
    assert runs[True][1] == [1, "probe", 4]  # each entry's event processed once, the others counted


def test_repeats_queued_at_other_instants_keep_their_own_queue_times() -> None:
    """Before the manager runs, answers queued at 0 and at 1.5 s are two entries: each answer's
    queue time is its own, as when queued one by one."""
    runs = {}
    for repeatable in (True, False):
        scheduler, seen = SimulatedScheduler(), []
        events = answers_manager(scheduler, seen, start=False)
        put = events.put_repeatable if repeatable else events.put
        put(Answer(1))
        put(Answer(2))
        scheduler.advance(1.5)
        put(Answer(3))
        events.start()
        scheduler.advance(0.0)
        runs[repeatable] = counted(events, scheduler), len(seen)

    assert runs[True][0] == runs[False][0] and runs[True][0][2] == 3000.0  # two answers queued 1.5 s
    assert runs[True][1] == 2 and runs[False][1] == 3


def test_a_condition_checked_before_each_callback_sees_each_repeat() -> None:
    """Watched between callbacks, each repeat is a scheduler entry of its own, as each event is."""
    scheduler, seen = SimulatedScheduler(), []
    events = answers_manager(scheduler, seen)
    burst(events, True)

    assert scheduler.run_until(1.0, until=lambda: events.stats.processed == 2)
    assert events.stats.processed == 2 and events.queue_size == 4 and scheduler.steps == 2
    scheduler.advance(0.0)
    assert events.stats.processed == 6 and scheduler.steps == 6


def test_a_callback_due_at_the_same_instant_runs_between_repeats() -> None:
    """A callback due now when the first repeat is processed runs before the second, as it would
    between events queued one by one; the repeats left are counted after it (the entry's event
    processed again for the first of them: any answer of the kind would do)."""
    scheduler, seen = SimulatedScheduler(), []
    events = answers_manager(scheduler, seen)
    for broker in (1, 2, 3):
        events.put_repeatable(Answer(broker))
    scheduler.schedule(0.0, lambda: seen.append(f"callback at {events.stats.processed}"))
    scheduler.advance(0.0)

    assert [e if isinstance(e, str) else e.broker for e in seen] == [1, "callback at 1", 1]
    assert events.stats.processed == 3 and scheduler.steps == 4


def test_clearing_the_queue_preempts_every_repeat() -> None:
    scheduler, seen = SimulatedScheduler(), []
    events = answers_manager(scheduler, seen)
    preempted: list[int] = []
    burst(events, True, preempted)
    events.clear_and_put(Probe(9))

    assert preempted == [1, 1, 1, 4, 4] and events.queue_size == 1


@pytest.mark.parametrize("threaded", [False, True])
def test_repeats_queued_at_once_count_as_queued_one_after_another(threaded: bool) -> None:
    """``put_repeatable(event, times)`` is ``times`` calls in a row: the same entries, counts,
    queue times and steps (on an event thread, each processed alone); once closed, each repeat
    is preempted."""
    runs = {}
    for at_once in (True, False):
        scheduler, seen = SimulatedScheduler(), []
        events = ControllerEventManager(seen.append, scheduler, threaded=threaded, name="events")
        events.start()

        for answer, times in [(Answer(1), 3), (Probe(7), 0), (Answer(4), 2)]:
            if not times:
                events.put(answer)
            elif at_once:
                events.put_repeatable(answer, times)
            else:
                for _ in range(times):
                    events.put_repeatable(answer)
        if threaded:
            deadline = time.monotonic() + 30
            while events.stats.processed < 6 and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            assert events.queue_size == 6
            scheduler.advance(0.0)
        runs[at_once] = counted(events, scheduler), [e.broker if isinstance(e, Answer) else "probe" for e in seen]
        preempted: list[int] = []
        events.close()
        events.put_repeatable(Answer(5, preempted), 3)
        assert preempted == [5, 5, 5]

    assert runs[True] == runs[False] and runs[True][0][0] == 6
    assert runs[True][1] == ([1, 1, 1, "probe", 4, 4] if threaded else [1, "probe", 4])
