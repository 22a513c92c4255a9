"""A simulated cluster of broker agents with a small scripted controller, for the broker tests.

``FakeController`` does only what the tests need of a controller: it registers, creates topics
(state znodes plus LeaderAndIsr and UpdateMetadata to the brokers), elects leaders on request,
answers AlterPartition with conditional writes to the store (as Kafka's controller does), and
answers ControlledShutdown from a script.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kctl.broker import BrokerAgent, DataPlaneLedger, SimulatedReplicaManager
from kctl.broker.native_data_plane import NativeDataPlaneLedger, NativeReplicaManager
from kctl.cluster import EmbeddedCluster, SentRecord, data_plane_name
from kctl.config import ControllerConfig
from kctl.errors import Errors
from kctl.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.requests import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerToControllerRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ControllerRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kctl.scheduler import SimulatedScheduler
from kctl.stores import MemoryStore, MemoryTree, TopicAssignment, paths
from kctl.transports.inprocess import InProcessTransport

LATENCY = 0.001


def lai_state(
    tp: TopicPartition,
    leader: int,
    isr: Sequence[int],
    *,
    leader_epoch: int = 0,
    replicas: Sequence[int] | None = None,
    partition_epoch: int = 0,
    is_new: bool = False,
    controller_epoch: int = 1,
) -> LeaderAndIsrPartitionState:
    replicas = tuple(isr if replicas is None else replicas)
    return LeaderAndIsrPartitionState(
        tp.topic, tp.partition, controller_epoch, leader, leader_epoch, tuple(isr), partition_epoch,
        replicas, (), (), is_new,
    )


def leader_and_isr(
    *states: LeaderAndIsrPartitionState, controller_epoch: int = 1, broker_epoch: int = -1, controller_id: int = 100
) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(5, controller_id, controller_epoch, broker_epoch, states, {}, ())


def um_state(tp: TopicPartition, leader: int, isr: Sequence[int], *, leader_epoch: int = 0,
             replicas: Sequence[int] | None = None, partition_epoch: int = 0) -> UpdateMetadataPartitionState:
    replicas = tuple(isr if replicas is None else replicas)
    return UpdateMetadataPartitionState(tp.topic, tp.partition, 1, leader, leader_epoch, tuple(isr),
                                        partition_epoch, replicas, ())


def update_metadata(
    *states: UpdateMetadataPartitionState, controller_epoch: int = 1, broker_epoch: int = -1,
    controller_id: int = 100, brokers: Iterable[BrokerAgent] = (),
) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(7, controller_id, controller_epoch, broker_epoch, states,
                                 tuple(agent.info for agent in brokers), {})


def stop_replica(
    *states: tuple[TopicPartition, int, bool], controller_epoch: int = 1, broker_epoch: int = -1
) -> StopReplicaRequest:
    """``states``: (partition, leader epoch, delete)."""
    return StopReplicaRequest(
        3, 100, controller_epoch, broker_epoch, False,
        tuple(StopReplicaPartitionState(tp.topic, tp.partition, epoch, delete) for tp, epoch, delete in states),
    )


def replica_requests_of_a_run() -> list[SentRecord]:
    """Every request a 4-broker cluster on the native engine sends in a run with new partitions, a
    reassignment adding replicas, a controlled shutdown and restart, and a deletion: the
    LeaderAndIsr and StopReplica requests the broker side's checks and rows are tested with."""
    with EmbeddedCluster(4, engine="rust", seed=1) as cluster:
        cluster.create_topic("t", 4, 2)
        cluster.create_topic("u", 2, 1)
        cluster.reassign({TopicPartition("t", 0): [3, 2, 1]})
        cluster.shutdown_broker(1)
        cluster.start_broker(1)
        cluster.delete_topic("u")
        cluster.run_until_stable()
        return cluster.sent_requests


@dataclass
class Received:
    time: float
    request: BrokerToControllerRequest


