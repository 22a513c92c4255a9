"""A real Kafka 3.9 cluster's incident, imported from its logs and replayed by kctl.

Three Kafka brokers play a broker crash (kill -9), a controlled shutdown (SIGTERM) and a
reassignment, each with a restart or a settle between; their ``controller.log`` and
``state-change.log`` files are imported with ``kctl fleet import-logs``'s Spark job; the scenario
it writes is replayed on a simulated cluster with kctl's default leader selector (Kafka's). The
replay's leader changes, read from its store's partition history, must be the very ones Kafka's
controller logged: each partition's new leaders and leader epochs, in order. The original
sequence is read from the state-change log by this test's own pattern, not the importer's.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path
from typing import Any

from kctl import admin
from kctl.bench.importer import Source, read_logs, write
from kctl.model import TopicPartition
from kctl.sim import load_scenario, run_scenario
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.differential import ADMIN_ZNODES, Snapshot, settled
from kctl.testing.kafka import KafkaCluster, KafkaInstallation
from kctl.testing.spark import spark_local
from kctl.testing.zookeeper import ZooKeeperEnsemble

from tests.support.kafka_harness import ASSIGNMENT, RACKS, SETTLE_TIMEOUT, rejoined, without

__all__ = ["spark_local"]

TOPIC = "incident"
REASSIGNED = {0: [3, 2], 1: [1, 3]}
"""Partition 0 loses its leader's replica (a reassignment election), partition 1 keeps its leader."""
_CHANGE = re.compile(r"\[Controller id=\d+ epoch=(\d+)\] (?:Changed partition (\S+) from \w+ to OnlinePartition with "
                     r"state LeaderAndIsr\(leader=(-?\d+), leaderEpoch=(\d+)|Partition (\S+) state changed to "
                     r"\(Leader:(-?\d+),.*?LeaderEpoch:(\d+))")


def logged_leader_changes(logs: Path) -> list[tuple[str, int, int]]:
    """(partition, leader, epoch) each time a controller's state-change log shows a partition with a
    new leader, in controller epoch then file order."""
    found = []
    for path in sorted(logs.glob("*/state-change.log")):
        for number, line in enumerate(path.read_text().splitlines()):
            m = _CHANGE.search(line)
            if m:
                tp, leader, epoch = (m[2], m[3], m[4]) if m[2] else (m[5], m[6], m[7])
                found.append((int(m[1]), line[:25], number, tp, int(leader), int(epoch)))
    changes, last = [], {}
    for _, _, _, tp, leader, epoch in sorted(found):
        if tp in last and (epoch <= last[tp][1]):
            continue
        if tp not in last or last[tp][0] != leader:
            changes.append((tp, leader, epoch))
        last[tp] = (leader, epoch)
    return changes


def replayed_leader_changes(cluster: Any, partitions: int) -> list[tuple[str, int, int]]:
    """The same from a replay: every stored version of each partition whose leader differs from the one before."""
    changes = []
    for p in range(partitions):
        before = None
        for state in cluster.partition_history(TopicPartition(TOPIC, p)):
            if state.leader_epoch >= 0 and state.leader != before:
                changes.append((f"{TOPIC}-{p}", state.leader, state.leader_epoch))
            before = state.leader if state.leader_epoch >= 0 else before
    return changes


