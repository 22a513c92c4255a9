"""``ControllerContext(engine=...)``: the controller's in-memory view of the cluster, of the named
engine (Kafka's ControllerContext, reference §1.4).

The class is the abstract base every engine implements (:mod:`kctl.engine_api.context`, which
documents the API and its ordering rules); this module loads the engine table, so the constructor
finds every engine of ``ENGINES``.
"""

from __future__ import annotations

from kctl.engine_api.context import ControllerContext
from kctl.engines import ENGINES, default_engine

__all__ = ["ENGINES", "ControllerContext", "default_engine"]
