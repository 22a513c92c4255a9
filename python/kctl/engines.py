"""The engine table: one record per engine, naming the four classes the controller builds.

``"reference"`` is the pure-Python engine (:mod:`kctl.reference`), the oracle; ``"rust"`` the
native one (:mod:`kctl.native` over ``kctl._engine``). Importing this module registers both with
:mod:`kctl.engine_api`, which is where the public constructors look an engine up; the controller
builds its context, state machines and request batches from :func:`engine_parts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kctl.engine_api import ENGINES, EngineParts, default_engine, engine_parts, register
from kctl.native.context import NativeContext
from kctl.native.request_batch import NativeRequestBatch
from kctl.native.statemachine import NativePartitionStateMachine, NativeReplicaStateMachine
from kctl.reference.context import ReferenceContext
from kctl.reference.partition_state_machine import ReferencePartitionStateMachine
from kctl.reference.replica_state_machine import ReferenceReplicaStateMachine
from kctl.reference.request_batch import ReferenceRequestBatch

TABLE: Mapping[str, EngineParts] = MappingProxyType({
    "reference": EngineParts(
        "reference", ReferenceContext, ReferencePartitionStateMachine, ReferenceReplicaStateMachine, ReferenceRequestBatch
    ),
    "rust": EngineParts("rust", NativeContext, NativePartitionStateMachine, NativeReplicaStateMachine, NativeRequestBatch),
})
"""Every engine by name (the keys are ``ENGINES``)."""

for _parts in TABLE.values():
    register(_parts)

__all__ = ["ENGINES", "TABLE", "EngineParts", "default_engine", "engine_parts"]
