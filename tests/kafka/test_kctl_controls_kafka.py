"""kctl's controller in charge of three real Kafka 3.9.1 brokers (ZooKeeper mode, ``kctl controller
--transport kafka``), and Kafka's own controller taking over when it dies.

kctl's controller starts first and wins ``/controller``; the brokers find it through its
controller-only entry on their inter-broker listener. A topic kctl creates is led as kctl decides
(its partition state znodes, and the brokers' state-change.log naming controller 3000); a killed
broker's partitions are led again by kctl; when the broker comes back, its leaders add it to the
ISR through AlterPartition to kctl's listener (Kafka logs the ISR it was answered); a SIGTERM'd
broker's ControlledShutdown is answered there too; kill -9 of kctl
hands the cluster to a Kafka broker's controller, which creates the next topic; kctl restarted
stands by. It takes 25–50 s here, so it runs with the small set (marker ``kafka``).
"""

from __future__ import annotations

import functools

from kctl.testing.kafka import KafkaCluster, KafkaInstallation
from kctl.testing.ports import LOOPBACK
from kctl.testing.zookeeper import ZooKeeperEnsemble
from kctl.tools.client import AdminClient

from tests.support.kctl_kafka import (
    BROKERS,
    CONTROLLER,
    TIMEOUT,
    chroot,
    kctl,
    kctl_in_charge,
    logged,
    settled,
    start_controller,
)
from tests.support.process_harness import ProcessCluster

__all__ = ["chroot", "kctl"]

PARTITIONS = 6


def test_kctl_controls_real_kafka_brokers_and_hands_over_to_kafkas_controller(
    zookeeper_server: ZooKeeperEnsemble, kafka_installation: KafkaInstallation, kctl: ProcessCluster, chroot: str,
) -> None:
    with kctl_in_charge(kctl, zookeeper_server, kafka_installation, chroot) as (kafka, port):
        entry, _ = kctl.wait_until(lambda: kctl.admin.get_all_brokers().get(CONTROLLER), 60, "kctl's controller entry")
        assert entry.controller_only and [str(e) for e in entry.endpoints] == [f"INTERNAL://{LOOPBACK}:{port}"]
        run_scenario(kctl, kafka, port)


def run_scenario(kctl: ProcessCluster, kafka: KafkaCluster, port: int) -> None:
    admin = AdminClient(kctl.admin)
    epoch = kctl.controller_epoch()
    assert kctl.active_controller() == CONTROLLER  # the brokers' candidates stood by

    # A topic created by kctl: placed over the three brokers only, led as kctl's controller decided.
    assignment = admin.create_topic("orders", PARTITIONS, 3)
    assert {b for replicas in assignment.values() for b in replicas} == BROKERS
    led = kctl.wait_until(lambda: settled(kctl, "orders", BROKERS, epoch), TIMEOUT, "kctl to lead every partition")
    for p, state in led.items():  # each leader says so in its state-change.log, once it has acted
        leader = kafka.brokers[state.leader_and_isr.leader]
        line = f"from controller {CONTROLLER} epoch {epoch} starting the become-leader transition for partition orders-{p}"
        kctl.wait_until(functools.partial(logged, leader, "state-change.log", line), TIMEOUT,
                        f"broker {leader.broker_id} to lead orders-{p}")

    # kill -9 of a broker: kctl leads its partitions from the others and takes it out of their ISRs.
    victim = led[0].leader_and_isr.leader
    kafka.kill(victim)
    live = BROKERS - {victim}
    moved = kctl.wait_until(lambda: settled(kctl, "orders", live, epoch), TIMEOUT, f"kctl to lead without broker {victim}")
    assert moved[0].leader_and_isr.leader_epoch > led[0].leader_and_isr.leader_epoch

    # Its restart: the leaders add it back to their ISRs through AlterPartition to kctl's listener.
    kafka.restart(victim)
    rejoined = kctl.wait_until(lambda: settled(kctl, "orders", BROKERS, epoch), TIMEOUT,
                               f"the leaders to add broker {victim} back to their ISRs")
    for p, state in rejoined.items():
        assert state.leader_and_isr.partition_epoch > moved[p].leader_and_isr.partition_epoch
    kctl.wait_until(lambda: any(logged(kafka.brokers[b], "server.log", "ISR updated to") for b in live), TIMEOUT,
                    "a leader to log the ISR kctl's controller answered")

    # SIGTERM of a broker: its ControlledShutdown reaches kctl's listener, which moves its leaders first.
    leaving = rejoined[1].leader_and_isr.leader
    kafka.stop_broker(leaving)
    assert logged(kafka.brokers[leaving], "server.log", "Controlled shutdown request returned successfully")
    live = BROKERS - {leaving}
    kctl.wait_until(lambda: settled(kctl, "orders", live, epoch), TIMEOUT, f"kctl to lead without broker {leaving}")

    # kill -9 of kctl: a Kafka broker's controller takes over and the cluster goes on.
    kctl.controllers[CONTROLLER].kill()
    successor = kctl.wait_until(lambda: (kctl.active_controller() or 0) in live and kctl.active_controller(),
                                TIMEOUT, "a Kafka broker to take the controller over")
    assert CONTROLLER not in kctl.admin.get_all_brokers()
    later = kctl.controller_epoch()
    assert later > epoch
    admin.create_topic("after", PARTITIONS, 2)
    kctl.wait_until(lambda: settled(kctl, "after", live, later), TIMEOUT, f"Kafka's controller {successor} to lead")

    # kctl restarted stands by: the Kafka controller keeps /controller, and kctl registers no entry.
    start_controller(kctl, port)
    kctl.wait_until(lambda: f"Broker {successor} has been elected as the controller" in kctl.controllers[CONTROLLER].log(),
                    60, "kctl to stand by")
    assert kctl.active_controller() == successor and CONTROLLER not in kctl.admin.get_all_brokers()
