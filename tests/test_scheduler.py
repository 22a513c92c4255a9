"""The simulated scheduler's order: by time, then by submission; cancelled callbacks never run;
the collector during a simulation."""

from __future__ import annotations

import gc

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.errors import IllegalArgumentError, IllegalStateError
from kctl.scheduler import GC_THRESHOLDS, SimulatedScheduler, hold_young_collections


def test_callbacks_run_by_time_then_in_submission_order() -> None:
    scheduler, ran = SimulatedScheduler(), []
    for name, delay in [("b1", 0.002), ("a1", 0.001), ("b2", 0.002), ("now", 0.0), ("a2", 0.001)]:
        scheduler.schedule(delay, lambda name=name: ran.append(name))  # type: ignore[misc]
    scheduler.schedule(0.001, lambda: scheduler.schedule(0.001, lambda: ran.append("a1+0.001")))
    scheduler.schedule(0.001, lambda: scheduler.schedule(0.0, lambda: ran.append("a+0")))
    assert scheduler.pending() == 7 and scheduler.next_time() == 0.0
    scheduler.advance(1.0)
    assert ran == ["now", "a1", "a2", "a+0", "b1", "b2", "a1+0.001"]
    assert scheduler.steps == 9 and scheduler.pending() == 0 and scheduler.next_time() is None
    assert scheduler.now() == 1.0


def test_cancelled_callbacks_are_skipped_everywhere() -> None:
    scheduler, ran = SimulatedScheduler(), []
    first = scheduler.schedule(0.5, lambda: ran.append("first"))
    scheduler.schedule(0.5, lambda: ran.append("second"))
    alone = scheduler.schedule(0.25, lambda: ran.append("alone"))
    alone.cancel()
    first.cancel()
    assert scheduler.pending() == 1 and scheduler.next_time() == 0.5
    assert scheduler.step() and ran == ["second"] and scheduler.now() == 0.5
    assert not scheduler.step() and scheduler.steps == 1


def test_a_condition_is_checked_between_instants_when_settled() -> None:
    scheduler, ran = SimulatedScheduler(), []
    for n in range(3):
        scheduler.schedule(0.1, lambda n=n: ran.append(n))  # type: ignore[misc]
    assert scheduler.run_until(1.0, until=lambda: len(ran) == 1)
    assert ran == [0]
    assert scheduler.run_until(1.0, until=lambda: len(ran) >= 1, settled=True)  # holds before the first
    assert not scheduler.run_until(1.0, until=lambda: len(ran) == 2, settled=True)  # never seen mid-instant
    assert ran == [0, 1, 2] and scheduler.now() == 1.0


@pytest.mark.parametrize("delay", [float("nan"), float("inf")])
def test_a_delay_that_is_not_a_finite_number_is_refused(delay: float) -> None:
    with pytest.raises(IllegalArgumentError, match="cannot schedule"):
        SimulatedScheduler().schedule(delay, lambda: None)


def test_a_negative_delay_means_now() -> None:
    scheduler, ran = SimulatedScheduler(), []
    scheduler.schedule(0.0, lambda: ran.append("first"))
    scheduler.schedule(-1.0, lambda: ran.append("second"))
    scheduler.advance(0.0)
    assert ran == ["first", "second"] and scheduler.now() == 0.0


def batched_run(scheduler: SimulatedScheduler, ran: list[str], calls: list[list[str]] | None = None) -> None:
    """A fan-out of batched callbacks at 0.1 (one of them scheduling another now), a plain
    callback between two runs of them, and a batched one of another kind; ``calls`` gets the
    items of each call."""
    def deliver(items: list[str]) -> None:
        if calls is not None:
            calls.append(list(items))
        for item in items:
            ran.append(item)
            if item == "d2":
                scheduler.schedule_batched(deliver, 0.0, "d2+0")

    def other(items: list[str]) -> None:
        ran.extend(items)

    for item in ("d1", "d2", "d3"):
        scheduler.schedule_batched(deliver, 0.1, item)
    scheduler.schedule(0.1, lambda: ran.append("plain"))
    scheduler.schedule_batched(deliver, 0.1, "d4")
    scheduler.schedule_batched(other, 0.1, "o1")
    scheduler.schedule_batched(deliver, 0.2, "d5")


def test_batched_callbacks_run_as_callbacks_of_their_own_would() -> None:
    scheduler, ran, calls = SimulatedScheduler(), [], []
    batched_run(scheduler, ran, calls)
    assert scheduler.pending() == 7

    scheduler.advance(1.0)

    assert ran == ["d1", "d2", "d3", "plain", "d4", "o1", "d2+0", "d5"]
    assert scheduler.steps == 8 and scheduler.pending() == 0
    assert calls == [["d1", "d2", "d3"], ["d4"], ["d2+0"], ["d5"]]  # a batch is one call


