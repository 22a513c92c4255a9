"""What a leader selector sees (``batch.cluster`` and the batch's columns): the cluster as it is,
identically on both engines, from the first election of a controller's failover on; built only when
a selector reads it; answers checked the same way on both engines."""

from __future__ import annotations

import enum
from contextlib import contextmanager
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import kctl
from kctl.cluster import EmbeddedCluster
from kctl.clusterview import BrokerCounts, BrokerView, ClusterView, TopicConfigSource, broker_views
from kctl.columns import IntRows, Partitions
from kctl.context import ENGINES
from kctl.errors import IllegalStateError, StateChangeFailedError, StoreError
from kctl.model import NO_LEADER, TopicPartition
from kctl.plugins import PluginHost
from kctl.registry import LeaderSelectorRegistry
from kctl.selectors import ElectionBatch, ElectionKind
from kctl.testing import register_plugin

from tests.support.selector_snapshot import snapshot

RACKS = ["a", "a", "b", "b", "c", "c"]


# --- The view and the columns by hand ---------------------------------------------------------------


def test_a_view_holds_brokers_load_and_configs() -> None:
    view = ClusterView.of(
        [BrokerView(3, "b", 30, False), BrokerView(1, "a", 10, False), BrokerView(2, None, 20, True)],
        leader_counts={1: 4, 3: 0},
        replica_counts={1: 5, 2: 5, 3: 5},
        topic_configs={"t": {"unclean.leader.election.enable": "TRUE", "retention.ms": "1"}},
        controller_epoch=7,
    )
    assert list(view.brokers) == [1, 2, 3]
    assert view.live_brokers == (1, 3)
    assert [view.rack(b) for b in (1, 2, 3, 9)] == ["a", None, "b", None]
    assert view.brokers[2].epoch == 20 and view.brokers[2].shutting_down
    assert (view.leader_counts[1], view.leader_counts[3], view.leader_counts[9]) == (4, 0, 0)
    assert list(view.leader_counts) == [1] and 3 not in view.leader_counts
    assert dict(view.replica_counts) == {1: 5, 2: 5, 3: 5}
    assert view.controller_epoch == 7
    assert view.topic_config("t")["retention.ms"] == "1" and view.topic_config("u") == {}
    assert view.unclean_leader_election_enable("t") and not view.unclean_leader_election_enable("u")
    with pytest.raises(TypeError):
        view.topic_config("t")["retention.ms"] = "2"  # type: ignore[index]


def test_an_invalid_unclean_override_is_the_elections_error() -> None:
    view = ClusterView.of(topic_configs={"t": {"unclean.leader.election.enable": "yes"}}, unclean_leader_election_enable=True)
    with pytest.raises(StateChangeFailedError, match="Invalid value 'yes' for configuration unclean.leader.election.enable of topic t"):
        view.unclean_leader_election_enable("t")


def test_a_closed_view_refuses_to_be_read() -> None:
    view = ClusterView.of([BrokerView(1, "a", 1, False)], leader_counts={1: 1})
    assert view.leader_counts[1] == 1 and view.live_brokers == (1,) and view.topic_config("t") == {}
    view.close()
    for read in (lambda: view.brokers, lambda: view.live_brokers, lambda: view.leader_counts,
                 lambda: view.replica_counts, lambda: view.topic_config("t"), lambda: view.rack(1),
                 lambda: view.controller_epoch, lambda: view.unclean_leader_election_enable("t")):
        with pytest.raises(IllegalStateError, match="only valid during the select_leaders call"):
            read()


def test_topic_configs_are_read_once_for_every_topic_of_the_batch() -> None:
    reads: list[list[str]] = []

    def read(topics: Sequence[str]) -> dict[str, dict[str, str]]:
        reads.append(list(topics))
        return {"b": {"x": "1"}}

    view = ClusterView(0, list, dict, dict, TopicConfigSource(read), lambda: ["a", "b"])
    assert view.topic_config("b") == {"x": "1"} and view.topic_config("a") == {}
    assert view.topic_config("c") == {}
    assert reads == [["b", "a"], ["c"]]


def test_broker_counts_never_miss() -> None:
    counts = BrokerCounts([(5, 2), (1, 0), (3, 1)])
    assert list(counts.items()) == [(3, 1), (5, 2)] and counts[1] == 0 and 1 not in counts
    assert counts == {3: 1, 5: 2}


def test_int_rows_read_like_lists_of_tuples() -> None:
    rows = IntRows.of([[1, 2], [], [3]])
    assert len(rows) == 3 and list(rows) == [(1, 2), (), (3,)]
    assert (rows[0], rows[-1], rows[1:]) == ((1, 2), (3,), [(), (3,)])
    with pytest.raises(IndexError):
        rows[3]


