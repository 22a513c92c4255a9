"""The order in which a transition visits brokers, compared on Kafka 3.9 and kctl: clusters of
their own with brokers 3, 4 and 5 (marker ``kafka_full``).

Kafka's replica state machine groups a transition's replicas by broker in a Scala HashMap and
visits the brokers in its order, which for brokers 1–3 is their id order but for 3, 4 and 5 is 5,
3, 4. When one partition's replicas go offline together (here a topic deletion) every visit
rewrites the partition's state and the last one leaves the ISR: kctl visits them in Kafka's order
(``kctl.reference.replica_state_machine.kafka_broker_order``), so the states agree.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest

from kctl.model import TopicPartition
from kctl.reference.replica_state_machine import kafka_broker_order
from kctl.testing.differential import DELETE_TOPICS
from kctl.testing.kafka import KafkaCluster, KafkaInstallation
from kctl.testing.zookeeper import ZooKeeperEnsemble

from tests.support.kafka_harness import SideBySide, others, without

pytestmark = pytest.mark.kafka_full

BROKERS = (3, 4, 5)


@pytest.fixture(scope="module")
def kafka_cluster(zookeeper_server: ZooKeeperEnsemble, kafka_installation: KafkaInstallation,
                  kafka_overrides: Mapping[str, str], engine: str) -> Iterator[KafkaCluster]:
    """Three Kafka brokers with ids 3, 4 and 5 (kctl's side takes the same ids), for one engine: each
    engine's run creates the same topic beside brokers of its own."""
    with KafkaCluster(zookeeper_server.hosts, len(BROKERS), installation=kafka_installation, first_id=BROKERS[0],
                      overrides=kafka_overrides) as cluster:
        yield cluster


def test_a_deleted_topics_replicas_leave_its_isr_in_kafkas_broker_order(sides: SideBySide) -> None:
    assert kafka_broker_order(BROKERS) == [5, 3, 4]
    down = next(broker for broker in others(sides) if broker != 5)
    low = min(set(BROKERS) - {down, 5})  # visited after 5 by Kafka, before it in id order
    tp = TopicPartition("ordered", 0)
    sides.create_and_compare("ordered", {0: [low, 5], 1: [down, low]})
    sides.kill(down)
    sides.compare(without(down), f"kill -9 of broker {down}")

    # the replica on broker {down} cannot be deleted: the deletion waits with the states it wrote
    sides.delete_topic("ordered")
    kafka = sides.compare(lambda s: f"{DELETE_TOPICS}/ordered" in s.admin and s.partitions[tp].leader == -1,
                          f"deleting 'ordered' while broker {down} is down")
    # broker 5 left the ISR first, then the leader: the leader stays in it (in id order, 5 would)
    assert kafka.partitions[tp].isr == {low} and kafka.partitions[tp].leader_epoch == 2
