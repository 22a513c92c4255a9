"""A misspelt leader selector, store or transport name is refused wherever configuration is read,
with the registered names and the closest one, before anything runs (issue 12, item 2).

A selector from a plugin is valid where it is registered; a selector serves only the election kind
it was registered for. ``tests/process/test_component_names_processes.py`` checks ``kctl
controller``; ``tests/fleet/test_grid.py`` the fleet grids.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl import hookimpl
from kctl.cli import main
from kctl.cluster import EmbeddedCluster
from kctl.config import ControllerConfig
from kctl.controller import KafkaController
from kctl.errors import InvalidConfigurationError, PluginError
from kctl.plugins import PluginHost, get_plugin_host, reset_plugin_host
from kctl.registry import LeaderSelectorRegistry
from kctl.scheduler import SimulatedScheduler
from kctl.selectors import ElectionKind, KafkaLeaderSelector
from kctl.sim import ScenarioError, parse_scenario
from kctl.stores.memory import MemoryStore
from kctl.testing import register_plugin
from kctl.transports.inprocess import InProcessTransport

MISSPELT = {"kctl.leader.selector.offline": "rack-sprad"}

UNKNOWN_BUILTIN_ONLY = (
    "kctl.leader.selector.offline = 'rack-sprad': no leader selector is registered as 'rack-sprad'; "
    "offline selectors: offline (a plugin's selector needs its distribution installed)"
)
UNKNOWN_WITH_PLUGIN = (
    "kctl.leader.selector.offline = 'rack-sprad': no leader selector is registered as 'rack-sprad' "
    "(did you mean 'rack-spread'?); offline selectors: offline, rack-spread "
    "(a plugin's selector needs its distribution installed)"
)


class RackSpreadPlugin:
    """A third-party plugin: ``rack-spread`` for offline elections, ``rack-first`` for preferred ones."""

    @hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        register.add("rack-spread", lambda config: KafkaLeaderSelector(ElectionKind.OFFLINE), kind=ElectionKind.OFFLINE)
        register.add("rack-first", lambda config: KafkaLeaderSelector(ElectionKind.PREFERRED),
                     kind=ElectionKind.PREFERRED)


@pytest.fixture
def with_plugin() -> Iterator[PluginHost]:
    """The process-wide host (the one ``kctl sim`` and an ``EmbeddedCluster`` use) with the plugin."""
    reset_plugin_host()
    with register_plugin(get_plugin_host(), RackSpreadPlugin(), "rack-spread-plugin"):
        yield get_plugin_host()
    reset_plugin_host()


# --- The registries ----------------------------------------------------------------------------------


def test_an_unknown_name_suggests_the_closest_registered_one(plugin_host: PluginHost) -> None:
    with pytest.raises(PluginError, match=r"^unknown transport 'inproces' \(did you mean 'inprocess'\?\); "
                                          r"registered: inprocess, kafka, tcp, zkqueue$"):
        plugin_host.transports().get("inproces")
    with pytest.raises(PluginError, match=r"^unknown state store 'memroy' \(did you mean 'memory'\?\); "
                                          r"registered: memory, zookeeper$"):
        plugin_host.state_stores().get("memroy")


def test_a_config_naming_an_unknown_selector_is_refused_with_the_selectors_of_its_kind(plugin_host: PluginHost) -> None:
    config = ControllerConfig.from_properties(MISSPELT)  # the config alone cannot know the plugins
    with pytest.raises(InvalidConfigurationError) as error:
        plugin_host.leader_selectors().check_config(config)
    assert str(error.value) == UNKNOWN_BUILTIN_ONLY
    with register_plugin(plugin_host, RackSpreadPlugin(), "rack-spread-plugin"):
        with pytest.raises(InvalidConfigurationError) as error:
            plugin_host.leader_selectors().check_config(config)
        assert str(error.value) == UNKNOWN_WITH_PLUGIN


def test_a_plugin_selector_is_valid_for_the_kind_it_was_registered_for_only(plugin_host: PluginHost) -> None:
    selectors = ControllerConfig.from_properties({"kctl.leader.selector.offline": "rack-spread",
                                                  "kctl.leader.selector.preferred": "rack-first"})
    with register_plugin(plugin_host, RackSpreadPlugin(), "rack-spread-plugin"):
        plugin_host.leader_selectors().check_config(selectors)
        with pytest.raises(InvalidConfigurationError) as error:
            plugin_host.leader_selectors().check_config(ControllerConfig(leader_selector_reassign="rack-spread"))
    assert str(error.value) == (
        "kctl.leader.selector.reassign = 'rack-spread': 'rack-spread' is a leader selector for offline elections, "
        "not reassign ones; reassign selectors: reassign"
    )
    with pytest.raises(InvalidConfigurationError, match="no leader selector is registered as 'rack-spread'"):
        plugin_host.leader_selectors().check_config(selectors)  # its plugin is gone


def test_kafkas_own_rule_needs_no_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even with the built-in selectors blocked, each kind's own name is Kafka's rule (as
    :func:`kctl.election.for_config` builds it without a plugin host)."""
    monkeypatch.setenv("KCTL_DISABLE_PLUGINS", "kctl.selectors")
    host = PluginHost(load_entrypoints=False)
    assert "offline" not in host.leader_selectors()
    host.leader_selectors().check_config(ControllerConfig())


