"""The plugin host: kctl's typed front to pluggy.

Core code asks a :class:`PluginHost` (``get_plugin_host().leader_selectors().get("offline")``) and
never calls ``pm.hook`` itself, so every hook call site is visible to readers and to mypy. The host
registers plugins in a fixed order: its built-in modules (:data:`DEFAULT_PLUGINS`), then (only
when asked) the ``kctl`` entry points of installed distributions, then whatever is registered
explicitly. Importing this module has no side effects; the default host is built on first use, and
so is the command host ``kctl`` reads its subcommands from (built-ins :data:`COMMAND_PLUGINS`).

Environment:

- ``KCTL_LOAD_PLUGINS``: comma-separated distributions whose entry points may load (empty: none);
- ``KCTL_DISABLE_PLUGINS``: comma-separated plugin names never to register (built-ins included);
- ``KCTL_TRACE_PLUGINS=1``: print every hook call and its outcome to stderr.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from kctl import hookspecs
from kctl.errors import KctlError, PluginConflict, PluginError
from kctl.registry import CommandRegistry, LeaderSelectorRegistry, Registry, StateStoreRegistry, TransportRegistry

if TYPE_CHECKING:
    from kctl.controller import KafkaController

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "kctl"
"""The entry-point group third-party distributions declare their plugins in."""

DEFAULT_PLUGINS = (
    "kctl.selectors",
    "kctl.stores.memory",
    "kctl.stores.zookeeper",
    "kctl.transports.inprocess",
    "kctl.transports.tcp",
    "kctl.transports.zkqueue",
    "kctl.transports.kafka",
)
"""Built-in plugin modules, registered under their module path before any entry point."""

COMMAND_PLUGINS = ("kctl.cli",)
"""Built-in plugin modules of :func:`get_command_host`: the front ends, registered as commands."""

LOAD_PLUGINS_ENV = "KCTL_LOAD_PLUGINS"
DISABLE_PLUGINS_ENV = "KCTL_DISABLE_PLUGINS"
TRACE_PLUGINS_ENV = "KCTL_TRACE_PLUGINS"

R = TypeVar("R", bound=Registry[Any])


@dataclass(frozen=True)
class PluginInfo:
    """What ``kctl plugins`` reports about one registered plugin.

    ``distribution`` and ``version`` are known only for plugins loaded from an entry point.
    """

    name: str
    hooks: tuple[str, ...]
    distribution: str | None = None
    version: str | None = None


class PluginHost:
    """A ``pluggy.PluginManager("kctl")`` with one typed method per hook and cached registries."""

    def __init__(self, load_entrypoints: bool = False, builtins: Sequence[str] = DEFAULT_PLUGINS) -> None:
        self._builtins = tuple(builtins)
        self._pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
        self._pm.add_hookspecs(hookspecs)
        self._distributions: dict[str, metadata.Distribution] = {}
        self._registries: dict[type[Registry[Any]], Registry[Any]] = {}
        self._untrace: Callable[[], None] | None = None
        self.load_plugins(load_entrypoints=load_entrypoints)

    # --- Loading and registration ----------------------------------------------------------------

    def load_plugins(self, load_entrypoints: bool = False) -> None:
        """Start from scratch: drop every plugin, re-read ``KCTL_*``, register the built-ins, then
        entry points when asked, then :meth:`check_pending`. Calling it twice gives the same host."""
        for name, plugin in self._pm.list_name_plugin():
            if plugin is None:
                self._pm.unblock(name)
            else:
                self._pm.unregister(name=name)
        self._distributions.clear()
        self._invalidate()
        for name in _env_names(DISABLE_PLUGINS_ENV) or ():
            self._pm.set_blocked(name)
        self._trace(os.environ.get(TRACE_PLUGINS_ENV) == "1")
        for module in self._builtins:
            if not self._pm.is_blocked(module):
                self.register(importlib.import_module(module), module)
        if load_entrypoints:
            self._load_entrypoints()
        self.check_pending()

    def register(self, plugin: object, name: str) -> None:
        """Register ``plugin`` (a module or an object with ``@hookimpl`` methods) as ``name``.

        A blocked name (``KCTL_DISABLE_PLUGINS``) is ignored; a name or plugin already registered
        is a :class:`PluginConflict`; an implementation whose arguments do not match its spec is a
        :class:`PluginError`. Call :meth:`check_pending` to reject hooks kctl does not define.
        """
        try:
            self._pm.register(plugin, name=name)
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"plugin {name!r} does not match kctl's hook specifications: {exc}") from exc
        except ValueError as exc:
            raise PluginConflict(f"cannot register plugin {name!r}: {exc}") from exc
        self._invalidate()

    def unregister(self, name: str) -> object | None:
        """Unregister the plugin called ``name``; returns it, or ``None`` if none was registered."""
        plugin = self._pm.unregister(name=name)
        self._distributions.pop(name, None)
        self._invalidate()
        return plugin

    def check_pending(self) -> None:
        """Reject implementations of hooks kctl does not specify (typically a misspelt name)."""
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            name = self._pm.get_name(exc.plugin)
            raise PluginError(f"plugin {name!r} implements a hook kctl does not define: {exc}") from exc

    def plugin_infos(self) -> list[PluginInfo]:
        """Registered plugins in registration order, with the hooks each implements."""
        infos = []
        for name, plugin in self._pm.list_name_plugin():
            if plugin is None:  # blocked
                continue
            dist = self._distributions.get(name)
            hooks = sorted(caller.name for caller in self._pm.get_hookcallers(plugin) or ())
            if dist is None:
                infos.append(PluginInfo(name, tuple(hooks)))
            else:
                infos.append(PluginInfo(name, tuple(hooks), dist.name, dist.version))
        return infos

    def _load_entrypoints(self) -> None:
        for ep in _entry_points():
            if self._pm.is_blocked(ep.name):
                continue
            dist = f"distribution {ep.dist.name!r}" if ep.dist else "an unknown distribution"
            if self._pm.has_plugin(ep.name):
                raise PluginConflict(
                    f"entry point {ep.name!r} of {dist} clashes with the plugin already registered "
                    f"as {ep.name!r}; block one of them with {DISABLE_PLUGINS_ENV}"
                )
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginError(f"cannot load plugin {ep.name!r} ({ep.value}) of {dist}: {exc!r}") from exc
            self.register(plugin, ep.name)
            if ep.dist is not None:
                self._distributions[ep.name] = ep.dist

    def _trace(self, enabled: bool) -> None:
        if self._untrace is not None:
            self._untrace()
            self._untrace = None
        if enabled:
            self._untrace = self._pm.add_hookcall_monitoring(_trace_before, _trace_after)

    # --- Registries ------------------------------------------------------------------------------

    def leader_selectors(self) -> LeaderSelectorRegistry:
        """Every plugin's leader selectors (``kctl_register_leader_selectors``)."""
        return self._registry(LeaderSelectorRegistry, self.kctl_register_leader_selectors)

    def state_stores(self) -> StateStoreRegistry:
        """Every plugin's state stores (``kctl_register_state_stores``)."""
        return self._registry(StateStoreRegistry, self.kctl_register_state_stores)

    def transports(self) -> TransportRegistry:
        """Every plugin's transports (``kctl_register_transports``)."""
        return self._registry(TransportRegistry, self.kctl_register_transports)

    def commands(self) -> CommandRegistry:
        """Every plugin's ``kctl`` subcommands (``kctl_register_commands``)."""
        return self._registry(CommandRegistry, self.kctl_register_commands)

    def _registry(self, cls: type[R], fill: Callable[[R], None]) -> R:
        cached = self._registries.get(cls)
        if isinstance(cached, cls):
            return cached
        registry = cls()
        fill(registry)
        self._registries[cls] = registry
        return registry

    def _invalidate(self) -> None:
        self._registries.clear()

    # --- Typed forwarders: one per hook; the only place hooks are called ------------------------

    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        self._register_each("kctl_register_leader_selectors", register)

    def kctl_register_state_stores(self, register: StateStoreRegistry) -> None:
        self._register_each("kctl_register_state_stores", register)

    def kctl_register_transports(self, register: TransportRegistry) -> None:
        self._register_each("kctl_register_transports", register)

    def kctl_register_commands(self, register: CommandRegistry) -> None:
        self._register_each("kctl_register_commands", register)

    def kctl_controller_started(self, controller: KafkaController) -> None:
        self._broadcast("kctl_controller_started", controller=controller)

    def kctl_controller_resigned(self, controller: KafkaController) -> None:
        self._broadcast("kctl_controller_resigned", controller=controller)

    def _broadcast(self, hook_name: str, **kwargs: Any) -> None:
        """Call an observer hook; a failing observer is logged and never reaches the controller."""
        try:
            getattr(self._pm.hook, hook_name)(**kwargs)
        except Exception:
            log.exception("a %s implementation failed", hook_name)

    def _register_each(self, hook_name: str, registry: Registry[Any]) -> None:
        """Call a registration hook one plugin at a time, in registration order, so that each
        plugin gets a registry view attributing its entries to it."""
        caller: pluggy.HookCaller = getattr(self._pm.hook, hook_name)
        impls = caller.get_hookimpls()
        for impl in impls:
            others = [other.plugin for other in impls if other.plugin is not impl.plugin]
            try:
                self._pm.subset_hook_caller(hook_name, others)(register=registry.for_plugin(impl.plugin_name))
            except KctlError:
                raise
            except Exception as exc:
                raise PluginError(f"plugin {impl.plugin_name!r} failed in {hook_name}: {exc!r}") from exc


