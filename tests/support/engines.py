"""The engine as a fixture: a test whose result goes through the engine runs on each engine, in one
pytest run, and every other test runs once.

kctl reads its default engine from ``KCTL_ENGINE`` once, at import (``kctl.engine_api.DEFAULT_ENGINE``),
and modules bind it as the default of their ``engine=`` parameters. Switching engines inside one
process therefore switches every binding: :func:`default_engine` finds them in kctl's own sources
(module globals named ``DEFAULT_ENGINE``, and parameters whose default is that name), sets them for
its duration and puts them back, and sets ``KCTL_ENGINE`` for the processes a test starts. A use of
``DEFAULT_ENGINE`` it could not switch (read when a module is imported, outside any function) is an
error, so a new one cannot silently leave a test on the other engine.

Suites whose every test goes through the engine import :func:`on_each_engine` into their conftest;
a module of a mixed suite says ``pytestmark = pytest.mark.usefixtures("engine")``; a test that needs
the engine's name takes ``engine``. ``tests/conftest.py`` marks all of them ``engine``.
"""

from __future__ import annotations

import ast
import functools
import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any

import pytest

import kctl
from kctl.engine_api import ENGINES

ENGINES_UNDER_TEST: tuple[str, ...] = (os.environ["KCTL_ENGINE"],) if os.environ.get("KCTL_ENGINE") else ENGINES
"""Every engine, or only the one ``KCTL_ENGINE`` names (``./scripts/test --quick``)."""

NAME = "DEFAULT_ENGINE"


@functools.cache
def bindings() -> tuple[tuple[ModuleType, tuple[tuple[FunctionType, frozenset[str]], ...]], ...]:
    """Each kctl module that names ``DEFAULT_ENGINE`` (imported now, so that none binds it later,
    mid-switch), with its functions and the parameters of each that default to it."""
    package = Path(kctl.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        if NAME not in source:
            continue
        module = importlib.import_module(".".join(("kctl", *path.relative_to(package).with_suffix("").parts))
                                         .removesuffix(".__init__"))
        found.append((module, tuple(defaulting_functions(module, ast.parse(source)))))
    return tuple(found)


def defaulting_functions(module: ModuleType, tree: ast.Module) -> Iterator[tuple[FunctionType, frozenset[str]]]:
    """The functions of ``module`` with parameters defaulting to ``DEFAULT_ENGINE``; a ValueError for
    a read of it when the module is imported (not the module that computes it, nor a default)."""
    defines = any(isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == NAME
                  for node in ast.walk(tree))

    def names(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Name) and node.id == NAME

    def visit(body: list[ast.stmt], owner: Any, where: str) -> Iterator[tuple[FunctionType, frozenset[str]]]:
        for node in body:
            if isinstance(node, ast.ClassDef):
                yield from visit(node.body, vars(owner)[node.name], f"{where}{node.name}.")
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                positional = [*args.posonlyargs, *args.args]
                params = {a.arg for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults) if names(d)}
                params |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if names(d)}
                if params:
                    function = vars(owner)[node.name]
                    yield getattr(function, "__func__", function), frozenset(params)
                continue  # the body reads DEFAULT_ENGINE when called: switched with the module's global
            if not defines and any(names(n) for n in ast.walk(node)):
                raise ValueError(f"{module.__name__}, line {node.lineno}: {where}{NAME} is read at import; "
                                 "tests.support.engines cannot switch it (read it in a function or a default)")

    return visit(tree.body, module, "")


def replaced(
    function: FunctionType, params: frozenset[str], engine: str
) -> tuple[tuple[Any, ...] | None, dict[str, Any] | None]:
    """``function``'s positional and keyword-only defaults with ``params`` set to ``engine``."""
    code = function.__code__
    positional = code.co_varnames[:code.co_argcount]
    defaults = function.__defaults__
    if defaults is not None:
        named = positional[len(positional) - len(defaults):]
        defaults = tuple(engine if name in params else value for name, value in zip(named, defaults))
    keywords = function.__kwdefaults__
    if keywords is not None:
        keywords = {name: engine if name in params else value for name, value in keywords.items()}
    return defaults, keywords


@contextmanager
def default_engine(engine: str) -> Iterator[str]:
    """kctl's default engine is ``engine`` inside (in this process and for the processes it starts)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; engines: {', '.join(ENGINES)}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KCTL_ENGINE", engine)
        for module, functions in bindings():
            patch.setattr(module, NAME, engine)
            for function, params in functions:
                defaults, keywords = replaced(function, params, engine)
                patch.setattr(function, "__defaults__", defaults)
                patch.setattr(function, "__kwdefaults__", keywords)
        yield engine


@pytest.fixture(params=ENGINES_UNDER_TEST)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The engine this test runs on, and kctl's default engine meanwhile: the test runs once per
    engine of ``ENGINES_UNDER_TEST``."""
    with default_engine(request.param) as name:
        yield name


@pytest.fixture(scope="module", params=ENGINES_UNDER_TEST, name="engine")
def module_engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """``engine`` for a module whose tests share processes (``tests/kafka``, the operating tests of
    ``tests/process``): the module runs on each engine in turn."""
    with default_engine(request.param) as name:
        yield name


@pytest.fixture(autouse=True)
def on_each_engine(engine: str) -> str:
    """Every test of a conftest that imports this runs on each engine."""
    return engine
