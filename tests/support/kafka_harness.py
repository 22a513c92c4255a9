"""One scenario, played on real Kafka brokers and on kctl's processes, compared after every step.

:class:`SideBySide` holds the two clusters, each in a chroot of one ZooKeeper server: three Kafka
3.9 brokers (:class:`~kctl.testing.kafka.KafkaCluster`, whose controller is one of them) and a
``kctl controller`` with three ``kctl broker`` processes (:class:`~tests.support.process_harness.ProcessCluster`)
with the same broker ids. A step acts on both (the admin writes are the same znodes, written by
kctl's admin code into each chroot); :meth:`SideBySide.compare` then waits until Kafka has settled
in the state the step leads to, waits for kctl to reach the very same znodes, and fails listing
every difference if it does not. A scenario is steps and comparisons, nothing more.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kctl import admin
from kctl.assignment import RackAwareMode, assign_replicas_to_brokers, broker_metadatas
from kctl.model import TopicPartition
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing import maven
from kctl.testing.differential import ADMIN_ZNODES, Snapshot, differences, settled, snapshot
from kctl.testing.kafka import JVM_OPTIONS, KAFKA_TOOLS, KafkaCluster

from tests.support.process_harness import KCTL, ProcessCluster

SETTLE_TIMEOUT = 120.0
"""Seconds for either cluster to settle after a step: a killed Kafka broker is noticed only when
its 6 s ZooKeeper session expires, and a busy two-core machine stretches everything."""
KCTL_CONTROLLER = 100
"""kctl's controller process: a candidate of its own, not one of the brokers."""
KCTL_STANDBY = 101
"""kctl's second controller process, the standby that takes over when the first dies."""
KAFKA_IBP = "3.9-IV0"
"""Kafka 3.9.1's default ``inter.broker.protocol.version``, which its brokers run with: kctl's
controllers get it too (kctl's default is 3.0), so that both use leader recovery (KIP-704)."""
KCTL_CONTROLLER_CONFIG = {"zookeeper.session.timeout.ms": "6000", "inter.broker.protocol.version": KAFKA_IBP}
"""kctl's controllers keep Kafka's session timeout, longer than kctl's brokers' (2 s): when the
active controller and a broker are killed together, as Kafka's controller dies with its broker,
the standby takes over after the broker's registration is gone, as Kafka's next controller does;
and Kafka 3.9's protocol version."""
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
"""Each broker the preferred leader of one partition, every partition on every broker."""
RACKS = {1: "rack-a", 2: "rack-a", 3: "rack-b"}
"""``broker.rack`` of the brokers on both sides: two racks, so a rack-aware assignment is not any
assignment."""
TOOL_TIMEOUT = 120.0
"""Seconds for a Kafka or kctl command-line tool (a JVM start on a busy machine)."""


def others(sides: SideBySide) -> list[int]:
    """The brokers besides Kafka's controller, in id order. Scenarios kill brokers chosen by it: on
    Kafka a broker's death is also the controller's when it is the controller, on kctl never (its
    controllers are processes of their own), so only :meth:`SideBySide.crash_controller` kills
    Kafka's controller broker."""
    return sorted(broker for broker in sides.kafka.brokers if broker != sides.kafka_controller())


def all_led(topic: str, assignment: Mapping[int, Sequence[int]]) -> Callable[[Snapshot], bool]:
    """Every partition of ``topic`` has a state with a leader."""
    return lambda s: sorted(s.leaders(topic)) == sorted(assignment) and all(
        leader >= 0 for leader in s.leaders(topic).values())


def without(broker: int) -> Callable[[Snapshot], bool]:
    """No partition is led by ``broker`` or has it in its ISR, except a partition left without a
    leader, whose ISR Kafka keeps as it was (an earlier test's partition whose only replica is
    ``broker``, for one)."""
    return lambda s: all(state.leader != broker and (broker not in state.isr or state.leader == -1)
                         for state in s.partitions.values())


def rejoined(broker: int) -> Callable[[Snapshot], bool]:
    """``broker`` is in the ISR of every partition it is a replica of."""
    return lambda s: all(broker in state.isr for tp, state in s.partitions.items()
                         if broker in replicas(s, tp.topic)["partitions"].get(str(tp.partition), ()))


