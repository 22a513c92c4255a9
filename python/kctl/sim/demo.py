"""``kctl demo``: a small simulated cluster taken through the controller's main operations.

The demo is an ordinary scenario, built here from the command-line sizes and played by the same
runner as ``kctl sim``, so what it shows is exactly what a scenario file would get: topic creation,
a broker crash and its restart, a reassignment, a preferred election, a controlled shutdown, a topic
deletion and a controller failover, with invariants I1–I8 checked after every step.
"""

from __future__ import annotations

from typing import Any, TextIO

from kctl.admin import max_partitions
from kctl.cluster import check_broker_count
from kctl.sim.report import STEP_HEADER, ProgressDisplay, Style, metrics_table, partition_table, step_lines, verdict
from kctl.sim.runner import StepResult, components, run_scenario
from kctl.sim.scenario import Scenario, parse_scenario

MIN_BROKERS = 3
"""The demo's topics have replication factors 3 and 2, and one topic moves off broker 1."""
MAX_DEMO_PARTITIONS = max_partitions(3)
"""The most partitions a demo topic may have: one of replication factor 3 must fit in a znode."""


def demo_scenario(brokers: int = 5, partitions: int = 6, seed: int = 0) -> Scenario:
    """The demo's timeline for ``brokers`` brokers (at least 3) on up to 3 racks, and two topics of
    ``partitions`` partitions each."""
    check_broker_count(brokers)  # before the reassignment step lists them all
    crashed, bounced = brokers, brokers - 1
    steps: list[dict[str, Any]] = [
        {"action": "create_topic", "name": "orders", "partitions": partitions, "replication_factor": 3,
         "note": "replicas spread over the racks by Kafka's rack-aware assignment"},
        {"action": "create_topic", "name": "audit", "partitions": partitions, "replication_factor": 2},
        {"action": "kill_broker", "broker": crashed,
         "note": "a crash: the controller elects new leaders from the ISR and shrinks the ISRs"},
        {"action": "start_broker", "broker": crashed,
         "note": "it comes back and catches up, but leads nothing until a preferred election"},
        {"action": "reassign", "topic": "audit", "brokers": list(range(2, brokers + 1)),
         "note": "move audit off broker 1: new replicas are added, caught up, then the old ones removed"},
        {"action": "elect_leaders", "kind": "preferred", "note": "leadership goes back to the preferred replicas"},
        {"action": "shutdown_broker", "broker": bounced,
         "note": "a controlled shutdown moves leadership away before the broker stops"},
        {"action": "start_broker", "broker": bounced},
        {"action": "delete_topic", "topic": "audit",
         "note": "replicas are stopped and deleted, then the topic's znodes"},
        {"action": "kill_controller", "note": "another candidate wins the election and reloads the state"},
        {"action": "expect", "invariants": True, "stable": True, "offline_partitions": 0, "topics": ["orders"]},
    ]
    data = {
        "name": "kctl demo",
        "cluster": {"brokers": brokers, "racks": min(3, brokers), "seed": seed},
        "steps": steps,
    }
    return parse_scenario(data, "<demo>")


def run_demo(out: TextIO, brokers: int = 5, partitions: int = 6, seed: int = 0,
             engine: str | None = None, color: bool = False, progress: ProgressDisplay | None = None) -> int:
    """Play the demo, printing as it goes (and ``progress`` inside long steps); the exit status is
    0 only if every check held."""
    style = Style(color)
    scenario = demo_scenario(brokers, partitions, seed)
    racks = scenario.cluster.racks or {}
    print(style.bold(f"kctl demo: {brokers} brokers on {len(set(racks.values()))} racks, topics of {partitions} "
                     f"partitions, seed {seed}"), file=out)
    print(components(scenario, engine), file=out)
    print(style.dim(STEP_HEADER), file=out)

    def step_done(result: StepResult) -> None:
        if progress is not None:
            progress.clear()
        print("\n".join(step_lines(result, style)), file=out, flush=True)

    report = run_scenario(scenario, engine=engine, seed=seed, on_step=step_done,
                          on_progress=None if progress is None else progress.update, record_requests=False)
    print(f"\n{partition_table(report)}\n\n{metrics_table(report)}\n", file=out)
    for number, violation in report.violations:
        print(style.bad(f"invariant violated after step {number}: {violation}"), file=out)
    print(verdict(report, style), file=out)
    return 0 if report.ok else 1
