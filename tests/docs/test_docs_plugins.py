"""The plugin docs: the testing pattern they teach runs here, and their included code is current."""

from __future__ import annotations

import re
from pathlib import Path

# docs-start
from collections.abc import Iterator

import pytest

import kctl
from kctl.config import ControllerConfig
from kctl.model import TopicPartition
from kctl.plugins import PluginHost
from kctl.registry import LeaderSelectorRegistry
from kctl.selectors import ElectionBatch, ElectionKind, KafkaLeaderSelector
from kctl.testing import register_plugin

# conftest.py: pytest_plugins = ["kctl.testing"]  (provides the plugin_host fixture)


class FirstAllowed:
    """The plugin under test: one leader selector for offline elections."""

    @kctl.hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        register.add(
            "first-allowed",
            lambda config: KafkaLeaderSelector(ElectionKind.OFFLINE),
            kind=ElectionKind.OFFLINE,
        )


@pytest.fixture
def host(plugin_host: PluginHost) -> Iterator[PluginHost]:
    """kctl's built-in plugins plus the one under test, unregistered after every test."""
    with register_plugin(plugin_host, FirstAllowed(), "first-allowed"):
        yield plugin_host


def test_selector_is_registered_by_the_plugin(host: PluginHost) -> None:
    entry = host.leader_selectors().get("first-allowed")
    assert entry.plugin == "first-allowed"
    assert entry.kind is ElectionKind.OFFLINE


def test_selector_elects_an_allowed_replica(host: PluginHost) -> None:
    selector = host.leader_selectors().get("first-allowed").create(ControllerConfig())
    batch = ElectionBatch(
        kind=ElectionKind.OFFLINE,
        partitions=[TopicPartition("orders", 0)],
        assignments=[[1, 2, 3]],
        isrs=[[2, 3]],
        allowed=[[2, 3]],
        unclean=[False],
    )
    assert list(selector.select_leaders(batch)) == [2]
# docs-end


ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "plugins"
INCLUDE = re.compile(r"<!-- include: (?P<path>\S+) -->\n```\w*\n(?P<code>.*?)```\n", flags=re.DOTALL)
REGION = re.compile(r"^# docs-start\n(?P<code>.*?)^# docs-end\n", flags=re.DOTALL | re.MULTILINE)
PAGES = sorted(DOCS.glob("*.md"))


def included_region(path: Path) -> str:
    """What a doc includes from ``path``: its ``# docs-start``/``# docs-end`` region, or all of it."""
    text = path.read_text()
    region = REGION.search(text)
    return region["code"] if region else text


def test_testing_page_shows_this_files_pattern_verbatim() -> None:
    page = (DOCS / "testing.md").read_text()
    snippets = [m["code"] for m in INCLUDE.finditer(page) if m["path"] == "tests/docs/test_docs_plugins.py"]
    assert snippets == [included_region(Path(__file__))]


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_included_code_matches_its_source(page: Path) -> None:
    for match in INCLUDE.finditer(page.read_text()):
        source = ROOT / match["path"]
        assert source.is_file(), f"{page.name} includes missing {match['path']}"
        assert match["code"] == included_region(source), f"{page.name}: refresh the copy of {match['path']}"


def test_tutorial_includes_the_whole_example_plugin() -> None:
    included = {m["path"] for m in INCLUDE.finditer((DOCS / "writing-a-plugin.md").read_text())}
    assert included == {
        "plugins/kctl-least-loaded/pyproject.toml",
        "plugins/kctl-least-loaded/kctl_least_loaded.py",
        "plugins/kctl-least-loaded/tests/test_least_loaded.py",
    }


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_examples_compile(page: Path) -> None:
    for number, code in enumerate(re.findall(r"```python\n(.*?)```\n", page.read_text(), flags=re.DOTALL)):
        compile(code, f"{page.name}[python block {number}]", "exec")


@pytest.mark.parametrize(
    "text",
    ["[project.entry-points.kctl]", "KCTL_LOAD_PLUGINS", "KCTL_DISABLE_PLUGINS", "KCTL_TRACE_PLUGINS=1",
     "kctl plugins", "kctl plugins --json"],
)
def test_index_explains_discovery_and_configuration(text: str) -> None:
    assert text in (DOCS / "index.md").read_text()
