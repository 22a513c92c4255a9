"""The controller's hot operations at 10K, 100K and 1M partitions, on both engines (DESIGN §8).

Each benchmark times one controller event on a cluster of 100 brokers, RF 3, 1,000 partitions per
topic, held in the memory store, with a transport that only counts what it is given (the
controller's work, not a data plane's):

- ``engine:broker-failure``: a broker's session expires; the controller moves its leaders, shrinks
  ISRs and sends the requests (target: 1M partitions ≤ 50 ms on rust and ≥ 50× the reference);
- ``engine:controlled-shutdown``: a broker asks to shut down; its leaders move away;
- ``engine:preferred-election``: an admin election of every partition whose preferred leader is
  not leading (one broker's worth, after that broker came back);
- ``engine:auto-rebalance``: the periodic imbalance check, which elects the same partitions;
- ``engine:failover``: a new controller's initialisation, from winning the election to ready;
- ``engine:update-metadata``: building and sending UpdateMetadata for every partition to every
  broker (what broker startup sends the new brokers);
- ``engine:broker-failure-selector`` (rust engine only): the broker failure again, its offline
  elections made by each of ``SELECTORS`` in turn within every round: Kafka's rule natively, the
  same rule in a Python selector that never reads the cluster view, the same rule in one that reads
  the cluster-wide view (and in one that also reads every topic's config: a store read), and the
  rack-aware example selector of ``docs/plugins/`` (target: the view adds ≤ 10%). The times of all four, round by round, are in ``extra_info["selector_rounds"]``.

Every round starts from a healthy cluster: the (untimed) setup restarts the broker a round took
down and elects preferred leaders back. Garbage collection is frozen after each setup, so no round
pays for a full collection of the objects the memory store holds (both engines alike).

Sizes: ``KCTL_BENCH_PARTITIONS`` (comma-separated, e.g. ``10000,100000,1000000,10000000``), else
10K/100K/1M at the ``full`` scale and 10K under ``smoke``. The reference engine is skipped above
``KCTL_BENCH_REFERENCE_MAX`` partitions (default 1M): at 10M it would take hours. ``extra_info``
records the engine's heap bytes per partition (``Engine.heap_bytes``) for ``scripts/bench``.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import time
from dataclasses import dataclass, field, replace
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import kctl
from kctl.context import ENGINES
from kctl.controller import KafkaController
from kctl.controller import events as ev
from kctl.model import BrokerInfo, LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.plugins import get_plugin_host
from kctl.registry import LeaderSelectorRegistry
from kctl.scheduler import SimulatedScheduler
from kctl.selectors import ElectionBatch, ElectionKind
from kctl.stores.memory import MemoryStore, MemoryTree
from kctl.testing import register_plugin

from conftest import scale_of

if TYPE_CHECKING:
    from conftest import Scale

BROKERS = 100
RACKS = 3
RF = 3
PER_TOPIC = 1_000
CONFIG = {"auto.leader.rebalance.enable": False}
ROUNDS = {10_000: 5, 100_000: 3, 1_000_000: 3, 10_000_000: 3}


def rounds(cluster: Cluster) -> int:
    """Rounds per benchmark; one where each round's setup takes minutes (the reference engine
    from 1M partitions). The rust engine runs 3 at 10M as well: issue #16's target there is a
    median."""
    if cluster.partitions >= 1_000_000 and cluster.engine == "reference":
        return 1
    return ROUNDS.get(cluster.partitions, 1)


def sizes(scale: Scale) -> list[int]:
    text = os.environ.get("KCTL_BENCH_PARTITIONS")
    if text:
        return [int(n) for n in text.split(",")]
    return [10_000, 100_000, 1_000_000] if scale.name == "full" else [10_000]


class CountingChannel:
    """A controller channel that counts requests and partition states instead of sending them."""

    def __init__(self) -> None:
        self.requests = 0
        self.partition_states = 0

    def add_broker(self, broker: BrokerInfo) -> None:
        pass

    def remove_broker(self, broker_id: int) -> None:
        pass

    def send_request(self, broker_id: int, request: Any, callback: Callable[[Any], None] | None) -> None:
        self.requests += 1
        self.partition_states += len(request.partition_states)

    def shutdown(self) -> None:
        pass


class CountingTransport:
    def __init__(self) -> None:
        self.channel = CountingChannel()

    def controller_channel(self, controller_id: int) -> CountingChannel:
        return self.channel

    def bind_controller(self, controller_id: int, handler: Any) -> None:
        pass

    def unbind_controller(self, controller_id: int) -> None:
        pass


@dataclass
class Cluster:
    """A memory-store cluster with one active controller and a session per broker."""

    engine: str
    partitions: int
    tree: MemoryTree = field(default_factory=MemoryTree)
    scheduler: SimulatedScheduler = field(default_factory=lambda: SimulatedScheduler(0))
    sessions: dict[int, MemoryStore] = field(default_factory=dict)
    transport: CountingTransport = field(default_factory=CountingTransport)
    controller: KafkaController | None = None
    next_controller_id: int = 1_000
    victim: int = 0

    def build(self) -> None:
        """Topics of ``PER_TOPIC`` partitions, replicas placed round-robin, leaders preferred."""
        admin = MemoryStore(self.tree)
        for b in range(BROKERS):
            self.start_broker(b)
        for t in range(self.partitions // PER_TOPIC):
            assignment, states = {}, {}
            for p in range(PER_TOPIC):
                first = (t * PER_TOPIC + p) % BROKERS
                replicas = tuple((first + i) % BROKERS for i in range(RF))
                assignment[p] = ReplicaAssignment(replicas)
                states[TopicPartition(f"t{t}", p)] = LeaderIsrAndControllerEpoch(LeaderAndIsr(replicas[0], replicas), 0)
            admin.create_topic(f"t{t}", assignment)
            admin.create_partition_states(states, -1)
        self.fail_over()

    def start_broker(self, broker: int) -> None:
        session = MemoryStore(self.tree)
        session.register_broker(BrokerInfo(broker, rack=f"rack-{broker % RACKS}"))
        self.sessions[broker] = session

    def active(self) -> KafkaController:
        assert self.controller is not None and self.controller.is_active
        return self.controller

    def drain(self) -> None:
        self.scheduler.run_until(self.scheduler.now() + 1.0)

    def fail_over(self) -> None:
        """Retire the active controller (its session expires) and start a new one, untimed up to
        the point where it runs for election."""
        if self.controller is not None:
            old = self.controller
            old.store.expire_session()
            self.drain()
            old.shutdown()
        self.controller = KafkaController(
            self.next_controller_id, MemoryStore(self.tree), self.transport, CONFIG, engine=self.engine,
            clock=self.scheduler,
        )
        self.next_controller_id += 1
        self.controller.startup()
        self.drain()

    def take_down(self) -> int:
        """The broker the next round takes down (round-robin, so rounds differ)."""
        self.victim = (self.victim + 7) % BROKERS
        return self.victim

    def heal(self) -> None:
        """Every broker registered and live, in every ISR, every partition led by its preferred replica."""
        controller = self.active()
        for b in range(BROKERS):
            if controller.context.live_broker_epoch(b) is None or b in controller.context.shutting_down_broker_ids:
                self.restart_broker(b)
        self.elect_preferred()
        self.check_healthy()

    def restart_broker(self, broker: int) -> None:
        """A new session for the broker; once it has "caught up", the leaders add it back to their
        ISRs through AlterPartition, as the data plane would."""
        self.sessions[broker].expire_session()
        self.drain()
        self.start_broker(broker)
        self.drain()
        controller = self.active()
        ctx = controller.context
        by_leader: dict[int, dict[TopicPartition, LeaderAndIsr]] = {}
        for tp in ctx.partitions_on_broker(broker):
            current = ctx.partition_leadership(tp).leader_and_isr  # type: ignore[union-attr]
            if broker not in current.isr:
                by_leader.setdefault(current.leader, {})[tp] = replace(current, isr=(*current.isr, broker))
        for leader, changes in by_leader.items():
            future = controller.alter_partition(leader, ctx.live_broker_epoch(leader) or -1, changes)
            self.drain()
            assert all(isinstance(r, LeaderAndIsr) for r in future.result(0).values())

    def elect_preferred(self) -> None:
        self.active().event_manager.put(ev.AutoPreferredReplicaLeaderElection())
        self.drain()

    def imbalanced(self) -> list[TopicPartition]:
        """Partitions not led by their preferred replica."""
        ctx = self.active().context
        return [tp for tp in ctx.all_partitions() if ctx.partition_leadership(tp).leader_and_isr.leader  # type: ignore[union-attr]
                != ctx.partition_replica_assignment(tp)[0]]

    def check_healthy(self) -> None:
        metrics = self.active().metrics()
        assert metrics["OfflinePartitionsCount"] == 0
        assert metrics["PreferredReplicaImbalanceCount"] == 0, metrics
        assert metrics["GlobalPartitionCount"] == self.partitions

    def heap_bytes_per_partition(self) -> float | None:
        engine = getattr(self.active().context, "native", None)
        return None if engine is None else engine.heap_bytes() / self.partitions


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One ``cluster`` per selected size and engine (the reference engine up to
    ``KCTL_BENCH_REFERENCE_MAX`` partitions, and not for benchmarks of the native engine alone),
    ordered by size so that one is alive at a time."""
    if "cluster" not in metafunc.fixturenames:
        return
    reference_max = int(os.environ.get("KCTL_BENCH_REFERENCE_MAX", "1000000"))
    engines = ("rust",) if metafunc.function in NATIVE_ONLY else ENGINES
    params = [(e, n) for n in sizes(scale_of(metafunc.config)) for e in engines
              if e != "reference" or n <= reference_max]
    metafunc.parametrize("cluster", params, indirect=True, scope="module", ids=[f"{e}-{n}" for e, n in params])


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """One cluster per engine and size, reused by every operation (only one is alive at a time)."""
    engine, partitions = request.param
    gc.collect()
    built = Cluster(engine, partitions)
    built.build()
    built.check_healthy()
    yield built


