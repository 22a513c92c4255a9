"""``cluster_status`` on an embedded cluster (issue 12, item 7): the controller and its epoch, the live
brokers with epochs and racks, the offline and under-replicated counts as brokers fail, reassignments
in progress (requested and started) and topics queued for deletion. The same function reads a real
ZooKeeper in ``tests/process/test_cluster_status_processes.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.model import CONTROLLER_ONLY_FEATURE, BrokerInfo, EndPoint, TopicPartition
from kctl.tools import AdminClient, ClusterStatus, cluster_status
from kctl.tools.status import SCHEMA_VERSION, BrokerStatus, ReassignmentInProgress, format_status

pytestmark = pytest.mark.usefixtures("engine")  # every test here runs on each engine

DOCS = Path(__file__).parents[2] / "docs"

ORDERS = {0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]}
"""Two partitions on broker 4 (orders-2, orders-3)."""


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(4, racks=["a", "b", "a", "b"], config={"auto.leader.rebalance.enable": False}) as c:
        c.create_topic("orders", assignment=ORDERS)
        c.create_topic("solo", assignment={0: [4]})
        yield c


def broker_epochs(cluster: EmbeddedCluster) -> dict[int, int]:
    return {b: epoch for b, (_, epoch) in cluster.store.get_all_brokers().items()}


def test_a_healthy_cluster(cluster: EmbeddedCluster) -> None:
    status = cluster.status()
    active = cluster.active_controller
    assert active is not None
    assert status == ClusterStatus(
        active_controller=active.broker_id, controller_epoch=active.epoch,
        brokers=tuple(BrokerStatus(b, broker_epochs(cluster)[b], rack) for b, rack in ((1, "a"), (2, "b"), (3, "a"), (4, "b"))),
        topics=2, partitions=5, offline_partitions=0, under_replicated_partitions=0, reassignments=(),
        topics_queued_for_deletion=(),
    )
    assert AdminClient.for_cluster(cluster).cluster_status() == status == cluster_status(cluster.store)


def test_a_broker_failure_shows_in_the_offline_and_under_replicated_counts(cluster: EmbeddedCluster) -> None:
    cluster.kill_broker(4)
    cluster.run_until_stable()
    status = cluster.status()
    assert [b.id for b in status.brokers] == [1, 2, 3]
    assert status.offline_partitions == 1  # solo-0: its only replica is down
    assert status.under_replicated_partitions == 2  # orders-2 and orders-3 lost broker 4 from their ISR
    assert status.offline_partitions == cluster.metrics()["OfflinePartitionsCount"]

    cluster.kill_broker(1)  # also the active controller's broker: a failover
    cluster.run_until_stable()
    status = cluster.status()
    assert status.active_controller in (2, 3) and status.controller_epoch == 2
    assert [b.id for b in status.brokers] == [2, 3]
    assert status.offline_partitions == 2  # solo-0, and orders-3 (replicas 4 and 1)
    assert status.under_replicated_partitions == 3  # orders-0, orders-2, orders-3 (ISR [1] kept, as Kafka's)

    cluster.start_broker(1)
    cluster.start_broker(4)
    cluster.run_until_stable()
    status = cluster.status()
    assert (status.offline_partitions, status.under_replicated_partitions) == (0, 0)
    assert [b.id for b in status.brokers] == [1, 2, 3, 4]
    assert status.brokers[0].epoch == broker_epochs(cluster)[1]  # the new registration's epoch


def test_reassignments_requested_then_started(cluster: EmbeddedCluster) -> None:
    t0 = TopicPartition("orders", 0)
    cluster.store.create_partition_reassignments({t0: [2, 3]})  # as `kctl reassign --execute` does
    (requested,) = cluster.status().reassignments  # nothing has run: the controller has not seen it
    assert requested == ReassignmentInProgress(t0, (1, 2), (), (), (2, 3), started=False)

    cluster.run_until(lambda: any(r.started for r in cluster.status().reassignments), what="the reassignment to start")
    cluster.kill_broker(3)  # the replica being added is down: the reassignment cannot complete
    cluster.run_until_stable()
    status = cluster.status()
    assert status.reassignments == (ReassignmentInProgress(t0, (2, 3, 1), (3,), (1,), (2, 3), started=True),)
    assert "  orders-0   2,3,1     3       1         2,3     started" in format_status(status)

    cluster.start_broker(3)
    cluster.run_until_stable()
    assert cluster.status().reassignments == ()


def test_a_topic_queued_for_deletion_with_a_broker_down(cluster: EmbeddedCluster) -> None:
    cluster.kill_broker(4)
    cluster.run_until_stable()
    assert cluster.status().offline_partitions == 1
    cluster.delete_topic("solo")  # its only replica is down: the deletion waits for broker 4
    status = cluster.status()
    assert status.topics_queued_for_deletion == ("solo",) and status.topics == 2
    assert status.offline_partitions == 0  # a topic going away is left out, as OfflinePartitionsCount does
    assert status.offline_partitions == cluster.metrics()["OfflinePartitionsCount"]
    assert format_status(status)[-2:] == ["Topics queued for deletion: 1", "  solo"]

    cluster.start_broker(4)
    cluster.run_until_stable()
    status = cluster.status()
    assert (status.topics_queued_for_deletion, status.topics, status.partitions) == ((), 1, 4)


def test_the_table(cluster: EmbeddedCluster) -> None:
    cluster.kill_broker(4)
    cluster.run_until_stable()
    status = cluster.status()
    epochs = broker_epochs(cluster)
    assert format_status(status) == [
        f"Active controller: {status.active_controller} (controller epoch {status.controller_epoch})",
        "Live brokers: 3",
        "  ID  EPOCH  RACK",
        *(f"  {b}   {epochs[b]:<5}  {rack}" for b, rack in ((1, "a"), (2, "b"), (3, "a"))),
        "Topics: 2 (5 partitions)",
        "Offline partitions: 1",
        "Under-replicated partitions: 2",
        "Reassignments in progress: 0",
        "Topics queued for deletion: 0",
    ]


def register_controller_entry(cluster: EmbeddedCluster) -> int:
    """Register what kctl's controller registers among real Kafka brokers (transports/kafka.py)."""
    entry = BrokerInfo(100, (EndPoint("127.0.0.1", 9099, "CONTROLLER"),), features=((CONTROLLER_ONLY_FEATURE, (1, 1)),))
    return cluster.store.register_broker(entry)


