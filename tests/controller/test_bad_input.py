"""Bad input: wrong admin requests, stale broker epochs, calls to an inactive controller, and corrupt
stored data. Each is answered with Kafka's error name (per partition where Kafka answers per
partition), changes nothing, and never escapes the event loop; corrupt data for one partition or
topic is logged and skipped while the rest of the cluster keeps being served.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from kctl import admin
from kctl.cluster import EmbeddedCluster
from kctl.errors import KctlError
from kctl.model import LeaderAndIsr, LeaderRecoveryState, TopicPartition
from kctl.stores import paths

from tests.support.controller import TP, active, error_names, escaped, leaders, partition, stored_state, unchanged

T1 = TopicPartition("t", 1)
U0 = TopicPartition("u", 0)
UNKNOWN = TopicPartition("nope", 0)
NEGATIVE = TopicPartition("t", -1)


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    """Data brokers 1–3 (t on [1,2,3]/[2,3,1], u on [3,1]), controller candidates 4 and 5, broker 6 dead."""
    with EmbeddedCluster(6, controllers=[4, 5], config={"auto.leader.rebalance.enable": False}) as c:
        c.create_topic("t", assignment={0: [1, 2, 3], 1: [2, 3, 1]})
        c.create_topic("u", assignment={0: [3, 1]})
        c.kill_broker(6)
        assert c.run_until_stable()
        yield c


def failure(call: object) -> str:
    assert isinstance(call, KctlError), call
    return call.error.name


# --- Admin requests ------------------------------------------------------------------------------


def test_invalid_reassignments_are_refused_per_partition(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    requests = {
        UNKNOWN: [1, 2],
        TopicPartition("t", 9): [1, 2, 3],
        TP: [],
        T1: [1, 1, 2],
        U0: [-1, 3],
        NEGATIVE: [1, 2],
    }
    with unchanged(cluster):
        assert error_names(cluster.reassign(requests, wait=False)) == {
            UNKNOWN: "UNKNOWN_TOPIC_OR_PARTITION",
            TopicPartition("t", 9): "UNKNOWN_TOPIC_OR_PARTITION",
            NEGATIVE: "UNKNOWN_TOPIC_OR_PARTITION",
            TP: "INVALID_REPLICA_ASSIGNMENT",
            T1: "INVALID_REPLICA_ASSIGNMENT",
            U0: "INVALID_REPLICA_ASSIGNMENT",
        }
        assert error_names(cluster.reassign({TP: [1, 2, 99], T1: [2, 3, 6]}, wait=False)) == {
            TP: "INVALID_REPLICA_ASSIGNMENT",  # no such broker
            T1: "INVALID_REPLICA_ASSIGNMENT",  # broker 6 is dead
        }
        assert error_names(cluster.cancel_reassignment([TP, UNKNOWN, NEGATIVE], wait=False)) == {
            TP: "NO_REASSIGNMENT_IN_PROGRESS",
            UNKNOWN: "NO_REASSIGNMENT_IN_PROGRESS",
            NEGATIVE: "NO_REASSIGNMENT_IN_PROGRESS",
        }
    assert escaped(logs) == []


def test_a_request_mixing_good_and_bad_partitions_carries_out_the_good_ones(cluster: EmbeddedCluster) -> None:
    results = cluster.reassign({TP: [3, 2, 1], T1: [2, 99]})

    assert error_names(results) == {TP: "NONE", T1: "INVALID_REPLICA_ASSIGNMENT"}
    assert partition(cluster).replicas == (3, 2, 1)
    assert partition(cluster, T1).replicas == (2, 3, 1)


def test_elections_that_cannot_or_need_not_happen_are_refused(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    with unchanged(cluster):
        requested = [TP, UNKNOWN, TopicPartition("t", 5), NEGATIVE]
        assert error_names(cluster.elect_leaders(requested, "preferred", wait=False)) == {
            TP: "ELECTION_NOT_NEEDED",
            UNKNOWN: "UNKNOWN_TOPIC_OR_PARTITION",
            TopicPartition("t", 5): "UNKNOWN_TOPIC_OR_PARTITION",
            NEGATIVE: "UNKNOWN_TOPIC_OR_PARTITION",
        }
        assert error_names(cluster.elect_leaders([TP, UNKNOWN, NEGATIVE], "unclean", wait=False)) == {
            TP: "ELECTION_NOT_NEEDED",  # its leader is alive
            UNKNOWN: "UNKNOWN_TOPIC_OR_PARTITION",
            NEGATIVE: "UNKNOWN_TOPIC_OR_PARTITION",
        }
    assert cluster.metrics()["UncleanLeaderElections"] == 0
    assert escaped(logs) == []


def test_elections_for_a_topic_being_deleted_are_refused(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    cluster.create_topic("doomed", assignment={0: [1, 2]})
    cluster.kill_broker(2)
    cluster.delete_topic("doomed")  # halted while broker 2 is down
    doomed = TopicPartition("doomed", 0)

    with unchanged(cluster):
        assert error_names(cluster.elect_leaders([doomed], "preferred", wait=False)) == {doomed: "INVALID_TOPIC_EXCEPTION"}
        assert error_names(cluster.reassign({doomed: [1, 3]}, wait=False)) == {doomed: "UNKNOWN_TOPIC_OR_PARTITION"}
    assert escaped(logs) == []


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("t", {"partitions": 1, "replication_factor": 1}, "TOPIC_ALREADY_EXISTS"),
        ("bad name!", {"partitions": 1, "replication_factor": 1}, "INVALID_TOPIC_EXCEPTION"),
        ("..", {"partitions": 1, "replication_factor": 1}, "INVALID_TOPIC_EXCEPTION"),
        ("t_x", {"partitions": 1, "replication_factor": 1}, "INVALID_TOPIC_EXCEPTION"),  # collides with t.x
        ("v", {"partitions": 1, "replication_factor": 6}, "INVALID_REPLICATION_FACTOR"),  # 5 live brokers
        ("v", {"partitions": 0, "replication_factor": 1}, "INVALID_PARTITIONS"),
        ("v", {"assignment": {0: [1, 1]}}, "INVALID_REPLICA_ASSIGNMENT"),
        ("v", {"assignment": {0: [1], 2: [2]}}, "INVALID_REPLICA_ASSIGNMENT"),
        ("v", {"assignment": {0: [1, 2], 1: [3]}}, "INVALID_REPLICA_ASSIGNMENT"),
        ("v", {"assignment": {0: [-1]}}, "INVALID_REPLICA_ASSIGNMENT"),
        ("v", {"assignment": {0: [1, 99]}}, "INVALID_REPLICA_ASSIGNMENT"),  # no such broker
        ("v", {"assignment": {0: [1, 6]}}, "INVALID_REPLICA_ASSIGNMENT"),  # broker 6 is dead
        ("v", {"config": {"unclean.leader.election.enable": "maybe"}, "partitions": 1, "replication_factor": 1},
         "INVALID_CONFIG"),
    ],
)
def test_invalid_topic_creations_are_refused(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture, name: str, arguments: dict[str, object],
    error: str,
) -> None:
    cluster.create_topic("t.x", partitions=1, replication_factor=1)
    assert_creation_refused(cluster, logs, name, arguments, error)


def test_creating_a_topic_on_brokers_with_mixed_rack_information_is_refused(logs: pytest.LogCaptureFixture) -> None:
    """Kafka's assignReplicasToBrokers throws AdminOperationException ("Not all brokers have rack
    information"), which CreateTopics answers as UNKNOWN_SERVER_ERROR (reference §9.1)."""
    with EmbeddedCluster(3, racks={1: "a", 2: "b"}) as mixed:
        assert_creation_refused(mixed, logs, "v", {"partitions": 1, "replication_factor": 2}, "UNKNOWN_SERVER_ERROR")