def test_partitions_keep_their_topics_once() -> None:
    tps = [TopicPartition("b", 1), TopicPartition("a", 0), TopicPartition("b", 0)]
    column = Partitions.of(tps)
    assert list(column) == tps and column[-1] == tps[2] and column[:2] == tps[:2]
    assert column.topics == ("b", "a")
    by_hand = ElectionBatch(ElectionKind.OFFLINE, tps, [[1]] * 3, [[1]] * 3, [[1]] * 3, [False] * 3)
    assert by_hand.topics == ElectionBatch(ElectionKind.OFFLINE, column, [], [], [], []).topics == ("b", "a")
    with pytest.raises(IndexError):
        column[-4]


# --- On a cluster, both engines -------------------------------------------------------------------------


class Recorder:
    """A selector for one kind that records, during the call, what it sees and what the store says
    (the truth the view must match), and elects Kafka's leader."""

    def __init__(self, kind: ElectionKind, log: list[Any], cluster: list[EmbeddedCluster]) -> None:
        self.kind = kind
        self.log = log
        self.cluster = cluster

    def select_leaders(self, batch: ElectionBatch) -> Sequence[int]:
        self.log.append((snapshot(batch), truth(self.cluster[-1], batch)))
        return [allowed[0] for allowed in batch.allowed]


def truth(cluster: EmbeddedCluster, batch: ElectionBatch) -> dict[str, Any]:
    """What the store holds at the time of the call (before the batch's writes). A reassignment
    elects after the controller took the target replicas as the assignment and before it stores
    them (Kafka's phase B), so those come from the batch."""
    store = cluster.store
    topics = sorted(store.get_all_topics())
    assignments = store.get_topic_assignments(topics).values
    tps = [TopicPartition(t, p) for t in topics for p in assignments[t].partitions]
    targets = dict(zip(batch.partitions, batch.assignments)) if batch.kind is ElectionKind.REASSIGN else {}
    states = store.get_partition_states(tps).values
    leaders: dict[int, int] = {}
    for state in states.values():
        if state.leader_and_isr.leader >= 0:
            leaders[state.leader_and_isr.leader] = leaders.get(state.leader_and_isr.leader, 0) + 1
    replicas: dict[int, int] = {}
    for t in topics:
        for p, ra in assignments[t].partitions.items():
            for b in targets.get(TopicPartition(t, p), ra.replicas):
                replicas[b] = replicas.get(b, 0) + 1
    batch_topics = sorted({tp.topic for tp in batch.partitions})
    configs = store.get_topic_configs(batch_topics).values
    default = cluster.config.unclean_leader_election_enable
    epoch = store.get_controller_epoch()
    return {
        "epoch": None if epoch is None else epoch[0],
        "brokers": {b: (info.rack, e) for b, (info, e) in sorted(store.get_all_brokers().items())},
        "leaders": leaders,
        "replicas": replicas,
        "configs": {t: configs.get(t, {}) for t in batch_topics},
        "unclean_enabled": {
            t: configs.get(t, {}).get("unclean.leader.election.enable", str(default)).lower() == "true"
            for t in batch_topics
        },
    }


class Recorders:
    """The plugin: a recorder per election kind (``record-<kind>``), and a marker in the same log when a
    controller has finished its failover."""

    def __init__(self) -> None:
        self.log: list[Any] = []
        self.cluster: list[EmbeddedCluster] = []

    @kctl.hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        for kind in ElectionKind:
            register.add(f"record-{kind.value}", lambda config, kind=kind: Recorder(kind, self.log, self.cluster),
                         kind=kind)

    @kctl.hookimpl
    def kctl_controller_started(self, controller: Any) -> None:
        self.log.append(("started", controller.epoch))


SELECTED = {f"kctl.leader.selector.{kind.value}": f"record-{kind.value}" for kind in ElectionKind}


@pytest.fixture
def recorders(plugin_host: PluginHost) -> Iterator[Recorders]:
    plugin = Recorders()
    with register_plugin(plugin_host, plugin, "recorders"):
        yield plugin


def recorded_cluster(engine: str, host: PluginHost, plugin: Recorders, **kw: Any) -> EmbeddedCluster:
    config = {**SELECTED, "auto.leader.rebalance.enable": False, **kw.pop("config", {})}
    cluster = EmbeddedCluster(6, racks=RACKS, config=config, engine=engine, plugins=host, **kw)
    plugin.cluster.append(cluster)
    return cluster


