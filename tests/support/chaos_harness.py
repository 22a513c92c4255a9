"""The fault suite's cluster: real processes on a ZooKeeper server of their own, the faults injected
into it, and the verdict after each scenario.

:class:`ChaosCluster` is a :class:`~tests.support.process_harness.ProcessCluster` (two ``kctl controller``
candidates, three ``kctl broker`` processes, the ``tcp`` transport, FAST properties) on a
standalone ZooKeeper server that only this test uses, so that the server's transaction log is the
complete history of this cluster. The recorder is everything observable from outside the
processes:

- ZooKeeper's transaction log, replayed by :class:`kctl.testing.zkhistory.ZooKeeperHistory`:
  every committed write with its session, including a deposed controller's;
- the processes' stderr logs: the controllers' elections, resignations and renewed sessions, and
  every answer each broker process gave the controller (``kctl broker --log-level DEBUG`` logs
  request and response in wire form, :func:`kctl.process.read_answers`);
- the admin tools' view (:class:`kctl.tools.client.AdminClient`), as an operator sees the cluster;
- a client producing to every partition's leader throughout (:class:`Producer`), which keeps each
  acknowledged view of the leader's log: what was committed, and in which leader epochs.

:meth:`ChaosCluster.verify` waits until the cluster is quiet with every broker up, then checks it
and returns the figures the hardening report counts (see ``tests/chaos/test_chaos.py`` for what
each invariant is checked on, and why).
"""

from __future__ import annotations

import re
import signal
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kctl import admin
from kctl.broker.agent import HandledRequest
from kctl.broker.fetcher import PRODUCE_API, ProduceRequest, ProduceResponse
from kctl.broker.metadata_cache import BrokerMetadataCache, MetadataSnapshot
from kctl.broker.replica_manager import common_log_prefix
from kctl.errors import Errors, KctlError
from kctl.invariants import check_broker_answers
from kctl.model import TopicPartition
from kctl.net import Address, EventLoopThread, FrameClient, Header, Request
from kctl.process import read_answers
from kctl.requests import UpdateMetadataRequest
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.zkhistory import ZooKeeperHistory
from kctl.testing.zookeeper import ZooKeeperEnsemble
from kctl.tools.client import AdminClient, TopicDescription
from kctl.transports.tcp import broker_address

from tests.support.process_harness import KctlProcess, ProcessCluster

CONTROLLERS = (91, 92)
"""The controller candidates' ids (apart from the brokers', so logs and checks cannot confuse them)."""
BROKERS = (1, 2, 3)
SESSION_TIMEOUT = 2.0
"""FAST's ``zookeeper.session.timeout.ms``, in seconds."""

_ELECTED = re.compile(r"(\d+) successfully elected as the controller\. Epoch incremented to (\d+)")
_READY = re.compile(r"Ready to serve as the new controller with epoch (\d+)")
_RESIGNED = re.compile(r"Resigned as the controller \(broker (\d+), epoch (\d+)\)")
_RENEWED = re.compile(r"New ZooKeeper session (0x[0-9a-f]+)")


@dataclass(frozen=True)
class Fault:
    """A fault injected into the cluster: its kind (a few fixed names the report groups by) and
    what exactly was done."""

    kind: str
    detail: str


@dataclass
class Verdict:
    """What :meth:`ChaosCluster.verify` found: violations (must be none), losses (must be zero)
    and how much it checked."""

    violations: list[str] = field(default_factory=list)
    losses: dict[str, int] = field(default_factory=dict)
    checked: dict[str, int] = field(default_factory=dict)


def committed_records_lost(seen: Sequence[ProduceResponse], final: ProduceResponse) -> int:
    """How many records below a high watermark a client saw are not in ``final``, the leader's
    log now: the common prefix of the two logs (by their epoch histories) must reach it."""
    return max(
        (view.high_watermark - common_log_prefix(view.epochs, view.log_end_offset, final.epochs, final.log_end_offset)
         for view in seen),
        default=0,
    )


