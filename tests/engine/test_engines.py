"""The engine table: every engine implements the whole API of the engine-backed classes.

The public classes (``ControllerContext``, the state machines, the request batch) are abstract base
classes whose constructor returns the named engine's implementation, found in ``kctl.engines``'s
table; an engine that forgets a method cannot be constructed.
"""

from __future__ import annotations

import inspect

import pytest

from kctl.config import ControllerConfig
from kctl.context import ENGINES, ControllerContext
from kctl.engines import TABLE, EngineParts, engine_parts
from kctl.requests import ControllerBrokerRequestBatch
from kctl.statemachine import PartitionStateMachine, ReplicaStateMachine
from kctl.stores.memory import MemoryStore

PARTS = {
    "context": ControllerContext,
    "partition_state_machine": PartitionStateMachine,
    "replica_state_machine": ReplicaStateMachine,
    "request_batch": ControllerBrokerRequestBatch,
}
"""Each field of an engine's record, and the abstract base its class implements."""


def test_the_table_holds_every_engine_by_its_name() -> None:
    assert sorted(TABLE) == sorted(ENGINES)
    for name, parts in TABLE.items():
        assert parts.name == name and engine_parts(name) is parts
        assert parts.context.engine == name
    assert set(PARTS) == {f for f in EngineParts.__dataclass_fields__ if f != "name"}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("part", PARTS)
def test_engine_implements_every_abstract_method(engine: str, part: str) -> None:
    cls = getattr(TABLE[engine], part)
    base = PARTS[part]
    assert issubclass(cls, base) and cls is not base
    assert base.__abstractmethods__, f"{base.__name__} declares no abstract methods"
    assert not inspect.isabstract(cls), f"{cls.__name__} does not implement {sorted(cls.__abstractmethods__)}"


def constructor_arguments(part: str) -> tuple[object, ...]:
    context = ControllerContext(engine="reference")
    config = ControllerConfig()
    batch = ControllerBrokerRequestBatch(1, context, config)
    return {
        "context": (),
        "partition_state_machine": (1, context, MemoryStore(), batch, config),
        "replica_state_machine": (1, context, MemoryStore(), batch),
        "request_batch": (1, context, config),
    }[part]


@pytest.mark.parametrize("part", PARTS)
def test_a_missing_method_fails_at_construction(part: str) -> None:
    base = PARTS[part]
    complete = getattr(TABLE["reference"], part)
    missing = sorted(base.__abstractmethods__)[0]
    # The reference implementation with one method taken away (as if it had never been written).
    incomplete = type(f"Incomplete{base.__name__}", (base,), {
        name: member for name, member in vars(complete).items() if name != missing and not name.startswith("__")
    })
    assert incomplete.__abstractmethods__ == {missing}
    with pytest.raises(TypeError, match=f"abstract method.*{missing}"):
        incomplete(*constructor_arguments(part))


@pytest.mark.parametrize("engine", ENGINES)
def test_constructors_return_the_engine_implementation(engine: str) -> None:
    parts = TABLE[engine]
    context = ControllerContext(engine=engine)
    assert isinstance(context, ControllerContext) and context.engine == engine
    assert type(context) is parts.context
    config = ControllerConfig()
    batch = ControllerBrokerRequestBatch(1, context, config)
    assert type(batch) is parts.request_batch
    store = MemoryStore()
    assert type(PartitionStateMachine(1, context, store, batch, config)) is parts.partition_state_machine
    assert type(ReplicaStateMachine(1, context, store, batch)) is parts.replica_state_machine


def test_an_unknown_engine_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown engine 'turbo'; available engines: "):
        ControllerContext(engine="turbo")
