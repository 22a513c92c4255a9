"""``kctl cluster status`` against real ``kctl controller`` and ``kctl broker`` processes on a real
ZooKeeper (issue 12, item 7): the table and the JSON, as brokers fail and the controller moves."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from kctl import admin
from kctl.model import BrokerInfo, EndPoint, TopicPartition
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.tools import cluster_status

from tests.support.process_harness import KCTL, ProcessCluster


def kctl_status(cluster: ProcessCluster, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KCTL, "cluster", "status", "--zk", cluster.zk, *options], capture_output=True, text=True,
                          timeout=120, check=False)


def status_json(cluster: ProcessCluster) -> dict[str, Any]:
    run = kctl_status(cluster, "--json")
    assert run.returncode == 0, run.stderr
    document: dict[str, Any] = json.loads(run.stdout)
    return document


def counts(document: dict[str, Any]) -> tuple[int, int]:
    return document["offline_partitions"], document["under_replicated_partitions"]


def test_cluster_status_on_zookeeper(cluster: ProcessCluster) -> None:
    run = kctl_status(cluster)  # an empty ensemble: no controller yet, nothing registered
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[:2] == ["Active controller: none (controller epoch 0)", "Live brokers: 0"]

    controllers = [cluster.start_controller(c) for c in (1, 2)]
    cluster.wait_until(lambda: cluster.active_controller() is not None, 60, "a controller to be active")
    for broker, rack in ((1, "a"), (2, "b"), (3, "a")):
        cluster.start_broker(broker, extra=["--rack", rack])
    racks = {b: info.rack for b, (info, _) in cluster.admin.get_all_brokers().items()}
    admin.create_topic(cluster.admin, "orders", broker_racks=racks, assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
    admin.create_topic(cluster.admin, "solo", broker_racks=racks, assignment={0: [3]})
    cluster.wait_until(lambda: counts(status_json(cluster)) == (0, 0), 60, "every partition led with a full ISR")

    document = status_json(cluster)
    epochs = {b: epoch for b, (_, epoch) in cluster.admin.get_all_brokers().items()}
    assert document == {
        "version": 1, "active_controller": cluster.active_controller(), "controller_epoch": cluster.controller_epoch(),
        "brokers": [{"id": b, "epoch": epochs[b], "rack": rack} for b, rack in ((1, "a"), (2, "b"), (3, "a"))],
        "topics": 2, "partitions": 4, "offline_partitions": 0, "under_replicated_partitions": 0,
        "reassignments": [], "topics_queued_for_deletion": [], "controller_entries": [],
    }

    cluster.brokers[3].kill()  # solo-0 goes offline; orders-1 and orders-2 lose broker 3 from their ISR
    cluster.wait_until(lambda: counts(status_json(cluster)) == (1, 2), 60, "broker 3's failure to show")
    table = kctl_status(cluster).stdout.splitlines()
    assert "Live brokers: 2" in table and "Offline partitions: 1" in table and "Under-replicated partitions: 2" in table

    active = cluster.active_controller()
    assert active is not None
    old_epoch = cluster.controller_epoch()
    controllers[active - 1].kill()  # the other candidate takes over with a larger epoch
    cluster.wait_until(lambda: (d := status_json(cluster))["active_controller"] not in (None, active)
                       and d["controller_epoch"] > old_epoch, 60, "the failover to show")

    admin.delete_topic(cluster.admin, "solo")  # its only replica is down: it stays queued
    cluster.wait_until(lambda: status_json(cluster)["topics_queued_for_deletion"] == ["solo"], 60, "the deletion")
    assert counts(status_json(cluster)) == (0, 2)  # solo-0 is going away: no longer counted

    # A registered broker that never fetches: a reassignment adding it stays in progress.
    silent = ZooKeeperStore(cluster.zk)
    try:
        silent.register_broker(BrokerInfo(4, (EndPoint("127.0.0.1", 1),), "b"))
        cluster.admin.create_partition_reassignments({TopicPartition("orders", 0): [2, 4]})
        cluster.wait_until(lambda: (d := status_json(cluster))["reassignments"] and d["reassignments"][0]["started"],
                           60, "the reassignment to start")
        document = status_json(cluster)
        assert document["reassignments"] == [{
            "topic": "orders", "partition": 0, "replicas": [2, 4, 1], "adding_replicas": [4],
            "removing_replicas": [1], "target_replicas": [2, 4], "started": True,
        }]
        assert [b["id"] for b in document["brokers"]] == [1, 2, 4] and document["brokers"][2]["rack"] == "b"
        table = kctl_status(cluster).stdout.splitlines()
        assert "Reassignments in progress: 1" in table and table[-2:] == ["Topics queued for deletion: 1", "  solo"]
        assert cluster_status(cluster.admin).to_json() == document  # the Python API reads the same
    finally:
        silent.close()


@pytest.mark.parametrize("command", [["cluster", "status"], ["topics", "list"]])
def test_an_unreachable_ensemble_is_one_error_line(command: list[str]) -> None:
    run = subprocess.run([KCTL, *command, "--zk", "127.0.0.1:1", "--zk-timeout", "1"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 1 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1, run.stderr  # kazoo's reconnection warnings are not shown
    assert run.stderr.startswith("kctl: error: ZooKeeper is unreachable: ")