def reassigned(tp: TopicPartition, target: Sequence[int]) -> Callable[[Snapshot], bool]:
    """``tp``'s replicas are ``target``, none being added or removed, its leader one of them, and
    no reassignment is requested any more."""
    def done(s: Snapshot) -> bool:
        topic, key = replicas(s, tp.topic), str(tp.partition)
        return (topic["partitions"].get(key) == list(target) and key not in topic.get("adding_replicas", {})
                and key not in topic.get("removing_replicas", {}) and ADMIN_ZNODES[0] not in s.admin
                and s.leaders(tp.topic).get(tp.partition) in target)
    return done


def replicas(s: Snapshot, topic: str) -> dict[str, Any]:
    """The topic znode's data (``partitions``, ``adding_replicas``, ``removing_replicas`` …)."""
    return dict(s.topics[f"/brokers/topics/{topic}"].data)


@contextmanager
def side_by_side(zk_hosts: str, kafka: KafkaCluster, directory: Path, kctl_config: Mapping[str, str] | None = None,
                 racks: Mapping[int, str] | None = None, log_dir: Path | None = None) -> Iterator[SideBySide]:
    """A kctl cluster beside the running ``kafka``: controller :data:`KCTL_CONTROLLER` (active) and
    :data:`KCTL_STANDBY`, brokers with Kafka's ids and ``racks``, in a chroot of their own;
    ``kctl_config`` as the properties Kafka's brokers were given on top of the defaults; with
    ``log_dir``, each controller writes Kafka's log files to ``log_dir/controller-<id>``, its
    state-change log at TRACE as the Kafka brokers'."""
    import uuid

    import kazoo.client  # type: ignore[import-untyped]

    chroot = f"/kctl-{uuid.uuid4().hex}"
    zk = kazoo.client.KazooClient(hosts=zk_hosts, timeout=10.0)
    zk.start(timeout=30.0)
    with ProcessCluster(zk_hosts + chroot, directory, dict(kctl_config or {})) as kctl:
        pair = SideBySide(kafka, kctl, chroot, zk, racks or {}, log_dir)
        try:
            pair.start_controller(KCTL_CONTROLLER)
            kctl.wait_until(lambda: kctl.active_controller() == KCTL_CONTROLLER, 60, "kctl's controller to be elected")
            pair.start_controller(KCTL_STANDBY)
            for broker in kafka.brokers:
                pair.start_broker(broker)
            yield pair
        finally:
            pair.close()
            zk.stop()
            zk.close()


