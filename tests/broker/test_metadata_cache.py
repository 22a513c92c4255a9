"""The native metadata cache and the digests a cluster compares to know that every broker's cache
matches the store (invariant I7), against the full comparison they stand in for."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest

from kctl._engine import MetadataCache, PartitionStates, fold_digests, metadata_digest, stored_digests
from kctl.broker import BrokerAgent, BrokerMetadataCache, ExpectedMetadata, MetadataSnapshot
from kctl.cluster import EmbeddedCluster
from kctl.errors import Errors
from kctl.model import LeaderAndIsr, TopicPartition
from kctl.native.request_batch import NativeRequestBatch
from kctl.requests import UpdateMetadataPartitionState, UpdateMetadataRequest

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def um_state(tp: TopicPartition, leader: int, isr: list[int], leader_epoch: int = 0) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(tp.topic, tp.partition, 1, leader, leader_epoch, tuple(isr), 0, (1, 2, 3), ())


def digest_of(*states: UpdateMetadataPartitionState) -> int:
    return sum(metadata_digest(s.topic, s.partition, s.leader, s.leader_epoch, s.isr, s.partition_epoch, s.replicas)
               for s in states) % 2**64


def test_digest_is_the_sum_over_what_is_cached() -> None:
    cache = MetadataCache()
    first, second = um_state(T0, 1, [1, 2]), um_state(T1, 2, [2, 1])
    assert cache.update([first, second]) == [] and len(cache) == 2
    assert cache.digest == digest_of(first, second)
    moved = um_state(T0, 2, [2], leader_epoch=1)
    cache.update([moved])
    assert cache.digest == digest_of(moved, second) != digest_of(first, second)
    assert cache.get("t", 0) == (1, 2, 1, [2], 0, [1, 2, 3], [])
    assert cache.update([um_state(T1, -2, [2, 1])]) == [("t", 1)]  # topic being deleted
    assert cache.digest == digest_of(moved) and cache.items() == [("t", 0, (1, 2, 1, [2], 0, [1, 2, 3], []))]


def test_the_digest_ignores_the_controller_epoch_and_offline_replicas() -> None:
    """The store keeps neither per partition as UpdateMetadata carries them."""
    one, other = MetadataCache(), MetadataCache()
    one.update([um_state(T0, 1, [1, 2])])
    other.update([UpdateMetadataPartitionState("t", 0, 7, 1, 0, (1, 2), 0, (1, 2, 3), (3,))])
    assert one.digest == other.digest and one.get("t", 0) != other.get("t", 0)


def test_native_payloads_and_their_python_objects_cache_the_same() -> None:
    with EmbeddedCluster(4, engine="rust", seed=3) as cluster:
        cluster.create_topic("t", 8, 3)
        cluster.kill_broker(2)
        cluster.run_until_stable()
        payloads = [r.request.partition_states for r in cluster.sent_requests
                    if isinstance(r.request, UpdateMetadataRequest) and len(r.request.partition_states)]
    assert payloads and all(isinstance(p, PartitionStates) for p in payloads)
    native, python = MetadataCache(), MetadataCache()
    for payload in payloads:
        native.update(payload)
        python.update(tuple(payload))
    assert native.items() == python.items() and native.digest == python.digest and len(native) == 8


def test_caches_sent_different_updates_keep_their_own_contents() -> None:
    """A native payload is applied once per cache state and shared: caches that were each sent a
    different selection of the same payloads (a broker that missed some) still hold exactly what
    their own updates give, after every payload, as caches reading state objects (shared with
    nobody) do."""
    with EmbeddedCluster(4, engine="rust", seed=3) as cluster:
        cluster.create_topic("t", 40, 3)
        cluster.kill_broker(2)
        cluster.run_until_stable()
        cluster.start_broker(2)
        cluster.run_until_stable()
        payloads = list({id(p): p for r in cluster.sent_requests if isinstance(r.request, UpdateMetadataRequest)
                         and len(p := r.request.partition_states)}.values())
    assert len(payloads) >= 8
    sent_to = [lambda i: True, lambda i: i % 3 != 1, lambda i: i != 2, lambda i: i % 2 == 0, lambda i: True]
    caches, own = [MetadataCache() for _ in sent_to], [MetadataCache() for _ in sent_to]
    for i, payload in enumerate(payloads):
        for cache, alone, sent in zip(caches, own, sent_to):
            if sent(i):
                assert cache.update(payload) == alone.update(tuple(payload))
        for cache, alone in zip(caches, own):
            assert cache.items() == alone.items() and cache.digest == alone.digest and len(cache) == len(alone)
    assert any(c.items() != caches[0].items() for c in caches[1:])  # some did end up apart


def natively_cached(states: Any) -> list[tuple[str, int, Any]]:
    """What a cache of its own holds after applying ``states`` natively (not through the objects
    that reading them as a sequence makes once and keeps)."""
    cache = MetadataCache()
    cache.update(states)
    return cache.items()


def test_a_new_broker_s_full_update_holds_the_controller_s_view_when_sent_and_keeps_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The UpdateMetadata a restarted broker gets (every partition with a leader), and any other
    of most partitions, shares the entries that did not change with the previous such payload. Each
    holds, when sent, what a batch of its own (sharing nothing) builds of its partitions from the
    controller's view at that moment, and after the
    later restarts have changed that view and shared its entries, still reads as it was sent:
    applied by a cache and on the wire."""
    sent: list[tuple[PartitionStates, list[tuple[str, int, Any]], bytes]] = []
    deliver = NativeRequestBatch.deliver_raw

    def recording(self: NativeRequestBatch, controller_epoch: int, raw: Iterable[Any], *, record: bool = True) -> Any:
        raw = list(raw)
        native = self.context.native
        for kind, _, _, states, brokers, _ in raw:
            if kind == "UpdateMetadata" and len(states) == PARTITIONS and all(s is not states for s, *_ in sent):
                alone = native.new_batch_slot()
                native.batch_add_update_metadata(alone, brokers, [(s.topic, s.partition) for s in states])
                fresh = native.batch_send(alone, 3, False)[1][0][3]
                assert natively_cached(states) == natively_cached(fresh)
                assert states.kafka_encode(8, {}) == fresh.kafka_encode(8, {})
                sent.append((states, natively_cached(states), states.kafka_encode(8, {})))
        return deliver(self, controller_epoch, raw, record=record)

    monkeypatch.setattr(NativeRequestBatch, "deliver_raw", recording)
    PARTITIONS = 48
    with EmbeddedCluster(6, racks=["a", "b", "c"] * 2, engine="rust", seed=5) as cluster:
        cluster.create_topic("t", PARTITIONS, 3)
        cluster.run_until_stable(600)
        for broker in cluster.broker_ids:
            cluster.shutdown_broker(broker)
            cluster.start_broker(broker)
            cluster.run_until_stable(600)
            agent = cluster.brokers[broker]
            cache = agent.metadata_cache
            assert {tp: cache.partition_state(tp) for tp in cache.partitions()} == own_replay(agent)
    assert len(sent) >= 6
    for states, cached, wire in sent:
        assert natively_cached(states) == cached and states.kafka_encode(8, {}) == wire
    assert len({wire for _, _, wire in sent}) > 3  # the view changed between them


