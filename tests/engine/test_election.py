"""kctl.election: Kafka's four election rules, the strategies built on them, and leader selectors.

Expectations come from the behavioural reference (§2.1 rules, §2.2 results, §2.3 unclean
resolution) and from Kafka's PartitionLeaderElectionAlgorithmsTest, not from the code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pytest

from kctl import election, hookimpl
from kctl.config import ControllerConfig
from kctl.context import ENGINES, ControllerContext
from kctl.election import (
    ControlledShutdownElection,
    ElectionInput,
    ElectionResult,
    OfflineElection,
    PreferredElection,
    ReassignElection,
    by_name,
    for_config,
)
from kctl.errors import PluginError
from kctl.model import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    PartitionState,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.plugins import PluginHost, get_plugin_host
from kctl.registry import LeaderSelectorRegistry
from kctl.selectors import ElectionBatch, ElectionKind, KafkaLeaderSelector
from kctl.testing import register_plugin

from tests.support.statemachine_harness import TP, make_harness

RECOVERED, RECOVERING = LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING
TP1 = TopicPartition("t", 1)
TP2 = TopicPartition("t", 2)


# --- §2.1 the four pure rules -----------------------------------------------------------------------


class TestOfflineRule:
    # Kafka's PartitionLeaderElectionAlgorithmsTest, transcribed.
    def test_first_live_isr_member(self) -> None:
        assert election.offline_partition_leader([2, 4], [2, 4], {4}, False) == 4

    def test_last_isr_offline_unclean_disabled(self) -> None:
        assert election.offline_partition_leader([2, 4], [2], {4}, False) is None

    def test_last_isr_offline_unclean_enabled(self) -> None:
        assert election.offline_partition_leader([2, 4], [2], {4}, True) == 4

    def test_scans_the_assignment_in_list_order_not_the_isr(self) -> None:
        assert election.offline_partition_leader([3, 1, 2], [1, 2, 3], {1, 2, 3}, False) == 3
        assert election.offline_partition_leader([3, 1, 2], [2, 1], {1, 2, 3}, False) == 1
        assert election.offline_partition_leader([3, 1, 2], [2, 1], [2, 1], False) == 1

    def test_needs_both_live_and_in_isr(self) -> None:
        # 1: live, not in ISR; 2: in ISR, not live; 3: both.
        assert election.offline_partition_leader([1, 2, 3], [2, 3], {1, 3}, False) == 3
        assert election.offline_partition_leader([1, 2], [2], {1}, False) is None

    def test_unclean_fallback_only_when_no_live_isr_member(self) -> None:
        # A live ISR member exists: unclean is not used even though 1 comes first and is live.
        assert election.offline_partition_leader([1, 2, 3], [2], {1, 2}, True) == 2
        assert election.allowed_offline_leaders([1, 2, 3], [2], {1, 2}, True) == ([2], False)

    def test_unclean_fallback_is_first_live_replica_of_the_assignment(self) -> None:
        assert election.offline_partition_leader([1, 2, 3], [9], {3, 2}, True) == 2
        assert election.allowed_offline_leaders([1, 2, 3], [9], {3, 2}, True) == ([2, 3], True)

    def test_unclean_fallback_without_any_live_replica(self) -> None:
        assert election.offline_partition_leader([1, 2], [1], set(), True) is None
        assert election.allowed_offline_leaders([1, 2], [1], set(), True) == ([], True)

    def test_allowed_lists_every_clean_candidate_in_assignment_order(self) -> None:
        assert election.allowed_offline_leaders([4, 3, 2, 1], [1, 2, 3], {1, 2, 3, 4}, False) == ([3, 2, 1], False)
        assert election.allowed_offline_leaders([1, 2], [2], {1}, False) == ([], False)


class TestReassignRule:
    def test_first_live_isr_member_of_the_target(self) -> None:
        assert election.reassign_partition_leader([2, 4], [2, 4], {2, 4}) == 2

    def test_no_live_isr_member(self) -> None:
        assert election.reassign_partition_leader([2, 4], [2], set()) is None

    def test_empty_isr(self) -> None:
        assert election.reassign_partition_leader([2, 4], [], {2}) is None

    def test_target_order_and_never_unclean(self) -> None:
        assert election.reassign_partition_leader([5, 4, 6], [4, 5], {4, 5, 6}) == 5
        assert election.reassign_partition_leader([5, 4, 6], [4], {5, 6}) is None
        assert election.allowed_reassign_leaders([6, 5, 4], [4, 5, 6], {4, 6}) == [6, 4]


class TestPreferredRule:
    def test_preferred_replica_live_and_in_isr(self) -> None:
        assert election.preferred_replica_partition_leader([2, 4], [2, 4], {2, 4}) == 2

    def test_preferred_in_isr_not_live(self) -> None:
        assert election.preferred_replica_partition_leader([2, 4], [2], set()) is None

    def test_preferred_not_in_isr_but_live(self) -> None:
        assert election.preferred_replica_partition_leader([2, 4], [4], {2, 4}) is None

    def test_preferred_not_in_isr_not_live(self) -> None:
        assert election.preferred_replica_partition_leader([2, 4], [], set()) is None

    def test_never_tries_another_replica(self) -> None:
        # 4 is live and in the ISR, but only the head is considered.
        assert election.preferred_replica_partition_leader([2, 4], [4], {4}) is None
        assert election.allowed_preferred_leaders([2, 4], [2, 4], {2, 4}) == [2]
        assert election.allowed_preferred_leaders([], [1], {1}) == []


class TestControlledShutdownRule:
    def test_first_live_isr_member(self) -> None:
        assert election.controlled_shutdown_partition_leader([2, 4], [2, 4], {2, 4}, set()) == 2

    def test_last_isr_member_shutting_down(self) -> None:
        assert election.controlled_shutdown_partition_leader([2, 4], [2], {2, 4}, {2}) is None

    def test_all_isr_shutting_down_simultaneously(self) -> None:
        assert election.controlled_shutdown_partition_leader([2, 4], [2, 4], {2, 4}, {2, 4}) is None

    def test_excludes_shutting_down_even_when_passed_as_live(self) -> None:
        assert election.controlled_shutdown_partition_leader([2, 4, 5], [2, 4, 5], {2, 4, 5}, {2}) == 4
        assert election.allowed_controlled_shutdown_leaders([2, 4, 5], [5, 4, 2], {2, 4, 5}, {2}) == [4, 5]

    def test_needs_live_and_in_isr(self) -> None:
        assert election.controlled_shutdown_partition_leader([2, 4, 5], [2, 5], {2, 4}, {2}) is None


# --- §2.2 strategies --------------------------------------------------------------------------------


class ContextFactory(Protocol):
    def __call__(
        self,
        assignments: dict[TopicPartition, ReplicaAssignment | Sequence[int]],
        live: Sequence[int] = (1, 2, 3, 4),
        shutting_down: Sequence[int] = (),
    ) -> ControllerContext: ...


@pytest.fixture(params=ENGINES)
def context_with(request: pytest.FixtureRequest) -> ContextFactory:
    """Builds the elections' context on each engine: the strategies ask it which replicas are
    online (shutting-down brokers, offline log dirs) and count unclean elections in it."""

    def build(
        assignments: dict[TopicPartition, ReplicaAssignment | Sequence[int]],
        live: Sequence[int] = (1, 2, 3, 4),
        shutting_down: Sequence[int] = (),
    ) -> ControllerContext:
        ctx = ControllerContext(engine=request.param)
        ctx.epoch = 1
        ctx.set_live_brokers({b: 10 + b for b in live})
        for b in shutting_down:
            ctx.add_shutting_down_broker(b)
        for tp, a in assignments.items():
            ctx.add_topic(tp.topic)
            ctx.update_partition_full_replica_assignment(
                tp, a if isinstance(a, ReplicaAssignment) else ReplicaAssignment(a)
            )
        return ctx

    return build


def lai(leader: int, isr: Sequence[int], epoch: int = 7, pe: int = 3,
        recovery: LeaderRecoveryState = RECOVERED) -> LeaderAndIsr:
    return LeaderAndIsr(leader, tuple(isr), epoch, pe, recovery)


class TestOfflineElection:
    def test_leader_in_old_isr_keeps_the_online_isr_members_in_order(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3, 4]}, live=(2, 3, 4), shutting_down=(3,))
        [result] = OfflineElection().elect(ctx, [ElectionInput(TP, lai(1, [4, 1, 2, 3]))])
        # Broker 1 is dead and 3 is shutting down: neither is "online"; 2 is the first live ISR member.
        assert result == ElectionResult(TP, lai(2, [4, 2], epoch=8, pe=3), (2, 4), False)

    def test_offline_log_dir_replica_is_not_online(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3]}, live=(1, 2, 3))
        ctx.add_replicas_on_offline_dirs(1, [TP])
        [result] = OfflineElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 2, 3]))])
        assert result.leader_and_isr == lai(2, [2, 3], epoch=8)
        assert result.recipients == (2, 3)

    def test_epoch_plus_one_partition_epoch_unchanged(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2]})
        [result] = OfflineElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 2], epoch=41, pe=17))])
        assert result.leader_and_isr is not None
        assert (result.leader_and_isr.leader_epoch, result.leader_and_isr.partition_epoch) == (42, 17)

    def test_no_live_isr_member_and_unclean_not_allowed(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3]}, live=(2, 3))
        [result] = OfflineElection().elect(ctx, [ElectionInput(TP, lai(1, [1]), unclean_allowed=False)])
        assert result.leader_and_isr is None
        assert result.error is None
        assert result.unclean is False
        assert ctx.unclean_leader_elections == 0

    def test_unclean_election_elects_first_live_replica_with_isr_of_itself(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3]}, live=(3, 2))
        [result] = OfflineElection().elect(ctx, [ElectionInput(TP, lai(1, [1]), unclean_allowed=True)])
        assert result == ElectionResult(TP, lai(2, [2], epoch=8), (2, 3), True)
        assert ctx.unclean_leader_elections == 1

    def test_unclean_election_marks_recovering_only_with_leader_recovery(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3]}, live=(2, 3))
        [old_ibp] = OfflineElection().elect(ctx, [ElectionInput(TP, lai(1, [1]), True)], leader_recovery=False)
        [new_ibp] = OfflineElection().elect(ctx, [ElectionInput(TP, lai(1, [1]), True)], leader_recovery=True)
        assert old_ibp.leader_and_isr == lai(2, [2], epoch=8, recovery=RECOVERED)
        assert new_ibp.leader_and_isr == lai(2, [2], epoch=8, recovery=RECOVERING)
        assert ctx.unclean_leader_elections == 2

    def test_clean_election_keeps_the_previous_recovery_state(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3], TP1: [1, 2, 3]}, live=(2, 3))
        results = OfflineElection().elect(
            ctx,
            [ElectionInput(TP, lai(1, [1, 2], recovery=RECOVERED)), ElectionInput(TP1, lai(1, [1, 2], recovery=RECOVERING))],
            leader_recovery=True,
        )
        assert [r.leader_and_isr for r in results] == [
            lai(2, [2], epoch=8, recovery=RECOVERED),
            lai(2, [2], epoch=8, recovery=RECOVERING),
        ]
        assert ctx.unclean_leader_elections == 0

    def test_unclean_allowed_but_live_isr_member_exists_is_a_clean_election(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3]})
        [result] = OfflineElection().elect(ctx, [ElectionInput(TP, lai(1, [3]), unclean_allowed=True)],
                                           leader_recovery=True)
        assert result == ElectionResult(TP, lai(3, [3], epoch=8), (1, 2, 3), False)
        assert ctx.unclean_leader_elections == 0

    def test_unclean_allowed_without_any_live_replica_is_not_counted(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2]}, live=(3,))
        [result] = OfflineElection().elect(ctx, [ElectionInput(TP, lai(1, [1]), unclean_allowed=True)])
        assert result.leader_and_isr is None and result.recipients == ()
        assert ctx.unclean_leader_elections == 0

    def test_allow_unclean_strategy_allows_every_partition(self, context_with: ContextFactory) -> None:
        # Reference §2.3: OfflinePartitionLeaderElectionStrategy(allowUnclean=true) needs no config.
        ctx = context_with({TP: [1, 2, 3]}, live=(3,))
        [result] = OfflineElection(allow_unclean=True).elect(ctx, [ElectionInput(TP, lai(1, [1, 2]))])
        assert result == ElectionResult(TP, lai(3, [3], epoch=8), (3,), True)
        assert ctx.unclean_leader_elections == 1

    def test_unknown_unclean_flag_fails_the_partition_only(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3], TP1: [1, 2, 3]}, live=(2, 3))
        results = OfflineElection().elect(
            ctx, [ElectionInput(TP, lai(1, [1]), unclean_allowed=None), ElectionInput(TP1, lai(1, [1, 3]))]
        )
        assert results[0].partition == TP and results[0].leader_and_isr is None
        assert results[1] == ElectionResult(TP1, lai(3, [3], epoch=8), (2, 3), False)

    def test_results_follow_input_order(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP2: [3, 1], TP: [1, 2], TP1: [2, 1]})
        items = [ElectionInput(tp, lai(9, [1, 2, 3])) for tp in (TP1, TP2, TP)]
        assert [(r.partition, r.leader_and_isr.leader) for r in OfflineElection().elect(ctx, items)] == [
            (TP1, 2), (TP2, 3), (TP, 1)
        ]

    def test_kafka_name(self) -> None:
        assert str(OfflineElection()) == "OfflinePartitionLeaderElectionStrategy(false)"
        assert str(OfflineElection(allow_unclean=True)) == "OfflinePartitionLeaderElectionStrategy(true)"


class TestReassignElection:
    def test_leader_from_target_replicas_isr_unchanged_recipients_all_target(
        self, context_with: ContextFactory
    ) -> None:
        ra = ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
        ctx = context_with({TP: ra}, live=(1, 2, 3, 5, 6))
        [result] = ReassignElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 2, 3, 4, 5, 6]))])
        # 4 is the first target replica but is dead; 5 is live and in the ISR; 4 still gets the request.
        assert result == ElectionResult(TP, lai(5, [1, 2, 3, 4, 5, 6], epoch=8), (4, 5, 6), False)

    def test_never_unclean(self, context_with: ContextFactory) -> None:
        ra = ReplicaAssignment((4, 5, 1), (4, 5), (1,))
        ctx = context_with({TP: ra}, live=(4, 5))
        [result] = ReassignElection().elect(ctx, [ElectionInput(TP, lai(1, [1]), unclean_allowed=True)])
        assert result.leader_and_isr is None and result.unclean is False
        assert ctx.unclean_leader_elections == 0

    def test_electing_the_same_leader_still_bumps_the_epoch(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2]})
        [result] = ReassignElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 2], epoch=3, pe=9))])
        assert result.leader_and_isr == lai(1, [1, 2], epoch=4, pe=9)

    def test_shutting_down_target_replica_is_not_online(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2]}, shutting_down=(1,))
        [result] = ReassignElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 2]))])
        assert result.leader_and_isr == lai(2, [1, 2], epoch=8)
        assert result.recipients == (1, 2)


class TestPreferredElection:
    def test_head_elected_isr_unchanged_recipients_whole_assignment(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [2, 1, 3]}, live=(1, 2))
        [result] = PreferredElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 2, 3]))])
        assert result == ElectionResult(TP, lai(2, [1, 2, 3], epoch=8), (2, 1, 3), False)

    def test_does_not_fall_back_to_other_replicas(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [2, 1, 3]})
        [result] = PreferredElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 3]))])
        assert result.leader_and_isr is None

    def test_preferred_replica_already_leader_still_bumps_the_epoch(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [2, 1]})
        [result] = PreferredElection().elect(ctx, [ElectionInput(TP, lai(2, [2, 1], epoch=5, pe=6))])
        assert result.leader_and_isr == lai(2, [2, 1], epoch=6, pe=6)

    def test_shutting_down_preferred_replica_is_not_elected(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [2, 1]}, shutting_down=(2,))
        [result] = PreferredElection().elect(ctx, [ElectionInput(TP, lai(1, [2, 1]))])
        assert result.leader_and_isr is None


class TestControlledShutdownElection:
    def test_new_isr_drops_every_shutting_down_broker(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3, 4]}, live=(1, 2, 3), shutting_down=(1, 3))
        [result] = ControlledShutdownElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 2, 3]))])
        # Recipients: live-or-shutting-down replicas, so the shutting-down brokers get it too; 4 is dead.
        assert result == ElectionResult(TP, lai(2, [2], epoch=8), (1, 2, 3), False)

    def test_no_eligible_leader_when_every_isr_member_shuts_down(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3]}, shutting_down=(1, 2))
        [result] = ControlledShutdownElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 2]))])
        assert result.leader_and_isr is None

    def test_offline_dir_replica_is_not_a_candidate(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3]}, shutting_down=(1,))
        ctx.add_replicas_on_offline_dirs(2, [TP])
        [result] = ControlledShutdownElection().elect(ctx, [ElectionInput(TP, lai(1, [1, 2, 3]))])
        assert result.leader_and_isr == lai(3, [2, 3], epoch=8)
        assert result.recipients == (1, 3)


# --- Leader selectors ---------------------------------------------------------------------------------


class LastAllowed:
    """Picks the last allowed replica; records the batches it is given."""

    def __init__(self, kind: ElectionKind = ElectionKind.OFFLINE) -> None:
        self.kind = kind
        self.batches: list[ElectionBatch] = []
        self.leader_counts: list[dict[int, int]] = []

    def select_leaders(self, batch: ElectionBatch) -> Sequence[int]:
        self.batches.append(batch)
        self.leader_counts.append(dict(batch.leader_counts))  # the view is only readable during the call
        return [allowed[-1] for allowed in batch.allowed]


class Scripted:
    """Returns a fixed answer (or raises it)."""

    kind = ElectionKind.OFFLINE

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def select_leaders(self, batch: ElectionBatch) -> Sequence[int]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[return-value]


class TestSelectors:
    def test_kafka_selector_picks_the_first_allowed(self) -> None:
        batch = ElectionBatch(ElectionKind.OFFLINE, [TP, TP1], [[1, 2], [3, 2]], [[1, 2], [2, 3]],
                              [[1, 2], [3, 2]], [False, False])
        assert list(KafkaLeaderSelector(ElectionKind.OFFLINE).select_leaders(batch)) == [1, 3]

    def test_custom_selector_choice_is_honoured_with_kafkas_isr_and_recipients(
        self, context_with: ContextFactory
    ) -> None:
        ctx = context_with({TP: [1, 2, 3], TP1: [3, 2, 1]})
        selector = LastAllowed()
        results = OfflineElection(selector=selector).elect(
            ctx, [ElectionInput(TP, lai(1, [1, 2, 3])), ElectionInput(TP1, lai(3, [1, 3]))]
        )
        assert results == [
            ElectionResult(TP, lai(3, [1, 2, 3], epoch=8), (1, 2, 3), False),
            ElectionResult(TP1, lai(1, [1, 3], epoch=8), (3, 2, 1), False),
        ]
        [batch] = selector.batches  # one call for the whole batch
        assert batch.kind is ElectionKind.OFFLINE
        assert list(batch.partitions) == [TP, TP1]
        assert [list(a) for a in batch.allowed] == [[1, 2, 3], [3, 1]]
        assert [tuple(a) for a in batch.assignments] == [(1, 2, 3), (3, 2, 1)]
        assert [tuple(i) for i in batch.isrs] == [(1, 2, 3), (1, 3)]
        assert list(batch.unclean) == [False, False]

    def test_selector_sees_only_partitions_with_candidates_and_unclean_flags(
        self, context_with: ContextFactory
    ) -> None:
        ctx = context_with({TP: [1, 2, 3], TP1: [1, 2], TP2: [1, 2, 3]}, live=(2, 3))
        ctx.put_partition_leadership(TP2, _lice(lai(3, [3])))
        selector = LastAllowed()
        results = OfflineElection(selector=selector).elect(
            ctx,
            [
                ElectionInput(TP, lai(1, [1]), unclean_allowed=True),
                ElectionInput(TP1, lai(1, [1]), unclean_allowed=False),
                ElectionInput(TP2, lai(1, [1, 2])),
            ],
        )
        [batch] = selector.batches
        assert list(batch.partitions) == [TP, TP2]
        assert [list(a) for a in batch.allowed] == [[2, 3], [2]]
        assert list(batch.unclean) == [True, False]
        assert selector.leader_counts == [{3: 1}]
        assert results[0] == ElectionResult(TP, lai(3, [3], epoch=8), (2, 3), True)
        assert results[1].leader_and_isr is None and results[1].error is None
        assert results[2].leader_and_isr == lai(2, [2], epoch=8)
        assert ctx.unclean_leader_elections == 1

    def test_selector_choosing_a_broker_outside_allowed_fails_that_partition_only(
        self, context_with: ContextFactory
    ) -> None:
        ctx = context_with({TP: [1, 2, 3], TP1: [1, 2, 3]})
        results = OfflineElection(selector=Scripted([4, 2])).elect(
            ctx, [ElectionInput(TP, lai(1, [1, 2])), ElectionInput(TP1, lai(1, [1, 2]))]
        )
        assert results[0].leader_and_isr is None
        assert isinstance(results[0].error, PluginError)
        assert "chose 4" in str(results[0].error)
        assert results[1] == ElectionResult(TP1, lai(2, [1, 2], epoch=8), (1, 2, 3), False)

    def test_selector_choosing_a_live_non_isr_replica_is_refused(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3]})
        [result] = OfflineElection(selector=Scripted([3])).elect(ctx, [ElectionInput(TP, lai(1, [1, 2]))])
        assert isinstance(result.error, PluginError) and result.leader_and_isr is None

    @pytest.mark.parametrize("answer", [[1], [1, 2, 3]], ids=["too_few", "too_many"])
    def test_wrong_number_of_leaders_fails_the_batch_not_the_others(
        self, answer: list[int], context_with: ContextFactory
    ) -> None:
        ctx = context_with({TP: [1, 2], TP1: [1, 2], TP2: [3]}, live=(1, 2))
        results = OfflineElection(selector=Scripted(answer)).elect(
            ctx, [ElectionInput(TP, lai(1, [1, 2])), ElectionInput(TP1, lai(2, [1, 2])), ElectionInput(TP2, lai(3, [3]))]
        )
        assert [type(r.error) for r in results] == [PluginError, PluginError, type(None)]
        assert all(r.leader_and_isr is None for r in results)

    def test_selector_raising_becomes_a_plugin_error(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2]})
        [result] = OfflineElection(selector=Scripted(RuntimeError("boom"))).elect(ctx, [ElectionInput(TP, lai(1, [1, 2]))])
        assert isinstance(result.error, PluginError)
        assert "RuntimeError: boom" in str(result.error)

    def test_unclean_choice_rejected_by_validation_is_not_counted(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2, 3]}, live=(2, 3))
        [result] = OfflineElection(selector=Scripted([1])).elect(ctx, [ElectionInput(TP, lai(1, [1]), True)])
        assert isinstance(result.error, PluginError)
        assert ctx.unclean_leader_elections == 0

    def test_selector_returning_no_leader_fails_without_error(self, context_with: ContextFactory) -> None:
        ctx = context_with({TP: [1, 2]})
        [result] = OfflineElection(selector=Scripted([NO_LEADER])).elect(ctx, [ElectionInput(TP, lai(1, [1, 2]))])
        assert result.leader_and_isr is None and result.error is None


def _lice(state: LeaderAndIsr) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(state, 1)


# --- by_name and for_config ------------------------------------------------------------------------


class LastAllowedPlugin:
    """A third-party plugin registering ``last-allowed`` for offline and ``last-preferred``."""

    def __init__(self) -> None:
        self.configs: list[ControllerConfig] = []

    @hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        def offline(config: ControllerConfig) -> LastAllowed:
            self.configs.append(config)
            return LastAllowed(ElectionKind.OFFLINE)

        register.add("last-allowed", offline, kind=ElectionKind.OFFLINE)
        register.add("last-preferred", lambda config: LastAllowed(ElectionKind.PREFERRED), kind=ElectionKind.PREFERRED)


@pytest.mark.parametrize(
    ("name", "cls", "kind"),
    [
        ("offline", OfflineElection, ElectionKind.OFFLINE),
        ("reassign", ReassignElection, ElectionKind.REASSIGN),
        ("preferred", PreferredElection, ElectionKind.PREFERRED),
        ("controlled_shutdown", ControlledShutdownElection, ElectionKind.CONTROLLED_SHUTDOWN),
    ],
)
def test_by_name_builtin(plugin_host: PluginHost, name: str, cls: type, kind: ElectionKind) -> None:
    strategy = by_name(name, host=plugin_host)
    assert type(strategy) is cls
    assert strategy.kind is kind
    assert strategy.selector == KafkaLeaderSelector(kind)


def test_by_name_offline_unclean(plugin_host: PluginHost) -> None:
    strategy = by_name("offline", host=plugin_host, allow_unclean=True)
    assert isinstance(strategy, OfflineElection) and strategy.allow_unclean is True
    assert by_name("offline", host=plugin_host).allow_unclean is False  # type: ignore[attr-defined]


def test_by_name_rejects_options_the_strategy_does_not_have(plugin_host: PluginHost) -> None:
    with pytest.raises(PluginError):
        by_name("preferred", host=plugin_host, allow_unclean=True)


def test_by_name_unknown(plugin_host: PluginHost) -> None:
    with pytest.raises(PluginError, match="unknown leader selector 'nope'"):
        by_name("nope", host=plugin_host)


def test_by_name_finds_a_plugin_selector(plugin_host: PluginHost, context_with: ContextFactory) -> None:
    plugin = LastAllowedPlugin()
    config = ControllerConfig(unclean_leader_election_enable=True)
    with register_plugin(plugin_host, plugin, "last-allowed-plugin"):
        strategy = by_name("last-allowed", host=plugin_host, config=config)
        preferred = by_name("last-preferred", host=plugin_host)
    assert isinstance(strategy, OfflineElection) and isinstance(strategy.selector, LastAllowed)
    assert plugin.configs == [config]
    assert isinstance(preferred, PreferredElection)
    ctx = context_with({TP: [1, 2, 3]})
    [result] = strategy.elect(ctx, [ElectionInput(TP, lai(1, [1, 2, 3]))])
    assert result.leader_and_isr == lai(3, [1, 2, 3], epoch=8)
    with pytest.raises(PluginError):  # gone once unregistered
        by_name("last-allowed", host=plugin_host)


def test_for_config_defaults_are_kafkas_strategies() -> None:
    config = ControllerConfig()
    for kind, cls in [
        (ElectionKind.OFFLINE, OfflineElection),
        (ElectionKind.REASSIGN, ReassignElection),
        (ElectionKind.PREFERRED, PreferredElection),
        (ElectionKind.CONTROLLED_SHUTDOWN, ControlledShutdownElection),
    ]:
        strategy = for_config(kind, config)
        assert type(strategy) is cls and strategy.selector == KafkaLeaderSelector(kind)
    assert for_config(ElectionKind.OFFLINE, config, allow_unclean=True).allow_unclean is True  # type: ignore[attr-defined]


def test_for_config_honours_the_offline_selector_property() -> None:
    config = ControllerConfig.from_properties({"kctl.leader.selector.offline": "last-allowed"})
    with register_plugin(get_plugin_host(), LastAllowedPlugin(), "last-allowed-plugin"):
        strategy = for_config(ElectionKind.OFFLINE, config)
        assert isinstance(strategy, OfflineElection) and isinstance(strategy.selector, LastAllowed)
        # The other kinds keep Kafka's selectors.
        assert for_config(ElectionKind.PREFERRED, config).selector == KafkaLeaderSelector(ElectionKind.PREFERRED)
        wrong_kind = ControllerConfig.from_properties({"kctl.leader.selector.offline": "last-preferred"})
        with pytest.raises(PluginError, match="names a selector for preferred elections"):
            for_config(ElectionKind.OFFLINE, wrong_kind)


@pytest.mark.usefixtures("engine")
def test_configured_selector_drives_the_state_machines_offline_elections() -> None:
    """End to end: trigger_online_partition_state_change uses ``kctl.leader.selector.offline``."""
    config = {"kctl.leader.selector.offline": "last-allowed"}
    h = make_harness(config=config, topics={"t": {0: [1, 2, 3]}})
    h.write_state(TP, 1, [1, 2, 3], leader_epoch=4, version=2)
    h.set_partition_states({TP: PartitionState.OFFLINE})
    with register_plugin(get_plugin_host(), LastAllowedPlugin(), "last-allowed-plugin"):
        results = h.partition_sm.trigger_online_partition_state_change()
    assert results == {TP: LeaderAndIsr(3, (1, 2, 3), 5, 3)}
    stored = h.stored(TP)
    assert stored is not None and stored.leader_and_isr == LeaderAndIsr(3, (1, 2, 3), 5, 3)
    assert h.context.partition_state(TP) is PartitionState.ONLINE


@pytest.mark.usefixtures("engine")
def test_misbehaving_selector_fails_its_partitions_in_the_state_machine_only() -> None:
    h = make_harness(topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}})
    for tp in (TP, TP1):
        h.write_state(tp, 1, [1, 2, 3], leader_epoch=4, version=2)
    h.set_partition_states({TP: PartitionState.OFFLINE, TP1: PartitionState.OFFLINE})
    before = h.stored_states([TP, TP1])
    results = h.partition_sm.handle_state_changes([TP, TP1], PartitionState.ONLINE,
                                                  OfflineElection(selector=Scripted([9, 3])))
    assert isinstance(results[TP], PluginError)
    assert results[TP1] == LeaderAndIsr(3, (1, 2, 3), 5, 3)
    assert h.stored(TP) == before[TP]
    assert h.partition_states([TP, TP1]) == {TP: PartitionState.OFFLINE, TP1: PartitionState.ONLINE}
    assert h.errors() == [
        "ERROR [Controller id=0 epoch=1] Controller 0 epoch 1 failed to change state for partition t-0 from "
        f"OfflinePartition to OnlinePartition: PluginError: {results[TP]}"
    ]
    assert set(h.channel.leader_and_isr()) == {1, 2, 3}
    assert all(set(states) == {TP1} for states in h.channel.leader_and_isr().values())
