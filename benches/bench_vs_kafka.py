"""Side by side with Apache Kafka 3.9.1's controller: the same operations on three real Kafka
brokers and on kctl's processes, on one ZooKeeper server, in one sitting.

Each size (``KCTL_BENCH_KAFKA_PARTITIONS``, default 1K, 10K and 20K partitions) gets fresh
clusters: three Kafka brokers (``kctl.testing.kafka``) and a ``kctl controller`` pair with three
``kctl broker`` processes (``tests/support/kafka_harness.py``), each in a chroot of its own. One
topic of that many partitions, RF 2, each broker the preferred leader of a third. Every figure is
the controller's own work, measured from ZooKeeper's znode timestamps and the controllers'
``controller.log`` lines (both sides write Kafka's layout; one host, one clock):

- ``creation``: the topic znode's ctime to the last partition state znode's ctime (every
  partition has a leader: the controller writes each state with its leader); ``ROUNDS`` times,
  each creation deleted (not measured) before the other side's, so that neither cluster holds a
  partition while the other creates its topic; :data:`WARM_UP_CREATIONS` creations and deletions
  on each side come first and both create the topic once more afterwards (none measured);
- ``failover``: ``/controller`` deleted with every broker up; the new controller's "successfully
  elected as the controller. Epoch incremented to E" line to its "Ready to serve as the new
  controller with epoch E" line (Kafka's ``onControllerFailover`` up to the point it serves);
- ``controlled-shutdown``: a broker that is not Kafka's controller, leading a third of the
  partitions, stopped with SIGTERM; the controller's "Shutting down broker N" line to the last
  state znode write that moved a leadership or shrank an ISR away from it;
- ``controller-crash``: kill -9 of Kafka's controller broker (on kctl the active controller and the
  broker of the same id); the next controller's "successfully elected" line to the last state znode
  write giving a partition the dead broker led its new leader. The wait for the session to expire
  is not counted.

After the controlled shutdown the broker is started again and, before the failovers, a preferred
replica election gives every partition back to its first replica (not measured), so that the
broker whose crash is measured leads a third of the partitions. The two sides take turns, never
at once, and each step starts once the shared server has collected its heap (:class:`ServerHeap`)
and no process of either cluster is busy (:func:`settle`). The test of a size runs the whole sitting once (``benchmark.pedantic``);
the figures, their medians and Kafka's median over kctl's are in the result's ``extra_info``, which
``benches/table.py`` prints. Marked ``kafka_bench``: ``scripts/kafka-diff --bench`` runs it,
nothing else does (1K, 10K and 20K take about half an hour).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any

import pytest

from kctl import admin
from kctl.model import TopicPartition
from kctl.stores.base import MATCH_ANY_VERSION
from kctl.testing.kafka import SHIPPED_JVM_OPTIONS, KafkaCluster, KafkaInstallation, kafka_installation
from kctl.testing.zookeeper import ZooKeeperEnsemble, require_zookeeper
from tests.support.kafka_harness import SideBySide, side_by_side

__all__ = ["kafka_installation"]

pytestmark = pytest.mark.kafka_bench

SIZES = tuple(int(n) for n in os.environ.get("KCTL_BENCH_KAFKA_PARTITIONS", "1000,10000,20000").split(","))
ROUNDS = int(os.environ.get("KCTL_BENCH_KAFKA_ROUNDS", "3"))
"""Failovers and creations per size and side (each creation but the last is followed by the topic's
deletion, on both sides, before the next; the other measures change the cluster, so they run once
a size)."""
BROKERS = (1, 2, 3)
TOPIC = "bench"
CONFIG = {"auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": "3600000"}
"""Both sides' broker properties: no leader moves but those measured, and no ISR shrinks but those
measured: at 20K partitions on a loaded two-core machine Kafka's followers (still creating 13K
logs) did not fetch within the default 30 s, their leaders shrank thousands of ISRs to themselves,
and the partitions the crashed controller's broker led were left without a leader. The ZooKeeper
sessions keep the harness's timeouts on kctl's side: its controllers 6 s, its brokers 2 s, so that
a killed kctl broker is gone before the standby controller takes over, as the dead controller's
broker is on Kafka (one session for both)."""
KAFKA_CONFIG = {**CONFIG, "zookeeper.session.timeout.ms": "18000", "controller.socket.timeout.ms": "300000",
                "file.delete.delay.ms": "0"}
"""Kafka's brokers as they ship (18 s, the default session): with the tests' 6 s they lost their
sessions under this load and bounced, moving the controller between the measured steps. A broker
waits up to 5 minutes for the answer to its ControlledShutdown (30 s by default: a busy controller
answered later, and the broker gave up and retried). A deleted topic's logs are removed at once
rather than a minute later (``file.delete.delay.ms``), so that the next creation starts on an empty
disk, within the machine's file descriptors and without the deletions' disk work alongside."""
ZOOKEEPER_JVM_OPTIONS = ("-Xms512m", "-Xmx512m", "-XX:+UseParallelGC")
"""The one ZooKeeper server both sides share, with a fixed heap (``-Xms`` = ``-Xmx``, 512 MB, as
Kafka's own ``zookeeper-server-start.sh`` runs ZooKeeper) and the throughput collector, rather than
the test fixture's heap growing from 64 MB (docs/performance.md: what the server spends per create)."""
WARM_UP_PARTITIONS = 25_000
"""Partitions of the topic each side's creation writes on the server before the sitting
(:func:`warm_up`): 100K znodes in all, created and deleted."""
WARM_UP_CREATIONS = 2
"""Creations (each deleted again) per side before the measured ones, not measured: a controller's
first real creations take the server (and Kafka's controller's JVM) through request paths the
store-level warm-up does not (the topic znode, watches, reads); the server's compilers still used
0.2-0.5 s of CPU during a second kctl creation after the warm-up, 0.01-0.05 s from the third on
(``benches/creation_cpu.py``)."""
MEASURES = ("creation", "failover", "controlled-shutdown", "controller-crash")
LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")
LIVE_LOG = re.compile(rf"{TOPIC}-\d+")
"""A partition's log directory (a deleted one is renamed ``<topic>-<p>.<id>-delete`` until it goes)."""


@pytest.fixture(scope="module")
def zookeeper_gc_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the shared server's JVM logs its collections (:class:`ServerHeap`)."""
    return tmp_path_factory.mktemp("zookeeper") / "gc.log"


@pytest.fixture(scope="module")
def zookeeper_server(zookeeper_gc_log: Path) -> Iterator[ZooKeeperEnsemble]:
    """The sitting's ZooKeeper server (:data:`ZOOKEEPER_JVM_OPTIONS`), logging its collections."""
    options = (*ZOOKEEPER_JVM_OPTIONS, f"-Xlog:gc:file={zookeeper_gc_log}:time")
    with ZooKeeperEnsemble(1, installation=require_zookeeper(), jvm_options=options) as ensemble:
        warm_up(ensemble.hosts, WARM_UP_PARTITIONS)
        yield ensemble


GC_PAUSE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4})\] GC\(\d+\) Pause .* (\d+(?:\.\d+)?)ms$")
"""A pause in the JVM's ``-Xlog:gc:…:time`` log: when it ended, and how long it took."""


