"""Recorded incidents: Kafka's ``controller.log`` and ``state-change.log`` read back into a ``kctl sim`` scenario.

A ZooKeeper-mode controller (Kafka 3.x, log4j's ``[%d] %p %m (%c)`` layout) logs every broker
change (``Newly added brokers: …, deleted brokers: …``), controlled shutdown (``Shutting down broker
N``), reassignment step (``Successfully updated assignment of partition …``), admin election
(``Starting replica leader election (PREFERRED) …``) and failover (``N successfully elected as the
controller``) to ``controller.log``, and every partition it creates or elects a leader for to
``state-change.log``. :func:`parse_line` turns one line into an :class:`Event`; :func:`reconstruct`
orders a cluster's events and rebuilds its topology (brokers, racks where a line names them,
topics and replica assignments, the controller candidates) and its fault timeline as a scenario
that :func:`kctl.sim.parse_scenario` accepts, with :func:`leader_changes`, the leader changes the
original controller made, to compare a replay with.

Nothing is dropped silently: a line is an event, a line of no interest (``other``), a stack
trace's line (``continuation``) or unparseable, counted under its kind (``malformed <message>``,
``not a log line``, ``not UTF-8``, ``oversized``); reconstruction counts what it cannot replay
the same way (``skipped <what>``).
"""

from __future__ import annotations

import calendar
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from kctl.bench.scenarios import FAULT_NOTE, RESTART_NOTE
from kctl.model import INT32_MAX, MAX_TOPIC_NAME_LENGTH

MAX_LINE_BYTES = 4 * 1024 * 1024
"""Longest line read (bytes, newline included); longer ones are counted as ``oversized`` and never
held in memory. A line listing 100,000 partitions of an election fits."""
AUTO_REBALANCE = "auto.leader.rebalance.enable"

CONTROLLER_LOG, STATE_CHANGE_LOG = "controller.log", "state-change.log"
LOG_NAMES = (CONTROLLER_LOG, STATE_CHANGE_LOG)
"""The files an import reads (and their rolled-over copies, ``controller.log.1`` …)."""

OTHER, BLANK, CONTINUATION, NOT_A_LOG_LINE, NOT_UTF8, OVERSIZED = (
    "other", "blank", "continuation", "not a log line", "not UTF-8", "oversized")
UNPARSED = (NOT_A_LOG_LINE, NOT_UTF8, OVERSIZED)
"""Kinds of lines that could not be read at all (besides ``malformed …``)."""


class Event(NamedTuple):
    """One line that matters: when (ms since the epoch, as the log's local time), where it came
    from (file order, byte offset: ties in time keep file order), the controller that logged it
    and its epoch (-1 when the line does not say), its kind and fields."""

    time: int
    rank: int
    offset: int
    kind: str
    controller: int
    epoch: int
    fields: tuple[Any, ...]


_LINE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (.*) \(([\w.$]+)\)")
_CONTINUATION = re.compile(r"\s+at |\s*\.\.\. \d+ more$|Caused by: |[\w.$]+(Exception|Error|Throwable)(: |$)")
_IDENT = re.compile(r"\[Controller id=(\d{1,10})(?: epoch=(\d{1,10}))?\] ")
_RACK = re.compile(r"\(id: (\d{1,10}) rack: ([^()\s]{1,255})\)")
_IDS = r"([\d, ]*)"
_TP = r"(\S{1,300})"

