"""Every hook is specified with care, documented in docs/plugins/hooks.md and tested (datasette's rule)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pluggy
import pytest

from kctl import hookspecs
from kctl.plugins import PluginHost

ROOT = Path(__file__).resolve().parents[1]
HOOKS_DOC = ROOT / "docs" / "plugins" / "hooks.md"


def _specs() -> dict[str, pluggy.HookCaller]:
    pm = pluggy.PluginManager("kctl")
    pm.add_hookspecs(hookspecs)
    return {name: caller for name, caller in vars(pm.hook).items() if isinstance(caller, pluggy.HookCaller)}


SPECS = _specs()


def _signature(name: str) -> str:
    spec = SPECS[name].spec
    assert spec is not None
    return f"{name}({', '.join(spec.argnames)})"


def _doc_headings() -> list[str]:
    return re.findall(r"^## (kctl_\w+\(.*\))\s*$", HOOKS_DOC.read_text(), flags=re.MULTILINE)


def test_hooks_are_specified_with_the_kctl_prefix() -> None:
    assert SPECS
    assert all(name.startswith("kctl_") for name in SPECS)
    assert sorted(SPECS) == sorted(name for name in hookspecs.__all__ if name.startswith("kctl_"))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_hook_is_documented_under_its_signature(name: str) -> None:
    assert _doc_headings().count(_signature(name)) == 1, f"add '## {_signature(name)}' to {HOOKS_DOC}"


def test_documented_hooks_exist() -> None:
    assert sorted(_doc_headings()) == sorted(_signature(name) for name in SPECS)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_hook_has_a_test(name: str) -> None:
    pattern = re.compile(rf"^def test_hook_{name}\(", flags=re.MULTILINE)
    tests = [path for path in (ROOT / "tests").rglob("test_*.py") if pattern.search(path.read_text())]
    assert tests, f"write a test named test_hook_{name} under tests/"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_hookspec_is_typed_and_documented(name: str) -> None:
    function = getattr(hookspecs, name)
    signature = inspect.signature(function)
    doc = inspect.getdoc(function) or ""
    assert signature.return_annotation is not inspect.Signature.empty
    for parameter in signature.parameters.values():
        assert parameter.annotation is not inspect.Parameter.empty, f"{name}: annotate {parameter.name}"
        assert f":param {parameter.name}:" in doc, f"{name}: document {parameter.name}"
    assert ":return:" in doc and ".. versionadded::" in doc
    assert "Called " in doc, f"{name}: say when the hook fires"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_hook_has_a_typed_forwarder_on_the_plugin_host(name: str) -> None:
    forwarder = getattr(PluginHost, name, None)
    assert forwarder is not None, f"add PluginHost.{name}"
    spec = SPECS[name].spec
    assert spec is not None
    assert list(inspect.signature(forwarder).parameters)[1:] == list(spec.argnames)
