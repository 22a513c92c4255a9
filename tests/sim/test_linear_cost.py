"""The simulation's cost grows with its work (issue 12, item 10): a reassignment of a whole topic
rewrites the topic's znode twice per partition, as Kafka does, and nothing along that path may
redo work for every partition of the topic at every write.

Costs are counted, not timed: the ``ReplicaAssignment`` objects built and compared while a
topic of ``n`` partitions and one of ``2n`` are moved. Linear work doubles; the quadratic path
(a topic converted and diffed partition by partition at each write) quadruples.
"""

from __future__ import annotations

import gc
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.context import ENGINES, ControllerContext
from kctl.controller import KafkaController
from kctl.controller.event_manager import ControllerEventManager
from kctl.controller.events import ControllerEvent, PartitionModifications
from kctl.broker.agent import BrokerAgent, HandledRequest
from kctl.errors import Errors
from kctl.engine_api import request_batch
from kctl.messages import (
    Outgoing, UpdateMetadataFanOut, UpdateMetadataRequest, UpdateMetadataResponse, built_request, send_all,
)
from kctl.invariants import BrokerAnswerCheck, check_broker_answers
from kctl.model import ReplicaAssignment, TopicPartition
from kctl.native.request_batch import NativeRequestBatch
from kctl.requests import ControllerBrokerRequestBatch
from kctl.scheduler import SimulatedScheduler
from kctl.sim.demo import demo_scenario
from kctl.sim.runner import run_scenario
from kctl.stores.memtree import _changed_partitions
from kctl.transports import inprocess


@pytest.fixture
def assignment_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts ``ReplicaAssignment`` constructions and equality tests."""
    counts: Counter[str] = Counter()
    post_init, eq = ReplicaAssignment.__post_init__, ReplicaAssignment.__eq__

    def counted_post_init(self: ReplicaAssignment) -> None:
        counts["built"] += 1
        post_init(self)

    def counted_eq(self: ReplicaAssignment, other: object) -> bool:
        counts["compared"] += 1
        return eq(self, other)

    monkeypatch.setattr(ReplicaAssignment, "__post_init__", counted_post_init)
    monkeypatch.setattr(ReplicaAssignment, "__eq__", counted_eq)
    yield counts


def moved_topic(engine: str, partitions: int, counts: Counter[str]) -> tuple[int, int]:
    """Move every partition of a topic from brokers 1, 2 to 3, 4; the work counted meanwhile."""
    with EmbeddedCluster(4, engine=engine, seed=0) as cluster:
        cluster.create_topic("t", assignment={p: [1 + p % 2, 2 - p % 2] for p in range(partitions)})
        counts.clear()
        cluster.reassign({TopicPartition("t", p): [3, 4] for p in range(partitions)})
        work = counts["built"], counts["compared"]
        assert all(d.replicas == (3, 4) and set(d.isr) == {3, 4} for d in cluster.describe("t"))
        assert cluster.check_invariants() == []
    return work


@pytest.mark.parametrize("engine", ENGINES)
def test_moving_twice_the_partitions_costs_twice_the_work(engine: str, assignment_work: Counter[str]) -> None:
    built, compared = moved_topic(engine, 60, assignment_work)
    built_twice, compared_twice = moved_topic(engine, 120, assignment_work)

    assert built_twice <= 2.5 * built
    assert compared_twice <= 2.5 * compared


@pytest.mark.parametrize("engine", ENGINES)
def test_a_topic_rewritten_within_one_event_is_read_back_once(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a reassignment writes the topic's znode once per partition within one event; as
    ZooKeeper's one-shot watch does for Kafka, that is one PartitionModifications, not one per
    write."""
    events: Counter[str] = Counter()
    process = KafkaController._process_PartitionModifications

    def counted(self: KafkaController, event: PartitionModifications) -> None:
        events[event.topic] += 1
        process(self, event)

    monkeypatch.setattr(KafkaController, "_process_PartitionModifications", counted)
    with EmbeddedCluster(4, engine=engine, seed=0) as cluster:
        cluster.create_topic("t", assignment={p: [1, 2] for p in range(40)})
        events.clear()
        cluster.reassign({TopicPartition("t", p): [3, 4] for p in range(40)}, wait=False)
        cluster.run_until(lambda: events["t"] > 0, what="the topic's watch to fire")
        cluster.run_until_stable()
        assert cluster.check_invariants() == []

    # The start (one event, 40 writes) reads the topic back once; each later event that completes
    # partitions adds at most one more.
    assert 1 <= events["t"] <= 20


