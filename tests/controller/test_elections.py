"""Leader elections (reference §2, §6.9, §6.10, §6.16): preferred through the ElectLeaders API and
``/admin/preferred_replica_election``, unclean through the API or once enabled dynamically
(cluster-wide or for one topic) — never otherwise — and the automatic leader rebalance with its
threshold and schedule.
"""

from __future__ import annotations

import pytest

from kctl import admin
from kctl.cluster import EmbeddedCluster
from kctl.model import TopicPartition

from tests.support.controller import TP, active, error_names, leaders, make_isr_all_dead, partition

T1 = TopicPartition("t", 1)
U0 = TopicPartition("u", 0)
NO_REBALANCE = {"auto.leader.rebalance.enable": False}


def bounce(cluster: EmbeddedCluster, broker: int) -> None:
    """Kill and restart ``broker``: its leadership moves away and does not come back by itself."""
    cluster.kill_broker(broker)
    cluster.run_until(lambda: broker not in active(cluster).context.live_broker_ids, what=f"{broker} to be dead")
    cluster.start_broker(broker)
    assert cluster.run_until_stable()


def imbalance(cluster: EmbeddedCluster) -> float:
    return cluster.metrics()["PreferredReplicaImbalanceCount"]


# --- Preferred replica election ----------------------------------------------------------------------


def test_preferred_election_through_the_api_moves_leadership_back_to_the_first_replica() -> None:
    with EmbeddedCluster(3, controllers=[3], config=NO_REBALANCE) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3], 1: [1, 3, 2]})
        bounce(cluster, 1)
        assert leaders(cluster, "t") == {0: 2, 1: 3} and imbalance(cluster) == 2
        epoch = partition(cluster).leader_epoch

        assert cluster.elect_leaders([TP], "preferred") == {TP: 1}

        assert (partition(cluster).leader, partition(cluster).leader_epoch) == (1, epoch + 1)
        assert set(partition(cluster).isr) == {1, 2, 3}  # a preferred election keeps the ISR
        assert leaders(cluster, "t")[1] == 3 and imbalance(cluster) == 1
        assert error_names(cluster.elect_leaders([TP], "preferred")) == {TP: "ELECTION_NOT_NEEDED"}
        assert cluster.check_invariants() == []


def test_preferred_election_fails_while_the_preferred_replica_is_down() -> None:
    with EmbeddedCluster(3, controllers=[3], config=NO_REBALANCE) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.kill_broker(1)
        cluster.run_until_stable()

        assert error_names(cluster.elect_leaders([TP], "preferred")) == {TP: "PREFERRED_LEADER_NOT_AVAILABLE"}
        assert partition(cluster).leader == 2  # the preferred rule never tries another replica


def test_preferred_election_through_the_admin_path_then_the_request_is_removed() -> None:
    with EmbeddedCluster(3, controllers=[3], config=NO_REBALANCE) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 1, 3]})
        bounce(cluster, 1)
        assert leaders(cluster, "t") == {0: 2, 1: 2}

        admin.request_preferred_replica_election(cluster.store, [TP, T1])
        cluster.run_until(lambda: cluster.store.get_preferred_replica_election() is None, what="the znode removed")

        assert cluster.run_until_stable()
        assert leaders(cluster, "t") == {0: 1, 1: 2} and imbalance(cluster) == 0
        # The watch is re-armed: a second request is acted on too.
        bounce(cluster, 1)
        admin.request_preferred_replica_election(cluster.store, [TP])
        cluster.run_until(lambda: cluster.store.get_preferred_replica_election() is None, what="the znode removed")
        assert leaders(cluster, "t")[0] == 1
        assert cluster.check_invariants() == []


# --- Unclean leader election -------------------------------------------------------------------------


def test_a_partition_whose_isr_is_all_dead_stays_offline_while_unclean_election_is_disabled() -> None:
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        make_isr_all_dead(cluster, "t")
        cluster.advance(120)

        assert (partition(cluster).leader, partition(cluster).isr, partition(cluster).state) == (-1, (1,), "OfflinePartition")
        metrics = cluster.metrics()
        assert (metrics["OfflinePartitionsCount"], metrics["UncleanLeaderElections"]) == (1, 0)
        assert cluster.check_invariants() == []


def test_unclean_election_through_the_api_elects_a_live_out_of_sync_replica_and_is_counted() -> None:
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        make_isr_all_dead(cluster, "t")

        assert error_names(cluster.elect_leaders([TP], "preferred")) == {TP: "PREFERRED_LEADER_NOT_AVAILABLE"}
        assert cluster.elect_leaders([TP], "unclean") == {TP: 2}

        assert (partition(cluster).leader, partition(cluster).isr) == (2, (2,))
        metrics = cluster.metrics()
        assert (metrics["OfflinePartitionsCount"], metrics["UncleanLeaderElections"]) == (0, 1)
        assert error_names(cluster.elect_leaders([TP], "unclean")) == {TP: "ELECTION_NOT_NEEDED"}
        assert cluster.check_invariants() == []


