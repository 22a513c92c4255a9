"""Every engine implements the whole public API of the engine-backed classes.

The public classes (``ControllerContext``, the state machines, the request batch) are façades whose
constructor returns the named engine's implementation; their interface methods raise
NotImplementedError, so an engine that forgets one would fail only when it is called.
"""

from __future__ import annotations

import inspect

import pytest

from kctl.context import ENGINES, ControllerContext, _engine_class
from kctl.requests import ControllerBrokerRequestBatch, _batch_class
from kctl.statemachine import PartitionStateMachine, ReplicaStateMachine, _implementation


def interface_members(facade: type) -> list[str]:
    """Members of the façade whose body only raises NotImplementedError."""
    names = []
    for name, member in vars(facade).items():
        function = member.fget if isinstance(member, property) else member
        if inspect.isfunction(function) and "raise NotImplementedError" in inspect.getsource(function):
            names.append(name)
    return names


FACADES = [
    (ControllerContext, _engine_class),
    (ControllerBrokerRequestBatch, _batch_class),
    (PartitionStateMachine, lambda engine: _implementation("partition", engine)),
    (ReplicaStateMachine, lambda engine: _implementation("replica", engine)),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("facade, implementation", FACADES, ids=lambda f: getattr(f, "__name__", ""))
def test_engine_implements_every_interface_member(engine: str, facade: type, implementation: object) -> None:
    cls = implementation(engine)  # type: ignore[operator]
    members = interface_members(facade)
    assert members, f"{facade.__name__} declares no interface members"
    missing = [name for name in members if getattr(cls, name) is getattr(facade, name)]
    assert not missing, f"{cls.__name__} does not implement {missing}"


@pytest.mark.parametrize("engine", ENGINES)
def test_constructors_return_the_engine_implementation(engine: str) -> None:
    context = ControllerContext(engine=engine)
    assert isinstance(context, ControllerContext) and context.engine == engine
    assert type(context) is _engine_class(engine)


def test_an_unknown_engine_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown engine 'turbo'; available engines: "):
        ControllerContext(engine="turbo")
