"""The plugin docs: the testing pattern they teach runs here, their included code is current, and
their ``kctl plugins`` console samples are what the command prints."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from kctl.cli import main
from kctl.plugins import reset_plugin_host

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


CONSOLE = re.compile(r"```console\n(?P<session>.*?)```\n", flags=re.DOTALL)
COMMAND = re.compile(r"^\$ (?P<command>.*)\n(?P<output>(?:(?!\$ ).*\n)*)", flags=re.MULTILINE)
SAMPLES = [
    (page, match["command"], match["output"])
    for page in PAGES
    for block in CONSOLE.finditer(page.read_text())
    for match in COMMAND.finditer(block["session"])
]


@pytest.fixture
def installed_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process-wide host ``kctl`` itself builds, loading the installed example plugin (and, via
    ``KCTL_LOAD_PLUGINS``, no other installed distribution), as the docs' samples assume."""
    for variable in ("KCTL_DISABLE_PLUGINS", "KCTL_TRACE_PLUGINS"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("KCTL_LOAD_PLUGINS", "kctl-least-loaded")
    monkeypatch.delattr(sys, "_called_from_test")  # what makes get_plugin_host skip entry points
    reset_plugin_host()
    yield
    reset_plugin_host()


@pytest.mark.parametrize(("page", "command", "documented"), SAMPLES,
                         ids=[f"{page.name}:{command}" for page, command, _ in SAMPLES])
def test_console_samples_show_what_kctl_prints(
    installed_host: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    page: Path, command: str, documented: str,
) -> None:
    """Each ``$ kctl …`` sample shows the command's real output (its stderr when stdout goes to
    /dev/null); a last line ``...`` marks a sample cut short. Install steps show no output."""
    words = shlex.split(command)
    if words[:2] == ["pip", "install"]:
        assert documented == "", f"{page.name}: {command} shows output"
        return
    while "=" in words[0]:
        variable, _, value = words.pop(0).partition("=")
        monkeypatch.setenv(variable, value)
    quiet = words[-2:] == [">", "/dev/null"]
    assert words[0] == "kctl", f"{page.name}: cannot check the sample {command!r}"

    assert main(words[1:-2] if quiet else words[1:]) == 0
    captured = capsys.readouterr()
    printed = captured.err if quiet else captured.out
    if documented.endswith("...\n"):
        assert printed.startswith(documented.removesuffix("...\n")), f"{page.name}: refresh the output of {command}"
    else:
        assert printed == documented, f"{page.name}: refresh the output of {command}"


def test_the_plugin_pages_show_the_listing_and_the_trace() -> None:
    assert {(page.name, command) for page, command, _ in SAMPLES} >= {
        ("index.md", "kctl plugins"),
        ("writing-a-plugin.md", "kctl plugins"),
        ("testing.md", "KCTL_TRACE_PLUGINS=1 kctl plugins > /dev/null"),
    }


@pytest.mark.parametrize(
    "text",
    ["[project.entry-points.kctl]", "KCTL_LOAD_PLUGINS", "KCTL_DISABLE_PLUGINS", "KCTL_TRACE_PLUGINS=1",
     "kctl plugins", "kctl plugins --json"],
)
def test_index_explains_discovery_and_configuration(text: str) -> None:
    assert text in (DOCS / "index.md").read_text()
