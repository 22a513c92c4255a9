"""kctl-least-loaded, loaded the way kctl loads it in production: through its entry point."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import metadata

import pytest

from kctl.clusterview import ClusterView
from kctl.config import ControllerConfig
from kctl.model import NO_LEADER, TopicPartition
from kctl.plugins import PluginHost
from kctl.selectors import ElectionBatch, ElectionKind, LeaderSelector

# docs-start
@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> PluginHost:
    """A plugin host that loads this distribution's entry point and no other."""
    monkeypatch.setenv("KCTL_LOAD_PLUGINS", "kctl-least-loaded")
    monkeypatch.delenv("KCTL_DISABLE_PLUGINS", raising=False)
    return PluginHost(load_entrypoints=True)


@pytest.fixture
def selector(host: PluginHost) -> LeaderSelector:
    return host.leader_selectors().get("least-loaded").create(ControllerConfig())


def offline_batch(
    allowed: Sequence[Sequence[int]], leader_counts: Mapping[int, int] | None = None
) -> ElectionBatch:
    return ElectionBatch(
        kind=ElectionKind.OFFLINE,
        partitions=[TopicPartition("t", p) for p in range(len(allowed))],
        assignments=allowed,
        isrs=allowed,
        allowed=allowed,
        unclean=[False] * len(allowed),
        cluster=ClusterView.of(leader_counts=leader_counts),
    )


def test_picks_the_allowed_replica_leading_the_fewest_partitions(selector: LeaderSelector) -> None:
    batch = offline_batch([[1, 2, 3]], leader_counts={1: 5, 2: 1, 3: 3})
    assert list(selector.select_leaders(batch)) == [2]
# docs-end


def test_is_registered_by_its_entry_point(host: PluginHost) -> None:
    entry = host.leader_selectors().get("least-loaded")
    assert (entry.plugin, entry.kind) == ("least_loaded", ElectionKind.OFFLINE)
    info = next(info for info in host.plugin_infos() if info.name == "least_loaded")
    assert info.distribution == "kctl-least-loaded"
    assert info.version == metadata.version("kctl-least-loaded")
    assert info.hooks == ("kctl_register_leader_selectors",)


def test_builtin_selectors_are_untouched(host: PluginHost) -> None:
    assert host.leader_selectors().get("offline").plugin == "kctl.selectors"


def test_counts_the_leaders_it_picked_earlier_in_the_batch(selector: LeaderSelector) -> None:
    batch = offline_batch([[1, 2, 3]] * 7, leader_counts={1: 1})
    assert list(selector.select_leaders(batch)) == [2, 3, 1, 2, 3, 1, 2]


def test_breaks_ties_by_kafka_preference_order(selector: LeaderSelector) -> None:
    batch = offline_batch([[3, 1, 2], [2, 1]], leader_counts={1: 4, 2: 4, 3: 4})
    assert list(selector.select_leaders(batch)) == [3, 2]


def test_brokers_without_leadership_count_as_zero(selector: LeaderSelector) -> None:
    batch = offline_batch([[1, 7]], leader_counts={1: 2})
    assert list(selector.select_leaders(batch)) == [7]


def test_never_leaves_the_allowed_list(selector: LeaderSelector) -> None:
    allowed = [[4], [4, 5], [5], [6, 4, 5], [4]]
    leaders = selector.select_leaders(offline_batch(allowed, leader_counts={4: 0, 5: 9, 6: 9}))
    assert list(leaders) == [4, 4, 5, 4, 4]
    assert all(leader in candidates for leader, candidates in zip(leaders, allowed))


def test_no_allowed_replica_means_no_leader(selector: LeaderSelector) -> None:
    assert list(selector.select_leaders(offline_batch([[], [2]]))) == [NO_LEADER, 2]
