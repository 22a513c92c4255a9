"""Kafka 3.9 and kctl side by side: topic creation, then a leader broker's crash and its restart.

Each step runs on three real Kafka brokers and on kctl's controller and brokers (ids 1–3 on both
sides); after it, both chroots must hold the same topic znodes and partition states (leader, leader
epoch, ISR, znode versions), waited for with generous deadlines (:class:`kafka_harness.SideBySide`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kafka_harness import SideBySide

from kctl.testing.differential import Snapshot
from kctl.testing.ports import listening_ports

ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
"""Each broker the preferred leader of one partition, every partition on every broker."""


def all_led(topic: str, assignment: Mapping[int, Sequence[int]]) -> Callable[[Snapshot], bool]:
    """Every partition of ``topic`` has a state with a leader."""
    return lambda s: sorted(s.leaders(topic)) == sorted(assignment) and all(
        leader >= 0 for leader in s.leaders(topic).values())


def test_creating_a_topic_with_an_explicit_assignment_elects_the_same_leaders(sides: SideBySide) -> None:
    sides.create_topic("created", ASSIGNMENT)
    kafka = sides.compare(all_led("created", ASSIGNMENT), "creating 'created'")
    assert kafka.leaders("created") == {p: replicas[0] for p, replicas in ASSIGNMENT.items()}
    assert {tp.partition: (s.leader_epoch, s.version, s.isr) for tp, s in kafka.partitions.items()} == {
        p: (0, 0, frozenset(replicas)) for p, replicas in ASSIGNMENT.items()}

    # the fixture's brokers: each on its own loopback port only, Kafka's log files at TRACE
    for broker in sides.kafka.brokers.values():
        assert broker.pid is not None and listening_ports(broker.pid) == {int(broker.config["listeners"].split(":")[-1])}
    controller = sides.kafka.brokers[sides.kafka_controller()].logs_dir
    assert f"[Controller id={sides.kafka_controller()}] New partition creation callback for created-0" in (
        controller / "controller.log").read_text()
    assert "TRACE [Controller id=" in (controller / "state-change.log").read_text()


def test_a_leader_broker_killed_then_restarted_moves_leaders_and_isrs_alike(sides: SideBySide) -> None:
    sides.create_topic("crashed", ASSIGNMENT)
    sides.compare(all_led("crashed", ASSIGNMENT), "creating 'crashed'")
    victim = next(broker for broker in sorted(sides.kafka.brokers) if broker != sides.kafka_controller())

    sides.kill(victim)
    kafka = sides.compare(
        lambda s: all(state.leader != victim and victim not in state.isr for state in s.partitions.values()),
        f"kill -9 of broker {victim}, the leader of 'crashed'-{victim - 1}",
    )
    moved = kafka.partitions[next(tp for tp in kafka.partitions if tp == ("crashed", victim - 1))]
    assert moved.leader_epoch == 1 and moved.leader in ASSIGNMENT[victim - 1][1:]

    sides.restart(victim)
    sides.compare(lambda s: all(victim in state.isr for state in s.partitions.values()),
                  f"restart of broker {victim}")
