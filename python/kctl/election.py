"""Leader election: Kafka's four rules and the strategies the partition state machine applies.

The rules (reference §2.1) scan a replica list in order; ``allowed_*`` returns every replica a rule
accepts and the public ``*_partition_leader`` functions return the first, which is Kafka's choice.
A strategy object (reference §2.2) turns a batch of stored states into :class:`ElectionResult` s:
the new leader and ISR, the brokers that must receive LeaderAndIsr, and whether the election was
unclean. The choice among allowed replicas is delegated to a :class:`~kctl.selectors.LeaderSelector`
(Kafka's rule by default), called once per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from kctl.clusterview import ClusterView, TopicConfigSource, broker_views
from kctl.columns import IntRows, Partitions
from kctl.errors import KctlError, PluginError
from kctl.model import NO_LEADER, LeaderAndIsr, LeaderRecoveryState, TopicPartition
from kctl.selectors import ElectionBatch, ElectionKind, KafkaLeaderSelector, LeaderSelector

if TYPE_CHECKING:
    from kctl.config import ControllerConfig
    from kctl.engine_api.context import ControllerContext
    from kctl.plugins import PluginHost


# --- The four rules (PartitionLeaderElectionAlgorithms) ---------------------------------------------


def allowed_offline_leaders(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int], unclean_leader_election_enabled: bool
) -> tuple[list[int], bool]:
    """Live ISR members in assignment order; failing that, if unclean election is enabled, any live
    replica. The flag says whether the unclean fallback produced the list."""
    clean = [r for r in assignment if r in live_replicas and r in isr]
    if clean or not unclean_leader_election_enabled:
        return clean, False
    return [r for r in assignment if r in live_replicas], True


def allowed_reassign_leaders(
    target_replicas: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> list[int]:
    return [r for r in target_replicas if r in live_replicas and r in isr]


def allowed_preferred_leaders(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> list[int]:
    """Only the head of the assignment is ever considered."""
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return [assignment[0]]
    return []


def allowed_controlled_shutdown_leaders(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> list[int]:
    return [r for r in assignment if r in live_replicas and r in isr and r not in shutting_down_brokers]


def _first(candidates: list[int]) -> int | None:
    return candidates[0] if candidates else None


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int], unclean_leader_election_enabled: bool
) -> int | None:
    return _first(allowed_offline_leaders(assignment, isr, live_replicas, unclean_leader_election_enabled)[0])


def reassign_partition_leader(
    target_replicas: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    return _first(allowed_reassign_leaders(target_replicas, isr, live_replicas))


def preferred_replica_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    return _first(allowed_preferred_leaders(assignment, isr, live_replicas))


def controlled_shutdown_partition_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> int | None:
    return _first(allowed_controlled_shutdown_leaders(assignment, isr, live_replicas, shutting_down_brokers))


# --- Strategies and batch elections (Election.scala) -------------------------------------------------


@dataclass(frozen=True)
class ElectionResult:
    """One partition's election: ``leader_and_isr`` is None when no leader could be chosen;
    ``recipients`` are the brokers that get LeaderAndIsr (Kafka's ``liveReplicas`` field)."""

    partition: TopicPartition
    leader_and_isr: LeaderAndIsr | None
    recipients: tuple[int, ...]
    unclean: bool = False
    error: KctlError | None = None


@dataclass(frozen=True)
class ElectionInput:
    """A partition's current stored state; for offline elections, whether unclean election is
    allowed for it (None when its topic config could not be read, which fails the election)."""

    partition: TopicPartition
    leader_and_isr: LeaderAndIsr
    unclean_allowed: bool | None = False


@dataclass(frozen=True)
class _Candidates:
    item: ElectionInput
    scanned: tuple[int, ...]
    recipients: tuple[int, ...]
    allowed: list[int]
    unclean: bool


class Election:
    """Base of the four strategies; subclasses say how candidates and new states are computed."""

    kind: ElectionKind
    selector: LeaderSelector

    def elect(
        self,
        context: ControllerContext,
        items: Sequence[ElectionInput],
        *,
        leader_recovery: bool = False,
        configs: TopicConfigSource | None = None,
    ) -> list[ElectionResult]:
        """Elect leaders for a batch; results are in input order. ``leader_recovery`` (IBP ≥ 3.2)
        marks the state of an unclean leader RECOVERING; ``configs`` is where the selector's view
        reads topic configs (none: no overrides)."""
        candidates = [self._candidates(context, item) for item in items]
        chosen = self._select(context, candidates, configs or TopicConfigSource(lambda topics: {}))
        results = []
        for cand, leader in zip(candidates, chosen):
            if isinstance(leader, KctlError):
                results.append(ElectionResult(cand.item.partition, None, cand.recipients, error=leader))
            elif leader == NO_LEADER:
                results.append(ElectionResult(cand.item.partition, None, cand.recipients))
            else:
                if cand.unclean:
                    context.record_unclean_leader_election()
                new_state = self._new_state(context, cand.item, leader, leader_recovery)
                results.append(ElectionResult(cand.item.partition, new_state, cand.recipients, cand.unclean))
        return results

    def _select(
        self, context: ControllerContext, candidates: list[_Candidates], configs: TopicConfigSource
    ) -> list[int | KctlError]:
        chosen: list[int | KctlError] = [NO_LEADER] * len(candidates)
        eligible = [i for i, c in enumerate(candidates) if c.allowed]
        if eligible:
            partitions = Partitions.of(candidates[i].item.partition for i in eligible)
            batch = ElectionBatch(
                kind=self.kind,
                partitions=partitions,
                assignments=IntRows.of(candidates[i].scanned for i in eligible),
                isrs=IntRows.of(candidates[i].item.leader_and_isr.isr for i in eligible),
                allowed=IntRows.of(candidates[i].allowed for i in eligible),
                unclean=tuple(candidates[i].unclean for i in eligible),
                cluster=_context_view(context, configs, partitions.topics),
            )
            for i, leader in zip(eligible, self._call_selector(batch)):
                chosen[i] = leader
        return chosen

    def _call_selector(self, batch: ElectionBatch) -> list[int | KctlError]:
        answers = self.answers(batch)
        if isinstance(answers, KctlError):
            return [answers] * len(batch)
        checked: list[int | KctlError] = []
        for i, (allowed, leader) in enumerate(zip(batch.allowed, answers)):
            checked.append(int(leader) if _is_allowed_leader(leader, allowed) else self.refusal(batch, i, leader))
        return checked

    def answers(self, batch: ElectionBatch) -> list[object] | PluginError:
        """What the selector answers for ``batch``, or the error that fails all of it (the selector
        raised, or gave the wrong number of leaders). The batch's view is closed afterwards."""
        name = type(self.selector).__name__
        try:
            leaders: list[object] = list(self.selector.select_leaders(batch))
        except Exception as e:  # a plugin must never take the controller down
            return PluginError(f"leader selector {name} raised {type(e).__name__}: {e}")
        finally:
            batch.cluster.close()
        if len(leaders) != len(batch):
            return PluginError(f"leader selector {name} returned {len(leaders)} leaders for {len(batch)} partitions")
        return leaders

    def refusal(self, batch: ElectionBatch, index: int, leader: object) -> PluginError:
        """The error for an answer that is not one of the partition's allowed replicas."""
        name = type(self.selector).__name__
        allowed = list(batch.allowed[index])
        return PluginError(f"leader selector {name} chose {leader!r} for {batch.partitions[index]}, which is not one of {allowed}")

    def _candidates(self, context: ControllerContext, item: ElectionInput) -> _Candidates:
        raise NotImplementedError

    def _new_state(
        self, context: ControllerContext, item: ElectionInput, leader: int, leader_recovery: bool
    ) -> LeaderAndIsr:
        raise NotImplementedError


def _is_allowed_leader(leader: object, allowed: Collection[int]) -> TypeGuard[int]:
    """A selector's answer is ``NO_LEADER`` or one of the allowed replicas, as an ``int`` (the
    native engine checks the same in ``rust/src/py/selector.rs``)."""
    return isinstance(leader, int) and not isinstance(leader, bool) and (leader == NO_LEADER or leader in allowed)


def _context_view(context: ControllerContext, configs: TopicConfigSource, topics: Sequence[str]) -> ClusterView:
    """The view a selector gets on the reference engine: read from the context when first used."""
    return ClusterView(
        context.epoch,
        lambda: broker_views(
            context.live_broker_epochs(), context.shutting_down_broker_ids, context.live_or_shutting_down_brokers()
        ),
        context.leader_counts,
        context.replica_counts,
        configs,
        lambda: topics,
    )


@dataclass(frozen=True)
class OfflineElection(Election):
    """Kafka's OfflinePartitionLeaderElectionStrategy(allowUnclean)."""

    allow_unclean: bool = False
    selector: LeaderSelector = field(default_factory=lambda: KafkaLeaderSelector(ElectionKind.OFFLINE))
    kind: ElectionKind = field(default=ElectionKind.OFFLINE, init=False)

    def _candidates(self, context: ControllerContext, item: ElectionInput) -> _Candidates:
        tp = item.partition
        assignment = context.partition_replica_assignment(tp)
        live = tuple(r for r in assignment if context.is_replica_online(r, tp))
        # Reference §2.3: allowUnclean=true (ElectLeaders UNCLEAN) allows an unclean election for
        # every partition, with no topic-config lookup; otherwise the per-partition flag decides.
        unclean_allowed = True if self.allow_unclean else item.unclean_allowed
        if unclean_allowed is None:
            return _Candidates(item, assignment, live, [], False)
        allowed, unclean = allowed_offline_leaders(assignment, item.leader_and_isr.isr, live, unclean_allowed)
        return _Candidates(item, assignment, live, allowed, unclean)

    def _new_state(
        self, context: ControllerContext, item: ElectionInput, leader: int, leader_recovery: bool
    ) -> LeaderAndIsr:
        tp, old = item.partition, item.leader_and_isr
        if leader in old.isr:
            return old.new_leader_and_isr(leader, [r for r in old.isr if context.is_replica_online(r, tp)])
        new = old.new_leader_and_isr(leader, [leader])
        return new.with_recovery_state(LeaderRecoveryState.RECOVERING) if leader_recovery else new

    def __str__(self) -> str:
        return f"OfflinePartitionLeaderElectionStrategy({str(self.allow_unclean).lower()})"


@dataclass(frozen=True)
class ReassignElection(Election):
    """Kafka's ReassignPartitionLeaderElectionStrategy: a live ISR member of the target replicas."""

    selector: LeaderSelector = field(default_factory=lambda: KafkaLeaderSelector(ElectionKind.REASSIGN))
    kind: ElectionKind = field(default=ElectionKind.REASSIGN, init=False)

    def _candidates(self, context: ControllerContext, item: ElectionInput) -> _Candidates:
        tp = item.partition
        target = context.partition_full_replica_assignment(tp).target_replicas
        live = [r for r in target if context.is_replica_online(r, tp)]
        return _Candidates(item, target, target, allowed_reassign_leaders(target, item.leader_and_isr.isr, live), False)

    def _new_state(
        self, context: ControllerContext, item: ElectionInput, leader: int, leader_recovery: bool
    ) -> LeaderAndIsr:
        return item.leader_and_isr.new_leader(leader)

    def __str__(self) -> str:
        return "ReassignPartitionLeaderElectionStrategy"


@dataclass(frozen=True)
class PreferredElection(Election):
    """Kafka's PreferredReplicaPartitionLeaderElectionStrategy: the head of the assignment or nothing."""

    selector: LeaderSelector = field(default_factory=lambda: KafkaLeaderSelector(ElectionKind.PREFERRED))
    kind: ElectionKind = field(default=ElectionKind.PREFERRED, init=False)

    def _candidates(self, context: ControllerContext, item: ElectionInput) -> _Candidates:
        tp = item.partition
        assignment = context.partition_replica_assignment(tp)
        live = [r for r in assignment if context.is_replica_online(r, tp)]
        allowed = allowed_preferred_leaders(assignment, item.leader_and_isr.isr, live)
        return _Candidates(item, assignment, assignment, allowed, False)

    def _new_state(
        self, context: ControllerContext, item: ElectionInput, leader: int, leader_recovery: bool
    ) -> LeaderAndIsr:
        return item.leader_and_isr.new_leader(leader)

    def __str__(self) -> str:
        return "PreferredReplicaPartitionLeaderElectionStrategy"


@dataclass(frozen=True)
class ControlledShutdownElection(Election):
    """Kafka's ControlledShutdownPartitionLeaderElectionStrategy: a live ISR member that is not
    shutting down; the new ISR drops every shutting-down broker."""

    selector: LeaderSelector = field(
        default_factory=lambda: KafkaLeaderSelector(ElectionKind.CONTROLLED_SHUTDOWN)
    )
    kind: ElectionKind = field(default=ElectionKind.CONTROLLED_SHUTDOWN, init=False)

    def _candidates(self, context: ControllerContext, item: ElectionInput) -> _Candidates:
        tp = item.partition
        assignment = context.partition_replica_assignment(tp)
        live = tuple(r for r in assignment if context.is_replica_online(r, tp, include_shutting_down=True))
        shutting_down = context.shutting_down_broker_ids
        allowed = allowed_controlled_shutdown_leaders(assignment, item.leader_and_isr.isr, live, shutting_down)
        return _Candidates(item, assignment, live, allowed, False)

    def _new_state(
        self, context: ControllerContext, item: ElectionInput, leader: int, leader_recovery: bool
    ) -> LeaderAndIsr:
        shutting_down = context.shutting_down_broker_ids
        old = item.leader_and_isr
        return old.new_leader_and_isr(leader, [r for r in old.isr if r not in shutting_down])

    def __str__(self) -> str:
        return "ControlledShutdownPartitionLeaderElectionStrategy"


_STRATEGIES: dict[ElectionKind, Callable[..., Election]] = {
    ElectionKind.OFFLINE: OfflineElection,
    ElectionKind.REASSIGN: ReassignElection,
    ElectionKind.PREFERRED: PreferredElection,
    ElectionKind.CONTROLLED_SHUTDOWN: ControlledShutdownElection,
}


def by_name(
    name: str, *, config: ControllerConfig | None = None, host: PluginHost | None = None, **kwargs: Any
) -> Election:
    """The strategy for a registered selector name (built-in or plugin).

    ``by_name("offline", allow_unclean=True)`` is Kafka's unclean strategy; ``by_name("least-loaded")``
    wraps a plugin selector in the strategy of the kind it declares. Extra keyword arguments go to
    the strategy (only ``allow_unclean`` exists, for offline elections).
    """
    from kctl.config import ControllerConfig
    from kctl.plugins import get_plugin_host

    entry = (host or get_plugin_host()).leader_selectors().get(name)
    selector = entry.create(config or ControllerConfig())
    try:
        return _STRATEGIES[entry.kind](selector=selector, **kwargs)
    except TypeError as e:
        raise PluginError(f"invalid options for a {entry.kind.value} election: {e}") from None


def for_config(
    kind: ElectionKind, config: ControllerConfig, host: PluginHost | None = None, **kwargs: Any
) -> Election:
    """The strategy of ``kind`` with the selector configured for it (``kctl.leader.selector.<kind>``),
    found in ``host`` (default: the process-wide plugin host); the built-in names need no host."""
    name = config.selector_name(kind.value)
    if name == kind.value:
        return _STRATEGIES[kind](**kwargs)
    election = by_name(name, config=config, host=host, **kwargs)
    if election.kind is not kind:
        raise PluginError(
            f"kctl.leader.selector.{kind.value}={name!r} names a selector for {election.kind.value} elections"
        )
    return election