def test_cached_topic_assignments_follow_every_change() -> None:
    """The native context keeps whole topics' assignments for the controller's znode writes; what
    it returns is what the engine holds, in the engine's order, whatever changed it, and a
    partition that did not change is the same object from one call to the next."""
    ctx = ControllerContext(engine="rust")

    def fresh(topic: str) -> list[tuple[int, ReplicaAssignment]]:
        return [(tp.partition, ctx.partition_full_replica_assignment(tp)) for tp in ctx.partitions_for_topic(topic)]

    def check(topic: str) -> dict[int, ReplicaAssignment]:
        cached = ctx.partition_full_replica_assignment_for_topic(topic)
        assert list(cached.items()) == fresh(topic)
        return cached

    ctx.put_topic_assignment("t", {p: ReplicaAssignment((1, 2)) for p in (2, 0, 1)})
    ctx.put_topic_assignment("u", {0: ReplicaAssignment((3,))})
    first = check("t")
    ctx.update_partition_full_replica_assignment(TopicPartition("t", 1), ReplicaAssignment((3, 1, 2), (3,), ()))
    ctx.put_partition_assignments({TopicPartition("t", 7): ReplicaAssignment((2,)), TopicPartition("u", 0): ReplicaAssignment((4,))})
    second = check("t")
    assert second[0] is first[0] and second[2] is first[2]
    assert second[1] == ReplicaAssignment((3, 1, 2), (3,), ()) and list(second)[-1] == 7
    assert check("u") == {0: ReplicaAssignment((4,))}

    ctx.remove_topic("t")  # the engine forgets the topic's partitions: so does the cache
    assert check("t") == {}
    ctx.put_topic_assignment("t", {5: ReplicaAssignment((1,)), 0: ReplicaAssignment((2,))})
    check("t")
    for round_ in range(70_000):  # more changes than the engine's journal keeps
        ctx.update_partition_full_replica_assignment(TopicPartition("t", 0), ReplicaAssignment((round_ % 3 + 1,)))
    check("t")
    ctx.reset_context()
    assert check("t") == {}


def test_live_broker_epochs_are_read_from_the_engine_once_per_change() -> None:
    """Every UpdateMetadata fan-out reads the brokers' epochs: the native context reads them from
    the engine again only after the live brokers change, and hands out a copy each time."""
    ctx = ControllerContext(engine="rust")
    native = ctx.native
    reads: list[int] = []

    class Counting:
        def __getattr__(self, name: str) -> object:
            if name == "live_broker_epochs":
                reads.append(1)
            return getattr(native, name)

    ctx.native = Counting()  # type: ignore[attr-defined]
    ctx.set_live_brokers({2: 20, 1: 10})
    first = ctx.live_broker_epochs()
    first[9] = 90  # the caller's own copy
    assert ctx.live_broker_epochs() == dict(native.live_broker_epochs()) == {1: 10, 2: 20} and len(reads) == 1
    ctx.add_live_brokers({3: 30})
    assert ctx.live_broker_epochs() == {1: 10, 2: 20, 3: 30}
    ctx.remove_live_brokers([1])
    assert ctx.live_broker_epochs() == {2: 20, 3: 30}
    ctx.set_live_brokers({4: 40})
    assert ctx.live_broker_epochs() == {4: 40} and ctx.live_broker_epochs() == {4: 40}
    ctx.reset_context()
    assert ctx.live_broker_epochs() == {} and len(reads) == 5


def test_the_reassigning_set_is_asked_of_the_engine_and_live() -> None:
    ctx = ControllerContext(engine="rust")
    reassigning = ctx.partitions_being_reassigned
    ctx.add_partition_being_reassigned(TopicPartition("t", 1))
    ctx.add_partition_being_reassigned(TopicPartition("t", 0))

    assert TopicPartition("t", 1) in reassigning and TopicPartition("t", 2) not in reassigning
    assert "t-1" not in reassigning
    assert list(reassigning) == [TopicPartition("t", 1), TopicPartition("t", 0)] and len(reassigning) == 2
    ctx.remove_partition_being_reassigned(TopicPartition("t", 1))
    assert reassigning == {TopicPartition("t", 0)}


