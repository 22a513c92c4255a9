"""AlterPartition on a real ZooKeeper when the controller's cache is behind the state znode.

A write whose answer ZooKeeper's connection lost has landed, but the controller does not know it:
its client sends the conditional write again once reconnected and gets BADVERSION. Here the
landed write is made by another session (the same bytes the controller would have written), so
the controller's next write of the same proposal meets BADVERSION through the real multi and the
native codec, deterministically. The controller must read the state znode back and answer the
leader with the stored state, not INVALID_UPDATE_VERSION forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kctl import admin
from kctl.controller import KafkaController
from kctl.model import BrokerInfo, LeaderAndIsr, TopicPartition
from kctl.scheduler import RealTimeScheduler
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.zookeeper import ZooKeeperEnsemble, zookeeper_chroot, zookeeper_server
from kctl.transports.inprocess import InProcessTransport

__all__ = ["zookeeper_chroot", "zookeeper_server"]

TP = TopicPartition("t", 0)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
        time.sleep(0.02)


def test_a_proposal_already_stored_is_answered_from_the_store(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str
) -> None:
    hosts = zookeeper_server.hosts + zookeeper_chroot
    operator = ZooKeeperStore(hosts)
    broker_sessions = {b: ZooKeeperStore(hosts) for b in (1, 2)}
    broker_epochs = {b: session.register_broker(BrokerInfo(b)) for b, session in broker_sessions.items()}
    admin.create_topic(operator, "t", broker_racks={1: None, 2: None}, assignment={0: [1, 2]})
    scheduler = RealTimeScheduler(name="alter-partition-test-timer")
    session = ZooKeeperStore(hosts)
    controller = KafkaController(9, session, InProcessTransport(scheduler=scheduler), clock=scheduler)
    try:
        controller.startup()
        wait_until(lambda: controller.is_active and controller.metrics()["GlobalTopicCount"] == 1, "the controller")
        before = operator.get_partition_states([TP]).values[TP]
        shrink = LeaderAndIsr(1, (1,), before.leader_and_isr.leader_epoch, before.leader_and_isr.partition_epoch)
        fence = operator.get_controller_epoch()
        assert fence is not None
        landed = operator.update_partition_states({TP: shrink}, before.controller_epoch, fence[1])
        stored = landed.successful[TP]  # the write landed; the controller never heard

        answer = controller.alter_partition(1, broker_epochs[1], {TP: shrink}).result(timeout=60)

        assert answer == {TP: stored}
        assert operator.get_partition_states([TP]).values[TP].leader_and_isr == stored  # not written again
        cached = controller.inspect(lambda c: c.context.partition_leadership(TP))
        assert cached is not None and cached.leader_and_isr == stored
    finally:
        controller.shutdown()
        session.close()
        for broker_session in broker_sessions.values():
            broker_session.close()
        operator.close()
        scheduler.shutdown()
