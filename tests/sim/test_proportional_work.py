"""A large simulation's steps cost what they change (issue 16, item 4): a rewrite of a reassigned
topic's znode does not copy or list the topic, and the invariants checked after each step do not
pass over every partition of every topic again.

Costs are counted, not timed: the partitions the memory store's history lists to compare two
writes, and the partitions whose assignment the invariant checks look at.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from kctl.assignment_map import AssignmentMap, changed_between
from kctl.cluster import EmbeddedCluster
from kctl.context import ENGINES, ControllerContext
from kctl.errors import IllegalStateError
from kctl.model import ReplicaAssignment, TopicPartition
from kctl.sim.demo import demo_scenario
from kctl.sim.runner import run_scenario
from kctl.engine_api import context as engine_context
from kctl.native.context import NativeContext
from kctl.stores import memtree


def test_an_assignment_map_is_the_dict_it_replaces() -> None:
    """Replacing and adding partitions, in any order and however many times, gives the mapping a
    dict would hold, in the dict's order; two versions sharing a base tell what differs between them."""
    rng = random.Random(5)
    for size in (0, 3, 40, 300):
        expected = {p: ReplicaAssignment((rng.randint(1, 5),)) for p in rng.sample(range(size + 5), size)}
        current = AssignmentMap(expected)
        versions = [(current, dict(expected))]
        for _ in range(200):
            changes = {rng.randint(0, size + 10): ReplicaAssignment((rng.randint(1, 5),)) for _ in range(rng.randint(1, 3))}
            current = current.replacing(changes)
            expected.update(changes)
            versions.append((current, dict(expected)))
            assert list(current.items()) == list(expected.items()) and len(current) == len(expected)
            assert current == expected and current.to_dict() == expected and list(current) == list(expected)
            assert all(p in current and current[p] is a for p, a in expected.items()) and -1 not in current
        for (before, seen_before), (after, seen_after) in zip(versions, versions[5:]):
            changed = changed_between(before, after)
            if changed is not None:
                assert sorted(changed) == sorted(p for p, a in seen_after.items() if seen_before.get(p) != a)
    with pytest.raises(TypeError):
        hash(AssignmentMap({0: ReplicaAssignment((1,))}))


@pytest.mark.parametrize("engine", ENGINES)
def test_an_engine_gives_the_topic_with_one_partition_replaced(engine: str) -> None:
    ctx = ControllerContext(engine=engine)
    ctx.put_topic_assignment("t", {p: ReplicaAssignment((1, 2)) for p in range(5)})
    moving = ReplicaAssignment((3, 1, 2), (3,), ())
    first = ctx.topic_assignment_with(TopicPartition("t", 2), moving)
    ctx.update_partition_full_replica_assignment(TopicPartition("t", 2), moving)
    second = ctx.topic_assignment_with(TopicPartition("t", 4), ReplicaAssignment((3,)))

    assert dict(first) == {**{p: ReplicaAssignment((1, 2)) for p in range(5)}, 2: moving}
    assert list(second.items()) == [*((p, ReplicaAssignment((1, 2))) for p in (0, 1)), (2, moving),
                                    (3, ReplicaAssignment((1, 2))), (4, ReplicaAssignment((3,)))]
    assert dict(ctx.partition_full_replica_assignment_for_topic("t")) == {**dict(first), 2: moving}


