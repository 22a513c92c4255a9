"""Unbounded work and hangs from outside input are refused up front (defect 4 of issue 11).

Sizes are checked before anything is allocated (a topic whose assignment cannot fit in one znode,
a simulated cluster of a hundred million brokers), durations are finite, not negative and at most
a day, and nothing is written when a request is refused. A regression must fail, not hang the
suite or eat the machine: the command line runs in a subprocess with a timeout and a memory cap,
API calls on a thread with a deadline.
"""

from __future__ import annotations

import math
import resource
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from kctl import admin
from kctl.cluster import EmbeddedCluster
from kctl.errors import IllegalArgumentError, InvalidPartitionsError, InvalidReplicaAssignmentError
from kctl.model import BrokerInfo, EndPoint, ReplicaAssignment, TopicPartition
from kctl.scheduler import RealTimeScheduler, SimulatedScheduler
from kctl.sim import ScenarioError, parse_scenario
from kctl.stores.base import TopicAssignment
from kctl.stores.memory import MemoryStore
from kctl.stores.zkdata import TopicZNode
from kctl.stores.zookeeper import JUTE_MAXBUFFER, ZooKeeperStore
from kctl.testing.zookeeper import ZooKeeperEnsemble, zookeeper_chroot, zookeeper_server
from kctl.tools.client import AdminClient

__all__ = ["zookeeper_chroot", "zookeeper_server"]

T = TypeVar("T")

KCTL = str(Path(sys.executable).with_name("kctl"))
DEADLINE = 60.0
"""Seconds any refusal may take; far more than one needs, far less than a hang."""
MEMORY_CAP = 3 << 30
"""Bytes of address space a ``kctl`` subprocess may use: a regression that allocates gigabytes
fails with a MemoryError instead of taking the machine down."""


