"""The contract every :class:`~kctl.stores.base.StateStore` must honour, as a test class to subclass.

kctl runs it against its own stores (``memory``; ``zookeeper`` on real servers), and a store plugin
runs it against its own: subclass :class:`StoreContract` in a test module and provide four fixtures
(docs/plugins/writing-a-store.md has a whole example)::

    from kctl.testing.store_contract import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store_factory(self): ...

- ``store_factory``: a callable returning a new session (a fresh ``StateStore``); every call in one
  test connects to the same backing store, which starts empty (only Kafka's persistent paths),
  and the fixture cleans the sessions up at teardown where the backing store needs it;
- ``corrupt_node``: a callable ``(path)`` storing data at ``path`` that no reader can decode (the
  paths are Kafka's znode paths, :mod:`kctl.stores.paths`; a store that keeps no znode tree puts
  the garbage where it keeps that item);
- ``expire_session``: a callable ``(store)`` that makes the server expire the store's session;
- ``reconnect_session``: a callable ``(store)`` that re-establishes an expired store.

Watch events may arrive asynchronously (ZooKeeper), so tests wait for the events they expect and
prove an event *absent* by waiting for a later sentinel event of the same session first. The
module's small helpers (:class:`Recorder`, :func:`broker`, :func:`state`, :data:`ASSIGNMENT` …) are
there for a store's own further tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kctl.errors import (
    ControllerMovedError,
    CorruptDataError,
    InvalidTopicError,
    NodeExistsError,
    NoNodeError,
    StoreUnavailableError,
    TopicAlreadyMarkedForDeletionError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kctl.model import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kctl.stores.base import (
    FEATURE_STATUS_DISABLED,
    FEATURE_STATUS_ENABLED,
    MATCH_ANY_VERSION,
    ChangeType,
    FinalizedFeatures,
    StateStore,
    TopicAssignment,
    WatchEvent,
    WatchKind,
)

Factory = Callable[[], StateStore]

BIG = 99_999_999_999
"""An id beyond Kafka's Int (issue 11: such a value once poisoned the controller for good)."""

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)
ASSIGNMENT = {
    0: ReplicaAssignment((1, 2, 3)),
    1: ReplicaAssignment((2, 3, 1)),
    2: ReplicaAssignment((3, 1, 2)),
}


def broker(broker_id: int, host: str = "localhost") -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint(host, 9092 + broker_id),), rack=f"rack-{broker_id % 2}")


def state(leader: int, isr: tuple[int, ...], leader_epoch: int = 0) -> LeaderIsrAndControllerEpoch:
    """A partition state as written by the controller of epoch 1."""
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, isr, leader_epoch), 1)


