"""A broker failure on real Kafka brokers: led again under kctl's controller vs under Kafka's own.

One sitting, one ZooKeeper server, two clusters of three Apache Kafka 3.9.1 brokers each
(``kctl.testing.kafka``, the JVM options Kafka ships with), each in a chroot of its own: one with
kctl's controller in charge (``kctl controller --transport kafka``, an inter-broker listener as
docs/kafka-brokers.md sets up), one with Kafka's own controller (one of its brokers). The brokers
are the same real Kafka on both sides; only the controller differs.

Each cluster gets a topic of ``KCTL_BENCH_KAFKA_BROKER_PARTITIONS`` partitions (default 10K), RF 2,
each broker the preferred leader of a third (:func:`bench_vs_kafka.assignment`). RF 2 rather than
3: every partition the killed broker led then has exactly one live replica to go to, so both
controllers must make the same choice, and each broker keeps two thirds of the logs open rather
than all of them (Kafka holds several files open per log; about 20K partitions is what three
brokers fit here at RF 2). Broker :data:`VICTIM`, which is not Kafka's controller (the election is
run again until it is not), is killed with SIGKILL; its ``zookeeper.session.timeout.ms`` is
:data:`VICTIM_SESSION_MS`, the other brokers' 18 s as Kafka ships.

The measure, ``failure``: from the victim's ZooKeeper session expiring (the ZooKeeper server's
``Expiring session 0x…`` line, its session being the ephemeral owner of ``/brokers/ids/N``) to the
last partition it led being led by another broker (that broker's ``Leader <topic>-<p> with topic id
… starts at leader epoch`` line in its ``state-change.log``, logged as it applies the LeaderAndIsr
request). The expiry is what both sides share: the same server expires both sessions and deletes
both registrations in the same way, whereas the controllers notice the deletion each in their own
time, which is part of what is measured. Two parts of it are kept beside it: ``detection``, from
the expiry to the controller's ``deleted brokers: N`` line, and ``request``, to the last of those
partitions' ``starting the become-leader transition`` lines (the broker starting to apply the
controller's request: what comes after is the broker's work, the same on both sides). One host, one clock: the ZooKeeper server stamps
its lines as log4j stamps Kafka's.

Each round, for each side in turn (Kafka first in even rounds): the kill and the measure, the
victim started again, back in its ISRs, and a preferred election giving it back its third; then
both clusters quiet (:func:`bench_vs_kafka.settle`) before the next. ``KCTL_BENCH_KAFKA_BROKER_ROUNDS``
rounds (default 5); the medians and Kafka's over kctl's go to ``extra_info`` (``broker-failure``
``broker-failure detection`` and ``broker-failure request``, in ``benches/table.py``'s table of the side-by-side measures). Marked
``kafka_bench``: ``scripts/kafka-diff --bench-broker-failure`` runs it, nothing else does.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from statistics import median
from typing import Any

import pytest

from bench_vs_kafka import (
    BROKERS,
    CONFIG,
    KAFKA_CONFIG,
    TOPIC,
    LogTail,
    Side,
    assignment,
    elect_preferred,
    logs_created,
    read_states,
    settle,
    wait_for,
)
from kctl import admin
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.kafka import INTER_BROKER_LISTENER, SHIPPED_JVM_OPTIONS, KafkaCluster, KafkaInstallation, kafka_installation
from kctl.testing.ports import LOOPBACK, free_ports, release_ports
from kctl.testing.zookeeper import ZooKeeperEnsemble, require_zookeeper
from tests.support.kctl_kafka import CONTROLLER, IBP
from tests.support.process_harness import ProcessCluster

__all__ = ["kafka_installation"]

pytestmark = pytest.mark.kafka_bench

PARTITIONS = int(os.environ.get("KCTL_BENCH_KAFKA_BROKER_PARTITIONS", "10000"))
ROUNDS = int(os.environ.get("KCTL_BENCH_KAFKA_BROKER_ROUNDS", "5"))
VICTIM = 2
"""The broker killed each round, on both sides."""
VICTIM_SESSION_MS = 6000
"""The victim's ZooKeeper session: short, so that a round does not wait 18 s for its expiry."""
BROKER_CONFIG = {**KAFKA_CONFIG, **IBP}
"""Both clusters' brokers: as the side-by-side benchmark's Kafka brokers (no leader or ISR moves
but those measured, Kafka's 18 s sessions, 5 minutes for a controller's answer) and Kafka 3.9's
inter-broker protocol, which kctl's controller is told too."""
KCTL_CONTROLLER_CONFIG = {**CONFIG, **IBP, "zookeeper.session.timeout.ms": KAFKA_CONFIG["zookeeper.session.timeout.ms"],
                          "request.timeout.ms": KAFKA_CONFIG["controller.socket.timeout.ms"]}
