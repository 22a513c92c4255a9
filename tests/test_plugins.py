"""The plugin host, the registries and the KCTL_* environment variables."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from typing import Any

import pytest

from kctl import hookimpl
from kctl.cluster import EmbeddedCluster
from kctl.config import ControllerConfig
from kctl.controller import KafkaController
from kctl.errors import PluginConflict, PluginError
from kctl.plugins import DEFAULT_PLUGINS, PluginHost, get_plugin_host, reset_plugin_host
from kctl.registry import LeaderSelectorRegistry, StateStoreRegistry, TransportRegistry
from kctl.selectors import ElectionKind, KafkaLeaderSelector
from kctl.testing import register_plugin

from tests.support.controller import FaultySessions

THIRD_PARTY = "kctl-least-loaded"  # installed from plugins/kctl-least-loaded


def first_allowed(config: ControllerConfig) -> KafkaLeaderSelector:
    return KafkaLeaderSelector(ElectionKind.OFFLINE)


class SelectorPlugin:
    """Registers one leader selector under a configurable name."""

    def __init__(self, name: str = "first-allowed", override: bool = False) -> None:
        self.name, self.override = name, override

    @hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        register.add(self.name, first_allowed, kind=ElectionKind.OFFLINE, override=self.override)


class FakeStore:
    def __init__(self, **options: Any) -> None:
        self.options = options


class FakeTransport:
    def __init__(self, **options: Any) -> None:
        self.options = options


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No KCTL_* variable set, whatever the developer's shell has."""
    for variable in ("KCTL_LOAD_PLUGINS", "KCTL_DISABLE_PLUGINS", "KCTL_TRACE_PLUGINS"):
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def plugin_names(host: PluginHost) -> list[str]:
    return [info.name for info in host.plugin_infos()]


# --- One test per hook (tests/test_hookspecs.py requires them) ---------------------------------------


def test_hook_kctl_register_leader_selectors(plugin_host: PluginHost) -> None:
    builtins = plugin_host.leader_selectors()
    assert builtins.names() == sorted(kind.value for kind in ElectionKind)
    for kind in ElectionKind:
        entry = builtins.get(kind.value)
        assert (entry.plugin, entry.kind) == ("kctl.selectors", kind)
        assert entry.create(ControllerConfig()) == KafkaLeaderSelector(kind)

    with register_plugin(plugin_host, SelectorPlugin(), "test-selectors"):
        entry = plugin_host.leader_selectors().get("first-allowed")
        assert (entry.plugin, entry.kind, entry.factory) == ("test-selectors", ElectionKind.OFFLINE, first_allowed)
    assert "first-allowed" not in plugin_host.leader_selectors()


def test_hook_kctl_register_state_stores(plugin_host: PluginHost) -> None:
    assert plugin_host.state_stores().get("memory").plugin == "kctl.stores.memory"

    class StorePlugin:
        @hookimpl
        def kctl_register_state_stores(self, register: StateStoreRegistry) -> None:
            register.add("fake", FakeStore)

    with register_plugin(plugin_host, StorePlugin(), "test-stores"):
        entry = plugin_host.state_stores().get("fake")
        assert entry.plugin == "test-stores"
        assert entry.factory(hosts="zk:2181").options == {"hosts": "zk:2181"}
    assert "fake" not in plugin_host.state_stores()


def test_hook_kctl_register_transports(plugin_host: PluginHost) -> None:
    class TransportPlugin:
        @hookimpl
        def kctl_register_transports(self, register: TransportRegistry) -> None:
            register.add("fake", FakeTransport)

    with register_plugin(plugin_host, TransportPlugin(), "test-transports"):
        entry = plugin_host.transports().get("fake")
        assert entry.plugin == "test-transports"
        assert entry.factory(latency_ms=3).options == {"latency_ms": 3}
    assert "fake" not in plugin_host.transports()


