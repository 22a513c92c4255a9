"""A simulated cluster at scale: topic creation, a rolling restart and ``kctl demo`` (DESIGN §8: a
rolling restart of 100 brokers and 100K partitions in at most 10 s of wall time; ``kctl demo
--brokers 50 --partitions 5000`` in at most 15 s, its cost linear in its work).

Group ``cluster:create`` times creating topics that total the scale's partitions (RF 3) on a
started cluster, until the cluster is stable again. Group ``cluster:rolling-restart`` times
restarting every broker in turn: controlled shutdown, restart, wait until stable. Each round gets a
fresh cluster from its (untimed) setup, and correctness is asserted after the timed call. As in
``bench_engine.py``, garbage collection is frozen after the setup: the two million objects of a
full-size cluster would otherwise be traversed by every full collection the timed part triggers,
which measures CPython's collector rather than kctl. The size comes from ``--kctl-bench-scale``
or ``KCTL_BENCH_SCALE`` (see ``conftest.py``): CI's smoke run uses 10 brokers and 2K partitions,
``full`` is 100 brokers and 100K partitions.

Group ``cluster:demo`` plays ``kctl demo``'s scenario (two topics, a crash, a restart, the
reassignment of a whole topic, …, invariants checked after every step) as the command does, at a
quarter, half and all of its size: 50 brokers and topics of 5,000 partitions at ``full`` (the
command of DESIGN §8), 10 brokers and 500 at ``smoke``, ``B`` and ``P`` at ``<B>x<P>``. Its cost
is linear when the time per partition stays the same along the series; ``extra_info`` records the
requests and seconds of each step, and the CPU time of each round (``cpu_seconds``: the process's
user and system time, which a busy shared machine inflates far less than the wall time).

Group ``cluster:sim`` plays issue #16's simulation as ``kctl sim`` plays a scenario file: the
scale's partitions created (RF 3, topics of at most 50,000), a broker crashed and restarted, and a
topic holding 1% of the partitions reassigned, invariants checked after every step; one round,
with the CPU time of each step and the process's peak RSS (``--kctl-bench-scale 100x1000000``
is the issue's size: at most 120 s).
"""

from __future__ import annotations

import gc
import resource
import time
from typing import TYPE_CHECKING, Any

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.context import default_engine
from kctl.sim.demo import demo_scenario
from kctl.sim.runner import Report, StepResult, run_scenario
from kctl.sim.scenario import Scenario, parse_scenario

if TYPE_CHECKING:
    from conftest import Scale

RF = 3
TOPICS = 10
RACKS = 3
SEED = 0
TIMEOUT = 3600.0
"""Virtual seconds to wait for stability; a healthy cluster needs a few."""


