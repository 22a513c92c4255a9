"""kctl.testing.kafka without starting Kafka: where its jars come from, its brokers' settings, and
that CI never passes by skipping the differential tests (those run real brokers: tests/kafka)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kctl.testing import kafka


def test_a_directory_of_jars_replaces_the_fetched_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kafka.LIBS_ENV, str(tmp_path))
    with pytest.raises(kafka.KafkaNotInstalledError, match="holds no kafka_"):
        kafka.KafkaInstallation.find()
    (tmp_path / "kafka_2.13-3.9.1.jar").write_bytes(b"jar")
    assert kafka.KafkaInstallation.find().classpath == f"{tmp_path}/*"


def test_without_kafka_ci_fails_where_a_developer_skips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kafka.LIBS_ENV, str(tmp_path))
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="Kafka cannot run: .*holds no kafka_"):
        kafka.require_kafka()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and Kafka cannot run"):
        kafka.require_kafka()


def test_a_brokers_properties_are_small_and_its_own(tmp_path: Path) -> None:
    config = kafka.properties(2, 40123, "127.0.0.1:2181/kafka-x", tmp_path, brokers=2, rack="r1",
                              overrides={"auto.leader.rebalance.enable": "true"})
    assert config["listeners"] == "PLAINTEXT://127.0.0.1:40123" and config["broker.id"] == "2"
    assert config["zookeeper.connect"] == "127.0.0.1:2181/kafka-x" and config["log.dirs"] == str(tmp_path)
    assert config["offsets.topic.replication.factor"] == "2" and config["broker.rack"] == "r1"
    assert config["auto.leader.rebalance.enable"] == "true" and config["auto.create.topics.enable"] == "false"
    assert "broker.rack" not in kafka.properties(1, 1, "zk", tmp_path, brokers=5)
    assert kafka.properties(1, 1, "zk", tmp_path, brokers=5)["offsets.topic.replication.factor"] == "3"


def test_broker_overrides_apply_to_their_broker_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka.KafkaBroker, "start", lambda self: None)  # the configs, not the processes
    monkeypatch.setattr(kafka.KafkaCluster, "wait_registered", lambda self, brokers, timeout: None)
    cluster = kafka.KafkaCluster("127.0.0.1:2181", 3, installation=kafka.KafkaInstallation("java", "cp"),
                                 overrides={"zookeeper.session.timeout.ms": 18000, "num.io.threads": 4},
                                 broker_overrides={2: {"zookeeper.session.timeout.ms": 6000}})
    try:
        cluster.start()
        sessions = {b: broker.config["zookeeper.session.timeout.ms"] for b, broker in cluster.brokers.items()}
        assert sessions == {1: "18000", 2: "6000", 3: "18000"}
        assert {broker.config["num.io.threads"] for broker in cluster.brokers.values()} == {"4"}
    finally:
        cluster.stop()
