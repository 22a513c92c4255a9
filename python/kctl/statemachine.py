"""``PartitionStateMachine(controller_id, context, store, batch, config)`` and
``ReplicaStateMachine(controller_id, context, store, batch)``: the state machines of the context's
engine (reference §3 and §4).

The classes are the abstract bases every engine implements (:mod:`kctl.engine_api.statemachine`,
which documents them); this module loads the engine table, so the constructors find every engine.
"""

from __future__ import annotations

from kctl.engine_api.statemachine import ElectionOutcome, PartitionStateMachine, ReplicaOutcome, ReplicaStateMachine
from kctl.engines import TABLE as _TABLE  # noqa: F401  (loading the table registers every engine)

__all__ = ["ElectionOutcome", "PartitionStateMachine", "ReplicaOutcome", "ReplicaStateMachine"]