def test_unclean_election_without_any_live_replica_reports_no_eligible_leader() -> None:
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        cluster.kill_broker(1)
        cluster.kill_broker(2)
        cluster.run_until(lambda: partition(cluster).leader == -1, what="t-0 to go offline")

        assert error_names(cluster.elect_leaders([TP], "unclean")) == {TP: "ELIGIBLE_LEADERS_NOT_AVAILABLE"}
        assert cluster.metrics()["UncleanLeaderElections"] == 0


def test_enabling_unclean_election_cluster_wide_elects_leaders_for_every_such_partition() -> None:
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        cluster.create_topic("u", assignment={0: [1, 2]})
        make_isr_all_dead(cluster, "t")
        assert cluster.metrics()["OfflinePartitionsCount"] == 2

        cluster.update_config({"unclean.leader.election.enable": True})
        cluster.run_until(cluster.is_quiet, what="the elections")

        assert [(p.leader, p.isr) for t in ("t", "u") for p in cluster.describe(t)] == [(2, (2,)), (2, (2,))]
        metrics = cluster.metrics()
        assert (metrics["OfflinePartitionsCount"], metrics["UncleanLeaderElections"]) == (0, 2)
        assert cluster.check_invariants() == []


def test_enabling_unclean_election_for_one_topic_elects_leaders_for_that_topic_only() -> None:
    with EmbeddedCluster(3, controllers=[3]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        cluster.create_topic("u", assignment={0: [1, 2]})
        make_isr_all_dead(cluster, "t")

        cluster.set_topic_config("t", {"unclean.leader.election.enable": True})
        cluster.run_until(lambda: partition(cluster).leader == 2, what="t-0 to be elected")
        cluster.advance(60)

        assert (partition(cluster, U0).leader, partition(cluster, U0).state) == (-1, "OfflinePartition")
        metrics = cluster.metrics()
        assert (metrics["OfflinePartitionsCount"], metrics["UncleanLeaderElections"]) == (1, 1)
        # Later broker changes use the topic config too (reference §2.3).
        cluster.kill_broker(2)
        cluster.start_broker(2)
        cluster.run_until(cluster.is_quiet, what="the cluster to be quiet")
        assert (partition(cluster).leader, partition(cluster, U0).leader) == (2, -1)
        assert cluster.check_invariants() == []


# --- Auto leader rebalance ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("moved", "total", "percentage", "rebalanced"),
    [(1, 10, 10, False), (2, 10, 10, True), (2, 4, 50, False), (2, 4, 49, True)],
    ids=["10%-of-10%", "20%-over-10%", "50%-of-50%", "50%-over-49%"],
)
def test_auto_rebalance_acts_only_above_the_imbalance_percentage(
    moved: int, total: int, percentage: int, rebalanced: bool
) -> None:
    config = {"leader.imbalance.per.broker.percentage": percentage, "leader.imbalance.check.interval.seconds": 30}
    with EmbeddedCluster(3, controllers=[3], config=config) as cluster:
        # Broker 1 is preferred for every partition; only the RF 2 ones lose their leader to 2 below.
        cluster.create_topic("t", assignment={p: [1, 2] for p in range(moved)})
        cluster.create_topic("s", assignment={p: [1] for p in range(total - moved)})
        bounce(cluster, 1)
        assert list(leaders(cluster, "t").values()) == [2] * moved and imbalance(cluster) == moved

        cluster.advance(75)  # at least two checks

        assert list(leaders(cluster, "t").values()) == ([1] if rebalanced else [2]) * moved
        assert imbalance(cluster) == (0 if rebalanced else moved)
        assert cluster.check_invariants() == []


def test_auto_rebalance_runs_5_seconds_after_failover_then_every_check_interval() -> None:
    with EmbeddedCluster(4, controllers=[3, 4], config={"leader.imbalance.check.interval.seconds": 60}) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        cluster.advance(10)  # past the first controller's first check
        bounce(cluster, 1)

        cluster.kill_controller()
        failover = cluster.now()
        cluster.advance(failover + 4.9 - cluster.now())
        assert partition(cluster).leader == 2
        cluster.advance(0.2)
        assert partition(cluster).leader == 1 and imbalance(cluster) == 0

        bounce(cluster, 1)
        cluster.advance(failover + 64.9 - cluster.now())
        assert partition(cluster).leader == 2 and imbalance(cluster) == 1
        cluster.advance(0.2)
        assert partition(cluster).leader == 1 and imbalance(cluster) == 0
        assert cluster.check_invariants() == []


def test_no_auto_rebalance_when_it_is_disabled() -> None:
    with EmbeddedCluster(3, controllers=[3], config=NO_REBALANCE) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2], 1: [1, 2]})
        bounce(cluster, 1)

        cluster.advance(1000)

        assert leaders(cluster, "t") == {0: 2, 1: 2} and imbalance(cluster) == 2