def test_an_item_that_is_not_a_state_is_a_clear_error_and_nothing_is_applied() -> None:
    cache = MetadataCache()
    cache.update([um_state(T0, 1, [1])])
    before = (cache.items(), cache.digest)
    with pytest.raises(AttributeError, match="topic"):
        cache.update([um_state(T0, 2, [1]), ("not", "a", "state")])
    assert (cache.items(), cache.digest) == before == ([("t", 0, (1, 1, 0, [1], 0, [1, 2, 3], []))], before[1])


def test_a_negative_partition_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="t--1"):
        MetadataCache().update([um_state(TopicPartition("t", -1), 1, [1])])


@pytest.mark.parametrize("engine", ["rust", "reference"])
def test_expected_metadata_follows_the_store_through_every_operation(engine: str) -> None:
    """The incremental digest always equals the one of a full snapshot, and at every stable point
    a cache agrees with it exactly when the full comparison finds no difference."""
    cluster = EmbeddedCluster(5, engine=engine, seed=11)
    expected = ExpectedMetadata(cluster.store)

    def check() -> None:
        snapshot = MetadataSnapshot.from_store(cluster.store)
        assert expected.digest() == snapshot.digest
        for broker in cluster.live_brokers():
            cache = cluster.brokers[broker].metadata_cache
            agrees = cache.agrees_with(snapshot.controller_id, snapshot.brokers, snapshot.digest)
            assert agrees == (cache.differences(snapshot) == [])
            assert agrees or not cluster.is_stable()

    with cluster:
        check()
        steps = [
            lambda: cluster.create_topic("a", 6, 3),
            lambda: cluster.create_topic("b", 3, 2),
            lambda: cluster.create_partitions("a", 9),
            lambda: cluster.reassign({TopicPartition("a", 0): [4, 5, 1]}),
            lambda: cluster.kill_broker(3),
            lambda: cluster.delete_topic("b", wait=False),
            lambda: cluster.start_broker(3),
            lambda: cluster.shutdown_broker(1),
            lambda: cluster.start_broker(1),
            lambda: cluster.kill_controller(),
            lambda: cluster.create_topic("b", 2, 1),
            lambda: cluster.elect_leaders([TopicPartition("a", p) for p in range(9)]),
        ]
        for step in steps:
            step()
            check()
            cluster.run_until_stable(600)
            check()
        assert cluster.is_stable() and cluster.metadata_mismatches() == []