def every_kind(engine: str, host: PluginHost, plugin: Recorders) -> list[Any]:
    """One election of each kind; the records they left."""
    with recorded_cluster(engine, host, plugin, controllers=1) as cluster:
        cluster.create_topic("orders", assignment={0: [2, 3, 4], 1: [2, 5, 6], 2: [3, 2, 1], 3: [4, 5, 6]})
        cluster.create_topic("audit", assignment={0: [2, 1]})
        cluster.set_topic_config("orders", {"unclean.leader.election.enable": True, "retention.ms": 1000})
        cluster.run_until_stable()
        cluster.kill_broker(2)
        cluster.run_until_stable()
        cluster.start_broker(2)
        cluster.run_until_stable()
        cluster.elect_leaders([TopicPartition("orders", 0), TopicPartition("orders", 1)], "preferred")
        cluster.shutdown_broker(3)
        cluster.run_until_stable()
        cluster.reassign({TopicPartition("orders", 3): [5, 6, 1]})
        cluster.run_until_stable()
    return plugin.log


@pytest.mark.parametrize("engine", ENGINES)
def test_every_election_kind_sees_the_cluster_as_it_is(
    engine: str, plugin_host: PluginHost, recorders: Recorders
) -> None:
    records = every_kind(engine, plugin_host, recorders)
    seen = [view for view, _ in records if view != "started"]
    assert {view["kind"] for view in seen} == set(ElectionKind)
    for view, store in (r for r in records if r[0] != "started"):
        assert {k: view[k] for k in store} == store
        assert view["live"] == [b for b in view["brokers"] if b not in view["shutting_down"]]
        assert all(set(allowed) <= set(view["live"]) for allowed in view["allowed"])
    offline = next(view for view in seen if view["kind"] is ElectionKind.OFFLINE)
    assert offline["partitions"] == [TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("audit", 0)]
    assert offline["brokers"][3][0] == "b" and 2 not in offline["brokers"]
    assert offline["configs"]["orders"] == {"unclean.leader.election.enable": "true", "retention.ms": "1000"}
    assert offline["unclean_enabled"] == {"audit": False, "orders": True}
    shutdown = next(view for view in seen if view["kind"] is ElectionKind.CONTROLLED_SHUTDOWN)
    assert shutdown["shutting_down"] == [3] and 3 not in shutdown["live"]


def failover(engine: str, host: PluginHost, plugin: Recorders) -> list[Any]:
    """The active controller's broker dies with its controller: the partitions it led are elected
    by the next controller while it fails over."""
    with recorded_cluster(engine, host, plugin, controllers=3) as cluster:
        cluster.create_topic("orders", assignment={p: [1 + p % 3, 4 + p % 3, 1 + (p + 1) % 3] for p in range(6)})
        cluster.run_until_stable()
        active = cluster.active_controller
        assert active is not None and active.broker_id == 1
        plugin.log.clear()
        cluster.kill_broker(1)
        cluster.run_until_stable()
    return plugin.log


@pytest.mark.parametrize("engine", ENGINES)
def test_the_first_election_after_a_failover_sees_the_cluster(
    engine: str, plugin_host: PluginHost, recorders: Recorders
) -> None:
    records = failover(engine, plugin_host, recorders)
    (view, store), started = records[0], records[1]
    assert started[0] == "started" and view["epoch"] == started[1], "elected before the failover finished"
    assert view["kind"] is ElectionKind.OFFLINE
    assert view["partitions"] == [TopicPartition("orders", 0), TopicPartition("orders", 3)]
    assert {k: view[k] for k in store} == store
    assert view["brokers"] == {b: (RACKS[b - 1], view["brokers"][b][1]) for b in range(2, 7)}
    # Failover took the dead broker out of the ISRs (leaving no leader) before electing.
    assert view["isrs"] == [[4, 2], [4, 2]] and 1 not in view["leaders"] and view["replicas"][1] == 4


@pytest.mark.parametrize("scenario", [every_kind, failover], ids=["every-kind", "failover"])
def test_both_engines_give_identical_views(scenario: Any, plugin_host: PluginHost, recorders: Recorders) -> None:
    reference = scenario("reference", plugin_host, recorders)
    recorders.log = []
    assert scenario("rust", plugin_host, recorders) == reference


# --- Built only when read ---------------------------------------------------------------------------------


class OneSelector:
    """A plugin registering one offline selector."""

    def __init__(self, name: str, selector: type) -> None:
        self.name = name
        self.selector = selector

    @kctl.hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        register.add(self.name, lambda config: self.selector(), kind=ElectionKind.OFFLINE)


