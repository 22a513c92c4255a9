"""One scenario, played on real Kafka brokers and on kctl's processes, compared after every step.

:class:`SideBySide` holds the two clusters, each in a chroot of one ZooKeeper server: three Kafka
3.9 brokers (:class:`~kctl.testing.kafka.KafkaCluster`, whose controller is one of them) and a
``kctl controller`` with three ``kctl broker`` processes (:class:`~process_harness.ProcessCluster`)
with the same broker ids. A step acts on both (the admin writes are the same znodes, written by
kctl's admin code into each chroot); :meth:`SideBySide.compare` then waits until Kafka has settled
in the state the step leads to, waits for kctl to reach the very same znodes, and fails listing
every difference if it does not. A scenario is steps and comparisons, nothing more.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from process_harness import ProcessCluster

from kctl import admin
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.differential import Snapshot, differences, settled, snapshot
from kctl.testing.kafka import KafkaCluster

SETTLE_TIMEOUT = 120.0
"""Seconds for either cluster to settle after a step: a killed Kafka broker is noticed only when
its 6 s ZooKeeper session expires, and a busy two-core machine stretches everything."""
KCTL_CONTROLLER = 100
"""kctl's controller process: a candidate of its own, not one of the brokers."""


class SideBySide:
    """A Kafka cluster and a kctl cluster with the same broker ids, and a kazoo session on their
    ZooKeeper server (``zk``) to read both chroots with."""

    def __init__(self, kafka: KafkaCluster, kctl: ProcessCluster, kctl_chroot: str, zk: Any) -> None:
        self.kafka = kafka
        self.kctl = kctl
        self.kctl_chroot = kctl_chroot
        self.zk = zk
        self.kafka_admin = ZooKeeperStore(kafka.zk, session_timeout=10.0, connection_timeout=30.0)

    def close(self) -> None:
        self.kafka_admin.close()

    # --- Steps ---------------------------------------------------------------------------------

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                     config: Mapping[str, object] | None = None) -> None:
        """The same topic znodes on both sides (one topic id), as ``kafka-topics --create
        --replica-assignment`` leaves them."""
        topic_id = admin.generate_topic_id(random.Random())
        for store in (self.kafka_admin, self.kctl.admin):
            racks = {broker: info.rack for broker, (info, _) in store.get_all_brokers().items()}
            admin.create_topic(store, name, broker_racks=racks, assignment=assignment, config=config,
                               topic_id=topic_id)

    def kill(self, broker: int) -> None:
        """kill -9 the broker on both sides."""
        self.kafka.kill(broker)
        self.kctl.brokers[broker].kill()

    def restart(self, broker: int) -> None:
        """Start the broker again on both sides, once its old registration has expired."""
        self.kafka.restart(broker)
        self.kctl.wait_until(lambda: broker not in self.kctl.admin.get_all_brokers(), SETTLE_TIMEOUT,
                             f"broker {broker}'s old registration to expire")
        self.kctl.start_broker(broker)

    # --- Observation ---------------------------------------------------------------------------

    def kafka_controller(self) -> int:
        controller = self.kafka_admin.get_controller_id()
        assert controller is not None, "the Kafka cluster has no controller"
        return controller

    def compare(self, condition: Callable[[Snapshot], bool], what: str) -> Snapshot:
        """Wait until Kafka's chroot satisfies ``condition`` and is quiet, then until kctl's holds
        the same znodes; fail with every difference if it does not. Returns Kafka's snapshot."""
        expected = settled(self.zk, self.kafka.chroot, condition, SETTLE_TIMEOUT, f"Kafka: {what}")
        try:
            settled(self.zk, self.kctl_chroot, lambda ours: not differences(expected, ours), SETTLE_TIMEOUT,
                    f"kctl to match Kafka after: {what}")
        except AssertionError:
            found = differences(expected, snapshot(self.zk, self.kctl_chroot))
            raise AssertionError(f"after {what}, kctl differs from Kafka:\n" + "\n".join(found)
                                 + f"\n{self.kctl.logs()}") from None
        return expected
