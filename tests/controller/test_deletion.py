"""Topic deletion (reference §6.11): the partitions go offline and away, every replica deletes its
log, and only then is the topic removed; an unreachable replica or a reassignment in progress halts
it until the broker is back or the reassignment done.
"""

from __future__ import annotations

import pytest

from kctl import admin
from kctl.cluster import EmbeddedCluster
from kctl.errors import KctlError
from kctl.model import EPOCH_DURING_DELETE, LEADER_DURING_DELETE, PartitionReplica, ReplicaAssignment, TopicPartition
from kctl.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from kctl.stores.base import TopicAssignment

from tests.support.controller import TP, active, error_names, stored_state

T1 = TopicPartition("t", 1)


def deletion_metrics(cluster: EmbeddedCluster) -> tuple[float, ...]:
    m = cluster.metrics()
    return m["GlobalTopicCount"], m["TopicsToDeleteCount"], m["TopicsIneligibleToDeleteCount"], m["OfflinePartitionsCount"]


def replica_states(cluster: EmbeddedCluster, tp: TopicPartition, brokers: tuple[int, ...]) -> list[str]:
    ctx = active(cluster).context
    return [ctx.replica_state(PartitionReplica(tp, b)).kafka_name for b in brokers]


def test_deleting_a_topic_removes_it_everywhere() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1]})
        cluster.create_topic("keep", assignment={0: [3, 1]})
        cluster.produce(TP, 10)

        cluster.delete_topic("t")

        assert cluster.store.get_all_topics() == {"keep"}
        assert cluster.store.get_topic_deletions() == []
        assert cluster.store.get_topic_configs(["t"]).values == {"t": {}}  # /config/topics/t is gone too
        assert "t" not in active(cluster).context.all_topics
        assert deletion_metrics(cluster) == (1, 0, 0, 0)
        assert cluster.metrics()["GlobalPartitionCount"] == 1
        for broker in (1, 2, 3):
            assert cluster.brokers[broker].replica_manager.replica_state(TP) is None
            assert cluster.brokers[broker].metadata_cache.partition_state(TP) is None
        # Brokers learnt the topic was going (leader -2), and were told to delete with epoch -2.
        assert any(isinstance(r.request, UpdateMetadataRequest) and any(
            s.topic == "t" and s.leader == LEADER_DURING_DELETE for s in r.request.partition_states)
            for r in cluster.sent_requests)
        deletes = {(r.broker, s.partition) for r in cluster.sent_requests if isinstance(r.request, StopReplicaRequest)
                   for s in r.request.partition_states
                   if s.topic == "t" and s.delete_partition and s.leader_epoch == EPOCH_DURING_DELETE}
        assert deletes == {(b, p) for b in (1, 2, 3) for p in (0, 1)}
        assert cluster.check_invariants() == []


def test_a_deleted_topic_can_be_created_again_from_scratch() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        first_id = active(cluster).context.topic_ids["t"]
        cluster.delete_topic("t")

        cluster.create_topic("t", assignment={0: [3, 2]})

        assert [(p.replicas, p.leader, p.leader_epoch) for p in cluster.describe("t")] == [((3, 2), 3, 0)]
        assert active(cluster).context.topic_ids["t"] != first_id
        assert [(row.replicas, row.leader) for row in cluster.partition_history(TP)][-1] == ((3, 2), 3)
        assert cluster.check_invariants() == []


def test_deletion_waits_for_a_dead_broker_and_completes_after_its_restart() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1]})
        cluster.kill_broker(3)
        cluster.run_until_stable()

        cluster.delete_topic("t")

        # Halted: the dead replicas could not delete (ReplicaDeletionIneligible, then retried as
        # OfflineReplica), the live ones did, and the topic stays, ineligible, until broker 3 is back.
        assert cluster.store.get_all_topics() == {"t"} and cluster.store.get_topic_deletions() == ["t"]
        assert "t" in active(cluster).context.topics_to_be_deleted
        assert active(cluster).context.is_topic_ineligible_for_deletion("t")
        for tp in (TP, T1):
            assert replica_states(cluster, tp, (1, 2, 3)) == ["ReplicaDeletionSuccessful"] * 2 + ["OfflineReplica"]
            assert any(f"replica 3 for partition {tp} from OfflineReplica to ReplicaDeletionIneligible" in line
                       for line in cluster.state_change_log)
        assert deletion_metrics(cluster) == (1, 1, 1, 0)
        assert cluster.metrics()["ReplicasToDeleteCount"] == 6
        cluster.advance(120)
        assert cluster.store.get_all_topics() == {"t"}

        cluster.start_broker(3)
        assert cluster.run_until_stable()

        assert cluster.store.get_all_topics() == set() and cluster.store.get_topic_deletions() == []
        assert deletion_metrics(cluster) == (0, 0, 0, 0)
        assert cluster.brokers[3].replica_manager.replica_state(TP) is None
        assert cluster.check_invariants() == []


