"""The engines and the message vocabulary sit in no import cycle.

An AST scan of ``python/kctl``: every import a module runs (at the top or inside a function, but not
under ``if TYPE_CHECKING:``) is an edge; the strongly connected groups of that graph are its cycles.
The abstract engine API sits below the engines, the engine table above them, and the messages
depend on the data model only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import kctl

ROOT = Path(kctl.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def runtime_imports(module: str) -> set[str]:
    """The kctl modules ``module`` imports when it runs."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def statements(body: list[ast.stmt]) -> Iterator[ast.AST]:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                yield from statements(node.orelse)
                continue
            yield node
            for field in ("body", "orelse", "finalbody"):
                yield from statements([n for n in getattr(node, field, []) if isinstance(n, ast.stmt)])
            for handler in getattr(node, "handlers", []):
                yield from statements(handler.body)

    found = set()
    for node in statements(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target)
    return {m for m in found if m in MODULES and m != module}


def cycles() -> list[set[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    graph = {m: runtime_imports(m) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while (w := stack.pop()) != v:
                group.add(w)
            groups.append(group | {v})

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return [g for g in groups if len(g) > 1]


ENGINE_MODULES = {"kctl.context", "kctl.statemachine", "kctl.requests", "kctl.messages", "kctl.engines"} | {
    m for m in MODULES if m.startswith(("kctl.engine_api", "kctl.native", "kctl.reference"))
}


def test_the_scan_counts_lazy_imports_and_skips_type_checking_ones() -> None:
    assert "kctl.statechange" in runtime_imports("kctl.engine_api.statemachine")  # inside a function
    assert "kctl.stores.base" not in runtime_imports("kctl.engine_api.context")  # under TYPE_CHECKING
    assert "kctl.engine_api.context" in runtime_imports("kctl.native.context")


def test_no_engine_module_is_in_an_import_cycle() -> None:
    in_cycles = [sorted(group) for group in cycles() if group & ENGINE_MODULES]
    assert not in_cycles


def test_the_message_vocabulary_depends_on_the_model_only() -> None:
    assert runtime_imports("kctl.messages") <= {"kctl.errors", "kctl.model"}


def test_the_engine_api_imports_no_engine() -> None:
    below = {m for m in MODULES if m.startswith("kctl.engine_api")}
    above = ENGINE_MODULES - below - {"kctl.messages"}
    assert not {m: runtime_imports(m) & above for m in below if runtime_imports(m) & above}