def own_replay(agent: BrokerAgent) -> dict[TopicPartition, UpdateMetadataPartitionState | None]:
    """What a cache of the broker's own holds after the UpdateMetadata requests its running process
    accepted, applied one by one as state objects (no payload shared with another broker)."""
    replay = BrokerMetadataCache()
    for handled in agent.handled:
        request = handled.request
        if (handled.broker_epoch == agent.broker_epoch and isinstance(request, UpdateMetadataRequest)
                and handled.response.error is Errors.NONE):
            replay.update(replace(request, partition_states=tuple(request.partition_states)))
    return {tp: replay.partition_state(tp) for tp in replay.partitions()}


@pytest.mark.parametrize("engine", ["rust", "reference"])
def test_each_broker_s_cache_holds_what_its_own_updates_give(engine: str) -> None:
    """Brokers' caches share their states (a fan-out is applied once per state, and a restarted
    broker's cache joins the others' once they agree), yet each holds exactly what its own accepted
    UpdateMetadata requests give, at every step of crashes, restarts, a controlled shutdown, a
    reassignment, a deletion and a new controller."""
    with EmbeddedCluster(6, racks=["a", "b", "c"] * 2, engine=engine, seed=3) as cluster:
        steps = [
            lambda: cluster.create_topic("a", 30, 3),
            lambda: cluster.create_topic("b", 20, 2),
            lambda: cluster.kill_broker(2),
            lambda: cluster.start_broker(2),
            lambda: cluster.shutdown_broker(1),
            lambda: cluster.start_broker(1),
            lambda: cluster.reassign({TopicPartition("a", 0): [4, 5, 6]}),
            lambda: cluster.delete_topic("b", wait=False),
            lambda: cluster.kill_controller(),
        ]
        for step in steps:
            step()
            cluster.run_until_stable(600)
            for broker in cluster.live_brokers():
                agent = cluster.brokers[broker]
                cache = agent.metadata_cache
                assert {tp: cache.partition_state(tp) for tp in cache.partitions()} == own_replay(agent)
        assert cluster.metadata_mismatches() == []


def changed_field(state: UpdateMetadataPartitionState, field: str) -> UpdateMetadataPartitionState:
    """``state`` with one of the fields a cache and the store must agree on changed."""
    other_leader = next(r for r in state.replicas if r != state.leader)
    value = {"leader": other_leader, "leader_epoch": state.leader_epoch + 1, "isr": state.isr[:-1],
             "partition_epoch": state.partition_epoch + 1, "replicas": state.replicas[::-1]}[field]
    return replace(state, **{field: value})


AGREED_FIELDS = ["leader", "leader_epoch", "isr", "partition_epoch", "replicas"]


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("field", AGREED_FIELDS)
def test_a_cache_left_behind_is_not_stable(field: str) -> None:
    """The digests compared at each check cover every field I7 compares (the replicas' order
    included): a cache differing in one field of one partition is found by the digest alone."""
    with EmbeddedCluster(4, seed=5) as cluster:
        cluster.create_topic("t", 2, 3)
        assert cluster.is_stable()
        stale = cluster.brokers[2].metadata_cache
        state = stale.partition_state(T0)
        assert state is not None
        stale._partitions.update([changed_field(state, field)])
        assert not cluster.is_stable()
        assert [m for m in cluster.metadata_mismatches() if m.startswith("broker 2: t-0: cached")]


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("field", ["leader", "leader_epoch", "isr", "replicas"])
def test_a_store_written_behind_the_caches_is_not_stable(field: str) -> None:
    """The store's side of the digest follows a write of any one field between two checks (a
    partition epoch changes with every write): the kept digest is the snapshot's again, and no
    cache agrees with it."""
    with EmbeddedCluster(4, seed=5) as cluster:
        cluster.create_topic("t", 2, 3)
        assert cluster.is_stable()
        before = cluster.brokers[1].metadata_cache.partition_state(T0)
        assert before is not None
        after = changed_field(before, field)
        store = cluster.store
        epoch = store.get_controller_epoch()
        assert epoch is not None
        if field == "replicas":
            assignment = store.get_topic_assignments(["t"]).values["t"]
            partitions = dict(assignment.partitions)
            partitions[0] = replace(partitions[0], replicas=after.replicas)
            store.set_topic_assignment("t", replace(assignment, partitions=partitions))
        else:
            written = LeaderAndIsr(after.leader, after.isr, after.leader_epoch, before.partition_epoch)
            assert T0 in store.update_partition_states({T0: written}, epoch[0], epoch[1]).successful
        assert cluster._expected_metadata.digest() == MetadataSnapshot.from_store(store).digest
        mismatches = cluster.metadata_mismatches()
        assert {m.split(":")[0] for m in mismatches if ": t-0: cached" in m} == {f"broker {b}" for b in range(1, 5)}


