"""The native data plane against the Python reference: the same scenario on both, everything
observable compared (the timers scheduled, in order; requests sent and answered; the store's
partition states and their history; every replica's snapshot, metrics and idleness; the ledger's
counters, committed offsets and violations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kctl.broker import DataLossViolation, ReplicaRole
from kctl.broker.native_data_plane import NativeDataPlaneLedger, NativeReplicaManager
from kctl.cluster import EmbeddedCluster
from kctl.errors import Errors, IllegalArgumentError, IllegalStateError
from kctl.model import TopicPartition
from kctl.scheduler import SimulatedScheduler

from tests.support.broker_harness import SimCluster

LAG = {"replica.lag.time.max.ms": 2000}


def trace_schedules(scheduler: Any) -> list[tuple[float, float, str]]:
    """Record every timer scheduled from now on: ``(now, delay, name)``."""
    assert isinstance(scheduler, SimulatedScheduler)
    trace: list[tuple[float, float, str]] = []
    schedule = scheduler.schedule

    def traced(delay: float, fn: Callable[[], None], name: str = "") -> Any:
        trace.append((scheduler.now(), delay, name))
        return schedule(delay, fn, name)

    scheduler.schedule = traced  # type: ignore[method-assign]
    return trace


def replicas_of(managers: dict[int, Any], ledger: Any) -> dict[str, Any]:
    tps = sorted({tp for m in managers.values() for tp in m.hosted_partitions()})
    return {
        "hosted": {b: m.hosted_partitions() for b, m in managers.items()},
        "replicas": {b: [m.replica_state(tp) for tp in tps] for b, m in managers.items()},
        "metrics": {b: m.metrics() for b, m in managers.items()},
        "idle": {b: m.idle() if m.is_running else None for b, m in managers.items()},
        "ledger": (list(ledger.violations), ledger.unclean_elections, ledger.truncated_records,
                   [ledger.committed_offset(tp) for tp in tps]),
    }


def observe_cluster(cluster: EmbeddedCluster, trace: list[Any]) -> dict[str, Any]:
    managers = {b: agent.replica_manager for b, agent in cluster.brokers.items()}
    tps = sorted({tp for m in managers.values() for tp in m.hosted_partitions()})  # type: ignore[attr-defined]
    return {
        "now": cluster.now(),
        "steps": cluster.scheduler.steps,  # type: ignore[attr-defined]
        "timers": list(trace),
        "sent": [(r.time, r.controller, r.broker, repr(r.request)) for r in cluster.sent_requests],
        "handled": {b: [repr(h) for h in agent.handled] for b, agent in cluster.brokers.items()},
        "history": {tp: repr(cluster.partition_history(tp)) for tp in tps},
        "state_changes": cluster.state_change_log,
        "invariants": cluster.check_invariants(),
        "cluster_metrics": cluster.metrics(),
        **replicas_of(managers, cluster.ledger),
    }


def run_cluster(data_plane: str, scenario: Callable[[EmbeddedCluster], None], config: dict[str, Any]) -> dict[str, Any]:
    cluster = EmbeddedCluster(6, racks=[f"r{b % 3}" for b in range(6)], config={**LAG, **config}, seed=7, record_requests=True,
                              record_state_changes=True, data_plane=data_plane)
    trace = trace_schedules(cluster.scheduler)
    cluster.start()
    try:
        scenario(cluster)
        cluster.advance(30)
        return observe_cluster(cluster, trace)
    finally:
        cluster.stop()


def roll_with_traffic(cluster: EmbeddedCluster) -> None:
    cluster.create_topic("a", 12, 3)
    cluster.create_topic("b", 6, 2)
    for i in range(12):
        cluster.produce(TopicPartition("a", i), 1 + i % 4)
    for broker in cluster.broker_ids:
        cluster.shutdown_broker(broker)
        cluster.produce(TopicPartition("b", broker % 6), 3)
        cluster.advance(1)
        cluster.start_broker(broker)
        cluster.run_until_stable()
    cluster.elect_leaders([TopicPartition("a", i) for i in range(12)])


def topics_and_reassignment(cluster: EmbeddedCluster) -> None:
    cluster.create_topic("a", 4, 3)
    cluster.produce(TopicPartition("a", 0), 5)
    cluster.reassign({TopicPartition("a", 0): [4, 5, 6], TopicPartition("a", 1): [1, 2]})
    cluster.delete_topic("a")
    cluster.create_topic("a", 2, 3)  # a topic of the same name starts from scratch
    cluster.produce(TopicPartition("a", 1), 2)
    cluster.create_partitions("a", 4)


def paused_follower_and_failures(cluster: EmbeddedCluster) -> None:
    cluster.create_topic("a", 6, 3)
    cluster.brokers[2].replica_manager.pause_fetching()  # type: ignore[attr-defined]
    for i in range(6):
        cluster.produce(TopicPartition("a", i), 4)
    cluster.advance(10)  # ISR shrinks
    cluster.brokers[2].replica_manager.resume_fetching()  # type: ignore[attr-defined]
    cluster.advance(5)  # and expands again
    cluster.fail_log_dir(3, [TopicPartition("a", i) for i in range(6)])
    cluster.run_until_stable()
    cluster.kill_controller()
    cluster.run_until_stable()
    cluster.kill_broker(3)
    cluster.start_broker(3)  # its failed directory was replaced
    cluster.run_until_stable()


def unclean_election(cluster: EmbeddedCluster) -> None:
    cluster.create_topic("u", assignment={0: [1, 2, 3]})
    tp = TopicPartition("u", 0)
    cluster.brokers[3].replica_manager.pause_fetching()  # type: ignore[attr-defined]
    cluster.produce(tp, 10)
    cluster.advance(10)  # 3 leaves the ISR
    cluster.kill_broker(1)
    cluster.kill_broker(2)
    cluster.run_until_stable()
    cluster.brokers[3].replica_manager.resume_fetching()  # type: ignore[attr-defined]
    cluster.update_config({"unclean.leader.election.enable": "true"})
    cluster.run_until_stable()
    cluster.start_broker(1)
    cluster.start_broker(2)
    cluster.run_until_stable()


SCENARIOS = {
    "roll": (roll_with_traffic, {}),
    "topics": (topics_and_reassignment, {}),
    "failures": (paused_follower_and_failures, {}),
    "failures-before-2.7": (paused_follower_and_failures, {"inter.broker.protocol.version": "2.6"}),
    "unclean": (unclean_election, {}),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_cluster_runs_the_same_on_both_data_planes(name: str) -> None:
    scenario, config = SCENARIOS[name]
    reference = run_cluster("python", scenario, config)
    native = run_cluster("native", scenario, config)
    assert reference["timers"], "the scenario scheduled nothing"
    for key in reference:
        assert native[key] == reference[key], f"{name}: {key} differs"


def test_the_scenarios_exercise_what_they_claim() -> None:
    """The differential scenarios reach the paths they are meant to compare."""
    unclean = run_cluster("native", unclean_election, {})
    assert unclean["ledger"][1:3] == (1, 10)  # one unclean election, 10 records truncated
    failures = run_cluster("native", paused_follower_and_failures, {})
    assert any(m["IsrShrinks"] and m["IsrExpands"] for m in failures["metrics"].values())
    assert any(name == "alter-partition" for _, _, name in failures["timers"])
    old = run_cluster("native", paused_follower_and_failures, {"inter.broker.protocol.version": "2.6"})
    assert any(name == "isr-change-propagation" for _, _, name in old["timers"])


# --- Broker-harness scenarios (a scripted controller) ---------------------------------------------------


def run_harness(data_plane: str, scenario: Callable[[SimCluster], None], **options: Any) -> dict[str, Any]:
    cluster = SimCluster(config=LAG, data_plane=data_plane, **options)
    trace = trace_schedules(cluster.scheduler)
    cluster.start()
    scenario(cluster)
    cluster.run(20)
    managers = {b: agent.replica_manager for b, agent in cluster.agents.items()}
    tps = sorted({tp for m in managers.values() for tp in m.hosted_partitions()})
    return {
        "stored": repr(cluster.admin.get_partition_states(tps).values),
        "timers": trace,
        "handled": {b: [repr(h) for h in agent.handled] for b, agent in cluster.agents.items()},
        **replicas_of(managers, cluster.ledger),
    }


T0 = TopicPartition("t", 0)


def slow_followers(cluster: SimCluster) -> None:
    cluster.controller.create_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 25)
    cluster.manager(2).produce(TopicPartition("t", 1), 7)
    cluster.run(3)
    cluster.manager(1).produce(T0, 5)


def clean_election_of_a_replica_without_committed_records(cluster: SimCluster) -> None:
    cluster.controller.create_topic("t", {0: [1, 2]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 10)
    cluster.run(2)
    cluster.agents[2].fail_log_dir([T0])
    cluster.agents[2].kill()
    cluster.agents[2].restart()  # the disk was replaced: broker 2's copy is gone
    cluster.agents[1].kill()
    cluster.controller.elect(T0, 2, [2])  # a controller that left 2 in the ISR: an I8 violation
    cluster.run(1)


def unclean_election_with_truncation(cluster: SimCluster) -> None:
    cluster.manager(3).pause_fetching()
    cluster.controller.create_topic("t", {0: [1, 2, 3]}, isr={0: [1, 2]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 10)
    cluster.run(2)
    cluster.agents[1].kill()
    cluster.agents[2].kill()
    cluster.controller.elect(T0, 3, [3])
    cluster.run(1)
    cluster.manager(3).produce(T0, 4)
    cluster.agents[1].restart()
    cluster.controller.elect(T0, 3, [3, 1])  # 1 truncates to 3's log and follows


HARNESS = {
    "slow-followers": (slow_followers, {"max_fetch_records": 4}),
    "violation": (clean_election_of_a_replica_without_committed_records, {}),
    "truncation": (unclean_election_with_truncation, {}),
}


@pytest.mark.parametrize("name", HARNESS)
def test_a_scripted_controllers_brokers_run_the_same_on_both_data_planes(name: str) -> None:
    scenario, options = HARNESS[name]
    reference = run_harness("python", scenario, **options)
    native = run_harness("native", scenario, **options)
    for key in reference:
        assert native[key] == reference[key], f"{name}: {key} differs"


def test_the_native_ledger_reports_a_violation() -> None:
    run = run_harness("native", clean_election_of_a_replica_without_committed_records)
    assert run["ledger"][0] == [DataLossViolation(T0, 2, 1, 0, 10)]


# --- The native boundary --------------------------------------------------------------------------------


def test_bad_rows_raise_clear_errors() -> None:
    cluster = SimCluster(data_plane="native").start()
    manager = cluster.manager(1)
    assert isinstance(manager, NativeReplicaManager)
    plane = manager.ledger.plane
    with pytest.raises(TypeError, match="TopicPartition"):
        plane.leader_and_isr(1, [("t-0", 0, 1, 0, (1,), 0, (1,), (), True)], 0.0)
    with pytest.raises(ValueError, match="two fields"):
        plane.leader_and_isr(1, [(("t",), 0, 1, 0, (1,), 0, (1,), (), True)], 0.0)
    with pytest.raises(TypeError, match="field 4"):
        plane.leader_and_isr(1, [(T0, 0, 1, 0, "x", 0, (1,), (), True)], 0.0)
    with pytest.raises(ValueError, match="9 fields"):
        plane.leader_and_isr(1, [(T0, 0, 1)], 0.0)
    with pytest.raises(TypeError, match="tuple"):
        plane.stop_replicas(1, [None], 0.0)
    with pytest.raises(TypeError, match="topic must be a str"):
        plane.produce(1, (3, 0), 1, 0.0)
    assert manager.produce(TopicPartition("nowhere", 0), 1) is Errors.UNKNOWN_TOPIC_OR_PARTITION
    cluster.controller.create_topic("t", {0: [1]})
    cluster.run(1)
    assert manager.produce(T0, 2**63 - 1) is Errors.NONE
    with pytest.raises(ValueError, match="largest offset"):
        manager.produce(T0, 1)
    with pytest.raises(OverflowError):
        manager.produce(T0, 2**64)
    with pytest.raises(IllegalArgumentError):
        manager.produce(T0, 0)
    with pytest.raises(IllegalArgumentError):
        NativeReplicaManager(NativeDataPlaneLedger(), max_fetch_records=0)


def test_one_broker_id_runs_one_native_replica_manager_at_a_time() -> None:
    cluster = SimCluster(data_plane="native").start()
    ledger = cluster.ledger
    assert isinstance(ledger, NativeDataPlaneLedger)
    other = NativeReplicaManager(ledger)
    with pytest.raises(IllegalStateError, match="another replica manager"):
        other.startup(cluster.agents[1])
    with pytest.raises(IllegalStateError, match="already running"):
        cluster.manager(1).startup(cluster.agents[1])


def test_a_stopped_native_replica_manager_keeps_its_logs() -> None:
    cluster = SimCluster(data_plane="native").start()
    cluster.controller.create_topic("t", {0: [1, 2]})
    cluster.run(1)
    cluster.manager(1).produce(T0, 3)
    cluster.run(2)
    cluster.agents[2].kill()
    state = cluster.manager(2).replica_state(T0)
    assert state is not None and state.role is None and state.log_end_offset == 3
    assert cluster.manager(2).hosted_partitions() == [T0]
    assert ReplicaRole.LEADER is (cluster.manager(1).replica_state(T0) or state).role
