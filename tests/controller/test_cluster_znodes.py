"""The cluster-wide znodes of Kafka 3.9: ``/feature``, set up by the controller at every failover
(reference §6.3), and ``/cluster/id``, read or created by every broker at start-up."""

from __future__ import annotations

import logging
import re

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.errors import CorruptDataError
from kctl.stores import paths
from kctl.stores.base import FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED, FinalizedFeatures

ENABLED, DISABLED = FEATURE_STATUS_ENABLED, FEATURE_STATUS_DISABLED


def raw(cluster: EmbeddedCluster, path: str) -> object:
    """What the memory tree holds at ``path``."""
    with cluster.store.tree.transaction() as txn:
        found = txn.get(path)
    assert found is not None, f"{path} does not exist"
    return found[0]


@pytest.mark.parametrize(("ibp", "expected"), [
    ("2.6", FinalizedFeatures(1, DISABLED, {})),  # before feature versioning
    ("3.0", FinalizedFeatures(1, ENABLED, {})),   # kctl's default
    ("3.9-IV0", FinalizedFeatures(2, ENABLED, {})),  # Kafka 3.9.1's default: format version 2 from 3.3-IV0
])
def test_the_controller_sets_up_feature_versioning_by_protocol_version(ibp: str, expected: FinalizedFeatures) -> None:
    with EmbeddedCluster(1, config={"inter.broker.protocol.version": ibp}) as cluster:
        assert cluster.run_until_stable()
        assert cluster.store.get_finalized_features() == expected


def test_a_failover_keeps_enabled_features_in_its_format_and_leaves_an_unreadable_feature_znode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with EmbeddedCluster(3, controllers=[1, 2, 3], config={"inter.broker.protocol.version": "3.9-IV0"}) as cluster:
        assert cluster.run_until_stable()
        cluster.store.set_finalized_features(FinalizedFeatures(1, ENABLED, {"f": 3}))
        cluster.kill_controller()
        assert cluster.run_until_stable()
        assert cluster.store.get_finalized_features() == FinalizedFeatures(2, ENABLED, {"f": 3})

        cluster.store.tree.set_raw(paths.FEATURE, b"\x00garbage")
        with caplog.at_level(logging.ERROR):
            cluster.kill_controller()
            assert cluster.run_until_stable() and cluster.active_controller is not None
        assert raw(cluster, paths.FEATURE) == b"\x00garbage"  # nothing stored is lost
        assert any("/feature" in record.getMessage() for record in caplog.records if record.levelno == logging.ERROR)


def test_the_first_broker_creates_the_cluster_id_and_the_others_read_it() -> None:
    with EmbeddedCluster(3) as cluster:
        ids = {broker.cluster_id for broker in cluster.brokers.values()}
        assert len(ids) == 1
        (cluster_id,) = ids
        assert cluster_id is not None and re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)  # a base64 UUID, as Kafka's
        assert cluster.store.get_or_create_cluster_id() == cluster_id


def test_a_broker_does_not_start_on_an_unreadable_cluster_id() -> None:
    with EmbeddedCluster(2) as cluster:
        cluster.kill_broker(2)
        cluster.store.tree.set_raw(paths.CLUSTER_ID, b"\x00garbage")
        with pytest.raises(CorruptDataError, match="/cluster/id"):
            cluster.start_broker(2)
        assert raw(cluster, paths.CLUSTER_ID) == b"\x00garbage"
