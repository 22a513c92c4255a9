"""Kafka's metrics in Prometheus' format (:mod:`kctl.metrics`): the JMX exporter's names, a registry
per controller, broker or cluster, and the HTTP server."""

from __future__ import annotations

import threading
import urllib.request

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kctl.cluster import EmbeddedCluster
from kctl.controller.events import ControllerState
from kctl.metrics import QUANTILE_LABELS, MBean, MetricsServer, node_registry
from kctl.model import TopicPartition
from kctl.net import NetworkError
from kctl.testing.ports import LOOPBACK, free_ports

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(registry: prometheus_client.CollectorRegistry) -> Samples:
    """The registry as a scraper sees it: rendered, then parsed back with prometheus_client's parser."""
    text = prometheus_client.generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def by_node(found: Samples, name: str) -> dict[str, float]:
    return {dict(labels)["node_id"]: value for (n, labels), value in found.items() if n == name and len(labels) == 1}


def test_the_jmx_exporters_names() -> None:
    """Lowercased ``kafka_<domain>_<type>_<name>``; a meter loses ``PerSec`` (its counter adds ``_total``)."""
    assert MBean("controller", "KafkaController", "ActiveControllerCount").prometheus_name == \
        "kafka_controller_kafkacontroller_activecontrollercount"
    assert MBean("controller", "ControllerStats", "UncleanLeaderElectionsPerSec").prometheus_name == \
        "kafka_controller_controllerstats_uncleanleaderelections"
    assert MBean("server", "ReplicaManager", "IsrShrinksPerSec").object_name == \
        "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec"


def test_controller_states_carry_kafkas_numbers_and_timer_names() -> None:
    """Kafka 3.9's ControllerState values and ``rateAndTimeMetricName`` (UpdateFeatures, 17, has no kctl event)."""
    kafka = {
        "Idle": (0, None), "ControllerChange": (1, "ControllerChangeRateAndTimeMs"),
        "BrokerChange": (2, "LeaderElectionRateAndTimeMs"), "TopicChange": (3, "TopicChangeRateAndTimeMs"),
        "TopicDeletion": (4, "TopicDeletionRateAndTimeMs"),
        "AlterPartitionReassignment": (5, "PartitionReassignmentRateAndTimeMs"),
        "AutoLeaderBalance": (6, "AutoLeaderBalanceRateAndTimeMs"),
        "ManualLeaderBalance": (7, "ManualLeaderBalanceRateAndTimeMs"),
        "ControlledShutdown": (8, "ControlledShutdownRateAndTimeMs"), "IsrChange": (9, "IsrChangeRateAndTimeMs"),
        "LeaderAndIsrResponseReceived": (10, "LeaderAndIsrResponseReceivedRateAndTimeMs"),
        "LogDirChange": (11, "LogDirChangeRateAndTimeMs"), "ControllerShutdown": (12, "ControllerShutdownRateAndTimeMs"),
        "UncleanLeaderElectionEnable": (13, "UncleanLeaderElectionEnableRateAndTimeMs"),
        "TopicUncleanLeaderElectionEnable": (14, "TopicUncleanLeaderElectionEnableRateAndTimeMs"),
        "ListPartitionReassignment": (15, "ListPartitionReassignmentRateAndTimeMs"),
        "UpdateMetadataResponseReceived": (16, None),
    }
    ours = {s.value: (s.kafka_value, s.rate_and_time_metric) for s in ControllerState}
    assert {k: v for k, v in ours.items() if k in kafka} == kafka
    assert ours["TopicAdmin"] == (18, "TopicAdminRateAndTimeMs") and ours["ConfigChange"] == (19, "ConfigChangeRateAndTimeMs")


@pytest.mark.usefixtures("engine")
def test_an_embedded_cluster_exposes_every_node_under_kafkas_names() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("orders", assignment={0: [1, 2], 1: [2, 3]})
        cluster.create_topic("solo", assignment={0: [3]})
        cluster.kill_broker(3)
        cluster.run_until_stable()
        found = samples(cluster.metrics_registry())
        active = str(cluster.active_controller.broker_id)  # type: ignore[union-attr]

    assert by_node(found, "kafka_controller_kafkacontroller_activecontrollercount") == {
        node: float(node == active) for node in ("1", "2")
    }  # candidate 3 died with its broker
    assert by_node(found, "kafka_controller_kafkacontroller_offlinepartitionscount")[active] == 1
    assert by_node(found, "kafka_controller_kafkacontroller_globalpartitioncount")[active] == 3
    assert by_node(found, "kafka_controller_controllerstats_leaderelectionrateandtimems_count")[active] == 1
    assert by_node(found, "kafka_controller_controllereventmanager_eventqueuesize") == {"1": 0, "2": 0}
    quantiles = sorted(dict(labels)["quantile"] for (name, labels), _ in found.items()
                       if name == "kafka_controller_controllereventmanager_eventqueuetimems" and ("node_id", active) in labels)
    assert quantiles == sorted(QUANTILE_LABELS)
    assert by_node(found, "kafka_server_kafkaserver_brokerstate") == {"1": 3, "2": 3}  # broker 3 is not running
    assert by_node(found, "kafka_server_replicamanager_leadercount") == {"1": 1, "2": 1}
    assert by_node(found, "kafka_server_replicamanager_underreplicatedpartitions") == {"1": 0, "2": 1}


