"""The native engine is the reference engine, observably: hypothesis generates clusters and
operation sequences (with faults), each is played on an EmbeddedCluster per engine, and the two
runs must agree on every state-change log line, every request sent, every stored partition
version, and every admin result. In some clusters plugin selectors elect, deciding from their view
of the cluster, which must be the same on both engines too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kctl
from kctl.cluster import EmbeddedCluster
from kctl.errors import KctlError
from kctl.model import NO_LEADER, TopicPartition
from kctl.plugins import PluginHost
from kctl.registry import LeaderSelectorRegistry
from kctl.selectors import ElectionBatch, ElectionKind
from kctl.testing import register_plugin

from tests.support.selector_snapshot import snapshot

EXAMPLES = 500 if os.environ.get("CI") else 60
TOPICS = ("alpha", "beta", "gamma")


@dataclass(frozen=True)
class Shape:
    brokers: int
    racks: tuple[str, ...] | None
    seed: int
    config: tuple[tuple[str, Any], ...]
    view_selectors: bool = False


@dataclass
class Observation:
    results: list[Any] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    sent: list[tuple[float, int, int, Any]] = field(default_factory=list)
    history: dict[TopicPartition, list[Any]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    views: list[dict[str, Any]] = field(default_factory=list)


class ViewReading:
    """Elects from the view: among the allowed replicas, the one whose rack leads the fewest
    partitions, then hosting the fewest replicas (counting its own picks); records what it saw."""

    def __init__(self, kind: ElectionKind, seen: list[dict[str, Any]]) -> None:
        self.kind = kind
        self.seen = seen

    def select_leaders(self, batch: ElectionBatch) -> list[int]:
        self.seen.append(snapshot(batch))
        view = batch.cluster
        rack = {b: v.rack or str(b) for b, v in view.brokers.items()}
        led: dict[str, int] = {}
        for b, n in view.leader_counts.items():
            led[rack.get(b, str(b))] = led.get(rack.get(b, str(b)), 0) + n
        leaders = []
        for allowed in batch.allowed:
            if not allowed:
                leaders.append(NO_LEADER)
                continue
            leader = min(allowed, key=lambda b: (led.get(rack[b], 0), view.replica_counts[b]))
            led[rack[leader]] = led.get(rack[leader], 0) + 1
            leaders.append(leader)
        return leaders


class ViewSelectors:
    def __init__(self, seen: list[dict[str, Any]]) -> None:
        self.seen = seen

    @kctl.hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        for kind in ElectionKind:
            register.add(f"view-{kind.value}", lambda config, kind=kind: ViewReading(kind, self.seen), kind=kind)


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    brokers = draw(st.integers(1, 6))
    racked = draw(st.booleans())
    racks = tuple(draw(st.sampled_from("ab")) for _ in range(brokers)) if racked else None
    config = draw(st.fixed_dictionaries({}, optional={
        "unclean.leader.election.enable": st.booleans(),
        "auto.leader.rebalance.enable": st.booleans(),
        "leader.imbalance.per.broker.percentage": st.sampled_from([0, 10, 50]),
        "inter.broker.protocol.version": st.sampled_from(["2.6", "3.0"]),
    }))
    return Shape(brokers, racks, draw(st.integers(0, 2**16)), tuple(sorted(config.items())), draw(st.booleans()))


def operations(brokers: int) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    broker = st.integers(1, brokers)
    topic = st.sampled_from(TOPICS)
    tp = st.builds(TopicPartition, topic, st.integers(0, 3))
    replicas = st.lists(st.integers(0, brokers + 1), min_size=0, max_size=4)
    op = st.one_of(
        st.tuples(st.just("create"), topic, st.integers(1, 4), st.integers(1, 3)),
        st.tuples(st.just("create_assigned"), topic, st.lists(replicas, min_size=1, max_size=3)),
        st.tuples(st.just("add_partitions"), topic, st.integers(1, 6)),
        st.tuples(st.just("kill"), broker),
        st.tuples(st.just("start"), broker),
        st.tuples(st.just("shutdown"), broker),
        st.tuples(st.just("reassign"), tp, replicas),
        st.tuples(st.just("cancel"), tp),
        st.tuples(st.just("elect"), st.lists(tp, max_size=3), st.sampled_from(["preferred", "unclean"])),
        st.tuples(st.just("delete"), topic),
        st.tuples(st.just("kill_controller")),
        st.tuples(st.just("advance"), st.sampled_from([0.5, 5, 60, 400])),
        st.tuples(st.just("unclean"), st.booleans()),
        st.tuples(st.just("topic_unclean"), topic, st.booleans()),
        st.tuples(st.just("produce"), tp, st.integers(1, 50)),
        st.tuples(st.just("fail_log_dir"), broker, st.lists(tp, max_size=2)),
    )
    return st.lists(op, min_size=1, max_size=12)


def comparable(value: Any) -> Any:
    """Exceptions compare by identity; compare them by class and message instead."""
    if isinstance(value, BaseException):
        return (type(value).__name__, str(value))
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(comparable(v) for v in value)
    return value


def apply(cluster: EmbeddedCluster, op: tuple[Any, ...]) -> Any:
    """Play one operation; what it returns (or the Kafka error it raises) is part of the observation."""
    kind, *args = op
    live = set(cluster.live_brokers())
    try:
        if kind == "create":
            return cluster.create_topic(args[0], partitions=args[1], replication_factor=args[2], wait=False)
        if kind == "create_assigned":
            return cluster.create_topic(args[0], assignment=dict(enumerate(args[1])), wait=False)
        if kind == "add_partitions":
            return cluster.create_partitions(args[0], args[1])
        if kind == "kill":
            return cluster.kill_broker(args[0]) if args[0] in live and len(live) > 1 else None
        if kind == "start":
            return cluster.start_broker(args[0]) if args[0] not in live else None
        if kind == "shutdown":
            return cluster.shutdown_broker(args[0], timeout=60) if args[0] in live and len(live) > 1 else None
        if kind == "reassign":
            return cluster.reassign({args[0]: args[1]}, wait=False)
        if kind == "cancel":
            return cluster.cancel_reassignment([args[0]], wait=False)
        if kind == "elect":
            return cluster.elect_leaders(args[0], args[1], wait=False)
        if kind == "delete":
            return cluster.delete_topic(args[0], wait=False)
        if kind == "kill_controller":
            return cluster.kill_controller() if len(cluster.controllers) > 1 else None
        if kind == "advance":
            return cluster.advance(args[0])
        if kind == "unclean":
            return cluster.update_config({"unclean.leader.election.enable": args[0]})
        if kind == "topic_unclean":
            if args[0] in cluster.store.get_all_topics():
                cluster.set_topic_config(args[0], {"unclean.leader.election.enable": args[1]})
            return None
        if kind == "produce":
            return cluster.produce(args[0], args[1])
        if kind == "fail_log_dir":
            return cluster.fail_log_dir(args[0], args[1]) if args[0] in live else None
    except KctlError as e:
        return (type(e).__name__, str(e))
    raise AssertionError(f"unknown operation {kind}")


def observe(engine: str, shape: Shape, ops: list[tuple[Any, ...]]) -> Observation:
    seen = Observation()
    config = dict(shape.config)
    host = PluginHost()
    if shape.view_selectors:
        config.update({f"kctl.leader.selector.{kind.value}": f"view-{kind.value}" for kind in ElectionKind})
    with register_plugin(host, ViewSelectors(seen.views), "view-selectors"), EmbeddedCluster(
        shape.brokers, racks=shape.racks, config=config, engine=engine, seed=shape.seed,
        controllers=min(3, shape.brokers), plugins=host,
    ) as cluster:
        if shape.view_selectors:  # a topic from the start, so that faults make the selectors elect
            seen.results.append(comparable(apply(cluster, ("create", "alpha", 4, min(3, shape.brokers)))))
        for op in ops:
            seen.results.append(comparable(apply(cluster, op)))
            cluster.advance(0.25)
        seen.results.append(cluster.run_until_stable(timeout=120))
        seen.log = cluster.state_change_log
        seen.sent = [(r.time, r.controller, r.broker, r.request) for r in cluster.sent_requests]
        for topic in sorted(cluster.store.get_all_topics()):
            for tp in cluster.store.get_topic_assignments([topic]).values[topic].partitions:
                seen.history[TopicPartition(topic, tp)] = cluster.partition_history(TopicPartition(topic, tp))
        seen.metrics = cluster.metrics() if cluster.controllers else {}  # every candidate may have been killed
    return seen


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Shape, list[tuple[Any, ...]]]:
    shape = draw(shapes())
    return shape, draw(operations(shape.brokers))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_both_engines_behave_identically(scenario: tuple[Shape, list[tuple[Any, ...]]]) -> None:
    shape, ops = scenario
    reference = observe("reference", shape, ops)
    native = observe("rust", shape, ops)
    assert native.results == reference.results
    assert native.log == reference.log
    assert native.sent == reference.sent
    assert native.history == reference.history
    assert native.views == reference.views
    assert not any("PluginError" in line for line in reference.log), "a view-reading selector failed"
    assert native.metrics.keys() == reference.metrics.keys()
    assert {k: v for k, v in native.metrics.items() if not k.startswith("EventQueueTime")} == {
        k: v for k, v in reference.metrics.items() if not k.startswith("EventQueueTime")
    }