def run_rounds(benchmark: Any, cluster: Cluster, prepare: Callable[[], Callable[[], object]],
               check: Callable[[object], None]) -> None:
    """``prepare`` (untimed) heals the cluster, sets the round up and returns the timed call;
    ``check`` asserts on what the last timed call did."""
    pending: list[Callable[[], object]] = []
    results: list[object] = []

    def setup() -> None:
        gc.unfreeze()
        cluster.heal()
        pending.append(prepare())
        gc.collect()
        gc.freeze()

    def timed() -> None:
        results.append(pending.pop()())

    describe(benchmark, cluster)
    try:
        benchmark.pedantic(timed, setup=setup, rounds=rounds(cluster), iterations=1)
    finally:
        gc.unfreeze()
    check(results[-1])


def describe(benchmark: Any, cluster: Cluster) -> None:
    benchmark.extra_info.update(
        engine=cluster.engine, partitions=cluster.partitions, brokers=BROKERS, rf=RF,
        heap_bytes_per_partition=cluster.heap_bytes_per_partition(),
    )


@pytest.mark.benchmark(group="engine:broker-failure")
def test_broker_failure(benchmark: Any, cluster: Cluster) -> None:
    def prepare() -> Callable[[], object]:
        broker = cluster.take_down()
        cluster.sessions[broker].expire_session()  # the watch queues the BrokerChange event
        return lambda: (cluster.drain(), broker)[1]

    run_rounds(benchmark, cluster, prepare, lambda broker: check_failed(cluster, broker))


