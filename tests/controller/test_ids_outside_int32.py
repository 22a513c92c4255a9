"""Ids and epochs outside Kafka's ``Int`` in the store (issue 11, defect 2), on the memory store.

A broker registered as ``/brokers/ids/99999999999``, a topic or partition state holding such an id
or epoch, an admin request or notification naming one, or a broker-id child such as ``²`` once made
``BrokerChange`` or every later failover fail (the native engine's ``OverflowError``) until someone
edited the store by hand, and the admin tools placed replicas on the rogue broker. Kafka parses
these as ``Int`` and skips what does not parse with a log line; so does kctl. Each test plants one
such znode and checks that the controller keeps working: brokers come and go, a failover succeeds,
new topics land on real brokers only, and a log line names the znode. The same on a real
ZooKeeper: ``tests/process/test_ids_outside_int32_processes.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

from kctl import admin
from kctl.broker import BrokerAgent
from kctl.cluster import EmbeddedCluster
from kctl.controller import KafkaController
from kctl.errors import KctlError
from kctl.model import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.requests import LeaderAndIsrRequest
from kctl.stores import paths
from kctl.stores.base import TopicAssignment
from kctl.tools.client import AdminClient

from tests.support.controller import active, error_names, escaped, leaders, partition, unchanged

BIG = 99_999_999_999
T0, U0, U1 = TopicPartition("t", 0), TopicPartition("u", 0), TopicPartition("u", 1)


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    """Brokers 1–4 (candidates 3 and 4): t-0 on [1,2,3], u on [1,2] and [2,1]."""
    with EmbeddedCluster(4, controllers=[3, 4], config={"auto.leader.rebalance.enable": False}) as c:
        c.create_topic("t", assignment={0: [1, 2, 3]})
        c.create_topic("u", assignment={0: [1, 2], 1: [2, 1]})
        yield c


def rogue_broker(cluster: EmbeddedCluster) -> str:
    cluster.store.new_session().register_broker(BrokerInfo(BIG, (EndPoint("rogue", 9092),)))  # type: ignore[attr-defined]
    return f"/brokers/ids/{BIG}"


def superscript_broker(cluster: EmbeddedCluster) -> str:
    cluster.store.tree.set_raw("/brokers/ids/²", BrokerInfo(2))  # type: ignore[attr-defined]
    return "/brokers/ids/²"


def topic_with_rogue_replica(cluster: EmbeddedCluster) -> str:
    cluster.store.tree.set_raw(paths.topic("rogue"), TopicAssignment({0: ReplicaAssignment((1, BIG))}))  # type: ignore[attr-defined]
    return paths.topic("rogue")


def topic_with_rogue_partition(cluster: EmbeddedCluster) -> str:
    cluster.store.tree.set_raw(paths.topic("rogue"), TopicAssignment({BIG: ReplicaAssignment((1, 2))}))  # type: ignore[attr-defined]
    return paths.topic("rogue")


def state_with_leader_epoch_2_63(cluster: EmbeddedCluster) -> str:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2, 3), 2**63), 1)
    cluster.store.tree.set_raw(paths.partition_state(T0), state)  # type: ignore[attr-defined]
    return paths.partition_state(T0)


def state_with_controller_epoch_2_40(cluster: EmbeddedCluster) -> str:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2, 3), 0), 2**40)
    cluster.store.tree.set_raw(paths.partition_state(T0), state)  # type: ignore[attr-defined]
    return paths.partition_state(T0)


def reassignment_to_a_rogue_broker(cluster: EmbeddedCluster) -> str:
    cluster.store.create_partition_reassignments({U0: [2, BIG]})
    return paths.REASSIGN_PARTITIONS


def preferred_election_of_a_rogue_partition(cluster: EmbeddedCluster) -> str:
    cluster.store.create_preferred_replica_election([TopicPartition("u", BIG)])
    return paths.PREFERRED_REPLICA_ELECTION


POISONS: dict[str, Callable[[EmbeddedCluster], str]] = {
    f.__name__: f
    for f in (rogue_broker, superscript_broker, topic_with_rogue_replica, topic_with_rogue_partition,
              state_with_leader_epoch_2_63, state_with_controller_epoch_2_40, reassignment_to_a_rogue_broker,
              preferred_election_of_a_rogue_partition)
}


@pytest.mark.parametrize("poison", POISONS.values(), ids=POISONS.keys())
def test_the_controller_skips_the_znode_and_keeps_working(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture, poison: Callable[[EmbeddedCluster], str]
) -> None:
    path = poison(cluster)
    cluster.run_until(cluster.is_quiet, what="the change to be handled")

    # BrokerChange is processed for the real brokers: broker 1 goes, u moves to broker 2.
    cluster.kill_broker(1)
    cluster.run_until(lambda: leaders(cluster, "u") == {0: 2, 1: 2}, what="u to move to broker 2")
    assert partition(cluster, U0).isr == (2,)
    # A failover loads everything readable, and the new controller serves.
    old = cluster.active_controller
    new = cluster.kill_controller()
    assert old is not None and new != old.broker_id
    cluster.start_broker(1)
    cluster.run_until(lambda: partition(cluster, U0).isr == (2, 1), what="broker 1 back in u-0's ISR")
    # The admin tools place new topics on real brokers only.
    placed = AdminClient.for_cluster(cluster).create_topic("n", partitions=8, replication_factor=4)
    assert {b for replicas in placed.values() for b in replicas} == {1, 2, 3, 4}
    cluster.run_until(lambda: "n" in active(cluster).context.all_topics and all(
        p.leader in (1, 2, 3, 4) for p in cluster.describe("n")), what="n to be online")

    assert any(path in r.getMessage() for r in logs.records if r.levelno >= logging.WARNING), path
    assert escaped(logs) == []


# --- Notifications: one malformed child never fails the whole event ----------------------------


def test_a_malformed_isr_change_notification_does_not_hold_back_the_others(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    """A leader that changed u-0's ISR itself (before AlterPartition) notifies the controller,
    which re-reads the state; a notification naming partition 99999999999 beside it is skipped."""
    controller = active(cluster)
    current = cluster.store.get_partition_states([U0]).values[U0]
    bad = cluster.store.create_isr_change_notification([TopicPartition("u", BIG)])
    shrunk = LeaderAndIsr(1, (1,), current.leader_and_isr.leader_epoch, current.leader_and_isr.partition_epoch)
    assert cluster.store.update_partition_states({U0: shrunk}, current.controller_epoch, -1).successful
    cluster.store.create_isr_change_notification([U0])
    cluster.run_until(lambda: partition(cluster, U0).isr == (1,), what="the controller to learn u-0's ISR")

    assert controller.is_active and cluster.store.get_isr_change_notifications() == []
    assert f"Ignoring the undecodable /isr_change_notification/{bad}: " in logs.text
    assert escaped(logs) == []


def test_a_malformed_log_dir_event_notification_does_not_hold_back_the_others(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    """Broker 2's log directory failed: the controller sends it LeaderAndIsr for its replicas (to
    learn which are offline), although a notification naming broker 99999999999 came with it."""
    sent = len(cluster.sent_requests)
    bad = cluster.store.create_log_dir_event_notification(BIG)
    cluster.store.create_log_dir_event_notification(2)
    cluster.run_until(lambda: any(r.broker == 2 and isinstance(r.request, LeaderAndIsrRequest)
                                  for r in cluster.sent_requests[sent:]), what="LeaderAndIsr to broker 2")

    assert cluster.store.get_log_dir_event_notifications() == []
    assert f"Ignoring the undecodable /log_dir_event_notification/{bad}: " in logs.text
    assert escaped(logs) == []


# --- Entry points refuse such ids, naming the field and the value, and change nothing -----------

INT32 = "from -2147483648 to 2147483647"


def test_the_controllers_entry_points_refuse_ids_outside_kafkas_int(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    controller = active(cluster)
    rogue = TopicPartition("u", BIG)
    epoch = cluster.brokers[1].broker_epoch
    state = cluster.store.get_partition_states([U0]).values[U0].leader_and_isr
    refusals = {
        "elect_leaders": (lambda: controller.elect_leaders([U0, rogue]), f"partition u-{BIG}: the partition id"),
        "unclean": (lambda: controller.elect_leaders([rogue], "unclean"), f"partition u-{BIG}: the partition id"),
        "reassign": (lambda: controller.alter_partition_reassignments({rogue: [1, 2]}), f"partition u-{BIG}: the partition id"),
        "list": (lambda: controller.list_partition_reassignments([rogue]), f"partition u-{BIG}: the partition id"),
        "shutdown": (lambda: controller.controlled_shutdown(BIG, epoch), "broker id"),
        "shutdown_epoch": (lambda: controller.controlled_shutdown(1, 2**64), "broker epoch"),
        "alter": (lambda: controller.alter_partition(1, epoch, {U0: LeaderAndIsr(1, (1, BIG), state.leader_epoch,
                                                                               state.partition_epoch)}),
                  "partition u-0: the ISR member"),
        "alter_epoch": (lambda: controller.alter_partition(1, epoch, {U0: state.new_leader_and_isr(1, (1,)).with_partition_epoch(2**40)}),
                        "partition u-0: the partition epoch"),
    }
    with unchanged(cluster):
        for name, (call, field) in refusals.items():
            future = call()
            assert future.done(), name  # refused at once, never queued
            error = future.exception()
            assert error is not None and error.error.name == "INVALID_REQUEST", name
            assert str(error).startswith(f"{field} must be an integer "), (name, str(error))
        assert "must be an integer from -9223372036854775808 to 9223372036854775807, got 18446744073709551616" in str(
            controller.controlled_shutdown(1, 2**64).exception())
    # A replica list naming such a broker is refused per partition, as Kafka refuses invalid ids.
    assert error_names(cluster.reassign({U0: [2, BIG], U1: [1, 2]})) == {U0: "INVALID_REPLICA_ASSIGNMENT", U1: "NONE"}
    assert (partition(cluster, U0).replicas, partition(cluster, U1).replicas) == ((1, 2), (1, 2))
    assert escaped(logs) == []


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ({"partitions": 2**31, "replication_factor": 1}, "INVALID_PARTITIONS",
         f"Number of partitions must be an integer {INT32}, got 2147483648."),
        ({"partitions": 1, "replication_factor": 2**31}, "INVALID_REPLICATION_FACTOR",
         f"Replication factor must be an integer {INT32}, got 2147483648."),
        ({"assignment": {0: [1, BIG]}}, "INVALID_REPLICA_ASSIGNMENT",
         f"Broker id for partition id 0 must be an integer from 0 to 2147483647, got {BIG}."),
        ({"assignment": {BIG: [1]}}, "INVALID_REPLICA_ASSIGNMENT", f"Partition id must be an integer {INT32}, got {BIG}."),
    ],
)
def test_topic_creation_refuses_counts_and_ids_outside_kafkas_int(
    cluster: EmbeddedCluster, spec: dict[str, object], error: str, message: str
) -> None:
    with unchanged(cluster), pytest.raises(KctlError) as refused:
        cluster.create_topic("v", **spec)  # type: ignore[arg-type]
    assert (refused.value.error.name, str(refused.value)) == (error, message)
    assert "v" not in cluster.store.get_all_topics()


def test_partition_additions_refuse_counts_and_ids_outside_kafkas_int(cluster: EmbeddedCluster) -> None:
    with unchanged(cluster):
        for total, manual, error in ((2**31, None, "INVALID_PARTITIONS"), (3, {2: [1, BIG]}, "INVALID_REPLICA_ASSIGNMENT")):
            with pytest.raises(KctlError) as refused:
                cluster.create_partitions("u", total, manual)
            assert refused.value.error.name == error and "to 2147483647, got " in str(refused.value)


def test_admin_requests_naming_ids_outside_kafkas_int_are_refused_before_writing(cluster: EmbeddedCluster) -> None:
    with unchanged(cluster):
        with pytest.raises(KctlError, match=f"Invalid replica list \\[2, {BIG}\\] for partition u-0: a broker id "
                                            f"must be an integer from 0 to 2147483647, got {BIG}"):
            admin.request_reassignment(cluster.store, {U0: [2, BIG]})
        for request in (lambda: admin.request_reassignment(cluster.store, {TopicPartition("u", BIG): [1]}),
                        lambda: admin.request_preferred_replica_election(cluster.store, [U0, TopicPartition("u", BIG)])):
            with pytest.raises(KctlError) as refused:
                request()
            assert refused.value.error.name == "INVALID_REQUEST"
            assert str(refused.value) == f"partition u-{BIG}: the partition id must be an integer from 0 to 2147483647, got {BIG}"
        assert cluster.store.get_partition_reassignments() is None
        assert cluster.store.get_preferred_replica_election() is None


def test_the_embedded_clusters_entry_points_refuse_ids_outside_kafkas_int(cluster: EmbeddedCluster) -> None:
    rogue = TopicPartition("u", BIG)
    with unchanged(cluster):
        for call in (lambda: cluster.produce(rogue), lambda: cluster.partition_history(rogue),
                     lambda: cluster.fail_log_dir(2, [U0, rogue])):
            with pytest.raises(KctlError, match=f"partition u-{BIG}: the partition id must be an integer {INT32}"):
                call()
        with pytest.raises(KctlError, match=f"INVALID_REQUEST|partition u-{BIG}"):
            cluster.elect_leaders([rogue], wait=False)
    for brokers, message in (([1, BIG], f"broker id must be an integer from 0 to 2147483647, got {BIG}"),
                             ([-1, 2], "broker id must be an integer from 0 to 2147483647, got -1"),
                             (2**31, "brokers must be an integer from 1 to 2147483647, got 2147483648"),
                             ([1, "2"], "broker id must be an integer, got '2'")):
        with pytest.raises(KctlError) as refused:
            EmbeddedCluster(brokers)  # type: ignore[arg-type]
        assert str(refused.value) == message


def test_controllers_and_brokers_refuse_ids_and_ports_outside_kafkas_int(cluster: EmbeddedCluster) -> None:
    with pytest.raises(KctlError, match=f"broker id must be an integer from 0 to 2147483647, got {BIG}"):
        KafkaController(BIG, cluster.store.new_session(), cluster.transport)  # type: ignore[attr-defined]
    for broker_id, port, message in ((BIG, None, f"broker id must be an integer from 0 to 2147483647, got {BIG}"),
                                     (5, 70000, "port must be an integer from 0 to 65535, got 70000")):
        with pytest.raises(KctlError, match=message):
            BrokerAgent(broker_id, cluster.store.new_session(), cluster.transport, cluster.scheduler, port=port)  # type: ignore[attr-defined]
    # A simulated broker's listener stays a TCP port whatever its id.
    assert BrokerAgent(2**31 - 1, cluster.store.new_session(), cluster.transport, cluster.scheduler).info.endpoints[0].port <= 65535  # type: ignore[attr-defined]
