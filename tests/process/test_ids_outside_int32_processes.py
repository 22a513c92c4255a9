"""Znodes holding ids or epochs outside Kafka's ``Int`` on a real ZooKeeper, under ``kctl
controller`` and ``kctl broker`` processes (issue 11, defect 2; the memory store's twin is
``tests/controller/test_ids_outside_int32.py``).

Each poisoned znode is written raw with kazoo, as any ZooKeeper client could: once, one of them
made ``BrokerChange`` or every later failover fail until the znode was edited by hand. Now each is
skipped with a log line naming it, and the controllers keep serving: a broker failure moves
leaders, a failover succeeds, ``kctl topics create`` places replicas on real brokers only.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from kctl import admin
from kctl.model import BrokerInfo, EndPoint, TopicPartition
from kctl.stores import paths
from kctl.stores.zkdata import BrokerIdZNode
from kctl.testing.zookeeper import in_ci

from tests.support.process_harness import KCTL, ProcessCluster

try:
    from kazoo.client import KazooClient
except ImportError:
    if in_ci():
        raise
    pytest.skip("kazoo is not installed: pip install 'kctl[zookeeper]'", allow_module_level=True)

BIG = 99_999_999_999
T0, T1, U0, U1 = (TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0), TopicPartition("u", 1))


def _json(document: object) -> bytes:
    return json.dumps(document).encode()


POISONS: dict[str, bytes] = {
    f"/brokers/ids/{BIG}": BrokerIdZNode.encode(BrokerInfo(4, (EndPoint("rogue", 9094),))),
    "/brokers/ids/²": BrokerIdZNode.encode(BrokerInfo(4, (EndPoint("rogue", 9094),))),
    paths.topic("rogue-replica"): _json({"version": 3, "partitions": {"0": [1, BIG]}}),
    paths.topic("rogue-partition"): _json({"version": 3, "partitions": {str(BIG): [1, 2]}}),
    paths.partition_state(T0): _json({"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 2**63,
                                      "isr": [1, 2, 3]}),
    paths.partition_state(T1): _json({"controller_epoch": 2**40, "leader": 2, "version": 1, "leader_epoch": 0,
                                      "isr": [2, 3, 1]}),
    paths.REASSIGN_PARTITIONS: _json({"version": 1, "partitions": [{"topic": "u", "partition": 0, "replicas": [2, BIG]}]}),
    paths.PREFERRED_REPLICA_ELECTION: _json({"version": 1, "partitions": [{"topic": "u", "partition": BIG}]}),
    paths.isr_change_notification("isr_change_0000009999"): _json(
        {"version": 1, "partitions": [{"topic": "u", "partition": BIG}]}),
    paths.log_dir_event_notification("log_dir_event_0000009999"): _json({"version": 1, "broker": BIG, "event": 1}),
}


def test_controllers_skip_znodes_outside_kafkas_int_and_keep_serving(cluster: ProcessCluster) -> None:
    first = cluster.start_controller(1)
    cluster.wait_until(lambda: cluster.active_controller() == 1, 30, "controller 1 to be active", watch=first)
    second = cluster.start_controller(2)
    for broker in (1, 2, 3):
        cluster.start_broker(broker)
    racks = {b: info.rack for b, (info, _) in cluster.admin.get_all_brokers().items()}
    admin.create_topic(cluster.admin, "t", broker_racks=racks, assignment={0: [1, 2, 3], 1: [2, 3, 1]})
    admin.create_topic(cluster.admin, "u", broker_racks=racks, assignment={0: [1, 2], 1: [2, 1]})
    cluster.wait_until(lambda: len(cluster.leaders("t")) == 2 and cluster.leaders("u") == {0: 1, 1: 2}, 30,
                       "t and u to be online", watch=first)
    epoch = cluster.controller_epoch()

    raw = KazooClient(cluster.zk)
    raw.start()
    try:
        for path, data in POISONS.items():
            if raw.exists(path):
                raw.set(path, data)
            else:
                raw.create(path, data, makepath=True)
        # The admin requests and notifications are read, then removed, by the active controller.
        handled = [paths.REASSIGN_PARTITIONS, paths.PREFERRED_REPLICA_ELECTION,
                   *(p for p in POISONS if "notification/" in p)]
        cluster.wait_until(lambda: not any(raw.exists(p) for p in handled), 30, "the requests to be handled",
                           watch=first)
    finally:
        raw.stop()
        raw.close()

    # BrokerChange: broker 1 dies, u's leadership moves to broker 2.
    cluster.brokers[1].kill()
    cluster.wait_until(lambda: cluster.leaders("u") == {0: 2, 1: 2}, 30, "u to move to broker 2", watch=first)
    # A failover: controller 2 takes over, loads what it can read and serves.
    first.kill()
    cluster.wait_until(lambda: cluster.active_controller() == 2, 30, "controller 2 to take over", watch=second)
    assert cluster.controller_epoch() == epoch + 1
    cluster.start_broker(1)
    cluster.wait_until(lambda: cluster.state(U0).leader_and_isr.isr == (2, 1), 30,  # type: ignore[union-attr]
                       "broker 1 back in u-0's ISR", watch=second)
    created = subprocess.run([KCTL, "topics", "create", "--zk", cluster.zk, "--topic", "n", "--partitions", "6",
                              "--replication-factor", "3"], capture_output=True, text=True, timeout=60)
    assert (created.returncode, created.stdout) == (0, "Created topic n.\n"), created.stderr
    assert {b for a in cluster.assignment("n").values() for b in a.replicas} == {1, 2, 3}
    cluster.wait_until(lambda: len(cluster.leaders("n")) == 6, 30, "n to be online", watch=second)

    logs = first.log() + second.log()
    for path in POISONS:
        assert path in logs, f"no log line names {path}"
    assert "Traceback" not in logs
