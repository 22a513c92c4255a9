"""Progress inside long steps of ``kctl sim`` and ``kctl demo`` (issue 12, item 10): a bar redrawn
in place on a terminal, plain lines otherwise, and nothing for a step shorter than a second."""

from __future__ import annotations

import io
import itertools
import re

from kctl.sim.demo import run_demo
from kctl.sim.report import ProgressDisplay, Style
from kctl.sim.runner import StepProgress, run_scenario
from kctl.sim.scenario import parse_scenario


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def progress(number: int = 5, sent: int = 1000, answered: int = 250) -> StepProgress:
    return StepProgress(number, "reassign", 2.5, sent, answered)


def test_a_terminal_gets_a_bar_after_a_second_redrawn_in_place_and_erased() -> None:
    out, clock = io.StringIO(), FakeClock()
    display = ProgressDisplay(out, tty=True, style=Style(False), clock=clock)

    display.update(progress())
    clock.now += 0.9
    display.update(progress())
    assert out.getvalue() == ""  # under a second: nothing

    clock.now += 0.2
    display.update(progress(answered=250))
    clock.now += 0.05
    display.update(progress(answered=500))  # within the redraw interval: not drawn
    clock.now += 0.1
    display.update(progress(answered=750))
    display.clear()

    frames = out.getvalue().split("\r\033[K")
    assert frames[0] == "" and frames[-1] == ""
    assert frames[1:-1] == [
        "[######..................]  25% step 5 reassign: 250 of 1,000 requests answered, 2.5s of cluster time in 1s",
        "[##################......]  75% step 5 reassign: 750 of 1,000 requests answered, 2.5s of cluster time in 1s",
    ]
    assert "\n" not in out.getvalue()


def test_without_a_terminal_plain_lines_every_few_seconds() -> None:
    out, clock = io.StringIO(), FakeClock()
    display = ProgressDisplay(out, tty=False, style=Style(False), clock=clock)

    for _ in range(13):  # 0 s to 12 s into the step
        display.update(progress(sent=12_345, answered=678))
        clock.now += 1.0
    display.clear()

    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\033" not in out.getvalue()
    assert [re.search(r"in (\d+)s$", line)[1] for line in lines] == ["1", "6", "11"]  # type: ignore[index]
    assert lines[0] == "             .. step 5 reassign: 678 of 12,345 requests answered, 2.5s of cluster time in 1s"


def test_each_step_waits_its_own_second() -> None:
    out, clock = io.StringIO(), FakeClock()
    display = ProgressDisplay(out, tty=False, style=Style(False), clock=clock)
    display.update(progress(number=3))
    clock.now += 1.5
    display.update(progress(number=3))
    display.update(progress(number=4))  # a new step: its second starts now
    clock.now += 0.5
    display.update(progress(number=4))

    assert [line.split(":")[0].strip() for line in out.getvalue().splitlines()] == [".. step 3 reassign"]


SCENARIO = {
    "cluster": {"brokers": 6, "seed": 3},
    "topics": [{"name": "t", "partitions": 60, "replication_factor": 2}],
    "steps": [
        {"action": "kill_broker", "broker": 6},
        {"action": "reassign", "topic": "t", "brokers": [1, 2, 3, 4, 5]},
    ],
}


def test_a_running_step_reports_its_requests_as_they_are_sent_and_answered() -> None:
    seen: list[StepProgress] = []
    done: dict[int, int] = {}
    report = run_scenario(parse_scenario(SCENARIO, "<test>"), on_progress=seen.append,
                          on_step=lambda result: done.setdefault(result.number, result.requests))

    reassign = [p for p in seen if p.number == 2]
    assert report.ok and len(reassign) > 5 and {p.action for p in reassign} == {"reassign"}
    assert all(a.requests_sent <= b.requests_sent and a.requests_answered <= b.requests_answered
               and a.cluster_seconds <= b.cluster_seconds for a, b in itertools.pairwise(reassign))
    assert reassign[-1].requests_sent == done[2] and reassign[-1].requests_answered == done[2]


def test_kctl_demo_shows_the_progress_of_its_long_steps() -> None:
    out, clock = io.StringIO(), FakeClock()

    def slow_clock() -> float:  # every look at the clock is a second later
        clock.now += 1.0
        return clock.now

    status = run_demo(out, brokers=4, partitions=8, progress=ProgressDisplay(out, False, Style(False), slow_clock))

    lines = out.getvalue().splitlines()
    reassign = next(i for i, line in enumerate(lines) if re.match(r" +\d+\.\d+s +5 reassign ", line))
    assert status == 0
    assert re.fullmatch(r" {13}\.\. step 5 reassign: [\d,]+ of [\d,]+ requests answered, .*", lines[reassign - 1])
