"""Plays a :class:`~kctl.sim.scenario.Scenario` on a simulated cluster and reports what it went through.

Each step waits for its time, acts on an :class:`~kctl.cluster.EmbeddedCluster`, optionally runs
until the cluster is stable, and is then measured: leaders moved, requests sent, the controller's
offline-partition count, invariants I1–I8 and, for ``expect`` steps, the expectations.

Availability is measured on the data plane, where clients would see it: a partition is *led*
while a running broker process has accepted a LeaderAndIsr naming itself leader and has not given
the partition up since (become a follower, stopped the replica, lost its log directory, stopped).
The runner replays what every broker process answered (``BrokerAgent.handled``, stamped with the
virtual clock) together with the broker stops it caused itself, so an outage is measured exactly,
without polling, and a partition being deleted is not counted as unavailable.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from kctl.assignment import BrokerMetadata, assign_replicas_to_brokers
from kctl.broker import HandledRequest
from kctl.cluster import EmbeddedCluster, PartitionDescription
from kctl.config import ControllerConfig, describe_components
from kctl.engine_api import default_engine
from kctl.errors import Errors, KctlError
from kctl.model import EPOCH_DURING_DELETE, TopicPartition
from kctl.messages import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
)
from kctl.scheduler import young_collections_only
from kctl.sim.scenario import ACTIONS, Scenario, Step, TopicSpec

# --- The report --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepResult:
    """What one step did and what the cluster went through meanwhile (times in scenario seconds)."""

    number: int
    action: str
    description: str
    note: str
    start: float
    end: float
    leaders_moved: int
    lost_leader: int
    """Partitions that were left without a leader during the step."""
    all_led_after: float | None
    """Seconds until each of them was led again (the longest wait; None while one is not led yet)."""
    offline_partitions: int
    """The controller's ``OfflinePartitionsCount`` when the step ends."""
    requests: int
    """Controller-to-broker requests sent during the step."""
    settled: bool | None
    """Whether the cluster became stable after the action (None: the step does not wait)."""
    failures: tuple[str, ...] = ()
    violations: tuple[str, ...] = ()
    """Invariant violations first seen after this step."""
    error: str | None = None
    """The action failed (the run stops here)."""


@dataclass(frozen=True)
class StepProgress:
    """How far a step that is still running has got (``kctl sim`` shows it for long steps)."""

    number: int
    action: str
    cluster_seconds: float
    """Scenario seconds since the step began."""
    requests_sent: int
    """Controller-to-broker requests sent since the step began."""
    requests_answered: int
    """Answers brokers gave since the step began (to those requests, or to ones queued before)."""


@dataclass(frozen=True)
class FaultRecovery:
    """How partitions fared after one fault step."""

    step: int
    action: str
    description: str
    at: float
    lost_leader: int
    all_led_after: float | None
    """Seconds until every partition it left without a leader was led again (for a step of several
    faults, such as a rolling restart, the longest wait); None: some never were."""
    unavailable_partition_seconds: float


@dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class Report:
    """The outcome of a run; :meth:`to_json` is what ``kctl sim --json`` writes."""

    name: str
    source: str
    engine: str
    seed: int
    steps: tuple[StepResult, ...]
    faults: tuple[FaultRecovery, ...]
    unavailable_partition_seconds: float
    partitions_without_leader_at_end: int
    leader_moves: int
    requests_by_type: dict[str, int]
    unclean_elections: int
    partitions: tuple[PartitionRow, ...]
    metrics: dict[str, float]
    duration: float
    """Scenario seconds from the first step to the end of the last."""
    setup_violations: tuple[str, ...] = ()

    @property
    def failures(self) -> list[tuple[int, str]]:
        """Failed expectations and errors, as (step, message)."""
        return [(s.number, f) for s in self.steps for f in (*s.failures, *([s.error] if s.error else []))]

    @property
    def violations(self) -> list[tuple[int, str]]:
        """Invariant violations as (step first seen after, violation); step 0 is the setup."""
        return [(0, v) for v in self.setup_violations] + [(s.number, v) for s in self.steps for v in s.violations]

    @property
    def ok(self) -> bool:
        return not self.failures and not self.violations

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["failures"] = [{"step": n, "message": m} for n, m in self.failures]
        data["invariant_violations"] = [{"step": n, "violation": v} for n, v in self.violations]
        del data["setup_violations"]
        return data


