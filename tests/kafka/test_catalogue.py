"""The rest of the differential catalogue (marker ``kafka_full``, run by ``scripts/kafka-diff``):
Kafka's admin tools beside kctl's (an election over all partitions, a deletion), a cancelled reassignment, a topic deleted while a broker is down, and an unclean election enabled
per topic, each compared after every step.

Scenarios that kill brokers pick them among :func:`tests.support.kafka_harness.others`, never Kafka's controller.
"""

from __future__ import annotations

import pytest

from kctl.model import TopicPartition
from kctl.testing.differential import DELETE_TOPICS

from tests.support.kafka_harness import (
    ASSIGNMENT,
    SideBySide,
    others,
    reassigned,
    rejoined,
    replicas,
    without,
)

pytestmark = pytest.mark.kafka_full


def test_elect_leaders_over_all_partitions_and_topics_delete_print_what_kafkas_tools_print(sides: SideBySide) -> None:
    # first in the module: only this topic exists, so the election over all partitions is this one's
    sides.create_and_compare("tools")
    broker = others(sides)[0]
    sides.shut_down(broker)
    sides.compare(without(broker), f"SIGTERM of broker {broker} (controlled shutdown)")
    sides.restart(broker)
    sides.compare(rejoined(broker), f"restart of broker {broker}")

    moved = TopicPartition("tools", broker - 1)  # the partition whose preferred leader it is
    kafka, kctl = sides.elect_all_with_tools("preferred")
    expected = f"Successfully completed leader election (PREFERRED) for partitions {moved}\n"
    assert (kafka.status, kafka.stdout) == (0, expected), kafka
    assert (kctl.status, kctl.stdout) == (0, expected), kctl
    sides.compare(lambda s: s.leaders("tools") == {p: r[0] for p, r in ASSIGNMENT.items()},
                  "a preferred election over all partitions")
    # nothing left to elect: Kafka's tool prints no "Valid replica already elected" line, nor kctl's
    kafka, kctl = sides.elect_all_with_tools("preferred")
    assert (kafka.status, kafka.stdout) == (kctl.status, kctl.stdout) == (0, ""), (kafka, kctl)

    kafka, kctl = sides.delete_with_tools("tools")  # both wait until the topic is deleted, silently
    assert (kafka.status, kafka.stdout) == (kctl.status, kctl.stdout) == (0, ""), (kafka, kctl)
    assert "/brokers/topics/tools" not in sides.compare(lambda s: "/brokers/topics/tools" not in s.topics,
                                                        "deleting 'tools' with the tools").topics
    # a deliberate difference: Kafka 3.9.1 formats the name as a Java Optional, on stdout; kctl
    # names the topic, as an error on stderr like all its errors
    kafka, kctl = sides.delete_with_tools("tools")
    assert (kafka.status, kafka.stdout) == (
        1, "Error while executing topic command : Topic 'Optional[tools]' does not exist as expected\n"), kafka
    assert (kctl.status, kctl.stdout, kctl.stderr) == (
        1, "", "kctl: error: Topic 'tools' does not exist as expected\n"), kctl


def test_a_reassignment_cancelled_returns_to_its_replicas_alike(sides: SideBySide) -> None:
    kept, down = others(sides)
    controller = sides.kafka_controller()
    tp, origin, target = TopicPartition("cancelled", 0), [controller, kept], [controller, down]
    sides.create_and_compare("cancelled", {0: origin})
    sides.kill(down)
    sides.compare(without(down), f"kill -9 of broker {down}")

    # the replica to add is down: the reassignment stays in progress
    sides.reassign({tp: target})
    kafka = sides.compare(lambda s: replicas(s, "cancelled").get("adding_replicas") == {"0": [down]},
                          f"reassigning {tp} to {target} while broker {down} is down")
    assert replicas(kafka, "cancelled")["partitions"]["0"] == [controller, down, kept]

    kafka_output, kctl_output = sides.cancel_reassignment({tp: target})
    assert f"Successfully cancelled partition reassignment for: {tp}" in kafka_output
    assert f"Successfully cancelled partition reassignment for: {tp}" in kctl_output
    kafka = sides.compare(reassigned(tp, origin), f"cancelling the reassignment of {tp}")
    assert replicas(kafka, "cancelled")["partitions"] == {"0": origin}

    sides.restart(down)
    sides.compare(rejoined(down), f"restart of broker {down}")


def test_a_topic_deleted_while_a_broker_is_down_is_gone_once_it_returns(sides: SideBySide) -> None:
    up, down = others(sides)
    assignment = {0: [sides.kafka_controller(), up], 1: [up, down]}
    sides.create_and_compare("deleted", assignment)
    sides.kill(down)
    sides.compare(without(down), f"kill -9 of broker {down}")

    sides.delete_topic("deleted")
    # a replica on a dead broker cannot be deleted: the deletion waits, the request stays
    kafka = sides.compare(lambda s: f"{DELETE_TOPICS}/deleted" in s.admin, f"deleting 'deleted' while broker {down} is down")
    assert "/brokers/topics/deleted" in kafka.topics

    sides.restart(down)
    sides.compare(lambda s: "/brokers/topics/deleted" not in s.topics and f"{DELETE_TOPICS}/deleted" not in s.admin,
                  f"restart of broker {down}: the deletion completes")


def test_an_unclean_election_enabled_on_the_topic_elects_an_out_of_sync_replica_alike(sides: SideBySide) -> None:
    first, second = others(sides)
    tp = TopicPartition("unclean", 0)
    sides.create_and_compare("unclean", {0: [first, second]})
    sides.kill(second)
    sides.compare(without(second), f"kill -9 of broker {second}, the follower")
    sides.kill(first)
    kafka = sides.compare(lambda s: s.leaders("unclean") == {0: -1}, f"kill -9 of broker {first}, the last in the ISR")
    assert kafka.partitions[tp].isr == {first}

    sides.restart(second)  # out of sync: not electable while unclean election is off
    kafka = sides.compare(lambda s: s.leaders("unclean") == {0: -1}, f"restart of broker {second}")
    assert kafka.partitions[tp].isr == {first}

    sides.change_topic_config("unclean", {"unclean.leader.election.enable": "true"})
    # both at Kafka 3.9's protocol version: the unclean leader is RECOVERING (KIP-704) in the state
    kafka = sides.compare(lambda s: s.leaders("unclean") == {0: second},
                          "unclean.leader.election.enable=true on 'unclean' (/config/topics and a change notification)")
    assert kafka.partitions[tp].isr == {second}
    assert ("leader_recovery_state", "1") in kafka.partitions[tp].other

    sides.restart(first)  # the leader's AlterPartition growing the ISR says RECOVERED
    kafka = sides.compare(rejoined(first), f"restart of broker {first}")
    assert not any(name == "leader_recovery_state" for name, _ in kafka.partitions[tp].other)
