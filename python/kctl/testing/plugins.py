"""Plugin-host fixtures: test a plugin against kctl's built-ins, never against whatever is installed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest

from kctl.plugins import DISABLE_PLUGINS_ENV, PluginHost

P = TypeVar("P")


@pytest.fixture
def plugin_host(monkeypatch: pytest.MonkeyPatch) -> PluginHost:
    """A fresh plugin host with all of kctl's built-in plugins and no entry points."""
    monkeypatch.delenv(DISABLE_PLUGINS_ENV, raising=False)
    return PluginHost(load_entrypoints=False)


@contextmanager
def register_plugin(host: PluginHost, plugin: P, name: str) -> Iterator[P]:
    """Register ``plugin`` as ``name`` for the duration of a ``with`` block.

    The plugin is checked against the hook specifications on entry (a misspelt hook fails the
    test instead of silently doing nothing) and unregistered on exit, whatever happens.
    """
    host.register(plugin, name)
    try:
        host.check_pending()
        yield plugin
    finally:
        host.unregister(name)
