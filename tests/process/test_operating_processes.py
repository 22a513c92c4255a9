"""Operating ``kctl controller`` and ``kctl broker`` as one operates Kafka: their metrics scraped over
HTTP under the JMX exporter's names, Kafka's log files, and a start-up line that says what the
controller runs with.

One cluster serves the whole module: controller 1 (metrics, ``--log-dir``, TRACE state changes),
brokers 1 and 2 (broker 1 with metrics); topic ``orders`` (4 partitions on both brokers) and topic
``solo`` (one partition on broker 2 only). Broker 2 is then killed, so ``solo-0`` goes offline and
``orders`` is left under-replicated.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kctl import admin
from kctl.metrics import QUANTILE_LABELS
from kctl.testing.ports import LOOPBACK, free_ports
from kctl.testing.zookeeper import ZooKeeperEnsemble

from prometheus_client.parser import text_string_to_metric_families

from tests.support.engines import module_engine  # noqa: F401  (``engine`` per module: one cluster for all the tests)
from tests.support.process_harness import KctlProcess, ProcessCluster

SERVING = re.compile(r"Serving metrics at (http://127\.0\.0\.1:\d+/metrics)")
LOG4J_LINE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (.*) \(([^ ()]+)\)")


@dataclass
class Running:
    cluster: ProcessCluster
    controller: KctlProcess
    broker: KctlProcess
    log_dir: Path

    def url(self, process: KctlProcess) -> str:
        found = self.cluster.wait_until(lambda: SERVING.search(process.log()), 30, f"{process.name} to serve metrics",
                                        watch=process)
        return found.group(1)


def curl(url: str) -> str:
    """What ``curl`` gets from ``url`` (the operator's tool; scripts/test installs it)."""
    assert shutil.which("curl"), "no curl on PATH (scripts/test installs it: apt-get install -y curl)"
    return subprocess.run(["curl", "--silent", "--show-error", "--fail", "--max-time", "30", url],
                          capture_output=True, text=True, check=True).stdout


def scrape(url: str) -> dict[str, float]:
    """Every sample of the endpoint, parsed with prometheus_client's parser: name{labels} → value."""
    samples = {}
    for family in text_string_to_metric_families(curl(url)):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


@pytest.fixture(scope="module")
def running(zookeeper_server: ZooKeeperEnsemble, tmp_path_factory: pytest.TempPathFactory, engine: str) -> Iterator[Running]:
    """A controller (on ``engine``) and a broker for the whole module, which runs once per engine."""
    directory = tmp_path_factory.mktemp("operating")
    log_dir = directory / "controller-1-logs"
    chroot = f"/kctl-tests-{uuid.uuid4().hex}"
    with ProcessCluster(zookeeper_server.hosts + chroot, directory) as cluster:
        controller = cluster.start_controller(1, extra=[
            "--metrics-listen", f"{LOOPBACK}:{free_ports(1)[0]}", "--log-dir", str(log_dir),
            "--state-change-log-level", "TRACE",
            "--log-max-file-size", "10MB", "--log-max-backup-index", "3",
        ])
        cluster.wait_until(lambda: cluster.active_controller() == 1, 60, "controller 1 to be active", watch=controller)
        broker = cluster.start_broker(1, extra=["--metrics-listen", f"{LOOPBACK}:{free_ports(1)[0]}"])
        doomed = cluster.start_broker(2)
        racks = {b: info.rack for b, (info, _) in cluster.admin.get_all_brokers().items()}
        admin.create_topic(cluster.admin, "orders", broker_racks=racks, assignment={p: [1, 2] for p in range(4)})
        admin.create_topic(cluster.admin, "solo", broker_racks=racks, assignment={0: [2]})
        cluster.wait_until(lambda: len(cluster.leaders("orders")) == 4 and len(cluster.leaders("solo")) == 1, 60,
                           "the partitions to get leaders")
        doomed.kill()
        cluster.wait_until(lambda: cluster.leaders("solo") == {0: -1}, 60, "solo-0 to go offline")
        yield Running(cluster, controller, broker, log_dir)


def test_curl_of_the_controller_metrics_parses_and_has_kafkas_names(running: Running) -> None:
    url = running.url(running.controller)
    running.cluster.wait_until(
        lambda: scrape(url).get("kafka_controller_kafkacontroller_offlinepartitionscount") == 1, 60,
        "the controller to count solo-0 offline",
    )
    samples = scrape(url)
    assert samples["kafka_controller_kafkacontroller_activecontrollercount"] == 1
    assert samples["kafka_controller_kafkacontroller_globaltopiccount"] == 2
    assert samples["kafka_controller_kafkacontroller_globalpartitioncount"] == 5
    assert samples["kafka_controller_kafkacontroller_activebrokercount"] == 1
    assert samples["kafka_controller_controllerstats_uncleanleaderelections_total"] == 0
    # Broker 2's failure was a BrokerChange event: Kafka's LeaderElectionRateAndTimeMs timer.
    assert samples["kafka_controller_controllerstats_leaderelectionrateandtimems_count"] >= 1
    assert samples["kafka_controller_controllerstats_controllerchangerateandtimems_count"] >= 1
    assert samples["kafka_controller_controllereventmanager_eventqueuetimems_count"] >= 3
    assert "kafka_controller_controllereventmanager_eventqueuesize" in samples
    quantiles = [k for k in samples if k.startswith("kafka_controller_controllerstats_leaderelectionrateandtimems{")]
    assert quantiles == [f'kafka_controller_controllerstats_leaderelectionrateandtimems{{quantile="{q}"}}'
                         for q in QUANTILE_LABELS]


def test_curl_of_the_broker_metrics_shows_its_replicas(running: Running) -> None:
    url = running.url(running.broker)
    running.cluster.wait_until(
        lambda: scrape(url).get("kafka_server_replicamanager_leadercount") == 4, 60, "broker 1 to lead all of orders"
    )
    samples = scrape(url)
    assert samples["kafka_server_kafkaserver_brokerstate"] == 3  # RUNNING
    assert samples["kafka_server_replicamanager_partitioncount"] == 4
    assert samples["kafka_server_replicamanager_underreplicatedpartitions"] == 4  # broker 2 is gone
    assert samples["kafka_server_replicamanager_offlinereplicacount"] == 0


def test_the_controller_says_what_it_runs_with_when_it_starts(running: Running, engine: str) -> None:
    line = running.cluster.wait_until(lambda: re.search(r"Controller 1 started \(.*\)", running.controller.log()), 30,
                                      "the start-up line")
    assert line.group(0).endswith(
        f"; engine {engine}, store zookeeper, transport tcp, leader selectors offline=offline, "
        "reassign=reassign, preferred=preferred, controlled_shutdown=controlled_shutdown)"
    )


def lines(path: Path) -> list[re.Match[str]]:
    text = path.read_text()
    parsed = [LOG4J_LINE.fullmatch(line) for line in text.splitlines()]
    assert all(parsed), [line for line, m in zip(text.splitlines(), parsed) if not m][:5]
    return [m for m in parsed if m is not None]


def test_log_dir_holds_kafkas_controller_and_state_change_logs(running: Running) -> None:
    controller_log = running.log_dir / "controller.log"
    running.cluster.wait_until(lambda: "Broker failure callback for 2" in controller_log.read_text(), 60,
                               "the broker failure in controller.log")
    controller = lines(controller_log)
    assert {m.group(4) for m in controller} <= {
        "kafka.controller.KafkaController", "kafka.controller.ControllerEventManager$ControllerEventThread",
        "kafka.controller.TopicDeletionManager", "kafka.controller.ZkPartitionStateMachine",
        "kafka.controller.ZkReplicaStateMachine", "kafka.controller.ControllerChannelManager",
    }
    messages = [(m.group(2), m.group(3), m.group(4)) for m in controller]
    assert ("INFO", "[Controller id=1] Broker failure callback for 2", "kafka.controller.KafkaController") in messages
    assert any(level == "INFO" and re.fullmatch(r"\[Controller id=1\] 1 successfully elected as the controller\. "
                                                r"Epoch incremented to \d+ and epoch zk version is now \d+", text)
               for level, text, _ in messages)

    state_changes = lines(running.log_dir / "state-change.log")
    assert {m.group(4) for m in state_changes} == {"state.change.logger"}
    texts = [f"{m.group(2)} {re.sub(r'epoch=[0-9]+', 'epoch=E', m.group(3))}" for m in state_changes]
    assert ("INFO [Controller id=1 epoch=E] Changed partition solo-0 from NewPartition to OnlinePartition with "
            "state LeaderAndIsr(leader=2, leaderEpoch=0, isr=List(2), zkVersion=0)") in texts
    assert "TRACE [Controller id=1 epoch=E] Changed partition solo-0 state from OnlinePartition to OfflinePartition" in texts
    assert ("TRACE [Controller id=1 epoch=E] Changed state of replica 2 for partition solo-0 from OnlineReplica to "
            "OfflineReplica") in texts

    # What is neither goes to server.log, and to stderr as before; the controller's lines only to their file.
    server = lines(running.log_dir / "server.log")
    assert any(m.group(4) == "kctl.process" and m.group(3).startswith("Serving metrics at") for m in server)
    stderr = running.controller.log()
    assert "Serving metrics at" in stderr and "successfully elected" not in stderr
