"""The native tables that outlive the payloads a broker is sent (the ``TopicPartition`` and
broker-list tuples rows share, the metadata caches' broker lists) stay bounded by what is still in
use: a broker process's peer may send ever-new topics and broker lists, and must not grow them
without end (``kctl._engine._interned_sizes``)."""

from __future__ import annotations

from typing import Any

from kctl._engine import MetadataCache, PartitionStates, _interned_sizes
from kctl.broker import BrokerAgent, SimulatedReplicaManager
from kctl.errors import Errors
from kctl.messages import LeaderAndIsrResponse, StopReplicaResponse
from kctl.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kctl.requests import LeaderAndIsrRequest

from tests.support.broker_harness import SimCluster, lai_state, leader_and_isr, stop_replica, um_state
from tests.support.statemachine_harness import Harness, make_harness

SWEEP_FLOOR = 4096  # rust/src/py/payload/interned.rs
RETIRE_FLOOR = 65_536  # rust/src/metadata.rs


def test_keys_of_ever_new_topics_are_swept_and_keys_in_use_kept() -> None:
    """An agent set up as a broker process sets it up (keeping no record of answers) answers
    LeaderAndIsr and StopReplica requests naming ever-new topics, as a hostile peer's would: the
    keys table stays bounded, and a key an answer still holds stays the one the next answers share."""
    cluster = SimCluster().start()
    agent = BrokerAgent(9, cluster.tree_session(), cluster.transport, cluster.scheduler, cluster.config,
                        replica_manager=SimulatedReplicaManager(cluster.ledger), keep_answers=False)
    agent.startup()
    per_request = 1000
    kept: dict[Any, Any] = {}
    for round_ in range(40):
        tps = [TopicPartition(f"t{round_}.{i}", 0) for i in range(per_request)]
        answered = agent.handle_request(leader_and_isr(*(lai_state(tp, 2, [2, 3]) for tp in tps)))
        assert isinstance(answered, LeaderAndIsrResponse)
        answer = dict(answered.partition_errors)  # what a broker process writes to the wire reads every key
        assert set(answer.values()) == {Errors.UNKNOWN_TOPIC_OR_PARTITION} and len(answer) == per_request
        stopped = agent.handle_request(stop_replica(*((tp, 1, False) for tp in tps)))
        assert isinstance(stopped, StopReplicaResponse) and len(dict(stopped.partition_errors)) == per_request
        kept = kept or answer
        assert _interned_sizes()["topic_partitions"] <= 2 * (SWEEP_FLOOR + 2 * per_request)
    first = next(iter(kept))
    answered = agent.handle_request(leader_and_isr(lai_state(first, 2, [2, 3])))
    assert isinstance(answered, LeaderAndIsrResponse)
    assert next(iter(dict(answered.partition_errors))) is first


def test_broker_lists_of_ever_new_isrs_are_swept() -> None:
    """Rows of native LeaderAndIsr payloads carrying ever-new ISRs leave the broker-list table
    bounded, while rows still held keep sharing their tuples."""
    h = make_harness((1, 2, 3), engine="rust")
    partitions = 500
    tps = h.create_topic("t", {p: [1, 2, 3] for p in range(partitions)})
    held: list[tuple[Any, ...]] = []
    for round_ in range(40):
        for tp in tps:
            isr = (1, 10 + round_ * partitions + tp.partition)
            lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, isr, round_, round_), 1)
            h.context.put_partition_leadership(tp, lice)
            h.batch.add_leader_and_isr_request_for_brokers([1], tp, lice, h.context.partition_full_replica_assignment(tp),
                                                           False)
        rows = _leader_and_isr_rows(h)
        assert [row[4] for row in rows] == [(1, 10 + round_ * partitions + p) for p in range(partitions)]
        if round_ == 0:
            held = rows
        assert _interned_sizes()["broker_lists"] <= 2 * (SWEEP_FLOOR + 2 * partitions)
    # A list still held is the one an equal list's rows carry.
    lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 10), 99, 99), 1)
    h.context.put_partition_leadership(tps[0], lice)
    h.batch.add_leader_and_isr_request_for_brokers([1], tps[0], lice, h.context.partition_full_replica_assignment(tps[0]),
                                                   False)
    assert _leader_and_isr_rows(h)[0][4] is held[0][4]


def _leader_and_isr_rows(h: Harness) -> list[tuple[Any, ...]]:
    """The rows of the one LeaderAndIsr request the harness's batch sends now."""
    (states,) = [s.request.partition_states for s in h.batch.send_requests_to_brokers(1)
                 if isinstance(s.request, LeaderAndIsrRequest)]
    assert isinstance(states, PartitionStates)
    return states.rows()


def test_a_metadata_cache_sent_ever_new_lists_holds_a_bounded_table_and_exactly_what_it_was_sent() -> None:
    """UpdateMetadata requests with ever-new ISRs and replicas, as a broker process's peer may
    send them: the caches' list tables stay within a bound (a table past it is retired, and freed
    once the cache has moved out), and the cache still reads what it was sent last."""
    cache = MetadataCache()
    before = _interned_sizes()["metadata_lists"]
    per_request, rounds = 1000, 3 * RETIRE_FLOOR // 1000
    peak = 0
    for round_ in range(rounds):
        states = [um_state(TopicPartition("t", p), 1, (1, round_ * per_request + p + 10)) for p in range(per_request)]
        cache.update(states)
        peak = max(peak, _interned_sizes()["metadata_lists"] - before)
    # At most: the lists this test added to the table current at its start (retired, other tests'
    # caches may hold it still), to the next one (retired, freed once the cache moved out), and
    # those the cache moved to the table current now (the partitions' lists).
    assert peak <= 2 * (RETIRE_FLOOR + per_request) + per_request
    last = rounds - 1
    assert len(cache) == per_request
    assert cache.get("t", 7) == (1, 1, 0, [1, last * per_request + 17], 0, [1, last * per_request + 17], [])
    expected = MetadataCache()
    expected.update(states)
    assert cache.items() == expected.items() and cache.digest == expected.digest
