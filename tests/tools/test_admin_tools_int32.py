"""The admin tools on a real ZooKeeper server with ids outside Kafka's ``Int`` (issue 11): a rogue
registration such as ``/brokers/ids/99999999999`` or ``/brokers/ids/²`` is skipped (``kctl topics
create`` once placed replicas on it), and requests naming such ids are refused before anything is
written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.cli import main
from kctl.model import BrokerInfo, EndPoint, ReplicaAssignment
from kctl.stores.zkdata import BrokerIdZNode
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.zookeeper import ZooKeeperEnsemble, in_ci

try:
    from kazoo.client import KazooClient
except ImportError:
    if in_ci():
        raise
    pytest.skip("kazoo is not installed: pip install 'kctl[zookeeper]'", allow_module_level=True)

BIG = 99_999_999_999


@pytest.fixture
def zk(zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str) -> str:
    return zookeeper_server.hosts + zookeeper_chroot


@pytest.fixture
def brokers(zk: str) -> Iterator[ZooKeeperStore]:
    """Brokers 1–3 registered, and beside them two rogue registrations written raw, as any
    ZooKeeper client could."""
    store = ZooKeeperStore(zk)
    for b in (1, 2, 3):
        store.register_broker(BrokerInfo(b, (EndPoint("127.0.0.1", 9090 + b),)))
    raw = KazooClient(zk)
    raw.start()
    for name in (str(BIG), "²"):
        raw.create(f"/brokers/ids/{name}", BrokerIdZNode.encode(BrokerInfo(4, (EndPoint("rogue", 9094),))),
                   ephemeral=False)
    yield store
    raw.stop()
    raw.close()
    store.close()


def kctl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_topics_create_places_replicas_on_registered_brokers_only(
    zk: str, brokers: ZooKeeperStore, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    assert kctl(capsys, "topics", "create", "--zk", zk, "--topic", "t", "--partitions", "12",
                "--replication-factor", "3")[:2] == (0, "Created topic t.\n")
    placed = brokers.get_topic_assignments(["t"]).values["t"].partitions
    assert {b for a in placed.values() for b in a.replicas} == {1, 2, 3}
    for name in (str(BIG), "²"):
        assert f"Ignoring undecodable broker registration at /brokers/ids/{name}: " in caplog.text
    status, _, err = kctl(capsys, "topics", "create", "--zk", zk, "--topic", "u", "--partitions", "1",
                          "--replication-factor", "4")
    assert status == 1 and "Replication factor: 4 larger than available brokers: 3." in err


def test_requests_naming_ids_outside_kafkas_int_are_refused_before_writing(
    zk: str, brokers: ZooKeeperStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    brokers.create_topic("orders", {0: ReplicaAssignment((1, 2))})
    status, _, err = kctl(capsys, "topics", "create", "--zk", zk, "--topic", "big", "--replica-assignment", f"1:{BIG}")
    assert status == 1
    assert err == f"kctl: error: Broker id for partition id 0 must be an integer from 0 to 2147483647, got {BIG}.\n"
    assert "big" not in brokers.get_all_topics()

    for entry, field in (({"topic": "orders", "partition": 0, "replicas": [1, BIG]}, "replicas"),
                         ({"topic": "orders", "partition": BIG, "replicas": [1]}, "partition")):
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [entry]}))
        status, _, err = kctl(capsys, "reassign", "--zk", zk, "--execute", str(plan))
        assert status == 1 and f"{plan}: partitions[0].{field}: expected " in err and str(BIG) in err
    status, _, err = kctl(capsys, "elect-leaders", "--zk", zk, "--election-type", "preferred",
                          "--path-to-json-file", str(plan))
    assert status == 1 and f"{plan}: partitions[0].partition: expected a partition id (an integer from 0 to " in err
    assert brokers.get_partition_reassignments() is None
    assert brokers.get_preferred_replica_election() is None