@contextmanager
def offline_cluster(engine: str, host: PluginHost, selector: type) -> Iterator[EmbeddedCluster]:
    """A cluster (controller on broker 1) whose offline elections use ``selector``."""
    with register_plugin(host, OneSelector("under-test", selector), "under-test"), EmbeddedCluster(
        3, config={"kctl.leader.selector.offline": "under-test"}, engine=engine, plugins=host, controllers=1
    ) as cluster:
        yield cluster


class Ignores:
    kind = ElectionKind.OFFLINE

    def select_leaders(self, batch: ElectionBatch) -> Sequence[int]:
        return [allowed[-1] for allowed in batch.allowed]


class ReadsTwice(Ignores):
    def select_leaders(self, batch: ElectionBatch) -> Sequence[int]:
        for _ in range(2):
            assert batch.cluster.brokers and batch.cluster.topic_config("t") == {}
        return super().select_leaders(batch)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("selector", "loads"), [(Ignores, 0), (ReadsTwice, 1)], ids=["ignores", "reads"])
def test_the_view_is_built_when_read_and_once(
    engine: str, selector: type, loads: int, plugin_host: PluginHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    with offline_cluster(engine, plugin_host, selector) as cluster:
        cluster.create_topic("t", assignment={0: [2, 3], 1: [2, 1]})
        cluster.run_until_stable()
        calls = {"brokers": 0, "configs": 0}
        real_views, real_read = broker_views, TopicConfigSource.of_store

        def counting_views(*args: Any) -> Any:
            calls["brokers"] += 1
            return real_views(*args)

        def counting_source(store: Any, default: bool) -> TopicConfigSource:
            source = real_read(store, default)

            def read(topics: Sequence[str]) -> Any:
                calls["configs"] += 1
                return source.read(topics)

            return TopicConfigSource(read, default)

        monkeypatch.setattr("kctl.election.broker_views", counting_views)
        monkeypatch.setattr("kctl.native.selection.broker_views", counting_views)
        monkeypatch.setattr(TopicConfigSource, "of_store", staticmethod(counting_source))
        cluster.kill_broker(2)
        cluster.run_until_stable()
        assert [d.leader for d in cluster.describe("t")] == [3, 1]
        assert calls == {"brokers": loads, "configs": loads}


# --- Answers checked alike -------------------------------------------------------------------------------


class Answer(enum.IntEnum):
    THREE = 3


ODD_ANSWERS: list[object] = [True, 3.0, Answer.THREE, 10**20, 9, NO_LEADER, 3, "3"]


class Odd:
    kind = ElectionKind.OFFLINE

    def select_leaders(self, batch: ElectionBatch) -> Sequence[object]:
        return ODD_ANSWERS


def odd_elections(engine: str, host: PluginHost) -> tuple[list[str], list[int]]:
    with offline_cluster(engine, host, Odd) as cluster:
        cluster.create_topic("t", assignment={p: [2, 1, 3] for p in range(len(ODD_ANSWERS))})
        cluster.run_until_stable()
        cluster.kill_broker(2)
        cluster.advance(1)
        errors = [line for line in cluster.state_change_log if "PluginError" in line]
        return errors, [d.leader for d in cluster.describe("t")]


def test_answers_are_checked_alike_on_both_engines(plugin_host: PluginHost) -> None:
    errors, leaders = odd_elections("reference", plugin_host)
    assert (errors, leaders) == odd_elections("rust", plugin_host)
    refused = [line.split("leader selector Odd chose ")[1].split(" for ")[0] for line in errors]
    assert refused == ["True", "3.0", "100000000000000000000", "9", "'3'"]
    assert leaders[2] == 3 and leaders[6] == 3, "an int subclass is an int"
    assert leaders[5] == NO_LEADER


# --- The store's errors reach the selector --------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_an_unreadable_topic_config_is_the_selectors_error(
    engine: str, plugin_host: PluginHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    class Careful(Ignores):
        def select_leaders(self, batch: ElectionBatch) -> Sequence[int]:
            try:
                batch.cluster.topic_config("t")
            except StoreError as e:
                seen.append(str(e))
            return super().select_leaders(batch)

    with offline_cluster(engine, plugin_host, Careful) as cluster:
        cluster.create_topic("t", assignment={0: [2, 3]})
        cluster.run_until_stable()
        store = cluster.controllers[1].store

        def failing(topics: Any) -> Any:
            raise StoreError("connection loss")

        monkeypatch.setattr(store, "get_topic_configs", failing)
        cluster.kill_broker(2)
        cluster.advance(1)
        assert seen == ["connection loss"]
        assert [d.leader for d in cluster.describe("t")] == [3]
