"""Builders shared by the election, context, request-batch and state-machine tests.

A :class:`Harness` is what Kafka's PartitionStateMachineTest builds by hand, minus the mocks: a
:class:`~kctl.stores.memory.MemoryStore` with a registered controller (epoch 1, epoch version 1)
and registered brokers, a context with those brokers live and the topics' assignments loaded, a
request batch wired to a :class:`RecordingChannel`, both state machines writing their state-change
log into a list, and small readers for what was sent and what the store holds.

Everything is real: the store enforces ZooKeeper's versions and the controller-epoch fence, so a
test observes the writes the way a broker or another controller would.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kctl.config import ControllerConfig
from kctl.context import ControllerContext
from kctl.model import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    PartitionReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from kctl.requests import (
    ControllerBrokerRequestBatch,
    ControllerRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    ResponseReceived,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kctl.statechange import StateChangeLogger
from kctl.statemachine import PartitionStateMachine, ReplicaStateMachine
from kctl.stores.base import MATCH_ANY_VERSION, UpdateResult
from kctl.stores.memory import MemoryStore

CONTROLLER_ID = 0
"""The controller's broker id (not one of the data brokers, so it never receives requests)."""
BROKERS = (1, 2, 3)
TOPIC = "t"
TP = TopicPartition(TOPIC, 0)


def topic_id(topic: str) -> str:
    """A deterministic 22-character base64 topic id."""
    return base64.urlsafe_b64encode(topic.encode().ljust(16, b"\0")[:16]).rstrip(b"=").decode()