def test_changed_partitions_are_those_a_write_changes() -> None:
    rng = random.Random(7)
    for _ in range(300):
        previous = {p: ReplicaAssignment((rng.randint(1, 4),)) for p in range(rng.randint(0, 60))}
        current = dict(previous)
        for _ in range(rng.randint(0, 5)):
            p = rng.randint(0, 70)
            kind = rng.random()
            if kind < 0.5:
                current[p] = ReplicaAssignment((rng.randint(1, 4),))  # equal or not, never the same object
            elif kind < 0.8 and p in current:
                del current[p]
            else:
                current = dict(reversed(current.items()))
        expected = [p for p, a in current.items() if previous.get(p) != a]

        assert _changed_partitions(previous, current) == expected


def test_broker_answers_are_each_judged_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """I5 is checked after every step of a simulation: no answer is judged twice (an accepted
    UpdateMetadata of the newest controller epoch is judged without a call), and checking a
    growing record piece by piece finds what checking it whole does."""
    judged: Counter[int] = Counter()
    judge = BrokerAnswerCheck._judge

    def counted(self: BrokerAnswerCheck, answer: object) -> None:
        judged[id(answer)] += 1
        judge(self, answer)  # type: ignore[arg-type]

    with EmbeddedCluster(3, seed=0) as cluster:
        cluster.create_topic("t", 6, 3)
        cluster.kill_broker(3)
        cluster.start_broker(3)
        cluster.run_until_stable()
        record = list(cluster.brokers[3].handled)
    monkeypatch.setattr(BrokerAnswerCheck, "_judge", counted)
    check = BrokerAnswerCheck(3)
    for end in range(0, len(record) + 1, 4):
        found = check.feed(record[:end])
    found = check.feed(record)

    assert len(record) >= 8 and set(judged.values()) == {1} and 0 < len(judged) < len(record)
    monkeypatch.setattr(BrokerAnswerCheck, "_judge", judge)
    assert found == check_broker_answers(3, record)



def test_a_run_collects_only_young_objects_and_restores_the_collector() -> None:
    """The collector would walk what a run builds (every request and answer, kept to the end) at
    each collection of the older generations; a run collects only young objects, freezing what it
    built after each slice, and ends with the thresholds as they were and nothing left frozen."""
    during: list[tuple[int, int, int]] = []
    saved = gc.get_threshold()
    report = run_scenario(demo_scenario(5, 6), on_step=lambda _: during.append(gc.get_threshold()))
    assert report.ok and during and all(t[1] >= 1_000_000 and t[2] >= 1_000_000 for t in during)
    assert gc.get_threshold() == saved and gc.get_freeze_count() == 0


def test_the_answers_left_out_of_notable_are_accepted_updates_of_the_same_controller_epoch() -> None:
    """The leadership replay and the I5 check read a broker's notable answers: what they leave
    out are UpdateMetadata answers that neither can act on, and I5 finds the same on either."""
    with EmbeddedCluster(3, seed=0) as cluster:
        cluster.create_topic("t", 6, 3)
        cluster.kill_broker(3)
        cluster.start_broker(3)
        cluster.kill_controller()
        cluster.run_until_stable()
        for broker, agent in cluster.brokers.items():
            notable = {id(h) for h in agent.notable}
            left_out = [h for h in agent.handled if id(h) not in notable]
            epochs = {h.request.controller_epoch for h in agent.notable if h.request.api == "UpdateMetadata"}

            assert left_out and all(h.request.api == "UpdateMetadata" and h.response.error is Errors.NONE
                                    for h in left_out)
            assert epochs == {1, 2}  # the first UpdateMetadata of the new controller is notable
            assert [h for h in agent.handled if h.request.api != "UpdateMetadata"] == [
                h for h in agent.notable if h.request.api != "UpdateMetadata"
            ]
            assert BrokerAnswerCheck(broker).feed(agent.notable) == check_broker_answers(broker, agent.handled)