def assert_creation_refused(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture, name: str, arguments: dict[str, object], error: str
) -> None:
    """Creating the topic fails with Kafka's ``error``; nothing changes, no config is written, and
    nothing escapes the event loop."""
    with unchanged(cluster), pytest.raises(KctlError) as refused:
        cluster.create_topic(name, **arguments)
    assert refused.value.error.name == error
    assert cluster.store.get_topic_configs([name]).values == {name: {}}  # no config written either
    assert escaped(logs) == []


@pytest.mark.parametrize(
    ("topic", "total", "assignment", "error"),
    [
        ("nope", 2, None, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("t", 2, None, "INVALID_PARTITIONS"),  # not more than now
        ("t", 1, None, "INVALID_PARTITIONS"),
        ("t", 3, {2: [1, 2]}, "INVALID_REPLICA_ASSIGNMENT"),  # RF 2, the topic has 3
        ("t", 3, {2: [1, 2, 2]}, "INVALID_REPLICA_ASSIGNMENT"),
        ("t", 3, {2: [1, 2, 99]}, "BROKER_NOT_AVAILABLE"),
    ],
)
def test_invalid_partition_additions_are_refused(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture, topic: str, total: int,
    assignment: dict[int, list[int]] | None, error: str,
) -> None:
    with unchanged(cluster), pytest.raises(KctlError) as refused:
        cluster.create_partitions(topic, total, assignment)
    assert refused.value.error.name == error
    assert escaped(logs) == []


def test_deleting_an_unknown_topic_or_one_already_queued_is_refused(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    with unchanged(cluster), pytest.raises(KctlError) as refused:
        cluster.delete_topic("nope")
    assert refused.value.error.name == "UNKNOWN_TOPIC_OR_PARTITION"

    cluster.create_topic("doomed", assignment={0: [1, 2]})
    cluster.kill_broker(2)
    cluster.delete_topic("doomed")  # halted while broker 2 is down
    with unchanged(cluster), pytest.raises(KctlError) as refused:
        cluster.delete_topic("doomed")
    assert refused.value.error.name == "INVALID_TOPIC_EXCEPTION"  # Kafka's TopicAlreadyMarkedForDeletion
    assert escaped(logs) == []


def test_admin_path_requests_for_unknown_partitions_are_dropped(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    described = {t: cluster.describe(t) for t in ("t", "u")}
    admin.request_reassignment(cluster.store, {UNKNOWN: [1, 2]})
    cluster.run_until(lambda: cluster.store.get_partition_reassignments() is None, what="the request dropped")
    admin.request_preferred_replica_election(cluster.store, [UNKNOWN, TP])
    cluster.run_until(lambda: cluster.store.get_preferred_replica_election() is None, what="the request dropped")

    assert cluster.run_until_stable()
    assert {t: cluster.describe(t) for t in ("t", "u")} == described
    # The admin tool itself refuses malformed targets before writing anything.
    with unchanged(cluster):
        for target in ([], [1, 1], [-2]):
            with pytest.raises(KctlError) as refused:
                admin.request_reassignment(cluster.store, {TP: target})
            assert refused.value.error.name == "INVALID_REPLICA_ASSIGNMENT"
    assert escaped(logs) == []


# --- Broker requests with stale epochs -----------------------------------------------------------


def test_controlled_shutdown_with_a_stale_or_unknown_broker_epoch_is_refused(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    old_epoch = cluster.brokers[3].broker_epoch
    cluster.kill_broker(3)
    cluster.start_broker(3)
    assert cluster.run_until_stable()
    controller = active(cluster)

    with unchanged(cluster):
        stale = controller.controlled_shutdown(3, old_epoch)
        unknown = controller.controlled_shutdown(99, 1)
        cluster.run_until(lambda: stale.done() and unknown.done(), what="the answers")
        assert failure(stale.exception()) == "STALE_BROKER_EPOCH"
        assert failure(unknown.exception()) == "BROKER_NOT_AVAILABLE"
    assert controller.context.shutting_down_broker_ids == set()
    assert escaped(logs) == []


def test_alter_partition_with_stale_epochs_is_refused(cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture) -> None:
    controller = active(cluster)
    current = stored_state(cluster)
    epoch = cluster.brokers[1].broker_epoch
    shrink = LeaderAndIsr(1, (1, 2), current.leader_epoch, current.partition_epoch)

    with unchanged(cluster):
        stale_broker = controller.alter_partition(1, epoch - 1, {TP: shrink})
        unknown_broker = controller.alter_partition(99, epoch, {TP: shrink})
        per_partition = controller.alter_partition(1, epoch, {
            UNKNOWN: LeaderAndIsr(1, (1,), 0, 0),
            TP: LeaderAndIsr(1, (1, 2), current.leader_epoch - 1, current.partition_epoch),
            TopicPartition("t", 1): LeaderAndIsr(2, (2, 3), 0, 7),  # a partition epoch the controller never wrote
        })
        cluster.run_until(lambda: all(f.done() for f in (stale_broker, unknown_broker, per_partition)),
                          what="the answers")
        assert failure(stale_broker.exception()) == "STALE_BROKER_EPOCH"
        assert failure(unknown_broker.exception()) == "STALE_BROKER_EPOCH"
        assert error_names(per_partition.result()) == {
            UNKNOWN: "UNKNOWN_TOPIC_OR_PARTITION",
            TP: "FENCED_LEADER_EPOCH",
            TopicPartition("t", 1): "NOT_CONTROLLER",
        }
    # The same request with the current epochs is applied.
    applied = cluster.wait(controller.alter_partition(1, epoch, {TP: shrink}))
    assert applied[TP].isr == (1, 2) == stored_state(cluster).isr
    assert escaped(logs) == []


def test_alter_partition_checks_run_in_kafkas_order(logs: pytest.LogCaptureFixture) -> None:
    # Kafka 3.9: an epoch newer than the controller's -> NOT_CONTROLLER (KAFKA-14154); an older leader
    # epoch -> FENCED_LEADER_EPOCH; the current state at any older partition epoch is answered as it
    # is (KAFKA-14144); an older partition epoch -> INVALID_UPDATE_VERSION, before the recovery-state
    # and eligibility checks; only then INVALID_REQUEST and INELIGIBLE_REPLICA (broker 6 is dead).
    config = {"inter.broker.protocol.version": "3.9-IV0", "auto.leader.rebalance.enable": False}
    with EmbeddedCluster(6, controllers=[4, 5], config=config) as cluster:
        cluster.create_topic("t", assignment={0: [1, 2, 3]})
        cluster.kill_broker(6)
        cluster.kill_broker(3)  # t-0: ISR [1, 2] (the controller) and back to [1, 2, 3] (AlterPartition)
        cluster.start_broker(3)
        assert cluster.run_until_stable()
        answers = _alter_partition_answers(cluster)
    assert answers == {
        "newer partition epoch": "NOT_CONTROLLER",
        "newer leader epoch": "NOT_CONTROLLER",
        "newer partition epoch, dead broker": "NOT_CONTROLLER",
        "older leader epoch": "FENCED_LEADER_EPOCH",
        "current state, older partition epoch": "NONE",
        "older partition epoch": "INVALID_UPDATE_VERSION",
        "older partition epoch, dead broker": "INVALID_UPDATE_VERSION",
        "older partition epoch, recovering": "INVALID_UPDATE_VERSION",
        "recovering": "INVALID_REQUEST",
        "dead broker": "INELIGIBLE_REPLICA",
    }
    assert escaped(logs) == []


def _alter_partition_answers(cluster: EmbeddedCluster) -> dict[str, str]:
    """The answers to leader 1's proposals for t-0 (each changing nothing), by what is wrong with them."""
    controller = active(cluster)
    epoch = cluster.brokers[1].broker_epoch
    current = stored_state(cluster)
    assert set(current.isr) == {1, 2, 3} and current.leader_epoch > 0
    stale = current.partition_epoch - 1
    recovering = LeaderRecoveryState.RECOVERING

    def answer(proposed: LeaderAndIsr) -> str:
        with unchanged(cluster):
            result = cluster.wait(controller.alter_partition(1, epoch, {TP: proposed}))[TP]
        return "NONE" if result == current else failure(result)

    return {
        "newer partition epoch": answer(LeaderAndIsr(1, (1, 2, 3), current.leader_epoch, current.partition_epoch + 1)),
        "newer leader epoch": answer(LeaderAndIsr(1, (1, 2, 3), current.leader_epoch + 1, current.partition_epoch)),
        "newer partition epoch, dead broker": answer(LeaderAndIsr(1, (1, 6), current.leader_epoch, current.partition_epoch + 1)),
        "older leader epoch": answer(LeaderAndIsr(1, (1, 2, 3), current.leader_epoch - 1, current.partition_epoch)),
        "current state, older partition epoch": answer(LeaderAndIsr(1, current.isr, current.leader_epoch, stale)),
        "older partition epoch": answer(LeaderAndIsr(1, (1, 2), current.leader_epoch, stale)),
        "older partition epoch, dead broker": answer(LeaderAndIsr(1, (1, 6), current.leader_epoch, stale)),
        "older partition epoch, recovering": answer(LeaderAndIsr(1, (1, 2), current.leader_epoch, stale, recovering)),
        "recovering": answer(LeaderAndIsr(1, (1, 2), current.leader_epoch, current.partition_epoch, recovering)),
        "dead broker": answer(LeaderAndIsr(1, (1, 6), current.leader_epoch, current.partition_epoch)),
    }


def test_calls_to_a_controller_that_is_not_active_are_refused(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    inactive = next(c for c in cluster.controllers.values() if not c.is_active)
    epoch = cluster.brokers[1].broker_epoch
    with unchanged(cluster):
        calls = {
            "create_topics": inactive.create_topics([{"name": "v", "partitions": 1, "replication_factor": 1}]),
            "create_partitions": inactive.create_partitions({"t": 3}),
            "delete_topics": inactive.delete_topics(["t"]),
            "alter_partition_reassignments": inactive.alter_partition_reassignments({TP: [3, 2, 1]}),
            "list_partition_reassignments": inactive.list_partition_reassignments(),
            "alter_partition": inactive.alter_partition(1, epoch, {TP: LeaderAndIsr(1, (1,), 0, 0)}),
            "controlled_shutdown": inactive.controlled_shutdown(1, epoch),
        }
        elections = inactive.elect_leaders([TP, T1], "preferred")
        cluster.run_until(lambda: elections.done() and all(f.done() for f in calls.values()), what="the answers")

        assert {name: failure(f.exception()) for name, f in calls.items()} == {
            **dict.fromkeys(calls, "NOT_CONTROLLER"),
            "controlled_shutdown": "STALE_CONTROLLER_EPOCH",  # Kafka's ControllerMovedException
        }
        assert error_names(elections.result()) == {TP: "NOT_CONTROLLER", T1: "NOT_CONTROLLER"}
    assert escaped(logs) == []


# --- Corrupt stored data -------------------------------------------------------------------------


def test_a_corrupt_partition_state_is_skipped_and_the_rest_keeps_being_served(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    cluster.store.tree.set_raw(paths.partition_state(TP), b"\x00garbage")

    # A broker failure still moves the other partitions' leaders and shrinks their ISRs.
    cluster.kill_broker(3)
    cluster.run_until(lambda: leaders(cluster, "u") == {0: 1}, what="u-0 to move")
    cluster.run_until(cluster.is_quiet, what="the cluster to be quiet")
    assert (partition(cluster, U0).isr, partition(cluster, T1).isr) == ((1,), (2, 1))
    assert any(paths.partition_state(TP) in r.getMessage() for r in logs.records if r.levelno >= logging.ERROR)

    # A new controller loads everything else and keeps serving requests.
    cluster.kill_controller()
    assert any(f"Skipping the stored state of {TP}" in r.getMessage() for r in logs.records)
    assert (leaders(cluster, "u"), partition(cluster, T1).isr) == ({0: 1}, (2, 1))
    cluster.start_broker(3)
    cluster.run_until(lambda: set(partition(cluster, U0).isr) == {1, 3}, what="3 back in the ISR of u-0")
    assert error_names(cluster.reassign({U0: [2, 1]}, wait=False)) == {U0: "NONE"}
    cluster.run_until(lambda: partition(cluster, U0).replicas == (2, 1), what="u-0 reassigned")
    assert escaped(logs) == []
    assert [v for v in cluster.check_invariants() if str(TP) not in v] == []


def test_a_corrupt_topic_is_skipped_by_a_new_controller_which_serves_the_others(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    cluster.store.tree.set_raw(paths.topic("t"), {"version": 3, "partitions": "garbage"})
    cluster.kill_controller()

    assert active(cluster).context.all_topics == {"u"}
    assert any("Skipping topic t" in r.getMessage() for r in logs.records)
    with pytest.raises(KctlError) as unknown:
        cluster.describe("t")
    assert unknown.value.error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    # A broker failure still moves the leaders of the topics it could read.
    cluster.kill_broker(3)
    cluster.run_until(lambda: leaders(cluster, "u") == {0: 1}, what="u-0 to move")
    assert partition(cluster, U0).isr == (1,)
    assert escaped(logs) == []


def test_corrupt_admin_requests_are_removed_and_later_ones_still_work(
    cluster: EmbeddedCluster, logs: pytest.LogCaptureFixture
) -> None:
    described = {t: cluster.describe(t) for t in ("t", "u")}
    cluster.store.tree.set_raw(paths.REASSIGN_PARTITIONS, "garbage")
    cluster.store.tree.set_raw(paths.PREFERRED_REPLICA_ELECTION, ["garbage"])
    cluster.run_until(cluster.is_quiet, what="the requests handled")

    assert cluster.store.get_partition_reassignments() is None  # deleted (reading garbage would raise)
    assert cluster.store.get_preferred_replica_election() is None
    assert {t: cluster.describe(t) for t in ("t", "u")} == described
    assert any(paths.REASSIGN_PARTITIONS in r.getMessage() for r in logs.records if r.levelno >= logging.ERROR)

    admin.request_reassignment(cluster.store, {U0: [1, 3]})
    assert cluster.run_until_stable()
    assert partition(cluster, U0).replicas == (1, 3)
    assert escaped(logs) == []
