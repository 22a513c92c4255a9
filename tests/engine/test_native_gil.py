"""The native engine releases the GIL during its bulk calls, so the controller's other Python threads
(a ZooKeeper client's connection thread, transports, brokers in real-time mode) keep running while
it works through a million partitions.

A background thread counts as fast as it can; the count is read just before and just after one
long native call. A call that held the GIL would see no progress (the counting thread cannot run a
single bytecode while it waits for the GIL), so each of several calls must see some. The cluster
has a million partitions: a call must last long enough for the counting thread to wake up and take
the GIL while it runs, even on a busy machine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from kctl._engine import Engine
from kctl.model import ReplicaAssignment
from kctl.stores.memory import MemoryStore, MemoryTree

TOPICS, PER_TOPIC, BROKERS = 1_000, 1_000, 100


@pytest.fixture(scope="module")
def native() -> Engine:
    """The native engine itself (not the ``engine`` fixture: this suite is about ``kctl._engine``)."""
    engine = Engine()
    engine.set_live_brokers([(b, b) for b in range(BROKERS)])
    for t in range(TOPICS):
        engine.put_topic_assignment(
            f"t{t}", {p: ReplicaAssignment(tuple((t + p + i) % BROKERS for i in range(3))) for p in range(PER_TOPIC)}
        )
    return engine


class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop:
            self.count += 1


@pytest.fixture
def counter() -> Iterator[Counter]:
    counter = Counter()
    counter.thread.start()
    while counter.count == 0:  # running
        pass
    yield counter
    counter.stop = True
    counter.thread.join()


def progress_during(counter: Counter, call: Callable[[], object]) -> int:
    before = counter.count
    call()
    return counter.count - before


def test_a_context_scan_lets_other_threads_run(native: Engine, counter: Counter) -> None:
    brokers = list(range(BROKERS))
    assert len(native.replicas_on_brokers(brokers)) == TOPICS * PER_TOPIC * 3
    assert all(progress_during(counter, lambda: native.replicas_on_brokers(brokers)) > 0 for _ in range(5))


def test_a_store_backed_call_lets_other_threads_run(native: Engine, counter: Counter) -> None:
    """Bulk reads of partition states from the memory store (there are none: each read finds no
    node), the path every state-machine call takes."""
    store = MemoryStore(MemoryTree())
    parts = [(f"t{t}", p) for t in range(TOPICS) for p in range(PER_TOPIC)]
    assert native.load_leaderships(parts, store) == []
    assert all(progress_during(counter, lambda: native.load_leaderships(parts, store)) > 0 for _ in range(5))
