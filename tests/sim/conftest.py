"""The simulator's tests: every test here goes through the engine, so it runs on each
(``on_each_engine``; a test parametrized over ``engine`` itself names its engine directly)."""

from __future__ import annotations

from tests.support.engines import on_each_engine

__all__ = ["on_each_engine"]
