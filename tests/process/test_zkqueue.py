"""The ``zkqueue`` transport: seed 004's bounded per-broker queue, its shrink rule, and a cluster on it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from kctl import admin
from kctl.errors import Errors, StaleControllerEpochError
from kctl.messages import controller_error_response
from kctl.model import TopicPartition
from kctl.requests import StopReplicaPartitionState, StopReplicaRequest, UpdateMetadataRequest
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.zookeeper import ZooKeeperEnsemble
from kctl.model import BrokerInfo
from kctl.transports.zkqueue import (
    FollowerStateChangeQueueFullError,
    StateChangeQueue,
    ZkQueueTransport,
    broker_queue_path,
)

from tests.support.process_harness import ProcessCluster, wait_until
from tests.support.process_harness import leader_and_isr_request as leader_and_isr


def stop_replica(controller_epoch: int, *states: tuple[str, int, int, bool]) -> StopReplicaRequest:
    partition_states = tuple(StopReplicaPartitionState(t, p, e, d) for t, p, e, d in states)
    return StopReplicaRequest(3, 9, controller_epoch, 5, all(s.delete_partition for s in partition_states),
                              partition_states)


@pytest.fixture
def transport(zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str) -> Iterator[ZkQueueTransport]:
    ZooKeeperStore(zookeeper_server.hosts + zookeeper_chroot).close()  # creates the chroot
    t = ZkQueueTransport(hosts=zookeeper_server.hosts + zookeeper_chroot, max_queue_size=5)
    yield t
    t.close()


def _bodies(queue: StateChangeQueue) -> list[Any]:
    return [item.body for item in queue.items()]


def test_full_queue_shrinks_to_the_latest_close_replica_per_partition(transport: ZkQueueTransport) -> None:
    queue = transport.queue(broker_queue_path(7))
    update = UpdateMetadataRequest(7, 9, 1, 5, (), (), {})
    queued = [
        stop_replica(1, ("a", 0, 3, False), ("b", 0, 1, True)),
        leader_and_isr(1, 4),
        update,
        stop_replica(2, ("a", 0, 5, True)),
        stop_replica(2, ("c", 1, -2, True)),
    ]
    for body in queued:
        queue.put("req", 9, "t", body)
    assert queue.is_full() and _bodies(queue) == queued

    queue.put("req", 9, "t", update)  # full: shrink first, then queue
    assert _bodies(queue) == [
        stop_replica(1, ("b", 0, 1, True)),  # partition b-0: only its close request
        stop_replica(2, ("a", 0, 5, True), ("c", 1, -2, True)),  # a-0: the epoch-2 request, not epoch 1's
        update,
    ]


def test_queue_still_full_after_shrinking_raises(transport: ZkQueueTransport) -> None:
    queue = transport.queue(broker_queue_path(8))
    for i in range(5):  # answers are not state changes: shrinking cannot drop them
        queue.put("resp", 9, str(i), i)
    with pytest.raises(FollowerStateChangeQueueFullError, match=r"/brokers/state/8 is full \(5 items\)"):
        queue.put("req", 9, "t", leader_and_isr(1, 0))
    assert queue.size() == 5


def test_channel_keeps_requests_in_order_while_the_queue_is_full(transport: ZkQueueTransport) -> None:
    channel = transport.controller_channel(9)

    channel.add_broker(BrokerInfo(6))
    queue = transport.queue(broker_queue_path(6))
    for i in range(5):
        queue.put("resp", 9, str(i), i)
    channel.send_request(6, leader_and_isr(1, 0), None)
    channel.send_request(6, leader_and_isr(1, 1), None)
    assert channel.backlog(6) == 2 and queue.size() == 5
    for name in queue.names()[:3]:  # the broker consumes three items
        queue.delete(name)

    wait_until(lambda: channel.backlog(6) == 0, 10, "the backlog to drain")
    assert _bodies(queue)[-2:] == [leader_and_isr(1, 0), leader_and_isr(1, 1)]


def test_a_request_refused_for_its_controller_epoch_is_answered_with_the_error(
    transport: ZkQueueTransport, caplog: pytest.LogCaptureFixture
) -> None:
    # A broker agent refuses, by raising, a controller epoch ahead of /controller_epoch; the item is
    # consumed all the same, so the controller gets Kafka's STALE_CONTROLLER_EPOCH, not silence.
    def refuse(request: Any) -> Any:
        raise StaleControllerEpochError("its controller epoch 7 is ahead of /controller_epoch (1)")

    caplog.set_level(logging.WARNING, logger="kctl.transports.zkqueue")
    transport.bind_broker(6, refuse)
    transport.bind_controller(9, lambda request, respond: None)  # consumes the answers to controller 9
    channel = transport.controller_channel(9)
    channel.add_broker(BrokerInfo(6))
    answers: list[Any] = []
    request = leader_and_isr(7, 0)
    channel.send_request(6, request, answers.append)

    wait_until(lambda: answers, 30, "the broker's answer")
    assert answers == [controller_error_response(request, Errors.STALE_CONTROLLER_EPOCH)]
    assert transport.queue(broker_queue_path(6)).size() == 0
    assert ("Broker 6: answering STALE_CONTROLLER_EPOCH to LeaderAndIsr from controller 9: its controller epoch 7 "
            "is ahead of /controller_epoch (1)") in caplog.messages


@pytest.mark.usefixtures("engine")
def test_cluster_on_the_zkqueue_transport(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with ProcessCluster(zookeeper_server.hosts + zookeeper_chroot, tmp_path_factory.mktemp("zkqueue"),
                        transport="zkqueue") as cluster:
        controller = cluster.start_controller(1)
        for broker in (1, 2, 3):
            cluster.start_broker(broker)
        brokers = {b: None for b in (1, 2, 3)}
        admin.create_topic(cluster.admin, "orders", broker_racks=brokers, assignment={0: [1, 2], 1: [3, 1]})
        cluster.wait_until(lambda: cluster.leaders("orders") == {0: 1, 1: 3}, 30, "leaders", watch=controller)
        admin.request_reassignment(cluster.admin, {TopicPartition("orders", 0): [2, 3]})
        cluster.wait_until(lambda: cluster.reassignment_done(TopicPartition("orders", 0), [2, 3]), 30,
                           "the reassignment over zkqueue", watch=controller)
        cluster.brokers[3].kill()
        cluster.wait_until(lambda: cluster.leaders("orders") == {0: 2, 1: 1}, 30, "leaders to move off broker 3")
