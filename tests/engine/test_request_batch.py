"""kctl.requests.ControllerBrokerRequestBatch: accumulation and sending (reference §5).

Modelled on Kafka's ControllerChannelManagerTest: a real context, a recording channel, and
assertions on exactly what each broker receives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from kctl.errors import Errors, IllegalStateError
from kctl.model import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    NO_EPOCH,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.requests import (
    ControllerBrokerRequestBatch,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrResponseReceived,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaResponseReceived,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataResponseReceived,
)
from tests.support.statemachine_harness import (
    CONTROLLER_ID,
    Harness,
    RecordingChannel,
    broker_info,
    lai_state,
    make_harness,
    topic_id,
    um_state,
)

pytestmark = pytest.mark.usefixtures("engine")  # every test here runs on each engine

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
FOO0, FOO1 = TopicPartition("foo", 0), TopicPartition("foo", 1)
BAR0 = TopicPartition("bar", 0)


@pytest.fixture
def h() -> Harness:
    return harness()


def harness(ibp: str | None = None, **kwargs: Any) -> Harness:
    config = {} if ibp is None else {"inter.broker.protocol.version": ibp}
    h = make_harness((1, 2, 3), config=config, **kwargs)
    h.create_topic("foo", {0: [1, 2, 3], 1: [2, 3, 1]})
    h.create_topic("bar", {0: [3, 1]}, with_topic_id=False)
    return h


def cache(h: Harness, tp: TopicPartition, leader: int, isr: Sequence[int], leader_epoch: int = 3,
          partition_epoch: int = 5, controller_epoch: int = 1) -> LeaderIsrAndControllerEpoch:
    lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, tuple(isr), leader_epoch, partition_epoch), controller_epoch)
    h.context.put_partition_leadership(tp, lice)
    return lice


def add_lai(h: Harness, brokers: Sequence[int], tp: TopicPartition, is_new: bool = False,
            lice: LeaderIsrAndControllerEpoch | None = None) -> LeaderIsrAndControllerEpoch:
    lice = lice or h.context.partition_leadership(tp)
    assert lice is not None
    h.batch.add_leader_and_isr_request_for_brokers(brokers, tp, lice, h.context.partition_full_replica_assignment(tp), is_new)
    return lice


def send(h: Harness, epoch: int = 1) -> list[Any]:
    sent = h.batch.send_requests_to_brokers(epoch)
    assert [(s.broker, s.request) for s in sent] == [(s.broker, s.request) for s in h.channel.sent]
    return sent


# --- §5.2 accumulation ----------------------------------------------------------------------------


def test_leader_and_isr_accumulates_per_broker(h: Harness) -> None:
    cache(h, FOO0, 1, [1, 2, 3])
    cache(h, FOO1, 2, [2, 3])
    add_lai(h, [1, 2], FOO0, is_new=True)
    add_lai(h, [2, 3], FOO1)
    send(h)
    foo0 = lai_state(FOO0, 1, [1, 2, 3], leader_epoch=3, partition_epoch=5, replicas=[1, 2, 3], is_new=True)
    foo1 = lai_state(FOO1, 2, [2, 3], leader_epoch=3, partition_epoch=5, replicas=[2, 3, 1], is_new=False)
    assert h.channel.leader_and_isr() == {1: {FOO0: foo0}, 2: {FOO0: foo0, FOO1: foo1}, 3: {FOO1: foo1}}


def test_leader_and_isr_carries_the_assignment_and_recovery_state(h: Harness) -> None:
    ra = ReplicaAssignment((1, 2, 3)).reassign_to((3, 4))
    lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(3, (3,), 9, 2, LeaderRecoveryState.RECOVERING), 7)
    h.batch.add_leader_and_isr_request_for_brokers([3], FOO0, lice, ra, False)
    send(h)
    assert h.channel.leader_and_isr()[3][FOO0] == lai_state(
        FOO0, 3, [3], leader_epoch=9, partition_epoch=2, replicas=[3, 4, 1, 2], adding=[4], removing=[1, 2],
        is_new=False, controller_epoch=7, recovery=LeaderRecoveryState.RECOVERING,
    )


def test_negative_broker_ids_are_skipped(h: Harness) -> None:
    cache(h, FOO0, 1, [1])
    add_lai(h, [-1, 1, -2], FOO0)
    h.batch.add_stop_replica_request_for_brokers([-1, 2], FOO0, False)
    h.batch.add_update_metadata_request_for_brokers([-1, 3], [])
    pending = h.batch.pending()
    assert set(pending.leader_and_isr) == {1}
    assert set(pending.stop_replica) == {2}
    assert -1 not in pending.update_metadata_brokers


@pytest.mark.parametrize(("first", "second"), [(True, False), (False, True), (True, True)])
def test_is_new_is_sticky_but_the_state_is_replaced(h: Harness, first: bool, second: bool) -> None:
    old = cache(h, FOO0, 1, [1, 2, 3], leader_epoch=3)
    add_lai(h, [1, 2], FOO0, is_new=first, lice=old)
    new = cache(h, FOO0, 2, [2, 3], leader_epoch=4, partition_epoch=6)
    add_lai(h, [1], FOO0, is_new=second, lice=new)
    pending = h.batch.pending().leader_and_isr
    assert pending[1][FOO0] == lai_state(FOO0, 2, [2, 3], leader_epoch=4, partition_epoch=6, replicas=[1, 2, 3],
                                         is_new=True)
    # Broker 2 kept the first entry, untouched by the second add.
    assert pending[2][FOO0] == lai_state(FOO0, 1, [1, 2, 3], leader_epoch=3, partition_epoch=5, replicas=[1, 2, 3],
                                         is_new=first)


def test_is_new_false_twice_stays_false(h: Harness) -> None:
    cache(h, FOO0, 1, [1])
    add_lai(h, [1], FOO0)
    add_lai(h, [1], FOO0)
    assert h.batch.pending().leader_and_isr[1][FOO0].is_new is False


@pytest.mark.parametrize(("first", "second", "expected"),
                         [(True, False, True), (False, True, True), (False, False, False)])
def test_stop_replica_delete_is_sticky(h: Harness, first: bool, second: bool, expected: bool) -> None:
    cache(h, FOO0, 1, [1], leader_epoch=3)
    h.batch.add_stop_replica_request_for_brokers([1, 2], FOO0, first)
    cache(h, FOO0, 1, [1], leader_epoch=4)
    h.batch.add_stop_replica_request_for_brokers([1], FOO0, second)
    pending = h.batch.pending().stop_replica
    assert pending[1][FOO0] == StopReplicaPartitionState("foo", 0, 4, expected)
    assert pending[2][FOO0] == StopReplicaPartitionState("foo", 0, 3, first)


def test_stop_replica_leader_epoch(h: Harness) -> None:
    cache(h, FOO0, 1, [1], leader_epoch=8)
    h.batch.add_stop_replica_request_for_brokers([1], FOO0, False)  # cached leadership
    h.batch.add_stop_replica_request_for_brokers([1], FOO1, False)  # none cached: NO_EPOCH
    cache(h, BAR0, 3, [3], leader_epoch=8)
    h.context.queue_topic_deletion(["bar"])
    h.batch.add_stop_replica_request_for_brokers([1], BAR0, True)  # queued for deletion: -2
    send(h)
    assert h.channel.stop_replica() == {1: {FOO0: (8, False), FOO1: (NO_EPOCH, False), BAR0: (EPOCH_DURING_DELETE, True)}}
    assert (NO_EPOCH, EPOCH_DURING_DELETE) == (-1, -2)


def test_every_leader_and_isr_adds_update_metadata_for_all_registered_brokers(h: Harness) -> None:
    h.context.add_shutting_down_broker(3)
    cache(h, FOO0, 1, [1, 2, 3])
    add_lai(h, [1], FOO0)
    pending = h.batch.pending()
    assert pending.update_metadata_brokers == {1, 2, 3}
    # Broker 3 is shutting down: still a target, but its replica is listed as offline.
    expected = um_state(FOO0, 1, [1, 2, 3], leader_epoch=3, partition_epoch=5, replicas=[1, 2, 3], offline=[3])
    assert pending.update_metadata_partitions == {FOO0: expected}
    send(h)
    assert h.channel.update_metadata() == {b: {FOO0: expected} for b in (1, 2, 3)}


def test_update_metadata_for_topics_queued_for_deletion(h: Harness) -> None:
    cache(h, FOO0, 1, [1, 2], leader_epoch=8, partition_epoch=9, controller_epoch=4)
    h.context.queue_topic_deletion(["foo"])
    h.batch.add_update_metadata_request_for_brokers([2], [FOO0])
    send(h)
    assert h.channel.update_metadata() == {
        2: {FOO0: um_state(FOO0, LEADER_DURING_DELETE, [1, 2], leader_epoch=0, partition_epoch=0, replicas=[1, 2, 3],
                           controller_epoch=4)}
    }


def test_update_metadata_skips_partitions_without_leadership(h: Harness) -> None:
    cache(h, FOO1, 2, [2])
    h.batch.add_update_metadata_request_for_brokers([1, 2], [FOO0, FOO1, BAR0])
    send(h)
    expected = {FOO1: um_state(FOO1, 2, [2], leader_epoch=3, partition_epoch=5, replicas=[2, 3, 1])}
    assert h.channel.update_metadata() == {1: expected, 2: expected}


def test_update_metadata_offline_replicas(h: Harness) -> None:
    h.context.remove_live_brokers([1])
    h.context.add_replicas_on_offline_dirs(2, [FOO0])
    cache(h, FOO0, 3, [3])
    cache(h, FOO1, 3, [3])
    h.batch.add_update_metadata_request_for_brokers([3], [FOO0, FOO1])
    send(h)
    sent = h.channel.update_metadata()[3]
    assert sent[FOO0].offline_replicas == (1, 2)
    assert sent[FOO1].offline_replicas == (1,)


def test_update_metadata_without_partitions_broadcasts_live_brokers(h: Harness) -> None:
    h.context.add_shutting_down_broker(2)
    h.batch.add_update_metadata_request_for_brokers([1, 2, 3])
    send(h)
    assert h.channel.order() == [("UpdateMetadata", 1), ("UpdateMetadata", 2), ("UpdateMetadata", 3)]
    for s in h.channel.sent:
        assert s.request.partition_states == ()
        assert s.request.live_brokers == tuple(broker_info(b) for b in (1, 2, 3))


def test_update_metadata_states_are_shared_by_all_targets_and_recomputed(h: Harness) -> None:
    cache(h, FOO0, 1, [1, 2, 3], leader_epoch=3)
    h.batch.add_update_metadata_request_for_brokers([1], [FOO0])
    cache(h, FOO0, 2, [2, 3], leader_epoch=4)
    h.batch.add_update_metadata_request_for_brokers([2], [FOO0])
    send(h)
    latest = {FOO0: um_state(FOO0, 2, [2, 3], leader_epoch=4, partition_epoch=5, replicas=[1, 2, 3])}
    assert h.channel.update_metadata() == {1: latest, 2: latest}


# --- §5.4 sending ------------------------------------------------------------------------------------


def test_send_order_leader_and_isr_then_update_metadata_then_stop_replica(h: Harness) -> None:
    cache(h, FOO0, 1, [1, 2])
    h.batch.add_stop_replica_request_for_brokers([3], FOO1, True)
    h.batch.add_update_metadata_request_for_brokers([2], [])
    add_lai(h, [2, 1], FOO0)
    sent = send(h)
    assert [(s.request.api, s.broker) for s in sent] == [
        ("LeaderAndIsr", 1), ("LeaderAndIsr", 2),
        ("UpdateMetadata", 1), ("UpdateMetadata", 2), ("UpdateMetadata", 3),
        ("StopReplica", 3),
    ]


def test_everything_is_cleared_after_sending(h: Harness) -> None:
    cache(h, FOO0, 1, [1])
    add_lai(h, [1], FOO0)
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, False)
    send(h)
    pending = h.batch.pending()
    assert (pending.leader_and_isr, pending.stop_replica, pending.update_metadata_brokers,
            pending.update_metadata_partitions) == ({}, {}, set(), {})
    h.channel.clear()
    assert send(h) == []
    h.batch.new_batch()  # the batch is reusable


def test_brokers_are_filtered_at_send_time(h: Harness) -> None:
    cache(h, FOO0, 1, [1, 2, 3])
    add_lai(h, [1, 2, 3, 7], FOO0)  # 7 was never registered
    h.batch.add_stop_replica_request_for_brokers([3, 7], FOO0, False)
    h.batch.add_update_metadata_request_for_brokers([7], [])
    h.context.remove_live_brokers([3])  # dies between add and send
    send(h)
    assert h.channel.order() == [
        ("LeaderAndIsr", 1), ("LeaderAndIsr", 2), ("UpdateMetadata", 1), ("UpdateMetadata", 2)
    ]
    assert h.batch.pending().leader_and_isr == {}  # dropped, not kept for later


def test_shutting_down_brokers_still_receive_requests(h: Harness) -> None:
    h.context.add_shutting_down_broker(1)
    cache(h, FOO0, 1, [1, 2])
    add_lai(h, [1], FOO0)
    h.batch.add_stop_replica_request_for_brokers([1], FOO0, False)
    send(h)
    assert h.channel.order() == [
        ("LeaderAndIsr", 1), ("UpdateMetadata", 1), ("UpdateMetadata", 2), ("UpdateMetadata", 3), ("StopReplica", 1)
    ]


def test_leader_and_isr_header(h: Harness) -> None:
    h.context.add_shutting_down_broker(3)
    h.context.remove_live_brokers([2])
    cache(h, FOO0, 3, [3, 1])  # leader shutting down: still a live leader
    cache(h, FOO1, 2, [2])  # leader dead: not in live_leaders
    cache(h, BAR0, 1, [1, 3])  # topic without an id
    for tp in (FOO0, FOO1, BAR0):
        add_lai(h, [1], tp)
    send(h, epoch=6)
    [request] = [s.request for s in h.channel.of(LeaderAndIsrRequest)]
    assert request.version == 5  # default IBP 3.0-IV1
    assert (request.controller_id, request.controller_epoch) == (CONTROLLER_ID, 6)
    assert request.broker_epoch == h.context.live_broker_epoch(1)
    assert request.topic_ids == {"foo": topic_id("foo"), "bar": ZERO_UUID}
    assert request.live_leaders == (broker_info(1), broker_info(3))


def test_each_request_carries_the_target_brokers_epoch(h: Harness) -> None:
    epochs = h.context.live_broker_epochs()
    assert len(set(epochs.values())) == 3
    cache(h, FOO0, 1, [1, 2, 3])
    add_lai(h, [1, 2, 3], FOO0)
    for b in (1, 2, 3):
        h.batch.add_stop_replica_request_for_brokers([b], FOO1, False)
    send(h)
    assert len(h.channel.sent) == 9
    for s in h.channel.sent:
        assert s.request.broker_epoch == epochs[s.broker]
        assert s.request.controller_id == CONTROLLER_ID


def test_update_metadata_header(h: Harness) -> None:
    cache(h, FOO0, 1, [1])
    cache(h, BAR0, 3, [3])
    h.batch.add_update_metadata_request_for_brokers([2], [FOO0, BAR0])
    send(h, epoch=4)
    [request] = [s.request for s in h.channel.of(UpdateMetadataRequest)]
    assert (request.version, request.controller_id, request.controller_epoch) == (7, CONTROLLER_ID, 4)
    assert request.broker_epoch == h.context.live_broker_epoch(2)
    assert request.topic_ids == {"foo": topic_id("foo")}  # only topics that have an id
    assert request.live_brokers == tuple(broker_info(b) for b in (1, 2, 3))


@pytest.mark.parametrize(
    ("ibp", "versions"),
    [("3.4", (7, 8, 4)), ("3.2", (6, 7, 3)), ("3.0", (5, 7, 3)), ("2.8-IV0", (4, 6, 3)), ("2.5", (4, 6, 2)),
     ("2.4-IV0", (3, 5, 1)), ("2.2", (2, 5, 1)), ("1.0", (1, 4, 0)), ("0.10.2", (0, 3, 0))],
)
def test_request_versions_follow_the_inter_broker_protocol(ibp: str, versions: tuple[int, int, int]) -> None:
    h = harness(ibp)
    cache(h, FOO0, 1, [1])
    add_lai(h, [1], FOO0)
    h.batch.add_stop_replica_request_for_brokers([1], FOO0, True)
    send(h)
    got = tuple(h.channel.of(kind)[0].request.version
                for kind in (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest))
    assert got == versions


def test_stop_replica_v3_one_request_grouped_by_topic(h: Harness) -> None:
    cache(h, FOO0, 1, [1], leader_epoch=2)
    cache(h, FOO1, 1, [1], leader_epoch=4)
    h.batch.add_stop_replica_request_for_brokers([1], FOO0, True)
    h.batch.add_stop_replica_request_for_brokers([1], BAR0, False)
    h.batch.add_stop_replica_request_for_brokers([1], FOO1, False)
    send(h, epoch=3)
    [sent] = h.channel.of(StopReplicaRequest)
    request = sent.request
    assert (request.version, request.controller_id, request.controller_epoch, request.delete_partitions) == (
        3, CONTROLLER_ID, 3, False)
    assert request.broker_epoch == h.context.live_broker_epoch(1)
    topics = [s.topic for s in request.partition_states]
    assert topics == sorted(topics, key=topics.index)  # each topic's partitions are contiguous
    assert set(request.partition_states) == {
        StopReplicaPartitionState("foo", 0, 2, True),
        StopReplicaPartitionState("foo", 1, 4, False),
        StopReplicaPartitionState("bar", 0, NO_EPOCH, False),
    }


def test_stop_replica_before_v3_sends_deletions_first() -> None:
    h = harness("2.5")
    cache(h, FOO0, 1, [1])
    h.batch.add_stop_replica_request_for_brokers([1, 2], FOO0, False)
    h.batch.add_stop_replica_request_for_brokers([1], FOO1, True)
    h.batch.add_stop_replica_request_for_brokers([1], BAR0, True)
    send(h)
    requests = [(s.broker, s.request) for s in h.channel.of(StopReplicaRequest)]
    assert [(b, r.version, r.delete_partitions) for b, r in requests] == [(1, 2, True), (1, 2, False), (2, 2, False)]
    assert {s.tp for s in requests[0][1].partition_states} == {FOO1, BAR0}
    assert {s.tp for s in requests[1][1].partition_states} == {FOO0}
    assert {s.tp for s in requests[2][1].partition_states} == {FOO0}


def test_stop_replica_before_v3_only_non_deletions() -> None:
    h = harness("2.5")
    h.batch.add_stop_replica_request_for_brokers([1], FOO0, False)
    send(h)
    [sent] = h.channel.of(StopReplicaRequest)
    assert sent.request.delete_partitions is False and sent.callback is None


def test_send_failure_is_wrapped_in_illegal_state(h: Harness) -> None:
    class Broken(RecordingChannel):
        def send_request(self, broker_id: int, request: Any, callback: Any) -> None:
            raise ConnectionError("down")

    batch = ControllerBrokerRequestBatch(CONTROLLER_ID, h.context, h.config, channel=Broken())
    batch.add_update_metadata_request_for_brokers([1])
    with pytest.raises(IllegalStateError) as info:
        batch.send_requests_to_brokers(1)
    assert isinstance(info.value.__cause__, ConnectionError)


def test_without_channel_requests_are_only_returned(h: Harness) -> None:
    batch = ControllerBrokerRequestBatch(CONTROLLER_ID, h.context, h.config)
    batch.add_update_metadata_request_for_brokers([2])
    [sent] = batch.send_requests_to_brokers(1)
    assert sent.broker == 2 and isinstance(sent.request, UpdateMetadataRequest)


# --- §5.3 new_batch and clear ------------------------------------------------------------------------


def test_new_batch_on_an_empty_batch(h: Harness) -> None:
    h.batch.new_batch()
    h.batch.new_batch()


@pytest.mark.parametrize("pending", ["leader_and_isr", "stop_replica", "update_metadata"])
def test_new_batch_refuses_a_pending_batch(h: Harness, pending: str) -> None:
    cache(h, FOO0, 1, [1])
    if pending == "leader_and_isr":
        add_lai(h, [1], FOO0)
        name = "LeaderAndIsr"
    elif pending == "stop_replica":
        h.batch.add_stop_replica_request_for_brokers([2], FOO0, False)
        name = "StopReplica"
    else:
        h.batch.add_update_metadata_request_for_brokers([3], [FOO0])
        name = "UpdateMetadata"
    with pytest.raises(IllegalStateError, match="batch is not empty while creating a new one") as info:
        h.batch.new_batch()
    assert f"Some {name} state changes" in str(info.value)


def test_new_batch_checks_leader_and_isr_then_stop_replica_then_update_metadata(h: Harness) -> None:
    cache(h, FOO0, 1, [1])
    h.batch.add_update_metadata_request_for_brokers([3])
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, False)
    with pytest.raises(IllegalStateError, match="Some StopReplica state changes"):
        h.batch.new_batch()
    add_lai(h, [1], FOO0)
    with pytest.raises(IllegalStateError, match="Some LeaderAndIsr state changes"):
        h.batch.new_batch()


def test_pending_update_metadata_partition_states_alone_do_not_block(h: Harness) -> None:
    cache(h, FOO0, 1, [1])
    h.batch.add_update_metadata_request_for_brokers([], [FOO0])
    assert set(h.batch.pending().update_metadata_partitions) == {FOO0}
    h.batch.new_batch()


def test_clear_empties_everything(h: Harness) -> None:
    cache(h, FOO0, 1, [1])
    add_lai(h, [1], FOO0)
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, True)
    h.batch.clear()
    pending = h.batch.pending()
    assert (pending.leader_and_isr, pending.stop_replica, pending.update_metadata_brokers,
            pending.update_metadata_partitions) == ({}, {}, set(), {})
    h.batch.new_batch()
    assert send(h) == []


def test_pending_is_a_copy(h: Harness) -> None:
    cache(h, FOO0, 1, [1])
    add_lai(h, [1], FOO0)
    pending = h.batch.pending()
    pending.leader_and_isr.clear()
    pending.update_metadata_brokers.clear()
    assert set(h.batch.pending().leader_and_isr) == {1}
    assert h.batch.pending().update_metadata_brokers == {1, 2, 3}


# --- Response callbacks ------------------------------------------------------------------------------


def test_response_callbacks_produce_events(h: Harness) -> None:
    cache(h, FOO0, 1, [1])
    add_lai(h, [1], FOO0)
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, True)
    h.batch.add_stop_replica_request_for_brokers([2], FOO1, False)
    send(h)
    assert h.events == []  # nothing until a broker answers
    lai_response = LeaderAndIsrResponse(Errors.NONE, {FOO0: Errors.NONE})
    um_response = UpdateMetadataResponse(Errors.STALE_CONTROLLER_EPOCH)
    sr_response = StopReplicaResponse(Errors.NONE, {FOO0: Errors.NONE, FOO1: Errors.KAFKA_STORAGE_ERROR})
    for s in h.channel.sent:
        assert s.callback is not None
        if isinstance(s.request, LeaderAndIsrRequest):
            s.callback(lai_response)
        elif isinstance(s.request, UpdateMetadataRequest):
            s.callback(um_response)
        else:
            s.callback(sr_response)
    assert h.events == [
        LeaderAndIsrResponseReceived(1, lai_response),
        UpdateMetadataResponseReceived(1, um_response),
        UpdateMetadataResponseReceived(2, um_response),
        UpdateMetadataResponseReceived(3, um_response),
        StopReplicaResponseReceived(2, sr_response, frozenset({FOO0})),
    ]


def test_stop_replica_callback_before_v3_only_on_the_delete_request() -> None:
    h = harness("2.5")
    h.batch.add_stop_replica_request_for_brokers([1], FOO0, True)
    h.batch.add_stop_replica_request_for_brokers([1], FOO1, False)
    send(h)
    delete, keep = h.channel.of(StopReplicaRequest)
    assert keep.callback is None
    assert delete.callback is not None
    response = StopReplicaResponse()
    delete.callback(response)
    assert h.events == [StopReplicaResponseReceived(1, response, frozenset({FOO0}))]


def test_no_callbacks_without_on_response(h: Harness) -> None:
    channel = RecordingChannel()
    batch = ControllerBrokerRequestBatch(CONTROLLER_ID, h.context, h.config, channel=channel)
    cache(h, FOO0, 1, [1])
    batch.add_leader_and_isr_request_for_brokers([1], FOO0, h.context.partition_leadership(FOO0),  # type: ignore[arg-type]
                                                 h.context.partition_full_replica_assignment(FOO0), False)
    batch.add_stop_replica_request_for_brokers([1], FOO0, True)
    batch.send_requests_to_brokers(1)
    assert len(channel.sent) == 5
    assert all(s.callback is None for s in channel.sent)
