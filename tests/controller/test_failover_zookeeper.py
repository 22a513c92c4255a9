"""A failover that fails, with two controller candidates on a real ZooKeeper (reference §6.2).

Both candidates are real :class:`KafkaController` instances, each on its own ZooKeeper session and
event thread; one of them cannot list the topics (its session wrapper fails the read, as an
unreadable znode would). Kafka's ``elect()`` answers a failed ``onControllerFailover`` with
``triggerControllerMove``: the candidate resigns and deletes ``/controller`` so that the other one
takes over, instead of holding ``/controller`` without ever becoming ready.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kctl import admin
from kctl.controller import KafkaController
from kctl.errors import StoreError
from kctl.scheduler import RealTimeScheduler
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.zookeeper import ZooKeeperEnsemble, zookeeper_chroot, zookeeper_server
from kctl.transports.inprocess import InProcessTransport

__all__ = ["zookeeper_chroot", "zookeeper_server"]


class UnreadableTopics:
    """A controller candidate's ZooKeeper session on which listing the topics fails while
    ``failing`` is set; everything else goes to the session."""

    def __init__(self, session: ZooKeeperStore) -> None:
        self._session = session
        self.failing = True

    def get_all_topics(self) -> set[str]:
        if self.failing:
            raise StoreError("injected fault: /brokers/topics cannot be read", "/brokers/topics")
        return self._session.get_all_topics()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
        time.sleep(0.02)


def serving(controller: KafkaController, topics: int) -> bool:
    """Active, and ready: its failover loaded the topics."""
    return controller.is_active and controller.metrics()["GlobalTopicCount"] == topics


def test_the_candidate_whose_failover_fails_steps_aside_for_the_other(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str
) -> None:
    hosts = zookeeper_server.hosts + zookeeper_chroot
    operator = ZooKeeperStore(hosts)
    admin.create_topic(operator, "t", broker_racks={1: None, 2: None}, assignment={0: [1, 2]})
    scheduler = RealTimeScheduler(name="failover-test-timer")
    transport = InProcessTransport(scheduler=scheduler)
    first_session = UnreadableTopics(ZooKeeperStore(hosts))
    second_session = ZooKeeperStore(hosts)
    first = KafkaController(1, first_session, transport, clock=scheduler)  # type: ignore[arg-type]
    second = KafkaController(2, second_session, transport, clock=scheduler)
    try:
        first.startup()
        wait_until(lambda: (operator.get_controller_epoch() or (0, 0))[0] == 1 and operator.get_controller_id() is None,
                   "candidate 1 to win epoch 1, then delete /controller")
        assert not first.is_active and first.epoch == 0

        second.startup()
        wait_until(lambda: serving(second, topics=1), "candidate 2 to take over and serve")
        assert (operator.get_controller_id(), second.epoch) == (2, 2)
        assert not first.is_active

        first_session.failing = False
        second.shutdown()
        second_session.close()  # its ephemeral /controller goes with the session
        wait_until(lambda: serving(first, topics=1), "candidate 1 to take over once it can read the topics")
        assert (operator.get_controller_id(), first.epoch) == (1, 3)
    finally:
        first.shutdown()
        second.shutdown()
        first_session.close()
        second_session.close()
        operator.close()
        scheduler.shutdown()