@dataclass
class FakeController:
    """A scripted controller bound on the transport (see the module docstring)."""

    cluster: SimCluster
    controller_id: int = 100
    shutdown_script: list[ControlledShutdownResponse] = field(default_factory=list)
    respond_to_shutdown: bool = True
    alter_partition_errors: dict[TopicPartition, Errors] = field(default_factory=dict)  # answered once each
    unanswered_alter_partitions: int = 0  # how many AlterPartition requests to leave without an answer
    received: list[Received] = field(default_factory=list)
    responses: list[tuple[int, Any]] = field(default_factory=list)
    epoch: int = 0
    epoch_version: int = 0

    def startup(self) -> None:
        self.store = self.cluster.tree_session()
        self.epoch, self.epoch_version = self.store.register_controller_and_increment_epoch(self.controller_id)
        self.cluster.transport.bind_controller(self.controller_id, self.handle)
        self.channel = self.cluster.transport.controller_channel(self.controller_id)
        for agent in self.cluster.agents.values():
            self.channel.add_broker(agent.info)

    # --- Broker → controller -----------------------------------------------------------------------

    def handle(self, request: BrokerToControllerRequest, respond: Callable[[Any], None]) -> None:
        self.received.append(Received(self.cluster.scheduler.now(), request))
        if isinstance(request, ControlledShutdownRequest):
            if self.respond_to_shutdown:
                respond(self.shutdown_script.pop(0) if self.shutdown_script else ControlledShutdownResponse())
        elif self.unanswered_alter_partitions:
            self.unanswered_alter_partitions -= 1
        else:
            respond(self.alter_partition(request))

    def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """Kafka's checks, reduced: unknown partition, fenced leader epoch, conditional write."""
        stored = self.store.get_partition_states(request.changes).values
        results: dict[TopicPartition, LeaderAndIsr | Errors] = {}
        updates = {}
        for tp, proposed in request.changes.items():
            current = stored.get(tp)
            if tp in self.alter_partition_errors:
                results[tp] = self.alter_partition_errors.pop(tp)
            elif current is None:
                results[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif proposed.leader_epoch < current.leader_and_isr.leader_epoch:
                results[tp] = Errors.FENCED_LEADER_EPOCH
            else:
                updates[tp] = proposed
        written = self.store.update_partition_states(updates, self.epoch, self.epoch_version)
        results.update(written.successful)
        results.update({tp: Errors.INVALID_UPDATE_VERSION for tp in written.to_retry})
        return AlterPartitionResponse(Errors.NONE, results)

    def alter_partition_requests(self) -> list[Received]:
        return [r for r in self.received if isinstance(r.request, AlterPartitionRequest)]

    def shutdown_requests(self) -> list[Received]:
        return [r for r in self.received if isinstance(r.request, ControlledShutdownRequest)]

    # --- Controller → broker -----------------------------------------------------------------------

    def send(self, broker_id: int, request: ControllerRequest) -> None:
        self.channel.send_request(broker_id, request, lambda response: self.responses.append((broker_id, response)))

    def broker_epoch(self, broker_id: int) -> int:
        return self.store.get_all_brokers()[broker_id][1]

    def create_topic(self, topic: str, assignment: Mapping[int, Sequence[int]],
                     isr: Mapping[int, Sequence[int]] | None = None) -> None:
        """Write the topic and its initial states (leader: first replica), then tell the brokers."""
        self.store.create_topic(topic, {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()})
        states = {}
        for partition, replicas in assignment.items():
            members = tuple((isr or {}).get(partition, replicas))
            states[TopicPartition(topic, partition)] = LeaderIsrAndControllerEpoch(
                LeaderAndIsr(replicas[0], members), self.epoch)
        self.store.create_partition_states(states, self.epoch_version)
        self.publish(list(states), is_new=True)

    def elect(self, tp: TopicPartition, leader: int, isr: Sequence[int]) -> None:
        """Write a new leader and ISR (the next leader epoch) and tell the replicas."""
        current = self.store.get_partition_states([tp]).values[tp].leader_and_isr
        result = self.store.update_partition_states(
            {tp: current.new_leader_and_isr(leader, tuple(isr))}, self.epoch, self.epoch_version)
        assert tp in result.successful, result
        self.publish([tp])

    def publish(self, partitions: Sequence[TopicPartition], *, is_new: bool = False) -> None:
        """Send the stored states: LeaderAndIsr to each partition's replicas, UpdateMetadata to all."""
        stored = self.store.get_partition_states(partitions).values
        topics = self.store.get_topic_assignments({tp.topic for tp in partitions}).values
        per_broker: dict[int, list[LeaderAndIsrPartitionState]] = {}
        metadata = []
        for tp in partitions:
            lai = stored[tp].leader_and_isr
            replicas = topics[tp.topic].partitions[tp.partition].replicas
            state = lai_state(tp, lai.leader, lai.isr, leader_epoch=lai.leader_epoch, replicas=replicas,
                              partition_epoch=lai.partition_epoch, is_new=is_new, controller_epoch=self.epoch)
            for broker in replicas:
                per_broker.setdefault(broker, []).append(state)
            metadata.append(um_state(tp, lai.leader, lai.isr, leader_epoch=lai.leader_epoch, replicas=replicas,
                                     partition_epoch=lai.partition_epoch))
        live = self.store.get_all_brokers()
        for broker, states in sorted(per_broker.items()):
            if broker in live:
                self.send(broker, leader_and_isr(*states, controller_epoch=self.epoch,
                                                 broker_epoch=live[broker][1], controller_id=self.controller_id))
        for broker, (_, broker_epoch) in live.items():
            self.send(broker, UpdateMetadataRequest(
                7, self.controller_id, self.epoch, broker_epoch, tuple(metadata),
                tuple(info for info, _ in live.values()), {}))


class SimCluster:
    """Broker agents with simulated replica managers on one simulated scheduler and store."""

    def __init__(
        self,
        brokers: Iterable[int] = (1, 2, 3),
        config: ControllerConfig | dict[str, Any] | None = None,
        *,
        seed: int = 0,
        fetch_interval: float = 0.5,
        max_fetch_records: int | None = None,
        data_plane: str | None = None,
    ) -> None:
        self.scheduler = SimulatedScheduler(seed)
        self.tree = MemoryTree()
        self.admin = MemoryStore(self.tree)
        self.transport = InProcessTransport(self.scheduler, latency=LATENCY)
        self.ledger: DataPlaneLedger | NativeDataPlaneLedger = (
            NativeDataPlaneLedger() if data_plane_name(data_plane) == "native" else DataPlaneLedger()
        )
        self.config = ControllerConfig.coerce(config)

        def manager() -> SimulatedReplicaManager | NativeReplicaManager:
            if isinstance(self.ledger, NativeDataPlaneLedger):
                return NativeReplicaManager(self.ledger, fetch_interval=fetch_interval, max_fetch_records=max_fetch_records)
            return SimulatedReplicaManager(self.ledger, fetch_interval=fetch_interval, max_fetch_records=max_fetch_records)

        self.agents = {
            b: BrokerAgent(b, MemoryStore(self.tree), self.transport, self.scheduler, self.config,
                           rack=f"rack-{b % 2}", replica_manager=manager())
            for b in brokers
        }
        self.controller = FakeController(self)

    def tree_session(self) -> MemoryStore:
        return MemoryStore(self.tree)

    def start(self, *, controller: bool = True) -> SimCluster:
        for agent in self.agents.values():
            agent.startup()
        if controller:
            self.controller.startup()
        return self

    def controller_elected(self, epoch: int) -> None:
        """``/controller_epoch`` says ``epoch``, as after that many elections: brokers accept
        controller requests up to that epoch (a higher one is forged)."""
        self.tree.set_raw(paths.CONTROLLER_EPOCH, epoch)

    def manager(self, broker_id: int) -> SimulatedReplicaManager | NativeReplicaManager:
        manager = self.agents[broker_id].replica_manager
        assert isinstance(manager, SimulatedReplicaManager | NativeReplicaManager)
        return manager

    def run(self, seconds: float) -> None:
        self.scheduler.advance(seconds)

    def run_until(self, condition: Callable[[], bool], timeout: float = 60.0) -> float:
        """Run until ``condition`` holds (failing after ``timeout`` simulated seconds); returns the time."""
        assert self.scheduler.run_until(self.scheduler.now() + timeout, condition), "condition never held"
        return self.scheduler.now()

    def stored_isr(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.admin.get_partition_states([tp]).values[tp].leader_and_isr.isr

    def stored_state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch:
        return self.admin.get_partition_states([tp]).values[tp]

    def topic(self, name: str) -> TopicAssignment:
        return self.admin.get_topic_assignments([name]).values[name]