@pytest.mark.usefixtures("engine")
def test_unclean_elections_and_isr_changes_are_counted() -> None:
    tp = TopicPartition("orders", 0)
    with EmbeddedCluster(3, config={"replica.lag.time.max.ms": 2000}) as cluster:
        cluster.create_topic("orders", assignment={0: [1, 2]})
        cluster.run_until_stable()
        cluster.kill_broker(2)
        cluster.run_until_stable()
        cluster.kill_broker(1)  # the last in-sync replica
        cluster.start_broker(2)
        cluster.run_until_stable()
        cluster.elect_leaders([tp], "unclean")
        cluster.start_broker(1)  # catches up with 2 and joins its ISR: an expansion by broker 2
        cluster.run_until_stable()
        cluster.brokers[1].replica_manager.pause_fetching()  # type: ignore[attr-defined]
        cluster.brokers[2].replica_manager.produce(tp, 10)  # type: ignore[attr-defined]
        cluster.advance(10)  # broker 1 falls behind for longer than replica.lag.time.max.ms: a shrink
        found = samples(cluster.metrics_registry())
        active = str(cluster.active_controller.broker_id)  # type: ignore[union-attr]

    assert by_node(found, "kafka_controller_controllerstats_uncleanleaderelections_total")[active] == 1
    assert by_node(found, "kafka_server_replicamanager_isrexpands_total")["2"] == 1
    assert by_node(found, "kafka_server_replicamanager_isrshrinks_total")["2"] == 1


@pytest.mark.usefixtures("engine")
def test_each_cluster_has_its_own_registry_and_the_default_one_is_untouched() -> None:
    with EmbeddedCluster(2, controllers=1) as one, EmbeddedCluster(2, controllers=1) as two:
        one.create_topic("a", 1, 1)
        two.create_topic("b", 1, 1)
        two.create_topic("c", 1, 1)
        first, second = samples(one.metrics_registry()), samples(two.metrics_registry())
    topics = "kafka_controller_kafkacontroller_globaltopiccount"
    assert (by_node(first, topics), by_node(second, topics)) == ({"1": 1}, {"1": 2})
    assert not [m for m in prometheus_client.REGISTRY.collect() if m.name.startswith("kafka_")]


@pytest.mark.usefixtures("engine")
def test_the_metrics_server_serves_a_registry_over_http() -> None:
    with EmbeddedCluster(1, controllers=1) as cluster:
        server = MetricsServer(node_registry(cluster.controllers[1]), f"{LOOPBACK}:{free_ports(1)[0]}")
        try:
            host, port = server.address
            with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30) as response:
                text = response.read().decode()
            with pytest.raises(NetworkError, match=rf"cannot serve metrics on 127\.0\.0\.1:{port}: "):
                MetricsServer(node_registry(cluster.controllers[1]), f"127.0.0.1:{port}")
        finally:
            server.close()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["kafka_controller_kafkacontroller_activecontrollercount"].samples[0].value == 1
    assert families["kafka_controller_kafkacontroller_activecontrollercount"].samples[0].labels == {}


@pytest.mark.usefixtures("engine")
def test_a_real_time_cluster_is_scraped_while_it_works() -> None:
    """Scrapes from another thread read each controller between two of its events."""
    with EmbeddedCluster(3, simulated=False) as cluster:
        scraped: list[Samples] = []
        stop = threading.Event()

        def scrape() -> None:
            while not stop.is_set():
                scraped.append(samples(cluster.metrics_registry()))

        scraper = threading.Thread(target=scrape)
        scraper.start()
        try:
            cluster.create_topic("orders", partitions=20, replication_factor=3)
            cluster.kill_broker(3)
            cluster.run_until_stable(timeout=60)
        finally:
            stop.set()
            scraper.join(60)
        final = samples(cluster.metrics_registry())
    assert scraped and all(sum(by_node(s, "kafka_controller_kafkacontroller_activecontrollercount").values()) <= 1
                           for s in scraped)
    assert sum(by_node(final, "kafka_controller_kafkacontroller_globalpartitioncount").values()) == 20