def play_incident(kafka: KafkaCluster, zk: Any, logs: Path) -> None:
    """Create the topic, crash a broker and restart it, shut another down and restart it, reassign;
    each step settled in ZooKeeper before the next. Copies every broker's logs to ``logs``."""
    store = ZooKeeperStore(kafka.zk, session_timeout=10.0, connection_timeout=30.0)
    try:
        def settle(condition: Any, what: str) -> Snapshot:
            return settled(zk, kafka.chroot, condition, SETTLE_TIMEOUT, f"Kafka: {what}")

        controller = store.get_controller_id()
        crashed, stopped = sorted(b for b in kafka.brokers if b != controller)
        racks = {broker: info.rack for broker, (info, _) in store.get_all_brokers().items()}
        admin.create_topic(store, TOPIC, broker_racks=racks, assignment=ASSIGNMENT,
                           topic_id=admin.generate_topic_id(random.Random(7)))
        settle(lambda s: sorted(s.leaders(TOPIC)) == sorted(ASSIGNMENT) and -1 not in s.leaders(TOPIC).values(),
               "created")
        kafka.kill(crashed)
        settle(without(crashed), f"kill -9 of broker {crashed}")
        kafka.restart(crashed)
        settle(rejoined(crashed), f"restart of broker {crashed}")
        kafka.stop_broker(stopped)
        settle(without(stopped), f"controlled shutdown of broker {stopped}")
        kafka.restart(stopped)
        settle(rejoined(stopped), f"restart of broker {stopped}")
        admin.request_reassignment(store, {TopicPartition(TOPIC, p): r for p, r in REASSIGNED.items()})
        settle(lambda s: ADMIN_ZNODES[0] not in s.admin and all(
            s.leaders(TOPIC)[p] in r and set(s.partitions[TopicPartition(TOPIC, p)].isr) == set(r)
            for p, r in REASSIGNED.items()), "the reassignment")
    finally:
        store.close()
    for broker_id, broker in kafka.brokers.items():
        shutil.copytree(broker.logs_dir, logs / f"broker-{broker_id}")


def test_a_real_incident_imported_and_replayed_makes_the_same_leader_changes(
    zookeeper_server: ZooKeeperEnsemble, kafka_installation: KafkaInstallation, spark_local: Any, tmp_path: Path,
) -> None:
    import kazoo.client  # type: ignore[import-untyped]

    logs = tmp_path / "logs"
    zk = kazoo.client.KazooClient(hosts=zookeeper_server.hosts, timeout=10.0)
    zk.start(timeout=30.0)
    try:
        with KafkaCluster(zookeeper_server.hosts, 3, installation=kafka_installation, racks=RACKS) as kafka:
            play_incident(kafka, zk, logs)
    finally:
        zk.stop()
        zk.close()

    imported = read_logs(spark_local, [Source.parse(f"real={logs}")])
    assert imported.invalid == {}
    write(spark_local, imported, str(tmp_path / "out"))
    scenario = load_scenario(tmp_path / "out" / "real.toml")

    # the topology and the timeline, as the logs tell them
    assert scenario.cluster.brokers == (1, 2, 3) and scenario.cluster.racks == RACKS
    assert [(t.name, t.assignment) for t in scenario.topics] == [(TOPIC, {p: tuple(r) for p, r in ASSIGNMENT.items()})]
    assert [s.action for s in scenario.steps] == ["kill_broker", "start_broker", "shutdown_broker", "start_broker",
                                                  "reassign"]
    assert scenario.steps[-1].args["partitions"] == {TopicPartition(TOPIC, p): tuple(r) for p, r in REASSIGNED.items()}
    lines = imported.lines["real"]
    assert all(not any(k.startswith("malformed") or k in ("not UTF-8", "oversized") for k in counts)
               for counts in lines.values()), lines

    # the replay under the default (Kafka's) selector: the same leader changes, epoch for epoch
    original = logged_leader_changes(logs)
    assert len(original) > len(ASSIGNMENT)  # the faults moved leaders
    assert imported.incidents["real"].leaders == original
    box: dict[str, Any] = {}
    report = run_scenario(scenario, on_start=lambda cluster: box.setdefault("cluster", cluster))
    assert all(step.error is None for step in report.steps), report.steps
    replayed = replayed_leader_changes(box["cluster"], len(ASSIGNMENT))
    assert sorted(replayed, key=lambda c: (c[0], c[2])) == sorted(original, key=lambda c: (c[0], c[2]))