def test_fan_outs_are_recorded_without_a_record_per_request_until_read() -> None:
    """The cluster keeps an UpdateMetadata fan-out as one entry: its records are built when
    ``sent_requests`` is read, in the order sent (with the requests sent one by one in between),
    and the run's requests by API are counted from the entries, matching the records."""
    with EmbeddedCluster(3, seed=0) as cluster:
        cluster.create_topic("t", 6, 3)
        built = cluster.sent_request_count()
        cluster.kill_broker(3)
        cluster.start_broker(3)
        cluster.run_until_stable()
        pending = len(cluster._sent._fan_outs)
        # An UpdateMetadata fan-out is kept as its brokers and the one object they were all handed.
        shared = [requests for _, _, brokers, requests in cluster._sent._fan_outs if type(requests) is not list]
        assert any(type(requests) is UpdateMetadataFanOut for requests in shared)
        records = cluster.sent_requests

        assert pending > 0 and len(records) == cluster.sent_request_count() > built
        assert [r.time for r in records] == sorted(r.time for r in records)
        assert {r.request.api for r in records} == {"LeaderAndIsr", "UpdateMetadata"}
        for start in (0, built, len(records) - 1, len(records)):
            assert cluster.sent_request_apis(start) == Counter(r.request.api for r in records[start:])
        cluster.kill_broker(2)
        cluster.run_until_stable()
        more = cluster.sent_requests
        assert more[:len(records)] == records and len(more) == cluster.sent_request_count() > len(records)
        assert cluster.sent_request_apis(len(records)) == Counter(r.request.api for r in more[len(records):])


def test_accepted_updates_are_kept_without_a_record_until_handled_is_read() -> None:
    """A broker keeps an accepted UpdateMetadata that is not notable as a bare entry; ``handled``
    builds the records when read, once, in order, the notable ones being the very objects of
    ``notable``, and ``answer_count`` counts them all without building anything."""
    with EmbeddedCluster(3, seed=0) as cluster:
        cluster.create_topic("t", 6, 3)
        cluster.kill_controller()
        cluster.run_until_stable()
        agent = cluster.brokers[1]
        bare = sum(type(answer) is not HandledRequest for answer in agent._answers)
        count = agent.answer_count
        handled = agent.handled

        assert 0 < bare < count == len(handled) and all(isinstance(h, HandledRequest) for h in handled)
        assert [h.time for h in handled] == sorted(h.time for h in handled)
        notable = [h for h in handled if any(h is n for n in agent.notable)]
        assert notable == agent.notable and len(notable) == count - bare
        assert all(h.request.api == "UpdateMetadata" and h.response == UpdateMetadataResponse(Errors.NONE)
                   for h in handled if h not in notable)
        assert agent.handled is handled and all(type(answer) is HandledRequest for answer in agent._answers)
        assert len(agent._answers) == len(agent._answered_at) == len(agent._answered_by)


def _traced_demo(engine: str, brokers: int = 6, partitions: int = 30, seed: int = 3) -> tuple[object, ...]:
    """The demo (6 brokers × 30 partitions, seed 3, unless told), traced: its report, every
    request sent (time, controller, broker, API, epochs) in order, every answer of every broker
    in order, and after every step the scheduler's steps and each controller's events processed
    by kind."""
    held: list[EmbeddedCluster] = []
    events: list[object] = []

    def step_done(result: object) -> None:
        cluster = held[0]
        events.append(cluster.scheduler.steps)  # type: ignore[attr-defined]
        for controller_id, controller in sorted(cluster.controllers.items()):
            stats = controller.event_manager.stats
            events.append((controller_id, stats.processed, stats.queue_time_ms.count, controller.event_manager.queue_size,
                           sorted((state.name, h.count) for state, h in stats.processing_time_ms.items())))

    report = run_scenario(demo_scenario(brokers, partitions, seed=seed), engine=engine, on_start=held.append,
                          on_step=step_done)
    cluster = held[0]
    sent = [(r.time, r.controller, r.broker, r.request.api, r.request.controller_epoch, r.request.broker_epoch)
            for r in cluster.sent_requests]
    answers = {b: [(h.time, h.request.api, h.request.controller_epoch, h.response.error, h.broker_epoch)
                   for h in agent.handled] for b, agent in sorted(cluster.brokers.items())}
    return replace(report, duration=0.0), sent, answers, events


