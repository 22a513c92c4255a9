"""pytest helpers for kctl and for plugin authors.

Enable them in a ``conftest.py`` with ``pytest_plugins = ["kctl.testing"]``; this makes the
fixtures available, and the helpers are imported from here as usual.
"""

from __future__ import annotations

from kctl.testing.plugins import plugin_host, register_plugin

__all__ = ["plugin_host", "register_plugin"]