class Recorder:
    """A watch listener that records events and lets a test wait for one."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self._cond = threading.Condition()

    def __call__(self, event: WatchEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait_for(self, event: WatchEvent, timeout: float = 10.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: event in self.events, timeout):
                raise AssertionError(f"{event} not delivered; got {self.events}")

    def take(self, event: WatchEvent) -> None:
        """Wait for ``event``, then forget every occurrence of it."""
        self.wait_for(event)
        with self._cond:
            self.events[:] = [e for e in self.events if e != event]

    def clear(self) -> None:
        with self._cond:
            self.events.clear()


def dump(store: StateStore) -> dict[str, Any]:
    """Everything readable through the protocol, to prove that a failed write changed nothing."""
    topics = sorted(store.get_all_topics())
    partitions = [TopicPartition(t, p) for t in topics for p in store.get_topic_partition_ids(t)]
    isr_names = store.get_isr_change_notifications()
    log_dir_names = store.get_log_dir_event_notifications()
    assignments = store.get_topic_assignments(topics).values
    return {
        "controller": store.get_controller_id(),
        "epoch": store.get_controller_epoch(),
        "brokers": store.get_all_brokers(),
        "topics": topics,
        "assignments": {t: (dict(a.partitions), a.topic_id) for t, a in assignments.items()},
        "configs": store.get_topic_configs(topics).values,
        "states": store.get_partition_states(partitions).values,
        "reassignments": store.get_partition_reassignments(),
        "preferred": store.get_preferred_replica_election(),
        "deletions": store.get_topic_deletions(),
        "isr_changes": (isr_names, store.get_isr_change_notification_partitions(isr_names)),
        "log_dir_events": (log_dir_names, store.get_log_dir_event_brokers(log_dir_names)),
    }


@dataclass(frozen=True)
class WatchCase:
    """A watch registration, the change ``action`` causes for it, and what the action needs first."""

    kind: WatchKind
    key: object
    change: ChangeType
    setup: Callable[[StateStore], object]
    action: Callable[[StateStore], object]


def _nothing(store: StateStore) -> None:
    return None


def _with_topic(store: StateStore) -> None:
    store.create_topic("t", ASSIGNMENT)


def _with_states(store: StateStore) -> None:
    _with_topic(store)
    store.create_partition_states({T0: state(1, (1, 2, 3))}, MATCH_ANY_VERSION)


def _with_reassignment(store: StateStore) -> None:
    store.create_partition_reassignments({T0: [4, 5, 6]})


def _with_preferred(store: StateStore) -> None:
    store.create_preferred_replica_election([T0])


WATCH_CASES = {
    "controller_created": WatchCase(
        WatchKind.CONTROLLER, None, ChangeType.CREATED, _nothing,
        lambda s: s.register_controller_and_increment_epoch(1),
    ),
    "controller_deleted": WatchCase(
        WatchKind.CONTROLLER, None, ChangeType.DELETED,
        lambda s: s.register_controller_and_increment_epoch(1),
        lambda s: s.delete_controller(MATCH_ANY_VERSION),
    ),
    "broker_ids": WatchCase(
        WatchKind.BROKER_IDS, None, ChangeType.CHILDREN_CHANGED, _nothing,
        lambda s: s.register_broker(broker(1)),
    ),
    "broker": WatchCase(
        WatchKind.BROKER, 1, ChangeType.DATA_CHANGED,
        lambda s: s.register_broker(broker(1)), lambda s: s.update_broker_info(broker(1, "moved")),
    ),
    "topics": WatchCase(WatchKind.TOPICS, None, ChangeType.CHILDREN_CHANGED, _nothing, _with_topic),
    "topic": WatchCase(
        WatchKind.TOPIC, "t", ChangeType.DATA_CHANGED, _with_topic,
        lambda s: s.set_topic_assignment("t", TopicAssignment({0: ReplicaAssignment((1,))})),
    ),
    "delete_topics": WatchCase(
        WatchKind.DELETE_TOPICS, None, ChangeType.CHILDREN_CHANGED, _with_topic,
        lambda s: s.create_topic_deletion("t"),
    ),
    "reassign_created": WatchCase(
        WatchKind.REASSIGN_PARTITIONS, None, ChangeType.CREATED, _nothing, _with_reassignment,
    ),
    "reassign_changed": WatchCase(
        WatchKind.REASSIGN_PARTITIONS, None, ChangeType.DATA_CHANGED, _with_reassignment,
        lambda s: s.set_partition_reassignments({T1: [1]}, MATCH_ANY_VERSION),
    ),
    "reassign_deleted": WatchCase(
        WatchKind.REASSIGN_PARTITIONS, None, ChangeType.DELETED, _with_reassignment,
        lambda s: s.delete_partition_reassignments(MATCH_ANY_VERSION),
    ),
    "preferred_created": WatchCase(
        WatchKind.PREFERRED_REPLICA_ELECTION, None, ChangeType.CREATED, _nothing, _with_preferred,
    ),
    "preferred_deleted": WatchCase(
        WatchKind.PREFERRED_REPLICA_ELECTION, None, ChangeType.DELETED, _with_preferred,
        lambda s: s.delete_preferred_replica_election(MATCH_ANY_VERSION),
    ),
    "isr_change_notification": WatchCase(
        WatchKind.ISR_CHANGE_NOTIFICATION, None, ChangeType.CHILDREN_CHANGED, _nothing,
        lambda s: s.create_isr_change_notification([T0]),
    ),
    "log_dir_event_notification": WatchCase(
        WatchKind.LOG_DIR_EVENT_NOTIFICATION, None, ChangeType.CHILDREN_CHANGED, _nothing,
        lambda s: s.create_log_dir_event_notification(2),
    ),
    "partition_state": WatchCase(
        WatchKind.PARTITION_STATE, T0, ChangeType.DATA_CHANGED, _with_states,
        lambda s: s.update_partition_states({T0: LeaderAndIsr(2, (2, 3), 1)}, 1, MATCH_ANY_VERSION),
    ),
    "topic_config": WatchCase(
        WatchKind.TOPIC_CONFIG, "t", ChangeType.DATA_CHANGED, _with_topic,
        lambda s: s.set_topic_config("t", {"retention.ms": "1000"}),
    ),
}

FENCED_WRITES: dict[str, Callable[[StateStore, int], object]] = {
    "set_topic_assignment": lambda s, v: s.set_topic_assignment(
        "t", TopicAssignment({0: ReplicaAssignment((9,))}), v
    ),
    "delete_topic": lambda s, v: s.delete_topic("t", v),
    "create_partition_states": lambda s, v: s.create_partition_states({T2: state(3, (3,))}, v),
    "update_partition_states": lambda s, v: s.update_partition_states({T0: LeaderAndIsr(2, (2,), 1)}, 1, v),
    "set_partition_reassignments": lambda s, v: s.set_partition_reassignments({T1: [9]}, v),
    "delete_partition_reassignments": lambda s, v: s.delete_partition_reassignments(v),
    "delete_preferred_replica_election": lambda s, v: s.delete_preferred_replica_election(v),
    "delete_topic_deletions": lambda s, v: s.delete_topic_deletions(["t"], v),
    "delete_isr_change_notifications": lambda s, v: s.delete_isr_change_notifications(
        s.get_isr_change_notifications(), v
    ),
    "delete_log_dir_event_notifications": lambda s, v: s.delete_log_dir_event_notifications(
        s.get_log_dir_event_notifications(), v
    ),
    "delete_controller": lambda s, v: s.delete_controller(v),
}
"""Every fenced write, each against the state that test_a_deposed_controller_cannot_write sets up."""

WATCHES = {(case.kind, case.key) for case in WATCH_CASES.values()}
SENTINEL = WatchEvent(WatchKind.TOPIC_CONFIG, ChangeType.DATA_CHANGED, "sentinel")


class StoreContract:
    """Behaviour shared by every state store; see the module docstring for the fixtures it needs."""

    @pytest.fixture
    def store(self, store_factory: Factory) -> StateStore:
        return store_factory()

    @pytest.fixture
    def other(self, store_factory: Factory) -> StateStore:
        return store_factory()

    @staticmethod
    def flush(store: StateStore, recorder: Recorder) -> None:
        """Wait until every event caused so far has reached ``store``'s listeners: events of one
        session arrive in order, so they all precede a sentinel event caused afterwards."""
        store.set_topic_config("sentinel", {})
        store.watch(WatchKind.TOPIC_CONFIG, "sentinel")
        store.set_topic_config("sentinel", {"flushed": "yes"})
        recorder.take(SENTINEL)
        store.unwatch(WatchKind.TOPIC_CONFIG, "sentinel")

    # --- Controller election and fencing -------------------------------------------------------

    def test_no_controller_before_the_first_election(self, store: StateStore) -> None:
        assert store.get_controller_id() is None
        assert store.get_controller_epoch() is None

    def test_first_controller_gets_epoch_one_at_version_one(
        self, store: StateStore, other: StateStore
    ) -> None:
        assert store.register_controller_and_increment_epoch(1) == (1, 1)
        assert other.get_controller_id() == 1
        assert other.get_controller_epoch() == (1, 1)

    def test_second_candidate_loses_while_the_controller_lives(
        self, store: StateStore, other: StateStore
    ) -> None:
        store.register_controller_and_increment_epoch(1)
        with pytest.raises(ControllerMovedError):
            other.register_controller_and_increment_epoch(2)
        assert other.get_controller_id() == 1
        assert other.get_controller_epoch() == (1, 1)

    def test_re_registering_the_active_controller_is_a_controller_move(self, store: StateStore) -> None:
        # Kafka re-reads epoch 1 and expects 2 after the failed create: not a lost response.
        store.register_controller_and_increment_epoch(1)
        with pytest.raises(ControllerMovedError):
            store.register_controller_and_increment_epoch(1)
        assert store.get_controller_epoch() == (1, 1)

    def test_next_controller_increments_the_epoch(self, store: StateStore, other: StateStore) -> None:
        store.register_controller_and_increment_epoch(1)
        store.close()
        assert other.get_controller_id() is None
        assert other.register_controller_and_increment_epoch(2) == (2, 2)
        assert other.get_controller_id() == 2

    def test_concurrent_candidates_elect_exactly_one(self, store_factory: Factory) -> None:
        sessions = [store_factory() for _ in range(4)]
        barrier = threading.Barrier(len(sessions))
        outcomes: dict[int, object] = {}

        def run(broker_id: int, session: StateStore) -> None:
            barrier.wait()
            try:
                outcomes[broker_id] = session.register_controller_and_increment_epoch(broker_id)
            except ControllerMovedError as exc:
                outcomes[broker_id] = exc

        threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(sessions)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [i for i, outcome in outcomes.items() if outcome == (1, 1)]
        assert len(winners) == 1
        assert all(isinstance(outcomes[i], ControllerMovedError) for i in outcomes if i not in winners)
        assert sessions[0].get_controller_id() == winners[0]
        assert sessions[0].get_controller_epoch() == (1, 1)

    def test_delete_controller(self, store: StateStore, other: StateStore) -> None:
        _, version = store.register_controller_and_increment_epoch(1)
        store.delete_controller(version)
        assert other.get_controller_id() is None
        assert other.get_controller_epoch() == (1, 1)
        store.delete_controller(version)  # already gone: fine

    @pytest.mark.parametrize("write", FENCED_WRITES.values(), ids=FENCED_WRITES.keys())
    def test_a_deposed_controller_cannot_write(
        self, store_factory: Factory, write: Callable[[StateStore, int], object]
    ) -> None:
        old, new = store_factory(), store_factory()
        _, old_version = old.register_controller_and_increment_epoch(1)
        old.create_topic("t", ASSIGNMENT, config={"a": "1"})
        old.create_partition_states({T0: state(1, (1, 2, 3)), T1: state(2, (2, 3, 1))}, old_version)
        old.create_partition_reassignments({T0: [4, 5, 6]})
        old.create_preferred_replica_election([T1])
        old.create_topic_deletion("t")
        old.create_isr_change_notification([T0])
        old.create_log_dir_event_notification(3)
        new.delete_controller(MATCH_ANY_VERSION)  # the old controller's session lingers (a zombie)
        _, new_version = new.register_controller_and_increment_epoch(2)
        assert new_version != old_version
        before = dump(new)

        with pytest.raises(ControllerMovedError):
            write(old, old_version)

        assert dump(new) == before
        write(new, new_version)  # the same write lands for the current controller
        assert dump(new) != before

    # --- Brokers -------------------------------------------------------------------------------

    def test_broker_registration_and_epochs(self, store: StateStore, other: StateStore) -> None:
        epoch1 = store.register_broker(broker(1))
        epoch2 = other.register_broker(broker(2))
        assert 0 < epoch1 < epoch2
        assert store.get_all_brokers() == {1: (broker(1), epoch1), 2: (broker(2), epoch2)}
        assert list(store.get_all_brokers()) == [1, 2]

    def test_an_id_held_by_another_session_cannot_register(
        self, store: StateStore, other: StateStore
    ) -> None:
        epoch = store.register_broker(broker(1))
        with pytest.raises(NodeExistsError):
            other.register_broker(broker(1, "impostor"))
        assert other.get_all_brokers() == {1: (broker(1), epoch)}

    def test_re_registering_in_the_same_session_keeps_the_epoch(self, store: StateStore) -> None:
        epoch = store.register_broker(broker(1))
        assert store.register_broker(broker(1)) == epoch

    def test_update_broker_info_keeps_the_epoch(self, store: StateStore, other: StateStore) -> None:
        epoch = store.register_broker(broker(1))
        store.update_broker_info(broker(1, "moved"))
        assert other.get_all_brokers() == {1: (broker(1, "moved"), epoch)}
        with pytest.raises(NoNodeError):
            store.update_broker_info(broker(5))

    def test_deregistering_deletes_only_this_sessions_registration(self, store: StateStore, other: StateStore) -> None:
        store.register_broker(broker(1))
        epoch2 = other.register_broker(broker(2))
        store.deregister_broker(2)  # another session's: left as it is
        store.deregister_broker(5)  # none: nothing to do
        store.deregister_broker(1)
        assert other.get_all_brokers() == {2: (broker(2), epoch2)}
        assert store.register_broker(broker(1)) > epoch2  # the id is free again

    def test_closing_a_session_removes_its_registrations(self, store: StateStore, other: StateStore) -> None:
        store.register_broker(broker(1))
        store.register_controller_and_increment_epoch(1)
        other.register_broker(broker(2))
        store.close()
        assert list(other.get_all_brokers()) == [2]
        assert other.get_controller_id() is None
        with pytest.raises(StoreUnavailableError):
            store.get_all_topics()

    def test_undecodable_broker_registrations_are_skipped(
        self, store: StateStore, corrupt_node: Callable[[str], None], caplog: pytest.LogCaptureFixture
    ) -> None:
        epoch = store.register_broker(broker(1))
        corrupt_node("/brokers/ids/7")
        assert store.get_all_brokers() == {1: (broker(1), epoch)}
        assert "/brokers/ids/7" in caplog.text

    def test_cluster_id_is_created_once(self, store: StateStore, other: StateStore) -> None:
        cluster_id = store.get_or_create_cluster_id()
        assert isinstance(cluster_id, str) and len(cluster_id) == 22
        assert other.get_or_create_cluster_id() == cluster_id
        assert store.get_or_create_cluster_id() == cluster_id

    def test_a_corrupt_cluster_id_is_an_error_naming_it(self, store: StateStore,
                                                         corrupt_node: Callable[[str], None]) -> None:
        corrupt_node("/cluster/id")
        with pytest.raises(CorruptDataError, match="/cluster/id"):
            store.get_or_create_cluster_id()

    def test_finalized_features_are_created_then_replaced(self, store: StateStore, other: StateStore) -> None:
        assert store.get_finalized_features() is None
        store.set_finalized_features(FinalizedFeatures(2, FEATURE_STATUS_ENABLED, {}))
        assert other.get_finalized_features() == FinalizedFeatures(2, FEATURE_STATUS_ENABLED, {})
        other.set_finalized_features(FinalizedFeatures(1, FEATURE_STATUS_DISABLED, {"f": 3}))
        assert store.get_finalized_features() == FinalizedFeatures(1, FEATURE_STATUS_DISABLED, {"f": 3})

    # --- Topics --------------------------------------------------------------------------------

    def test_create_topic(self, store: StateStore, other: StateStore) -> None:
        config = {"min.insync.replicas": "2"}
        store.create_topic("t", ASSIGNMENT, topic_id="jp0oK1lQRSe1BV8vLzT0zg", config=config)
        store.create_topic("u", {0: ReplicaAssignment((1,))})
        assert other.get_all_topics() == {"t", "u"}
        found = other.get_topic_assignments(["t", "u"])
        assert not found.errors
        assert dict(found.values["t"].partitions) == ASSIGNMENT
        assert found.values["t"].topic_id == "jp0oK1lQRSe1BV8vLzT0zg"
        assert found.values["u"].topic_id is None
        assert other.get_topic_configs(["t", "u", "absent"]).values == {
            "t": {"min.insync.replicas": "2"},
            "u": {},
            "absent": {},
        }
        assert other.get_topic_partition_ids("t") == []  # no partition state yet

    def test_an_existing_topic_is_left_alone(self, store: StateStore) -> None:
        store.create_topic("t", ASSIGNMENT, config={"a": "1"})
        before = dump(store)
        with pytest.raises(TopicExistsError):
            store.create_topic("t", {0: ReplicaAssignment((7,))}, config={"a": "2"})
        assert dump(store) == before

    @pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 250, "spaced name"])
    def test_invalid_topic_names_are_refused(self, store: StateStore, name: str) -> None:
        before = dump(store)
        with pytest.raises(InvalidTopicError):
            store.create_topic(name, {0: ReplicaAssignment((1,))})
        assert dump(store) == before

    def test_topic_reads_report_each_key(
        self, store: StateStore, corrupt_node: Callable[[str], None]
    ) -> None:
        store.create_topic("good", ASSIGNMENT)
        store.create_topic("bad", ASSIGNMENT, config={"a": "1"})
        corrupt_node("/brokers/topics/bad")
        corrupt_node("/config/topics/bad")
        assignments = store.get_topic_assignments(["good", "bad", "absent"])
        assert dict(assignments.values["good"].partitions) == ASSIGNMENT
        assert set(assignments.values) == {"good"}
        assert isinstance(assignments.errors["bad"], CorruptDataError)
        assert "/brokers/topics/bad" in str(assignments.errors["bad"])
        assert isinstance(assignments.errors["absent"], NoNodeError)
        configs = store.get_topic_configs(["good", "bad"])
        assert configs.values == {"good": {}}
        assert isinstance(configs.errors["bad"], CorruptDataError)
        assert "/config/topics/bad" in str(configs.errors["bad"])

    def test_set_topic_assignment(self, store: StateStore, other: StateStore) -> None:
        store.create_topic("t", ASSIGNMENT, topic_id="id")
        _, version = store.register_controller_and_increment_epoch(1)
        moving = ReplicaAssignment((4, 1, 2, 3), adding_replicas=(4,), removing_replicas=(3,))
        store.set_topic_assignment("t", TopicAssignment({**ASSIGNMENT, 0: moving}, "id"), version)
        assigned = other.get_topic_assignments(["t"]).values["t"]
        assert assigned.partitions[0] == moving and assigned.partitions[1] == ASSIGNMENT[1]
        store.set_topic_assignment("t", TopicAssignment(ASSIGNMENT, "id"))  # unfenced (admin)
        assert dict(other.get_topic_assignments(["t"]).values["t"].partitions) == ASSIGNMENT
        with pytest.raises(NoNodeError):
            store.set_topic_assignment("absent", TopicAssignment(ASSIGNMENT), version)

    def test_topic_config_is_replaced(self, store: StateStore, other: StateStore) -> None:
        store.create_topic("t", ASSIGNMENT, config={"a": "1"})
        store.set_topic_config("t", {"b": "2"})
        assert other.get_topic_configs(["t"]).values == {"t": {"b": "2"}}

    def test_delete_topic_removes_everything_of_the_topic(self, store: StateStore, other: StateStore) -> None:
        _, version = store.register_controller_and_increment_epoch(1)
        store.create_topic("t", ASSIGNMENT, config={"a": "1"})
        store.create_topic("u", {0: ReplicaAssignment((1,))}, config={"b": "2"})
        store.create_partition_states({T0: state(1, (1,)), TopicPartition("u", 0): state(1, (1,))}, version)
        store.create_topic_deletion("t")
        store.delete_topic("t", version)
        assert other.get_all_topics() == {"u"}
        assert other.get_topic_partition_ids("t") == []
        assert isinstance(other.get_partition_states([T0]).errors[T0], NoNodeError)
        assert other.get_topic_configs(["t", "u"]).values == {"t": {}, "u": {"b": "2"}}
        assert other.get_topic_deletions() == []
        assert other.get_topic_partition_ids("u") == [0]
        store.delete_topic("t", version)  # already gone: fine

    # --- Partition states ----------------------------------------------------------------------

    def test_create_and_read_partition_states(self, store: StateStore, other: StateStore) -> None:
        _, version = store.register_controller_and_increment_epoch(1)
        store.create_topic("t", {p: ReplicaAssignment((1, 2)) for p in (0, 2, 10)})
        t10 = TopicPartition("t", 10)
        created = store.create_partition_states({T0: state(1, (1, 2)), t10: state(2, (2,))}, version)
        assert created == {T0: None, t10: None}
        assert other.get_topic_partition_ids("t") == [0, 10]
        again = store.create_partition_states({T0: state(2, (2,)), T2: state(1, (1,))}, version)
        assert isinstance(again[T0], NodeExistsError) and again[T2] is None
        found = other.get_partition_states([T0, T2, t10])
        assert found.values == {T0: state(1, (1, 2)), T2: state(1, (1,)), t10: state(2, (2,))}
        assert found.values[T0].leader_and_isr.partition_epoch == 0

    def test_partition_states_of_a_missing_topic_fail_per_partition(self, store: StateStore) -> None:
        store.create_topic("t", ASSIGNMENT)
        outcome = store.create_partition_states(
            {T0: state(1, (1,)), TopicPartition("absent", 0): state(1, (1,))}, MATCH_ANY_VERSION
        )
        assert outcome[T0] is None
        assert isinstance(outcome[TopicPartition("absent", 0)], NoNodeError)

    def test_partition_state_reads_report_each_key(
        self, store: StateStore, corrupt_node: Callable[[str], None]
    ) -> None:
        store.create_topic("t", ASSIGNMENT)
        store.create_partition_states({T0: state(1, (1,)), T1: state(2, (2,))}, MATCH_ANY_VERSION)
        corrupt_node("/brokers/topics/t/partitions/1/state")
        found = store.get_partition_states([T0, T1, T2])
        assert found.values == {T0: state(1, (1,))}
        assert isinstance(found.errors[T1], CorruptDataError)
        assert "/brokers/topics/t/partitions/1/state" in str(found.errors[T1])
        assert isinstance(found.errors[T2], NoNodeError)

    def test_conditional_partition_state_updates(self, store: StateStore, other: StateStore) -> None:
        _, version = store.register_controller_and_increment_epoch(1)
        store.create_topic("t", ASSIGNMENT)
        store.create_partition_states({T0: state(1, (1, 2, 3)), T1: state(2, (2, 3, 1))}, version)
        # meanwhile the leader of T1 shrinks its ISR itself (pre-AlterIsr)
        other.update_partition_states({T1: LeaderAndIsr(2, (2, 3), 0)}, 1, MATCH_ANY_VERSION)

        updates = {T0: LeaderAndIsr(2, (2, 3), 1), T1: LeaderAndIsr(3, (3,), 1), T2: LeaderAndIsr(1, (1,), 1)}
        result = store.update_partition_states(updates, 5, version)

        assert result.successful == {T0: LeaderAndIsr(2, (2, 3), 1, partition_epoch=1)}
        assert result.to_retry == [T1]
        assert list(result.failed) == [T2] and isinstance(result.failed[T2], NoNodeError)
        found = other.get_partition_states([T0, T1]).values
        assert found[T0] == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, (2, 3), 1, partition_epoch=1), 5)
        assert found[T1] == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, (2, 3), 0, partition_epoch=1), 1)
        following = store.update_partition_states({T0: result.successful[T0].new_leader(3)}, 5, version)
        assert following.successful[T0].partition_epoch == 2

    # --- Admin requests ------------------------------------------------------------------------

    def test_partition_reassignments(self, store: StateStore, other: StateStore) -> None:
        _, version = store.register_controller_and_increment_epoch(1)
        assert store.get_partition_reassignments() is None
        store.create_partition_reassignments({T0: [4, 5, 6], T1: (1,)})
        assert other.get_partition_reassignments() == {T0: [4, 5, 6], T1: [1]}
        with pytest.raises(NodeExistsError):
            other.create_partition_reassignments({T2: [1]})
        store.set_partition_reassignments({T1: [1]}, version)
        assert other.get_partition_reassignments() == {T1: [1]}
        store.delete_partition_reassignments(version)
        assert other.get_partition_reassignments() is None
        store.delete_partition_reassignments(version)  # already gone: fine
        store.set_partition_reassignments({T2: [2]}, version)  # absent: created
        assert other.get_partition_reassignments() == {T2: [2]}

    def test_preferred_replica_election(self, store: StateStore, other: StateStore) -> None:
        _, version = store.register_controller_and_increment_epoch(1)
        assert store.get_preferred_replica_election() is None
        store.create_preferred_replica_election([T0, T1, T0])
        assert other.get_preferred_replica_election() == {T0, T1}
        with pytest.raises(NodeExistsError):
            other.create_preferred_replica_election([T2])
        store.delete_preferred_replica_election(version)
        assert other.get_preferred_replica_election() is None
        store.delete_preferred_replica_election(version)  # already gone: fine

    def test_corrupt_admin_znodes_name_their_path(
        self, store: StateStore, corrupt_node: Callable[[str], None]
    ) -> None:
        corrupt_node("/admin/reassign_partitions")
        corrupt_node("/admin/preferred_replica_election")
        with pytest.raises(CorruptDataError, match="/admin/reassign_partitions"):
            store.get_partition_reassignments()
        with pytest.raises(CorruptDataError, match="/admin/preferred_replica_election"):
            store.get_preferred_replica_election()

    def test_topic_deletion_requests(self, store: StateStore, other: StateStore) -> None:
        _, version = store.register_controller_and_increment_epoch(1)
        with pytest.raises(UnknownTopicOrPartitionError):
            store.create_topic_deletion("t")
        store.create_topic("t", ASSIGNMENT)
        store.create_topic("u", ASSIGNMENT)
        store.create_topic_deletion("u")
        store.create_topic_deletion("t")
        with pytest.raises(TopicAlreadyMarkedForDeletionError):
            other.create_topic_deletion("t")
        assert other.get_topic_deletions() == ["t", "u"]
        store.delete_topic_deletions(["u", "absent"], version)
        assert other.get_topic_deletions() == ["t"]
        assert other.get_all_topics() == {"t", "u"}  # only the requests went

    # --- Notifications -------------------------------------------------------------------------

    def test_isr_change_notifications(self, store: StateStore, other: StateStore) -> None:
        _, version = store.register_controller_and_increment_epoch(1)
        names = [
            other.create_isr_change_notification([T0, T1]),
            other.create_isr_change_notification([T2]),
            other.create_isr_change_notification([T0]),
        ]
        assert all(n.startswith("isr_change_") and len(n) == len("isr_change_") + 10 for n in names)
        assert names == sorted(names) and len(set(names)) == 3
        assert store.get_isr_change_notifications() == names
        missing = "isr_change_9999999999"
        assert store.get_isr_change_notification_partitions([*names, missing]) == [T0, T1, T2, T0]
        store.delete_isr_change_notifications([*names[:2], missing], version)
        assert store.get_isr_change_notifications() == names[2:]
        later = other.create_isr_change_notification([T1])
        assert later > names[2]

    def test_log_dir_event_notifications(self, store: StateStore, other: StateStore) -> None:
        _, version = store.register_controller_and_increment_epoch(1)
        names = [other.create_log_dir_event_notification(b) for b in (3, 1, 3)]
        assert all(n.startswith("log_dir_event_") and n[-10:].isdigit() for n in names)
        assert store.get_log_dir_event_notifications() == names == sorted(names)
        assert store.get_log_dir_event_brokers(names) == [3, 1, 3]
        store.delete_log_dir_event_notifications(names[1:], version)
        assert store.get_log_dir_event_notifications() == names[:1]
        assert store.get_log_dir_event_brokers(names) == [3]

    def test_malformed_notifications_are_logged_and_skipped(
        self, store: StateStore, other: StateStore, corrupt_node: Callable[[str], None],
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """One bad notification never holds back the others (Kafka skips what it cannot parse)."""
        isr_changes = [other.create_isr_change_notification([T0]),
                       other.create_isr_change_notification([TopicPartition("t", BIG)]),
                       other.create_isr_change_notification([T1])]
        log_dir_events = [other.create_log_dir_event_notification(b) for b in (3, BIG, 1)]
        corrupt_node("/isr_change_notification/isr_change_0000000042")
        corrupt_node("/log_dir_event_notification/log_dir_event_0000000042")

        read = store.get_isr_change_notification_partitions([*isr_changes, "isr_change_0000000042"])
        assert read == [T0, T1]
        assert store.get_log_dir_event_brokers([*log_dir_events, "log_dir_event_0000000042"]) == [3, 1]
        for path in (f"/isr_change_notification/{isr_changes[1]}", "/isr_change_notification/isr_change_0000000042",
                     f"/log_dir_event_notification/{log_dir_events[1]}",
                     "/log_dir_event_notification/log_dir_event_0000000042"):
            assert f"Ignoring the undecodable {path}: " in caplog.text
        assert str(BIG) in caplog.text

    # --- Values outside Kafka's Int (ids, epochs): skipped or corrupt, never returned ------------

    def test_registrations_outside_kafkas_int_or_tcp_ports_are_skipped(
        self, store: StateStore, other: StateStore, corrupt_node: Callable[[str], None],
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        epoch = store.register_broker(broker(1))
        other.register_broker(BrokerInfo(BIG, (EndPoint("rogue", 9092),)))
        other.register_broker(BrokerInfo(2, (EndPoint("rogue", 70000),)))
        corrupt_node("/brokers/ids/²")  # str.isdigit() says yes, int() says no
        assert store.get_all_brokers() == {1: (broker(1), epoch)}
        for path in (f"/brokers/ids/{BIG}", "/brokers/ids/2", "/brokers/ids/²"):
            assert f"Ignoring undecodable broker registration at {path}: " in caplog.text

    def test_topics_with_ids_outside_kafkas_int_are_corrupt(self, store: StateStore) -> None:
        store.create_topic("good", ASSIGNMENT)
        store.create_topic("replica", {0: ReplicaAssignment((1, BIG))})
        store.create_topic("adding", {0: ReplicaAssignment((1, 2), adding_replicas=(2,), removing_replicas=(-BIG,))})
        store.create_topic("partition", {BIG: ReplicaAssignment((1,))})
        found = store.get_topic_assignments(["good", "replica", "adding", "partition"])
        assert set(found.values) == {"good"}
        for topic in ("replica", "adding", "partition"):
            error = found.errors[topic]
            assert isinstance(error, CorruptDataError) and f"/brokers/topics/{topic}" in str(error)
            assert str(BIG) in str(error)

    def test_partition_states_outside_kafkas_int_are_corrupt(self, store: StateStore) -> None:
        store.create_topic("t", {p: ReplicaAssignment((1,)) for p in range(5)})
        bad = {
            TopicPartition("t", 1): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1,), 2**63), 1),
            TopicPartition("t", 2): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1,), 0), 2**40),
            TopicPartition("t", 3): LeaderIsrAndControllerEpoch(LeaderAndIsr(BIG, (1,), 0), 1),
            TopicPartition("t", 4): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, BIG), 0), 1),
        }
        store.create_partition_states({T0: state(1, (1,)), **bad}, MATCH_ANY_VERSION)
        found = store.get_partition_states([T0, *bad])
        assert found.values == {T0: state(1, (1,))}
        for tp in bad:
            assert isinstance(found.errors[tp], CorruptDataError), tp
            assert f"/brokers/topics/t/partitions/{tp.partition}/state" in str(found.errors[tp])

    def test_admin_znodes_outside_kafkas_int_are_corrupt(self, store: StateStore) -> None:
        store.create_partition_reassignments({T0: [1, BIG]})
        with pytest.raises(CorruptDataError, match="/admin/reassign_partitions"):
            store.get_partition_reassignments()
        store.create_preferred_replica_election([TopicPartition("t", BIG)])
        with pytest.raises(CorruptDataError, match="/admin/preferred_replica_election"):
            store.get_preferred_replica_election()

    def test_partition_children_not_named_by_a_partition_id_are_skipped(
        self, store: StateStore, corrupt_node: Callable[[str], None], caplog: pytest.LogCaptureFixture
    ) -> None:
        store.create_topic("t", ASSIGNMENT)
        store.create_partition_states({T0: state(1, (1,)), T2: state(3, (3,))}, MATCH_ANY_VERSION)
        for name in (str(BIG), "²", "007"):
            corrupt_node(f"/brokers/topics/t/partitions/{name}")
        assert store.get_topic_partition_ids("t") == [0, 2]
        for name in (str(BIG), "²", "007"):
            assert f"Ignoring /brokers/topics/t/partitions/{name}: " in caplog.text

    # --- Watches -------------------------------------------------------------------------------

    @pytest.mark.parametrize("case", WATCH_CASES.values(), ids=WATCH_CASES.keys())
    def test_watch_delivery(self, store: StateStore, other: StateStore, case: WatchCase) -> None:
        case.setup(other)
        recorder = Recorder()
        store.add_listener(recorder)
        store.watch(case.kind, case.key)
        case.action(other)
        recorder.wait_for(WatchEvent(case.kind, case.change, case.key))

    @pytest.mark.parametrize("case", WATCH_CASES.values(), ids=WATCH_CASES.keys())
    def test_no_event_without_a_watch(self, store: StateStore, other: StateStore, case: WatchCase) -> None:
        case.setup(other)
        recorder = Recorder()
        store.add_listener(recorder)
        for watched in WATCHES - {(case.kind, case.key)}:
            store.watch(*watched)
        case.action(other)
        self.flush(store, recorder)
        assert (case.kind, case.key) not in {(e.kind, e.key) for e in recorder.events}

    def test_unwatch_and_remove_listener(self, store: StateStore, other: StateStore) -> None:
        kept, removed = Recorder(), Recorder()
        store.add_listener(kept)
        store.add_listener(removed)
        store.watch(WatchKind.TOPICS)
        store.watch(WatchKind.DELETE_TOPICS)
        store.remove_listener(removed)
        store.unwatch(WatchKind.DELETE_TOPICS)
        other.create_topic("t", ASSIGNMENT)
        other.create_topic_deletion("t")
        kept.wait_for(WatchEvent(WatchKind.TOPICS, ChangeType.CHILDREN_CHANGED))
        self.flush(store, kept)
        assert kept.events == [WatchEvent(WatchKind.TOPICS, ChangeType.CHILDREN_CHANGED)]
        assert removed.events == []

    def test_watches_are_per_key(self, store: StateStore, other: StateStore) -> None:
        recorder = Recorder()
        store.add_listener(recorder)
        store.watch(WatchKind.BROKER, 2)
        other.register_broker(broker(1))
        other.register_broker(broker(2))
        other.update_broker_info(broker(1, "moved"))
        other.update_broker_info(broker(2, "moved"))
        recorder.wait_for(WatchEvent(WatchKind.BROKER, ChangeType.DATA_CHANGED, 2))
        self.flush(store, recorder)
        assert recorder.events == [WatchEvent(WatchKind.BROKER, ChangeType.DATA_CHANGED, 2)]

    # --- Sessions ------------------------------------------------------------------------------

    def test_session_expiry(
        self,
        store: StateStore,
        other: StateStore,
        expire_session: Callable[[StateStore], None],
        reconnect_session: Callable[[StateStore], None],
    ) -> None:
        mine, theirs = Recorder(), Recorder()
        store.add_listener(mine)
        store.watch(WatchKind.TOPICS)
        other.add_listener(theirs)
        other.watch(WatchKind.BROKER_IDS)
        other.watch(WatchKind.CONTROLLER)
        first_epoch = store.register_broker(broker(1))
        store.register_controller_and_increment_epoch(1)
        self.flush(other, theirs)
        theirs.clear()

        expire_session(store)

        theirs.wait_for(WatchEvent(WatchKind.BROKER_IDS, ChangeType.CHILDREN_CHANGED))
        theirs.wait_for(WatchEvent(WatchKind.CONTROLLER, ChangeType.DELETED))
        mine.wait_for(WatchEvent(WatchKind.SESSION, ChangeType.EXPIRED))
        assert other.get_all_brokers() == {}
        assert other.get_controller_id() is None
        for call in (store.get_all_topics, store.get_controller_id, lambda: store.register_broker(broker(1))):
            with pytest.raises(StoreUnavailableError):
                call()
        other.create_topic("missed", ASSIGNMENT)

        reconnect_session(store)

        mine.wait_for(WatchEvent(WatchKind.SESSION, ChangeType.RECONNECTED))
        assert store.register_broker(broker(1)) > first_epoch
        mine.clear()
        other.create_topic("seen", ASSIGNMENT)  # the TOPICS watch survived the new session
        mine.wait_for(WatchEvent(WatchKind.TOPICS, ChangeType.CHILDREN_CHANGED))
        assert store.get_all_topics() == {"missed", "seen"}

    def test_closing_tells_other_sessions_not_itself(self, store: StateStore, other: StateStore) -> None:
        mine, theirs = Recorder(), Recorder()
        store.add_listener(mine)
        other.add_listener(theirs)
        other.watch(WatchKind.BROKER_IDS)
        store.register_broker(broker(1))
        theirs.wait_for(WatchEvent(WatchKind.BROKER_IDS, ChangeType.CHILDREN_CHANGED))
        theirs.clear()
        store.close()
        theirs.wait_for(WatchEvent(WatchKind.BROKER_IDS, ChangeType.CHILDREN_CHANGED))
        assert mine.events == []
