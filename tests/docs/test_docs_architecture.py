"""docs/architecture.md maps the whole code: every module and Rust file is on it, and every file it
names exists (a module renamed, added or removed fails here until the page says so)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "python" / "kctl"
CRATE = ROOT / "rust" / "src"

PATH = re.compile(r"`([\w./-]+(?:\.(?:py|rs|md|toml)|/))`")
"""A file or directory named in code style: module paths are under python/kctl, Rust files under
rust/src, anything else from the repository's root."""


def named_paths(text: str) -> set[str]:
    return set(PATH.findall(text))


def exists(path: str) -> bool:
    return any((base / path).exists() for base in (PACKAGE, CRATE, ROOT))


def test_every_module_of_the_package_is_on_the_page() -> None:
    named = named_paths(PAGE.read_text())
    modules = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    assert len(modules) > 100
    assert sorted(modules - named) == []


def test_every_rust_file_is_on_the_page() -> None:
    named = named_paths(PAGE.read_text())
    sources = {p.relative_to(CRATE).as_posix() for p in CRATE.rglob("*.rs")}
    assert {"lib.rs", "py/mod.rs"} <= sources
    assert sorted(sources - named) == []


def test_every_file_the_page_names_exists() -> None:
    text = PAGE.read_text()
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert sorted(p for p in named_paths(text) if not exists(p)) == []
    assert sorted(link for link in links if not (PAGE.parent / link).exists()) == []


def test_a_missing_file_is_seen() -> None:
    assert named_paths("the `kctl` package (`stores/memory.py`, `py/engine.rs`, `bench/`)") == {
        "stores/memory.py", "py/engine.rs", "bench/"}
    assert exists("stores/memory.py") and exists("py/engine.rs") and exists("benches/")
    assert not exists("stores/gone.py")
