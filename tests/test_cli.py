"""The ``kctl`` command line: ``--version``, ``kctl plugins``, exit codes, commands added by plugins."""

from __future__ import annotations

import argparse
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
from kctl.plugins import DEFAULT_PLUGINS, get_command_host, get_plugin_host, reset_plugin_host
from kctl.registry import CommandArguments, CommandHandler, CommandRegistry, LeaderSelectorRegistry, TransportRegistry
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
        "kctl.transports.kafka      built-in  kctl_register_transports",
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
        ["inprocess", "kctl.transports.inprocess"], ["kafka", "kctl.transports.kafka"], ["tcp", "kctl.transports.tcp"],
        ["zkqueue", "kctl.transports.zkqueue"],
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
        {"name": "kctl.transports.kafka", "distribution": None, "version": None,
         "hooks": ["kctl_register_transports"]},
        {"name": "extra", "distribution": None, "version": None,
         "hooks": ["kctl_register_leader_selectors", "kctl_register_transports"]},
    ]
    assert {"name": "first-allowed", "kind": "preferred", "plugin": "extra"} in report["leader_selectors"]
    assert {"name": "offline", "kind": "offline", "plugin": "kctl.selectors"} in report["leader_selectors"]
    assert {"name": "memory", "plugin": "kctl.stores.memory"} in report["state_stores"]
    assert report["transports"] == [
        {"name": "inprocess", "plugin": "kctl.transports.inprocess"},
        {"name": "kafka", "plugin": "kctl.transports.kafka"},
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


# --- Commands added by plugins (kctl_register_commands) --------------------------------------------


def hello_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", required=True, help="who to greet")


def hello(args: argparse.Namespace) -> int:
    print(f"hello, {args.name}")
    return 3  # the handler's status is kctl's


class CommandPlugin:
    """Registers one command, handler and arguments as given (callables or "module:function")."""

    def __init__(self, name: str, handler: CommandHandler | str, arguments: CommandArguments | str | None = None,
                 text: str = "a plugin's command") -> None:
        self.name, self.handler, self.arguments, self.text = name, handler, arguments, text

    @hookimpl
    def kctl_register_commands(self, register: CommandRegistry) -> None:
        register.add(self.name, self.handler, arguments=self.arguments, help=self.text)


def front_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str) -> None:
    """Write ``module`` (a plugin's front end, not imported yet) where ``import`` finds it."""
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)  # restored, so removed again, at teardown


def test_hook_kctl_register_commands(capsys: pytest.CaptureFixture[str]) -> None:
    plugin = CommandPlugin("hello", hello, hello_arguments, "greet someone (a plugin's command)")
    with register_plugin(get_command_host(), plugin, "test-commands"):
        assert main(["--help"]) == 0
        listed = [line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines()]
        assert ["hello", "greet someone (a plugin's command)"] in listed
        assert ["zk-digest", "print the ZooKeeper digest identity (USER:DIGEST) of"] in listed  # built-ins stay
        assert main(["hello", "--name", "kafka"]) == 3
        assert capsys.readouterr().out == "hello, kafka\n"
        assert main(["hello"]) == 2
        assert "the following arguments are required: --name" in capsys.readouterr().err
        command = get_command_host().commands().get("hello")
        assert (command.plugin, command.factory) == ("test-commands", hello)
    assert main(["hello", "--name", "kafka"]) == 2  # gone with its plugin
    assert "invalid choice: 'hello'" in capsys.readouterr().err


def test_a_command_given_as_module_function_is_imported_only_when_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    front_end(tmp_path, monkeypatch, "lazy_front_end", "def arguments(parser):\n    parser.add_argument('word')\n\n"
              "def run(args):\n    print(args.word.upper())\n    return 0\n")
    with register_plugin(get_command_host(), CommandPlugin("shout", "lazy_front_end:run", "lazy_front_end:arguments"),
                         "lazy"):
        assert main(["--help"]) == 0
        assert main(["config", "--help"]) == 0
        assert "lazy_front_end" not in sys.modules
        capsys.readouterr()
        assert main(["shout", "kafka"]) == 0
        assert capsys.readouterr().out == "KAFKA\n"


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        ("no_such_module_for_kctl:run", "kctl: error: cannot load 'no_such_module_for_kctl:run': No module named "
                                        "'no_such_module_for_kctl'\n"),
        ("kctl.info:no_such_function", "kctl: error: cannot load 'kctl.info:no_such_function': module 'kctl.info' "
                                       "has no attribute 'no_such_function'\n"),
        ("needs_extra_front_end:run", "kctl: error: this front end needs the tcp extra\n"),  # names the extra
    ],
)
def test_a_command_that_cannot_load_is_a_one_line_error(
    handler: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    front_end(tmp_path, monkeypatch, "needs_extra_front_end", "from kctl.extras import MissingDependencyError\n"
              "raise MissingDependencyError('this front end needs the tcp extra')\n")
    with register_plugin(get_command_host(), CommandPlugin("broken", handler), "broken"):
        assert main(["broken"]) == 1
    assert capsys.readouterr().err == message


@pytest.mark.parametrize(
    ("name", "handler", "message"),
    [
        ("topics", "kctl.info:cmd_config",
         "kctl: error: command 'topics' is already registered by plugin 'kctl.cli'; plugin 'clash' cannot "
         "register it again (pass override=True to replace it on purpose)\n"),
        ("Bad Name", "kctl.info:cmd_config",
         "kctl: error: invalid command name 'Bad Name' from plugin 'clash': use one or more of a-z, 0-9, '_', "
         "'.', '-'\n"),
        ("fine", "kctl.info.cmd_config",
         "kctl: error: command 'fine' from plugin 'clash': 'kctl.info.cmd_config' is not a 'module:function' "
         "target\n"),
    ],
)
def test_a_plugin_that_cannot_register_its_command_fails_every_run_in_one_line(
    name: str, handler: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with register_plugin(get_command_host(), CommandPlugin(name, handler), "clash"):
        assert main(["--help"]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", message)
