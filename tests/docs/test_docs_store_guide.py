"""The state-store guide (docs/plugins/writing-a-store.md): its example plugin, ``journal``
(tests/docs/example_store.py), passes kctl's store contract and runs an embedded cluster whose
invariants are checked on the history it journals; the guide lists the whole protocol."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from kctl.model import LeaderAndIsr
from kctl.stores import MATCH_ANY_VERSION
from kctl.stores.base import StateStore

# docs-start
from collections.abc import Callable, Iterator

import pytest

import example_store  # the plugin module (tests/docs/example_store.py)
from example_store import JournalStore, journal_store
from kctl.cluster import EmbeddedCluster
from kctl.model import TopicPartition
from kctl.plugins import PluginHost
from kctl.testing import register_plugin
from kctl.testing.store_contract import StoreContract
from kctl.testing.zookeeper import ZooKeeperEnsemble

# conftest.py: pytest_plugins = ["kctl.testing", "kctl.testing.zookeeper"]  (plugin_host, zookeeper_server …)


class TestJournalStoreContract(StoreContract):
    """kctl's store contract, run against the journal on a memory store."""

    @pytest.fixture
    def first(self) -> JournalStore:
        return journal_store()

    @pytest.fixture
    def store_factory(self, first: JournalStore) -> Callable[[], JournalStore]:
        return first.new_session  # every session on the same backing store

    @pytest.fixture
    def corrupt_node(self, first: JournalStore) -> Callable[[str], None]:
        return lambda path: first.tree.set_raw(path, b"\x00garbage")  # the memory store's own tree

    @pytest.fixture
    def expire_session(self) -> Callable[[JournalStore], None]:
        return lambda store: store.expire_session()

    @pytest.fixture
    def reconnect_session(self) -> Callable[[JournalStore], None]:
        return lambda store: store.reconnect()


@pytest.fixture
def host(plugin_host: PluginHost) -> Iterator[PluginHost]:
    """kctl's built-in plugins plus kctl-journal, unregistered after every test."""
    with register_plugin(plugin_host, example_store, "kctl-journal"):
        yield plugin_host


def test_the_store_is_registered_by_the_plugin(host: PluginHost) -> None:
    assert host.state_stores().get("journal").plugin == "kctl-journal"


def test_a_cluster_on_the_store_has_a_history_and_keeps_its_invariants(host: PluginHost) -> None:
    orders = TopicPartition("orders", 0)
    with EmbeddedCluster(brokers=4, store="journal", plugins=host, seed=7) as cluster:
        cluster.create_topic("orders", assignment={0: [1, 2, 3]})
        cluster.kill_broker(1)
        cluster.run_until_stable()
        cluster.reassign({orders: [2, 3, 4]})
        cluster.kill_controller()
        cluster.run_until_stable()
        history = cluster.partition_history(orders)
        assert history[0].replicas == (1, 2, 3) and history[1].leader == 1
        assert history[-1].replicas == (2, 3, 4) and history[-1].leader in (2, 3, 4)
        assert cluster.check_invariants() == []


def test_invariants_are_checked_on_real_zookeeper_too(
    host: PluginHost, zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str
) -> None:
    """The journal on the zookeeper store, whose watch events come on kazoo's threads: the cluster
    runs in real time (simulated=False), not on one simulated thread."""
    options = {"inner": "zookeeper", "hosts": zookeeper_server.hosts, "chroot": zookeeper_chroot}
    with EmbeddedCluster(brokers=3, store="journal", store_options=options, simulated=False, plugins=host,
                         config={"zookeeper.session.timeout.ms": 6000}) as cluster:
        cluster.create_topic("orders", assignment={0: [1, 2, 3]})
        cluster.kill_broker(1)
        cluster.run_until_stable(timeout=60, what="a new leader for orders-0")
        assert [row.leader for row in cluster.partition_history(TopicPartition("orders", 0))] == [-1, 1, 2]
        assert cluster.check_invariants() == []
# docs-end


def run_the_guides_scenario(store: str, host: PluginHost) -> dict[TopicPartition, list[object]]:
    """Every partition's history after the scenario above, on ``store``."""
    partitions = [TopicPartition("orders", p) for p in range(4)]
    with EmbeddedCluster(brokers=4, store=store, plugins=host, seed=7) as cluster:
        cluster.create_topic("orders", assignment={0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 1], 3: [4, 1, 2]})
        cluster.kill_broker(1)
        cluster.run_until_stable()
        cluster.reassign({partitions[0]: [2, 3, 4]})
        cluster.kill_controller()
        cluster.create_topic("gone", partitions=2, replication_factor=2)
        cluster.delete_topic("gone")
        cluster.start_broker(1)
        cluster.run_until_stable()
        return {tp: list(cluster.partition_history(tp)) for tp in [*partitions, TopicPartition("gone", 0)]}


def test_the_journal_matches_the_memory_stores_own_history(host: PluginHost) -> None:
    journaled = run_the_guides_scenario("journal", host)
    assert journaled == run_the_guides_scenario("memory", host)
    assert len(journaled[TopicPartition("orders", 0)]) > 5 and journaled[TopicPartition("gone", 0)] == []


def test_check_invariants_judges_what_the_journal_recorded(host: PluginHost) -> None:
    orders = TopicPartition("orders", 0)
    with EmbeddedCluster(brokers=3, store="journal", plugins=host, seed=7) as cluster:
        cluster.create_topic("orders", assignment={0: [1, 2, 3]})
        stored = cluster.store.get_partition_states([orders]).values[orders]
        lai = stored.leader_and_isr
        back = LeaderAndIsr(lai.leader, lai.isr, lai.leader_epoch - 1, partition_epoch=lai.partition_epoch)
        cluster.store.update_partition_states({orders: back}, stored.controller_epoch, MATCH_ANY_VERSION)
        assert f"I2: leader epoch of {orders} went back from {lai.leader_epoch} to {lai.leader_epoch - 1}" in (
            cluster.check_invariants())


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "plugins" / "writing-a-store.md"


def test_the_guide_lists_every_method_of_the_protocol() -> None:
    methods = {name for name, _ in inspect.getmembers(StateStore, inspect.isfunction) if not name.startswith("_")}
    listed = set(re.findall(r"`(\w+)\(", GUIDE.read_text()))
    assert methods and methods <= listed, f"document {sorted(methods - listed)} in {GUIDE.name}"


def test_the_guide_includes_the_example_plugin_and_its_tests() -> None:
    text = GUIDE.read_text()
    assert "<!-- include: tests/docs/example_store.py -->" in text
    assert "<!-- include: tests/docs/test_docs_store_guide.py -->" in text
