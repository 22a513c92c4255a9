"""The controller's event table: every event kind has its handler, and an event without one is a
clear error answered to its caller, not an AttributeError that leaves the caller waiting."""

from __future__ import annotations

import dataclasses
import inspect
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.controller import events as ev
from kctl.errors import IllegalStateError

from tests.support.controller import active


@dataclass(frozen=True)
class _Unheard(ev.ControllerEvent):
    """An event kind the controller was never taught (a plugin's, or one added without a handler)."""

    future: Future[Any] = field(default_factory=Future, compare=False)


def test_an_event_without_a_handler_fails_its_future_and_the_controller_goes_on() -> None:
    with EmbeddedCluster(3, seed=1) as cluster:
        controller = active(cluster)
        unheard = _Unheard()
        controller.event_manager.put(unheard)
        cluster.run_until(unheard.future.done, what="the unknown event to be answered")

        error = unheard.future.exception()
        assert isinstance(error, IllegalStateError)
        assert "_Unheard" in str(error)
        # Nothing else was disturbed: the controller still serves the next request.
        assert cluster.create_topic("t", partitions=2, replication_factor=2)
        assert cluster.check_invariants() == []


def _processed_event_types() -> list[type[ev.ControllerEvent]]:
    """Every concrete event of ``events.py`` that reaches the controller (ShutdownEventThread stops
    the event manager's loop instead)."""
    bases = {ev.ControllerEvent, ev.BrokerResponseReceived, ev.ShutdownEventThread}
    return [
        cls for _, cls in inspect.getmembers(ev, inspect.isclass)
        if issubclass(cls, ev.ControllerEvent) and cls.__module__ == ev.__name__
        and cls not in bases and not cls.__name__.startswith("_") and not cls.__subclasses__()
    ]


@pytest.mark.parametrize("event_type", _processed_event_types(), ids=lambda cls: cls.__name__)
def test_every_event_kind_has_a_handler(event_type: type[ev.ControllerEvent]) -> None:
    with EmbeddedCluster(1, seed=0) as cluster:
        assert event_type in active(cluster)._handlers


@pytest.mark.parametrize("event_type", _processed_event_types(), ids=lambda cls: cls.__name__)
def test_an_event_is_built_with_what_it_is_about(event_type: type[ev.ControllerEvent]) -> None:
    """Keyword-only fields without stand-in defaults (no ``ControlledShutdown(broker_id=0)``): an
    event missing its subject fails where it is built, not as a wrong broker or topic later."""
    for f in dataclasses.fields(event_type):
        assert f.kw_only, f"{event_type.__name__}.{f.name} is positional"
        if f.name != "future":
            assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, (
                f"{event_type.__name__}.{f.name} has a default"
            )
