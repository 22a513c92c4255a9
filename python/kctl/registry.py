"""Typed registries that registration hooks fill in.

A plugin never returns its capabilities; it calls ``register.add(name, factory)`` on the registry
it is handed. The registry validates the name and the factory, records which plugin added the
entry, and refuses a name another plugin already holds (:class:`~kctl.errors.PluginConflict`), so
the outcome never depends on the order in which pluggy calls implementations.

The plugin host hands each plugin a *view* (:meth:`Registry.for_plugin`): views share one table of
entries and differ only in the plugin they attribute new entries to.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

from kctl.config import ControllerConfig
from kctl.errors import InvalidConfigurationError, KctlError, PluginConflict, PluginError, did_you_mean
from kctl.selectors import ElectionKind, LeaderSelector

if TYPE_CHECKING:  # the stores package imports every store: kctl --help reads this module without them
    from kctl.stores.base import StateStore

LeaderSelectorFactory = Callable[[ControllerConfig], LeaderSelector]
StateStoreFactory = Callable[..., "StateStore"]
TransportFactory = Callable[..., Any]
CommandHandler = Callable[[argparse.Namespace], int]
"""A ``kctl`` subcommand: the parsed arguments in, the exit status out."""
CommandArguments = Callable[[argparse.ArgumentParser], None]
"""Adds a subcommand's arguments to its parser."""

_NAME = re.compile(r"[a-z0-9_.-]+")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")

F = TypeVar("F", bound=Callable[..., Any])


def _who(plugin: str | None) -> str:
    return "direct registration" if plugin is None else f"plugin {plugin!r}"


@dataclass(frozen=True)
class RegistryEntry(Generic[F]):
    """One registered capability: its name, the factory that builds it, and who registered it.

    ``plugin`` is the registering plugin's name, or ``None`` for an entry added directly to a
    registry rather than through a hook.
    """

    name: str
    factory: F
    plugin: str | None


@dataclass(frozen=True)
class LeaderSelectorEntry(RegistryEntry[LeaderSelectorFactory]):
    """A registered leader selector; ``kind`` is the election it serves."""

    kind: ElectionKind

    def create(self, config: ControllerConfig) -> LeaderSelector:
        """Build the selector and check it honours the registration (protocol and kind)."""
        selector = self.factory(config)
        if not isinstance(selector, LeaderSelector):
            raise PluginError(
                f"leader selector {self.name!r} of {_who(self.plugin)} built "
                f"{type(selector).__name__}, which does not implement LeaderSelector"
            )
        if selector.kind is not self.kind:
            raise PluginError(
                f"leader selector {self.name!r} of {_who(self.plugin)} was registered for "
                f"{self.kind.value} elections but built a selector for {selector.kind!r}"
            )
        return selector


E = TypeVar("E", bound=RegistryEntry[Any])


