"""The ``kctl`` command line.

Every subcommand is a :class:`~kctl.registry.Command` registered through the
``kctl_register_commands`` hook: the built-in front ends below (this module is their plugin) and
any plugin's. A command names its handler and its arguments as ``"module:function"`` targets, so
``kctl`` imports a front end only when it is the chosen command and ``kctl --help`` imports a
handful of modules. Exit codes: 0 on success, 1 for a :class:`~kctl.errors.KctlError` (its
message on stderr, no traceback), 2 for bad usage. ``kctl demo`` and ``kctl sim`` also exit 1 when
a check failed, and ``kctl sim`` 2 for a scenario file that is not valid (nothing is run).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence

import kctl
import kctl._engine as _engine
from kctl.errors import KctlError
from kctl.hookspecs import hookimpl
from kctl.plugins import get_command_host
from kctl.registry import CommandRegistry


BUILT_IN_COMMANDS = (
    ("plugins", "kctl.info:cmd_plugins", "kctl.info:plugins_arguments",
     "list plugins and the selectors, stores and transports they register"),
    ("config", "kctl.info:cmd_config", "kctl.info:config_arguments",
     "list the controller's configuration properties and their defaults"),
    ("demo", "kctl.sim.cli:cmd_demo", "kctl.sim.cli:demo_arguments",
     "run a small simulated cluster through failures, a reassignment, elections and a failover"),
    ("sim", "kctl.sim.cli:cmd_sim", "kctl.sim.cli:sim_arguments",
     "play a scenario file (TOML) on a simulated cluster and report"),
    ("fleet", "kctl.bench.cli:cmd_fleet", "kctl.bench.cli:fleet_arguments",
     "run a benchmark grid of seeded scenarios on Spark and report"),
    ("controller", "kctl.process:run_controller", "kctl.process:controller_arguments",
     "run a controller candidate as its own process, on ZooKeeper"),
    ("broker", "kctl.process:run_broker", "kctl.process:broker_arguments",
     "run a broker (agent and simulated data plane) as its own process"),
    ("topics", "kctl.tools.commands:cmd_topics", "kctl.tools.commands:topics_arguments",
     "create, describe, alter, delete and list topics (kafka-topics)"),
    ("reassign", "kctl.tools.commands:cmd_reassign", "kctl.tools.commands:reassign_arguments",
     "generate, execute, verify, cancel or list partition reassignments (kafka-reassign-partitions)"),
    ("elect-leaders", "kctl.tools.commands:cmd_elect_leaders", "kctl.tools.commands:elect_leaders_arguments",
     "run preferred or unclean leader elections (kafka-leader-election)"),
    ("cluster", "kctl.tools.status:cmd_cluster", "kctl.tools.status:cluster_arguments",
     "the cluster's status, read from ZooKeeper (kctl cluster status)"),
    ("zk-digest", "kctl.info:cmd_zk_digest", "kctl.info:zk_digest_arguments",
     "print the ZooKeeper digest identity (USER:DIGEST) of USER:PASSWORD, for --zk-acl"),
)
"""The built-in front ends as (name, handler, arguments, help), in the order ``kctl --help`` lists them."""


@hookimpl
def kctl_register_commands(register: CommandRegistry) -> None:
    """Register the :data:`BUILT_IN_COMMANDS`."""
    for name, handler, arguments, text in BUILT_IN_COMMANDS:
        register.add(name, handler, arguments=arguments, help=text)


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (kctl's own options,
    ``--help`` and ``--version``, take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(commands: CommandRegistry, chosen: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``kctl``: every command with its help, and the arguments of ``chosen`` only
    (adding a command's arguments imports its module)."""
    parser = argparse.ArgumentParser(prog="kctl", description=kctl.__doc__)
    version = f"kctl {kctl.__version__} (engine build: {_engine.build_profile})"
    parser.add_argument("--version", action="version", version=version)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        if command.name == chosen:
            command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


SIMULATIONS = ("demo", "sim")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kctl`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(get_command_host().commands(), _chosen(words))
    except KctlError as exc:  # a plugin that cannot load or register its commands
        print(f"kctl: error: {exc}", file=sys.stderr)
        return 1
    try:
        args = parser.parse_args(words)
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


__all__ = ["BUILT_IN_COMMANDS", "SIMULATIONS", "build_parser", "kctl_register_commands", "main"]
