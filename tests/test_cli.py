"""The ``kctl`` command line: ``--version``, ``kctl plugins``, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kctl
from kctl import _engine, hookimpl
from kctl.cli import main
from kctl.plugins import DEFAULT_PLUGINS, get_plugin_host, reset_plugin_host
from kctl.registry import LeaderSelectorRegistry, TransportRegistry
from kctl.selectors import ElectionKind, KafkaLeaderSelector
from kctl.testing import register_plugin

KCTL_SCRIPT = Path(sys.executable).with_name("kctl")


@pytest.fixture(autouse=True)
def default_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test gets a new process-wide host (the one the CLI uses), built without KCTL_* settings."""
    for variable in ("KCTL_LOAD_PLUGINS", "KCTL_DISABLE_PLUGINS", "KCTL_TRACE_PLUGINS"):
        monkeypatch.delenv(variable, raising=False)
    reset_plugin_host()
    yield
    reset_plugin_host()


class ExtraPlugin:
    @hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        register.add("first-allowed", lambda config: KafkaLeaderSelector(ElectionKind.PREFERRED),
                     kind=ElectionKind.PREFERRED)

    @hookimpl
    def kctl_register_transports(self, register: TransportRegistry) -> None:
        register.add("loopback", dict)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"kctl {kctl.__version__} (engine build: {_engine.build_profile})\n"


def test_plugins_lists_plugins_then_what_they_registered(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    sections = out.split("\n\n")
    assert sections[0].splitlines() == [
        "PLUGIN                     SOURCE    HOOKS",
        "kctl.selectors             built-in  kctl_register_leader_selectors",
        "kctl.stores.memory         built-in  kctl_register_state_stores",
        "kctl.stores.zookeeper      built-in  kctl_register_state_stores",
        "kctl.transports.inprocess  built-in  kctl_register_transports",
        "kctl.transports.tcp        built-in  kctl_register_transports",
        "kctl.transports.zkqueue    built-in  kctl_register_transports",
    ]
    assert sections[1].splitlines() == [
        "LEADER SELECTOR      KIND                 PLUGIN",
        "controlled_shutdown  controlled_shutdown  kctl.selectors",
        "offline              offline              kctl.selectors",
        "preferred            preferred            kctl.selectors",
        "reassign             reassign             kctl.selectors",
    ]
    assert sections[2].splitlines()[0].split() == ["STATE", "STORE", "PLUGIN"]
    assert "memory" in sections[2].splitlines()[1].split()
    assert sections[3].splitlines()[0].split() == ["TRANSPORT", "PLUGIN"]
    assert [line.split() for line in sections[3].splitlines()[1:]] == [
        ["inprocess", "kctl.transports.inprocess"], ["tcp", "kctl.transports.tcp"], ["zkqueue", "kctl.transports.zkqueue"],
    ]


def test_plugins_shows_a_registered_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    with register_plugin(get_plugin_host(), ExtraPlugin(), "extra"):
        assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "extra built-in kctl_register_leader_selectors, kctl_register_transports".split() in [
        line.split() for line in lines
    ]
    assert ["first-allowed", "preferred", "extra"] in [line.split() for line in lines]
    assert ["loopback", "extra"] in [line.split() for line in lines]


def test_plugins_json(capsys: pytest.CaptureFixture[str]) -> None:
    with register_plugin(get_plugin_host(), ExtraPlugin(), "extra"):
        assert main(["plugins", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["plugins"] == [
        {"name": "kctl.selectors", "distribution": None, "version": None,
         "hooks": ["kctl_register_leader_selectors"]},
        {"name": "kctl.stores.memory", "distribution": None, "version": None,
         "hooks": ["kctl_register_state_stores"]},
        {"name": "kctl.stores.zookeeper", "distribution": None, "version": None,
         "hooks": ["kctl_register_state_stores"]},
        {"name": "kctl.transports.inprocess", "distribution": None, "version": None,
         "hooks": ["kctl_register_transports"]},
        {"name": "kctl.transports.tcp", "distribution": None, "version": None,
         "hooks": ["kctl_register_transports"]},
        {"name": "kctl.transports.zkqueue", "distribution": None, "version": None,
         "hooks": ["kctl_register_transports"]},
        {"name": "extra", "distribution": None, "version": None,
         "hooks": ["kctl_register_leader_selectors", "kctl_register_transports"]},
    ]
    assert {"name": "first-allowed", "kind": "preferred", "plugin": "extra"} in report["leader_selectors"]
    assert {"name": "offline", "kind": "offline", "plugin": "kctl.selectors"} in report["leader_selectors"]
    assert {"name": "memory", "plugin": "kctl.stores.memory"} in report["state_stores"]
    assert report["transports"] == [
        {"name": "inprocess", "plugin": "kctl.transports.inprocess"},
        {"name": "loopback", "plugin": "extra"},
        {"name": "tcp", "plugin": "kctl.transports.tcp"},
        {"name": "zkqueue", "plugin": "kctl.transports.zkqueue"},
    ]


def test_an_empty_registry_says_so(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KCTL_DISABLE_PLUGINS", ",".join(DEFAULT_PLUGINS))
    assert main(["plugins"]) == 0
    assert capsys.readouterr().out.split("\n\n") == [
        "PLUGIN  SOURCE  HOOKS\n(none)",
        "LEADER SELECTOR  KIND  PLUGIN\n(none)",
        "STATE STORE  PLUGIN\n(none)",
        "TRANSPORT  PLUGIN\n(none)\n",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["plugins", "--yaml"], "unrecognized arguments: --yaml"),
    ],
)
def test_bad_usage_exits_2_with_a_message(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: kctl") and message in err


def test_a_kctl_error_exits_1_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    class Clash:
        @hookimpl
        def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
            register.add("offline", lambda config: KafkaLeaderSelector(ElectionKind.OFFLINE),
                         kind=ElectionKind.OFFLINE)

    with register_plugin(get_plugin_host(), Clash(), "clash"):
        assert main(["plugins"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "kctl: error: leader selector 'offline' is already registered by plugin 'kctl.selectors'; "
        "plugin 'clash' cannot register it again (pass override=True to replace it on purpose)\n"
    )


def run_console_script(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")} | env
    return subprocess.run([str(KCTL_SCRIPT), *args], capture_output=True, text=True, env=environ, check=False)


def test_console_script_loads_installed_plugins() -> None:
    result = run_console_script("plugins", "--json", KCTL_LOAD_PLUGINS="kctl-least-loaded")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [p["name"] for p in report["plugins"]] == [*DEFAULT_PLUGINS, "least_loaded"]
    assert {"name": "least-loaded", "kind": "offline", "plugin": "least_loaded"} in report["leader_selectors"]


def test_console_script_reports_a_bad_allowlist_in_one_line() -> None:
    result = run_console_script("plugins", KCTL_LOAD_PLUGINS="kctl-no-such-plugin")
    assert result.returncode == 1
    assert result.stderr == (
        "kctl: error: KCTL_LOAD_PLUGINS names 'kctl-no-such-plugin', which is not installed\n"
    )