# --- Data-plane leadership ----------------------------------------------------------------------------


@dataclass
class _Outage:
    tp: TopicPartition
    step: int
    start: float
    end: float | None = None

    def seconds(self, now: float) -> float:
        return (now if self.end is None else self.end) - self.start

    @property
    def counts(self) -> bool:
        """Zero-length gaps (the old leader stepped down at the instant the new one took over) do not."""
        return self.end is None or self.end > self.start


Process = tuple[int, int]
"""A broker process: (broker id, broker epoch)."""
S = TypeVar("S", LeaderAndIsrPartitionState, StopReplicaPartitionState)


def _accepted(states: Iterable[S], error: Errors, partition_errors: Mapping[TopicPartition, Errors]) -> list[S]:
    """The partition states a broker applied (its answer was NONE for the request and the partition)."""
    if error is not Errors.NONE:
        return []
    return [s for s in states if partition_errors.get(s.tp, Errors.NONE) is Errors.NONE]


class _Leadership:
    """Replays broker answers and stops, in time order, to know when each partition was led."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self._cluster = cluster
        self._cursor: dict[int, int] = {}
        self._stops: list[tuple[float, Process, tuple[TopicPartition, ...] | None]] = []
        self._holder: dict[TopicPartition, Process] = {}
        self._held: dict[Process, set[TopicPartition]] = {}
        self._last_leader: dict[TopicPartition, int] = {}
        self._open: dict[TopicPartition, _Outage] = {}
        self.outages: list[_Outage] = []
        self.moves = 0
        self._step = 0

    def stopped(self, broker: int, epoch: int, partitions: Iterable[TopicPartition] | None = None) -> None:
        """The process ``(broker, epoch)`` stopped now, or (with ``partitions``) lost those replicas."""
        lost = None if partitions is None else tuple(partitions)
        self._stops.append((self._cluster.now(), (broker, epoch), lost))

    def observe(self, step: int) -> int:
        """Replay everything since the last call as happening during ``step``; returns leader moves."""
        self._step, moves = step, self.moves
        # (time, 0 for an answer and 1 for a stop, what to do); the sort is stable, so each broker's
        # answers keep their order, and a process's answers come before its stop at the same time.
        events: list[tuple[float, int, Callable[[], None]]] = []
        for broker, agent in sorted(self._cluster.brokers.items()):
            handled = agent.notable  # the answers that can change leadership among them
            start = self._cursor.get(broker, 0)
            self._cursor[broker] = len(handled)
            # UpdateMetadata (most of what a broker answers) changes no leadership.
            events += [(h.time, 0, self._answer(broker, h)) for h in handled[start:]
                       if isinstance(h.request, (LeaderAndIsrRequest, StopReplicaRequest))]
        events += [(t, 1, self._stop(t, process, lost)) for t, process, lost in self._stops]
        self._stops.clear()
        for _, _, apply in sorted(events, key=lambda e: e[:2]):
            apply()
        return self.moves - moves

    def _answer(self, broker: int, handled: HandledRequest) -> Callable[[], None]:
        request, response, time = handled.request, handled.response, handled.time
        process = (broker, handled.broker_epoch)

        def apply() -> None:
            if isinstance(request, LeaderAndIsrRequest) and isinstance(response, LeaderAndIsrResponse):
                for state in _accepted(request.partition_states, response.error, response.partition_errors):
                    if state.leader == broker:
                        self._led(state.tp, process, time)
                    elif self._holder.get(state.tp) == process:
                        self._unled(state.tp, time)
            elif isinstance(request, StopReplicaRequest) and isinstance(response, StopReplicaResponse):
                for stop in _accepted(request.partition_states, response.error, response.partition_errors):
                    if stop.leader_epoch == EPOCH_DURING_DELETE:
                        self._forget(stop.tp, time)
                    elif self._holder.get(stop.tp) == process:
                        self._unled(stop.tp, time)
        return apply

    def _stop(self, time: float, process: Process, lost: tuple[TopicPartition, ...] | None) -> Callable[[], None]:
        def apply() -> None:
            held = self._held.get(process, set())
            for tp in sorted(held) if lost is None else [tp for tp in lost if tp in held]:
                self._unled(tp, time)
        return apply

    def _led(self, tp: TopicPartition, process: Process, time: float) -> None:
        previous = self._holder.get(tp)
        if previous == process:
            return
        if previous is not None:
            self._held[previous].discard(tp)
        self._holder[tp] = process
        self._held.setdefault(process, set()).add(tp)
        outage = self._open.pop(tp, None)
        if outage is not None:
            outage.end = time
        last = self._last_leader.get(tp)
        if last is not None and last != process[0]:
            self.moves += 1
        self._last_leader[tp] = process[0]

    def _unled(self, tp: TopicPartition, time: float) -> None:
        process = self._holder.pop(tp)
        self._held[process].discard(tp)
        outage = _Outage(tp, self._step, time)
        self._open[tp] = outage
        self.outages.append(outage)

    def _forget(self, tp: TopicPartition, time: float) -> None:
        """The partition is being deleted: it stops counting (an outage it was in ends now)."""
        process = self._holder.pop(tp, None)
        if process is not None:
            self._held[process].discard(tp)
        outage = self._open.pop(tp, None)
        if outage is not None:
            outage.end = time
        self._last_leader.pop(tp, None)

    def losses(self, step: int, now: float) -> tuple[int, float | None, float]:
        """For outages that began during ``step``: how many, the longest (None: one has not ended),
        and their partition-seconds up to ``now``."""
        outages = [o for o in self.outages if o.step == step and o.counts]
        longest = None if any(o.end is None for o in outages) else max((o.seconds(now) for o in outages), default=0.0)
        return len(outages), longest, sum(o.seconds(now) for o in outages)

    def unled(self) -> int:
        """Partitions without a leader right now (among those that had one)."""
        return len(self._open)


# --- Playing a scenario ----------------------------------------------------------------------------------

StepCallback = Callable[[StepResult], None]
ProgressCallback = Callable[[StepProgress], None]


STORE, TRANSPORT = "memory", "inprocess"
"""The store and transport a simulated cluster runs on."""


def components(scenario: Scenario, engine: str | None = None) -> str:
    """The engine, store, transport and leader selectors ``scenario`` runs with, in one line."""
    return describe_components(engine or default_engine(), STORE, TRANSPORT, ControllerConfig.coerce(scenario.cluster.config))


def run_scenario(
    scenario: Scenario,
    *,
    engine: str | None = None,
    seed: int | None = None,
    on_step: StepCallback | None = None,
    on_start: Callable[[EmbeddedCluster], None] | None = None,
    on_progress: ProgressCallback | None = None,
    record_requests: bool = True,
) -> Report:
    """Play ``scenario`` (``seed`` overrides its own) and report; ``on_step`` sees each step as it ends,
    ``on_start`` the cluster once its topics exist, before the first step (fleets sample it), and
    ``on_progress`` a running step after each slice of cluster time it waits through. Without
    ``record_requests`` the cluster keeps no record of each request sent and answered, nor its
    state-change lines (see :class:`~kctl.cluster.EmbeddedCluster`), which nothing in the run or
    its report reads:
    ``kctl sim`` and ``kctl demo`` play that way."""
    with fewer_collections():
        run = _Run(scenario, engine or default_engine(), scenario.cluster.seed if seed is None else seed, on_step, on_start,
                   on_progress, record_requests)
        return run.play()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Keep the garbage collector out of a simulation's way while it runs.

    A run keeps every request it sent and every answer until it ends (for the report and the
    invariants): millions of objects, which Python's collector would walk again at every
    collection of the older generations, most of a long run's collection time (at 50 × 1,000 in
    the demo, 8 such collections took 1.8 s and 177 young ones 1.1 s, of 8.4 s). While a run
    plays, only young objects are collected (and less often): the cyclic garbage a run makes
    (closures of a reassignment, copies of a topic's assignment) dies young; what exists is frozen
    (:func:`gc.freeze`, a constant-time move) after every slice of cluster time, and the older
    generations are never collected. When the run ends everything is unfrozen and the thresholds
    are restored.
    """
    try:
        with young_collections_only():
            yield
    finally:
        gc.unfreeze()