@pytest.mark.usefixtures("engine")
def test_corrupt_partition_states_are_left_out_as_by_the_snapshot() -> None:
    with EmbeddedCluster(3, seed=2) as cluster:
        cluster.create_topic("t", 2, 3)
        expected = ExpectedMetadata(cluster.store)
        expected.digest()
        cluster.store.tree.set_raw("/brokers/topics/t/partitions/1/state", b"{not json")  # type: ignore[attr-defined]
        snapshot = MetadataSnapshot.from_store(cluster.store)
        assert list(snapshot.partitions) == [T0] and expected.digest() == snapshot.digest


@pytest.mark.usefixtures("engine")
def test_a_native_state_table_is_read_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a store that offers its native state table (the memory store), the digest follows a
    restart's rewritten states without building a Python state object per partition (through
    ``get_partition_states``), and stays the snapshot's."""
    with EmbeddedCluster(4, seed=3) as cluster:
        cluster.create_topic("t", 30, 3)
        expected = ExpectedMetadata(cluster.store)
        reads: list[int] = []
        read = cluster.store.get_partition_states
        monkeypatch.setattr(cluster.store, "get_partition_states",
                            lambda partitions, *args: reads.append(len(partitions)) or read(partitions, *args))
        first = expected.digest()
        cluster.shutdown_broker(2)
        cluster.start_broker(2)
        cluster.run_until_stable()
        digest = expected.digest()
        monkeypatch.undo()
        assert reads == []
        assert digest != first and digest == MetadataSnapshot.from_store(cluster.store).digest


@pytest.mark.usefixtures("engine")
def test_stored_digests_are_the_digests_of_the_stored_states() -> None:
    """``stored_digests`` reads the native state table as ``metadata_digest`` of the stored
    states would give, None for a partition without a state, and names a partition it is given no
    replicas for."""
    with EmbeddedCluster(4, seed=5) as cluster:
        cluster.create_topic("t", 4, 3)
        store = cluster.store
        replicas = {p: a.replicas for p, a in store.get_topic_assignments(["t"]).values["t"].partitions.items()}
        states = store.get_partition_states([TopicPartition("t", p) for p in range(4)]).values
        table = store.native_begin()[0]  # type: ignore[attr-defined]
        try:
            digests = stored_digests(table, "t", [3, 0, 7], {**replicas, 7: (1, 2, 3)})
            with pytest.raises(ValueError, match="no replicas given for t-1"):
                stored_digests(table, "t", [1], {0: (1, 2, 3)})
            with pytest.raises(TypeError):
                stored_digests(table, "t", [0], {0: "1, 2, 3"})
        finally:
            store.native_end(False)  # type: ignore[attr-defined]
        expected = []
        for p in (3, 0):
            lai = states[TopicPartition("t", p)].leader_and_isr
            expected.append(metadata_digest("t", p, lai.leader, lai.leader_epoch, lai.isr, lai.partition_epoch,
                                            replicas[p]))
        assert digests == [*expected, None]


@pytest.mark.usefixtures("engine")
def test_a_store_without_a_native_state_table_gives_the_same_digest() -> None:
    """A store read through ``get_partition_states`` (no ``native_begin``) follows the same
    changes to the same digest as one whose native state table is read in place."""

    class PlainStore:
        def __init__(self, store: Any) -> None:
            self._store = store

        def __getattr__(self, name: str) -> Any:
            if name in ("native_begin", "native_end"):
                raise AttributeError(name)
            return getattr(self._store, name)

    with EmbeddedCluster(4, seed=3) as cluster:
        cluster.create_topic("t", 30, 3)
        native, plain = ExpectedMetadata(cluster.store), ExpectedMetadata(PlainStore(cluster.store))  # type: ignore[arg-type]
        assert native.digest() == plain.digest()
        cluster.shutdown_broker(2)
        cluster.start_broker(2)
        cluster.run_until_stable()
        assert native.digest() == plain.digest() == MetadataSnapshot.from_store(cluster.store).digest


def test_folding_digests_replaces_adds_and_removes_them() -> None:
    digests = {0: 5, 1: 2**64 - 1, 2: 7}
    grown = fold_digests(digests, [1, 2, 3], [3, None, 2**64 - 2])
    assert digests == {0: 5, 1: 3, 3: 2**64 - 2}
    assert grown == (3 - (2**64 - 1) - 7 + 2**64 - 2) % 2**64
    with pytest.raises(ValueError, match="2 partitions but 1 digests"):
        fold_digests(digests, [0, 1], [None])
    assert digests == {0: 5, 1: 3, 3: 2**64 - 2}
