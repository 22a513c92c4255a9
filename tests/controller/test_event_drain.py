"""A simulated controller drains a burst of events in one scheduler entry (``take_turn``), in
exactly the order, with the steps and the checks of one entry per event."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kctl.controller.event_manager import ControllerEventManager
from kctl.controller.events import ControllerEvent
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
