"""kctl's controller process in charge of real Kafka brokers (``--transport kafka``): the fixtures
and readers the tests of tests/kafka share (the brokers come from :class:`kctl.testing.kafka.KafkaCluster`
with ``inter_broker_listener=True``)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.model import LeaderIsrAndControllerEpoch, TopicPartition
from kctl.testing.kafka import INTER_BROKER_LISTENER, KafkaBroker, KafkaCluster, KafkaInstallation
from kctl.testing.ports import LOOPBACK, free_ports, release_ports
from kctl.testing.zookeeper import ZooKeeperEnsemble

from tests.support.process_harness import ProcessCluster

CONTROLLER = 3000
BROKERS = {1, 2, 3}
TIMEOUT = 120.0
IBP = {"inter.broker.protocol.version": "3.9"}


@pytest.fixture
def chroot() -> str:
    return f"/kctl-kafka-{uuid.uuid4().hex}"


@pytest.fixture
def kctl(zookeeper_server: ZooKeeperEnsemble, chroot: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    with ProcessCluster(zookeeper_server.hosts + chroot, tmp_path, dict(IBP), transport="kafka") as cluster:
        yield cluster


def start_controller(kctl: ProcessCluster, port: int) -> None:
    kctl.start_controller(CONTROLLER, ["--kafka-listener", f"{INTER_BROKER_LISTENER}://{LOOPBACK}:{port}"])


@contextlib.contextmanager
def kctl_in_charge(kctl: ProcessCluster, zookeeper: ZooKeeperEnsemble, installation: KafkaInstallation,
                   chroot: str) -> Iterator[tuple[KafkaCluster, int]]:
    """kctl's controller elected first, then three Kafka brokers (with an inter-broker listener) in
    the same chroot: the brokers and the port of kctl's listener."""
    port = free_ports(1)[0]
    try:
        start_controller(kctl, port)
        kctl.wait_until(lambda: kctl.active_controller() == CONTROLLER, 60, "kctl's controller to be elected")
        with KafkaCluster(zookeeper.hosts, 3, chroot=chroot, installation=installation, overrides=IBP,
                          inter_broker_listener=True) as kafka:
            yield kafka, port
    finally:
        release_ports([port])


def states(kctl: ProcessCluster, topic: str) -> dict[int, LeaderIsrAndControllerEpoch]:
    found = kctl.admin.get_partition_states([TopicPartition(topic, p) for p in kctl.assignment(topic)]).values
    return {tp.partition: state for tp, state in found.items()}


def logged(broker: KafkaBroker, log: str, line: str) -> bool:
    return line in broker.log_tail(log, 100_000)


def settled(kctl: ProcessCluster, topic: str, live: set[int],
            controller_epoch: int | None = None) -> dict[int, LeaderIsrAndControllerEpoch] | None:
    """The topic's states once every partition is led by a live broker with the live replicas in
    its ISR (written by the controller of ``controller_epoch``, when given)."""
    assignment = kctl.assignment(topic)
    found = states(kctl, topic)
    if set(found) != set(assignment):
        return None
    for p, state in found.items():
        lai = state.leader_and_isr
        if (lai.leader not in live or set(lai.isr) != set(assignment[p].replicas) & live
                or controller_epoch is not None and state.controller_epoch != controller_epoch):
            return None
    return found


__all__ = ["BROKERS", "CONTROLLER", "IBP", "TIMEOUT", "chroot", "kctl", "kctl_in_charge", "logged", "settled", "start_controller",
           "states"]