def test_a_broker_failing_during_deletion_halts_it_until_the_broker_is_back() -> None:
    with EmbeddedCluster(3, controllers=[1]) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.brokers[3].replica_manager.pause_fetching()  # keep some work in flight

        cluster.delete_topic("t", wait=False)
        cluster.kill_broker(3)
        cluster.run_until_stable(what="the deletion to halt")
        assert cluster.store.get_all_topics() == {"t"}
        assert active(cluster).context.is_topic_ineligible_for_deletion("t")

        cluster.start_broker(3)
        assert cluster.run_until_stable()
        assert cluster.store.get_all_topics() == set()
        assert cluster.check_invariants() == []


def test_a_topic_queued_for_deletion_during_a_reassignment_waits_for_it_after_failover() -> None:
    """Reference §6.3 step 5: topics with a partition being reassigned are ineligible at failover;
    the completed reassignment resumes the deletion (§6.8 phase B)."""
    with EmbeddedCluster(4) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2]})
        cluster.brokers[4].replica_manager.pause_fetching()
        cluster.reassign({TP: [3, 4]}, wait=False)
        cluster.run_until(lambda: 3 in stored_state(cluster).isr, what="3 to join the ISR")

        admin.delete_topic(cluster.store, "t")  # requested while the controller fails over
        cluster.kill_controller()
        cluster.advance(30)

        assert cluster.store.get_all_topics() == {"t"}
        assert active(cluster).context.is_topic_ineligible_for_deletion("t")
        assert cluster.list_reassignments() == {TP: ReplicaAssignment((3, 4, 1, 2), (3, 4), (1, 2))}
        # New reassignments of a topic queued for deletion are refused.
        assert error_names(cluster.reassign({TP: [1, 3]}, wait=False)) == {TP: "UNKNOWN_TOPIC_OR_PARTITION"}

        cluster.brokers[4].replica_manager.resume_fetching()
        assert cluster.run_until_stable()
        assert cluster.store.get_all_topics() == set()
        # The reassignment completed (LeaderAndIsr with RS = TRS) before the new replicas were deleted.
        events = [type(r.request).__name__ for r in cluster.sent_requests for s in r.request.partition_states
                  if s.tp == TP and (isinstance(r.request, LeaderAndIsrRequest) and s.replicas == (3, 4)
                                     or isinstance(r.request, StopReplicaRequest) and r.broker in (3, 4)
                                     and s.delete_partition)]
        assert "LeaderAndIsrRequest" in events and "StopReplicaRequest" in events
        assert events.index("LeaderAndIsrRequest") < events.index("StopReplicaRequest")
        assert cluster.check_invariants() == []


def test_partitions_cannot_be_added_to_a_topic_being_deleted() -> None:
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.kill_broker(3)
        cluster.delete_topic("t")  # halted while 3 is down

        with pytest.raises(KctlError) as refused:
            cluster.create_partitions("t", 2)
        assert refused.value.error.name == "INVALID_TOPIC_EXCEPTION"
        assert [p.partition for p in cluster.describe("t")] == [0]


def test_partitions_written_for_a_topic_being_deleted_are_dropped_and_its_assignment_restored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """PartitionModifications (reference §6.7): an admin added a partition to the topic znode while
    the topic was being deleted (its check ran before the deletion request). The controller refuses
    the new partition and rewrites the znode with the partitions it knows, keeping the topic id."""
    with EmbeddedCluster(3) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.kill_broker(3)
        cluster.delete_topic("t")  # halted while 3 is down
        known = cluster.store.get_topic_assignments(["t"]).values["t"]
        sent = len(cluster.sent_requests)

        grown = TopicAssignment({**known.partitions, 1: ReplicaAssignment((2, 1))}, known.topic_id)
        cluster.store.set_topic_assignment("t", grown)
        cluster.run_until(lambda: cluster.store.get_topic_assignments(["t"]).values["t"] == known,
                          what="the assignment restored")

        assert "Skipping adding partitions [1] for topic t since it is currently being deleted" in caplog.text
        assert [p.partition for p in cluster.describe("t")] == [0]
        assert cluster.store.get_partition_states([T1]).values == {}
        assert [r for r in cluster.sent_requests[sent:]
                if any(s.tp == T1 for s in getattr(r.request, "partition_states", ()))] == []
        cluster.start_broker(3)
        assert cluster.run_until_stable()
        assert cluster.store.get_all_topics() == set()


def test_deletion_disabled_refuses_the_request() -> None:
    with EmbeddedCluster(3, config={"delete.topic.enable": False}) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        results = cluster.wait(active(cluster).delete_topics(["t"]))

        assert {t: e.error.name for t, e in results.items() if e is not None} == {"t": "TOPIC_DELETION_DISABLED"}
        assert cluster.store.get_all_topics() == {"t"} and cluster.store.get_topic_deletions() == []
