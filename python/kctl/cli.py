"""The ``kctl`` command line.

Each subcommand is one ``cmd_*`` function taking the parsed arguments and returning an exit code,
plus an entry in :data:`COMMANDS` that names it, describes it and declares its arguments. Exit
codes: 0 on success, 1 for a :class:`~kctl.errors.KctlError` (its message on stderr, no
traceback), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import kctl
import kctl._engine as _engine
from kctl.errors import KctlError
from kctl.plugins import PluginHost, get_plugin_host


@dataclass(frozen=True)
class Command:
    """A subcommand: its one-line help, its implementation and (optionally) its arguments."""

    help: str
    run: Callable[[argparse.Namespace], int]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None


# --- kctl plugins --------------------------------------------------------------------------------


def _plugins_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _plugins_report(host: PluginHost) -> dict[str, list[dict[str, Any]]]:
    return {
        "plugins": [
            {"name": i.name, "distribution": i.distribution, "version": i.version, "hooks": list(i.hooks)}
            for i in host.plugin_infos()
        ],
        "leader_selectors": [
            {"name": e.name, "kind": e.kind.value, "plugin": e.plugin} for e in host.leader_selectors()
        ],
        "state_stores": [{"name": e.name, "plugin": e.plugin} for e in host.state_stores()],
        "transports": [{"name": e.name, "plugin": e.plugin} for e in host.transports()],
    }


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in (header, *rows)]
    return "\n".join(lines if rows else [*lines, "(none)"])


def cmd_plugins(args: argparse.Namespace) -> int:
    """List loaded plugins with their hooks, then what each registry holds and which plugin added it."""
    report = _plugins_report(get_plugin_host())
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    sections = [
        _table(
            ("PLUGIN", "SOURCE", "HOOKS"),
            [
                (p["name"], f"{p['distribution']} {p['version']}" if p["distribution"] else "built-in",
                 ", ".join(p["hooks"]))
                for p in report["plugins"]
            ],
        ),
        _table(
            ("LEADER SELECTOR", "KIND", "PLUGIN"),
            [(e["name"], e["kind"], str(e["plugin"])) for e in report["leader_selectors"]],
        ),
        _table(("STATE STORE", "PLUGIN"), [(e["name"], str(e["plugin"])) for e in report["state_stores"]]),
        _table(("TRANSPORT", "PLUGIN"), [(e["name"], str(e["plugin"])) for e in report["transports"]]),
    ]
    print("\n\n".join(sections))
    return 0


# --- The command table and the entry point ---------------------------------------------------------

COMMANDS: dict[str, Command] = {
    "plugins": Command(
        "list plugins and the selectors, stores and transports they register", cmd_plugins, _plugins_arguments
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kctl", description=kctl.__doc__)
    version = f"kctl {kctl.__version__} (engine build: {_engine.build_profile})"
    parser.add_argument("--version", action="version", version=version)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        if command.add_arguments is not None:
            command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kctl`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: 0 after --help/--version, 2 on bad usage
        return 0 if exc.code is None else int(exc.code)
    try:
        return int(args.run(args))
    except KctlError as exc:
        print(f"kctl: error: {exc}", file=sys.stderr)
        return 1