def check_failed(cluster: Cluster, broker: object) -> None:
    """The broker is gone and leads nothing, and no partition is offline."""
    ctx = cluster.active().context
    assert broker not in ctx.live_broker_ids
    assert cluster.active().metrics()["OfflinePartitionsCount"] == 0
    assert not any(ctx.partition_leadership(tp).leader_and_isr.leader == broker  # type: ignore[union-attr]
                   for tp in ctx.partitions_on_broker(broker))


@pytest.mark.benchmark(group="engine:controlled-shutdown")
def test_controlled_shutdown(benchmark: Any, cluster: Cluster) -> None:
    def prepare() -> Callable[[], object]:
        broker = cluster.take_down()
        controller = cluster.active()
        future = controller.controlled_shutdown(broker, controller.context.live_broker_epoch(broker) or -1)

        def shut_down() -> object:
            cluster.drain()
            return future.result(0)

        return shut_down

    def check(still_led: object) -> None:
        assert still_led == []

    run_rounds(benchmark, cluster, prepare, check)


@pytest.mark.benchmark(group="engine:preferred-election")
def test_preferred_election(benchmark: Any, cluster: Cluster) -> None:
    def prepare() -> Callable[[], object]:
        imbalance(cluster)
        future = cluster.active().elect_leaders(cluster.imbalanced(), "preferred")

        def elect() -> object:
            cluster.drain()
            return future.result(0)

        return elect

    def check(results: object) -> None:
        assert results and all(not isinstance(r, Exception) for r in results.values())  # type: ignore[attr-defined]
        assert cluster.active().metrics()["PreferredReplicaImbalanceCount"] == 0

    run_rounds(benchmark, cluster, prepare, check)


