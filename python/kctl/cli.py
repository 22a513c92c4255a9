"""The ``kctl`` command line.

Each subcommand is one ``cmd_*`` function taking the parsed arguments and returning an exit code,
plus an entry in :data:`COMMANDS` that names it, describes it and declares its arguments. Exit
codes: 0 on success, 1 for a :class:`~kctl.errors.KctlError` (its message on stderr, no
traceback), 2 for bad usage. ``kctl demo`` and ``kctl sim`` also exit 1 when a check failed, and
``kctl sim`` 2 for a scenario file that is not valid (nothing is run).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import kctl
import kctl._engine as _engine
from kctl.bench.cli import cmd_fleet, fleet_arguments
from kctl.config import property_docs
from kctl.context import DEFAULT_ENGINE, ENGINES
from kctl.errors import IllegalArgumentError, KctlError
from kctl import process
from kctl.plugins import PluginHost, get_plugin_host
from kctl.sim import ScenarioError, load_scenario, run_scenario
from kctl.cluster import MAX_BROKERS
from kctl.sim.demo import MAX_DEMO_PARTITIONS, MIN_BROKERS, run_demo
from kctl.sim.runner import StepResult, components
from kctl.sim.report import (
    STEP_HEADER,
    ProgressDisplay,
    Style,
    markdown_table,
    step_lines,
    summary,
    table,
    use_color,
    write_json,
)
from kctl.stores import zkacl
from kctl.tools import commands as admin_tools
from kctl.tools import status as cluster_tool
from kctl.topic_config import TOPIC_CONFIGS


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


def cmd_plugins(args: argparse.Namespace) -> int:
    """List loaded plugins with their hooks, then what each registry holds and which plugin added it."""
    report = _plugins_report(get_plugin_host())
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    sections = [
        table(
            ("PLUGIN", "SOURCE", "HOOKS"),
            [
                (p["name"], f"{p['distribution']} {p['version']}" if p["distribution"] else "built-in",
                 ", ".join(p["hooks"]))
                for p in report["plugins"]
            ],
        ),
        table(
            ("LEADER SELECTOR", "KIND", "PLUGIN"),
            [(e["name"], e["kind"], str(e["plugin"])) for e in report["leader_selectors"]],
        ),
        table(("STATE STORE", "PLUGIN"), [(e["name"], str(e["plugin"])) for e in report["state_stores"]]),
        table(("TRANSPORT", "PLUGIN"), [(e["name"], str(e["plugin"])) for e in report["transports"]]),
    ]
    print("\n\n".join(sections))
    return 0


# --- kctl config -----------------------------------------------------------------------------------


def _config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (as in docs/user-guide.md)")
    parser.add_argument("--topic", action="store_true",
                        help="list the topic configs (Kafka 3.9's LogConfig) instead of the broker properties")


def _property_text(value: Any) -> str:
    if value is None:
        return "(none)"
    return str(value).lower() if isinstance(value, bool) else str(value)


def cmd_config(args: argparse.Namespace) -> int:
    """List the broker properties the controller reads, with Kafka's names and defaults (with
    ``--topic``: the topic configs, their types and valid values)."""
    rows: list[tuple[str, ...]]
    if args.topic:
        rows = [(k.name, k.type.value, k.default or "(empty)", k.valid_values) for k in TOPIC_CONFIGS.values()]
        header: tuple[str, ...] = ("CONFIG", "TYPE", "KAFKA DEFAULT", "VALID VALUES")
    else:
        rows = [(name, _property_text(default), doc) for name, (default, doc) in property_docs().items()]
        header = ("PROPERTY", "DEFAULT", "DESCRIPTION")
    print(markdown_table([h.lower() for h in header], rows) if args.markdown else table(header, rows))
    return 0


# --- kctl demo and kctl sim ------------------------------------------------------------------------


def _at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value
    return parse


def _simulation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=ENGINES, default=DEFAULT_ENGINE,
                        help=f"controller engine (default: {DEFAULT_ENGINE})")
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours, even on a terminal")
    parser.add_argument("--log-level", choices=("TRACE", "DEBUG", "INFO", "WARNING", "ERROR"), default=None,
                        help="print kctl's logs to stderr (the state-change log: INFO for partitions, TRACE for replicas)")


class _LogHandler(logging.StreamHandler[TextIO]):
    """The one handler ``kctl demo`` and ``kctl sim`` put on the ``kctl`` logger."""


def _route_logs(level: str | None) -> None:
    """kctl's logs go to stderr at ``level``, or nowhere: without a handler, Python would print
    warnings such as a failed election (normal in a simulation) through its last-resort handler."""
    logger = logging.getLogger("kctl")
    for old in [h for h in logger.handlers if isinstance(h, _LogHandler)]:
        logger.removeHandler(old)
    handler = _LogHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.CRITICAL + 1 if level is None else level)
    logger.addHandler(handler)
    logger.setLevel(logging.NOTSET if level is None else level)


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=_at_least(MIN_BROKERS, MAX_BROKERS), default=5,
                        help=f"broker count, at most {MAX_BROKERS} (default: 5)")
    parser.add_argument("--partitions", type=_at_least(1, MAX_DEMO_PARTITIONS), default=6,
                        help=f"partitions per topic, at most {MAX_DEMO_PARTITIONS} (default: 6)")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default: 0)")
    _simulation_arguments(parser)


def cmd_demo(args: argparse.Namespace) -> int:
    """Take a small simulated cluster through the controller's main operations; 1 if a check failed."""
    _route_logs(args.log_level)
    color = use_color(sys.stdout, args.no_color)
    return run_demo(sys.stdout, args.brokers, args.partitions, args.seed, args.engine, color,
                    ProgressDisplay(sys.stdout, sys.stdout.isatty(), Style(color)))