class Producer:
    """A client that produces one record to every partition of the scenario's live topics every
    ``interval`` seconds, to the leader ZooKeeper names, through its own ZooKeeper session, and
    keeps every acknowledged view of a leader's log (epoch history, log end, high watermark)."""

    def __init__(self, cluster: ChaosCluster, interval: float = 0.1) -> None:
        self._cluster = cluster
        self._interval = interval
        self._network = EventLoopThread("chaos-producer")
        self._client = FrameClient(self._network, connect_timeout=1.0)
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)
        self._store: ZooKeeperStore | None = None
        self.acknowledged: dict[TopicPartition, list[ProduceResponse]] = {}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def close(self) -> None:
        self.stop()
        self._client.close()
        self._network.stop()
        if self._store is not None:
            self._store.close()

    def send(self, address: Address, tp: TopicPartition, records: int) -> ProduceResponse | None:
        """One Produce request (``records`` 0: only read the leader's log); None without an answer."""
        request = Request(PRODUCE_API, Header(), ProduceRequest(tp, records))
        try:
            answer = self._network.run(self._client.call(address, request, 2.0), 10)
        except (KctlError, TimeoutError):
            return None
        return answer if isinstance(answer, ProduceResponse) else None

    def leaders(self, store: ZooKeeperStore, topics: Mapping[str, int]) -> dict[TopicPartition, Address]:
        """Where each partition's leader listens, as ZooKeeper has it now."""
        tps = [TopicPartition(topic, p) for topic, count in topics.items() for p in range(count)]
        brokers = store.get_all_brokers()
        found = {}
        for tp, state in store.get_partition_states(tps).values.items():
            info = brokers.get(state.leader_and_isr.leader)
            if info is not None:
                found[tp] = broker_address(info[0])
        return found

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                if self._store is None:
                    self._store = ZooKeeperStore(self._cluster.zk, session_timeout=10.0, connection_timeout=5.0)
                for tp, address in self.leaders(self._store, dict(self._cluster.topics)).items():
                    answer = self.send(address, tp, 1)
                    if answer is not None and answer.error is Errors.NONE:
                        with self._lock:
                            self.acknowledged.setdefault(tp, []).append(answer)
            except KctlError:  # ZooKeeper is down, or the session expired meanwhile
                if self._store is not None:
                    self._store.close()
                    self._store = None

    def lost(self, tp: TopicPartition, final: ProduceResponse) -> int:
        with self._lock:
            return committed_records_lost(list(self.acknowledged.get(tp, ())), final)

    def committed(self, topics: Iterable[str]) -> int:
        """Records seen committed in the partitions of ``topics`` (the highest high watermark of each)."""
        live = set(topics)
        with self._lock:
            return sum(max(view.high_watermark for view in views)
                       for tp, views in self.acknowledged.items() if tp.topic in live)


@dataclass
class _ControllerLog:
    """What one controller process said about itself."""

    controller_id: int
    process: KctlProcess
    elected: list[int] = field(default_factory=list)
    ready: list[int] = field(default_factory=list)
    resigned: list[int] = field(default_factory=list)
    sessions: list[int] = field(default_factory=list)

    @classmethod
    def read(cls, controller_id: int, process: KctlProcess) -> _ControllerLog:
        text = process.log()
        return cls(
            controller_id, process,
            [int(m[2]) for m in _ELECTED.finditer(text)],
            [int(m[1]) for m in _READY.finditer(text)],
            [int(m[2]) for m in _RESIGNED.finditer(text)],
            [int(m[1], 16) for m in _RENEWED.finditer(text)],
        )

    def active_in(self) -> list[int]:
        """Epochs this process won and has not resigned (at most one for a sane controller)."""
        return [epoch for epoch in self.elected if epoch not in self.resigned]


