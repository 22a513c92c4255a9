"""The comparison the differential tests rest on (kctl.testing.differential), on a real ZooKeeper.

Two chroots are written by hand, as two controllers would leave them; what must count as the same
(the ISR's order, the controller epoch) and what must not (a leader epoch, a znode version, a znode
on one side only) is pinned here, so a differential test cannot pass by comparing too little.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kctl.model import TopicPartition
from kctl.testing.differential import differences, settled, snapshot
from kctl.testing.zookeeper import ZooKeeperEnsemble

TOPIC = {"version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "partitions": {"0": [1, 2], "1": [2, 1]},
         "adding_replicas": {}, "removing_replicas": {}}


@pytest.fixture
def zk(zookeeper_server: ZooKeeperEnsemble) -> Iterator[Any]:
    import kazoo.client  # type: ignore[import-untyped]

    client = kazoo.client.KazooClient(hosts=zookeeper_server.hosts, timeout=10.0)
    client.start(timeout=30.0)
    yield client
    client.stop()
    client.close()


def write(zk: Any, chroot: str, controller_epoch: int, isr: list[int]) -> None:
    """Topic ``t`` with two partitions, as a controller writes it."""
    zk.create(f"{chroot}/brokers/topics/t", json.dumps(TOPIC).encode(), makepath=True)
    for partition, leader in ((0, 1), (1, 2)):
        state = {"controller_epoch": controller_epoch, "leader": leader, "version": 1, "leader_epoch": 0, "isr": isr}
        zk.create(f"{chroot}/brokers/topics/t/partitions/{partition}/state", json.dumps(state).encode(), makepath=True)


def test_the_controller_epoch_and_the_isr_order_do_not_count_everything_else_does(zk: Any) -> None:
    kafka, kctl = f"/kafka-{uuid.uuid4().hex}", f"/kctl-{uuid.uuid4().hex}"
    write(zk, kafka, controller_epoch=1, isr=[1, 2])
    write(zk, kctl, controller_epoch=7, isr=[2, 1])
    expected = snapshot(zk, kafka)
    assert expected.leaders("t") == {0: 1, 1: 2} and expected.partitions[TopicPartition("t", 0)].isr == {1, 2}
    assert differences(expected, snapshot(zk, kctl)) == []

    state = f"{kctl}/brokers/topics/t/partitions/1/state"
    data = json.loads(zk.get(state)[0])
    zk.set(state, json.dumps({**data, "leader_epoch": 1}).encode())
    zk.set(f"{kctl}/brokers/topics/t", json.dumps(TOPIC).encode())  # same data, a new version
    zk.create(f"{kctl}/admin/delete_topics/t", makepath=True)
    zk.create(f"{kafka}/brokers/topics/t/partitions/2/state",
              json.dumps({"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}).encode(),
              makepath=True)
    found = differences(snapshot(zk, kafka), snapshot(zk, kctl))
    assert [line.split(":")[0] for line in found] == [
        "topic /brokers/topics/t", "admin znode /admin/delete_topics/t", "partition t-1", "partition t-2"]
    assert "zk_version=0" in found[2] and "leader_epoch=0" in found[2] and "leader_epoch=1" in found[2]
    assert "only on kctl" in found[1] and "only on Kafka" in found[3]


def test_settling_waits_for_the_condition_and_names_it_at_the_deadline(zk: Any) -> None:
    chroot = f"/kafka-{uuid.uuid4().hex}"
    write(zk, chroot, controller_epoch=1, isr=[1, 2])
    found = settled(zk, chroot, lambda s: s.leaders("t") == {0: 1, 1: 2}, timeout=30, what="leaders", quiet=0.2)
    assert found == snapshot(zk, chroot)
    with pytest.raises(AssertionError, match=r"(?s)waiting for broker 3 to lead in /kafka-.*t-0: leader=1"):
        settled(zk, chroot, lambda s: 3 in s.leaders("t").values(), timeout=1, what="broker 3 to lead", quiet=0.2)
