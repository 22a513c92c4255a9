"""``kctl demo`` and ``kctl sim``: a simulated cluster run from the command line.

``kctl demo`` takes a small cluster through the controller's main operations; ``kctl sim`` plays a
scenario file. Both exit 1 when a check failed, and ``kctl sim`` 2 for a scenario file that is not
valid (nothing is run).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from kctl.cluster import MAX_BROKERS
from kctl.engine_api import ENGINES, default_engine
from kctl.sim import ScenarioError, load_scenario, run_scenario
from kctl.sim.demo import MAX_DEMO_PARTITIONS, MIN_BROKERS, run_demo
from kctl.sim.report import STEP_HEADER, ProgressDisplay, Style, step_lines, summary, use_color, write_json
from kctl.sim.runner import StepResult, components


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
    parser.add_argument("--engine", choices=ENGINES, default=default_engine(),
                        help="controller engine (default: %(default)s)")
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


def demo_arguments(parser: argparse.ArgumentParser) -> None:
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


def sim_arguments(parser: argparse.ArgumentParser) -> None:
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

    report = run_scenario(scenario, engine=args.engine, seed=args.seed, on_step=step_done, on_progress=progress.update,
                          record_requests=False)
    print()
    print(summary(report, style))
    if args.json is not None:
        try:
            write_json(report, args.json)
        except OSError as e:
            print(f"kctl sim: cannot write {args.json}: {e.strerror}", file=sys.stderr)
            return 1
    return 0 if report.ok else 1


__all__ = ["cmd_demo", "cmd_sim", "demo_arguments", "sim_arguments"]
