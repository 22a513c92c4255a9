"""Controller and broker processes on a real ZooKeeper: crashes, session expiry, a lost ZK leader.

Each test runs real ``kctl controller`` and ``kctl broker`` processes (the ``tcp`` transport)
and observes the cluster through ZooKeeper, as an operator would.
"""

from __future__ import annotations

import signal
import time

import pytest
from kazoo.client import KazooClient
from kazoo.security import ACL, ANYONE_ID_UNSAFE, OPEN_ACL_UNSAFE, Permissions

from kctl import admin
from kctl.controller.controller import FAILED_FAILOVER_BACKOFF
from kctl.model import TopicPartition
from kctl.stores import paths
from kctl.testing.ports import free_ports
from kctl.testing.zookeeper import ZooKeeperEnsemble

from tests.support.process_harness import KctlProcess, ProcessCluster

pytestmark = pytest.mark.usefixtures("engine")  # every test here runs on each engine

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def _create_topic(cluster: ProcessCluster, assignment: dict[int, list[int]]) -> None:
    brokers = {b: info.rack for b, (info, _) in cluster.admin.get_all_brokers().items()}
    admin.create_topic(cluster.admin, "orders", broker_racks=brokers, assignment=assignment)
    cluster.wait_until(lambda: len(cluster.leaders("orders")) == len(assignment), 30, "the partitions to get leaders")


def _start_reassignment(cluster: ProcessCluster, targets: dict[TopicPartition, list[int]]) -> None:
    """Request a reassignment whose new replicas include broker 4, which is not running: it stays
    in progress (RS = ORS + TRS, adding replicas set) until broker 4 starts."""
    admin.request_reassignment(cluster.admin, targets)
    cluster.wait_until(
        lambda: all(cluster.assignment("orders")[tp.partition].adding_replicas for tp in targets), 30,
        "the reassignment to start (adding replicas written)",
    )


def test_killed_active_controller_reassignment_completes_on_another(cluster: ProcessCluster) -> None:
    first = cluster.start_controller(1)
    cluster.wait_until(lambda: cluster.active_controller() == 1, 30, "controller 1 to be active", watch=first)
    second = cluster.start_controller(2)
    for broker in (1, 2, 3):
        cluster.start_broker(broker)
    _create_topic(cluster, {0: [1, 2], 1: [2, 3]})
    epoch = cluster.controller_epoch()

    targets = {T0: [3, 4], T1: [4, 1]}
    _start_reassignment(cluster, targets)
    first.kill()  # kill -9 in the middle of the reassignment
    assert cluster.assignment("orders")[0].adding_replicas == (3, 4)  # it was in progress

    cluster.wait_until(lambda: cluster.active_controller() == 2, 30, "controller 2 to take over", watch=second)
    assert cluster.controller_epoch() == epoch + 1
    cluster.start_broker(4)
    cluster.wait_for_reassignments(targets, 60)
    assert "successfully elected as the controller" in second.log()


def test_controller_session_expiry_resigns_and_rejoins_the_election(cluster: ProcessCluster) -> None:
    """Reference §6.2: a controller whose session expires resigns (Expire) and, on its new session,
    runs for election again; meanwhile another controller took over with the next epoch."""
    first = cluster.start_controller(1)
    cluster.wait_until(lambda: cluster.active_controller() == 1, 30, "controller 1 to be active", watch=first)
    second = cluster.start_controller(2)
    for broker in (1, 2):
        cluster.start_broker(broker)
    _create_topic(cluster, {0: [1, 2]})
    epoch = cluster.controller_epoch()

    first.signal(signal.SIGSTOP)  # no heartbeats: ZooKeeper expires the session after 2 s
    try:
        cluster.wait_until(lambda: cluster.active_controller() == 2, 30, "controller 2 to take over", watch=second)
        assert cluster.controller_epoch() == epoch + 1
    finally:
        first.signal(signal.SIGCONT)
    cluster.wait_until(lambda: "New ZooKeeper session" in first.log(), 30, "controller 1 to renew its session",
                       watch=first)
    assert "Resigned as the controller (broker 1" in first.log()
    assert cluster.active_controller() == 2  # the renewed candidate did not take over

    # The leader moves with a broker crash: controller 2 serves.
    cluster.brokers[1].kill()
    cluster.wait_until(lambda: cluster.leaders("orders") == {0: 2}, 30, "partition 0 to move to broker 2")
    # Controller 1 is a candidate again: it takes over when controller 2 stops, with the next epoch.
    assert second.terminate() == 0
    cluster.wait_until(lambda: cluster.active_controller() == 1, 30, "controller 1 to take over again", watch=first)
    assert cluster.controller_epoch() == epoch + 2