class LifecycleRecorder:
    """Records the lifecycle hooks in the order they fire."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    @hookimpl
    def kctl_controller_started(self, controller: KafkaController) -> None:
        self.calls.append(("started", controller.broker_id, controller.epoch))

    @hookimpl
    def kctl_controller_resigned(self, controller: KafkaController) -> None:
        self.calls.append(("resigned", controller.broker_id, controller.epoch))


@pytest.mark.usefixtures("engine")
def test_hook_kctl_controller_started(plugin_host: PluginHost) -> None:
    recorder = LifecycleRecorder()
    with register_plugin(plugin_host, recorder, "lifecycle"), EmbeddedCluster(3, plugins=plugin_host) as cluster:
        active = cluster.active_controller
        assert active is not None
        assert recorder.calls == [("started", active.broker_id, 1)]
        new = cluster.kill_controller()
        assert recorder.calls[-1] == ("started", new, 2)


@pytest.mark.usefixtures("engine")
def test_hook_kctl_controller_resigned(plugin_host: PluginHost) -> None:
    recorder = LifecycleRecorder()
    with register_plugin(plugin_host, recorder, "lifecycle"), EmbeddedCluster(3, plugins=plugin_host) as cluster:
        first = cluster.active_controller
        assert first is not None
        cluster.kill_broker(first.broker_id)
        cluster.run_until_stable()
        # Observers hear of the resignation while the ended epoch is still readable.
        assert ("resigned", first.broker_id, 1) in recorder.calls
        assert [c for c in recorder.calls if c[0] == "started"][-1][2] == 2


@pytest.mark.usefixtures("engine")
def test_lifecycle_hooks_come_in_pairs_even_around_a_failed_failover(plugin_host: PluginHost) -> None:
    # Candidate 1 wins epoch 1 but cannot read the topics: its failover fails and it moves the
    # controller away. It never started, so observers hear neither start nor resignation of epoch 1.
    recorder = LifecycleRecorder()
    sessions = FaultySessions(failing={1: {"get_all_topics"}})
    with (
        register_plugin(plugin_host, recorder, "lifecycle"),
        EmbeddedCluster(3, controllers=[1, 2], controller_session=sessions, plugins=plugin_host) as cluster,
    ):
        assert recorder.calls == [("started", 2, 2)]
        sessions[1].failing.clear()
        assert cluster.kill_controller() == 1
        assert cluster.run_until_stable()
    assert recorder.calls == [("started", 2, 2), ("resigned", 2, 2), ("started", 1, 3), ("resigned", 1, 3)]


@pytest.mark.usefixtures("engine")
def test_a_failing_observer_never_reaches_the_controller(plugin_host: PluginHost) -> None:
    class Broken:
        @hookimpl
        def kctl_controller_started(self, controller: KafkaController) -> None:
            raise RuntimeError("observer bug")

    with register_plugin(plugin_host, Broken(), "broken"), EmbeddedCluster(3, plugins=plugin_host) as cluster:
        cluster.create_topic("t", partitions=2, replication_factor=2)
        assert [d.leader for d in cluster.describe("t")] != [-1, -1]


# --- Registries ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "Offline", "least loaded", "a/b", "naïve", 7, None])
def test_registry_rejects_bad_names(name: Any) -> None:
    with pytest.raises(PluginError, match="invalid state store name"):
        StateStoreRegistry().for_plugin("p").add(name, FakeStore)


def test_registry_accepts_lowercase_digits_dots_dashes_underscores() -> None:
    registry = TransportRegistry().for_plugin("p")
    registry.add("in-process_2.v1", FakeTransport)
    assert registry.names() == ["in-process_2.v1"]


def test_registry_rejects_a_factory_that_is_not_callable() -> None:
    with pytest.raises(PluginError, match="not callable"):
        TransportRegistry().for_plugin("p").add("tcp", "tcp://")  # type: ignore[arg-type]


def test_selector_registry_requires_an_election_kind() -> None:
    with pytest.raises(PluginError, match="kind must be an ElectionKind"):
        LeaderSelectorRegistry().for_plugin("p").add("x", first_allowed, kind="offline")  # type: ignore[arg-type]


def test_unknown_name_lists_the_registered_ones(plugin_host: PluginHost) -> None:
    with pytest.raises(PluginError, match=r"unknown leader selector 'fastest'; registered: "
                                          r"controlled_shutdown, offline, preferred, reassign$"):
        plugin_host.leader_selectors().get("fastest")
    with pytest.raises(PluginError, match="registered: none"):
        TransportRegistry().get("tcp")


def test_views_share_entries_and_attribute_them_to_their_plugin() -> None:
    registry = StateStoreRegistry()
    registry.for_plugin("a").add("one", FakeStore)
    registry.for_plugin("b").add("two", FakeStore)
    assert [(e.name, e.plugin) for e in registry] == [("one", "a"), ("two", "b")]
    assert len(registry) == 2 and repr(registry) == "<StateStoreRegistry: one, two>"


def test_created_selector_must_match_its_registration() -> None:
    registry = LeaderSelectorRegistry().for_plugin("p")
    registry.add("wrong-kind", first_allowed, kind=ElectionKind.PREFERRED)
    registry.add("not-a-selector", lambda config: object(), kind=ElectionKind.OFFLINE)
    with pytest.raises(PluginError, match="registered for preferred elections"):
        registry.get("wrong-kind").create(ControllerConfig())
    with pytest.raises(PluginError, match="does not implement LeaderSelector"):
        registry.get("not-a-selector").create(ControllerConfig())


def test_duplicate_name_is_a_conflict_naming_both_plugins(plugin_host: PluginHost) -> None:
    with register_plugin(plugin_host, SelectorPlugin("dup"), "first"), \
            register_plugin(plugin_host, SelectorPlugin("dup"), "second"):
        with pytest.raises(PluginConflict, match="'dup' is already registered by plugin 'first'; "
                                                 "plugin 'second' cannot register it again"):
            plugin_host.leader_selectors()


def test_a_plugin_cannot_silently_replace_a_builtin(plugin_host: PluginHost) -> None:
    with register_plugin(plugin_host, SelectorPlugin("offline"), "shadow"):
        with pytest.raises(PluginConflict, match="already registered by plugin 'kctl.selectors'"):
            plugin_host.leader_selectors()


def test_override_replaces_a_builtin_until_unregistered(plugin_host: PluginHost) -> None:
    with register_plugin(plugin_host, SelectorPlugin("offline", override=True), "replacement"):
        entry = plugin_host.leader_selectors().get("offline")
        assert (entry.plugin, entry.factory) == ("replacement", first_allowed)
    assert plugin_host.leader_selectors().get("offline").plugin == "kctl.selectors"


# --- Registration, caching and reloading -------------------------------------------------------------


def test_builtins_are_registered_under_their_module_paths(plugin_host: PluginHost) -> None:
    assert plugin_names(plugin_host) == list(DEFAULT_PLUGINS)
    assert all(info.distribution is None and info.version is None for info in plugin_host.plugin_infos())


def test_registries_are_cached_until_a_plugin_changes(plugin_host: PluginHost) -> None:
    before = plugin_host.leader_selectors()
    assert plugin_host.leader_selectors() is before
    with register_plugin(plugin_host, SelectorPlugin(), "test-selectors"):
        during = plugin_host.leader_selectors()
        assert during is not before and "first-allowed" in during
    assert "first-allowed" not in plugin_host.leader_selectors()


def test_plugin_infos_list_the_hooks_each_plugin_implements(plugin_host: PluginHost) -> None:
    class Both(SelectorPlugin):
        @hookimpl
        def kctl_register_transports(self, register: TransportRegistry) -> None:
            register.add("fake", FakeTransport)

    with register_plugin(plugin_host, Both(), "both"):
        info = plugin_host.plugin_infos()[-1]
        assert (info.name, info.hooks) == ("both", ("kctl_register_leader_selectors", "kctl_register_transports"))


def test_a_name_or_plugin_registered_twice_is_a_conflict(plugin_host: PluginHost) -> None:
    plugin = SelectorPlugin()
    with register_plugin(plugin_host, plugin, "once"):
        with pytest.raises(PluginConflict, match="'kctl.selectors'"):
            plugin_host.register(SelectorPlugin(), "kctl.selectors")
        with pytest.raises(PluginConflict, match="'again'"):
            plugin_host.register(plugin, "again")


def test_unregister_returns_the_plugin_or_none(plugin_host: PluginHost) -> None:
    plugin = SelectorPlugin()
    plugin_host.register(plugin, "temporary")
    assert plugin_host.unregister("temporary") is plugin
    assert plugin_host.unregister("temporary") is None


def test_register_plugin_unregisters_when_the_block_fails(plugin_host: PluginHost) -> None:
    with pytest.raises(RuntimeError), register_plugin(plugin_host, SelectorPlugin(), "failing"):
        raise RuntimeError
    assert "failing" not in plugin_names(plugin_host)


def test_load_plugins_starts_from_scratch(plugin_host: PluginHost) -> None:
    plugin_host.register(SelectorPlugin(), "stale")
    plugin_host.load_plugins()
    first = plugin_host.plugin_infos()
    plugin_host.load_plugins()
    assert plugin_host.plugin_infos() == first
    assert [info.name for info in first] == list(DEFAULT_PLUGINS)
    assert "first-allowed" not in plugin_host.leader_selectors()


# --- Validation of plugins -----------------------------------------------------------------------------


def test_check_pending_rejects_an_implementation_without_a_spec(plugin_host: PluginHost) -> None:
    class Misspelt:
        @hookimpl
        def kctl_register_leader_selector(self, register: LeaderSelectorRegistry) -> None:
            """Singular: not a kctl hook."""

    plugin_host.register(Misspelt(), "misspelt")
    with pytest.raises(PluginError, match=r"plugin 'misspelt' implements a hook kctl does not define.*"
                                          r"'kctl_register_leader_selector'"):
        plugin_host.check_pending()
    plugin_host.unregister("misspelt")
    plugin_host.check_pending()


def test_register_plugin_rejects_an_implementation_without_a_spec(plugin_host: PluginHost) -> None:
    class Unknown:
        @hookimpl
        def kctl_no_such_hook(self) -> None:
            """Not a kctl hook."""

    with pytest.raises(PluginError, match="kctl_no_such_hook"), register_plugin(plugin_host, Unknown(), "unknown"):
        pytest.fail("the block must not run")
    assert "unknown" not in plugin_names(plugin_host)


def test_an_implementation_with_unknown_arguments_is_rejected(plugin_host: PluginHost) -> None:
    class ExtraArgument:
        @hookimpl
        def kctl_register_transports(self, register: TransportRegistry, config: ControllerConfig) -> None:
            """``config`` is not an argument of this hook."""

    with pytest.raises(PluginError, match="'extra' does not match kctl's hook specifications"):
        plugin_host.register(ExtraArgument(), "extra")


def test_a_failing_plugin_is_named(plugin_host: PluginHost) -> None:
    class Broken:
        @hookimpl
        def kctl_register_state_stores(self, register: StateStoreRegistry) -> None:
            raise RuntimeError("boom")

    with register_plugin(plugin_host, Broken(), "broken"):
        with pytest.raises(PluginError, match=r"plugin 'broken' failed in kctl_register_state_stores: .*boom"):
            plugin_host.state_stores()


# --- Environment variables ---------------------------------------------------------------------------


def test_disable_plugins_blocks_named_plugins(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("KCTL_DISABLE_PLUGINS", " kctl.selectors , blocked-test-plugin")
    host = PluginHost()
    assert "kctl.selectors" not in plugin_names(host)
    assert len(host.leader_selectors()) == 0
    host.register(SelectorPlugin(), "blocked-test-plugin")
    assert "blocked-test-plugin" not in plugin_names(host)

    clean_env.delenv("KCTL_DISABLE_PLUGINS")
    host.load_plugins()
    assert plugin_names(host) == list(DEFAULT_PLUGINS)


def test_disable_plugins_blocks_an_entry_point(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("KCTL_LOAD_PLUGINS", THIRD_PARTY)
    clean_env.setenv("KCTL_DISABLE_PLUGINS", "least_loaded")
    assert plugin_names(PluginHost(load_entrypoints=True)) == list(DEFAULT_PLUGINS)


def test_entry_points_load_the_installed_third_party_plugin(clean_env: pytest.MonkeyPatch) -> None:
    host = PluginHost(load_entrypoints=True)
    info = next(info for info in host.plugin_infos() if info.name == "least_loaded")
    assert (info.distribution, info.version) == (THIRD_PARTY, metadata.version(THIRD_PARTY))
    assert info.hooks == ("kctl_register_leader_selectors",)
    assert host.leader_selectors().get("least-loaded").plugin == "least_loaded"


def test_entry_points_load_only_when_asked(clean_env: pytest.MonkeyPatch) -> None:
    assert plugin_names(PluginHost()) == list(DEFAULT_PLUGINS)


def test_load_plugins_allowlist(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("KCTL_LOAD_PLUGINS", f"{THIRD_PARTY}, kctl_least_loaded")  # one distribution, twice
    assert plugin_names(PluginHost(load_entrypoints=True)) == [*DEFAULT_PLUGINS, "least_loaded"]


def test_load_plugins_allowlist_accepts_any_spelling_of_a_distribution(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("KCTL_LOAD_PLUGINS", "KCTL_Least.Loaded")
    assert "least_loaded" in plugin_names(PluginHost(load_entrypoints=True))


def test_empty_load_plugins_loads_no_entry_point(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("KCTL_LOAD_PLUGINS", "")
    assert plugin_names(PluginHost(load_entrypoints=True)) == list(DEFAULT_PLUGINS)


@pytest.mark.parametrize(
    ("allowlist", "message"),
    [("kctl-no-such-plugin", "'kctl-no-such-plugin', which is not installed"),
     ("pluggy", "'pluggy', which has no 'kctl' entry points")],
)
def test_load_plugins_allowlist_names_must_be_kctl_plugins(
    clean_env: pytest.MonkeyPatch, allowlist: str, message: str
) -> None:
    clean_env.setenv("KCTL_LOAD_PLUGINS", allowlist)
    with pytest.raises(PluginError, match=f"KCTL_LOAD_PLUGINS names {message}"):
        PluginHost(load_entrypoints=True)


def test_trace_plugins_prints_hook_calls(clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    clean_env.setenv("KCTL_TRACE_PLUGINS", "1")
    host = PluginHost()
    host.leader_selectors()
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "kctl trace: kctl_register_leader_selectors(register=<LeaderSelectorRegistry for plugin "
        "'kctl.selectors': empty>) -> plugins [kctl.selectors]",
        "kctl trace: kctl_register_leader_selectors returned []",
    ]

    class Broken:
        @hookimpl
        def kctl_register_transports(self, register: TransportRegistry) -> None:
            raise RuntimeError("boom")

    with register_plugin(host, Broken(), "broken"), pytest.raises(PluginError):
        host.transports()
    assert capsys.readouterr().err.splitlines()[-1] == (
        "kctl trace: kctl_register_transports raised RuntimeError('boom')"
    )


def test_tracing_is_off_by_default_and_after_reload(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("KCTL_TRACE_PLUGINS", "1")
    host = PluginHost()
    clean_env.delenv("KCTL_TRACE_PLUGINS")
    host.load_plugins()
    host.leader_selectors()
    PluginHost().state_stores()
    assert capsys.readouterr().err == ""


# --- The process-wide host -----------------------------------------------------------------------------


@pytest.fixture
def fresh_default_host(clean_env: pytest.MonkeyPatch) -> Iterator[None]:
    reset_plugin_host()
    yield
    reset_plugin_host()


@pytest.mark.usefixtures("fresh_default_host")
def test_default_host_is_shared_and_never_loads_entry_points_under_tests() -> None:
    host = get_plugin_host()
    assert get_plugin_host() is host
    assert plugin_names(host) == list(DEFAULT_PLUGINS)  # kctl-least-loaded is installed, yet absent
    reset_plugin_host()
    assert get_plugin_host() is not host


class _LastEligible:
    """An offline selector that picks the last eligible replica (Kafka's rule picks the first)."""

    kind = ElectionKind.OFFLINE

    def select_leaders(self, batch: Any) -> list[int]:
        return [allowed[-1] if allowed else -1 for allowed in batch.allowed]


class _LastEligiblePlugin:
    @hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        register.add("last-eligible", lambda config: _LastEligible(), kind=ElectionKind.OFFLINE)


@pytest.mark.usefixtures("engine")
def test_a_clusters_own_plugin_host_serves_its_elections(plugin_host: PluginHost) -> None:
    """A selector registered only on the host given to the cluster (not the process-wide one) is
    the one its controllers' elections use."""
    assert "last-eligible" not in get_plugin_host().leader_selectors().names()
    with register_plugin(plugin_host, _LastEligiblePlugin(), "last-eligible-plugin"):
        config = {"kctl.leader.selector.offline": "last-eligible", "auto.leader.rebalance.enable": False}
        with EmbeddedCluster(3, plugins=plugin_host, config=config) as cluster:
            cluster.create_topic("t", assignment={0: [1, 2, 3]})
            cluster.kill_broker(1)
            assert cluster.run_until_stable()
            assert cluster.describe("t")[0].leader == 3  # Kafka's rule would elect 2