# --- Where configuration is read ---------------------------------------------------------------------


def test_a_controller_is_not_built_with_a_misspelt_selector(plugin_host: PluginHost) -> None:
    scheduler = SimulatedScheduler(0)
    store = MemoryStore()
    with pytest.raises(InvalidConfigurationError) as error:
        KafkaController(1, store, InProcessTransport(scheduler=scheduler), MISSPELT, clock=scheduler,
                        plugins=plugin_host)
    assert str(error.value) == UNKNOWN_BUILTIN_ONLY
    assert store.get_controller_id() is None


@pytest.mark.usefixtures("engine")
def test_a_dynamic_config_update_naming_an_unknown_selector_changes_nothing(plugin_host: PluginHost) -> None:
    with EmbeddedCluster(3, plugins=plugin_host) as cluster:
        controller = cluster.active_controller
        assert controller is not None
        with pytest.raises(InvalidConfigurationError) as error:
            cluster.update_config(MISSPELT)
        assert str(error.value) == UNKNOWN_BUILTIN_ONLY
        with pytest.raises(InvalidConfigurationError, match="'rack-sprad'"):
            controller.update_config(MISSPELT)
        assert cluster.config.leader_selector_offline == "offline"
        assert controller.config.leader_selector_offline == "offline"
        # The cluster still elects: a broker failure moves leadership as before.
        cluster.create_topic("t", assignment={0: [1, 2]})
        cluster.kill_broker(1)
        cluster.run_until_stable()
        assert cluster.describe("t")[0].leader == 2
        assert cluster.check_invariants() == []


def test_an_embedded_cluster_refuses_misspelt_names_before_starting_anything(plugin_host: PluginHost) -> None:
    with pytest.raises(InvalidConfigurationError) as error:
        EmbeddedCluster(3, config=MISSPELT, plugins=plugin_host)
    assert str(error.value) == UNKNOWN_BUILTIN_ONLY
    with pytest.raises(PluginError, match=r"unknown state store 'memroy' \(did you mean 'memory'\?\)"):
        EmbeddedCluster(3, store="memroy", plugins=plugin_host)
    with pytest.raises(PluginError, match=r"unknown transport 'inproces' \(did you mean 'inprocess'\?\)"):
        EmbeddedCluster(3, transport="inproces", plugins=plugin_host)


@pytest.mark.usefixtures("engine")
def test_an_embedded_cluster_runs_a_plugin_selector(with_plugin: PluginHost) -> None:
    with EmbeddedCluster(3, config={"kctl.leader.selector.offline": "rack-spread"}) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        cluster.kill_broker(1)
        cluster.run_until_stable()
        assert cluster.describe("t")[0].leader == 2
    with pytest.raises(InvalidConfigurationError) as error:
        EmbeddedCluster(3, config=MISSPELT)
    assert str(error.value) == UNKNOWN_WITH_PLUGIN


# --- Scenarios -----------------------------------------------------------------------------------------

SCENARIO = """
[cluster]
brokers = 3
config = {{ "kctl.leader.selector.offline" = "{offline}" }}

[[topics]]
name = "t"
partitions = 1
replication_factor = 2

[[steps]]
action = "update_config"
properties = {{ "kctl.leader.selector.preferred" = "{preferred}" }}

[[steps]]
action = "kill_broker"
broker = 1
"""


def scenario(offline: str, preferred: str) -> str:
    return SCENARIO.format(offline=offline, preferred=preferred)


@pytest.mark.parametrize(("offline", "preferred", "problem"), [
    ("rack-sprad", "preferred", f"[cluster]: config: {UNKNOWN_WITH_PLUGIN}"),
    ("rack-spread", "rack-frist",
     "step 1 (update_config): properties: kctl.leader.selector.preferred = 'rack-frist': no leader selector is "
     "registered as 'rack-frist' (did you mean 'rack-first'?); preferred selectors: preferred, rack-first "
     "(a plugin's selector needs its distribution installed)"),
])
def test_a_scenario_naming_an_unknown_selector_is_invalid(
    with_plugin: PluginHost, offline: str, preferred: str, problem: str
) -> None:
    with pytest.raises(ScenarioError) as error:
        parse_scenario(tomllib.loads(scenario(offline, preferred)), "s.toml")
    assert error.value.problems == [f"s.toml: {problem}"]


@pytest.mark.usefixtures("engine")
def test_kctl_sim_exits_2_on_a_misspelt_selector_and_runs_one_from_a_plugin(
    with_plugin: PluginHost, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(scenario("rack-sprad", "preferred"))
    assert main(["sim", str(path), "--no-color"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"kctl sim: {path} is not a valid scenario:",
                                         f"  {path}: [cluster]: config: {UNKNOWN_WITH_PLUGIN}"]
    path.write_text(scenario("rack-spread", "rack-first"))
    assert main(["sim", str(path), "--no-color"]) == 0
    assert "leader selectors offline=rack-spread" in capsys.readouterr().out


def test_a_scenario_checks_its_selectors_against_the_plugins_it_runs_with() -> None:
    """Without the plugin (the default host of kctl's tests has only the built-ins) its names are unknown."""
    reset_plugin_host()
    with pytest.raises(ScenarioError, match="no leader selector is registered as 'rack-spread'"):
        parse_scenario(tomllib.loads(scenario("rack-spread", "preferred")), "s.toml")