def kctl(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``kctl`` command line in a subprocess, with a timeout and a memory cap."""

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    try:
        return subprocess.run([KCTL, *args], capture_output=True, text=True, timeout=DEADLINE,
                              preexec_fn=cap_memory, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kctl {' '.join(args)} still ran after {DEADLINE:g}s: a hang")


def within(call: Callable[[], T]) -> T:
    """``call()`` on a thread of its own, failing the test if it has not returned by the deadline."""
    outcome: list[T] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as e:  # handed to the test
            error.append(e)

    thread = threading.Thread(target=run, name="bounded-call", daemon=True)
    thread.start()
    thread.join(DEADLINE)
    if thread.is_alive():
        pytest.fail(f"the call still ran after {DEADLINE:g}s: a hang")
    if error:
        raise error[0]
    return outcome[0]


# --- Durations ---------------------------------------------------------------------------------------


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("seconds", [math.nan, -5, math.inf, 1e300, 86_401])
def test_advancing_a_cluster_by_a_bad_duration_is_refused_and_time_stands_still(seconds: float) -> None:
    with EmbeddedCluster(3) as cluster:
        now = cluster.now()
        with pytest.raises(IllegalArgumentError, match=r"seconds must be at least 0 and at most 86400 seconds"):
            within(lambda: cluster.advance(seconds))
        assert cluster.now() == now
        with pytest.raises(IllegalArgumentError, match=r"timeout must be"):
            within(lambda: cluster.run_until(lambda: False, timeout=seconds))
        with pytest.raises(IllegalArgumentError, match=r"timeout must be"):
            within(lambda: cluster.shutdown_broker(3, timeout=seconds))
        assert cluster.now() == now and cluster.live_brokers() == [1, 2, 3]


@pytest.mark.usefixtures("engine")
def test_a_day_of_simulated_time_is_accepted() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", partitions=2, replication_factor=2)
        within(lambda: cluster.advance(86_400))
        assert cluster.now() >= 86_400 and cluster.check_invariants() == []


def test_a_simulation_cannot_run_until_a_nan_deadline() -> None:
    scheduler = SimulatedScheduler()
    scheduler.schedule(1.0, lambda: scheduler.schedule(1.0, lambda: None))
    with pytest.raises(IllegalArgumentError, match="NaN deadline"):
        within(lambda: scheduler.run_until(math.nan))
    with pytest.raises(IllegalArgumentError, match="after nan seconds"):
        scheduler.schedule(math.nan, lambda: None)


def test_a_timer_far_in_the_future_does_not_stop_the_real_time_scheduler() -> None:
    """Python's waits overflow past ``threading.TIMEOUT_MAX`` (a huge config value, say); the
    timer thread must keep running the timers that are due."""
    scheduler = RealTimeScheduler(name="far-timer-test")
    try:
        scheduler.schedule(1e12, lambda: None, "far")
        for _ in range(2):  # after the first, the far timer is the only one the thread waits for
            ran = threading.Event()
            scheduler.schedule(0.01, ran.set, "near")
            assert ran.wait(10), "the timer thread died"
    finally:
        scheduler.shutdown()


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0", "1e300", "1 day"])
def test_command_line_durations_are_checked_before_anything_runs(value: str) -> None:
    for args in (["topics", "list", "--zk", "127.0.0.1:1", "--zk-timeout", value],
                 ["broker", "--id", "1", "--zk", "127.0.0.1:1", "--fetch-interval", value],
                 ["elect-leaders", "--zk", "127.0.0.1:1", "--election-type", "preferred", "--all-topic-partitions",
                  "--timeout", value]):
        done = kctl(*args)
        flag = args[-2]
        assert done.returncode == 2, done.stderr
        assert f"error: argument {flag}: " in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("name", "least"),
                         [("zookeeper.session.timeout.ms", 1), ("request.timeout.ms", 0), ("controller.socket.timeout.ms", 0)])
def test_millisecond_timeouts_are_kafka_ints(name: str, least: int) -> None:
    """Kafka's INT timeouts end at 2^31-1 ms; a larger session timeout crashed kazoo's handshake."""
    done = kctl("controller", "--id", "1", "--zk", "127.0.0.1:1", "--config", f"{name}={10**20}")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == f"kctl: error: Invalid value {10**20} for configuration {name}: must be in [{least}, 2147483647]\n"


@pytest.mark.usefixtures("engine")
def test_an_election_with_a_negative_timeout_writes_nothing() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        zxid = cluster.store.tree.zxid  # type: ignore[attr-defined]
        with pytest.raises(IllegalArgumentError, match="election timeout must be more than 0"):
            AdminClient.for_cluster(cluster).elect_leaders("preferred", [TopicPartition("t", 0)], timeout=-1)
        assert cluster.store.tree.zxid == zxid  # type: ignore[attr-defined]
        assert cluster.store.get_preferred_replica_election() is None


# --- Sizes ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("engine")
def test_a_topic_too_large_for_a_znode_is_refused_before_its_replicas_are_placed() -> None:
    with EmbeddedCluster(3) as cluster:
        zxid = cluster.store.tree.zxid  # type: ignore[attr-defined]
        started = time.monotonic()
        with pytest.raises(InvalidPartitionsError, match=rf"jute.maxbuffer, {JUTE_MAXBUFFER} bytes"):
            within(lambda: cluster.create_topic("big", partitions=2**31 - 1, replication_factor=1))
        fits = admin.max_partitions(3)
        with pytest.raises(InvalidPartitionsError, match=f"at most {fits} partitions fit"):
            within(lambda: cluster.create_topic("big", partitions=fits + 1, replication_factor=3))
        assert time.monotonic() - started < 5
        assert cluster.store.tree.zxid == zxid and "big" not in cluster.store.get_all_topics()  # type: ignore[attr-defined]

        cluster.create_topic("small", partitions=1, replication_factor=1)
        zxid = cluster.store.tree.zxid  # type: ignore[attr-defined]
        with pytest.raises(InvalidPartitionsError, match="Topic 'small' cannot have 2147483647 partitions"):
            within(lambda: cluster.create_partitions("small", 2**31 - 1))
        assert cluster.store.tree.zxid == zxid and len(cluster.describe("small")) == 1  # type: ignore[attr-defined]


@pytest.mark.usefixtures("engine")
def test_the_largest_topic_that_fits_is_stored_in_full() -> None:
    """The bound is exact for one-digit broker ids: one partition more would not fit."""
    fits = admin.max_partitions(3)
    assert admin.least_topic_znode_bytes(fits, 3) <= JUTE_MAXBUFFER < admin.least_topic_znode_bytes(fits + 1, 3)
    with EmbeddedCluster(3, simulated=True, record_history=False) as cluster:
        placed = admin.create_topic(cluster.store, "wide", broker_racks=dict.fromkeys([1, 2, 3]), partitions=fits,
                                    replication_factor=3)
        assert len(placed) == fits == len(cluster.store.get_topic_assignments(["wide"]).values["wide"].partitions)


@pytest.mark.usefixtures("engine")
def test_an_explicit_assignment_too_large_for_a_znode_is_refused() -> None:
    with EmbeddedCluster(3) as cluster:
        zxid = cluster.store.tree.zxid  # type: ignore[attr-defined]
        wide = {p: [1, 2, 3] for p in range(admin.max_partitions(3) + 1)}
        with pytest.raises(InvalidReplicaAssignmentError, match="more than fits in one znode"):
            within(lambda: admin.create_topic(cluster.store, "wide", broker_racks=dict.fromkeys([1, 2, 3]),
                                              assignment=wide))
        assert cluster.store.tree.zxid == zxid  # type: ignore[attr-defined]


@pytest.mark.usefixtures("engine")
def test_a_placed_topic_too_large_for_a_znode_by_its_broker_ids_is_refused() -> None:
    """The count passes the one-digit bound, but three-digit broker ids make the assignment too
    large: the measure that placement skips below the limit still runs near it."""
    fits = admin.max_partitions(3)
    with EmbeddedCluster(3, simulated=True, record_history=False) as cluster:
        zxid = cluster.store.tree.zxid  # type: ignore[attr-defined]
        with pytest.raises(InvalidReplicaAssignmentError, match="Topic 'wide': the assignment of .* more than fits"):
            within(lambda: admin.create_topic(cluster.store, "wide", broker_racks=dict.fromkeys([100, 101, 102]),
                                              partitions=fits, replication_factor=3))
        assert cluster.store.tree.zxid == zxid  # type: ignore[attr-defined]
        # over the bound of three-digit ids, but two of the three brokers have one digit: it fits
        placed = admin.create_topic(cluster.store, "mixed", broker_racks=dict.fromkeys([1, 2, 100]),
                                    partitions=fits * 4 // 5, replication_factor=3)
        assert admin.most_topic_znode_bytes(len(placed), 3, [1, 2, 100], "A" * 22) > JUTE_MAXBUFFER
        assert len(cluster.store.get_topic_assignments(["mixed"]).values["mixed"].partitions) == len(placed)


def test_a_placed_topic_well_under_the_limit_is_not_encoded_to_be_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Encoding 10K partitions to measure them cost more than placing them: below the bound it is skipped."""

    def measured(name: str, assignment: object) -> None:
        raise AssertionError(f"topic {name} was encoded to be measured")

    monkeypatch.setattr(admin, "check_assignment_fits", measured)
    store = MemoryStore()
    placed = admin.create_topic(store, "t", broker_racks={b: f"rack-{b % 3}" for b in range(100)}, partitions=10_000,
                                replication_factor=3)
    assert len(store.get_topic_assignments(["t"]).values["t"].partitions) == len(placed) == 10_000
    with pytest.raises(AssertionError, match="encoded to be measured"):  # an explicit assignment always is
        admin.create_topic(store, "u", broker_racks=dict.fromkeys([1, 2]), assignment={0: [1, 2]})


@pytest.mark.parametrize("broker_ids", [[1, 2, 3], [10, 11, 12, 13], [5, 100, 7], list(range(100, 130))])
def test_the_most_a_placed_topic_takes_bounds_its_znode(broker_ids: list[int]) -> None:
    """An upper bound of the encoded assignment, exact when every broker id has as many digits."""
    for partitions in (1, 9, 10, 11, 100, 1234):
        for replication_factor in range(1, 4):
            placed = admin.create_topic(MemoryStore(), "t", broker_racks=dict.fromkeys(broker_ids), partitions=partitions,
                                        replication_factor=replication_factor, topic_id="B" * 22)
            encoded = TopicZNode.encode(TopicAssignment({p: ReplicaAssignment(tuple(r)) for p, r in placed.items()}, "B" * 22))
            most = admin.most_topic_znode_bytes(partitions, replication_factor, broker_ids, "B" * 22)
            assert len(encoded) <= most
            if len({len(str(b)) for b in broker_ids}) == 1:
                assert len(encoded) == most


def test_a_cluster_of_too_many_brokers_is_refused_before_it_is_built() -> None:
    with pytest.raises(IllegalArgumentError, match="a cluster has at most 10000 brokers, got 100000000"):
        within(lambda: EmbeddedCluster(100_000_000))


def scenario_problems(text: str, tmp_path: Path) -> str:
    """``kctl sim`` on the scenario: it must refuse it (exit status 2) without running a step."""
    path = tmp_path / "scenario.toml"
    path.write_text(textwrap.dedent(text))
    done = kctl("sim", str(path))
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stderr


def test_scenarios_with_unbounded_sizes_or_times_are_refused_before_running(tmp_path: Path) -> None:
    assert "[cluster]: brokers: a simulated cluster has at most 10000 brokers, got 100000000" in scenario_problems(
        """
        [cluster]
        brokers = 100000000
        """, tmp_path)
    problems = scenario_problems(
        """
        [cluster]
        brokers = 3
        [[topics]]
        name = "big"
        partitions = 2147483647
        replication_factor = 1
        [[steps]]
        action = "advance"
        seconds = 1e300
        [[steps]]
        action = "kill_broker"
        broker = 2
        at = 1e12
        timeout = 1e300
        """, tmp_path)
    assert "topic 1 (big): partitions: Topic 'big' cannot have 2147483647 partitions" in problems
    assert "step 1 (advance): seconds: must be at most 86400 seconds (a day), got 1e+300" in problems
    assert "step 2 (kill_broker): at: must be at most 86400 seconds (a day), got 1e+12" in problems
    assert "step 2 (kill_broker): timeout: must be at most 86400 seconds (a day), got 1e+300" in problems


def test_scenario_broker_lists_are_bounded_too() -> None:
    with pytest.raises(ScenarioError, match="at most 10000 brokers, got 10001"):
        within(lambda: parse_scenario({"cluster": {"brokers": list(range(10_001))}}))


def test_demo_sizes_are_bounded() -> None:
    for flag, value, message in (("--brokers", "100000000", "must be at most 10000"),
                                 ("--partitions", "2147483647", f"must be at most {admin.max_partitions(3)}")):
        done = kctl("demo", flag, value)
        assert done.returncode == 2 and f"argument {flag}: {message}" in done.stderr, done.stderr


# --- The admin tools on a real ZooKeeper -------------------------------------------------------------


@pytest.fixture
def zk(zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str) -> Iterator[tuple[str, ZooKeeperStore]]:
    """The connect string of a chroot where brokers 1–3 are registered, and a session to look."""
    hosts = zookeeper_server.hosts + zookeeper_chroot
    store = ZooKeeperStore(hosts)
    for b in (1, 2, 3):
        store.register_broker(BrokerInfo(b, (EndPoint("127.0.0.1", 9090 + b),)))
    yield hosts, store
    store.close()


def test_topics_create_and_alter_with_huge_partition_counts_write_nothing(zk: tuple[str, ZooKeeperStore]) -> None:
    hosts, store = zk
    done = kctl("topics", "create", "--zk", hosts, "--topic", "big", "--partitions", "2147483647",
                "--replication-factor", "1")
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("kctl: error: Topic 'big' cannot have 2147483647 partitions") and "jute.maxbuffer" in done.stderr
    assert "big" not in store.get_all_topics()

    store.create_topic("orders", {0: ReplicaAssignment((1, 2))})
    done = kctl("topics", "alter", "--zk", hosts, "--topic", "orders", "--partitions", "2147483647")
    assert done.returncode == 1 and "Topic 'orders' cannot have 2147483647 partitions" in done.stderr, done.stderr
    assert dict(store.get_topic_assignments(["orders"]).values["orders"].partitions) == {0: ReplicaAssignment((1, 2))}


def test_elect_leaders_with_a_negative_timeout_writes_no_request(zk: tuple[str, ZooKeeperStore]) -> None:
    hosts, store = zk
    store.create_topic("orders", {0: ReplicaAssignment((1, 2))})
    done = kctl("elect-leaders", "--zk", hosts, "--election-type", "preferred", "--all-topic-partitions", "--timeout", "-1")
    assert done.returncode == 2 and "argument --timeout: the value must be more than 0" in done.stderr, done.stderr
    assert store.get_preferred_replica_election() is None