def broker_info(broker: int, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(broker, (EndPoint(f"broker{broker}", 9090 + broker),), rack)


# --- Recording transport -----------------------------------------------------------------------------


@dataclass
class Sent:
    broker: int
    request: ControllerRequest
    callback: Callable[[Any], None] | None


class RecordingChannel:
    """A RequestChannel that keeps every request, in send order, with its callback."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []

    def send_request(self, broker_id: int, request: ControllerRequest, callback: Callable[[Any], None] | None) -> None:
        self.sent.append(Sent(broker_id, request, callback))

    def clear(self) -> None:
        self.sent.clear()

    # --- Views -----------------------------------------------------------------------------------

    def order(self) -> list[tuple[str, int]]:
        """``(api, broker)`` of every request, in send order."""
        return [(s.request.api, s.broker) for s in self.sent]

    def of(self, kind: type) -> list[Sent]:
        return [s for s in self.sent if isinstance(s.request, kind)]

    def leader_and_isr(self) -> dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]]:
        """Broker → partition → the LeaderAndIsr partition state it was sent (one request per broker)."""
        out: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        for s in self.of(LeaderAndIsrRequest):
            assert s.broker not in out, f"two LeaderAndIsr requests to broker {s.broker} in one flush"
            out[s.broker] = {ps.tp: ps for ps in s.request.partition_states}
        return out

    def update_metadata(self) -> dict[int, dict[TopicPartition, UpdateMetadataPartitionState]]:
        """Broker → partition → the UpdateMetadata partition state it was sent."""
        out: dict[int, dict[TopicPartition, UpdateMetadataPartitionState]] = {}
        for s in self.of(UpdateMetadataRequest):
            assert s.broker not in out, f"two UpdateMetadata requests to broker {s.broker} in one flush"
            out[s.broker] = {ps.tp: ps for ps in s.request.partition_states}
        return out

    def stop_replica(self) -> dict[int, dict[TopicPartition, tuple[int, bool]]]:
        """Broker → partition → ``(leader_epoch, delete_partition)`` over all its StopReplica requests."""
        out: dict[int, dict[TopicPartition, tuple[int, bool]]] = {}
        for s in self.of(StopReplicaRequest):
            per_broker = out.setdefault(s.broker, {})
            for ps in s.request.partition_states:
                assert ps.tp not in per_broker
                per_broker[ps.tp] = (ps.leader_epoch, ps.delete_partition)
        return out


# --- Expected request contents ---------------------------------------------------------------------


def lai_state(
    tp: TopicPartition,
    leader: int,
    isr: Sequence[int],
    *,
    leader_epoch: int,
    partition_epoch: int,
    replicas: Sequence[int],
    is_new: bool,
    controller_epoch: int = 1,
    adding: Sequence[int] = (),
    removing: Sequence[int] = (),
    recovery: LeaderRecoveryState = LeaderRecoveryState.RECOVERED,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        tp.topic, tp.partition, controller_epoch, leader, leader_epoch, tuple(isr), partition_epoch,
        tuple(replicas), tuple(adding), tuple(removing), is_new, recovery,
    )


def um_state(
    tp: TopicPartition,
    leader: int,
    isr: Sequence[int],
    *,
    leader_epoch: int,
    partition_epoch: int,
    replicas: Sequence[int],
    offline: Sequence[int] = (),
    controller_epoch: int = 1,
) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(
        tp.topic, tp.partition, controller_epoch, leader, leader_epoch, tuple(isr), partition_epoch,
        tuple(replicas), tuple(offline),
    )


# --- Store wrappers that inject faults --------------------------------------------------------------


class StoreProxy:
    """Delegates to a real store; tests override single methods to inject concurrency or failures."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self._store, name)


class ConcurrentWriterStore(StoreProxy):
    """Before the controller's first conditional partition-state write, run ``writer`` (another
    session changing the state behind the controller's back, as a partition leader shrinking the
    ISR would): the write then meets a real BADVERSION."""

    def __init__(self, store: MemoryStore, writer: Callable[[], None]) -> None:
        super().__init__(store)
        self._writer: Callable[[], None] | None = writer
        self.update_results: list[UpdateResult] = []

    def update_partition_states(self, updates: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int,
                                expected_controller_epoch_version: int) -> UpdateResult:
        if self._writer is not None and updates:
            writer, self._writer = self._writer, None
            writer()
        result = self._store.update_partition_states(updates, controller_epoch, expected_controller_epoch_version)
        self.update_results.append(result)
        return result


class FailingStore(StoreProxy):
    """Raises ``error`` from the named store methods."""

    def __init__(self, store: MemoryStore, error: Exception, *methods: str) -> None:
        super().__init__(store)
        self._error = error
        self._methods = set(methods)

    def __getattr__(self, name: str) -> Any:
        if name in self._methods:
            def fail(*args: Any, **kwargs: Any) -> Any:
                raise self._error

            return fail
        return super().__getattr__(name)


# --- The harness -------------------------------------------------------------------------------------


@dataclass
class Harness:
    store: MemoryStore
    context: ControllerContext
    config: ControllerConfig
    channel: RecordingChannel
    batch: ControllerBrokerRequestBatch
    partition_sm: PartitionStateMachine
    replica_sm: ReplicaStateMachine
    log: list[str] = field(default_factory=list)
    """The state machines' state-change log lines (``LEVEL [Controller id=0 epoch=1] message``)."""
    batch_log: list[str] = field(default_factory=list)
    """The request batch's state-change log lines (kept apart so transition logs stay readable)."""
    events: list[ResponseReceived] = field(default_factory=list)
    broker_sessions: dict[int, MemoryStore] = field(default_factory=dict)
    other_sessions: list[Any] = field(default_factory=list)
    """Sessions of other writers the harness opened (a ZooKeeper store's must be closed)."""

    # --- Setting up ------------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        partitions: Mapping[int, Sequence[int] | ReplicaAssignment],
        *,
        config: Mapping[str, str] | None = None,
        with_topic_id: bool = True,
    ) -> list[TopicPartition]:
        """Write the topic (and its config) to the store and load its assignment into the context."""
        assignments = {
            p: (r if isinstance(r, ReplicaAssignment) else ReplicaAssignment(tuple(r))) for p, r in partitions.items()
        }
        tid = topic_id(topic) if with_topic_id else None
        self.store.create_topic(topic, assignments, tid, config)
        self.context.add_topic(topic, tid)
        self.context.put_partition_assignments({TopicPartition(topic, p): a for p, a in assignments.items()})
        return [TopicPartition(topic, p) for p in assignments]

    def write_state(
        self,
        tp: TopicPartition,
        leader: int,
        isr: Sequence[int],
        *,
        leader_epoch: int = 0,
        version: int = 0,
        controller_epoch: int | None = None,
        cache: bool = True,
        recovery: LeaderRecoveryState = LeaderRecoveryState.RECOVERED,
    ) -> LeaderIsrAndControllerEpoch:
        """Create the partition's state znode, bring it to ``version`` with unfenced rewrites of the
        same content, and (by default) cache it in the context as the controller would have."""
        cepoch = self.context.epoch if controller_epoch is None else controller_epoch
        lai = LeaderAndIsr(leader, tuple(isr), leader_epoch, 0, recovery)
        errors = self.store.create_partition_states({tp: LeaderIsrAndControllerEpoch(lai, cepoch)}, MATCH_ANY_VERSION)
        assert errors == {tp: None}, errors
        for v in range(version):
            result = self.store.update_partition_states({tp: lai.with_partition_epoch(v)}, cepoch, MATCH_ANY_VERSION)
            assert tp in result.successful, result
        stored = self.stored(tp)
        assert stored is not None and stored.leader_and_isr.partition_epoch == version
        if cache:
            self.context.put_partition_leadership(tp, stored)
        return stored

    def set_partition_states(self, states: Mapping[TopicPartition, PartitionState]) -> None:
        for tp, state in states.items():
            self.context.put_partition_state(tp, state)

    def set_replica_states(self, states: Mapping[PartitionReplica, ReplicaState]) -> None:
        for replica, state in states.items():
            self.context.put_replica_state(replica, state)

    def another_controller_takes_over(self, controller_id: int = 9) -> tuple[int, int]:
        """Our /controller goes away and another broker registers: the controller epoch and its
        version move on, so every write fenced with our (stale) version fails."""
        other = self.store.new_session()
        self.other_sessions.append(other)
        other.delete_controller(MATCH_ANY_VERSION)
        return other.register_controller_and_increment_epoch(controller_id)

    def concurrent_state_write(self, tp: TopicPartition, leader: int, isr: Sequence[int],
                               controller_epoch: int | None = None) -> Callable[[], None]:
        """A writer (another session) that rewrites the state znode with ``leader``/``isr``,
        keeping the leader epoch, as a partition leader shrinking its ISR in ZooKeeper would."""
        other = self.store.new_session()
        self.other_sessions.append(other)

        def write() -> None:
            current = other.get_partition_states([tp]).values[tp]
            lai = current.leader_and_isr
            new = LeaderAndIsr(leader, tuple(isr), lai.leader_epoch, lai.partition_epoch, lai.leader_recovery_state)
            cepoch = current.controller_epoch if controller_epoch is None else controller_epoch
            result = other.update_partition_states({tp: new}, cepoch, MATCH_ANY_VERSION)
            assert tp in result.successful, result

        return write

    # --- Observing -------------------------------------------------------------------------------

    def stored(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self.store.get_partition_states([tp]).values.get(tp)

    def stored_states(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | None]:
        return {tp: self.stored(tp) for tp in tps}

    def partition_states(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionState]:
        return {tp: self.context.partition_state(tp) for tp in tps}

    def replica_states(self, replicas: Iterable[PartitionReplica]) -> dict[PartitionReplica, ReplicaState]:
        return {r: self.context.replica_state(r) for r in replicas}

    def errors(self) -> list[str]:
        return [line for line in self.log if line.startswith("ERROR ")]

    def reset_observations(self) -> None:
        self.log.clear()
        self.batch_log.clear()
        self.channel.clear()
        self.events.clear()


def prefix(epoch: int = 1) -> str:
    """The state-change log prefix of the harness's controller."""
    return f"[Controller id={CONTROLLER_ID} epoch={epoch}]"


def make_harness(
    brokers: Iterable[int] = BROKERS,
    *,
    shutting_down: Iterable[int] = (),
    config: ControllerConfig | Mapping[str, Any] | None = None,
    engine: str | None = None,
    topics: Mapping[str, Mapping[int, Sequence[int] | ReplicaAssignment]] | None = None,
    register_brokers: bool = True,
    store: Any = None,
) -> Harness:
    """A controller (id 0, epoch 1, epoch version 1) on a fresh MemoryStore with ``brokers`` live.

    Brokers register their own ephemeral znodes (their broker epochs are the znodes' czxids), as
    they would in a real cluster; ``topics`` maps topic → partition → replicas. ``store`` is
    another empty store to use instead (a ZooKeeperStore in a fresh chroot). ``engine``: kctl's
    default engine when called unless given (the ``engine`` fixture sets it).
    """
    cfg = ControllerConfig.coerce(config)
    store = MemoryStore() if store is None else store
    sessions: dict[int, MemoryStore] = {}
    epochs: dict[int, int] = {}
    infos: dict[int, BrokerInfo] = {}
    for broker in brokers:
        infos[broker] = broker_info(broker)
        if register_brokers:
            sessions[broker] = store.new_session()
            epochs[broker] = sessions[broker].register_broker(infos[broker])
        else:
            epochs[broker] = 100 + broker
    epoch, epoch_version = store.register_controller_and_increment_epoch(CONTROLLER_ID)
    assert (epoch, epoch_version) == (1, 1)

    context = ControllerContext() if engine is None else ControllerContext(engine=engine)
    context.epoch, context.epoch_zk_version = epoch, epoch_version
    context.set_live_brokers(epochs, infos)
    for broker in shutting_down:
        context.add_shutting_down_broker(broker)

    log: list[str] = []
    batch_log: list[str] = []
    events: list[ResponseReceived] = []
    channel = RecordingChannel()
    batch = ControllerBrokerRequestBatch(
        CONTROLLER_ID, context, cfg, channel=channel, on_response=events.append,
        state_change_logger=StateChangeLogger(CONTROLLER_ID, lambda: context.epoch, sink=batch_log),
    )
    scl = StateChangeLogger(CONTROLLER_ID, lambda: context.epoch, sink=log)
    partition_sm = PartitionStateMachine(CONTROLLER_ID, context, store, batch, cfg, state_change_logger=scl)
    replica_sm = ReplicaStateMachine(CONTROLLER_ID, context, store, batch, state_change_logger=scl)
    h = Harness(store, context, cfg, channel, batch, partition_sm, replica_sm, log, batch_log, events, sessions)
    for topic, partitions in (topics or {}).items():
        h.create_topic(topic, partitions)
    return h