def test_a_controller_only_entry_is_listed_apart_from_the_brokers(cluster: EmbeddedCluster) -> None:
    epoch = register_controller_entry(cluster)
    cluster.kill_broker(4)
    cluster.run_until_stable()
    status = cluster.status()
    assert [b.id for b in status.brokers] == [1, 2, 3]
    assert status.controller_entries == (BrokerStatus(100, epoch, None),)
    assert status.offline_partitions == 1  # solo-0: entry 100 is no broker to lead it
    lines = format_status(status)
    assert lines[1:3] == ["Controller-only entries: 100", "Live brokers: 3"]
    assert status.to_json()["controller_entries"] == [{"id": 100, "epoch": epoch}]


def test_the_json_schema_is_the_documented_one(cluster: EmbeddedCluster) -> None:
    """docs/operations.md shows a document with every field; this status has every list non-empty."""
    cluster.kill_broker(4)
    cluster.run_until_stable()
    cluster.delete_topic("solo")
    cluster.store.create_partition_reassignments({TopicPartition("orders", 1): [1, 2]})
    register_controller_entry(cluster)
    document = json.loads(json.dumps(cluster.status().to_json()))
    text = (DOCS / "operations.md").read_text()
    start = text.index("<!-- kctl cluster status --json -->")
    documented = json.loads(text[text.index("```json\n", start) + 8:text.index("```", text.index("```json\n", start) + 8)])
    assert document["version"] == documented["version"] == SCHEMA_VERSION

    def shape(value: object) -> object:
        """Keys and types, recursively (None and int alike for the nullable ids)."""
        if isinstance(value, dict):
            return {k: shape(v) for k, v in value.items()}
        if isinstance(value, list):
            return [shape(value[0])] if value else []
        return "null-or-int" if value is None or type(value) is int else type(value).__name__

    assert shape(document) == shape(documented)
    assert list(document) == list(documented)  # the order too
