"""A broker's checks of LeaderAndIsr and StopReplica requests (``kctl._engine.HostedPartitions``)
answer as the per-partition checks of Kafka's ReplicaManager, written out below in Python, on the
native engine's payloads and on the reference engine's state objects alike; their answers
(``PartitionErrors``) read as the dict of errors per partition they stand for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kctl import wire
from kctl._engine import HostedPartitions, PartitionErrors
from kctl.cluster import EmbeddedCluster
from kctl.errors import Errors
from kctl.messages import LeaderAndIsrResponse
from kctl.model import EPOCH_DURING_DELETE, NO_EPOCH, TopicPartition
from kctl.requests import LeaderAndIsrPartitionState, LeaderAndIsrRequest, StopReplicaPartitionState, StopReplicaRequest

from tests.support.broker_harness import lai_state, replica_requests_of_a_run

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


class _KafkasChecks:
    """ReplicaManager.becomeLeaderOrFollower's and stopReplicas' per-partition checks over a dict
    of held leader epochs and a set of offline partitions (the agent's checks before they moved
    to the engine)."""

    def __init__(self) -> None:
        self.held: dict[TopicPartition, int] = {}
        self.offline: set[TopicPartition] = set()

    def become_leader_or_follower(self, states: Sequence[LeaderAndIsrPartitionState], broker_id: int,
                                  log_dir_failed: bool) -> tuple[list[int], dict[TopicPartition, Errors]]:
        accepted, errors = [], {}
        for i, s in enumerate(states):
            held = self.held.get(s.tp)
            if s.tp in self.offline:
                errors[s.tp] = Errors.KAFKA_STORAGE_ERROR
            elif s.leader_epoch <= (NO_EPOCH if held is None else held):
                errors[s.tp] = Errors.STALE_CONTROLLER_EPOCH
            elif broker_id not in s.replicas:
                errors[s.tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif held is None and not s.is_new and log_dir_failed:
                errors[s.tp] = Errors.KAFKA_STORAGE_ERROR
            else:
                errors[s.tp] = Errors.NONE
                self.held[s.tp] = s.leader_epoch
                accepted.append(i)
        return accepted, errors

    def stop_replicas(self, states: Sequence[StopReplicaPartitionState]) -> tuple[list[int], dict[TopicPartition, Errors]]:
        accepted, errors = [], {}
        for i, s in enumerate(states):
            held = self.held.get(s.tp)
            if s.tp in self.offline:
                errors[s.tp] = Errors.KAFKA_STORAGE_ERROR
            elif held is None or s.leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or s.leader_epoch >= held:
                errors[s.tp] = Errors.NONE
                accepted.append(i)
                if s.delete_partition:
                    self.held.pop(s.tp, None)
            else:
                errors[s.tp] = Errors.FENCED_LEADER_EPOCH
        return accepted, errors

    def mark_offline(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            if self.held.pop(tp, None) is not None:
                self.offline.add(tp)


def _answers(checks: Any, request: Any, broker_id: int, log_dir_failed: bool) -> tuple[list[int], Mapping[Any, Any]]:
    if isinstance(request, LeaderAndIsrRequest):
        return checks.become_leader_or_follower(request.partition_states, broker_id, log_dir_failed)  # type: ignore[no-any-return]
    return checks.stop_replicas(request.partition_states)  # type: ignore[no-any-return]


def test_the_checks_answer_a_runs_requests_as_kafkas() -> None:
    """Every LeaderAndIsr and StopReplica request of a run (new partitions, a reassignment, a
    controlled shutdown, a deletion), replayed per broker against the engine's checks with the
    native payload and with its state objects, and against the checks written out above; some
    replayed twice (stale), some after a failed log directory."""
    sent = [(r.broker, r.request) for r in replica_requests_of_a_run()
            if isinstance(r.request, (LeaderAndIsrRequest, StopReplicaRequest))]
    errors_seen: set[Errors] = set()
    for broker in range(4):
        native, of_objects, kafka = HostedPartitions(), HostedPartitions(), _KafkasChecks()
        requests = [request for to, request in sent if to == broker]
        for n, request in enumerate(requests + requests[: len(requests) // 2]):
            failed = n > len(requests)
            if n == len(requests):
                lost = [T0, T1, TopicPartition("t", 3)]
                for checks in (native, of_objects, kafka):
                    checks.mark_offline(lost)
            objects = type(request)(**{**vars(request), "partition_states": tuple(request.partition_states)})
            expected = _answers(kafka, request, broker, failed)
            assert _answers(native, request, broker, failed) == expected
            assert _answers(of_objects, objects, broker, failed) == expected
            errors_seen.update(expected[1].values())
            for tp in {s.tp for s in request.partition_states}:
                assert native.leader_epoch(tp) == of_objects.leader_epoch(tp) == kafka.held.get(tp)
    assert errors_seen == {Errors.NONE, Errors.STALE_CONTROLLER_EPOCH, Errors.KAFKA_STORAGE_ERROR}


def test_stop_replica_fences_an_older_leader_epoch() -> None:
    hosted, kafka = HostedPartitions(), _KafkasChecks()
    states = [lai_state(T0, 1, [1], leader_epoch=5), lai_state(T1, 2, [2], leader_epoch=1),
              lai_state(T2, 2, [2], leader_epoch=0, replicas=[2, 3])]
    for checks in (hosted, kafka):
        checks.become_leader_or_follower(states, 2, False)
    stops = [StopReplicaPartitionState("t", 0, 4, True), StopReplicaPartitionState("t", 1, 1, False),
             StopReplicaPartitionState("t", 1, 0, True), StopReplicaPartitionState("t", 2, NO_EPOCH, True),
             StopReplicaPartitionState("t", 0, EPOCH_DURING_DELETE, True)]
    assert hosted.stop_replicas(stops) == kafka.stop_replicas(stops)
    assert kafka.stop_replicas(stops)[1][T1] is Errors.FENCED_LEADER_EPOCH
    assert hosted.leader_epoch(T0) is None and hosted.leader_epoch(T1) == 1


def test_answers_read_as_their_dict() -> None:
    hosted = HostedPartitions()
    states = [lai_state(T0, 1, [1], leader_epoch=1), lai_state(T1, 2, [2]), lai_state(T2, 1, [1])]
    indices, errors = hosted.become_leader_or_follower(states, 1, False)
    expected = {T0: Errors.NONE, T1: Errors.UNKNOWN_TOPIC_OR_PARTITION, T2: Errors.NONE}
    assert indices == [0, 2] and isinstance(errors, PartitionErrors) and isinstance(errors, Mapping)
    assert list(errors.values()) == list(expected.values()) and len(errors) == 3  # before the dict is made
    assert errors == expected and expected == errors and not errors != expected and errors != {T0: Errors.NONE}
    assert dict(errors) == expected and list(errors) == list(expected) and list(errors.items()) == list(expected.items())
    assert errors[T1] is Errors.UNKNOWN_TOPIC_OR_PARTITION and errors.get(TopicPartition("x", 0), 7) == 7
    assert T2 in errors and TopicPartition("t", 9) not in errors and errors.get(T0) is Errors.NONE
    with pytest.raises(KeyError):
        errors[TopicPartition("t", 9)]
    assert repr(errors) == repr(expected)
    response = LeaderAndIsrResponse(Errors.NONE, errors)
    assert response == LeaderAndIsrResponse(Errors.NONE, expected)
    assert wire.decode(wire.encode(response)) == response
    with pytest.raises(TypeError):
        hash(errors)


def test_a_partition_named_twice_is_answered_once_with_its_last_answer() -> None:
    hosted = HostedPartitions()
    indices, errors = hosted.become_leader_or_follower([lai_state(T0, 1, [1]), lai_state(T0, 1, [1])], 1, False)
    assert indices == [0] and len(errors) == 1 and errors == {T0: Errors.STALE_CONTROLLER_EPOCH}
    assert list(errors.values()) == [Errors.STALE_CONTROLLER_EPOCH]


@pytest.mark.parametrize("state, message", [
    (object(), "LeaderAndIsr partition state 0: cannot read topic"),
    (LeaderAndIsrPartitionState(7, 0, 1, 1, 0, (1,), 0, (1,), (), (), False), "cannot read topic"),  # type: ignore[arg-type]
    (LeaderAndIsrPartitionState("t", 0, 1, 1, "0", (1,), 0, (1,), (), (), False), "cannot read leader_epoch"),  # type: ignore[arg-type]
    (LeaderAndIsrPartitionState("t", 0, 1, 1, 0, (1,), 0, None, (), (), False), "cannot read replicas"),  # type: ignore[arg-type]
    (LeaderAndIsrPartitionState("t", 2**40, 1, 1, 0, (1,), 0, (1,), (), (), False), "cannot read partition"),
])
def test_bad_states_raise_a_type_error_naming_the_field(state: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        HostedPartitions().become_leader_or_follower([lai_state(T0, 1, [1]), state][1:], 1, False)
    with pytest.raises(TypeError, match="StopReplica partition state 0: cannot read leader_epoch"):
        HostedPartitions().stop_replicas([StopReplicaPartitionState("t", 0, None, True)])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        HostedPartitions().become_leader_or_follower(5, 1, False)  # type: ignore[arg-type]


def test_a_payload_of_the_other_request_is_refused() -> None:
    with EmbeddedCluster(2, engine="rust", seed=1) as cluster:
        cluster.create_topic("t", 2, 2)
        cluster.run_until_stable()
        payload = next(r.request.partition_states for r in cluster.sent_requests
                       if isinstance(r.request, LeaderAndIsrRequest))
    with pytest.raises(TypeError, match="stop_replicas takes a StopReplica request's partition states"):
        HostedPartitions().stop_replicas(payload)
    assert payload.rows([1]) == payload.rows()[1:] and payload.rows([]) == []
    with pytest.raises(ValueError, match="out of range or order"):
        payload.rows([1, 0])