@dataclass(frozen=True)
class ServerHeap:
    """The shared ZooKeeper server's heap, as each step starts and as its figure is measured.

    Before each step the server's JVM collects its whole heap (``jcmd PID GC.run``), so that a step
    pays for collecting its own garbage only: the server allocates about 10 KB per create (its
    transactions and answers serialised through growing buffers, each create's existence check
    thrown as an exception; Java Flight Recorder, docs/performance.md), 40K creates fill its young
    generation two or three times, and the survivors promoted by each step fill the old generation until a
    full collection, which otherwise falls into whichever step comes then. The collections of each
    measured window are read from the JVM's log and recorded with the step."""

    pid: int
    log: Path

    def collect(self) -> None:
        jcmd = Path(os.readlink(f"/proc/{self.pid}/exe")).with_name("jcmd")
        if not jcmd.exists():
            raise AssertionError(f"{jcmd} is missing: the benchmark needs a JDK's jcmd "
                                 "(apt-get install -y default-jdk-headless)")
        subprocess.run([str(jcmd), str(self.pid), "GC.run"], check=True, capture_output=True, timeout=120)

    def pauses(self, start: float, end: float) -> list[float]:
        """The pauses (seconds) that overlapped ``start``–``end`` (epoch seconds)."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            if match := GC_PAUSE.match(line):
                ended = datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
                took = float(match[2]) / 1e3
                if ended >= start and ended - took <= end:
                    found.append(took)
        return found


def warm_up(hosts: str, partitions: int) -> None:
    """Write a topic's partition states on the server as each controller writes them, each side in a
    chroot of its own, then delete them: kctl's through its own store (the controller's native
    creates: multis of ``check(/controller_epoch)``, then each partition's ``/partitions/<p>`` and
    its state), Kafka's as ``KafkaZkClient.createTopicPartitionStatesRaw`` sends them (``/partitions``,
    every ``/partitions/<p>``, then every state, each in a ``multi(check, create)`` of its own,
    pipelined). A production server has long compiled these request paths; a fresh JVM compiles
    them over the first hundreds of thousands of writes, and compiles them again when a path through
    them it has not seen appears (a create whose parent the same multi created): that would be
    charged to whichever side writes first, or to a side whose exact shape the warm-up missed."""
    from kazoo.client import KazooClient  # type: ignore[import-untyped]

    from kctl.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
    from kctl.stores.zookeeper import ZooKeeperStore

    replicas = assignment(partitions)
    topic = f"/brokers/topics/{TOPIC}"
    kctl = ZooKeeperStore(hosts, "/warm-up-kctl", session_timeout=30.0, connection_timeout=60.0)
    try:
        _, version = kctl.register_controller_and_increment_epoch(0)
        kctl.client.create(topic, b"{}")  # the partitions' parents need it; no controller reads it
        states = {TopicPartition(TOPIC, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(r[0], tuple(r)), 1)
                  for p, r in replicas.items()}
        failed = {tp: e for tp, e in kctl.create_partition_states(states, version).items() if e is not None}
        assert not failed, f"kctl's warm-up creates failed: {list(failed.items())[:3]}"
    finally:
        kctl.close()
    zk = KazooClient(hosts=hosts, timeout=30.0)
    zk.start(timeout=60.0)
    try:
        root = "/warm-up-kafka"  # Kafka's chroot, in each path as Kafka's client sends it
        topic = root + topic
        zk.ensure_path(topic)
        zk.create(f"{root}/controller_epoch", b"1")

        def each(creates: list[tuple[str, bytes]]) -> None:
            for start in range(0, len(creates), 1000):
                pending = []
                for path, data in creates[start:start + 1000]:
                    transaction = zk.transaction()
                    transaction.check(f"{root}/controller_epoch", 0)
                    transaction.create(path, data)
                    pending.append(transaction.commit_async())
                for result in pending:
                    found = result.get()
                    assert not any(isinstance(r, Exception) for r in found), f"Kafka's warm-up creates failed: {found}"

        each([(f"{topic}/partitions", b"")])
        each([(f"{topic}/partitions/{p}", b"") for p in replicas])
        each([(f"{topic}/partitions/{p}/state", json.dumps(
            {"controller_epoch": 1, "leader": r[0], "version": 1, "leader_epoch": 0, "isr": r}).encode())
            for p, r in replicas.items()])
    finally:
        zk.stop()
        zk.close()
    cleaner = ZooKeeperStore(hosts, session_timeout=30.0, connection_timeout=60.0)
    try:
        cleaner.client.delete_recursive(["/warm-up-kctl", "/warm-up-kafka"], MATCH_ANY_VERSION)
    finally:
        cleaner.close()


def assignment(partitions: int) -> dict[int, list[int]]:
    """RF 2 over brokers 1–3, each the preferred leader of a third of the partitions."""
    return {p: [BROKERS[p % 3], BROKERS[(p + 1) % 3]] for p in range(partitions)}


@dataclass(frozen=True)
class State:
    """A partition state znode: leader, ISR and the znode's ctime and mtime (seconds)."""

    leader: int
    isr: frozenset[int]
    ctime: float
    mtime: float


