"""The rack-aware example of ``docs/plugins/cluster-view.md`` (``docs/plugins/examples/rack_spread.py``)
does what the page says on both engines, in a broker failure and in the elections of a controller's
failover; and the page's unit test of it runs here."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import kctl
from kctl.cluster import EmbeddedCluster
from kctl.context import ENGINES
from kctl.plugins import PluginHost
from kctl.testing import register_plugin

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "plugins" / "examples" / "rack_spread.py"
RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rack_spread", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rack_spread = load_example()

# docs-start
from kctl.clusterview import BrokerView, ClusterView
from kctl.model import TopicPartition
from kctl.selectors import ElectionBatch, ElectionKind

RackSpreadSelector = rack_spread.RackSpreadSelector  # from docs/plugins/examples/rack_spread.py


def test_picks_the_allowed_replica_whose_rack_leads_least() -> None:
    view = ClusterView.of(
        [BrokerView(1, "a", 10, False), BrokerView(2, "b", 11, False), BrokerView(3, "b", 12, False)],
        leader_counts={1: 1, 2: 2},
    )
    batch = ElectionBatch(
        kind=ElectionKind.OFFLINE,
        partitions=[TopicPartition("orders", p) for p in range(3)],
        assignments=[[2, 1], [3, 1], [2, 3]],
        isrs=[[2, 1], [3, 1], [2, 3]],
        allowed=[[2, 1], [3, 1], [2, 3]],
        unclean=[False, False, False],
        cluster=view,
    )
    # Rack a leads 1 partition and rack b 2: the first goes to rack a; then each rack leads 2
    # and the tie goes to Kafka's choice; the last has replicas on rack b only.
    assert RackSpreadSelector().select_leaders(batch) == [1, 3, 2]
# docs-end


class Layout:
    """What each election decided and what its view said of the brokers."""

    def __init__(self) -> None:
        self.seen: list[dict[int, tuple[str | None, int]]] = []


class Observed(rack_spread.RackSpreadSelector):  # type: ignore[misc,name-defined]
    """The example, also noting the brokers it saw."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def select_leaders(self, batch: Any) -> list[int]:
        self.layout.seen.append({b: (v.rack, v.epoch) for b, v in batch.cluster.brokers.items()})
        return super().select_leaders(batch)  # type: ignore[no-any-return]


@pytest.fixture
def layout(plugin_host: PluginHost) -> Iterator[Layout]:
    layout = Layout()

    class Plugin:
        @kctl.hookimpl
        def kctl_register_leader_selectors(self, register: Any) -> None:
            register.add("rack-spread", lambda config: Observed(layout), kind=rack_spread.ElectionKind.OFFLINE)

    with register_plugin(plugin_host, Plugin(), "rack-spread"):
        yield layout


def fail_broker_1(engine: str, host: PluginHost, selector: str, controllers: list[int]) -> tuple[dict[str, int], int]:
    """Broker 1 (rack a) leads the six partitions of a topic whose second replicas are all on rack
    b and third ones on rack c, and dies: where did leadership go, per rack; and the controller epoch."""
    with EmbeddedCluster(6, racks=RACKS, config={"kctl.leader.selector.offline": selector}, engine=engine,
                         plugins=host, controllers=controllers) as cluster:
        cluster.create_topic("orders", assignment={p: [1, 3 + p % 2, 5 + p % 2] for p in range(6)})
        cluster.run_until_stable()
        cluster.kill_broker(1)
        cluster.run_until_stable()
        by_rack: dict[str, int] = {}
        for d in cluster.describe("orders"):
            by_rack[RACKS[d.leader]] = by_rack.get(RACKS[d.leader], 0) + 1
        epoch = cluster.store.get_controller_epoch()
        assert epoch is not None
        return by_rack, epoch[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_kafkas_rule_piles_the_leadership_onto_one_rack(engine: str, plugin_host: PluginHost) -> None:
    assert fail_broker_1(engine, plugin_host, "offline", [2])[0] == {"b": 6}


@pytest.mark.parametrize("engine", ENGINES)
def test_rack_spread_spreads_it_over_the_racks(engine: str, plugin_host: PluginHost, layout: Layout) -> None:
    assert fail_broker_1(engine, plugin_host, "rack-spread", [2]) == ({"b": 3, "c": 3}, 1)
    assert len(layout.seen) == 1 and {b: rack for b, (rack, _) in layout.seen[0].items()} == {
        b: rack for b, rack in RACKS.items() if b != 1
    }


@pytest.mark.parametrize("engine", ENGINES)
def test_so_do_the_elections_of_a_failover(engine: str, plugin_host: PluginHost, layout: Layout) -> None:
    """Broker 1 is also the active controller: the next controller elects while failing over."""
    assert fail_broker_1(engine, plugin_host, "rack-spread", [2])[0] == {"b": 3, "c": 3}
    without_failover = layout.seen[0]
    layout.seen.clear()
    assert fail_broker_1(engine, plugin_host, "rack-spread", [1, 2]) == ({"b": 3, "c": 3}, 2)
    assert layout.seen == [without_failover], "the failover's election sees the same brokers, racks and epochs"
