"""kctl's hook specifications (pluggy project and entry-point group ``kctl``).

This module is the single source of truth for what a plugin can implement: each hook's docstring
is its contract, and ``docs/plugins/hooks.md`` documents every hook under a heading that a test
checks against the signatures below. Types used only in signatures are imported under
``TYPE_CHECKING`` so that importing the specs imports nothing else of kctl.

Adding a hook takes four things: the spec here, a typed forwarding method on
:class:`kctl.plugins.PluginHost`, a ``## kctl_name(args…)`` heading in ``docs/plugins/hooks.md``,
and a ``test_hook_kctl_name`` test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from kctl.controller import KafkaController
    from kctl.registry import CommandRegistry, LeaderSelectorRegistry, StateStoreRegistry, TransportRegistry

hookspec = pluggy.HookspecMarker("kctl")
hookimpl = pluggy.HookimplMarker("kctl")


# -------------------------------------------------------------------------------------------------
# Registration hooks: add named capabilities to a registry.
#
# The plugin host calls every implementation once, in registration order (built-ins, then entry
# points, then plugins registered explicitly), each with a registry that attributes what it adds
# to that plugin. Results are cached until a plugin is registered or unregistered.
# -------------------------------------------------------------------------------------------------


@hookspec
def kctl_register_leader_selectors(register: LeaderSelectorRegistry) -> None:
    """Register leader selectors by name.

    Called the first time the plugin host is asked for its leader selectors (for example when the
    controller resolves ``kctl.leader.selector.*`` or ``kctl.election.by_name`` is used), and
    again after any plugin is registered or unregistered.

    :param register: Call ``register.add(name, factory, kind=ElectionKind.X)`` once per selector.
        ``factory`` receives the resolved :class:`~kctl.config.ControllerConfig` and returns an
        object implementing :class:`~kctl.selectors.LeaderSelector` whose ``kind`` is ``kind``.
        A name already registered by another plugin raises :class:`~kctl.errors.PluginConflict`
        unless ``override=True`` is passed.

    :return: Nothing; the return value is ignored.

    .. versionadded:: 0.1
    """


@hookspec
def kctl_register_state_stores(register: StateStoreRegistry) -> None:
    """Register state stores (the metadata store the controller runs on) by name.

    Called the first time the plugin host is asked for its state stores (for example when an
    ``EmbeddedCluster(store="memory")`` is built), and again after any plugin is registered or
    unregistered.

    :param register: Call ``register.add(name, factory)`` once per store. ``factory(**options)``
        returns an object implementing :class:`~kctl.stores.base.StateStore`; ``options`` are
        store-specific (``hosts``, ``chroot`` …). A name already registered by another plugin
        raises :class:`~kctl.errors.PluginConflict` unless ``override=True`` is passed.

    :return: Nothing; the return value is ignored.

    .. versionadded:: 0.1
    """


@hookspec
def kctl_register_transports(register: TransportRegistry) -> None:
    """Register controller-to-broker transports by name.

    Called the first time the plugin host is asked for its transports (for example when an
    ``EmbeddedCluster(transport="inprocess")`` is built), and again after any plugin is
    registered or unregistered.

    :param register: Call ``register.add(name, factory)`` once per transport.
        ``factory(**options)`` returns the transport the request batch hands its requests to;
        ``options`` are transport-specific. A name already registered by another plugin raises
        :class:`~kctl.errors.PluginConflict` unless ``override=True`` is passed.

    :return: Nothing; the return value is ignored.

    .. versionadded:: 0.1
    """


@hookspec
def kctl_register_commands(register: CommandRegistry) -> None:
    """Register ``kctl`` subcommands by name.

    Called once per ``kctl`` run, before the command line is parsed (so a plugin's commands appear
    in ``kctl --help``), on the host :func:`~kctl.plugins.get_command_host` returns: the built-in
    commands (plugin ``kctl.cli``), then the entry points, then plugins registered explicitly.

    :param register: Call ``register.add(name, handler, help=..., arguments=None)`` once per
        command. ``handler(args)`` receives the parsed :class:`argparse.Namespace` and returns the
        exit status; ``arguments(parser)`` adds the command's arguments to its
        :class:`argparse.ArgumentParser`. Either may be a ``"module:function"`` string, imported
        only when the command is chosen, which keeps ``kctl --help`` fast. A name already
        registered by another plugin raises :class:`~kctl.errors.PluginConflict` unless
        ``override=True`` is passed.

    :return: Nothing; the return value is ignored.

    .. versionadded:: 0.1
    """


# -------------------------------------------------------------------------------------------------
# Lifecycle hooks: observe the controller. They fire once per lifecycle step, never per partition,
# on the controller's event thread: an implementation must return quickly and must not call back
# into the controller synchronously (enqueue work instead).
# -------------------------------------------------------------------------------------------------


@hookspec
def kctl_controller_started(controller: KafkaController) -> None:
    """A controller became the active controller and finished its failover.

    Called on the controller's event thread right after ``onControllerFailover`` (reference §6.3):
    the context is loaded, the state machines are started and the brokers have been sent their
    state. Every implementation is called (a broadcast).

    The two lifecycle hooks come in pairs: each ``kctl_controller_started`` is followed by exactly
    one :func:`kctl_controller_resigned` for the same controller and epoch, before that controller
    starts again, and no resignation is reported without a start. A failover that fails (the
    controller won the election but could not take over, and moved the controller away) fires
    neither.

    :param controller: The :class:`~kctl.controller.KafkaController` now active; read
        ``controller.epoch``, ``controller.context`` or ``controller.metrics()``, but do not block.

    :return: Nothing; the return value is ignored.

    .. versionadded:: 0.1
    """


@hookspec
def kctl_controller_resigned(controller: KafkaController) -> None:
    """A controller stopped being the active controller (another took over, its session expired,
    a fenced write failed, or it was shut down).

    Called on the controller's event thread as it resigns, just before its in-memory state is
    reset, so ``controller.epoch`` is still the epoch that ended. Every implementation is called
    (a broadcast). Fires only for a controller whose :func:`kctl_controller_started` fired, once
    per start: a failover that failed before finishing is not reported at all.

    :param controller: The :class:`~kctl.controller.KafkaController` that resigned.

    :return: Nothing; the return value is ignored.

    .. versionadded:: 0.1
    """


__all__ = [
    "hookimpl",
    "hookspec",
    "kctl_controller_resigned",
    "kctl_controller_started",
    "kctl_register_commands",
    "kctl_register_leader_selectors",
    "kctl_register_state_stores",
    "kctl_register_transports",
]