def _sim_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", metavar="SCENARIO.toml", type=Path, help="the scenario file")
    parser.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    parser.add_argument("--json", metavar="FILE", type=Path, help="also write the report as JSON to FILE")
    _simulation_arguments(parser)


def cmd_sim(args: argparse.Namespace) -> int:
    """Play a scenario: 0 if every expectation and invariant held, 1 if not, 2 for an invalid scenario."""
    _route_logs(args.log_level)
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as e:
        print(f"kctl sim: {args.scenario} is not a valid scenario:", file=sys.stderr)
        print("\n".join(f"  {problem}" for problem in e.problems), file=sys.stderr)
        return 2
    style = Style(use_color(sys.stdout, args.no_color))
    title = f"{scenario.name or args.scenario}: {len(scenario.cluster.brokers)} brokers, {len(scenario.topics)} topics, "
    print(style.bold(title + f"{len(scenario.steps)} steps"))
    if scenario.description:
        print(scenario.description.strip())
    print(components(scenario, args.engine))
    print(style.dim(STEP_HEADER))
    progress = ProgressDisplay(sys.stdout, sys.stdout.isatty(), style)

    def step_done(result: StepResult) -> None:
        progress.clear()
        print("\n".join(step_lines(result, style)), flush=True)

    report = run_scenario(scenario, engine=args.engine, seed=args.seed, on_step=step_done, on_progress=progress.update)
    print()
    print(summary(report, style))
    if args.json is not None:
        try:
            write_json(report, args.json)
        except OSError as e:
            print(f"kctl sim: cannot write {args.json}: {e.strerror}", file=sys.stderr)
            return 1
    return 0 if report.ok else 1


# --- kctl zk-digest --------------------------------------------------------------------------------


def _zk_digest_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("identity", nargs="?", default=None, metavar="USER:PASSWORD",
                        help=f"the identity (default: ${zkacl.AUTH_ENV}, which keeps the password off the command line)")


def cmd_zk_digest(args: argparse.Namespace) -> int:
    """Print ZooKeeper's digest identity ``USER:DIGEST`` of ``USER:PASSWORD``, for ``--zk-acl``."""
    auth, _ = zkacl.from_environment(args.identity, "")
    if auth is None:
        raise IllegalArgumentError(f"give USER:PASSWORD, or set {zkacl.AUTH_ENV}")
    print(zkacl.digest(*auth))
    return 0


# --- The command table and the entry point ---------------------------------------------------------

COMMANDS: dict[str, Command] = {
    "plugins": Command(
        "list plugins and the selectors, stores and transports they register", cmd_plugins, _plugins_arguments
    ),
    "config": Command("list the controller's configuration properties and their defaults", cmd_config,
                      _config_arguments),
    "demo": Command(
        "run a small simulated cluster through failures, a reassignment, elections and a failover",
        cmd_demo, _demo_arguments,
    ),
    "sim": Command("play a scenario file (TOML) on a simulated cluster and report", cmd_sim, _sim_arguments),
    "fleet": Command("run a benchmark grid of seeded scenarios on Spark and report", cmd_fleet, fleet_arguments),
    "controller": Command("run a controller candidate as its own process, on ZooKeeper", process.run_controller,
                          lambda parser: process.add_process_arguments(parser, "controller")),
    "broker": Command("run a broker (agent and simulated data plane) as its own process", process.run_broker,
                      lambda parser: process.add_process_arguments(parser, "broker")),
    "topics": Command(admin_tools.TOPICS_HELP, admin_tools.cmd_topics, admin_tools.topics_arguments),
    "reassign": Command(admin_tools.REASSIGN_HELP, admin_tools.cmd_reassign, admin_tools.reassign_arguments),
    "elect-leaders": Command(admin_tools.ELECT_LEADERS_HELP, admin_tools.cmd_elect_leaders,
                             admin_tools.elect_leaders_arguments),
    "cluster": Command(cluster_tool.CLUSTER_HELP, cluster_tool.cmd_cluster, cluster_tool.cluster_arguments),
    "zk-digest": Command("print the ZooKeeper digest identity (USER:DIGEST) of USER:PASSWORD, for --zk-acl",
                         cmd_zk_digest, _zk_digest_arguments),
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


SIMULATIONS = ("demo", "sim")


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
    except BrokenPipeError:  # the reader went away (kctl demo | head): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 1
    finally:
        if argv is None and args.command in SIMULATIONS:
            # The ``kctl`` process ends now. The simulated cluster it leaves is millions of objects
            # in cycles, which the collector would walk and free one by one at exit (seconds for a
            # large run); frozen, they are left to the OS, which takes the memory back at once.
            gc.freeze()