@pytest.mark.parametrize("engine", ENGINES)
def test_answering_update_metadata_in_short_changes_nothing_in_a_run(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Brokers answer an UpdateMetadata from the epochs they last accepted in short, and the
    controller's own sends keep no list of what they sent: a run traced with every broker taking
    the full path (an ``on_answer`` listener rules the short one out) and every send listing its
    requests is the same run, request for request, answer for answer, event for event."""
    short = _traced_demo(engine)
    assert short[0].ok and len(short[1]) > 1_000  # type: ignore[attr-defined]

    listened: list[HandledRequest] = []
    init = BrokerAgent.__init__

    def listening(self: BrokerAgent, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{**kwargs, "on_answer": listened.append})

    def listing(send: Any) -> Any:
        return lambda self, *args, record=True: send(self, *args, record=True)

    monkeypatch.setattr(BrokerAgent, "__init__", listening)
    for cls in (ControllerBrokerRequestBatch, *ControllerBrokerRequestBatch.__subclasses__()):
        monkeypatch.setattr(cls, "send_requests_to_brokers", listing(cls.send_requests_to_brokers))
    monkeypatch.setattr(NativeRequestBatch, "deliver_raw", listing(NativeRequestBatch.deliver_raw))
    full = _traced_demo(engine)

    assert len(listened) == sum(len(a) for a in full[2].values())  # type: ignore[attr-defined]
    assert full == short


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("brokers", "partitions", "seed"), [(4, 4, 0), (6, 30, 1), (12, 100, 7)])
def test_batched_fan_outs_change_nothing_in_a_run(
    engine: str, brokers: int, partitions: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deliveries and responses due at one instant are one scheduler callback, and a
    fan-out's accepted UpdateMetadata answers one entry of the controller's queue, queued at once:
    the same run as with every message a scheduler entry of its own and every answer an event
    queued alone by its own callback, request for request, answer for answer, event for event and
    step for step."""
    batched = _traced_demo(engine, brokers, partitions, seed)
    assert batched[0].ok and len(batched[1]) > 100  # type: ignore[attr-defined]

    def each_alone(manager: ControllerEventManager, event: ControllerEvent, times: int = 1) -> ControllerEvent:
        for _ in range(times):
            manager.put(event)
        return event

    monkeypatch.setattr(SimulatedScheduler, "schedule_batched", None)  # the transport schedules each message
    monkeypatch.setattr(ControllerEventManager, "put_repeatable", each_alone)
    monkeypatch.setattr(inprocess, "REPEAT", "not-an-attribute")  # each answer to its own callback
    one_by_one = _traced_demo(engine, brokers, partitions, seed)

    assert one_by_one == batched


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("brokers", "partitions", "seed"), [(4, 4, 0), (6, 30, 1), (12, 100, 7)])
def test_fan_outs_handed_over_whole_change_nothing_in_a_run(
    engine: str, brokers: int, partitions: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An UpdateMetadata fan-out reaches the in-process brokers as one object, each broker's
    request built only when read: the same run as with every request built when sent and each
    broker handed its own, request for request, answer for answer, event for event and step for
    step."""
    whole = _traced_demo(engine, brokers, partitions, seed)
    assert whole[0].ok and len(whole[1]) > 100  # type: ignore[attr-defined]

    def built_when_sent(channel: Any, outgoing: list[Outgoing]) -> None:
        send_all(channel, [(broker, built_request(request, broker), callback) for broker, request, callback in outgoing])

    monkeypatch.setattr(request_batch, "send_all", built_when_sent)
    monkeypatch.setattr(inprocess, "takes_fan_outs", lambda handler: False)
    one_each = _traced_demo(engine, brokers, partitions, seed)

    assert one_each == whole


@pytest.mark.parametrize("engine", ENGINES)
def test_a_run_builds_the_update_metadata_requests_that_are_read(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing in a run reads the UpdateMetadata requests of a fan-out that brokers answer in
    short: only those answered the long way (a new controller epoch, a broker epoch to check) are
    built while it plays, and reading ``handled`` builds each broker's others."""
    built: list[int] = []
    init = UpdateMetadataRequest.__init__

    def counted(self: UpdateMetadataRequest, *args: Any) -> None:
        built.append(1)
        init(self, *args)

    monkeypatch.setattr(UpdateMetadataRequest, "__init__", counted)
    held: list[EmbeddedCluster] = []
    report = run_scenario(demo_scenario(6, 30), engine=engine, on_start=held.append)
    sent = held[0].sent_request_apis(0)["UpdateMetadata"]
    during = len(built)

    assert report.ok and sent > 1_000 and 0 < during < sent / 20
    answered = sum(h.request.api == "UpdateMetadata" for agent in held[0].brokers.values() for h in agent.handled)
    assert sent / 2 < answered <= len(built) <= sent  # each built once: when sent, answered or read