_MESSAGES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    # (kind, the start that names the message, its pattern); kafka.controller.KafkaController
    ("elected", "", re.compile(r"(\d{1,10}) successfully elected as the controller\. Epoch incremented to (\d{1,10})")),
    ("live", "Currently active brokers in the cluster:",
     re.compile(r"Currently active brokers in the cluster: \w*\(" + _IDS + r"\)")),
    ("brokers", "Newly added brokers:", re.compile(r"Newly added brokers: " + _IDS + r", deleted brokers: " + _IDS
                                                   + r", bounced brokers: " + _IDS + r", all live brokers: " + _IDS)),
    ("shutdown", "Shutting down broker ", re.compile(r"Shutting down broker (\d{1,10})")),
    ("assignment", "Successfully updated assignment of partition ",
     re.compile(r"Successfully updated assignment of partition " + _TP + r" to ReplicaAssignment\(replicas=" + _IDS
                + r", addingReplicas=" + _IDS + r", removingReplicas=" + _IDS + r"\)")),
    ("election", "Starting replica leader election ",
     re.compile(r"Starting replica leader election \((PREFERRED|UNCLEAN)\) for partitions ?(\S*) triggered by (\w+)")),
    ("rebalance_check", "Checking need to trigger auto leader balancing", re.compile(r"Checking need to trigger")),
    # state.change.logger
    ("created", "Changed partition ", re.compile(r"Changed partition " + _TP + r" state from NonExistentPartition to "
                                                 r"NewPartition with assigned replicas " + _IDS)),
    ("leader", "Changed partition ", re.compile(r"Changed partition " + _TP + r" from \w+ to OnlinePartition with "
                                                r"state LeaderAndIsr\(leader=(-?\d{1,10}), leaderEpoch=(\d{1,10}),")),
    ("leader", "Partition ", re.compile(r"Partition " + _TP + r" state changed to \(Leader:(-?\d{1,10}),ISR:[\d,]*,"
                                        r"(?:LeaderRecoveryState:\w+,)?LeaderEpoch:(\d{1,10}),")),
    ("replicas", "Sending become-", re.compile(
        r"Sending become-\w+ LeaderAndIsr request LeaderAndIsrPartitionState\(topicName='([^']{1,300})', "
        r"partitionIndex=(\d{1,10}), .*?replicas=\[" + _IDS + r"\], addingReplicas=\[" + _IDS + r"\]")),
)
_IGNORED = ("Changed partition ", "Partition ")
"""Starts shared by messages of interest and others (``… state from OnlinePartition to
OfflinePartition``): a line that matches none of their patterns is one of the others (as is one
that does not start as a pattern with no start of its own)."""


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.split(r"[, ]+", text.strip()) if part)


def _int32(*values: int) -> bool:
    return all(-1 <= v <= INT32_MAX for v in values)


def _partition(text: str) -> tuple[str, int] | None:
    """``topic-3`` as (topic, 3), or None if it is not a partition's name."""
    topic, _, number = text.rpartition("-")
    if (not topic or len(topic) > MAX_TOPIC_NAME_LENGTH or not re.fullmatch(r"[A-Za-z0-9._-]+", topic)
            or not number.isdigit() or int(number) > INT32_MAX):
        return None
    return topic, int(number)


def _partitions(text: str) -> tuple[tuple[str, int], ...] | None:
    parts = [_partition(p) for p in text.split(",") if p]
    return None if any(p is None for p in parts) else tuple(p for p in parts if p is not None)


def parse_line(line: bytes | str, rank: int = 0, offset: int = 0) -> Event | str:
    """One log line (without its newline) as an :class:`Event`, or the kind it is counted under."""
    if isinstance(line, bytes):
        if len(line) >= MAX_LINE_BYTES:
            return OVERSIZED
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError:
            return NOT_UTF8
    elif len(line) >= MAX_LINE_BYTES:
        return OVERSIZED
    line = line.rstrip("\r")
    if "\ufffd" in line or "\x00" in line:  # bytes Hadoop could not decode, or binary data
        return NOT_UTF8
    m = _LINE.fullmatch(line)
    if not line.strip():
        return BLANK
    if m is None:
        return CONTINUATION if _CONTINUATION.match(line) else NOT_A_LOG_LINE
    try:
        stamp = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return "malformed timestamp"
    time = calendar.timegm(stamp.timetuple()) * 1000 + int(m[2])  # the log's local time, wherever this runs
    message = m[4]
    ident = _IDENT.match(message)
    controller, epoch = (int(ident[1]), int(ident[2]) if ident[2] else -1) if ident else (-1, -1)
    body = message[ident.end():] if ident else message
    racks = tuple((int(b), r) for b, r in _RACK.findall(message) if r != "null")
    if ident is None:
        return Event(time, rank, offset, "racks", -1, -1, racks) if racks else OTHER
    for kind, start, pattern in _MESSAGES:
        if not body.startswith(start):
            continue
        found = pattern.match(body)
        if found is None:
            if start in _IGNORED or not start:
                continue
            return f"malformed {kind}"
        fields = _fields(kind, found)
        if fields is None:
            return f"malformed {kind}"
        return Event(time, rank, offset, kind, controller, epoch, fields)
    if racks:
        return Event(time, rank, offset, "racks", controller, epoch, racks)
    return OTHER


