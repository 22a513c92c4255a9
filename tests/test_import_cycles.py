"""The import graph of ``python/kctl`` follows the layers of docs/architecture.md, without a cycle.

An AST scan of ``python/kctl``: every import a module runs (at the top or inside a function, but not
under ``if TYPE_CHECKING:``) is an edge; the strongly connected groups of that graph are its cycles.
No edge goes from a layer of the documented list to a higher one. The abstract engine API sits below
the engines, the engine table above them, and the messages depend on the data model only.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

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


ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def documented_layers() -> list[tuple[str, list[str]]]:
    """The numbered list under ``## Layers`` in docs/architecture.md, lowest first: each layer's
    name and the module paths (or package paths ending in ``/``) it names."""
    section = ARCHITECTURE.read_text().split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    items = re.split(r"\n(?=\d+\. )", "\n" + section)
    layers = []
    for item in (text.strip().split("\n\n")[0] for text in items):
        found = re.match(r"\d+\. \*\*(.+?)\*\*", item)
        if found:
            layers.append((found.group(1), re.findall(r"`([\w/]+(?:\.py|/))`", item)))
    return layers


def layer_of_each_module() -> dict[str, int]:
    """Each kctl module's layer (its index in the documented list); a module named twice fails."""
    paths = {m: p.relative_to(ROOT).as_posix() for m, p in MODULES.items()}
    layer: dict[str, int] = {}
    for index, (name, entries) in enumerate(documented_layers()):
        for entry in entries:
            named = [m for m, path in paths.items() if path == entry or (entry.endswith("/") and path.startswith(entry))]
            assert named, f"layer {name!r} names {entry}, which is no module of python/kctl"
            for module in named:
                assert module not in layer, f"{module} is in two layers"
                layer[module] = index
    return layer


def upward_imports() -> list[str]:
    """Runtime imports from a module to one of a higher layer."""
    layer = layer_of_each_module()
    names = [name for name, _ in documented_layers()]
    return [f"{m} ({names[layer[m]]}) imports {target} ({names[layer[target]]})"
            for m in sorted(MODULES) for target in sorted(runtime_imports(m)) if layer[target] > layer[m]]


def test_the_layer_list_puts_every_module_in_exactly_one_layer() -> None:
    assert len(documented_layers()) >= 10
    assert sorted(layer_of_each_module()) == sorted(MODULES)


def test_no_runtime_import_goes_up_a_layer() -> None:
    assert upward_imports() == []


def test_the_package_has_no_import_cycle() -> None:
    assert cycles() == []


def test_the_layer_check_sees_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The embedded cluster moved down into the foundation: its imports of the controller now go up.
    doc = ARCHITECTURE.read_text()
    moved = doc.replace("`cluster.py`, ", "").replace("`__init__.py`, ", "`__init__.py`, `cluster.py`, ", 1)
    assert moved.count("`cluster.py`") == doc.count("`cluster.py`")
    (tmp_path / "architecture.md").write_text(moved)
    monkeypatch.setattr(sys.modules[__name__], "ARCHITECTURE", tmp_path / "architecture.md")
    assert "kctl.cluster (Foundation) imports kctl.controller (Controller)" in upward_imports()