def moved_topic(partitions: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, object]:
    """Move every partition of a topic of ``partitions`` (rust engine, history recorded): the
    partitions the store's history listed to compare writes, the topic znode's writes, and what
    the store holds (the znode, its version, every partition's history)."""
    listed = Counter[str]()
    diff = memtree._diff

    def counted(*args: object) -> object:
        listed["partitions"] += len(args[2])  # type: ignore[arg-type]
        return diff(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(memtree, "_diff", counted)
    with EmbeddedCluster(4, engine="rust", seed=0) as cluster:
        cluster.create_topic("t", assignment={p: [1 + p % 2, 2 - p % 2] for p in range(partitions)})
        listed.clear()
        node = cluster.store.tree._nodes["/brokers/topics/t"]  # type: ignore[attr-defined]
        version = node.version
        cluster.reassign({TopicPartition("t", p): [3, 4] for p in range(partitions)})
        assert all(d.replicas == (3, 4) for d in cluster.describe("t")) and cluster.check_invariants() == []
        stored = (dict(node.data.partitions), node.data.topic_id, node.version, node.mzxid,
                  [cluster.partition_history(TopicPartition("t", p)) for p in range(partitions)])
        return listed["partitions"], node.version - version, stored


def test_rewriting_a_reassigned_topic_does_not_list_it_at_every_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of the topic's znode writes (two per partition, as Kafka's) is compared with the
    previous one by what changed: the topic is listed whole only when a version's changes are
    folded into a new base, about every square root of its size of writes. The znode, its version
    and every partition's history are those of writes built as whole dicts."""
    partitions = 400
    listed, writes, stored = moved_topic(partitions, monkeypatch)
    monkeypatch.setattr(NativeContext, "topic_assignment_with", engine_context.ControllerContext.topic_assignment_with)
    listed_whole, writes_whole, stored_whole = moved_topic(partitions, monkeypatch)

    assert writes == writes_whole >= 2 * partitions and stored == stored_whole
    assert listed_whole >= partitions * writes  # every write listed the topic
    assert listed <= 4 * partitions * (writes // 32 + 1)  # about n * writes / sqrt(n)


def test_the_invariants_after_a_step_look_at_what_it_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a topic is created, a check of the invariants looks at the new topic's partitions,
    not again at those of the topics created before (a simulation of 1M partitions creates 21)."""
    looked_at = Counter[str]()
    reassigning = ReplicaAssignment.is_being_reassigned

    def counted(self: ReplicaAssignment) -> bool:
        looked_at["assignments"] += 1
        return reassigning.fget(self)  # type: ignore[attr-defined, no-any-return]

    with EmbeddedCluster(6, seed=0) as cluster:
        for name in ("a", "b", "c"):
            cluster.create_topic(name, 300, 3)
        assert cluster.check_invariants() == []
        cluster.create_topic("d", 30, 3)
        monkeypatch.setattr(ReplicaAssignment, "is_being_reassigned", property(counted))
        history = Counter[str]()
        partition_history = type(cluster).partition_history
        monkeypatch.setattr(type(cluster), "partition_history",
                            lambda self, tp: history.update([tp.topic]) or partition_history(self, tp))
        assert cluster.check_invariants() == []

    assert set(history) <= {"d"} and looked_at["assignments"] <= 30


@pytest.mark.parametrize("engine", ENGINES)
def test_a_run_without_its_requests_recorded_is_the_same_run(engine: str) -> None:
    """``kctl sim`` and ``kctl demo`` keep no record of each request and answer: the run, its report
    (requests by API included), the answers counted and the notable answers are those of a run
    that keeps them all, and the records are refused rather than found empty."""
    held: list[EmbeddedCluster] = []

    def play(record: bool) -> tuple[object, ...]:
        report = run_scenario(demo_scenario(6, 30, seed=1), engine=engine, on_start=held.append, record_requests=record)
        cluster = held[-1]
        notable = {b: [(h.time, h.request.api, h.response, h.broker_epoch) for h in agent.notable]
                   for b, agent in cluster.brokers.items()}
        answered = {b: agent.answer_count for b, agent in cluster.brokers.items()}
        return (replace(report, duration=0.0), cluster.sent_request_count(), cluster.sent_request_apis(7), notable,
                answered, cluster.scheduler.steps)  # type: ignore[attr-defined]

    recorded, unrecorded = play(True), play(False)

    assert recorded[0].ok and recorded[1] > 1_000  # type: ignore[attr-defined, operator]
    assert unrecorded == recorded
    assert sum(recorded[4].values()) == sum(len(agent.handled) for agent in held[0].brokers.values())  # type: ignore[attr-defined]
    with pytest.raises(IllegalStateError, match="not recorded"):
        assert held[1].sent_requests is None
    with pytest.raises(IllegalStateError, match="notable"):
        assert held[1].brokers[1].handled is None


@pytest.mark.parametrize("engine", ENGINES)
def test_partition_znodes_created_by_key_are_those_of_the_multi(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A topic's creation writes its partition and state znodes through the memory tree's keyed
    path (``TreeClient.create_partition_states``): the same znodes, stats, zxids, watch events and
    history as the general multi of create operations, including for partition znodes that exist
    already (created by an admin before the controller gets to them)."""

    def created() -> object:
        with EmbeddedCluster(4, engine=engine, seed=0) as cluster:
            store = cluster.store
            cluster.create_topic("t", 20, 2)
            cluster.create_topic("u", 5, 3, wait=False)
            store.tree.set_raw("/brokers/topics/u/partitions/1", None)  # type: ignore[attr-defined]
            cluster.run_until_stable()
            tps = [TopicPartition(t, p) for t, n in (("t", 20), ("u", 5)) for p in range(n)]
            client = store._client  # type: ignore[attr-defined]
            paths = [f"/brokers/topics/{tp.topic}/partitions/{tp.partition}" for tp in tps]
            return (client.get_data(paths), client.get_data([f"{p}/state" for p in paths]),
                    client.get_children(["/brokers/topics/t/partitions", "/brokers/topics/u/partitions", *paths]),
                    [cluster.partition_history(tp) for tp in tps], store.changes_since(0),  # type: ignore[attr-defined]
                    cluster.controllers[cluster.active_controller.broker_id].event_manager.stats.processed,  # type: ignore[union-attr]
                    cluster.check_invariants())

    by_key = created()
    monkeypatch.delattr(memtree.TreeClient, "create_partition_states")
    by_multi = created()

    assert by_key == by_multi
