"""Producer-id blocks (AllocateProducerIds): the sequence of blocks in the store, the conditional
write read again after another writer, and the controller answering only a live broker at its
current epoch, as Kafka's ``processAllocateProducerIds`` and ``ZkProducerIdManager`` do."""

from __future__ import annotations

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.errors import BrokerIdNotRegisteredError, StaleBrokerEpochError, StoreError
from kctl.model import INT64_MAX
from kctl.producer_ids import PRODUCER_ID_BLOCK_SIZE, ProducerIdsExhaustedError, allocate_producer_id_block, next_block
from kctl.stores import paths
from kctl.stores.base import ProducerIdBlock
from kctl.stores.memory import MemoryStore
from kctl.stores.memtree import MemoryTree
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.zookeeper import ZooKeeperEnsemble, zookeeper_chroot, zookeeper_server
from tests.support.controller import active

__all__ = ["zookeeper_chroot", "zookeeper_server"]


def test_blocks_follow_each_other_from_zero() -> None:
    store = MemoryStore()
    assert store.get_producer_id_block() == (None, 0)  # the empty znode every broker creates at start-up
    blocks = [allocate_producer_id_block(store, broker) for broker in (1, 2, 1)]
    assert blocks == [ProducerIdBlock(1, 0, 999), ProducerIdBlock(2, 1000, 1999), ProducerIdBlock(1, 2000, 2999)]
    assert store.get_producer_id_block()[0] == blocks[-1]
    assert next_block(None, 7) == ProducerIdBlock(7, 0, PRODUCER_ID_BLOCK_SIZE - 1)


def test_a_writer_in_between_is_read_again() -> None:
    tree = MemoryTree()
    store, other = MemoryStore(tree), MemoryStore(tree)
    allocate_producer_id_block(store, 1)
    _, version = store.get_producer_id_block()
    assert other.set_producer_id_block(ProducerIdBlock(3, 1000, 1999), version)
    assert not store.set_producer_id_block(ProducerIdBlock(1, 1000, 1999), version)  # stale version refused
    assert allocate_producer_id_block(store, 1) == ProducerIdBlock(1, 2000, 2999)


def test_a_store_that_keeps_changing_is_an_error() -> None:
    class Racing(MemoryStore):
        def set_producer_id_block(self, block: ProducerIdBlock, expected_version: int | None) -> bool:
            return False

    with pytest.raises(StoreError, match="/latest_producer_id_block kept changing"):
        allocate_producer_id_block(Racing(), 1)


def test_exhausted_ids_are_an_error_and_nothing_is_written() -> None:
    store = MemoryStore()
    last = ProducerIdBlock(1, INT64_MAX - 1500, INT64_MAX - 501)
    assert store.set_producer_id_block(last, store.get_producer_id_block()[1])
    with pytest.raises(ProducerIdsExhaustedError, match="exhausted all producerIds"):
        allocate_producer_id_block(store, 2)
    assert store.get_producer_id_block()[0] == last


def test_on_zookeeper_the_empty_znode_brokers_create_starts_at_zero(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str
) -> None:
    store = ZooKeeperStore(zookeeper_server.hosts + zookeeper_chroot)
    try:
        store.client.ensure_paths([paths.LATEST_PRODUCER_ID_BLOCK])  # as a Kafka broker's start-up leaves it
        block, version = store.get_producer_id_block()
        assert block is None and version == 0
        assert [allocate_producer_id_block(store, b) for b in (2, 3)] == [ProducerIdBlock(2, 0, 999),
                                                                          ProducerIdBlock(3, 1000, 1999)]
        found = store.client.get_data([paths.LATEST_PRODUCER_ID_BLOCK])[0]
        assert isinstance(found, tuple) and found[0] == b'{"version":1,"broker":3,"block_start":"1000","block_end":"1999"}'
    finally:
        store.close()


def test_the_controller_answers_only_a_live_broker_at_its_epoch() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.run_until_stable()
        controller = active(cluster)
        epoch = controller.inspect(lambda c: c.context.live_broker_epoch(2))
        assert epoch is not None
        assert cluster.wait(controller.allocate_producer_ids(2, epoch)) == ProducerIdBlock(2, 0, 999)
        with pytest.raises(StaleBrokerEpochError, match="epoch"):
            cluster.wait(controller.allocate_producer_ids(2, epoch - 1))
        with pytest.raises(BrokerIdNotRegisteredError, match="Broker id 9 is not registered"):
            cluster.wait(controller.allocate_producer_ids(9, epoch))
        assert cluster.wait(controller.allocate_producer_ids(3, controller.inspect(
            lambda c: c.context.live_broker_epoch(3)))) == ProducerIdBlock(3, 1000, 1999)
        assert cluster.store.get_producer_id_block()[0] == ProducerIdBlock(3, 1000, 1999)