def _env_names(variable: str) -> list[str] | None:
    """The comma-separated names in ``variable`` (deduplicated), or ``None`` when it is unset."""
    value = os.environ.get(variable)
    if value is None:
        return None
    return list(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))


def _entry_points() -> list[metadata.EntryPoint]:
    """The ``kctl`` entry points allowed by ``KCTL_LOAD_PLUGINS`` (all of them when it is unset)."""
    allowed = _env_names(LOAD_PLUGINS_ENV)
    if allowed is None:
        return sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
    selected: dict[str, list[metadata.EntryPoint]] = {}  # by distribution, however it was spelt
    for name in allowed:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise PluginError(f"{LOAD_PLUGINS_ENV} names {name!r}, which is not installed") from None
        eps = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
        if not eps:
            raise PluginError(
                f"{LOAD_PLUGINS_ENV} names {name!r}, which has no {ENTRY_POINT_GROUP!r} entry points"
            )
        selected[dist.name] = eps
    return [ep for eps in selected.values() for ep in eps]


def _trace_before(hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
    args = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
    plugins = ", ".join(impl.plugin_name for impl in impls)
    print(f"kctl trace: {hook_name}({args}) -> plugins [{plugins}]", file=sys.stderr)


def _trace_after(
    outcome: pluggy.Result[Any], hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]
) -> None:
    if outcome.exception is None:
        print(f"kctl trace: {hook_name} returned {outcome.get_result()!r}", file=sys.stderr)
    else:
        print(f"kctl trace: {hook_name} raised {outcome.exception!r}", file=sys.stderr)