def read_states(zk: Any, chroot: str, partitions: int) -> dict[int, State]:
    """The topic's partition states that exist (pipelined reads)."""
    from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped]

    base = f"{chroot}/brokers/topics/{TOPIC}/partitions"
    pending = [(p, zk.get_async(f"{base}/{p}/state")) for p in range(partitions)]
    found = {}
    for p, result in pending:
        try:
            data, stat = result.get()
        except NoNodeError:
            continue
        state = json.loads(data)
        found[p] = State(state["leader"], frozenset(state["isr"]), stat.ctime / 1e3, stat.mtime / 1e3)
    return found


class LogTail:
    """The lines Kafka-layout log files (log4j's ``[%d] %p %m (%c)``) get from now on, read as they
    come: these files are polled while a controller works, so each poll reads only what was added
    and each line is searched once per pattern. A file rolled over meanwhile (renamed ``<name>.1``:
    kctl's logs roll at 100 MB, about every fifth creation of 20K partitions at TRACE; Kafka's
    here do not roll) is read to its end under its new name first."""

    def __init__(self, files: Sequence[Path]) -> None:
        self._offsets = {file: (_inode(file), file.stat().st_size if file.exists() else 0) for file in files}
        self._lines: list[str] = []
        self._searched: dict[str, int] = {}
        self._found: dict[str, float] = {}

    def first(self, pattern: str) -> float | None:
        """When the first line matching ``pattern`` was logged, if one has been."""
        if pattern not in self._found:
            times = [logged for logged, _ in self._new_matches(pattern)]
            if times:
                self._found[pattern] = min(times)
        return self._found.get(pattern)

    def firsts(self, pattern: str, found: dict[str, float]) -> dict[str, float]:
        """``found`` with, for each value of ``pattern``'s first group not in it yet, when the first
        line matching with that value was logged (one poll of many keys, such as partitions)."""
        for logged, match in self._new_matches(pattern):
            found[match[1]] = min(logged, found.get(match[1], logged))
        return found

    def _new_matches(self, pattern: str) -> list[tuple[float, re.Match[str]]]:
        """The lines added since ``pattern`` was last searched that match it: their time and match."""
        self._read()
        start, self._searched[pattern] = self._searched.get(pattern, 0), len(self._lines)
        regex = re.compile(pattern)
        return [(datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S,%f").timestamp(), match)
                for line in self._lines[start:] if (match := regex.search(line)) and (stamp := LINE.match(line))]

    def _read(self) -> None:
        for file, (inode, offset) in self._offsets.items():
            current = _inode(file)
            if current is None:
                continue
            if inode is not None and current != inode:  # rolled over since the last read
                rolled = file.with_name(f"{file.name}.1")
                if _inode(rolled) == inode:
                    self._lines += _read_from(rolled, offset).decode(errors="replace").splitlines()
                offset = 0
            data = _read_from(file, offset)
            end = data.rfind(b"\n") + 1  # complete lines only
            self._offsets[file] = (current, offset + end)
            self._lines += data[:end].decode(errors="replace").splitlines()


def _inode(file: Path) -> int | None:
    try:
        return file.stat().st_ino
    except FileNotFoundError:
        return None


def _read_from(file: Path, offset: int) -> bytes:
    try:
        with file.open("rb") as log:
            log.seek(offset)
            return log.read()
    except FileNotFoundError:
        return b""


def log_dirs(data: Path) -> set[str]:
    """The names in a Kafka broker's ``log.dirs`` (none before it made the directory)."""
    try:
        with os.scandir(data) as entries:
            return {entry.name for entry in entries}
    except FileNotFoundError:
        return set()


def logs_created(zk: Any, kafka: KafkaCluster, partitions: int) -> bool:
    """Every running broker of ``kafka`` has a log directory for each partition of the topic
    (:func:`assignment`) it hosts, once the topic exists."""
    if zk.exists(f"{kafka.chroot}/brokers/topics/{TOPIC}") is None:
        return True
    hosted = Counter(broker for replicas in assignment(partitions).values() for broker in replicas)
    for broker_id, broker in kafka.brokers.items():
        data = Path(broker.config["log.dirs"])
        if broker.running:
            found = sum(1 for name in log_dirs(data) if LIVE_LOG.fullmatch(name))
            if found < hosted[broker_id]:
                return False
    return True


def wait_for(what: str, timeout: float, probe: Callable[[], Any], interval: float = 0.5) -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not (found := probe()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
    return found


class Side:
    """One cluster of the pair as the benchmark sees it: its chroot, its controllers' logs and how
    to stop, kill and restart its brokers."""

    def __init__(self, name: str, pair: SideBySide, partitions: int) -> None:
        self.name = name
        self.pair = pair
        self.partitions = partitions
        self.timeout = 180.0 + partitions / 50
        kafka = name == "kafka"
        self.chroot = pair.kafka.chroot if kafka else pair.kctl_chroot
        self.store = pair.stores[0 if kafka else 1]
        self.leaderless = 0
        """Partitions the crashed controller's broker led that were left without a leader."""
        self.window = (0.0, 0.0)
        """The last measured step's figure: when it started and ended (epoch seconds)."""

    def measured(self, start: float, end: float) -> float:
        self.window = (start, end)
        return end - start

    def controller_logs(self, name: str) -> list[Path]:
        if self.name == "kafka":
            return [broker.logs_dir / name for broker in self.pair.kafka.brokers.values()]
        return [self.pair.controller_log_dir(c) / name for c in self.pair.kctl.controllers]

    def tail(self, name: str = "controller.log") -> LogTail:
        """The controllers' log ``name`` from now on."""
        return LogTail(self.controller_logs(name))

    def wait_logged(self, tail: LogTail, pattern: str) -> float:
        return float(wait_for(f"{self.name}: a controller to log {pattern!r}", self.timeout,
                              lambda: tail.first(pattern)))

    def states(self) -> dict[int, State]:
        return read_states(self.pair.zk, self.chroot, self.partitions)

    def wait_states(self, what: str, condition: Callable[[dict[int, State]], bool]) -> dict[int, State]:
        """The states once every partition has one and ``condition`` holds (reads every 2 s: a
        full read of 20K znodes costs the machine)."""
        def probe() -> dict[int, State] | None:
            states = self.states()
            return states if len(states) == self.partitions and condition(states) else None
        return dict(wait_for(f"{self.name}: {what}", self.timeout, probe, interval=2.0))

    def epoch(self) -> int:
        found = self.store.get_controller_epoch()
        assert found is not None, f"{self.name} has no controller epoch"
        return found[0]

    def logs_created(self) -> bool:
        """Every running Kafka broker has a log directory for each partition of the topic it hosts
        (kctl's brokers keep no logs)."""
        return self.name != "kafka" or logs_created(self.pair.zk, self.pair.kafka, self.partitions)

    def pids(self) -> list[int]:
        if self.name == "kafka":
            return [b.pid for b in self.pair.kafka.brokers.values() if b.pid is not None]
        return [p.pid for p in self.pair.kctl.processes if p.running()]



def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(sides: Mapping[str, Side], shared: Sequence[int] = (), timeout: float = 180.0, window: float = 3.0,
           busy: float = 0.35) -> bool:
    """Wait until every live broker of either cluster holds a log for each partition it hosts and
    no process of either cluster, nor the ``shared`` ZooKeeper server, uses more than ``busy`` of a
    core over ``window`` seconds, at most ``timeout`` seconds for the quiet (Kafka's brokers create
    the logs a step handed them for tens of seconds after the controller is done; a Kafka broker
    whose request threads are still busy with that may send its ControlledShutdown to a controller
    it no longer has; the server may still be compiling, collecting or writing a snapshot after the
    other side's step, which the next step would pay for; on a machine loaded by others a busy
    process gets too little of a core to look busy, hence the logs are counted). False when the
    quiet did not come."""
    for side in sides.values():
        wait_for(f"{side.name}: the brokers to create their logs", side.timeout, side.logs_created, interval=2.0)
    deadline = time.monotonic() + timeout
    pids = [pid for side in sides.values() for pid in side.pids()] + list(shared)
    while time.monotonic() < deadline:
        before = {pid: cpu_seconds(pid) for pid in pids}
        time.sleep(window)
        if all(cpu_seconds(pid) - used < busy * window for pid, used in before.items()):
            return True
    return False


def create(side: Side) -> float:
    """Topic znode written (with its topic id, as Kafka's CreateTopics writes it) → every
    partition state written (with its leader)."""
    tail = side.tail("state-change.log")
    admin.create_topic(side.store, TOPIC, broker_racks=dict.fromkeys(BROKERS), assignment=assignment(side.partitions),
                       topic_id=admin.generate_topic_id(random.Random()))
    stat = side.pair.zk.exists(f"{side.chroot}/brokers/topics/{TOPIC}")
    # the requests go out once every state is written: reading 20K states meanwhile would load the machine
    side.wait_logged(tail, r"Sending LeaderAndIsr request to broker \d+ with \d+ become-leader")
    states = side.wait_states("every partition to have a leader", lambda s: all(st.leader > 0 for st in s.values()))
    return side.measured(stat.ctime / 1e3, max(st.ctime for st in states.values()))


def delete(side: Side) -> None:
    """Delete the topic (``/admin/delete_topics``, as kafka-topics through ZooKeeper) and wait until
    its znodes are gone and, on Kafka, its brokers have removed its logs (not measured)."""
    admin.delete_topic(side.store, TOPIC)
    wait_for(f"{side.name}: the topic's deletion", side.timeout, lambda: TOPIC not in side.store.get_all_topics()
             and not side.store.get_topic_deletions(), interval=1.0)
    if side.name == "kafka":
        wait_for("kafka: the deleted topic's logs to go", side.timeout, lambda: not any(
            name.startswith(f"{TOPIC}-") for broker in side.pair.kafka.brokers.values()
            for name in log_dirs(Path(broker.config["log.dirs"]))), interval=1.0)


def fail_over(side: Side) -> float:
    """``/controller`` deleted → the new controller's elected → ready lines."""
    epoch = side.epoch() + 1
    tail = side.tail()
    side.pair.zk.delete(f"{side.chroot}/controller")
    elected = side.wait_logged(tail, rf"successfully elected as the controller\. Epoch incremented to {epoch} ")
    ready = side.wait_logged(tail, rf"Ready to serve as the new controller with epoch {epoch}\b")
    return side.measured(elected, ready)


def shut_down(side: Side, broker: int) -> float:
    """SIGTERM to ``broker`` → the last state write moving its leaderships or dropping it from an ISR."""
    before = side.states()
    involved = [p for p, st in before.items() if st.leader == broker or broker in st.isr]
    tail = side.tail()
    if side.name == "kafka":
        side.pair.kafka.stop_broker(broker, side.timeout)
    else:
        assert side.pair.kctl.brokers[broker].terminate() == 0, side.pair.kctl.brokers[broker].log()[-3000:]
    # the broker has exited: its controlled shutdown was answered, unless it gave up on it
    start = tail.first(rf"Shutting down broker {broker}\b")
    if start is None and side.name == "kafka":
        log = side.pair.kafka.brokers[broker].logs_dir / "server.log"
        raise AssertionError(f"Kafka's broker {broker} stopped without a controlled shutdown:\n" + "\n".join(
            line for line in log.read_text(errors="replace").splitlines() if "ontrolled shutdown" in line))
    assert start is not None, f"kctl's broker {broker} stopped without a controlled shutdown"
    after = side.wait_states(f"broker {broker} out of every leadership and ISR",
                             lambda s: all(st.leader != broker and broker not in st.isr for st in s.values()))
    return side.measured(start, max(after[p].mtime for p in involved))


def restart(side: Side, broker: int) -> None:
    """Start ``broker`` again and wait until it is back in every ISR it belongs to."""
    if side.name == "kafka":
        side.pair.kafka.restart(broker)
    else:
        side.pair.kctl.wait_until(lambda: broker not in side.store.get_all_brokers(), side.timeout,
                                  f"broker {broker}'s registration to expire")
        side.pair.start_broker(broker)
    replicas = assignment(side.partitions)
    side.wait_states(f"broker {broker} to rejoin its ISRs",
                     lambda s: all(broker in s[p].isr for p, r in replicas.items() if broker in r))


def elect_preferred(side: Side) -> None:
    """A preferred replica election of every partition not led by its first replica (the admin
    znode, as kafka-leader-election through ZooKeeper), until each is."""
    replicas = assignment(side.partitions)
    moved = [TopicPartition(TOPIC, p) for p, st in side.states().items() if st.leader != replicas[p][0]]
    if moved:
        admin.request_preferred_replica_election(side.store, moved)
        side.wait_states("every partition led by its preferred leader",
                         lambda s: all(st.leader == replicas[p][0] for p, st in s.items()))


def crash_controller(side: Side, victim: int) -> float:
    """kill -9 of the controller's broker → the next controller's elected line → the last state
    write taking a partition the victim led away from it (to a live ISR member, or to no leader
    when none is left: both controllers write that, and waiting for a leader there waits forever)."""
    before = side.states()
    led = [p for p, st in before.items() if st.leader == victim]
    assert led, f"{side.name}: broker {victim}, the controller's, leads no partition"
    epoch = side.epoch() + 1
    tail = side.tail()
    if side.name == "kafka":
        side.pair.kafka.kill(victim)
    else:
        active = side.pair.kctl.active_controller()
        assert active is not None, "kctl has no active controller"
        side.pair.kctl.controllers[active].kill()
        side.pair.kctl.brokers[victim].kill()
    elected = side.wait_logged(tail, rf"successfully elected as the controller\. Epoch incremented to {epoch} ")
    side.wait_logged(tail, rf"Ready to serve as the new controller with epoch {epoch}\b")  # then read the states
    after = side.wait_states(f"no partition led by the dead broker {victim}",
                             lambda s: all(st.leader != victim for st in s.values()))
    side.leaderless = sum(1 for p in led if after[p].leader == -1)
    return side.measured(elected, max(after[p].mtime for p in led))


def turns(round_: int, sides: Mapping[str, Side]) -> list[Side]:
    """Kafka first in even rounds, kctl first in odd ones."""
    order = [sides["kafka"], sides["kctl"]]
    return order if round_ % 2 == 0 else order[::-1]


def sitting(pair: SideBySide, partitions: int, offset: int, progress: Path | None = None,
            server: ServerHeap | None = None) -> dict[str, dict[str, list[float]]]:
    """Every measure on both sides, taking turns; seconds per measure and side (with the load
    average at the end of each step, and how many partitions the controller crash left without a
    leader), also written to ``progress`` as they come (a sitting at 20K partitions takes most of
    an hour). ``server``: the shared ZooKeeper server, its heap collected and its process quiet too
    before each step. Each step also records how long it took (its figure read), the CPU the server
    and the other cluster's processes used meanwhile, and the server's collections in its measured
    window."""
    sides = {name: Side(name, pair, partitions) for name in ("kafka", "kctl")}
    times: dict[str, dict[str, list[float]]] = {name: {m: [] for m in MEASURES} for name in sides}
    shared = [server.pid] if server is not None else []

    def run(measure: str, round_: int, step: Callable[[Side], float],
            then: Callable[[Side], None] | None = None) -> None:
        for side in turns(round_ + offset, sides):
            if server is not None:
                server.collect()
            quiet = settle(sides, shared)
            others = [pid for other in sides.values() if other is not side for pid in other.pids()]
            server_cpu, background = sum(map(cpu_seconds, shared)), sum(map(cpu_seconds, others))
            started = time.monotonic()
            times[side.name][measure].append(step(side))
            times[side.name].setdefault(f"{measure} step seconds", []).append(time.monotonic() - started)
            times[side.name].setdefault(f"{measure} load", []).append(os.getloadavg()[0])
            # over the step (until its figure was read): the server's CPU, and the other cluster's
            times[side.name].setdefault(f"{measure} server cpu", []).append(sum(map(cpu_seconds, shared)) - server_cpu)
            times[side.name].setdefault(f"{measure} other side cpu", []).append(sum(map(cpu_seconds, others)) - background)
            times[side.name].setdefault(f"{measure} quiet before", []).append(float(quiet))
            if server is not None:
                pauses = server.pauses(*side.window)
                times[side.name].setdefault(f"{measure} server gc pauses", []).append(float(len(pauses)))
                times[side.name].setdefault(f"{measure} server gc seconds", []).append(sum(pauses))
            if progress is not None:
                progress.write_text(json.dumps(times, indent=1))
            if then is not None:
                then(side)

    for round_ in range(WARM_UP_CREATIONS):
        for side in turns(round_ + offset, sides):
            settle(sides, shared)
            create(side)
            delete(side)
    # Each creation is measured with the other cluster holding no partition: after a creation of 20K
    # partitions Kafka's brokers kept working for tens of seconds at 0.3-0.6 of a core each, past
    # any quiet window, and the other side's creation shared the machine with that.
    for round_ in range(ROUNDS):
        run("creation", round_, create, then=delete)
    for side in sides.values():
        create(side)  # the topic the other measures work on (not measured)
    # kctl's controllers are processes of their own: the brokers are chosen by Kafka's controller.
    # The controlled shutdown comes before the failovers: a Kafka broker that saw the controller
    # move several times within seconds may send its ControlledShutdown to a former controller,
    # be refused (STALE_CONTROLLER_EPOCH) and give up on it.
    broker = min(b for b in BROKERS if b != pair.kafka_controller())
    run("controlled-shutdown", 0, lambda side: shut_down(side, broker))
    for side in sides.values():
        restart(side, broker)
    settle(sides, shared)
    # leadership back to the preferred leaders, so that whichever broker's crash comes last, it leads a third
    for side in sides.values():
        elect_preferred(side)
    settle(sides, shared)
    for round_ in range(ROUNDS):
        run("failover", round_, fail_over)
    victim = pair.kafka_controller()
    run("controller-crash", 0, lambda side: crash_controller(side, victim))
    for side in sides.values():
        times[side.name]["controller-crash leaderless"] = [float(side.leaderless)]
    return times


def summary(times: Mapping[str, Mapping[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Per measure: each side's median and Kafka's over kctl's."""
    found = {}
    for measure in MEASURES:
        kafka, kctl = median(times["kafka"][measure]), median(times["kctl"][measure])
        found[measure] = {"kafka": kafka, "kctl": kctl, "kafka_over_kctl": kafka / kctl}
    return found


@pytest.mark.parametrize("partitions", SIZES)
def test_vs_kafka(benchmark: Any, partitions: int, zookeeper_server: ZooKeeperEnsemble, zookeeper_gc_log: Path,
                  kafka_installation: KafkaInstallation, tmp_path: Path) -> None:
    """One sitting at ``partitions`` partitions; kctl's controller must win every measure."""
    times: dict[str, dict[str, list[float]]] = {}
    load = [os.getloadavg()[0]]

    server = zookeeper_server.servers[0].pid
    assert server is not None, "the shared ZooKeeper server is not running"

    def once() -> None:
        with KafkaCluster(zookeeper_server.hosts, len(BROKERS), installation=kafka_installation,
                          overrides=KAFKA_CONFIG, jvm_options=SHIPPED_JVM_OPTIONS) as kafka, \
                side_by_side(zookeeper_server.hosts, kafka, tmp_path / "kctl", CONFIG, log_dir=tmp_path / "logs") as pair:
            times.update(sitting(pair, partitions, SIZES.index(partitions), tmp_path / "times.json",
                                 ServerHeap(server, zookeeper_gc_log)))
        load.append(os.getloadavg()[0])

    (tmp_path / "kctl").mkdir()
    benchmark.group = "kafka:side-by-side"
    benchmark.pedantic(once, rounds=1, iterations=1)
    medians = summary(times)
    benchmark.extra_info.update(vs_kafka=True, partitions=partitions, brokers=len(BROKERS), rf=2, rounds=ROUNDS,
                                times=times, medians=medians, load_average=load)
    slower = [m for m, found in medians.items() if found["kafka_over_kctl"] <= 1]
    assert not slower, f"kctl's controller was not faster than Kafka's on {slower}: {medians}"
