"""A broker reads a LeaderAndIsr or StopReplica request's partition states as rows: the native
payload builds them without a state object each, and they say what the objects say."""

from __future__ import annotations

import pytest

from kctl._engine import PartitionStates
from kctl.broker import ReplicaRole
from kctl.broker.replica_manager import AcceptedStates
from kctl.cluster import EmbeddedCluster
from kctl.errors import Errors
from kctl.messages import LeaderAndIsrResponse, leader_and_isr_rows, stop_replica_rows
from kctl.model import TopicPartition
from kctl.requests import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

from tests.support.broker_harness import SimCluster, lai_state, replica_requests_of_a_run

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def test_native_payloads_read_as_the_rows_of_their_state_objects() -> None:
    """Every LeaderAndIsr and StopReplica payload of a run (new partitions, a reassignment adding
    replicas, a controlled shutdown, a deletion) has the rows the reference engine's objects give."""
    requests = [r.request for r in replica_requests_of_a_run()]
    leader_and_isr = [r.partition_states for r in requests if isinstance(r, LeaderAndIsrRequest)]
    stop_replica = [r.partition_states for r in requests if isinstance(r, StopReplicaRequest)]
    assert all(isinstance(p, PartitionStates) for p in leader_and_isr + stop_replica)
    rows = [row for payload in leader_and_isr for row in payload.rows()]
    assert rows == [row for payload in leader_and_isr for row in leader_and_isr_rows(tuple(payload))]
    assert any(row[7] for row in rows) and any(row[8] for row in rows) and any(not row[8] for row in rows)
    assert all(type(row[0]) is TopicPartition for row in rows)
    stops = [row for payload in stop_replica for row in payload.rows()]
    assert stops == [row for payload in stop_replica for row in stop_replica_rows(tuple(payload))]
    assert any(row[2] for row in stops) and any(not row[2] for row in stops)
    update_metadata = next(r.partition_states for r in requests if isinstance(r, UpdateMetadataRequest))
    with pytest.raises(ValueError, match="UpdateMetadata states have no rows"):
        update_metadata.rows()


def test_rows_name_a_partition_with_one_key_object() -> None:
    """Every payload's rows that name a partition (to each of its replicas, at every change) carry
    the same ``TopicPartition`` object, which the brokers' tables then share and find by identity."""
    with EmbeddedCluster(3, engine="rust", seed=1) as cluster:
        cluster.create_topic("k", 3, 3)
        cluster.shutdown_broker(1)
        cluster.start_broker(1)
        cluster.run_until_stable()
        payloads = [r.request.partition_states for r in cluster.sent_requests
                    if isinstance(r.request, (LeaderAndIsrRequest, StopReplicaRequest))]
        keys: dict[TopicPartition, list[TopicPartition]] = {}
        for payload in payloads:
            for row in payload.rows():
                keys.setdefault(row[0], []).append(row[0])
        assert sorted(keys) == [TopicPartition("k", p) for p in range(3)]
        assert all(len(named) > 3 and all(key is named[0] for key in named) for named in keys.values())
        for broker in cluster.brokers.values():
            assert all(tp is keys[tp][0] for tp in broker.replica_manager.hosted_partitions())  # type: ignore[attr-defined]


def test_the_agent_answers_each_partition_and_hands_its_replica_manager_the_accepted_rows() -> None:
    cluster = SimCluster().start()
    agent = cluster.agents[1]
    payload = (
        lai_state(T0, 1, [1, 2], leader_epoch=0, is_new=True),
        lai_state(T1, 2, [2, 1], leader_epoch=0, is_new=True),
        lai_state(T2, 2, [2], leader_epoch=0, replicas=[2, 3], is_new=True),  # not a replica here
    )
    response = agent.handle_request(LeaderAndIsrRequest(5, 100, 1, -1, payload, {}, ()))
    assert response == LeaderAndIsrResponse(Errors.NONE, {T0: Errors.NONE, T1: Errors.NONE,
                                                          T2: Errors.UNKNOWN_TOPIC_OR_PARTITION})
    manager = cluster.manager(1)
    assert manager.replica_state(T0).role is ReplicaRole.LEADER  # type: ignore[union-attr]
    assert manager.replica_state(T1).role is ReplicaRole.FOLLOWER  # type: ignore[union-attr]
    assert manager.replica_state(T2) is None and agent.leader_epoch(T1) == 0


def test_accepted_states_are_the_request_objects_of_the_accepted_rows() -> None:
    states = tuple(lai_state(tp, 1, [1]) for tp in (T0, T1, T2))
    rows = leader_and_isr_rows(states)
    accepted = AcceptedStates(states, [0, 2], leader_and_isr_rows)
    assert len(accepted) == 2 and accepted[1] is states[2] and accepted[-1] is states[2]
    assert list(accepted) == [states[0], states[2]] and accepted[:1] == [states[0]]
    assert accepted.rows == [rows[0], rows[2]]


def test_rows_carry_one_tuple_per_distinct_broker_list() -> None:
    """Equal ISRs, replica lists and adding replicas of every payload's rows are one tuple, which
    the simulated replicas then share."""
    with EmbeddedCluster(4, engine="rust", seed=1) as cluster:
        cluster.create_topic("k", 3, 2)
        cluster.reassign({TopicPartition("k", 0): [3, 2, 1]})
        cluster.shutdown_broker(1)
        cluster.start_broker(1)
        cluster.run_until_stable()
        rows = [row for r in cluster.sent_requests if isinstance(r.request, LeaderAndIsrRequest)
                for row in r.request.partition_states.rows()]
    lists: dict[tuple[int, ...], tuple[int, ...]] = {}
    for row in rows:
        for broker_list in (row[4], row[6], row[7]):
            assert lists.setdefault(broker_list, broker_list) is broker_list
    assert len(lists) < len(rows) and any(row[7] for row in rows)