def describe_all(cluster: EmbeddedCluster) -> dict[TopicPartition, PartitionDescription]:
    """Every partition of every topic in the store, topics in name order."""
    return {
        TopicPartition(topic, d.partition): d
        for topic in sorted(cluster.store.get_all_topics())
        for d in cluster.describe(topic)
    }


class _Run:
    def __init__(self, scenario: Scenario, engine: str, seed: int, on_step: StepCallback | None,
                 on_start: Callable[[EmbeddedCluster], None] | None = None,
                 on_progress: ProgressCallback | None = None, record_requests: bool = True) -> None:
        self.scenario, self.engine, self.seed, self.on_step, self.on_start = scenario, engine, seed, on_step, on_start
        self.on_progress = on_progress
        spec = scenario.cluster
        self.cluster = EmbeddedCluster(
            list(spec.brokers), spec.racks, spec.config, engine, STORE, TRANSPORT, seed=seed,
            controllers=list(spec.controllers), record_requests=record_requests,
            record_state_changes=record_requests,
        )
        self.leadership = _Leadership(self.cluster)
        self.t0 = 0.0
        self.sent = self.first_sent = 0
        self.seen_violations: set[str] = set()
        self.failures: list[str] = []

    def now(self) -> float:
        """Scenario time: seconds since the steps began."""
        return self.cluster.now() - self.t0

    def play(self) -> Report:
        with self.cluster:
            for topic in self.scenario.topics:
                self.cluster.create_topic(**topic.create_arguments(), wait=False)
            self.cluster.run_until_stable()
            self.t0 = self.cluster.now()
            self.leadership.observe(0)
            self.sent = self.first_sent = self.cluster.sent_request_count()
            setup_violations = self.new_violations()
            if self.on_start is not None:
                self.on_start(self.cluster)
            results = []
            for step in self.scenario.steps:
                result = self.step(step)
                results.append(result)
                if self.on_step is not None:
                    self.on_step(result)
                if result.error is not None:
                    break
            return self.report(tuple(results), setup_violations)

    def new_violations(self) -> tuple[str, ...]:
        new = [v for v in self.cluster.check_invariants() if v not in self.seen_violations]
        self.seen_violations.update(new)
        return tuple(new)

    def step(self, step: Step) -> StepResult:
        wanted = step.at if step.at is not None else self.now() + (step.after or 0.0)
        if wanted > self.now():
            self.cluster.advance(wanted - self.now())
        start, self.failures = self.now(), []
        error, settled = None, None
        self.cluster.on_progress = self.slice_done(step, start)
        try:
            description = getattr(self, f"do_{step.action}")(step.args, step)
            if ACTIONS[step.action].settles and step.wait:
                settled = self.cluster.run_until_stable(step.timeout)
        except KctlError as e:
            description, error = "failed", f"{type(e).__name__}: {e}"
        finally:
            self.cluster.on_progress = None
        moved = self.leadership.observe(step.number)
        lost, all_led_after, _ = self.leadership.losses(step.number, self.cluster.now())
        sent = self.cluster.sent_request_count()
        requests, self.sent = sent - self.sent, sent
        return StepResult(
            step.number, step.action, description, step.note, start, self.now(), moved, lost, all_led_after,
            int(self.cluster.metrics()["OfflinePartitionsCount"]), requests, settled, tuple(self.failures),
            self.new_violations(), error,
        )

    def slice_done(self, step: Step, start: float) -> Callable[[], None]:
        """What the cluster calls after each slice of cluster time while the step runs: what the
        slice built leaves the collector's view (see :func:`fewer_collections`), and
        ``on_progress`` hears how far the step has got."""
        report, cluster, sent = self.on_progress, self.cluster, self.sent
        answered = self.answered() if report is not None else 0

        def done() -> None:
            gc.freeze()
            if report is not None:
                report(StepProgress(step.number, step.action, self.now() - start,
                                    cluster.sent_request_count() - sent, self.answered() - answered))
        return done

    def answered(self) -> int:
        """Controller requests every broker has answered so far."""
        return sum(agent.answer_count for agent in self.cluster.brokers.values())

    def report(self, steps: tuple[StepResult, ...], setup_violations: tuple[str, ...]) -> Report:
        cluster, now = self.cluster, self.cluster.now()
        faults = []
        for result in steps:
            if ACTIONS[result.action].fault:
                lost, all_led, seconds = self.leadership.losses(result.number, now)
                faults.append(FaultRecovery(result.number, result.action, result.description, result.start, lost,
                                            all_led, seconds))
        partitions = tuple(
            PartitionRow(tp.topic, tp.partition, d.leader, d.leader_epoch, d.replicas, d.isr)
            for tp, d in describe_all(cluster).items()
        )
        return Report(
            name=self.scenario.name,
            source=self.scenario.source,
            engine=self.engine,
            seed=self.seed,
            steps=steps,
            faults=tuple(faults),
            unavailable_partition_seconds=sum(o.seconds(now) for o in self.leadership.outages if o.counts),
            partitions_without_leader_at_end=self.leadership.unled(),
            leader_moves=sum(s.leaders_moved for s in steps),
            requests_by_type=dict(sorted(cluster.sent_request_apis(self.first_sent).items())),
            unclean_elections=cluster.unclean_leader_elections(),
            partitions=partitions,
            metrics=cluster.metrics(),
            duration=self.now(),
            setup_violations=setup_violations,
        )

    # --- Actions: each returns what happened, in a few words ------------------------------------------

    def do_create_topic(self, args: Mapping[str, Any], step: Step) -> str:
        assignment = self.cluster.create_topic(**TopicSpec(**args).create_arguments(), wait=False)
        return f"created {args['name']}: {plural(len(assignment), 'partition')}, RF {len(assignment[0])}"

    def do_delete_topic(self, args: Mapping[str, Any], step: Step) -> str:
        self.cluster.delete_topic(args["topic"], wait=False)
        return f"deletion of {args['topic']} requested"

    def do_kill_broker(self, args: Mapping[str, Any], step: Step) -> str:
        broker = args["broker"]
        self.stop_broker(broker, controlled=False)
        return f"broker {broker} crashed"

    def do_start_broker(self, args: Mapping[str, Any], step: Step) -> str:
        self.cluster.start_broker(args["broker"])
        return f"broker {args['broker']} started (broker epoch {self.cluster.brokers[args['broker']].broker_epoch})"

    def do_shutdown_broker(self, args: Mapping[str, Any], step: Step) -> str:
        broker = args["broker"]
        took = self.stop_broker(broker, controlled=True)
        return f"broker {broker} shut down in {took:.3f} s (controlled)"

    def stop_broker(self, broker: int, controlled: bool) -> float:
        """Stop a broker process and tell the leadership replay; returns how long it took."""
        epoch, start = self.cluster.brokers[broker].broker_epoch, self.cluster.now()
        if controlled:
            self.cluster.shutdown_broker(broker)
        else:
            self.cluster.kill_broker(broker)
        self.leadership.stopped(broker, epoch)
        return self.cluster.now() - start

    def do_rolling_restart(self, args: Mapping[str, Any], step: Step) -> str:
        brokers = args.get("brokers", self.cluster.broker_ids)
        controlled = args.get("controlled", True)
        for broker in brokers:
            self.stop_broker(broker, controlled)
            self.cluster.start_broker(broker)
            self.cluster.run_until_stable(step.timeout, f"the cluster to be stable after restarting broker {broker}")
            self.cluster.advance(args.get("interval", 0.0))
        how = "controlled shutdowns" if controlled else "crashes"
        return f"restarted {plural(len(brokers), 'broker')} one by one ({how})"

    def do_reassign(self, args: Mapping[str, Any], step: Step) -> str:
        targets = args["partitions"] if "partitions" in args else self.whole_topic_move(args["topic"], args["brokers"])
        results = self.cluster.reassign(targets, wait=False)
        return f"reassigning {plural(len(targets), 'partition')}" + _errors(results.values())

    def whole_topic_move(self, topic: str, brokers: tuple[int, ...]) -> dict[TopicPartition, list[int]]:
        """Kafka's assignment of the topic over ``brokers`` (what ``kafka-reassign-partitions
        --generate`` proposes), drawn from the simulation's random stream."""
        described = self.cluster.describe(topic)
        metadata = [BrokerMetadata(b, self.cluster.racks[b]) for b in brokers]
        placed = assign_replicas_to_brokers(metadata, len(described), len(described[0].replicas),
                                            rng=self.cluster.scheduler.rng)
        return {TopicPartition(topic, p): replicas for p, replicas in placed.items()}

    def partitions(self, args: Mapping[str, Any]) -> list[TopicPartition]:
        """The partitions a step names: ``partitions``, every partition of ``topic``, or all."""
        if "partitions" in args:
            return list(args["partitions"])
        topics = [args["topic"]] if "topic" in args else sorted(self.cluster.store.get_all_topics())
        return [TopicPartition(t, d.partition) for t in topics for d in self.cluster.describe(t)]

    def do_cancel_reassignment(self, args: Mapping[str, Any], step: Step) -> str:
        partitions = self.partitions(args)
        results = self.cluster.cancel_reassignment(partitions, wait=False)
        return f"cancelling the reassignment of {plural(len(partitions), 'partition')}" + _errors(results.values())

    def do_elect_leaders(self, args: Mapping[str, Any], step: Step) -> str:
        kind = args.get("kind", "preferred")
        results = self.cluster.elect_leaders(self.partitions(args), kind, wait=False)
        elected = sum(1 for r in results.values() if not isinstance(r, KctlError))
        return f"{kind} election: {elected} elected" + _errors(results.values())

    def do_kill_controller(self, args: Mapping[str, Any], step: Step) -> str:
        old, start = self.cluster.active_controller, self.cluster.now()
        new = self.cluster.kill_controller()
        epoch = int(self.cluster.metrics()["ControllerEpoch"])
        return (f"controller {old.broker_id if old else '?'} crashed; broker {new} took over in "
                f"{self.cluster.now() - start:.3f} s (epoch {epoch})")

    def do_update_config(self, args: Mapping[str, Any], step: Step) -> str:
        self.cluster.update_config(args["properties"])
        return "set " + ", ".join(f"{k}={_text(v)}" for k, v in args["properties"].items())

    def do_set_topic_config(self, args: Mapping[str, Any], step: Step) -> str:
        self.cluster.set_topic_config(args["topic"], args["config"])
        settings = ", ".join(f"{k}={_text(v)}" for k, v in args["config"].items()) or "no overrides"
        return f"{args['topic']}: {settings}"

    def do_produce(self, args: Mapping[str, Any], step: Step) -> str:
        topic, records = args["topic"], args.get("records", 1)
        partitions = [TopicPartition(topic, args["partition"])] if "partition" in args else self.partitions(args)
        for tp in partitions:
            self.cluster.produce(tp, records)
        return f"produced {plural(records, 'record')} on each of {plural(len(partitions), 'partition')} of {topic}"

    def do_advance(self, args: Mapping[str, Any], step: Step) -> str:
        self.cluster.advance(args["seconds"])
        return f"{args['seconds']:g} s passed"

    def do_wait_stable(self, args: Mapping[str, Any], step: Step) -> str:
        timeout = args.get("timeout", step.timeout)
        start = self.cluster.now()
        if not self.cluster.run_until_stable(timeout):
            self.failures.append(f"the cluster was not stable within {timeout:g} s")
            return "not stable"
        return f"stable after {self.cluster.now() - start:.3f} s"

    def do_fail_log_dir(self, args: Mapping[str, Any], step: Step) -> str:
        broker = args["broker"]
        hosted = [tp for tp, d in describe_all(self.cluster).items() if broker in d.replicas]
        wanted = set(self.partitions(args)) if "partitions" in args or "topic" in args else set(hosted)
        lost = [tp for tp in hosted if tp in wanted]
        self.cluster.fail_log_dir(broker, lost)
        self.leadership.stopped(broker, self.cluster.brokers[broker].broker_epoch, lost)
        return f"broker {broker} lost the log directory of {plural(len(lost), 'replica')}"

    def do_expect(self, args: Mapping[str, Any], step: Step) -> str:
        for name, expected in args.items():
            self.failures += EXPECTATIONS[name](self.cluster, expected)
        checked = ", ".join(args)
        return f"checked {checked}" + (f": {len(self.failures)} failed" if self.failures else "")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _errors(results: Iterable[object]) -> str:
    """``; ELECTION_NOT_NEEDED: 4`` for the per-partition errors of an admin call."""
    counts = Counter(r.error.name for r in results if isinstance(r, KctlError))
    return "".join(f"; {name}: {n}" for name, n in sorted(counts.items()))


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# --- expect ----------------------------------------------------------------------------------------------

