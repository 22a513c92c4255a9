"""check_invariants() against real violations: for each of I1–I8 (DESIGN §7) a small cluster is
driven into a violation, through the store's or the brokers' own APIs or one controlled fault, and
the checker must report it in one line naming the invariant and where it happened.

Each fault is applied to the same healthy cluster: t-0 on [1, 2, 3], created with leader 1 (leader
epoch 0), holding 10 committed records, with broker 3 restarted once, so the controller removed 3
from the ISR (epoch 1) and the leader added it back (AlterPartition keeps the epoch): leader 1,
leader epoch 1, ISR [1, 2, 3]. Controller candidates 4 and 5 run beside the data brokers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from kctl._engine import HostedPartitions
from kctl.broker.native_data_plane import NativeReplicaManager
from kctl.cluster import EmbeddedCluster
from kctl.election import OfflineElection
from kctl.errors import Errors
from kctl.model import LeaderAndIsr, PartitionState, TopicPartition
from kctl.requests import LeaderAndIsrRequest

from tests.support.controller import TP, active, make_isr_all_dead, stored_state

Violation = Callable[[EmbeddedCluster, pytest.MonkeyPatch], str]
"""Drives the cluster into a violation; returns the line check_invariants() must report."""


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(5, controllers=[4, 5], config={"auto.leader.rebalance.enable": False}) as c:
        c.create_topic("t", assignment={0: [1, 2, 3]})
        c.produce(TP, 10)
        c.run_until(lambda: c.ledger.committed_offset(TP) == 10, what="10 committed records")
        c.kill_broker(3)
        c.run_until(lambda: stored_state(c).isr == (1, 2), what="3 out of the ISR")
        c.start_broker(3)
        assert c.run_until_stable()
        assert stored_state(c) == LeaderAndIsr(1, (1, 2, 3), 1, 2)
        yield c


def force_state(
    cluster: EmbeddedCluster, *, leader: int | None = None, isr: tuple[int, ...] | None = None,
    leader_epoch: int | None = None, controller_epoch: int | None = None,
) -> None:
    """Write t-0's state znode as a buggy writer would: the stored state with the given fields
    replaced, stamped with ``controller_epoch`` (default: the active controller's), unfenced."""
    current = stored_state(cluster)
    written = LeaderAndIsr(
        current.leader if leader is None else leader,
        current.isr if isr is None else isr,
        current.leader_epoch if leader_epoch is None else leader_epoch,
        current.partition_epoch,
    )
    epoch = active(cluster).epoch if controller_epoch is None else controller_epoch
    assert TP in cluster.store.update_partition_states({TP: written}, epoch, -1).successful


def stale_controller_write(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """A deposed controller (epoch 1) whose write lands after its successor (epoch 2) wrote."""
    cluster.kill_controller()
    cluster.kill_broker(3)  # the new controller shrinks the ISR: a write of epoch 2
    cluster.run_until(lambda: stored_state(cluster).isr == (1, 2), what="3 out of the ISR")
    force_state(cluster, controller_epoch=1, leader_epoch=3)
    return "I1: t-0 was written by controller epoch 1 after epoch 2"


def leader_epoch_goes_back(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    force_state(cluster, leader_epoch=0)
    return "I2: leader epoch of t-0 went back from 1 to 0"


def leader_change_without_new_epoch(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    force_state(cluster, leader=2)
    return "I2: leader of t-0 changed 1->2 without a new epoch (1)"


def unclean_election_while_disabled(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """The controller runs an unclean election although nothing enabled it: u-0 = [1, 2] has lost
    its whole ISR [1] and 2 is live outside it."""
    cluster.create_topic("u", assignment={0: [1, 2]})
    make_isr_all_dead(cluster, "u")
    u0 = TopicPartition("u", 0)
    active(cluster).partition_state_machine.handle_state_changes(
        [u0], PartitionState.ONLINE, OfflineElection(allow_unclean=True)
    )
    assert stored_state(cluster, u0) == LeaderAndIsr(2, (2,), 3, 3)
    return "I3: 1 unclean elections (u-0) although unclean election was never enabled"


def isr_emptied(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    force_state(cluster, leader=-1, isr=(), leader_epoch=2)
    return "I4: t-0 was stored with an empty ISR (leader -1, epoch 2)"


def broker_accepts_a_deposed_controller(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """Broker 2 loses its controller-epoch fence and takes a request of epoch 1 once epoch 2 spoke."""
    old = next(r.request for r in cluster.sent_requests
               if r.broker == 2 and isinstance(r.request, LeaderAndIsrRequest) and r.request.controller_epoch == 1)
    cluster.kill_controller()
    cluster.run_until(cluster.is_quiet, what="the failover")
    agent = cluster.brokers[2]
    monkeypatch.setattr(agent, "_fenced", lambda request: Errors.NONE)
    agent.handle_request(old)
    return "I5: broker 2 answered NONE to a LeaderAndIsr request of controller epoch 1 after accepting epoch 2"


def broker_applies_an_old_leader_epoch(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """Broker 2 forgets the leader epochs it holds and applies t-0's creation (epoch 0) again."""
    creation = next(r.request for r in cluster.sent_requests
                    if r.broker == 2 and isinstance(r.request, LeaderAndIsrRequest)
                    and [(s.tp, s.leader_epoch) for s in r.request.partition_states] == [(TP, 0)])
    agent = cluster.brokers[2]
    monkeypatch.setattr(agent, "_hosted", HostedPartitions())
    agent.handle_request(creation)
    return "I5: broker 2 applied leader epoch 0 of t-0 after epoch 1"


def reassignment_lost(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """A reassignment in flight (broker 4 does not fetch, so it never catches up) that the
    controller forgets."""
    cluster.brokers[4].replica_manager.pause_fetching()  # type: ignore[attr-defined]
    assert cluster.reassign({TP: [1, 2, 4]}, wait=False) == {TP: None}
    cluster.run_until(cluster.is_quiet, what="the reassignment to start")
    active(cluster).context.remove_partition_being_reassigned(TP)
    return ("I6: t-0 is being reassigned in the store (ReplicaAssignment(replicas=1,2,4,3, addingReplicas=4, "
            "removingReplicas=3)) but the controller does not track it")


def metadata_cache_diverges(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """Broker 2 drops UpdateMetadata; a re-ordering of t-0's replicas (a reassignment that only
    bumps the leader epoch, reference §6.8 B3) then never reaches its cache."""
    monkeypatch.setattr(cluster.brokers[2].metadata_cache, "update", lambda request: [])
    assert cluster.reassign({TP: [2, 1, 3]}, wait=False) == {TP: None}
    cluster.run_until(cluster.is_quiet, what="the re-ordering")
    return ("I7: broker 2: t-0: cached leader=1 leader_epoch=1 isr=[1, 2, 3] partition_epoch=2 replicas=[1, 2, 3], "
            "stored leader=1 leader_epoch=2 isr=[1, 2, 3] partition_epoch=3 replicas=[2, 1, 3]")


def committed_records_lost(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """Broker 2's disk silently loses t-0's 10 committed records while 2 stays in the ISR; the
    leader then dies and the controller elects 2, cleanly."""
    follower = cluster.brokers[2].replica_manager
    follower.pause_fetching()  # type: ignore[attr-defined]
    if isinstance(follower, NativeReplicaManager):
        follower.lose_records(TP, 0)
    else:
        follower._replicas[TP].truncate_to(0)  # type: ignore[attr-defined]
    cluster.kill_broker(1)
    cluster.run_until(lambda: cluster.brokers[2].leader_epoch(TP) == 2, what="2 to lead t-0")
    return "I8: t-0: broker 2 became leader (epoch 2) from the ISR with log end offset 0, below the committed offset 10"


VIOLATIONS: list[tuple[str, Violation]] = [
    ("I1", stale_controller_write),
    ("I2", leader_epoch_goes_back),
    ("I2", leader_change_without_new_epoch),
    ("I3", unclean_election_while_disabled),
    ("I4", isr_emptied),
    ("I5", broker_accepts_a_deposed_controller),
    ("I5", broker_applies_an_old_leader_epoch),
    ("I6", reassignment_lost),
    ("I7", metadata_cache_diverges),
    ("I8", committed_records_lost),
]


@pytest.mark.parametrize(("invariant", "violate"), VIOLATIONS, ids=[f"{i}-{v.__name__}" for i, v in VIOLATIONS])
def test_a_violation_is_reported_naming_its_invariant_and_place(
    cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, invariant: str, violate: Violation
) -> None:
    assert cluster.check_invariants() == []
    expected = violate(cluster, monkeypatch)
    assert [v for v in cluster.check_invariants() if v.startswith(f"{invariant}:")] == [expected]