_hosts: dict[tuple[str, ...], PluginHost] = {}
_hosts_lock = threading.Lock()


def _host(builtins: tuple[str, ...]) -> PluginHost:
    """The process-wide host with these built-ins, built on first use; it loads entry points
    except under kctl's tests (``sys._called_from_test``), which must never depend on what happens
    to be installed."""
    with _hosts_lock:
        if builtins not in _hosts:
            _hosts[builtins] = PluginHost(load_entrypoints=not hasattr(sys, "_called_from_test"), builtins=builtins)
        return _hosts[builtins]


def get_plugin_host() -> PluginHost:
    """The process-wide host: the built-in selectors, stores and transports, then the plugins."""
    return _host(DEFAULT_PLUGINS)


def get_command_host() -> PluginHost:
    """The host ``kctl`` reads its commands from: the built-in front ends (:data:`COMMAND_PLUGINS`),
    then the plugins. It imports none of the selectors, stores and transports, so ``kctl --help``
    stays a handful of modules; a plugin adding commands in-process registers on this host."""
    return _host(COMMAND_PLUGINS)


def reset_plugin_host() -> None:
    """Forget the process-wide hosts; the next :func:`get_plugin_host` and
    :func:`get_command_host` build new ones."""
    with _hosts_lock:
        _hosts.clear()


__all__ = [
    "COMMAND_PLUGINS",
    "DEFAULT_PLUGINS",
    "DISABLE_PLUGINS_ENV",
    "ENTRY_POINT_GROUP",
    "LOAD_PLUGINS_ENV",
    "TRACE_PLUGINS_ENV",
    "PluginHost",
    "PluginInfo",
    "get_command_host",
    "get_plugin_host",
    "reset_plugin_host",
]
