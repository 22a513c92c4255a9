"""Producer-id blocks: what the controller hands a broker that asks (AllocateProducerIds) so
that its idempotent and transactional producers get ids no other broker gives out.

As Kafka's ``ZkProducerIdManager.getNewProducerIdBlock``: read ``/latest_producer_id_block`` with
its version, take the next :data:`PRODUCER_ID_BLOCK_SIZE` ids after it (from 0 when there is none
yet) and write the new block only if the znode is still at the version read; another writer in
between (a broker of an older protocol allocating for itself) means reading again.
"""

from __future__ import annotations

import logging

from kctl.errors import KctlError, StoreError
from kctl.model import INT64_MAX
from kctl.stores import paths
from kctl.stores.base import ProducerIdBlock, StateStore

logger = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
"""Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``."""
WRITE_ATTEMPTS = 10
"""Conditional writes tried before giving up (Kafka loops until one succeeds)."""


class ProducerIdsExhaustedError(KctlError):
    """The last block ends so near the largest ``long`` that no whole block is left."""


def next_block(current: ProducerIdBlock | None, broker_id: int) -> ProducerIdBlock:
    """The block after ``current`` (the first block, from 0, when there is none), for ``broker_id``."""
    if current is None:
        return ProducerIdBlock(broker_id, 0, PRODUCER_ID_BLOCK_SIZE - 1)
    if current.block_end > INT64_MAX - PRODUCER_ID_BLOCK_SIZE:
        raise ProducerIdsExhaustedError(
            f"Have exhausted all producerIds: the last block ends at {current.block_end}")
    start = current.block_end + 1
    return ProducerIdBlock(broker_id, start, start + PRODUCER_ID_BLOCK_SIZE - 1)


def allocate_producer_id_block(store: StateStore, broker_id: int) -> ProducerIdBlock:
    """A new block for ``broker_id``, written to the store before it is returned."""
    for _ in range(WRITE_ATTEMPTS):
        current, version = store.get_producer_id_block()
        block = next_block(current, broker_id)
        if store.set_producer_id_block(block, version):
            logger.info("Acquired new producerId block %s by writing to the store after version %s", block, version)
            return block
    path = paths.LATEST_PRODUCER_ID_BLOCK
    raise StoreError(f"{path} kept changing under {WRITE_ATTEMPTS} attempts to write it", path)


__all__ = ["PRODUCER_ID_BLOCK_SIZE", "ProducerIdsExhaustedError", "allocate_producer_id_block", "next_block"]