class Registry(Generic[E]):
    """Named entries of one kind of capability, each attributed to a plugin."""

    what: ClassVar[str]
    """What the entries are, for messages ("leader selector")."""

    def __init__(self) -> None:
        self._entries: dict[str, E] = {}
        self._plugin: str | None = None

    def for_plugin(self, plugin: str) -> Self:
        """A view sharing this registry's entries that attributes what it adds to ``plugin``."""
        view = copy.copy(self)
        view._plugin = plugin
        return view

    def get(self, name: str) -> E:
        """The entry called ``name``; an unknown name is a :class:`PluginError` listing the known
        and suggesting the closest (a likely typo)."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self.names()) or "none"
            raise PluginError(f"unknown {self.what} {name!r}{did_you_mean(name, self.names())}; "
                              f"registered: {known}") from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def __iter__(self) -> Iterator[E]:
        return (self._entries[name] for name in self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        view = "" if self._plugin is None else f" for plugin {self._plugin!r}"
        return f"<{type(self).__name__}{view}: {', '.join(self.names()) or 'empty'}>"

    def _check(self, name: object, factory: object) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise PluginError(
                f"invalid {self.what} name {name!r} from {_who(self._plugin)}: "
                "use one or more of a-z, 0-9, '_', '.', '-'"
            )
        if not callable(factory):
            raise PluginError(
                f"{self.what} {name!r} from {_who(self._plugin)}: factory {factory!r} is not callable"
            )

    def _put(self, entry: E, override: bool) -> None:
        existing = self._entries.get(entry.name)
        if existing is not None and not override:
            raise PluginConflict(
                f"{self.what} {entry.name!r} is already registered by {_who(existing.plugin)}; "
                f"{_who(entry.plugin)} cannot register it again "
                "(pass override=True to replace it on purpose)"
            )
        self._entries[entry.name] = entry


class LeaderSelectorRegistry(Registry[LeaderSelectorEntry]):
    """Leader selectors by name (``offline``, ``preferred``, a plugin's ``least-loaded`` …)."""

    what = "leader selector"

    def add(
        self, name: str, factory: LeaderSelectorFactory, *, kind: ElectionKind, override: bool = False
    ) -> None:
        """Register ``factory(config) -> LeaderSelector`` under ``name`` for ``kind`` elections."""
        self._check(name, factory)
        if not isinstance(kind, ElectionKind):
            raise PluginError(f"{self.what} {name!r}: kind must be an ElectionKind, not {kind!r}")
        self._put(LeaderSelectorEntry(name, factory, self._plugin, kind), override)

    def check_selector(self, kind: ElectionKind, name: str) -> None:
        """Refuse ``kctl.leader.selector.<kind> = name`` unless ``name`` is a selector for ``kind``
        elections (or the kind's own name: Kafka's rule, which needs no registry).

        A selector serves the election kind it was registered for, the kind of the strategy
        :func:`kctl.election.by_name` wraps it in: an unknown name, or one registered for another
        kind, is an :class:`InvalidConfigurationError` naming the property, the selectors
        registered for the kind and the closest name (a likely typo).
        """
        entry = self._entries.get(name)
        if name == kind.value or entry is not None and entry.kind is kind:
            return
        names = sorted({kind.value, *(e.name for e in self if e.kind is kind)})
        if entry is None:
            problem = f"no leader selector is registered as {name!r}{did_you_mean(name, names)}"
            hint = " (a plugin's selector needs its distribution installed)"
        else:
            problem = f"{name!r} is a leader selector for {entry.kind.value} elections, not {kind.value} ones"
            hint = ""
        raise InvalidConfigurationError(
            f"kctl.leader.selector.{kind.value} = {name!r}: {problem}; {kind.value} selectors: {', '.join(names)}{hint}"
        )

    def check_config(self, config: ControllerConfig) -> None:
        """Refuse a config whose ``kctl.leader.selector.*`` names no selector of its kind
        (:meth:`check_selector`): checked wherever a config is read, before anything runs."""
        for kind in ElectionKind:
            self.check_selector(kind, config.selector_name(kind))


class StateStoreRegistry(Registry[RegistryEntry[StateStoreFactory]]):
    """State stores by name (``memory``, ``zookeeper`` …)."""

    what = "state store"

    def add(self, name: str, factory: StateStoreFactory, *, override: bool = False) -> None:
        """Register ``factory(**options) -> StateStore`` under ``name``."""
        self._check(name, factory)
        self._put(RegistryEntry(name, factory, self._plugin), override)


class TransportRegistry(Registry[RegistryEntry[TransportFactory]]):
    """Controller-to-broker transports by name (``inprocess`` …)."""

    what = "transport"

    def add(self, name: str, factory: TransportFactory, *, override: bool = False) -> None:
        """Register ``factory(**options) -> transport`` under ``name``."""
        self._check(name, factory)
        self._put(RegistryEntry(name, factory, self._plugin), override)


@dataclass(frozen=True)
class LazyCallable:
    """A ``"module:function"`` target, imported on its first call: a command names its handler and
    arguments this way so that only the chosen command's module is ever imported."""

    target: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module, _, name = self.target.partition(":")
        try:
            function = getattr(importlib.import_module(module), name)
        except KctlError:  # a missing optional dependency says which extra installs it
            raise
        except (ImportError, AttributeError) as exc:
            raise PluginError(f"cannot load {self.target!r}: {exc}") from exc
        return function(*args, **kwargs)


@dataclass(frozen=True)
class Command(RegistryEntry[CommandHandler]):
    """A ``kctl`` subcommand: its name, its one-line help, its handler (``factory``) and the
    function adding its arguments, both called only when the command is chosen."""

    help: str
    arguments: CommandArguments | None = None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        if self.arguments is not None:
            self.arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        return int(self.factory(args))


class CommandRegistry(Registry[Command]):
    """``kctl``'s subcommands by name (``topics``, ``sim`` …), in registration order: the order
    ``kctl --help`` lists them in."""

    what = "command"

    def add(
        self, name: str, handler: CommandHandler | str, *, help: str,
        arguments: CommandArguments | str | None = None, override: bool = False,
    ) -> None:
        """Register ``handler(args) -> exit status`` as ``kctl name``; ``arguments(parser)`` adds
        its arguments. Either may be a ``"module:function"`` string, imported only when the
        command is chosen (:class:`LazyCallable`)."""
        run = self._callable(name, handler)
        add_arguments = None if arguments is None else self._callable(name, arguments)
        self._check(name, run)
        if add_arguments is not None:
            self._check(name, add_arguments)
        self._put(Command(name, run, self._plugin, help, add_arguments), override)

    def __iter__(self) -> Iterator[Command]:
        return iter(list(self._entries.values()))

    def _callable(self, name: str, target: Callable[..., Any] | str) -> Callable[..., Any]:
        if not isinstance(target, str):
            return target
        if not _TARGET.fullmatch(target):
            raise PluginError(f"{self.what} {name!r} from {_who(self._plugin)}: {target!r} is not a "
                              "'module:function' target")
        return LazyCallable(target)


__all__ = [
    "Command",
    "CommandArguments",
    "CommandHandler",
    "CommandRegistry",
    "LazyCallable",
    "LeaderSelectorEntry",
    "LeaderSelectorFactory",
    "LeaderSelectorRegistry",
    "Registry",
    "RegistryEntry",
    "StateStoreFactory",
    "StateStoreRegistry",
    "TransportFactory",
    "TransportRegistry",
]
