"""Text and JSON renderings of a run: the live progress lines, the summary, the final tables.

Output is plain ASCII, one line per step, so it reads the same in a terminal, a CI log or a pipe;
colour is added only for a terminal (and never with ``--no-color`` or ``NO_COLOR``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from kctl.sim.runner import Report, StepProgress, StepResult, plural
from kctl.tables import table


class Style:
    """ANSI colours, or nothing."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def _paint(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def good(self, text: str) -> str:
        return self._paint("32", text)

    def bad(self, text: str) -> str:
        return self._paint("31;1", text)

    def dim(self, text: str) -> str:
        return self._paint("2", text)

    def bold(self, text: str) -> str:
        return self._paint("1", text)


def use_color(stream: TextIO, no_color: bool) -> bool:
    """Colour only for a terminal, unless ``--no-color`` or the ``NO_COLOR`` convention says otherwise."""
    return not no_color and "NO_COLOR" not in os.environ and stream.isatty()


def duration(value: float | None) -> str:
    return "never" if value is None else f"{value:.3f}s"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


STEP_HEADER = f"{'TIME':>10}  {'STEP':<24} {'MOVED':>5} {'OFFLINE':>7} {'REQUESTS':>8}  WHAT HAPPENED"


def step_lines(result: StepResult, style: Style) -> list[str]:
    """The progress line of a step (time, step, leaders moved, offline partitions, requests sent,
    what happened), then its note, failures and new invariant violations on lines of their own."""
    what = result.description
    if result.lost_leader:
        what += f"; {plural(result.lost_leader, 'partition')} without a leader, " + (
            f"all led again after {duration(result.all_led_after)}" if result.all_led_after is not None
            else "not all led again yet")
    if result.settled is False:
        what += " (not stable yet)"
    step = f"{result.number:>2} {result.action}"
    line = (f"{result.start:>9.3f}s  {step:<24} {result.leaders_moved:>5} {result.offline_partitions:>7} "
            f"{result.requests:>8}  {style.bad(what) if result.error else what}")
    indent = " " * 13
    lines = [line]
    if result.note:
        lines.append(style.dim(f"{indent}-- {result.note}"))
    lines += [style.bad(f"{indent}FAILED: {f}") for f in result.failures]
    if result.error:
        lines.append(style.bad(f"{indent}ERROR: {result.error}; the remaining steps were not run"))
    lines += [style.bad(f"{indent}INVARIANT VIOLATED: {v}") for v in result.violations]
    return lines


class ProgressDisplay:
    """Progress inside a step that runs for more than :attr:`MIN_SECONDS` of wall time: on a
    terminal a bar redrawn in place (and erased before the step's line), otherwise a plain line
    every :attr:`LINE_INTERVAL` seconds.

    The bar is the share of the step's requests that brokers have answered: a long step is the
    controller's requests draining through every broker's queue (one in flight per broker), so
    it fills as the backlog goes, and the counts say how big that backlog is.
    """

    MIN_SECONDS = 1.0
    REDRAW_INTERVAL = 0.1
    LINE_INTERVAL = 5.0
    BAR_WIDTH = 24

    def __init__(self, out: TextIO, tty: bool, style: Style, clock: Callable[[], float] = time.monotonic) -> None:
        self._out, self._tty, self._style, self._clock = out, tty, style, clock
        self._step: int | None = None
        self._started = 0.0
        self._next = 0.0
        self._drawn = False

    def update(self, progress: StepProgress) -> None:
        """A running step's progress (called often: it draws only when it is time to)."""
        now = self._clock()
        if progress.number != self._step:
            self.clear()
            self._step, self._started = progress.number, now
            self._next = now + self.MIN_SECONDS
        if now < self._next:
            return
        self._next = now + (self.REDRAW_INTERVAL if self._tty else self.LINE_INTERVAL)
        text = self._text(progress, now - self._started)
        if self._tty:
            self._out.write(f"\r\033[K{text}")
            self._drawn = True
        else:
            self._out.write(f"{' ' * 13}.. {text}\n")
        self._out.flush()

    def clear(self) -> None:
        """Erase the bar (before the step's own line is printed)."""
        if self._drawn:
            self._out.write("\r\033[K")
            self._out.flush()
            self._drawn = False

    def _text(self, progress: StepProgress, seconds: float) -> str:
        sent, answered = progress.requests_sent, progress.requests_answered
        share = min(1.0, answered / sent) if sent else 0.0
        counts = (f"step {progress.number} {progress.action}: {answered:,} of {sent:,} requests answered, "
                  f"{progress.cluster_seconds:.1f}s of cluster time in {seconds:.0f}s")
        if not self._tty:
            return counts
        filled = round(share * self.BAR_WIDTH)
        bar = "#" * filled + "." * (self.BAR_WIDTH - filled)
        return f"{self._style.dim(f'[{bar}] {share:4.0%}')} {counts}"


def summary(report: Report, style: Style) -> str:
    """Availability after each fault, then the totals and the verdict."""
    faults = table(
        ("STEP", "FAULT", "AT", "LOST LEADER", "ALL LED AGAIN AFTER", "PARTITION-SECONDS"),
        [(str(f.step), f.action, duration(f.at), str(f.lost_leader),
          duration(f.all_led_after) if f.lost_leader else "-", f"{f.unavailable_partition_seconds:.3f}")
         for f in report.faults],
    )
    requests = ", ".join(f"{api} {n}" for api, n in report.requests_by_type.items())
    total = sum(report.requests_by_type.values())
    lines = [
        style.bold(f"Summary: {report.name or report.source} (engine {report.engine}, seed {report.seed}, "
                   f"{report.duration:.3f}s of cluster time)"),
        "",
        "Faults (time until every partition they left without a leader had one again):",
        *("  " + line for line in faults.splitlines()),
        "",
        f"Unavailable partition-seconds:  {report.unavailable_partition_seconds:.3f}"
        + (f" ({plural(report.partitions_without_leader_at_end, 'partition')} still without a leader)"
           if report.partitions_without_leader_at_end else ""),
        f"Leader moves:                   {report.leader_moves}",
        f"Requests sent:                  {total} ({requests or 'none'})",
        f"Unclean leader elections:       {report.unclean_elections}",
        f"Invariant violations:           {len(report.violations)}",
        *(style.bad(f"  after step {n}: {v}") for n, v in report.violations),
        f"Failed expectations and errors: {len(report.failures)}",
        *(style.bad(f"  step {n}: {f}") for n, f in report.failures),
        "",
        verdict(report, style),
    ]
    return "\n".join(lines)


def verdict(report: Report, style: Style) -> str:
    if report.ok:
        return style.good("OK: every expectation held and invariants I1-I8 held after every step")
    return style.bad(f"FAILED: {len(report.failures)} failed expectations or errors, "
                     f"{len(report.violations)} invariant violations")


def partition_table(report: Report) -> str:
    return table(
        ("TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR"),
        [(p.topic, str(p.partition), str(p.leader), str(p.leader_epoch), ",".join(map(str, p.replicas)),
          ",".join(map(str, p.isr))) for p in report.partitions],
    )


def metrics_table(report: Report) -> str:
    return table(("METRIC", "VALUE"), [(name, _number(value)) for name, value in report.metrics.items()])


def write_json(report: Report, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
