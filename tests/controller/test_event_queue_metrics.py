"""The event-queue metrics of Kafka's ControllerEventManager, in simulated time: ``EventQueueSize``
(events waiting) and the ``EventQueueTimeMs`` histogram (how long each waited), which Kafka clears
once the queue has been empty for 300 s (``eventQueueTimeTimeoutMs``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kctl.controller import KafkaController
from kctl.errors import KctlError
from kctl.scheduler import SimulatedScheduler
from kctl.stores.memory import MemoryStore
from kctl.transports.inprocess import InProcessTransport

WAITING = 100
EMPTY_HISTOGRAM = {"EventQueueTimeMs": 0.0, "EventQueueTimeMsCount": 0, "EventQueueTimeMsMax": 0.0,
                   "EventQueueTimeMs50thPercentile": 0.0, "EventQueueTimeMs99thPercentile": 0.0}


def queue_metrics(controller: KafkaController) -> dict[str, float]:
    return {k: v for k, v in controller.metrics().items() if k.startswith("EventQueue")}


@pytest.fixture
def scheduler() -> SimulatedScheduler:
    return SimulatedScheduler()


@pytest.fixture
def controller(scheduler: SimulatedScheduler) -> Iterator[KafkaController]:
    """A controller that received a request every second for 100 s before its event thread started
    (at t = 100 s), so the requests waited 100 s, 99 s, …, 1 s."""
    controller = KafkaController(1, MemoryStore(), InProcessTransport(scheduler=scheduler), clock=scheduler)
    answers = []
    for _ in range(WAITING):
        answers.append(controller.list_partition_reassignments())
        scheduler.advance(1.0)
    assert queue_metrics(controller) == {"EventQueueSize": WAITING, **EMPTY_HISTOGRAM}
    controller.event_manager.start()
    scheduler.advance(0.0)
    assert {a.exception().error.name for a in answers if isinstance(a.exception(), KctlError)} == {"NOT_CONTROLLER"}
    yield controller
    controller.shutdown()


def test_queue_time_of_events_that_waited(controller: KafkaController) -> None:
    """Yammer's statistics of 1,000 … 100,000 ms: the mean, the max, and percentiles interpolated
    between neighbours at position q × (n + 1)."""
    assert queue_metrics(controller) == {
        "EventQueueSize": 0,
        "EventQueueTimeMs": 50_500.0,
        "EventQueueTimeMsCount": 100,
        "EventQueueTimeMsMax": 100_000.0,
        "EventQueueTimeMs50thPercentile": 50_500.0,  # between the 50th (50 s) and 51st (51 s) values
        "EventQueueTimeMs99thPercentile": 99_990.0,  # 99 s + 0.99 × (100 s − 99 s)
    }
    assert controller.metrics()["EventsProcessed"] == WAITING


def test_the_histogram_is_cleared_after_300_s_without_events(
    controller: KafkaController, scheduler: SimulatedScheduler
) -> None:
    scheduler.advance(299.0)
    assert queue_metrics(controller)["EventQueueTimeMsCount"] == WAITING
    scheduler.advance(1.0)
    assert queue_metrics(controller) == {"EventQueueSize": 0, **EMPTY_HISTOGRAM}
    assert controller.metrics()["EventsProcessed"] == WAITING  # only the histogram is reset


def test_an_event_within_300_s_keeps_the_histogram(controller: KafkaController, scheduler: SimulatedScheduler) -> None:
    scheduler.advance(200.0)
    controller.list_partition_reassignments()  # processed at once: it waited 0 ms
    scheduler.advance(299.0)
    assert queue_metrics(controller)["EventQueueTimeMsCount"] == WAITING + 1
    assert queue_metrics(controller)["EventQueueTimeMs"] == pytest.approx(50_500.0 * WAITING / (WAITING + 1))
    scheduler.advance(1.0)  # 300 s after that event
    assert queue_metrics(controller)["EventQueueTimeMsCount"] == 0