class SideBySide:
    """A Kafka cluster and a kctl cluster with the same broker ids, and a kazoo session on their
    ZooKeeper server (``zk``) to read both chroots with."""

    def __init__(self, kafka: KafkaCluster, kctl: ProcessCluster, kctl_chroot: str, zk: Any,
                 racks: Mapping[int, str] | None = None, log_dir: Path | None = None) -> None:
        self.kafka = kafka
        self.kctl = kctl
        self.kctl_chroot = kctl_chroot
        self.zk = zk
        self.racks = dict(racks or {})
        self.log_dir = log_dir
        self.kafka_admin = ZooKeeperStore(kafka.zk, session_timeout=10.0, connection_timeout=30.0)

    def close(self) -> None:
        self.kafka_admin.close()

    # --- Steps ---------------------------------------------------------------------------------

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                     config: Mapping[str, object] | None = None) -> None:
        """The same topic znodes on both sides (one topic id), as ``kafka-topics --create
        --replica-assignment`` leaves them."""
        topic_id = admin.generate_topic_id(random.Random())
        for store in (self.kafka_admin, self.kctl.admin):
            racks = {broker: info.rack for broker, (info, _) in store.get_all_brokers().items()}
            admin.create_topic(store, name, broker_racks=racks, assignment=assignment, config=config,
                               topic_id=topic_id)

    def create_and_compare(self, name: str, assignment: Mapping[int, Sequence[int]] = ASSIGNMENT) -> Snapshot:
        """:meth:`create_topic`, then :meth:`compare` once every partition has a leader."""
        self.create_topic(name, assignment)
        return self.compare(all_led(name, assignment), f"creating {name!r}")

    def create_rack_aware_topic(self, name: str, partitions: int, replication_factor: int) -> dict[int, list[int]]:
        """A topic placed by the rack-aware algorithm over the racks Kafka's brokers registered
        (kctl's brokers must have registered the same), written to both sides; returns the placement."""
        racks = [{broker: info.rack for broker, (info, _) in store.get_all_brokers().items()} for store in self.stores]
        assert racks[0] == racks[1], f"the brokers' racks differ: Kafka {racks[0]}, kctl {racks[1]}"
        placed = assign_replicas_to_brokers(broker_metadatas(racks[0], RackAwareMode.ENFORCED), partitions,
                                            replication_factor, fixed_start_index=0)
        self.create_topic(name, placed)
        return placed

    def kill(self, broker: int) -> None:
        """kill -9 the broker on both sides."""
        self.kafka.kill(broker)
        self.kctl.brokers[broker].kill()

    def restart(self, broker: int) -> None:
        """Start the broker again on both sides, once its old registration has expired."""
        self.kafka.restart(broker)
        self.kctl.wait_until(lambda: broker not in self.kctl.admin.get_all_brokers(), SETTLE_TIMEOUT,
                             f"broker {broker}'s old registration to expire")
        self.start_broker(broker)

    def shut_down(self, broker: int) -> None:
        """SIGTERM the broker on both sides: a controlled shutdown (``controlled.shutdown.enable``)."""
        self.kafka.stop_broker(broker)
        assert self.kctl.brokers[broker].terminate() == 0, self.kctl.brokers[broker].log()[-3000:]

    def crash_controller(self) -> int:
        """kill -9 Kafka's controller broker; on kctl, the active controller and the broker with
        the same id at once (the standby takes over). Returns the broker's id."""
        victim = self.kafka_controller()
        active = self.kctl.active_controller()
        assert active is not None, "kctl has no active controller"
        self.kafka.kill(victim)
        self.kctl.controllers[active].kill()
        self.kctl.brokers[victim].kill()
        return victim

    def start_controller(self, controller: int) -> None:
        """Start (or start again) a kctl controller process, a candidate for ``/controller``."""
        logs = [] if self.log_dir is None else ["--log-dir", str(self.controller_log_dir(controller)),
                                                "--state-change-log-level", "TRACE"]  # as the Kafka brokers
        self.kctl.start_controller(controller, [arg for name, value in KCTL_CONTROLLER_CONFIG.items()
                                                for arg in ("--config", f"{name}={value}")] + logs)

    def controller_log_dir(self, controller: int) -> Path:
        """Where kctl controller ``controller`` writes Kafka's log files (with ``log_dir``)."""
        assert self.log_dir is not None, "the kctl controllers were started without a log directory"
        return self.log_dir / f"controller-{controller}"

    def start_broker(self, broker: int) -> None:
        rack = self.racks.get(broker)
        self.kctl.start_broker(broker, extra=["--rack", rack] if rack is not None else [])

    def elect_preferred(self, partitions: Sequence[TopicPartition]) -> None:
        """Write ``/admin/preferred_replica_election`` on both sides, as kafka-leader-election did
        through ZooKeeper."""
        for store in self.stores:
            admin.request_preferred_replica_election(store, partitions)

    def reassign(self, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Write ``/admin/reassign_partitions`` on both sides (the ZooKeeper path of kafka-reassign-partitions)."""
        for store in self.stores:
            admin.request_reassignment(store, targets)

    def cancel_reassignment(self, targets: Mapping[TopicPartition, Sequence[int]]) -> tuple[str, str]:
        """Cancel the reassignments of ``targets``' partitions: Kafka 3.9 cancels only through the
        AlterPartitionReassignments API, so Kafka's own ``kafka-reassign-partitions --cancel
        --bootstrap-server``; ``kctl reassign --cancel`` on kctl's side. Returns both outputs."""
        document = {"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
                                                  for tp, r in sorted(targets.items())]}
        with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
            json.dump(document, file)
            file.flush()
            kafka = run_tool([*self.kafka_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand"), "--cancel",
                              "--reassignment-json-file", file.name,
                              "--preserve-throttles"])  # none set; clearing them would ask every broker, down ones too
            kctl = run_tool([KCTL, "reassign", "--zookeeper", self.kctl.zk, "--cancel", "--reassignment-json-file",
                             file.name])
        return kafka, kctl

    def elect_all_with_tools(self, election_type: str) -> tuple[ToolRun, ToolRun]:
        """``--all-topic-partitions`` elections with Kafka's own ``kafka-leader-election
        --bootstrap-server`` and with ``kctl elect-leaders``; both runs (they may fail)."""
        common = ["--election-type", election_type, "--all-topic-partitions"]
        return (tool_run([*self.kafka_tool("org.apache.kafka.tools.LeaderElectionCommand"), *common]),
                tool_run([KCTL, "elect-leaders", "--zookeeper", self.kctl.zk, *common]))

    def delete_with_tools(self, topic: str) -> tuple[ToolRun, ToolRun]:
        """``kafka-topics --delete --topic`` with Kafka's own tool and ``kctl topics delete``; both
        runs (they may fail)."""
        return (tool_run([*self.kafka_tool("org.apache.kafka.tools.TopicCommand"), "--delete", "--topic", topic]),
                tool_run([KCTL, "topics", "delete", "--zookeeper", self.kctl.zk, "--topic", topic]))

    def kafka_tool(self, main_class: str) -> list[str]:
        """The command line of one of Kafka 3.9.1's tools, up to ``--bootstrap-server`` and its value."""
        return [self.kafka.installation.java, *JVM_OPTIONS, "-cp", kafka_tools_classpath(), main_class,
                "--bootstrap-server", self.kafka_bootstrap()]

    def add_partitions(self, topic: str, added: Mapping[int, Sequence[int]]) -> None:
        """Grow the topic with the ``added`` partitions on both sides: the topic znode rewritten, as
        ``kafka-topics --alter --replica-assignment`` does in ZooKeeper mode."""
        for store in self.stores:
            racks = {broker: info.rack for broker, (info, _) in store.get_all_brokers().items()}
            current = len(store.get_topic_assignments([topic]).values[topic].partitions)
            admin.add_partitions(store, topic, current + len(added), broker_racks=racks, manual=added)

    def delete_topic(self, topic: str) -> None:
        """Write ``/admin/delete_topics/<topic>`` on both sides."""
        for store in self.stores:
            admin.delete_topic(store, topic)

    def change_topic_config(self, topic: str, config: Mapping[str, object]) -> None:
        """Write ``/config/topics/<topic>`` and a ``/config/changes/config_change_`` notification on
        both sides, as kafka-configs does in ZooKeeper mode."""
        for store in self.stores:
            admin.change_topic_config(store, topic, config)

    # --- Observation ---------------------------------------------------------------------------

    @property
    def stores(self) -> tuple[ZooKeeperStore, ZooKeeperStore]:
        """An operator's session on each side: Kafka's chroot, then kctl's."""
        return self.kafka_admin, self.kctl.admin

    def kafka_bootstrap(self) -> str:
        """``--bootstrap-server`` for Kafka's tools: every live broker's listener."""
        return ",".join(broker.config["listeners"].rpartition("//")[2] for broker in self.kafka.brokers.values()
                        if broker.running)

    def kafka_controller(self) -> int:
        controller = self.kafka_admin.get_controller_id()
        assert controller is not None, "the Kafka cluster has no controller"
        return controller

    def compare(self, condition: Callable[[Snapshot], bool], what: str) -> Snapshot:
        """Wait until Kafka's chroot satisfies ``condition`` and is quiet, then until kctl's holds
        the same znodes; fail with every difference if it does not. Returns Kafka's snapshot."""
        expected = settled(self.zk, self.kafka.chroot, condition, SETTLE_TIMEOUT, f"Kafka: {what}")
        try:
            settled(self.zk, self.kctl_chroot, lambda ours: not differences(expected, ours),
                    SETTLE_TIMEOUT, f"kctl to match Kafka after: {what}")
        except AssertionError:
            found = differences(expected, snapshot(self.zk, self.kctl_chroot))
            raise AssertionError(f"after {what}, kctl differs from Kafka:\n" + "\n".join(found)
                                 + f"\n{self.kctl.logs()}") from None
        return expected

    def kctl_snapshot(self) -> Snapshot:
        return snapshot(self.zk, self.kctl_chroot)


def kafka_tools_classpath() -> str:
    """The classpath of Kafka 3.9.1's command-line tools (``org.apache.kafka:kafka-tools``),
    fetched into the cache on first use, as ``scripts/kafka-diff`` does beforehand."""
    return maven.classpath(maven.fetch_jars(maven.PROGRAMS[KAFKA_TOOLS], maven.cached(KAFKA_TOOLS)))


@dataclasses.dataclass(frozen=True)
class ToolRun:
    """A command-line tool's exit status and what it printed."""

    status: int
    stdout: str
    stderr: str


def tool_run(command: Sequence[str]) -> ToolRun:
    """Run a command-line tool to its end."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT, stdin=subprocess.DEVNULL)
    return ToolRun(done.returncode, done.stdout, done.stderr)


def run_tool(command: Sequence[str]) -> str:
    """Run a command-line tool; its output, or fail with it."""
    done = tool_run(command)
    assert done.status == 0, f"{command[0]} … {command[-4:]} exited {done.status}:\n{done.stdout}{done.stderr}"
    return done.stdout