@pytest.mark.benchmark(group="engine:auto-rebalance")
def test_auto_rebalance_check(benchmark: Any, cluster: Cluster) -> None:
    def prepare() -> Callable[[], object]:
        imbalance(cluster)
        moved = len(cluster.imbalanced())
        cluster.active().event_manager.put(ev.AutoPreferredReplicaLeaderElection())
        return lambda: (cluster.drain(), moved)[1]

    def check(moved: object) -> None:
        assert isinstance(moved, int) and moved > 0
        assert cluster.active().metrics()["PreferredReplicaImbalanceCount"] == 0

    run_rounds(benchmark, cluster, prepare, check)


def imbalance(cluster: Cluster) -> None:
    """Take a broker down and bring it back: the partitions it prefers are led by others."""
    cluster.restart_broker(cluster.take_down())


@pytest.mark.benchmark(group="engine:failover")
def test_failover(benchmark: Any, cluster: Cluster) -> None:
    def prepare() -> Callable[[], object]:
        old = cluster.active()
        old.store.expire_session()  # the next drain elects a new controller and initialises it
        cluster.scheduler.run_until(cluster.scheduler.now() + 0.5)
        old.shutdown()
        cluster.controller = KafkaController(
            cluster.next_controller_id, MemoryStore(cluster.tree), cluster.transport, CONFIG, engine=cluster.engine,
            clock=cluster.scheduler,
        )
        cluster.next_controller_id += 1
        return lambda: (cluster.controller.startup(), cluster.drain())  # type: ignore[union-attr]

    def check(_: object) -> None:
        cluster.check_healthy()

    run_rounds(benchmark, cluster, prepare, check)


@pytest.mark.benchmark(group="engine:update-metadata")
def test_update_metadata_batch(benchmark: Any, cluster: Cluster) -> None:
    channel = cluster.transport.channel

    def prepare() -> Callable[[], object]:
        controller = cluster.active()
        brokers = sorted(controller.context.live_or_shutting_down_broker_ids)

        def send() -> object:
            before = channel.requests, channel.partition_states
            controller._send_update_metadata_request(brokers, controller.context.partitions_with_leaders())
            return channel.requests - before[0], channel.partition_states - before[1]

        return send

    def check(sent: object) -> None:
        assert sent == (BROKERS, BROKERS * cluster.partitions)

    run_rounds(benchmark, cluster, prepare, check)


# --- Plugin selectors and the cluster view -------------------------------------------------------------


class PythonKafka:
    """Kafka's rule in Python, never reading the view: what any Python selector costs."""

    kind = ElectionKind.OFFLINE

    def select_leaders(self, batch: ElectionBatch) -> list[int]:
        return [allowed[0] for allowed in batch.allowed]


