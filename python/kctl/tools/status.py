"""``kctl cluster status``: what an operator checks first, read from the cluster's store.

:func:`cluster_status` reads a :class:`ClusterStatus` from any :class:`~kctl.stores.base.StateStore`
(a ZooKeeper session, an embedded cluster's memory store): the active controller and its epoch, the
registered (live) brokers with their epochs and racks, the partitions without a live leader and
those whose ISR is short, the reassignments in progress and the topics queued for deletion. It
reads only znodes, as Kafka's tools do with ``--zookeeper``, in a fixed number of bulk reads
whatever the cluster's size. :meth:`ClusterStatus.to_json` is the stable ``--json`` schema
(``docs/operations.md``); :func:`format_status` the table.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kctl.config import ControllerConfig
from kctl.errors import NoNodeError
from kctl.model import NO_LEADER, ReplicaAssignment, TopicPartition
from kctl.process import ZooKeeperSecurity, add_zookeeper_arguments, connect, quiet_zookeeper_client
from kctl.stores.base import ReadResult, StateStore
from kctl.tables import table

K = TypeVar("K")
V = TypeVar("V")

SCHEMA_VERSION = 1
"""``version`` of the JSON document; it grows only when a field changes meaning or goes away."""
TABLE_ROWS = 20
"""Reassignments the table lists (``--json`` lists them all)."""


@dataclass(frozen=True)
class BrokerStatus:
    """A registered broker (``/brokers/ids/<id>``): its epoch (the registration's czxid) and rack."""

    id: int
    epoch: int
    rack: str | None


@dataclass(frozen=True)
class ReassignmentInProgress:
    """A partition being reassigned: its replicas now (with those being added and removed) and
    the target. ``started`` is False while the request waits in ``/admin/reassign_partitions``
    for the controller to pick it up."""

    partition: TopicPartition
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    target_replicas: tuple[int, ...]
    started: bool


@dataclass(frozen=True)
class ClusterStatus:
    """The cluster as its store shows it.

    ``offline_partitions`` counts partitions with no leader or a leader that is not a registered
    broker; ``under_replicated_partitions`` those whose ISR is smaller than their replication
    factor (the replicas less those being added, as Kafka's tools count). Both leave out the
    partitions of topics queued for deletion, as the controller's ``OfflinePartitionsCount`` does.
    """

    active_controller: int | None
    """The id in ``/controller``; None while no controller is active."""
    controller_epoch: int
    """``/controller_epoch`` (0 before the first election)."""
    brokers: tuple[BrokerStatus, ...]
    topics: int
    partitions: int
    offline_partitions: int
    under_replicated_partitions: int
    reassignments: tuple[ReassignmentInProgress, ...]
    topics_queued_for_deletion: tuple[str, ...]
    controller_entries: tuple[BrokerStatus, ...] = ()
    """Registrations marked controller-only: kctl's controller standing among real Kafka brokers
    (``docs/kafka-brokers.md``). They host no replica, so they are not among ``brokers``."""

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document (schema :data:`SCHEMA_VERSION`, documented in docs/operations.md)."""
        return {
            "version": SCHEMA_VERSION,
            "active_controller": self.active_controller,
            "controller_epoch": self.controller_epoch,
            "brokers": [{"id": b.id, "epoch": b.epoch, "rack": b.rack} for b in self.brokers],
            "topics": self.topics,
            "partitions": self.partitions,
            "offline_partitions": self.offline_partitions,
            "under_replicated_partitions": self.under_replicated_partitions,
            "reassignments": [
                {"topic": r.partition.topic, "partition": r.partition.partition, "replicas": list(r.replicas),
                 "adding_replicas": list(r.adding_replicas), "removing_replicas": list(r.removing_replicas),
                 "target_replicas": list(r.target_replicas), "started": r.started}
                for r in self.reassignments
            ],
            "topics_queued_for_deletion": list(self.topics_queued_for_deletion),
            "controller_entries": [{"id": b.id, "epoch": b.epoch} for b in self.controller_entries],
        }


def cluster_status(store: StateStore) -> ClusterStatus:
    """Read the status in bulk: the brokers, every topic's assignment, every partition's state and
    the admin znodes, one read each. A znode that cannot be decoded raises the error naming it."""
    epoch = store.get_controller_epoch()
    registered = sorted(store.get_all_brokers().items())
    brokers = tuple(BrokerStatus(b, epoch, info.rack) for b, (info, epoch) in registered if not info.controller_only)
    entries = tuple(BrokerStatus(b, epoch, info.rack) for b, (info, epoch) in registered if info.controller_only)
    assignments = _found(store.get_topic_assignments(sorted(store.get_all_topics())))
    deleting = tuple(sorted(set(store.get_topic_deletions())))
    partitions = {TopicPartition(topic, p): ra for topic, a in assignments.items() for p, ra in a.partitions.items()}
    states = _found(store.get_partition_states(list(partitions)))
    live = {b.id for b in brokers}
    offline = under_replicated = 0
    for tp, assignment in partitions.items():
        if tp.topic in deleting:
            continue
        state = states.get(tp)
        leader, isr = (NO_LEADER, ()) if state is None else (state.leader_and_isr.leader, state.leader_and_isr.isr)
        offline += leader not in live
        under_replicated += len(isr) < len(assignment.replicas) - len(assignment.adding_replicas)
    return ClusterStatus(
        store.get_controller_id(), 0 if epoch is None else epoch[0], brokers, len(assignments), len(partitions),
        offline, under_replicated, _reassignments(partitions, store.get_partition_reassignments() or {}), deleting,
        entries,
    )


def _found(read: ReadResult[K, V]) -> dict[K, V]:
    """The values of a bulk read; absent znodes are left out (a topic deleted meanwhile, a
    partition not initialised yet), an undecodable one raises its error."""
    for error in read.errors.values():
        if not isinstance(error, NoNodeError):
            raise error
    return dict(read.values)


def _reassignments(
    partitions: Mapping[TopicPartition, ReplicaAssignment], requested: Mapping[TopicPartition, list[int]]
) -> tuple[ReassignmentInProgress, ...]:
    """Partitions the controller is reassigning, and those requested that it has not started."""
    found = []
    for tp in sorted({tp for tp, ra in partitions.items() if ra.is_being_reassigned} | set(requested)):
        ra = partitions.get(tp)
        if ra is None:
            continue  # a request for a partition that does not exist: the controller drops it
        started = ra.is_being_reassigned
        target = ra.target_replicas if started else tuple(requested[tp])
        found.append(ReassignmentInProgress(tp, ra.replicas, ra.adding_replicas, ra.removing_replicas, target, started))
    return tuple(found)


def _ids(brokers: tuple[int, ...]) -> str:
    return ",".join(map(str, brokers)) or "-"


def _indented(text: str) -> list[str]:
    return [f"  {line}" for line in text.splitlines()]


def format_status(status: ClusterStatus) -> list[str]:
    """The table ``kctl cluster status`` prints."""
    controller = "none" if status.active_controller is None else str(status.active_controller)
    lines = [
        f"Active controller: {controller} (controller epoch {status.controller_epoch})",
        *([f"Controller-only entries: {_ids(tuple(b.id for b in status.controller_entries))}"]
          if status.controller_entries else []),
        f"Live brokers: {len(status.brokers)}",
        *_indented(table(("ID", "EPOCH", "RACK"), [(str(b.id), str(b.epoch), b.rack or "-") for b in status.brokers])),
        f"Topics: {status.topics} ({status.partitions} partitions)",
        f"Offline partitions: {status.offline_partitions}",
        f"Under-replicated partitions: {status.under_replicated_partitions}",
        f"Reassignments in progress: {len(status.reassignments)}",
    ]
    if status.reassignments:
        shown = status.reassignments[:TABLE_ROWS]
        lines += _indented(table(("PARTITION", "REPLICAS", "ADDING", "REMOVING", "TARGET", "STATE"), [
            (str(r.partition), _ids(r.replicas), _ids(r.adding_replicas), _ids(r.removing_replicas),
             _ids(r.target_replicas), "started" if r.started else "requested")
            for r in shown
        ]))
        if len(status.reassignments) > len(shown):
            lines.append(f"  ... and {len(status.reassignments) - len(shown)} more (--json lists them all)")
    lines.append(f"Topics queued for deletion: {len(status.topics_queued_for_deletion)}")
    lines += [f"  {topic}" for topic in status.topics_queued_for_deletion]
    return lines


def cluster_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = actions.add_parser("status", help=STATUS_HELP, description=STATUS_HELP)
    add_zookeeper_arguments(status)
    status.add_argument("--json", action="store_true", help="print the status as JSON (schema in docs/operations.md)")


def cmd_cluster(args: argparse.Namespace) -> int:
    """``kctl cluster status``: read the status from ZooKeeper (an admin tool's session) and print it."""
    config = ControllerConfig()
    quiet_zookeeper_client()
    store = connect(args.zk, config, args.zk_timeout, ZooKeeperSecurity.from_arguments(args, config))
    try:
        status = cluster_status(store)
    finally:
        store.close()
    print(json.dumps(status.to_json(), indent=2) if args.json else "\n".join(format_status(status)))
    return 0


STATUS_HELP = ("the active controller, live brokers, offline and under-replicated partitions, reassignments and "
               "deletions in progress")

__all__ = [
    "SCHEMA_VERSION",
    "STATUS_HELP",
    "BrokerStatus",
    "ClusterStatus",
    "ReassignmentInProgress",
    "cluster_arguments",
    "cluster_status",
    "cmd_cluster",
    "format_status",
]