Expectation = Callable[[EmbeddedCluster, Any], list[str]]


def _per_partition(what: str, actual: Callable[[PartitionDescription], Any],
                   same: Callable[[Any, Any], bool] = lambda a, b: a == b) -> Expectation:
    def check(cluster: EmbeddedCluster, expected: Mapping[TopicPartition, object]) -> list[str]:
        described = describe_all(cluster)
        failures = []
        for tp, wanted in expected.items():
            if tp not in described:
                failures.append(f"{what} of {tp}: the partition does not exist")
            elif not same(actual(described[tp]), wanted):
                failures.append(f"{what} of {tp}: expected {_shown(wanted)}, got {_shown(actual(described[tp]))}")
        return failures
    return check


def _equal(what: str, actual: Callable[[EmbeddedCluster], object]) -> Expectation:
    def check(cluster: EmbeddedCluster, expected: object) -> list[str]:
        got = actual(cluster)
        return [] if got == expected else [f"{what}: expected {_shown(expected)}, got {_shown(got)}"]
    return check


def _shown(value: object) -> str:
    if isinstance(value, set | frozenset):
        value = sorted(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(map(str, value)) + "]"
    return _text(value)


def _metrics(cluster: EmbeddedCluster, expected: Mapping[str, float]) -> list[str]:
    metrics = cluster.metrics()
    return [f"metric {name}: expected {_shown(value)}, got {_shown(metrics[name])}"
            for name, value in expected.items() if metrics[name] != value]


def _partitions_led(cluster: EmbeddedCluster, expected: Mapping[int, int]) -> list[str]:
    led = Counter(d.leader for d in describe_all(cluster).values())
    return [f"partitions led by broker {b}: expected {n}, got {led[b]}" for b, n in expected.items() if led[b] != n]


def _active_controller(cluster: EmbeddedCluster) -> int | None:
    controller = cluster.active_controller
    return None if controller is None else controller.broker_id


EXPECTATIONS: dict[str, Expectation] = {
    "invariants": lambda cluster, _: [f"invariant violated: {v}" for v in cluster.check_invariants()],
    "stable": _equal("stable", lambda c: c.is_stable()),
    "leaders": _per_partition("leader", lambda d: d.leader),
    "isr": _per_partition("ISR", lambda d: d.isr, lambda a, b: set(a) == set(b)),
    "replicas": _per_partition("replicas", lambda d: d.replicas),
    "offline_partitions": _equal("offline partitions", lambda c: int(c.metrics()["OfflinePartitionsCount"])),
    "unclean_elections": _equal("unclean elections", lambda c: c.unclean_leader_elections()),
    "metrics": _metrics,
    "topics": _equal("topics", lambda c: tuple(sorted(c.store.get_all_topics()))),
    "controller": _equal("active controller", _active_controller),
    "partitions_led": _partitions_led,
    "reassigning": _equal("partitions being reassigned", lambda c: frozenset(c.list_reassignments())),
}