class ChaosCluster(ProcessCluster):
    """Controller and broker processes on their own ZooKeeper server, with a record of the faults
    injected and of what the scenario asked for (topics, deletions, reassignments)."""

    def __init__(self, zookeeper: ZooKeeperEnsemble, directory: Path) -> None:
        # A chroot of its own even on a server of its own: while the server is down (a fault), a
        # server of another test run may take its port, and the processes must not join that cluster.
        self.chroot = f"/kctl-chaos-{uuid.uuid4().hex[:12]}"
        super().__init__(zookeeper.hosts + self.chroot, directory)
        self.zookeeper = zookeeper
        self.faults: list[Fault] = []
        self.topics: dict[str, int] = {}  # live topics the scenario created → partitions
        self.deleted: set[str] = set()
        self.targets: dict[TopicPartition, tuple[int, ...]] = {}
        self.verdict: Verdict | None = None
        self.producer = Producer(self)

    # --- Set-up and operations (as an operator would, through the admin tools' API) -----------------

    def start(self, brokers: Sequence[int] = BROKERS) -> None:
        first = self.start_controller(CONTROLLERS[0])
        self.wait_until(lambda: self.active_controller() == CONTROLLERS[0], 60, "the first controller", watch=first)
        for controller_id in CONTROLLERS[1:]:
            self.start_controller(controller_id)
        for broker in brokers:
            self.start_broker(broker)
        self.producer.start()

    def close(self) -> None:
        self.producer.close()
        super().close()

    @property
    def tools(self) -> AdminClient:
        return AdminClient(self.admin)

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]]) -> None:
        self.tools.create_topic(name, assignment=assignment)
        self.topics[name] = len(assignment)
        self.wait_until(lambda: len(self.leaders(name)) == len(assignment) and min(self.leaders(name).values()) >= 0,
                        60, f"the partitions of {name} to get leaders")

    def reassign(self, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Request reassignments through ``/admin/reassign_partitions`` (the ZooKeeper-mode tool's
        znode); targets may name a broker that is not running, so that they stay in progress."""
        admin.request_reassignment(self.admin, targets)
        self.targets.update((tp, tuple(replicas)) for tp, replicas in targets.items())

    def delete_topic(self, name: str) -> None:
        assert name not in self.admin.get_topic_deletions()
        self.tools.delete_topic(name, timeout=None)  # only marked: the faults go on while it is deleted
        self.topics.pop(name)
        self.deleted.add(name)

    # --- Faults ----------------------------------------------------------------------------------------

    def inject(self, kind: str, detail: str) -> None:
        self.faults.append(Fault(kind, detail))

    def kill_active_controller(self) -> int:
        """kill -9 of the active controller; returns its id."""
        controller_id = self.wait_until(self.active_controller, 60, "an active controller")
        self.controllers[controller_id].kill()
        self.inject("kill -9 controller", f"controller {controller_id} (epoch {self.controller_epoch()})")
        return controller_id

    def pause_active_controller(self, detail: str) -> tuple[KctlProcess, int]:
        """SIGSTOP of the active controller (the caller sends SIGCONT); its process and id."""
        controller_id = self.wait_until(self.active_controller, 60, "an active controller")
        process = self.controllers[controller_id]
        process.signal(signal.SIGSTOP)
        self.inject("SIGSTOP controller", f"controller {controller_id}, {detail}")
        return process, controller_id

    def wait_for_new_controller(self, epoch: int) -> int:
        """Wait until a controller of a later epoch than ``epoch`` is registered; its id."""
        self.wait_until(lambda: self.controller_epoch() > epoch and self.active_controller() is not None, 60,
                        f"a controller of an epoch after {epoch}")
        return self.wait_until(self.active_controller, 60, "an active controller")

    def stop_zookeeper(self) -> None:
        self.zookeeper.servers[0].stop()

    def start_zookeeper(self) -> None:
        """The same server again: same port, same data directory (so the same sessions and znodes)."""
        self.zookeeper.servers[0].start()
        self.zookeeper.wait_until_serving()

    def restart_broker(self, broker_id: int) -> KctlProcess:
        """Start broker ``broker_id`` again once ZooKeeper has dropped its last registration (a
        broker cannot register over the ephemeral znode of a session that has not expired yet,
        as in Kafka)."""
        self.wait_until(lambda: broker_id not in self.admin.get_all_brokers(), 60,
                        f"broker {broker_id}'s last registration to expire")
        return self.start_broker(broker_id)

    # --- What the processes said -------------------------------------------------------------------------

    def controller_logs(self) -> list[_ControllerLog]:
        return [_ControllerLog.read(int(p.name.split("-")[1]), p) for p in self.processes if p.name.startswith("controller-")]

    @staticmethod
    def read_answers(process: KctlProcess) -> list[HandledRequest]:
        """What a broker process answered the controller, from its log."""
        return read_answers(process.log())

    def broker_answers(self) -> list[tuple[int, KctlProcess, list[HandledRequest]]]:
        return [(int(p.name.split("-")[1]), p, self.read_answers(p)) for p in self.processes if p.name.startswith("broker-")]

    def history(self) -> ZooKeeperHistory:
        return ZooKeeperHistory.read(self.zookeeper.servers[0].directory / "data", self.chroot)

    # --- The verdict ----------------------------------------------------------------------------------

    def _metadata_differences(self) -> list[str]:
        """I7's second half: every running broker's metadata cache, rebuilt from the UpdateMetadata
        requests it logged accepting, against the store."""
        expected = MetadataSnapshot.from_store(self.admin)
        found = []
        for broker_id, process, answers in self.broker_answers():
            if not process.running():
                continue
            cache = BrokerMetadataCache()
            for answer in answers:
                if isinstance(answer.request, UpdateMetadataRequest) and answer.response.error is Errors.NONE:
                    cache.update(answer.request)
            found += [f"broker {broker_id}: {difference}" for difference in cache.differences(expected)]
        return found

    def _unsettled(self) -> list[str]:
        """Why the cluster is not yet quiet and converged with every broker up (empty once it is)."""
        problems = []
        live = set(self.admin.get_all_brokers())
        expected_brokers = {b for b, p in self.brokers.items() if p.running()}
        if live != expected_brokers:
            problems.append(f"registered brokers {sorted(live)}, running {sorted(expected_brokers)}")
        controller = self.active_controller()
        epoch = self.controller_epoch()
        logs = {log.controller_id: log for log in self.controller_logs() if log.process.running()}
        if controller is None or controller not in logs or epoch not in logs[controller].ready:
            problems.append(f"no controller ready in epoch {epoch} (registered: {controller})")
        if self.admin.get_partition_reassignments() is not None:
            problems.append("/admin/reassign_partitions is still there")
        if self.admin.get_topic_deletions():
            problems.append(f"topics still queued for deletion: {self.admin.get_topic_deletions()}")
        for description in self.tools.describe_topics():
            for p in description.partitions:
                tp = TopicPartition(description.name, p.partition)
                if p.adding_replicas or p.removing_replicas:
                    problems.append(f"{tp} is being reassigned: {p}")
                elif p.leader not in live or set(p.isr) != set(p.replicas):
                    problems.append(f"{tp} is not online with a full ISR: {p}")
        return problems or self._metadata_differences()

    def settle(self, timeout: float = 90.0) -> None:
        """Wait until the cluster is quiet and converged: every running broker registered, one
        controller ready, no reassignment or deletion pending, every partition led with a full ISR,
        and every broker's metadata agreeing with the store (I7)."""
        last: list[str] = []

        def settled() -> bool:
            nonlocal last
            try:
                last = self._unsettled()
            except KctlError as exc:  # ZooKeeper not back yet
                last = [f"cannot read the cluster: {exc}"]
            return not last

        deadline = time.monotonic() + timeout
        while not settled():
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster did not settle within {timeout:g}s: {last[:10]}\n{self.logs()}")
            time.sleep(0.2)

    def verify(self, settle_timeout: float = 90.0) -> Verdict:
        """After the faults: settle, then check everything the recorded history decides. The
        verdict is kept (the report counts it) and must have no violation and no loss."""
        for process in self.processes:
            if process.name.startswith("controller-") and process.running():
                process.signal(signal.SIGCONT)  # never leave a stopped controller behind
        self.settle(settle_timeout)
        verdict = self.verdict = Verdict()
        history = self.history()
        descriptions = {d.name: d for d in self.tools.describe_topics()}
        controllers = self.controller_logs()
        verdict.violations += self._check_controllers(history, controllers)
        verdict.violations += history.violations({log.controller_id: log.sessions for log in controllers})
        unclean = history.unclean_elections()
        if unclean:
            verdict.violations.append(f"I3: {unclean} unclean leader elections, and unclean election is disabled")
        answers = self.broker_answers()
        for broker_id, _, handled in answers:
            verdict.violations += check_broker_answers(broker_id, handled)
        verdict.violations += [f"I7: {problem}" for problem in self._metadata_differences()]
        verdict.violations += self._check_describe(history, descriptions)
        verdict.violations += self._check_reassignments(history)
        verdict.violations += [f"deletion: topic {t} is still there" for t in sorted(self.deleted) if t in descriptions]
        lost_records = self._check_committed(verdict)
        verdict.losses = {**self._losses(descriptions), "committed records": lost_records}
        verdict.checked = {
            "transactions": history.transactions,
            "partition versions": sum(len(rows) for _, rows in history.partitions),
            "fenced writes": len(history.fenced_writes),
            "refused fenced writes": len(history.refused_fenced_writes),
            "controller epochs": len(history.registrations),
            "broker answers": sum(len(handled) for _, _, handled in answers),
            "committed records": self.producer.committed(self.topics),
        }
        assert not verdict.violations, "\n".join(verdict.violations)
        assert not any(verdict.losses.values()), f"losses: {verdict.losses}"
        return verdict

    def _check_committed(self, verdict: Verdict) -> int:
        """I8: every record the producer saw below a leader's high watermark is still in the log of
        the partition's leader now; returns how many are not."""
        self.producer.stop()
        lost = 0
        leaders = self.producer.leaders(self.admin, self.topics)
        for tp in sorted(leaders):
            final = self.producer.send(leaders[tp], tp, 0)
            if final is None or final.error is not Errors.NONE:
                verdict.violations.append(f"I8: the leader of {tp} at {leaders[tp]} cannot show its log: {final}")
                continue
            missing = self.producer.lost(tp, final)
            if missing > 0:
                verdict.violations.append(f"I8: {missing} committed records of {tp} are missing from its leader's log "
                                          f"(epochs {final.epochs}, log end {final.log_end_offset})")
                lost += missing
        return lost

    def _check_controllers(self, history: ZooKeeperHistory, logs: list[_ControllerLog]) -> list[str]:
        """Exactly one active controller: the last registration is the one in ``/controller``, its
        process runs and is ready in that epoch; no other running process still claims an epoch;
        no epoch was claimed by two processes or by another controller than ZooKeeper registered."""
        problems = []
        if not history.registrations:
            return ["I1: no controller ever registered"]
        last = history.registrations[-1]
        registered = self.active_controller()
        if (last.epoch, last.controller_id) != (self.controller_epoch(), registered):
            problems.append(f"I1: ZooKeeper holds controller {registered} in epoch {self.controller_epoch()}, "
                            f"the last registration was {last}")
        owners = {r.epoch: r.controller_id for r in history.registrations}
        claims: dict[int, list[int]] = {}
        for log in logs:
            for epoch in log.elected:
                claims.setdefault(epoch, []).append(log.controller_id)
            if log.process.running():
                active = log.active_in()
                expected = [last.epoch] if log.controller_id == last.controller_id else []
                if active != expected:
                    problems.append(f"I1: controller {log.controller_id} (pid {log.process.pid}) considers itself "
                                    f"active in epochs {active}, expected {expected}")
        for epoch, claimants in sorted(claims.items()):
            if claimants != [owners.get(epoch)]:
                problems.append(f"I1: epoch {epoch} claimed by controllers {claimants}, registered to {owners.get(epoch)}")
        return problems

    def _check_describe(self, history: ZooKeeperHistory, descriptions: Mapping[str, TopicDescription]) -> list[str]:
        """``kctl topics describe`` (the admin tools' describe) agrees with the znodes as the
        transaction log left them."""
        problems = []
        topics, states = history.topics(), history.states()
        if sorted(descriptions) != sorted(topics):
            problems.append(f"describe: topics {sorted(descriptions)}, znodes {sorted(topics)}")
        deleting = set(history.children("/admin/delete_topics"))
        for name, description in descriptions.items():
            assignment = topics.get(name)
            if assignment is None:
                continue
            if description.topic_id != assignment.topic_id or description.marked_for_deletion != (name in deleting):
                problems.append(f"describe: topic {name} id/deletion differ from the znodes")
            described = {p.partition: p for p in description.partitions}
            if sorted(described) != sorted(assignment.partitions):
                problems.append(f"describe: {name} has partitions {sorted(described)}, znodes {sorted(assignment.partitions)}")
            for partition, ra in assignment.partitions.items():
                p = described.get(partition)
                state = states.get(TopicPartition(name, partition))
                zk = None if state is None else (state.leader_and_isr.leader, state.leader_and_isr.isr)
                if p is None or (p.replicas, p.adding_replicas, p.removing_replicas) != (
                        ra.replicas, ra.adding_replicas, ra.removing_replicas) or (p.leader, p.isr) != zk:
                    problems.append(f"describe: {name}-{partition} is {p}, znodes {ra} {zk}")
        return problems

    def _check_reassignments(self, history: ZooKeeperHistory) -> list[str]:
        """I6: every reassignment the scenario asked for reached its target (in the history, and
        at the end) unless its topic was deleted."""
        problems = []
        reached = {tp for tp, rows in history.partitions for row in rows
                   if tp in self.targets and row.replicas == self.targets[tp] and not row.adding_replicas}
        for tp, target in sorted(self.targets.items()):
            if tp.topic not in self.deleted and tp not in reached:
                problems.append(f"I6: the reassignment of {tp} to {list(target)} never completed")
        return problems

    def _losses(self, descriptions: Mapping[str, TopicDescription]) -> dict[str, int]:
        """What the faults cost (all must be zero): topics, partitions (missing or without a
        leader) and reassignments not at their target."""
        lost_topics = [t for t in self.topics if t not in descriptions]
        lost_partitions = 0
        for topic, count in self.topics.items():
            described = descriptions.get(topic)
            partitions = [] if described is None else [p for p in described.partitions if p.leader >= 0]
            lost_partitions += count - len(partitions)
        assignments = {(d.name, p.partition): p.replicas for d in descriptions.values() for p in d.partitions}
        lost_reassignments = sum(1 for tp, target in self.targets.items()
                                 if tp.topic not in self.deleted and assignments.get((tp.topic, tp.partition)) != target)
        return {"topics": len(lost_topics), "partitions": lost_partitions, "reassignments": lost_reassignments}

    def summary(self) -> dict[str, object]:
        """What the hardening report reads from the test's ``user_properties``."""
        return {
            "faults": [fault.kind for fault in self.faults],
            "details": [fault.detail for fault in self.faults],
            "losses": None if self.verdict is None else self.verdict.losses,
            "checked": None if self.verdict is None else self.verdict.checked,
        }


__all__ = ["BROKERS", "CONTROLLERS", "SESSION_TIMEOUT", "ChaosCluster", "Fault", "Producer", "Verdict",
           "committed_records_lost"]
