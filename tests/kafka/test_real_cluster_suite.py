"""The real-cluster suite: three Kafka 3.9.1 brokers with kctl's controller in charge, an idempotent
producer with ``acks=all`` running throughout and a consumer reading everything back at the end
(Kafka's own Java clients, tests/kafka/KafkaClients.java).

The producer runs through: topic creation, kill -9 of a leader broker, its restart, a SIGTERM'd
broker's controlled shutdown (and its restart), a reassignment onto a broker that held no replica,
a preferred election, a topic deletion, a failover from kctl's controller to a Kafka broker's (kctl
killed) and back (``/controller`` deleted while kctl stands by, until kctl wins it). After each step
the producer must have records acknowledged again. Afterwards: every acknowledged record is read
back, every partition is led with its ISR full, and the controller epoch never went backwards.
The producer's ids come from kctl's answer to the brokers' AllocateProducerIds. It takes 95–175 s
per engine here; it is part of the small set that ``./scripts/test`` runs.
"""

from __future__ import annotations

import subprocess
import threading
import zlib
from pathlib import Path
from typing import IO

from kctl.model import TopicPartition
from kctl.stores import paths
from kctl.stores.base import MATCH_ANY_VERSION
from kctl.stores.znode import Op
from kctl.testing.kafka import KafkaCluster, KafkaInstallation
from kctl.testing.zookeeper import ZooKeeperEnsemble
from kctl.tools.client import AdminClient

from tests.support.kctl_kafka import BROKERS, CONTROLLER, TIMEOUT, chroot, kctl, kctl_in_charge, settled, start_controller
from tests.support.process_harness import ProcessCluster

__all__ = ["chroot", "kctl"]

CLIENTS = Path(__file__).with_name("KafkaClients.java")
TOPIC = "events"
PARTITIONS = 6
PROGRESS = 50
"""Records acknowledged after each step, at least: the producer goes on through it."""