def _fields(kind: str, m: re.Match[str]) -> tuple[Any, ...] | None:
    """The fields of a matched message, or None when a value is out of range."""
    groups = m.groups()
    if kind in ("created", "leader", "assignment"):
        tp = _partition(groups[0])
        if tp is None:
            return None
        if kind == "created":
            replicas = _ids(groups[1])
            return (tp, replicas) if replicas and _int32(*replicas) else None
        if kind == "leader":
            leader, epoch = int(groups[1]), int(groups[2])
            return (tp, leader, epoch) if _int32(leader, epoch) else None
        lists = (_ids(groups[1]), _ids(groups[2]), _ids(groups[3]))
        return (tp, *lists) if lists[0] and all(_int32(*ids) for ids in lists) else None
    if kind == "replicas":
        tp = _partition(f"{groups[0]}-{groups[1]}")
        replicas, adding = _ids(groups[2]), _ids(groups[3])
        return (tp, replicas, adding) if tp is not None and replicas and _int32(*replicas, *adding) else None
    if kind == "election":
        partitions = _partitions(groups[1])
        return None if partitions is None else (groups[0].lower(), partitions, groups[2])
    numbers = tuple(_ids(g) for g in groups)
    if not all(_int32(*ids) for ids in numbers):
        return None
    if kind == "elected":
        return tuple(ids[0] for ids in numbers)
    return numbers


def file_rank(name: str) -> int:
    """Where a file's lines go among a broker's at the same millisecond: older rolled-over files
    (``controller.log.2``) before newer ones, controller.log before state-change.log."""
    base, _, roll = name.partition(".log")
    index = int(roll[1:]) if roll[1:].isdigit() else 0
    return (0 if base == "controller" else 1) * 1_000_000 - min(index, 999_999)


# --- Reconstruction ---------------------------------------------------------------------------------


@dataclass
class Incident:
    """A cluster's logs reconstructed: its scenario (``kctl sim`` TOML data), the leader changes
    its controllers made, and what could not be replayed (counts by kind)."""

    name: str
    scenario: dict[str, Any]
    leaders: list[tuple[str, int, int]]
    skipped: Counter[str] = field(default_factory=Counter)


Step = tuple[int, int, dict[str, Any]]
"""(time, order, step)."""


def reconstruct(name: str, events: Iterable[Event]) -> Incident:
    """The scenario of one cluster's events (any order) and the leader changes in them."""
    ordered = sorted(events, key=lambda e: (e.time, e.rank, e.offset))
    return _Timeline(name).play(ordered)


def leader_changes(events: Iterable[Event]) -> list[tuple[str, int, int]]:
    """Each partition's leader changes as its controllers logged them, in order: ``(partition,
    new leader, leader epoch)`` for each election or ISR change that left a different leader
    (-1: none), a controller's epoch after its predecessors'; a state logged twice counts once."""
    states = sorted((e for e in events if e.kind == "leader"), key=lambda e: (e.epoch, e.time, e.rank, e.offset))
    last: dict[tuple[str, int], tuple[int, int]] = {}
    changes = []
    for event in states:
        tp, leader, epoch = event.fields
        before = last.get(tp)
        if before is not None and epoch <= before[1]:
            continue
        last[tp] = (leader, epoch)
        if before is None or before[0] != leader:
            changes.append((f"{tp[0]}-{tp[1]}", leader, epoch))
    return changes