"""kctl's controller as Kafka's controller broker: the same session and the same wait for a
broker's answer (Kafka's ``controller.socket.timeout.ms``, kctl's ``request.timeout.ms``)."""
EXPIRED = r"Expiring session 0x{session:x},"
LED = rf"Leader {TOPIC}-(\d+) with topic id .* starts at leader epoch"
DETECTED = r"deleted brokers: (?:\d+,)*{broker}\b"
REQUESTED = rf"starting the become-leader transition for partition {TOPIC}-(\d+) "
MEASURES = {"failure": "broker-failure", "detection": "broker-failure detection", "request": "broker-failure request"}
"""The measures, as :meth:`Cluster.fail` returns them, and their names in the results."""


class Cluster:
    """One of the two Kafka clusters, as the benchmark sees it (what :func:`bench_vs_kafka.settle`
    and :func:`bench_vs_kafka.elect_preferred` ask of a side)."""

    def __init__(self, name: str, kafka: KafkaCluster, zk: Any, store: ZooKeeperStore, controller_logs: list[Path],
                 controller_pids: Callable[[], list[int]]) -> None:
        self.name = name
        self.kafka = kafka
        self.zk = zk
        self.store = store
        self.chroot = kafka.chroot
        self.partitions = PARTITIONS
        self.timeout = 180.0 + PARTITIONS / 50
        self.controller_logs = controller_logs
        self._controller_pids = controller_pids

    wait_states = Side.wait_states

    def states(self) -> dict[int, Any]:
        return read_states(self.zk, self.chroot, self.partitions)

    def logs_created(self) -> bool:
        return logs_created(self.zk, self.kafka, self.partitions)

    def pids(self) -> list[int]:
        return [b.pid for b in self.kafka.brokers.values() if b.pid is not None] + self._controller_pids()

    def kafka_controller(self) -> int | None:
        return self.store.get_controller_id()

    def create_topic(self) -> None:
        """The topic, written as Kafka's CreateTopics writes it; returns once every partition is led
        by its first replica with a full ISR."""
        replicas = assignment(self.partitions)
        admin.create_topic(self.store, TOPIC, broker_racks=dict.fromkeys(BROKERS), assignment=replicas,
                           topic_id=admin.generate_topic_id(random.Random()))
        self.wait_states("every partition led by its first replica with a full ISR",
                         lambda s: all(st.leader == replicas[p][0] and st.isr == set(replicas[p]) for p, st in s.items()))

    def fail(self, broker: int, zookeeper_log: Path) -> dict[str, float]:
        """kill -9 of ``broker`` → each of :data:`MEASURES` in seconds from its session's expiry:
        the last of its partitions led by another broker, the controller's ``deleted brokers`` line,
        the last of those partitions' LeaderAndIsr requests reaching a broker."""
        led = {str(p) for p, st in self.states().items() if st.leader == broker}
        assert led, f"{self.name}: broker {broker} leads no partition"
        _, stat = self.zk.get(f"{self.chroot}/brokers/ids/{broker}")
        expiry = LogTail([zookeeper_log])
        leaders = LogTail([b.logs_dir / "state-change.log" for i, b in self.kafka.brokers.items() if i != broker])
        controller = LogTail(self.controller_logs)
        self.kafka.kill(broker)
        pattern = EXPIRED.format(session=stat.ephemeralOwner)
        expired = float(wait_for(f"{self.name}: ZooKeeper to log {pattern!r}", self.timeout,
                                 lambda: expiry.first(pattern)))
        found: dict[str, float] = {}
        wait_for(f"{self.name}: the {len(led)} partitions broker {broker} led to be led by another", self.timeout,
                 lambda: led <= leaders.firsts(LED, found).keys())
        detected = controller.first(DETECTED.format(broker=broker))
        assert detected is not None, f"{self.name}: the controller never logged broker {broker}'s deletion"
        requested = leaders.firsts(REQUESTED, {})
        assert led <= requested.keys(), f"{self.name}: partitions led without a become-leader line"
        return {"failure": max(found[p] for p in led) - expired, "detection": detected - expired,
                "request": max(requested[p] for p in led) - expired}

    def recover(self, broker: int) -> None:
        """``broker`` started again, back in its ISRs, and given its leaderships back."""
        self.kafka.restart(broker, self.timeout)  # its logs recovered first: a kill -9 leaves them unflushed
        replicas = assignment(self.partitions)
        self.wait_states(f"broker {broker} to rejoin its ISRs",
                         lambda s: all(broker in s[p].isr for p, r in replicas.items() if broker in r))
        elect_preferred(self)