class Producer:
    """KafkaClients.java's producer: each acknowledged record's number, read as it comes."""

    def __init__(self, installation: KafkaInstallation, bootstrap: str, log: Path) -> None:
        self.acked: dict[int, int] = {}  # record number → partition
        self.failed: list[str] = []
        self.done = threading.Event()
        self._log = log.open("w")
        self.process = subprocess.Popen([installation.java, "-cp", installation.classpath, str(CLIENTS), "produce",
                                         bootstrap, TOPIC], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._log, text=True)
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, out: IO[str] | None) -> None:
        assert out is not None
        for line in out:
            words = line.split()
            if words[:1] == ["acked"]:
                self.acked[int(words[1])] = int(words[2])
            elif words[:1] == ["failed"]:
                self.failed.append(line.strip())
            elif words[:1] == ["done"]:
                self.done.set()

    def progressed(self, kctl: ProcessCluster, what: str) -> None:
        """Wait for :data:`PROGRESS` more acknowledged records."""
        wanted = len(self.acked) + PROGRESS
        kctl.wait_until(lambda: len(self.acked) >= wanted or None, TIMEOUT,
                        f"{PROGRESS} more records acknowledged after {what} ({len(self.acked)} so far, "
                        f"failed: {self.failed[-3:]})")

    def stop(self) -> None:
        """Ask it to stop; it flushes what it sent and closes."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write("stop\n")
            self.process.stdin.flush()
            self.done.wait(300)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self._log):
            if stream is not None:
                stream.close()


def consume(installation: KafkaInstallation, bootstrap: str) -> list[str]:
    out = subprocess.run([installation.java, "-cp", installation.classpath, str(CLIENTS), "consume", bootstrap, TOPIC],
                         capture_output=True, text=True, timeout=600, check=True)
    lines = out.stdout.splitlines()
    assert lines and lines[-1] == f"done {len(lines) - 1}", out.stderr[-3000:]
    return lines[:-1]


def checksum(values: set[str]) -> int:
    return sum(zlib.crc32(v.encode()) for v in values) % 2**32


def test_records_survive_every_operation_with_kctl_in_charge(
    zookeeper_server: ZooKeeperEnsemble, kafka_installation: KafkaInstallation, kctl: ProcessCluster, chroot: str,
    tmp_path: Path,
) -> None:
    with kctl_in_charge(kctl, zookeeper_server, kafka_installation, chroot) as (kafka, port):
        bootstrap = ",".join(b.config["listeners"].split(",")[0].removeprefix("PLAINTEXT://")
                             for b in kafka.brokers.values())
        producer = Producer(kafka_installation, bootstrap, tmp_path / "producer.log")
        try:
            epochs = run_suite(kctl, kafka, producer, port)
        finally:
            producer.stop()
        acked = {f"r-{n}" for n in producer.acked}
        read = consume(kafka_installation, bootstrap)
        missing = acked - set(read)
        assert not missing, f"{len(missing)} acknowledged records not read back, e.g. {sorted(missing)[:5]}"
        assert checksum(acked & set(read)) == checksum(acked)
        assert len(read) == len(set(read)), "an idempotent producer's record read twice"
        print(f"{len(acked)} records acknowledged and read back ({len(read)} read, {len(producer.failed)} failed), "
              f"checksum {checksum(acked):#010x}; controller epochs {epochs}")


def preferred_led(kctl: ProcessCluster) -> bool:
    found = settled(kctl, TOPIC, BROKERS)
    assignment = kctl.assignment(TOPIC)
    return found is not None and all(s.leader_and_isr.leader == assignment[p].replicas[0] for p, s in found.items())


def run_suite(kctl: ProcessCluster, kafka: KafkaCluster, producer: Producer, port: int) -> list[int]:
    """The operations, in order; the controller epochs seen at each change of controller."""
    admin = AdminClient(kctl.admin)
    epochs = [kctl.controller_epoch()]

    # Topic creation, led by kctl; the producer's ids from kctl's AllocateProducerIds answer.
    admin.create_topic(TOPIC, PARTITIONS, 2)
    led = kctl.wait_until(lambda: settled(kctl, TOPIC, BROKERS, epochs[0]), TIMEOUT, "kctl to lead every partition")
    producer.progressed(kctl, "topic creation")
    block, _ = kctl.admin.get_producer_id_block()
    assert block is not None and block.broker in BROKERS and block.block_end - block.block_start == 999

    # kill -9 of a leader broker, then its restart.
    victim = led[0].leader_and_isr.leader
    kafka.kill(victim)
    kctl.wait_until(lambda: settled(kctl, TOPIC, BROKERS - {victim}), TIMEOUT, f"kctl to lead without broker {victim}")
    producer.progressed(kctl, f"kill -9 of broker {victim}")
    kafka.restart(victim)
    kctl.wait_until(lambda: settled(kctl, TOPIC, BROKERS), TIMEOUT, f"broker {victim} back in the ISRs")
    producer.progressed(kctl, f"the restart of broker {victim}")

    # SIGTERM: a controlled shutdown answered by kctl's listener, then the broker back.
    leaving = settled(kctl, TOPIC, BROKERS)[1].leader_and_isr.leader  # type: ignore[index]
    kafka.stop_broker(leaving)
    kctl.wait_until(lambda: settled(kctl, TOPIC, BROKERS - {leaving}), TIMEOUT, f"kctl to lead without broker {leaving}")
    producer.progressed(kctl, f"the controlled shutdown of broker {leaving}")
    kafka.restart(leaving)
    kctl.wait_until(lambda: settled(kctl, TOPIC, BROKERS), TIMEOUT, f"broker {leaving} back in the ISRs")

    # A reassignment of partition 0 onto the broker that held none of its replicas.
    tp0 = TopicPartition(TOPIC, 0)
    replicas = kctl.assignment(TOPIC)[0].replicas
    newcomer = min(BROKERS - set(replicas))
    target = (newcomer, replicas[0])
    admin.execute_reassignment({tp0: target})
    kctl.wait_until(lambda: kctl.assignment(TOPIC)[0].replicas == target and not admin.list_reassignments()
                    and settled(kctl, TOPIC, BROKERS), TIMEOUT, f"partition 0 reassigned to {target}")
    producer.progressed(kctl, "the reassignment")

    # A preferred election: every partition led by its first replica.
    admin.elect_leaders("preferred")
    kctl.wait_until(lambda: preferred_led(kctl), TIMEOUT, "the preferred leaders")
    producer.progressed(kctl, "the preferred election")

    # A topic deletion, beside the producer's topic.
    admin.create_topic("doomed", 3, 2)
    kctl.wait_until(lambda: settled(kctl, "doomed", BROKERS), TIMEOUT, "kctl to lead the doomed topic")
    admin.delete_topic("doomed", timeout=TIMEOUT)
    assert "doomed" not in kctl.admin.get_all_topics()
    kctl.wait_until(lambda: not any(any(Path(b.config["log.dirs"]).glob("doomed-*")) for b in kafka.brokers.values()),
                    TIMEOUT, "the brokers to delete the doomed topic's logs")
    producer.progressed(kctl, "the topic deletion")

    # Failover to Kafka's controller: kctl killed.
    kctl.controllers[CONTROLLER].kill()
    successor = kctl.wait_until(lambda: (kctl.active_controller() or 0) in BROKERS and kctl.active_controller(),
                                TIMEOUT, "a Kafka broker to take the controller over")
    epochs.append(kctl.controller_epoch())
    producer.progressed(kctl, f"the failover to Kafka's controller {successor}")

    # And back: kctl stands by; /controller deleted until kctl wins the election.
    start_controller(kctl, port)
    kctl.wait_until(lambda: f"Broker {successor} has been elected as the controller" in kctl.controllers[CONTROLLER].log(),
                    60, "kctl to stand by")
    for _ in range(20):
        before = kctl.controller_epoch()
        kctl.admin.client.multi([[Op("delete", paths.CONTROLLER)]], MATCH_ANY_VERSION)  # as zookeeper-shell would
        kctl.wait_until(lambda before=before: kctl.controller_epoch() > before and kctl.active_controller() is not None,
                        TIMEOUT, "a new controller")
        epochs.append(kctl.controller_epoch())
        if kctl.active_controller() == CONTROLLER:
            break
    assert kctl.active_controller() == CONTROLLER, "kctl never won /controller back"
    kctl.wait_until(lambda: CONTROLLER in kctl.admin.get_all_brokers(), 60, "kctl's controller entry")
    producer.progressed(kctl, "kctl's controller taking over again")

    # Afterwards: every partition led, ISRs full, the epoch never went backwards.
    final = kctl.wait_until(lambda: settled(kctl, TOPIC, BROKERS), TIMEOUT, "every partition led with a full ISR")
    assert all(s.controller_epoch <= epochs[-1] for s in final.values())
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs), epochs
    return epochs