def test_killed_broker_loses_its_leaderships(cluster: ProcessCluster) -> None:
    controller = cluster.start_controller(1)
    for broker in (1, 2, 3):
        cluster.start_broker(broker)
    _create_topic(cluster, {0: [1, 2, 3], 1: [1, 3, 2], 2: [2, 3, 1]})
    assert cluster.leaders("orders") == {0: 1, 1: 1, 2: 2}
    cluster.wait_until(lambda: all(len(cluster.state(TopicPartition("orders", p)).leader_and_isr.isr) == 3  # type: ignore[union-attr]
                                   for p in range(3)), 30, "full ISRs")

    cluster.brokers[1].kill()
    def moved_off_broker_1() -> dict[int, int] | None:
        leaders = cluster.leaders("orders")
        return leaders if 1 not in leaders.values() else None

    moved = cluster.wait_until(moved_off_broker_1, 30, "broker 1's leaderships to move", watch=controller)
    assert moved == {0: 2, 1: 3, 2: 2}
    # Partition 2 keeps its leader: broker 1 leaves its ISR in the replica state machine's write,
    # which the same event makes after the elections' writes.
    cluster.wait_until(lambda: all(1 not in cluster.state(TopicPartition("orders", p)).leader_and_isr.isr  # type: ignore[union-attr]
                                   for p in range(3)), 30, "broker 1 to leave every ISR", watch=controller)


def test_clean_broker_shutdown_is_controlled(cluster: ProcessCluster) -> None:
    cluster.start_controller(1)
    for broker in (1, 2):
        cluster.start_broker(broker)
    _create_topic(cluster, {0: [1, 2]})
    cluster.wait_until(lambda: cluster.state(T0).leader_and_isr.isr == (1, 2), 30, "a full ISR")  # type: ignore[union-attr]

    assert cluster.brokers[1].terminate() == 0
    assert "controlled: True" in cluster.brokers[1].log()
    assert cluster.leaders("orders") == {0: 2}  # moved before the broker left, not after its session ended


def test_reassignment_completes_after_the_zookeeper_leader_dies(
    zookeeper_ensemble: ZooKeeperEnsemble, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Sessions outlive the loss of the ensemble's leader (the quorum elects another within the
    session timeout), and so does the reassignment in progress."""
    config = {"zookeeper.session.timeout.ms": "10000"}
    with ProcessCluster(zookeeper_ensemble.hosts + "/kctl", tmp_path_factory.mktemp("ensemble"), config) as cluster:
        controllers = [cluster.start_controller(1), cluster.start_controller(2)]
        for broker in (1, 2, 3):
            cluster.start_broker(broker)
        _create_topic(cluster, {0: [1, 2], 1: [2, 3]})
        targets = {T0: [3, 4], T1: [4, 1]}
        _start_reassignment(cluster, targets)

        leader = zookeeper_ensemble.leader()
        leader.kill()
        zookeeper_ensemble.wait_until_serving()
        assert zookeeper_ensemble.leader() is not leader
        cluster.start_broker(4)
        cluster.wait_for_reassignments(targets, 60)
        assert all(c.running() for c in controllers)
        assert cluster.brokers[4].running()


def test_unreachable_zookeeper_is_a_clear_error(tmp_path_factory: pytest.TempPathFactory) -> None:
    port = free_ports(1)[0]  # nothing listens there
    for role in ("controller", "broker"):
        process = KctlProcess(role, [role, "--id", "1", "--zk", f"127.0.0.1:{port}", "--zk-timeout", "1"],
                              tmp_path_factory.mktemp(role) / "log")
        try:
            assert process.popen.wait(30) == 1
        finally:
            process.kill()
        last = process.log().strip().splitlines()[-1]
        assert last == (f"kctl: error: ZooKeeper is unreachable: cannot connect to ZooKeeper at 127.0.0.1:{port} within 1s "
                        "(last error: Connection dropped: socket connection error: Connection refused)")


def _set_isr_notifications_readable(cluster: ProcessCluster, readable: bool) -> None:
    """Make ``/isr_change_notification``, a znode every failover reads, unreadable (anyone may
    do anything but read it) or open again."""
    cluster.admin.get_controller_id()  # the operator's session has created the chroot and Kafka's paths
    client = KazooClient(cluster.zk)
    client.start(30)
    try:
        acl = OPEN_ACL_UNSAFE if readable else [ACL(Permissions.ALL & ~Permissions.READ, ANYONE_ID_UNSAFE)]
        client.set_acls(paths.ISR_CHANGE_NOTIFICATION, list(acl))
    finally:
        client.stop()
        client.close()


def test_controllers_whose_failover_cannot_read_zookeeper_resign_until_it_is_readable(cluster: ProcessCluster) -> None:
    """Defect 3 of issue 11 on a real ZooKeeper: a controller that cannot read a znode its failover
    needs resigns and deletes ``/controller`` instead of holding it half-initialised; both
    candidates retry every few seconds (FAILED_FAILOVER_BACKOFF), and once the znode is readable
    again one of them takes over and serves."""
    _set_isr_notifications_readable(cluster, False)
    controllers = [cluster.start_controller(1), cluster.start_controller(2)]
    for broker in (1, 2):
        cluster.start_broker(broker)
    for controller in controllers:
        cluster.wait_until(lambda c=controller: "Trigger controller movement immediately" in c.log(), 30,
                           f"{controller.name} to give up a failed failover", watch=controller)
    cluster.wait_until(lambda: cluster.active_controller() is None, 10, "/controller to be deleted")
    epoch = cluster.controller_epoch()
    time.sleep(2 * FAILED_FAILOVER_BACKOFF)
    assert cluster.controller_epoch() - epoch <= 2 * 3, "elections without a pause"

    _set_isr_notifications_readable(cluster, True)
    active = cluster.wait_until(cluster.active_controller, 30, "a controller to take over")
    _create_topic(cluster, {0: [1, 2]})
    assert "Ready to serve as the new controller" in cluster.controllers[active].log()
    assert all(c.running() for c in controllers)