class _Timeline:
    """Walks a cluster's events in time order and writes the steps that replay them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.skipped: Counter[str] = Counter()
        self.brokers: set[int] = set()
        self.racks: dict[int, str] = {}
        self.controllers: list[int] = []
        self.live: set[int] | None = None
        self.shutting: dict[int, int] = {}  # broker -> when its controlled shutdown began
        self.assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self.initial: list[str] = []  # topics that exist before the first step
        self.reassigning: dict[tuple[str, int], tuple[int, ...]] = {}
        self.steps: list[Step] = []
        self.start: int | None = None
        self.auto_rebalance = False
        self.down_at_start: set[int] = set()

    def play(self, events: Sequence[Event]) -> Incident:
        for event in events:
            # a controller: elected, or logging state changes in its epoch (any broker logs with its ident)
            controller = event.fields[0] if event.kind == "elected" else event.controller if event.epoch >= 0 else -1
            if controller >= 0 and controller not in self.controllers:
                self.controllers.append(controller)
                self.brokers.add(controller)
            getattr(self, f"on_{event.kind}")(event)
        return Incident(self.name, self.scenario(), leader_changes(events), self.skipped)

    def at(self, time: int) -> int:
        """Milliseconds since the first step (which starts the timeline)."""
        if self.start is None:
            self.start = time
            self.down_at_start = (self.brokers - self.live) if self.live is not None else set()
        return time - self.start

    def step(self, time: int, action: str, note: str = "", **fields: Any) -> None:
        at = self.at(time)
        step = {"at": at / 1000, "action": action, **fields}
        if note:
            step["note"] = note
        self.steps.append((at, len(self.steps), step))

    # --- events ---

    def on_racks(self, event: Event) -> None:
        for broker, rack in event.fields:
            self.brokers.add(broker)
            self.racks.setdefault(broker, rack)

    def on_elected(self, event: Event) -> None:
        pass  # a controller (see play); its live brokers follow

    def on_live(self, event: Event) -> None:
        """A new controller's view of the live brokers: who died or started while none watched."""
        live = set(event.fields[0])
        self.brokers |= live
        if self.live is not None and (self.start is not None or self.assignments):
            for broker in sorted(self.live - live):
                self.stopped(event.time, broker)
            for broker in sorted(live - self.live):
                self.step(event.time, "start_broker", RESTART_NOTE, broker=broker)
        self.live = live

    def on_brokers(self, event: Event) -> None:
        added, deleted, bounced, live = (set(ids) for ids in event.fields)
        self.brokers |= live | deleted
        if self.start is None and not self.assignments:  # before any topic: the cluster as it starts
            self.live = live
            return
        for broker in sorted(deleted):
            self.stopped(event.time, broker)
        for broker in sorted(bounced):
            self.step(event.time, "kill_broker", FAULT_NOTE, broker=broker)
            self.step(event.time, "start_broker", RESTART_NOTE, broker=broker)
        for broker in sorted(added):
            self.step(event.time, "start_broker", RESTART_NOTE, broker=broker)
        self.live = live

    def stopped(self, time: int, broker: int) -> None:
        began = self.shutting.pop(broker, None)
        if began is not None:
            self.step(began, "shutdown_broker", FAULT_NOTE, broker=broker)
        else:
            self.step(time, "kill_broker", FAULT_NOTE, broker=broker)

    def on_shutdown(self, event: Event) -> None:
        for broker in event.fields[0]:
            self.shutting.setdefault(broker, event.time)

    def on_created(self, event: Event) -> None:
        (topic, partition), replicas = event.fields
        self.brokers.update(replicas)
        assignment = self.assignments.get(topic)
        if assignment is None:
            self.assignments[topic] = {partition: replicas}
            if self.start is None:
                self.initial.append(topic)
            else:
                self.step(event.time, "create_topic", name=topic)
        elif self.start is None or self._created_now(topic, event.time):
            assignment[partition] = replicas
        else:
            self.skipped["skipped partitions added to an existing topic"] += 1

    def _created_now(self, topic: str, time: int) -> bool:
        """Whether ``topic``'s create step is the last one, at ``time``: its partitions arrive line by line."""
        return bool(self.steps) and self.steps[-1][2].get("name") == topic and self.steps[-1][0] == self.at(time)

    def on_replicas(self, event: Event) -> None:
        """A LeaderAndIsr naming a partition's replicas: how a topic that existed before the logs is placed."""
        (topic, partition), replicas, adding = event.fields
        self.brokers.update(replicas)
        if topic not in self.assignments and self.start is None:
            self.initial.append(topic)
            self.assignments[topic] = {}
        if topic in self.initial and partition not in self.assignments[topic]:
            self.assignments[topic][partition] = tuple(r for r in replicas if r not in adding)

    def on_assignment(self, event: Event) -> None:
        tp, replicas, adding, removing = event.fields
        self.brokers.update(replicas)
        if not adding and not removing:
            self.reassigning.pop(tp, None)
            return
        target = tuple(r for r in replicas if r not in removing)
        if self.reassigning.get(tp) == target:
            return
        self.reassigning[tp] = target
        key = f"{tp[0]}-{tp[1]}"
        last = self.steps[-1][2] if self.steps else None
        if last is not None and last["action"] == "reassign" and key not in last["partitions"]:
            last["partitions"][key] = list(target)  # one request's partitions, handled one after another
        else:
            self.step(event.time, "reassign", partitions={key: list(target)})

    def on_election(self, event: Event) -> None:
        kind, partitions, trigger = event.fields
        if trigger == "AutoTriggered":
            self.auto_rebalance = True
        elif partitions:
            self.step(event.time, "elect_leaders", kind=kind, partitions=[f"{t}-{p}" for t, p in partitions])

    def on_rebalance_check(self, event: Event) -> None:
        self.auto_rebalance = True

    def on_leader(self, event: Event) -> None:
        pass  # compared with a replay by leader_changes, not replayed

    # --- the scenario ---

    def scenario(self) -> dict[str, Any]:
        brokers = sorted(self.brokers)
        cluster: dict[str, Any] = {"brokers": brokers}
        if self.racks and set(self.racks) >= set(brokers):
            cluster["racks"] = {str(b): self.racks[b] for b in brokers}
        elif self.racks:
            self.skipped["skipped racks (not every broker's rack is logged)"] += 1
        cluster["controllers"] = [c for c in self.controllers if c in self.brokers] or brokers[:1]
        cluster["config"] = {AUTO_REBALANCE: self.auto_rebalance}
        topics, complete = [], set()
        for topic, assignment in sorted(self.assignments.items()):
            if sorted(assignment) != list(range(len(assignment))) or len({len(r) for r in assignment.values()}) != 1:
                self.skipped["skipped topics whose assignment is not fully logged"] += 1
                continue
            complete.add(topic)
            if topic in self.initial:
                topics.append({"name": topic, "assignment": [list(assignment[p]) for p in sorted(assignment)]})
        steps = []
        for _, _, step in sorted(self.steps, key=lambda s: (s[0], s[1])):
            if step["action"] == "create_topic":
                if step["name"] not in complete:
                    continue
                assignment = self.assignments[step["name"]]
                step["assignment"] = [list(assignment[p]) for p in sorted(assignment)]
            steps.append(step)
        steps = [{"at": 0.0, "action": "kill_broker", "broker": b, "note": FAULT_NOTE}
                 for b in sorted(self.down_at_start)] + steps
        return {"name": self.name, "description": f"Imported from the Kafka logs of {self.name}.",
                "cluster": cluster, "topics": topics, "steps": steps}


__all__ = ["CONTROLLER_LOG", "Event", "Incident", "LOG_NAMES", "MAX_LINE_BYTES", "STATE_CHANGE_LOG", "file_rank",
           "leader_changes", "parse_line", "reconstruct"]
