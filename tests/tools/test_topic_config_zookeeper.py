"""``kctl topics create --config`` on a real ZooKeeper server: a config Kafka's LogConfig refuses
is refused before anything is written (issue 11, defect 5); a valid one is stored as given."""

from __future__ import annotations

import pytest

from kctl.cli import main
from kctl.model import BrokerInfo, EndPoint
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.zookeeper import ZooKeeperEnsemble


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("foo.bar=1", "Unknown topic config name: foo.bar"),
        ("retention.ms=abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ("min.insync.replicas=0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ],
)
def test_topics_create_refuses_invalid_configs_before_writing(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str, capsys: pytest.CaptureFixture[str],
    config: str, message: str,
) -> None:
    zk = zookeeper_server.hosts + zookeeper_chroot
    store = ZooKeeperStore(zk)
    try:
        store.register_broker(BrokerInfo(1, (EndPoint("127.0.0.1", 9091),)))
        argv = ["topics", "create", "--zk", zk, "--topic", "t", "--partitions", "1", "--replication-factor", "1"]
        assert main([*argv, "--config", "retention.ms=1000", "--config", config]) == 1
        assert capsys.readouterr().err == f"kctl: error: {message}\n"
        assert store.get_all_topics() == set()
        assert store.get_topic_configs(["t"]).values == {"t": {}}
        assert main([*argv, "--config", "retention.ms=1000", "--config", "cleanup.policy=compact,delete"]) == 0
        assert store.get_topic_configs(["t"]).values == {"t": {"retention.ms": "1000",
                                                                "cleanup.policy": "compact,delete"}}
    finally:
        store.close()
