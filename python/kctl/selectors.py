"""Leader selectors: the pluggable part of an election.

Kafka's four election rules (reference §2.1) each scan a candidate list and accept replicas that
pass a test; Kafka takes the first accepted one. kctl computes, for every partition of an election
batch, the full list of replicas the rule accepts (``allowed``, in Kafka's preference order) and
asks a *selector* to pick one. The built-in selectors pick ``allowed[0]``, which is exactly
Kafka's behaviour; a plugin may pick any other allowed replica (e.g. the least-loaded one). The
rest of the election (the new ISR, the LeaderAndIsr recipients, the store write) stays Kafka's.

A selector receives a whole batch in one call, so a Python plugin costs one call per election
batch on either engine. The batch's per-partition inputs are columns (``kctl.columns``), and
``batch.cluster`` is a read-only view of the cluster (``kctl.clusterview``): brokers and racks, load
per broker, topic configs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kctl.clusterview import ClusterView
from kctl.columns import Partitions
from kctl.hookspecs import hookimpl
from kctl.model import NO_LEADER, TopicPartition

if TYPE_CHECKING:
    from kctl.config import ControllerConfig
    from kctl.registry import LeaderSelectorRegistry


class ElectionKind(enum.Enum):
    """The four election strategies of Kafka's partition state machine."""

    OFFLINE = "offline"
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"

    @property
    def kafka_name(self) -> str:
        return {
            ElectionKind.OFFLINE: "OfflinePartitionLeaderElectionStrategy",
            ElectionKind.REASSIGN: "ReassignPartitionLeaderElectionStrategy",
            ElectionKind.PREFERRED: "PreferredReplicaPartitionLeaderElectionStrategy",
            ElectionKind.CONTROLLED_SHUTDOWN: "ControlledShutdownPartitionLeaderElectionStrategy",
        }[self]


@dataclass(frozen=True)
class ElectionBatch:
    """The inputs of one election batch, one entry per partition in every sequence.

    Only partitions with at least one allowed replica are included.
    """

    kind: ElectionKind
    partitions: Sequence[TopicPartition]
    assignments: Sequence[Sequence[int]]
    """The replica list the rule scans (the assignment, or the target replicas for reassignment)."""
    isrs: Sequence[Sequence[int]]
    allowed: Sequence[Sequence[int]]
    """Replicas the Kafka rule accepts, in the rule's order; ``allowed[i][0]`` is Kafka's choice."""
    unclean: Sequence[bool]
    """True where ``allowed`` comes from the unclean fallback (no live ISR member)."""
    cluster: ClusterView = field(default_factory=ClusterView.of)
    """The cluster as this call sees it: brokers, racks, load per broker, topic configs."""

    def __len__(self) -> int:
        return len(self.partitions)

    @property
    def topics(self) -> Sequence[str]:
        """The distinct topics of ``partitions``, in order of first appearance (read from the
        column as is when the engine built it, without building a partition)."""
        if isinstance(self.partitions, Partitions):
            return self.partitions.topics
        return tuple(dict.fromkeys(tp.topic for tp in self.partitions))

    @property
    def leader_counts(self) -> Mapping[int, int]:
        """Partitions led by each broker before this batch: ``cluster.leader_counts``."""
        return self.cluster.leader_counts


@runtime_checkable
class LeaderSelector(Protocol):
    """Picks one leader per partition of a batch.

    Return one broker id per partition, each a member of that partition's ``allowed`` list, or
    ``NO_LEADER`` (-1) to leave the partition without a new leader (its election then fails as if
    no replica were eligible). Anything else fails that partition's election with a
    :class:`~kctl.errors.PluginError`; nothing is written for it.
    """

    @property
    def kind(self) -> ElectionKind: ...

    def select_leaders(self, batch: ElectionBatch) -> Sequence[int]: ...


@dataclass(frozen=True)
class KafkaLeaderSelector:
    """Kafka's rule: the first allowed replica."""

    kind: ElectionKind

    def select_leaders(self, batch: ElectionBatch) -> Sequence[int]:
        return [allowed[0] if allowed else NO_LEADER for allowed in batch.allowed]


def _kafka_selector_factory(kind: ElectionKind) -> Callable[[ControllerConfig], LeaderSelector]:
    def factory(config: ControllerConfig) -> LeaderSelector:
        return KafkaLeaderSelector(kind)

    return factory


@hookimpl
def kctl_register_leader_selectors(register: LeaderSelectorRegistry) -> None:
    """Kafka's four strategies, registered through the same hook as any plugin's selectors."""
    for kind in ElectionKind:
        register.add(kind.value, _kafka_selector_factory(kind), kind=kind)
