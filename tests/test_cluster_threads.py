"""A real-time EmbeddedCluster used from many threads at once (defect 6 of issue 11).

Every public method may be called from any thread: reads of a controller's state run on its event
thread, reads of a broker's under its lock. The threads here create topics, add partitions, move
and elect leaders, describe and check invariants concurrently while the cluster works; none may
fail, and the end state must be what the calls asked for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.context import ENGINES
from kctl.errors import KctlError, UnknownTopicOrPartitionError
from kctl.model import TopicPartition

THREADS = 8
ROUNDS = 3
DEADLINE = 120.0
"""Seconds the threads get to finish (a hang is a failure, not a stuck suite)."""


def run_threads(work: Callable[[int], None]) -> list[BaseException]:
    """Run ``work(i)`` on THREADS threads at once; the errors they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def run(i: int) -> None:
        try:
            start.wait(30)
            work(i)
        except BaseException as e:  # reported by the test, with the thread's own traceback
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,), name=f"caller-{i}", daemon=True) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
    assert not any(t.is_alive() for t in threads), f"threads still running after {DEADLINE:g}s: a hang"
    return errors


@pytest.mark.parametrize("engine", ENGINES)
def test_concurrent_admin_calls_and_reads_from_many_threads(engine: str) -> None:
    with EmbeddedCluster(4, engine=engine, simulated=False, seed=3) as cluster:
        cluster.create_topic("base", partitions=THREADS, replication_factor=2)

        def work(i: int) -> None:
            base = TopicPartition("base", i)
            for j in range(ROUNDS):
                topic = f"t{i}-{j}"
                cluster.create_topic(topic, partitions=2, replication_factor=2, wait=False)
                cluster.create_partitions(topic, 3)
                assert [p.partition for p in cluster.describe(topic)] == [0, 1, 2]
                assert len(cluster.describe("base")) == THREADS
                cluster.elect_leaders([base], "preferred", wait=False)
                replicas = cluster.describe("base")[i].replicas
                cluster.reassign({base: tuple(reversed(replicas))}, wait=False)
                cluster.list_reassignments()
                assert cluster.metrics()["ActiveControllerCount"] == 1
                cluster.is_stable()
                cluster.check_invariants()
            cluster.delete_topic(f"t{i}-0", wait=False)

        errors = run_threads(work)
        assert errors == [], errors

        assert cluster.run_until_stable(timeout=60, what="the cluster to settle")
        for i in range(THREADS):
            with pytest.raises(UnknownTopicOrPartitionError):
                cluster.describe(f"t{i}-0")
            for j in range(1, ROUNDS):
                described = cluster.describe(f"t{i}-{j}")
                assert [p.partition for p in described] == [0, 1, 2]
                assert all(len(p.replicas) == 2 and p.leader in p.isr for p in described)
        stored = cluster.store.get_topic_assignments(["base"]).values["base"].partitions
        assert {p.partition: p.replicas for p in cluster.describe("base")} == {p: a.replicas for p, a in stored.items()}
        assert cluster.check_invariants() == []


@pytest.mark.parametrize("engine", ENGINES)
def test_brokers_stop_and_start_while_other_threads_read(engine: str) -> None:
    """Faults and restarts from one thread, reads and admin calls from the others."""
    with EmbeddedCluster(4, engine=engine, simulated=False, seed=5, controllers=2) as cluster:
        cluster.create_topic("t", partitions=4, replication_factor=3)

        def work(i: int) -> None:
            if i == 0:
                for broker in (3, 4, 2):
                    cluster.kill_broker(broker)
                    cluster.start_broker(broker)
                cluster.kill_controller()
                return
            for _ in range(ROUNDS):
                assert len(cluster.describe("t")) == 4
                cluster.metrics()
                cluster.live_brokers()
                cluster.metadata_mismatches()
                try:
                    cluster.elect_leaders([TopicPartition("t", i % 4)], "preferred", wait=False)
                except KctlError as e:  # a controller may move meanwhile: a clean refusal at most
                    assert e.error.name == "NOT_CONTROLLER", e

        errors = run_threads(work)
        assert errors == [], errors
        assert cluster.run_until_stable(timeout=60, what="the cluster to settle")
        assert cluster.live_brokers() == [1, 2, 3, 4]
        assert all(len(p.isr) == 3 for p in cluster.describe("t"))
        assert cluster.check_invariants() == []