def topic_sizes(partitions: int) -> dict[str, int]:
    """Up to ``TOPICS`` topics whose partition counts add up to ``partitions``."""
    count = min(TOPICS, partitions)
    return {f"topic-{t}": partitions // count + (1 if t < partitions % count else 0) for t in range(count)}


def new_cluster(engine: str, scale: Scale) -> EmbeddedCluster:
    """A started cluster on ``RACKS`` racks, without partition history or state-change lines (they
    would dominate memory; the lines are made only for a handler of ``kctl.state_change``, as
    ``kctl sim`` makes them)."""
    racks = [f"rack-{b % RACKS}" for b in range(scale.brokers)]
    cluster = EmbeddedCluster(scale.brokers, racks, engine=engine, seed=SEED, record_history=False,
                              record_state_changes=False)
    cluster.start()
    return cluster


def create_topics(cluster: EmbeddedCluster, sizes: dict[str, int]) -> EmbeddedCluster:
    for name, partitions in sizes.items():
        cluster.create_topic(name, partitions, RF, wait=False)
    cluster.run_until_stable(TIMEOUT, "the cluster to be stable after creating the topics")
    return cluster


def rolling_restart(cluster: EmbeddedCluster) -> EmbeddedCluster:
    for broker in cluster.broker_ids:
        cluster.shutdown_broker(broker)
        cluster.start_broker(broker)
        cluster.run_until_stable(TIMEOUT, f"the cluster to be stable after restarting broker {broker}")
    return cluster


def assert_healthy(cluster: EmbeddedCluster, sizes: dict[str, int]) -> None:
    """Every broker is up, every partition exists and is online with a full ISR, metadata agrees."""
    metrics = cluster.metrics()
    assert cluster.live_brokers() == cluster.broker_ids
    assert metrics["GlobalTopicCount"] == len(sizes)
    assert metrics["GlobalPartitionCount"] == sum(sizes.values())
    assert metrics["OfflinePartitionsCount"] == 0
    assert cluster.is_stable()


def describe_run(benchmark: Any, engine: str, scale: Scale) -> None:
    benchmark.extra_info.update(
        engine=engine, partitions=scale.partitions, brokers=scale.brokers, rf=RF, seed=SEED,
        topics=len(topic_sizes(scale.partitions)), scale=scale.name,
    )


@pytest.mark.benchmark(group="cluster:create")
def test_create(benchmark: Any, engine: str, bench_scale: Scale) -> None:
    sizes = topic_sizes(bench_scale.partitions)
    describe_run(benchmark, engine, bench_scale)
    cluster = benchmark.pedantic(
        create_topics, setup=lambda: ((new_cluster(engine, bench_scale), sizes), {}), rounds=1, iterations=1
    )
    try:
        assert_healthy(cluster, sizes)
    finally:
        cluster.stop()


@pytest.mark.benchmark(group="cluster:rolling-restart")
def test_rolling_restart(benchmark: Any, engine: str, bench_scale: Scale) -> None:
    sizes = topic_sizes(bench_scale.partitions)
    describe_run(benchmark, engine, bench_scale)
    before: dict[str, float] = {}

    def setup() -> tuple[tuple[EmbeddedCluster], dict[str, Any]]:
        cluster = create_topics(new_cluster(engine, bench_scale), sizes)
        before.update({str(b): agent.broker_epoch for b, agent in cluster.brokers.items()})
        before["controller"] = cluster.metrics()["ControllerEpoch"]
        gc.collect()
        gc.freeze()
        return (cluster,), {}

    try:
        cluster = benchmark.pedantic(rolling_restart, setup=setup, rounds=1, iterations=1)
    finally:
        gc.unfreeze()
    try:
        assert_healthy(cluster, sizes)
        # Every broker came back as a new process, and restarting the controller's broker moved it.
        assert all(agent.broker_epoch > before[str(b)] for b, agent in cluster.brokers.items())
        assert cluster.metrics()["ControllerEpoch"] > before["controller"]
    finally:
        cluster.stop()


DEMO_SIZES = {"smoke": (10, 500), "full": (50, 5_000)}
"""(brokers, partitions per topic) of the demo at each named scale."""
DEMO_ROUNDS = 3


def demo_size(scale: Scale, share: float) -> tuple[int, int]:
    brokers, partitions = DEMO_SIZES.get(scale.name, (scale.brokers, scale.partitions))
    return brokers, max(1, round(partitions * share))


@pytest.mark.benchmark(group="cluster:demo")
@pytest.mark.parametrize("share", [0.25, 0.5, 1.0])
def test_demo(benchmark: Any, bench_scale: Scale, share: float) -> None:
    brokers, partitions = demo_size(bench_scale, share)
    steps: list[dict[str, Any]] = []
    clock = {"last": 0.0}

    def record(result: StepResult) -> None:
        now = time.perf_counter()
        steps.append({"step": result.number, "action": result.action, "requests": result.requests,
                      "seconds": round(now - clock["last"], 3)})
        clock["last"] = now

    cpu_seconds: list[float] = []

    def play() -> Report:
        steps.clear()
        clock["last"] = time.perf_counter()
        started = time.process_time()
        try:
            return run_scenario(demo_scenario(brokers, partitions), engine=default_engine(), on_step=record,
                                record_requests=False)
        finally:
            cpu_seconds.append(round(time.process_time() - started, 3))

    report = benchmark.pedantic(play, rounds=DEMO_ROUNDS, iterations=1)
    benchmark.extra_info.update(
        engine=default_engine(), brokers=brokers, partitions=partitions, scale=bench_scale.name,
        requests=sum(s["requests"] for s in steps), steps=steps, cpu_seconds=cpu_seconds,
    )
    assert report.ok, report.failures + report.violations


SIM_TOPIC_PARTITIONS = 50_000
"""Partitions per topic of the large simulation (a topic of RF 3 must fit in one znode)."""


def sim_scenario(brokers: int, partitions: int) -> Scenario:
    """Issue #16's simulation: ``partitions`` partitions (RF 3) on ``brokers`` brokers, a broker
    crash, its restart and the reassignment of a topic holding 1% of the partitions onto half the
    brokers, invariants I1–I8 checked after every step."""
    moved = max(1, partitions // 100)
    rest = partitions - moved
    count = -(-rest // SIM_TOPIC_PARTITIONS)
    sizes = {"moved": moved} | {f"topic-{t}": rest // count + (1 if t < rest % count else 0) for t in range(count)}
    steps: list[dict[str, Any]] = [
        *({"action": "create_topic", "name": name, "partitions": size, "replication_factor": RF}
          for name, size in sizes.items() if size),
        {"action": "kill_broker", "broker": brokers},
        {"action": "start_broker", "broker": brokers},
        {"action": "reassign", "topic": "moved", "brokers": list(range(1, brokers // 2 + 1)), "timeout": 3600},
        {"action": "expect", "invariants": True, "stable": True, "offline_partitions": 0, "reassigning": []},
    ]
    data = {"name": "issue 16 simulation", "steps": steps,
            "cluster": {"brokers": brokers, "racks": RACKS, "seed": SEED}}
    return parse_scenario(data, "<bench>")


@pytest.mark.benchmark(group="cluster:sim")
def test_sim(benchmark: Any, bench_scale: Scale) -> None:
    """The scenario above played as ``kctl sim`` plays a file (creation included, no record of each
    request and answer kept): the whole run's CPU time and the process's peak RSS, one round
    (``100x1000000`` is issue #16's size)."""
    scenario = sim_scenario(bench_scale.brokers, bench_scale.partitions)
    steps: list[dict[str, Any]] = []
    clock = {"last": time.process_time()}

    def record(result: StepResult) -> None:
        now = time.process_time()
        steps.append({"step": result.number, "action": result.action, "requests": result.requests,
                      "cpu_seconds": round(now - clock["last"], 3)})
        clock["last"] = now

    def play() -> Report:
        clock["last"] = time.process_time()
        return run_scenario(scenario, engine=default_engine(), on_step=record, record_requests=False)

    started = time.process_time()
    report = benchmark.pedantic(play, rounds=1, iterations=1)
    benchmark.extra_info.update(
        engine=default_engine(), brokers=bench_scale.brokers, partitions=bench_scale.partitions, rf=RF,
        scale=bench_scale.name, cpu_seconds=round(time.process_time() - started, 3), steps=steps,
        peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    )
    assert report.ok, report.failures + report.violations
