"""Kafka 3.9 and kctl side by side, the set ``./scripts/test`` runs: topic creation (explicit and
rack-aware assignments), a leader broker's crash and restart, an admin preferred election,
reassignments with and without overlap, added partitions, a controlled shutdown and restart, and
the controller's crash.

Each step runs on three real Kafka brokers and on kctl's controller and brokers (ids 1–3, in the
same racks, on both sides); after it, both chroots must hold the same topic znodes and partition
states (leader, leader epoch, ISR, znode versions) and admin znodes, waited for with generous
deadlines (:class:`tests.support.kafka_harness.SideBySide`). The rest of the catalogue is ``test_catalogue.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any


from kctl.model import TopicPartition
from kctl.testing.differential import ADMIN_ZNODES
from kctl.testing.ports import listening_ports

from tests.support.kafka_harness import (
    ASSIGNMENT,
    KCTL_CONTROLLER,
    KCTL_STANDBY,
    RACKS,
    SideBySide,
    all_led,
    others,
    reassigned,
    rejoined,
    replicas,
    without,
)

ELECT = ADMIN_ZNODES[1]


def test_creating_a_topic_with_an_explicit_assignment_elects_the_same_leaders(sides: SideBySide) -> None:
    kafka = sides.create_and_compare("created")
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


def test_the_cluster_wide_znodes_are_kafkas(sides: SideBySide) -> None:
    def read(chroot: str, path: str) -> tuple[Any, int]:
        data, stat = sides.zk.get(chroot + path)
        return data, stat.version

    kafka, kctl = ({path: read(chroot, path) for path in ("/feature", "/controller", "/cluster/id")}
                   for chroot in (sides.kafka.chroot, sides.kctl_chroot))
    # /feature, written by the controller at failover: the same bytes, as Kafka 3.9.1's IBP says
    assert kctl["/feature"] == kafka["/feature"]
    # /controller (version 2) and /cluster/id (the first broker's): the same fields in the same
    # order, the same values but the controller's id, its timestamp and the cluster's id
    for path, own in (("/controller", ("brokerid", "timestamp")), ("/cluster/id", ("id",))):
        theirs, ours = (json.loads(data) for data, _ in (kafka[path], kctl[path]))
        assert list(ours) == list(theirs), path
        assert {k: v for k, v in ours.items() if k not in own} == {k: v for k, v in theirs.items() if k not in own}
    for data, _ in (kafka["/cluster/id"], kctl["/cluster/id"]):
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", json.loads(data)["id"])  # a UUID in URL-safe base64
    assert json.loads(kctl["/controller"][0])["brokerid"] == KCTL_CONTROLLER


def test_a_rack_aware_assignment_elects_the_same_leaders(sides: SideBySide) -> None:
    placed = sides.create_rack_aware_topic("racked", 6, 2)
    # both racks in every partition, each broker the preferred leader of two
    assert all({RACKS[broker] for broker in replicas} == set(RACKS.values()) for replicas in placed.values())
    assert sorted(replicas[0] for replicas in placed.values()) == [1, 1, 2, 2, 3, 3]
    kafka = sides.compare(all_led("racked", placed), "creating 'racked' with a rack-aware assignment")
    assert kafka.leaders("racked") == {p: replicas[0] for p, replicas in placed.items()}


def test_a_leader_broker_killed_then_restarted_moves_leaders_and_isrs_alike(sides: SideBySide) -> None:
    sides.create_and_compare("crashed")
    victim = others(sides)[0]

    sides.kill(victim)
    kafka = sides.compare(without(victim), f"kill -9 of broker {victim}, the leader of 'crashed'-{victim - 1}")
    moved = kafka.partitions[TopicPartition("crashed", victim - 1)]
    assert moved.leader_epoch == 1 and moved.leader in ASSIGNMENT[victim - 1][1:]

    sides.restart(victim)
    sides.compare(rejoined(victim), f"restart of broker {victim}")

    # the restarted broker leads nothing until a preferred election asks for it
    partitions = [TopicPartition("crashed", p) for p in ASSIGNMENT]
    sides.elect_preferred(partitions)
    kafka = sides.compare(
        lambda s: s.leaders("crashed") == {p: r[0] for p, r in ASSIGNMENT.items()} and ELECT not in s.admin,
        "a preferred replica election of 'crashed' (/admin/preferred_replica_election)")
    assert kafka.partitions[TopicPartition("crashed", victim - 1)].leader_epoch == 2


def test_reassignments_with_and_without_overlap_end_alike(sides: SideBySide) -> None:
    sides.create_and_compare("moved", {0: [1, 2], 1: [1, 2]})

    for partition, target, kind in ((0, [3], "without overlap"), (1, [2, 3], "with overlap")):
        sides.reassign({TopicPartition("moved", partition): target})
        kafka = sides.compare(reassigned(TopicPartition("moved", partition), target),
                              f"reassigning 'moved'-{partition} to {target} ({kind})")
        assert kafka.partitions[TopicPartition("moved", partition)].isr == frozenset(target)


def test_added_partitions_are_led_alike(sides: SideBySide) -> None:
    sides.create_and_compare("grown", {0: [1, 2]})
    sides.add_partitions("grown", {1: [2, 3], 2: [3, 1]})
    grown = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    kafka = sides.compare(all_led("grown", grown), "adding partitions 1 and 2 to 'grown'")
    assert replicas(kafka, "grown")["partitions"] == {str(p): r for p, r in grown.items()}
    assert kafka.leaders("grown") == {0: 1, 1: 2, 2: 3}


def test_a_controlled_shutdown_then_a_restart_move_leaders_and_isrs_alike(sides: SideBySide) -> None:
    sides.create_and_compare("shutdown")
    broker = others(sides)[0]

    sides.shut_down(broker)
    kafka = sides.compare(without(broker), f"SIGTERM of broker {broker} (controlled shutdown)")
    assert all(state.leader_epoch == 1 for tp, state in kafka.partitions.items() if tp.topic == "shutdown")

    sides.restart(broker)
    sides.compare(rejoined(broker), f"restart of broker {broker}")


def test_the_controllers_crash_moves_leaders_and_isrs_alike(sides: SideBySide) -> None:
    sides.create_and_compare("failover")

    victim = sides.crash_controller()
    # the next controller (Kafka's among the live brokers, kctl's standby) finds the broker gone:
    # new leaders for its partitions, and it leaves every ISR
    kafka = sides.compare(without(victim), f"kill -9 of broker {victim}, Kafka's controller, and of kctl's active controller")
    assert sides.kafka_controller() != victim and sides.kctl.active_controller() == KCTL_STANDBY
    led = kafka.partitions[TopicPartition("failover", victim - 1)]
    assert led.leader in ASSIGNMENT[victim - 1][1:] and led.leader_epoch >= 1

    sides.restart(victim)
    sides.start_controller(KCTL_CONTROLLER)  # the new standby
    sides.compare(rejoined(victim), f"restart of broker {victim}")
    assert sides.kctl.active_controller() == KCTL_STANDBY