@pytest.mark.parametrize("stop_after", range(1, 8))
def test_a_condition_checked_between_callbacks_stops_inside_a_batch(stop_after: int) -> None:
    scheduler, ran = SimulatedScheduler(), []
    batched_run(scheduler, ran)

    assert scheduler.run_until(1.0, until=lambda: len(ran) == stop_after)

    expected = ["d1", "d2", "d3", "plain", "d4", "o1", "d2+0", "d5"]
    assert ran == expected[:stop_after] and scheduler.steps == stop_after
    assert scheduler.pending() == len(expected) - stop_after - (stop_after < 2)  # d2+0 is not scheduled before d2 runs
    scheduler.advance(1.0)
    assert ran == expected


def test_one_step_runs_one_batched_callback() -> None:
    scheduler, ran = SimulatedScheduler(), []
    batched_run(scheduler, ran)
    while scheduler.step():
        pass
    assert ran == ["d1", "d2", "d3", "plain", "d4", "o1", "d2+0", "d5"] and scheduler.steps == 8


def test_appending_to_the_open_batch_is_scheduling_one_more_item_of_it() -> None:
    """``open_batch`` is the items of the batch scheduled last until anything else is scheduled
    or the batch starts running: appending to it then is a ``schedule_batched`` of that item."""
    calls: list[list[str]] = []
    scheduler = SimulatedScheduler()

    def deliver(items: list[str]) -> None:
        calls.append(list(items))
        if items[0] == "d1":  # running: closed, so a message scheduled now for now is a batch of its own
            assert scheduler.open_batch is not items
            assert scheduler.schedule_batched(deliver, 0.0, "d1+0") is scheduler.open_batch is not items

    batch = scheduler.schedule_batched(deliver, 0.1, "d1")
    assert scheduler.open_batch is batch
    batch.append("d2")
    assert scheduler.schedule_batched(deliver, 0.1, "d3") is batch is scheduler.open_batch
    scheduler.schedule(0.2, lambda: calls.append(["plain"]))
    assert scheduler.open_batch is None  # a later instant: the batch stays last at 0.1, and joinable
    assert scheduler.schedule_batched(deliver, 0.1, "d4") is batch is scheduler.open_batch
    other = scheduler.schedule_batched(deliver, 0.2, "d5")  # another instant: a batch of its own
    assert other is not batch and scheduler.open_batch is other
    assert scheduler.pending() == 6

    scheduler.advance(1.0)

    assert calls == [["d1", "d2", "d3", "d4"], ["d1+0"], ["plain"], ["d5"]] and scheduler.steps == 7
    assert scheduler.open_batch is None


def test_a_simulated_cluster_collects_only_young_objects_while_it_runs() -> None:
    """A started simulated cluster collects only young objects (its millions of kept requests and
    data-plane objects are not walked again by the collections of the older generations), in its
    waits and between them, and gives the collector its thresholds back when it stops, even after
    a failed wait."""
    saved = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []

    def stable(cluster: EmbeddedCluster) -> bool:
        seen.append(gc.get_threshold())
        return cluster.is_stable()

    with EmbeddedCluster(3, seed=1) as cluster:
        seen.append(gc.get_threshold())
        cluster.create_topic("t", 4, 3, wait=False)
        assert cluster.run_until(lambda: stable(cluster), 60.0)
        seen.append(gc.get_threshold())
        with pytest.raises(IllegalStateError, match="never"):
            cluster.run_until(lambda: bool(seen.append(gc.get_threshold())), 1.0, "never")
        seen.append(gc.get_threshold())
    assert gc.get_threshold() == saved
    assert len(seen) >= 5 and set(seen) == {GC_THRESHOLDS}


def test_the_older_generations_are_not_collected_between_a_simulated_cluster_s_waits() -> None:
    """What a wait built is not walked by a collection of the older generations as soon as it
    ends: objects made between two waits start no such collection."""
    older: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] > 0:
            older.append(info["generation"])

    with EmbeddedCluster(3, seed=1) as cluster:
        gc.callbacks.append(watch)
        try:
            for topic in ("a", "b", "c"):
                cluster.create_topic(topic, 4, 3)
                made = [[] for _ in range(20_000)]  # what code between two waits allocates
                del made
        finally:
            gc.callbacks.remove(watch)
    assert older == []


def test_holds_on_young_collections_nest() -> None:
    """Two simulated clusters: the thresholds come back when the last one stops; a release
    counts once."""
    saved = gc.get_threshold()
    first, second = EmbeddedCluster(1, seed=1), EmbeddedCluster(1, seed=2)
    first.start()
    second.start()
    first.stop()
    first.stop()
    assert gc.get_threshold() == GC_THRESHOLDS
    second.stop()
    assert gc.get_threshold() == saved
    release = hold_young_collections()
    release()
    release()
    assert gc.get_threshold() == saved