class ViewReadingKafka(PythonKafka):
    """Kafka's rule again (the same leaders, so the same work after the choice), after reading the
    cluster-wide view: every broker's rack, epoch and counts, and each new leader's rack."""

    def select_leaders(self, batch: ElectionBatch) -> list[int]:
        view = batch.cluster
        racks = {b: (broker.rack, broker.epoch, view.leader_counts[b], view.replica_counts[b])[0]
                 for b, broker in view.brokers.items()}
        leaders = super().select_leaders(batch)
        led_by_rack = dict.fromkeys(racks.values(), 0)
        for leader in leaders:
            led_by_rack[racks[leader]] += 1
        assert sum(led_by_rack.values()) == len(leaders) and view.controller_epoch > 0
        return leaders


class ViewAndConfigsReadingKafka(ViewReadingKafka):
    """The same, reading the config of every topic of the batch too (one bulk store read)."""

    def select_leaders(self, batch: ElectionBatch) -> list[int]:
        assert not any(batch.cluster.unclean_leader_election_enable(topic) for topic in batch.topics)
        return super().select_leaders(batch)


def _rack_spread() -> type:
    """The rack-aware example selector of ``docs/plugins/examples/rack_spread.py``."""
    path = Path(__file__).resolve().parents[1] / "docs" / "plugins" / "examples" / "rack_spread.py"
    spec = importlib.util.spec_from_file_location("rack_spread", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RackSpreadSelector  # type: ignore[no-any-return]


SELECTORS: dict[str, Callable[[], object] | None] = {
    "kafka": None,
    "python": PythonKafka,
    "view": ViewReadingKafka,
    "view-configs": ViewAndConfigsReadingKafka,
    "rack-spread": _rack_spread(),
}
"""``kctl.leader.selector.offline`` of each variant: None is the built-in, run natively."""


class BenchSelectors:
    @kctl.hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        for name, selector in SELECTORS.items():
            if selector is not None:
                register.add(selector_name(name), lambda config, selector=selector: selector(), kind=ElectionKind.OFFLINE)


@pytest.mark.benchmark(group="engine:broker-failure-selector")
def test_broker_failure_with_selectors(benchmark: Any, cluster: Cluster) -> None:
    """A broker failure whose offline elections each variant of ``SELECTORS`` makes, in turn within
    every round, so that whatever else the machine does falls on all of them alike. The benchmark's
    own timing is the view-reading selector's; ``extra_info["selector_rounds"]`` holds every
    variant's time in each round, each failure timed the same way (from a healthy cluster, garbage
    collection frozen)."""
    took: dict[str, list[float]] = {name: [] for name in SELECTORS}
    failed: list[int] = []

    def set_up(name: str) -> None:
        """Heal, choose the variant's selector, take a broker down: its BrokerChange is queued."""
        gc.unfreeze()
        cluster.heal()
        cluster.active().update_config({"kctl.leader.selector.offline": selector_name(name)})
        failed.append(cluster.take_down())
        cluster.sessions[failed[-1]].expire_session()
        gc.collect()
        gc.freeze()

    def fail(name: str) -> None:
        start = time.perf_counter()
        cluster.drain()
        took[name].append(time.perf_counter() - start)

    def setup() -> None:
        for name in SELECTORS:
            if name != "view":
                set_up(name)
                fail(name)
                gc.unfreeze()
                check_failed(cluster, failed[-1])
        set_up("view")

    describe(benchmark, cluster)
    with register_plugin(get_plugin_host(), BenchSelectors(), "bench-selectors"):
        try:
            benchmark.pedantic(lambda: fail("view"), setup=setup, rounds=SELECTOR_ROUNDS.get(cluster.partitions, 3),
                               iterations=1)
        finally:
            gc.unfreeze()
            cluster.active().update_config({"kctl.leader.selector.offline": "offline"})
    check_failed(cluster, failed[-1])
    benchmark.extra_info["selector_rounds"] = took


def selector_name(variant: str) -> str:
    return "offline" if SELECTORS[variant] is None else f"bench-{variant}"


NATIVE_ONLY = {test_broker_failure_with_selectors}
SELECTOR_ROUNDS = {1_000_000: 21}
"""Rounds of the selector comparison, each a failure per variant (3 below 1M): enough for medians
within a few per cent on a machine whose other work comes and goes."""
