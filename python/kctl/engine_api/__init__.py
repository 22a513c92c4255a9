"""What an engine is: the abstract classes every engine implements, and the lookup by name.

An engine is four classes, one per abstract base class here: the context (``context``), the
partition and replica state machines (``statemachine``) and the request batch
(``request_batch``). :mod:`kctl.engines` holds one :class:`EngineParts` record per engine and
registers it here, so the public constructors (``ControllerContext(engine=...)`` and the others)
find an implementation by name without importing one: the engines sit above this package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.errors import InvalidConfigurationError

if TYPE_CHECKING:
    from kctl.engine_api.context import ControllerContext
    from kctl.engine_api.request_batch import ControllerBrokerRequestBatch
    from kctl.engine_api.statemachine import PartitionStateMachine, ReplicaStateMachine

ENGINES = ("reference", "rust")
"""Engines this build provides; ``ControllerContext(engine=...)`` accepts these names."""


def default_engine() -> str:
    """The engine of a caller that names none: ``KCTL_ENGINE``, else the native one. Read at each
    call, not at import, so that setting the variable switches a running process (the test suite
    runs each engine in turn this way) and the processes it starts."""
    name = os.environ.get("KCTL_ENGINE") or "rust"
    if name not in ENGINES:
        raise InvalidConfigurationError(f"KCTL_ENGINE={name!r} is not an engine; choose one of {', '.join(ENGINES)}")
    return name


@dataclass(frozen=True)
class EngineParts:
    """One engine: the class of each part the controller builds."""

    name: str
    context: type[ControllerContext]
    partition_state_machine: type[PartitionStateMachine]
    replica_state_machine: type[ReplicaStateMachine]
    request_batch: type[ControllerBrokerRequestBatch]


_registered: dict[str, EngineParts] = {}


def register(parts: EngineParts) -> None:
    """Make an engine constructible by name (:mod:`kctl.engines` registers every engine of ``ENGINES``)."""
    if parts.name not in ENGINES:
        raise ValueError(f"{parts.name!r} is not an engine; engines: {', '.join(ENGINES)}")
    _registered[parts.name] = parts


def engine_parts(name: str) -> EngineParts:
    """The registered engine called ``name``; a ValueError naming the engines otherwise."""
    parts = _registered.get(name)
    if parts is None:
        if name in ENGINES:  # only reachable by importing this package without kctl.engines
            raise ValueError(f"engine {name!r} is not registered: import kctl.engines first")
        raise ValueError(f"unknown engine {name!r}; available engines: {', '.join(ENGINES)}")
    return parts