@contextmanager
def clusters(zookeeper: ZooKeeperEnsemble, installation: KafkaInstallation, directory: Path) -> Iterator[dict[str, Cluster]]:
    """The two clusters, up: ``kctl`` with kctl's controller elected before its brokers start,
    ``kafka`` with a controller that is not :data:`VICTIM`."""
    import kazoo.client  # type: ignore[import-untyped]

    options: dict[str, Any] = dict(installation=installation, overrides=BROKER_CONFIG, inter_broker_listener=True,
                                   jvm_options=SHIPPED_JVM_OPTIONS,
                                   broker_overrides={VICTIM: {"zookeeper.session.timeout.ms": VICTIM_SESSION_MS}})
    chroot = f"/kctl-{uuid.uuid4().hex}"
    port = free_ports(1)[0]
    with ExitStack() as stack:
        stack.callback(release_ports, [port])
        zk = kazoo.client.KazooClient(hosts=zookeeper.hosts, timeout=10.0)
        zk.start(timeout=30.0)
        stack.callback(zk.close)
        stack.callback(zk.stop)
        (directory / "kctl").mkdir()
        procs = stack.enter_context(ProcessCluster(zookeeper.hosts + chroot, directory / "kctl",
                                                   KCTL_CONTROLLER_CONFIG, transport="kafka"))
        logs = directory / "kctl-controller"
        controller = procs.start_controller(CONTROLLER, [
            "--kafka-listener", f"{INTER_BROKER_LISTENER}://{LOOPBACK}:{port}", "--log-level", "INFO",
            "--log-dir", str(logs), "--state-change-log-level", "TRACE"])  # TRACE as the Kafka brokers' loggers
        procs.wait_until(lambda: procs.active_controller() == CONTROLLER, 60, "kctl's controller to be elected")
        kctl_led = stack.enter_context(KafkaCluster(zookeeper.hosts, chroot=chroot, **options))
        kafka_led = stack.enter_context(KafkaCluster(zookeeper.hosts, **options))
        kafka_store = ZooKeeperStore(kafka_led.zk, session_timeout=10.0, connection_timeout=30.0)
        stack.callback(kafka_store.close)
        sides = {
            "kafka": Cluster("kafka", kafka_led, zk, kafka_store, [b.logs_dir / "controller.log" for b in
                                                                   kafka_led.brokers.values()], list),
            "kctl": Cluster("kctl", kctl_led, zk, procs.admin, [logs / "controller.log"],
                            lambda: [controller.pid] if controller.running() else []),
        }
        move_controller_off(sides["kafka"], VICTIM)
        yield sides


def move_controller_off(side: Cluster, broker: int, attempts: int = 20) -> None:
    """Delete ``/controller`` until a broker other than ``broker`` wins it."""
    for _ in range(attempts):
        if wait_for(f"{side.name}: a controller", side.timeout, side.kafka_controller) != broker:
            return
        epoch = side.store.get_controller_epoch()
        side.zk.delete(f"{side.chroot}/controller")
        wait_for(f"{side.name}: a controller elected after broker {broker}", side.timeout,
                 lambda epoch=epoch: side.kafka_controller() is not None and side.store.get_controller_epoch() != epoch)
    raise AssertionError(f"{side.name}: broker {broker} won /controller {attempts} times")


def sitting(sides: Mapping[str, Cluster], zookeeper_log: Path, progress: Path) -> dict[str, dict[str, list[float]]]:
    """The topic on both sides, then :data:`ROUNDS` failures of :data:`VICTIM` on each, taking turns;
    seconds per measure and side, with the load average after each (also written to ``progress``)."""
    times: dict[str, dict[str, list[float]]] = {name: {m: [] for m in [*MEASURES, "load"]} for name in sides}
    settle(sides)  # a Cluster has what settle() asks of a side
    for side in sides.values():
        side.create_topic()
    settle(sides)
    for round_ in range(ROUNDS):
        order = [sides["kafka"], sides["kctl"]]
        for side in order if round_ % 2 == 0 else order[::-1]:
            assert side.kafka_controller() != VICTIM, f"{side.name}: broker {VICTIM} became the controller"
            for measure, seconds in side.fail(VICTIM, zookeeper_log).items():
                times[side.name][measure].append(seconds)
            times[side.name]["load"].append(os.getloadavg()[0])
            progress.write_text(json.dumps(times, indent=1))
            side.recover(VICTIM)
            settle(sides)
    return times


def test_broker_failure_vs_kafka(benchmark: Any, kafka_installation: KafkaInstallation, tmp_path: Path) -> None:
    """kctl's controller leads a killed broker's partitions again at least as fast as Kafka's."""
    times: dict[str, dict[str, list[float]]] = {}

    def once() -> None:
        with ZooKeeperEnsemble(1, installation=require_zookeeper(), log_sessions=True) as zookeeper, \
                clusters(zookeeper, kafka_installation, tmp_path) as sides:
            times.update(sitting(sides, zookeeper.servers[0].log_path, tmp_path / "times.json"))

    benchmark.group = "kafka:broker-failure"
    benchmark.pedantic(once, rounds=1, iterations=1)
    medians = {}
    for measure, name in MEASURES.items():
        kafka, kctl = median(times["kafka"][measure]), median(times["kctl"][measure])
        medians[name] = {"kafka": kafka, "kctl": kctl, "kafka_over_kctl": kafka / kctl}
    benchmark.extra_info.update(vs_kafka=True, partitions=PARTITIONS, brokers=len(BROKERS), rf=2, rounds=ROUNDS,
                                victim=VICTIM, victim_session_ms=VICTIM_SESSION_MS, times=times, medians=medians)
    assert medians["broker-failure"]["kafka_over_kctl"] >= 1, \
        f"kctl's controller led the failed broker's partitions again slower than Kafka's: {medians}"
