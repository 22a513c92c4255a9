"""The controller (Kafka's KafkaController, reference §6).

One instance runs per controller candidate. All work happens on its event thread: store watches,
broker responses, timers and admin calls only enqueue :mod:`events <kctl.controller.events>`, and
other threads read its state through :meth:`KafkaController.inspect`, on that thread too.
Whichever candidate registers ``/controller`` first with the next epoch is active; every store
write it makes is fenced by that epoch's version, so a deposed controller cannot change anything.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from concurrent.futures import Future
from typing import Any, TypeVar

from kctl import admin
from kctl._engine import plain_alter_partition
from kctl.config import ControllerConfig
from kctl.controller import events as ev
from kctl.controller.event_manager import ControllerEventManager
from kctl.controller.reassignment import ReassignmentManager
from kctl.controller.topic_deletion import TopicDeletionManager
from kctl.election import Election, for_config
from kctl.engine_api.request_batch import ControllerBrokerRequestBatch
from kctl.engine_api.statemachine import ElectionOutcome
from kctl.engines import default_engine, engine_parts
from kctl.errors import (
    CorruptDataError,
    BrokerIdNotRegisteredError,
    BrokerNotAvailableError,
    ControllerMovedError,
    EligibleLeadersNotAvailableError,
    ElectionNotNeededError,
    Errors,
    FencedLeaderEpochError,
    IllegalStateError,
    IneligibleReplicaError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    KctlError,
    NoNodeError,
    NotControllerError,
    PreferredLeaderNotAvailableError,
    StaleBrokerEpochError,
    StateChangeFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    error_of,
)
from kctl.model import (
    INT64_MAX,
    INT64_MIN,
    NO_LEADER,
    UNKNOWN_BROKER_EPOCH,
    BrokerInfo,
    LeaderAndIsr,
    LeaderRecoveryState,
    PartitionReplica,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
    validate_int,
    validate_partition_id,
)
from kctl.plugins import PluginHost, get_plugin_host
from kctl.producer_ids import allocate_producer_id_block
from kctl.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrResponse,
    ResponseReceived,
    StopReplicaResponseReceived,
    UpdateMetadataResponseReceived,
)
from kctl.scheduler import RealTimeScheduler, Scheduler, SimulatedScheduler, Timer
from kctl.selectors import ElectionKind
from kctl.statechange import LogText, Sink, StateChangeLogger
from kctl.stores import paths
from kctl.stores.base import (
    FEATURE_STATUS_DISABLED,
    FEATURE_STATUS_ENABLED,
    BulkWatches,
    ChangeType,
    FinalizedFeatures,
    ProducerIdBlock,
    StateStore,
    TopicAssignment,
    WatchEvent,
    WatchKind,
)
from kctl.topic_config import UNCLEAN_LEADER_ELECTION_ENABLE, parse_topic_config
from kctl.transports.base import AdvertisedController, Repeat, Transport, repeatable

log = logging.getLogger(__name__)

_NO_ERROR = Errors.NONE
"""Read once per UpdateMetadata answer: a global is cheaper than an enum member read from its class."""

AUTO_REBALANCE_FIRST_DELAY = 5.0
"""Seconds from failover to the first auto-rebalance check (Kafka's constant)."""
FAILED_FAILOVER_BACKOFF = 5.0
"""Seconds a candidate whose failover failed stays out of elections before it runs again. Kafka
runs again at once, which with a lasting fault (unreadable data) becomes a loop of elections that
raises the controller epoch as fast as ZooKeeper answers; kctl's pause lets the other candidates
take over meanwhile, and bounds the loop when every candidate fails."""

ElectionResults = dict[TopicPartition, "int | KctlError"]
E = TypeVar("E", bound=ev.ControllerEvent)
F = TypeVar("F", bound=ev.EventWithFuture)
T = TypeVar("T")

_Loaded = tuple[Sequence[TopicPartition], Mapping[int, ReplicaAssignment]]
"""A topic read into the context: its partitions, and their assignments as read."""


def _active_only(handler: Callable[[KafkaController, E], None]) -> Callable[[KafkaController, E], None]:
    """The handler of an event only the active controller acts on: an inactive one drops it."""

    @functools.wraps(handler)
    def guarded(controller: KafkaController, event: E) -> None:
        if controller.is_active:
            handler(controller, event)

    return guarded


def _active_or_not_controller(handler: Callable[[KafkaController, F], None]) -> Callable[[KafkaController, F], None]:
    """The handler of a caller's request only the active controller serves: an inactive one
    answers NOT_CONTROLLER, so the caller looks for the active one."""

    @functools.wraps(handler)
    def guarded(controller: KafkaController, event: F) -> None:
        if controller.is_active:
            handler(controller, event)
        else:
            event.future.set_exception(NotControllerError(f"Broker {controller.broker_id} is not the controller"))

    return guarded


class KafkaController:
    """A controller candidate; :meth:`startup` joins the election."""

    def __init__(
        self,
        broker_id: int,
        store: StateStore,
        transport: Transport,
        config: ControllerConfig | Mapping[str, Any] | None = None,
        engine: str | None = None,
        clock: Scheduler | None = None,
        *,
        threaded: bool | None = None,
        state_change_log: Sink | None = None,
        plugins: PluginHost | None = None,
    ) -> None:
        self.broker_id = validate_int("broker id", broker_id, 0)
        self.store = store
        self.transport = transport
        self.config = ControllerConfig.coerce(config)
        self._owns_scheduler = clock is None
        self.scheduler: Scheduler = clock if clock is not None else RealTimeScheduler(name=f"controller-{broker_id}-timer")
        threaded = not isinstance(self.scheduler, SimulatedScheduler) if threaded is None else threaded
        self.plugins = plugins
        self._host().leader_selectors().check_config(self.config)  # a misspelt selector never wins an election
        self.engine_parts = engine_parts(engine or default_engine())
        """The engine's classes: the context, state machines and request batches are built from them."""
        self.context = self.engine_parts.context()
        self.state_change_logger = StateChangeLogger(broker_id, lambda: self.context.epoch, state_change_log)
        self.channel = transport.controller_channel(broker_id)
        self.batch = self._new_batch()
        self.partition_state_machine = self.engine_parts.partition_state_machine(
            broker_id, self.context, store, self._new_batch(), self.config, state_change_logger=self.state_change_logger,
            plugins=plugins,
        )
        self.replica_state_machine = self.engine_parts.replica_state_machine(
            broker_id, self.context, store, self._new_batch(), state_change_logger=self.state_change_logger
        )
        self.deletion_manager = TopicDeletionManager(
            self.config.delete_topic_enable,
            self.context,
            self.replica_state_machine,
            self.partition_state_machine,
            _DeletionClient(self),
        )
        self.reassignment_manager = ReassignmentManager(
            self.context,
            store,
            self.replica_state_machine,
            self.partition_state_machine,
            self.deletion_manager,
            self.state_change_logger,
            _ReassignmentClient(self),
        )
        self._handlers = self._event_handlers()
        self.event_manager = ControllerEventManager(
            self._process, self.scheduler, threaded=threaded, name=f"controller-{broker_id}-event-thread"
        )
        self._accepted_updates: Repeat = self._queue_accepted_updates  # one object: what the callbacks share
        self.active_controller_id = -1
        self._watches: set[tuple[WatchKind, object]] = set()
        self._fired_topic_watches: set[str] = set()
        self._rebalance_timer: Timer | None = None
        self._election_retry: Timer | None = None
        self._elect_not_before = float("-inf")
        self._entry_registered = False  # the transport's controller entry is in the store
        self._announced = False  # kctl_controller_started fired, kctl_controller_resigned is owed
        self._started = False

    # --- Public API ----------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    @property
    def epoch(self) -> int:
        return self.inspect(lambda controller: controller.context.epoch)

    def inspect(self, read: Callable[[KafkaController], T]) -> T:
        """``read(self)`` run between two events on the event thread (at once in a simulation),
        so that a thread of the caller's sees the context, the state machines and the metrics
        as one event left them; the way to look at a running controller from another thread."""
        return self.event_manager.call(lambda: read(self))

    def startup(self) -> None:
        """Join the controller election (asynchronously, on the event thread)."""
        if self._started:
            return
        self._started = True
        self.store.add_listener(self._on_watch)
        self.transport.bind_controller(self.broker_id, self._handle_broker_request)
        self.event_manager.start()
        self.event_manager.put(ev.Startup())

    def shutdown(self) -> None:
        """Resign if active and stop the event thread; pending requests are answered NOT_CONTROLLER."""
        if not self._started:
            return
        self._started = False
        self.transport.unbind_controller(self.broker_id)
        self.store.remove_listener(self._on_watch)
        if self._election_retry is not None:
            self._election_retry.cancel()
        self.event_manager.close()
        self.event_manager.call(self._on_controller_resignation)
        self.active_controller_id = -1
        self.channel.shutdown()
        if self._owns_scheduler and isinstance(self.scheduler, RealTimeScheduler):
            self.scheduler.shutdown()

    def create_topics(self, topics: Sequence[Mapping[str, Any]]) -> Future[dict[str, KctlError | None]]:
        """Create topics; each mapping has ``name`` and either ``partitions``/``replication_factor``
        or ``assignment``, optionally ``config``. The future maps each name to None or its error."""
        return self._put_admin(ev.CreateTopics(topics=tuple(topics)))

    def create_partitions(
        self, increases: Mapping[str, int], assignments: Mapping[str, Mapping[int, Sequence[int]]] | None = None
    ) -> Future[dict[str, KctlError | None]]:
        """Grow topics to new partition counts (optionally with explicit replica lists)."""
        return self._put_admin(ev.CreatePartitions(increases=dict(increases), assignments=dict(assignments or {})))

    def delete_topics(self, topics: Iterable[str]) -> Future[dict[str, KctlError | None]]:
        return self._put_admin(ev.DeleteTopics(topics=tuple(topics)))

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> Future[dict[TopicPartition, KctlError | None]]:
        """Start (target replicas) or cancel (``None``) reassignments; per partition None or an error."""
        targets = {tp: (None if r is None else tuple(r)) for tp, r in reassignments.items()}
        return self._put_checked(ev.ApiPartitionReassignment(reassignments=targets), lambda: _check_partitions(targets))

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> Future[dict[TopicPartition, ReplicaAssignment]]:
        event = ev.ListPartitionReassignments(partitions=None if partitions is None else frozenset(partitions))
        return self._put_checked(event, lambda: _check_partitions(event.partitions or ()))

    def elect_leaders(
        self, partitions: Iterable[TopicPartition], election_type: str = "preferred"
    ) -> Future[ElectionResults]:
        """Preferred or unclean elections; per partition the new leader or an error."""
        kind = ev.ElectionType(election_type)
        event = ev.ReplicaLeaderElection(partitions=frozenset(partitions), election_type=kind, trigger=ev.ElectionTrigger.ADMIN)
        return self._put_checked(event, lambda: _check_partitions(event.partitions or ()))

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Future[list[TopicPartition]]:
        """Move leadership off a broker; the future holds the partitions it still leads."""
        event = ev.ControlledShutdown(broker_id=broker_id, broker_epoch=broker_epoch)
        return self._put_checked(event, lambda: _check_sender(broker_id, broker_epoch))

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Future[ProducerIdBlock]:
        """A new block of producer ids for a live broker, written to the store first."""
        event = ev.AllocateProducerIds(broker_id=broker_id, broker_epoch=broker_epoch)
        return self._put_checked(event, lambda: _check_sender(broker_id, broker_epoch))

    def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Mapping[TopicPartition, LeaderAndIsr]
    ) -> Future[dict[TopicPartition, LeaderAndIsr | KctlError]]:
        """A partition leader's ISR changes; a top-level failure is the future's exception."""
        proposals = dict(changes)
        event = ev.AlterPartitionReceived(broker_id=broker_id, broker_epoch=broker_epoch, changes=proposals)
        return self._put_checked(event, lambda: _check_alter_partition(broker_id, broker_epoch, proposals))

    def update_config(self, properties: Mapping[str, Any]) -> None:
        """Dynamic broker-config update (checked here, selector names included, and applied between
        two events); enabling unclean election re-runs offline elections."""
        config = self.config.with_properties(properties)
        self._host().leader_selectors().check_config(config)
        enabling = not self.config.unclean_leader_election_enable and config.unclean_leader_election_enable

        def apply() -> None:
            self.config = self.partition_state_machine.config = config

        self.event_manager.call(apply)
        if enabling:
            self.event_manager.put(ev.UncleanLeaderElectionEnable())

    def metrics(self) -> dict[str, float]:
        """Kafka's controller metrics (zero on an inactive controller, as in Kafka); ``ControllerState``
        is the state of the event in progress when called, the others are read between two events."""
        state = self.event_manager.state
        return {**self.inspect(KafkaController._metrics), "ControllerState": state.kafka_value}

    def _metrics(self) -> dict[str, float]:
        ctx, active = self.context, self.is_active
        stats = self.event_manager.stats
        queue_time = stats.queue_time_ms
        deleting = list(ctx.topics_to_be_deleted) if active else []
        ineligible = [t for t in deleting if ctx.is_topic_ineligible_for_deletion(t)]
        return {
            "ActiveControllerCount": 1 if active else 0,
            "OfflinePartitionsCount": ctx.offline_partition_count if active else 0,
            "PreferredReplicaImbalanceCount": ctx.preferred_replica_imbalance_count if active else 0,
            "GlobalTopicCount": len(ctx.all_topics) if active else 0,
            "GlobalPartitionCount": len(ctx.partitions_with_leaders()) if active else 0,
            "TopicsToDeleteCount": len(deleting),
            "ReplicasToDeleteCount": sum(len(ctx.replicas_for_topic(t)) for t in deleting),
            "TopicsIneligibleToDeleteCount": len(ineligible),
            "ReplicasIneligibleToDeleteCount": sum(
                len(ctx.replicas_in_state(t, ReplicaState.DELETION_INELIGIBLE)) for t in ineligible
            ),
            "ActiveBrokerCount": len(ctx.live_or_shutting_down_broker_ids) if active else 0,
            "FencedBrokerCount": 0,  # as in Kafka's ZooKeeper mode, which fences no broker
            "UncleanLeaderElections": ctx.unclean_leader_elections,
            "ControllerEpoch": ctx.epoch if active else 0,
            "EventQueueSize": self.event_manager.queue_size,
            "EventQueueTimeMs": queue_time.mean,
            "EventQueueTimeMsCount": queue_time.count,
            "EventQueueTimeMsMax": queue_time.max,
            "EventQueueTimeMs50thPercentile": queue_time.percentile(0.5),
            "EventQueueTimeMs99thPercentile": queue_time.percentile(0.99),
            "EventsProcessed": stats.processed,
        }

    # --- Plumbing ------------------------------------------------------------------------------

    def _new_batch(self) -> ControllerBrokerRequestBatch:
        return self.engine_parts.request_batch(
            self.broker_id,
            self.context,
            self.config,
            channel=self.channel,
            on_response=self._on_response,
            update_metadata_callback=self._update_metadata_callback,
            state_change_logger=self.state_change_logger,
        )

    def _put(self, event: E) -> E:
        self.event_manager.put(event)
        return event

    def _put_checked(self, event: ev.EventWithFuture, check: Callable[[], None]) -> Future[Any]:
        """Enqueue ``event`` unless ``check`` refuses the caller's arguments (ids outside Kafka's
        ``Int``, which no partition or broker can have and the engine cannot hold): then its
        future fails at once with the error, and nothing is done."""
        future = event.future
        try:
            check()
        except KctlError as e:
            future.set_exception(e)
            return future
        self._put(event)
        return future

    def _put_admin(self, event: ev.TopicAdminRequest) -> Future[dict[str, KctlError | None]]:
        future: Future[dict[str, KctlError | None]] = self._put(event).future
        return future

    def _on_response(self, received: ResponseReceived) -> None:
        self.event_manager.put(ev.BrokerResponseReceived.of(received))

    def _update_metadata_callback(self, broker: int) -> Callable[[Any], None]:
        """What hears the broker's UpdateMetadata responses: each is an event, the same event
        while the broker answers with the same (immutable) response object, as a simulated broker
        answers every accepted request; an accepted answer's event, which processing only counts,
        is queued as a repeatable one (a fan-out's answers share an entry of the queue), and the
        accepted answers of several brokers in a row can be queued at once (``repeatable``)."""
        put, put_repeatable = self.event_manager.put, self.event_manager.put_repeatable
        last: ev.UpdateMetadataResponseReceived | None = None

        def answered(response: Any) -> None:
            nonlocal last
            event = last
            if event is None or event.received.response is not response:
                event = last = ev.UpdateMetadataResponseReceived(received=UpdateMetadataResponseReceived(broker, response))
            if response.error is _NO_ERROR:
                put_repeatable(event)
            else:
                put(event)
        return repeatable(answered, self._accepted_updates)

    def _queue_accepted_updates(self, broker: int, response: Any, times: int) -> bool:
        """``times`` accepted UpdateMetadata answers ``response`` in a row, the first from
        ``broker``, queued as the repeatable event they are (False for an error, which is an event
        of its own)."""
        if response.error is not _NO_ERROR:
            return False
        event = ev.UpdateMetadataResponseReceived(received=UpdateMetadataResponseReceived(broker, response))
        self.event_manager.put_repeatable(event, times)
        return True

    def _on_watch(self, event: WatchEvent) -> None:
        """Store watches become controller events (the store calls this; it must not block)."""
        put = self.event_manager.put
        kind, change = event.kind, event.change
        if kind is WatchKind.SESSION:
            if change is ChangeType.EXPIRED:
                self.event_manager.clear_and_put(ev.Expire())
            elif change is ChangeType.RECONNECTED:
                put(ev.Reelect())
        elif kind is WatchKind.CONTROLLER:
            put(ev.Reelect() if change is ChangeType.DELETED else ev.ControllerChange())
        elif (kind, event.key) not in self._watches and (kind, None) not in self._watches:
            return  # no longer interested (resigned, topic deleted …)
        elif kind is WatchKind.BROKER_IDS:
            put(ev.BrokerChange())
        elif kind is WatchKind.BROKER:
            put(ev.BrokerModifications(broker_id=int(event.key)))  # type: ignore[call-overload]
        elif kind is WatchKind.TOPICS:
            put(ev.TopicChange())
        elif kind is WatchKind.TOPIC:
            # ZooKeeper's data watches fire once: Kafka's ZooKeeperClient sets the topic's again
            # only with the GetData its PartitionModifications sends (shouldWatch), so the writes of
            # one event (a reassignment rewrites the znode per partition) queue one event, not many.
            topic = str(event.key)
            if topic not in self._fired_topic_watches:
                self._fired_topic_watches.add(topic)
                put(ev.PartitionModifications(topic=topic))
        elif kind is WatchKind.DELETE_TOPICS:
            put(ev.TopicDeletion())
        elif kind is WatchKind.REASSIGN_PARTITIONS:
            if change is ChangeType.CREATED:
                put(ev.ZkPartitionReassignment())
        elif kind is WatchKind.PREFERRED_REPLICA_ELECTION:
            if change is ChangeType.CREATED:
                put(ev.ReplicaLeaderElection.zk_triggered())
        elif kind is WatchKind.ISR_CHANGE_NOTIFICATION:
            put(ev.IsrChangeNotification())
        elif kind is WatchKind.LOG_DIR_EVENT_NOTIFICATION:
            put(ev.LogDirEventNotification())
        elif kind is WatchKind.PARTITION_STATE:
            put(ev.PartitionReassignmentIsrChange(partition=event.key))  # type: ignore[arg-type]
        elif kind is WatchKind.TOPIC_CONFIG:
            put(ev.TopicConfigChange(topic=str(event.key)))

    def _watch(self, kind: WatchKind, key: object = None) -> None:
        if kind is WatchKind.TOPIC:
            self._fired_topic_watches.discard(str(key))
        self._watches.add((kind, key))
        self.store.watch(kind, key)

    def _watch_all(self, kind: WatchKind, keys: Sequence[object]) -> None:
        """:meth:`_watch` for each key; in one round of requests when the store can
        (:class:`~kctl.stores.base.BulkWatches`): a failover watches every topic and broker."""
        if kind is WatchKind.TOPIC:
            self._fired_topic_watches.difference_update(map(str, keys))
        self._watches.update((kind, key) for key in keys)
        if isinstance(self.store, BulkWatches):
            self.store.watch_all(kind, keys)
            return
        for key in keys:
            self.store.watch(kind, key)

    def _unwatch(self, kind: WatchKind, key: object = None) -> None:
        self._watches.discard((kind, key))
        self.store.unwatch(kind, key)

    def _watch_topic(self, topic: str) -> None:
        """A topic's assignment (new partitions) and its config (unclean election enabled)."""
        self._watch(WatchKind.TOPIC, topic)
        self._watch(WatchKind.TOPIC_CONFIG, topic)

    def _unwatch_topic(self, topic: str) -> None:
        self._unwatch(WatchKind.TOPIC, topic)
        self._unwatch(WatchKind.TOPIC_CONFIG, topic)

    def _handle_broker_request(self, request: Any, callback: Callable[[Any], None]) -> None:
        """Broker → controller requests arriving through the transport."""
        if isinstance(request, ControlledShutdownRequest):
            future = self.controlled_shutdown(request.broker_id, request.broker_epoch)

            def answer_shutdown(f: Future[list[TopicPartition]]) -> None:
                error = f.exception()
                if error is None:
                    callback(ControlledShutdownResponse(Errors.NONE, tuple(f.result())))
                else:
                    callback(ControlledShutdownResponse(error_of(error)))

            future.add_done_callback(answer_shutdown)
        elif isinstance(request, AlterPartitionRequest):
            alter = self.alter_partition(request.broker_id, request.broker_epoch, request.changes)

            def answer_alter(f: Future[dict[TopicPartition, LeaderAndIsr | KctlError]]) -> None:
                error = f.exception()
                if error is not None:
                    callback(AlterPartitionResponse(error_of(error)))
                    return
                results = {tp: (r if isinstance(r, LeaderAndIsr) else r.error) for tp, r in f.result().items()}
                callback(AlterPartitionResponse(Errors.NONE, results))

            alter.add_done_callback(answer_alter)
        elif isinstance(request, AllocateProducerIdsRequest):
            allocate = self.allocate_producer_ids(request.broker_id, request.broker_epoch)

            def answer_allocate(f: Future[ProducerIdBlock]) -> None:
                error = f.exception()
                if error is not None:
                    callback(AllocateProducerIdsResponse(error_of(error)))
                    return
                block = f.result()
                callback(AllocateProducerIdsResponse(Errors.NONE, block.block_start,
                                                     block.block_end - block.block_start + 1))

            allocate.add_done_callback(answer_allocate)
        else:
            log.warning("Controller %s ignored an unexpected request %r", self.broker_id, request)

    # --- Event processing ----------------------------------------------------------------------

    def _event_handlers(self) -> dict[type[ev.ControllerEvent], Callable[[Any], None]]:
        """Each event type's handler, bound once at construction (Kafka's ``process`` match)."""
        return dict([
            _handler(ev.Startup, self._process_Startup),
            _handler(ev.ControllerChange, self._process_ControllerChange),
            _handler(ev.Reelect, self._process_Reelect),
            _handler(ev.Expire, self._process_Expire),
            _handler(ev.BrokerChange, self._process_BrokerChange),
            _handler(ev.BrokerModifications, self._process_BrokerModifications),
            _handler(ev.TopicChange, self._process_TopicChange),
            _handler(ev.PartitionModifications, self._process_PartitionModifications),
            _handler(ev.TopicDeletion, self._process_TopicDeletion),
            _handler(ev.TopicConfigChange, self._process_TopicConfigChange),
            _handler(ev.UncleanLeaderElectionEnable, self._process_UncleanLeaderElectionEnable),
            _handler(ev.TopicUncleanLeaderElectionEnable, self._process_TopicUncleanLeaderElectionEnable),
            _handler(ev.CreateTopics, self._process_CreateTopics),
            _handler(ev.CreatePartitions, self._process_CreatePartitions),
            _handler(ev.DeleteTopics, self._process_DeleteTopics),
            _handler(ev.ApiPartitionReassignment, self._process_ApiPartitionReassignment),
            _handler(ev.ZkPartitionReassignment, self._process_ZkPartitionReassignment),
            _handler(ev.PartitionReassignmentIsrChange, self._process_PartitionReassignmentIsrChange),
            _handler(ev.ListPartitionReassignments, self._process_ListPartitionReassignments),
            _handler(ev.ReplicaLeaderElection, self._process_ReplicaLeaderElection),
            _handler(ev.AutoPreferredReplicaLeaderElection, self._process_AutoPreferredReplicaLeaderElection),
            _handler(ev.ControlledShutdown, self._process_ControlledShutdown),
            _handler(ev.AlterPartitionReceived, self._process_AlterPartitionReceived),
            _handler(ev.AllocateProducerIds, self._process_AllocateProducerIds),
            _handler(ev.IsrChangeNotification, self._process_IsrChangeNotification),
            _handler(ev.LogDirEventNotification, self._process_LogDirEventNotification),
            _handler(ev.LeaderAndIsrResponseReceived, self._process_LeaderAndIsrResponseReceived),
            _handler(ev.UpdateMetadataResponseReceived, self._process_UpdateMetadataResponseReceived),
            _handler(ev.TopicDeletionStopReplicaResponseReceived, self._process_TopicDeletionStopReplicaResponseReceived),
        ])

    def _process(self, event: ev.ControllerEvent) -> None:
        handler = self._handlers.get(type(event), self._process_unknown)
        try:
            handler(event)
        except ControllerMovedError:
            log.info("Controller %s moved to another broker when processing %s", self.broker_id, event.name)
            self._maybe_resign()
        except Exception as e:  # one bad event never stops the controller
            log.error("Controller %s: error processing event %s", self.broker_id, event.name, exc_info=True)
            future = getattr(event, "future", None)
            if future is not None and not future.done():
                future.set_exception(e if isinstance(e, KctlError) else UnknownServerError(str(e)))

    def _process_unknown(self, event: ev.ControllerEvent) -> None:
        raise IllegalStateError(f"Controller {self.broker_id} has no handler for event {event.name}")

    # Controller election ------------------------------------------------------------------------

    def _process_Startup(self, event: ev.Startup) -> None:
        self.store.watch(WatchKind.CONTROLLER)  # kept for the controller's lifetime, active or not
        self._elect()

    def _process_ControllerChange(self, event: ev.ControllerChange) -> None:
        self._maybe_resign()

    def _process_Reelect(self, event: ev.Reelect) -> None:
        self._maybe_resign()
        self._elect()

    def _process_Expire(self, event: ev.Expire) -> None:
        self.active_controller_id = -1
        self._on_controller_resignation()

    def _elect(self) -> None:
        """Kafka's ``elect()``: register as the controller with the next epoch and take over. A
        failure of the takeover itself moves the controller away (resign, delete ``/controller``)
        rather than leave a half-initialised controller in charge (reference §6.2)."""
        if self.scheduler.now() < self._elect_not_before:
            log.info("Broker %s stays out of the election until its retry after a failed failover", self.broker_id)
            return
        try:
            self.active_controller_id = self._read_controller_id()
        except KctlError:
            log.warning("Controller %s could not read the active controller; will retry on the next change", self.broker_id)
            return
        if self.active_controller_id != -1:
            log.debug("Broker %s has been elected as the controller, so stopping the election process.", self.active_controller_id)
            return
        try:
            epoch, epoch_version = self.store.register_controller_and_increment_epoch(self.broker_id)
            self.context.epoch, self.context.epoch_zk_version = epoch, epoch_version
            self.active_controller_id = self.broker_id
            log.info("%s successfully elected as the controller. Epoch incremented to %s and epoch zk version is now %s",
                     self.broker_id, epoch, epoch_version)
            self._on_controller_failover()
        except ControllerMovedError:
            self._maybe_resign()
            if self.active_controller_id != -1:
                log.debug("Broker %s was elected as controller instead of broker %s", self.active_controller_id, self.broker_id)
            else:
                log.warning("A controller has been elected but just resigned, this will result in another round of election")
        except Exception:
            log.error("Error while electing or becoming controller on broker %s. Trigger controller movement immediately",
                      self.broker_id, exc_info=True)
            self._back_off_election()
            self._trigger_controller_move()

    def _back_off_election(self) -> None:
        """Stay out of elections for :data:`FAILED_FAILOVER_BACKOFF` seconds, then run again."""
        self._elect_not_before = self.scheduler.now() + FAILED_FAILOVER_BACKOFF
        if self._election_retry is not None:
            self._election_retry.cancel()

        def retry() -> None:
            self.event_manager.put(ev.Reelect())

        self._election_retry = self.scheduler.schedule(FAILED_FAILOVER_BACKOFF, retry, name=f"election-retry-{self.broker_id}")

    def _read_controller_id(self) -> int:
        """The registered controller's id, -1 when there is none (broker 0 is a valid controller)."""
        controller_id = self.store.get_controller_id()
        return -1 if controller_id is None else controller_id

    def _maybe_resign(self) -> None:
        """Re-read ``/controller`` and resign if it no longer names this broker. When it cannot be
        read, nothing changes (as in Kafka, where the read's exception ends the event): resigning
        locally would leave ``/controller`` registered to a controller that does not act."""
        was_active = self.is_active
        try:
            self.active_controller_id = self._read_controller_id()
        except KctlError as e:
            log.warning("Controller %s could not read the active controller (%s); keeping its role", self.broker_id, e)
            return
        if was_active and not self.is_active:
            self._on_controller_resignation()

    def _trigger_controller_move(self) -> None:
        """Kafka's ``triggerControllerMove``: resign and delete ``/controller`` (fenced by this
        controller's epoch, so a successor's registration is never removed) so that another
        candidate is elected. Still active as far as it knows when ``/controller`` cannot be
        read, it resigns all the same: the fence makes the delete safe."""
        try:
            self.active_controller_id = self._read_controller_id()
        except KctlError as e:
            log.warning("Controller %s could not read the active controller (%s)", self.broker_id, e)
        if not self.is_active:
            log.warning("Controller has already moved when trying to trigger controller movement")
            return
        fence = self.context.epoch_zk_version
        self.active_controller_id = -1
        try:
            self._on_controller_resignation()
        finally:
            try:
                self.store.delete_controller(fence)
            except ControllerMovedError:
                log.warning("Controller has already moved when trying to trigger controller movement")
            except KctlError as e:
                log.error("Controller %s could not delete its registration %s: %s", self.broker_id, "/controller", e)

    def _handle_illegal_state(self, error: IllegalStateError) -> None:
        """A batch left unsent is a bug; resign rather than risk inconsistent brokers."""
        log.error("Forcing the controller to resign")
        self.batch.clear()
        self._trigger_controller_move()
        raise error

    def _setup_feature_versioning(self) -> None:
        """Kafka's ``maybeSetupFeatureVersioning``, the first step of a failover: ``/feature``
        enabled from IBP 2.7-IV0 (its features kept, none if it was disabled; kctl's brokers
        finalize none), disabled without features before; format version 2 from IBP 3.3-IV0.
        Written only when it differs. A ``/feature`` that cannot be read is left as it is."""
        ibp = self.config.inter_broker_protocol_version
        try:
            found = self.store.get_finalized_features()
        except CorruptDataError as e:
            log.error("Leaving %s as it is: %s", paths.FEATURE, e)
            return
        version = 2 if ibp.at_least("3.3-IV0") else 1
        if not ibp.at_least("2.7-IV0"):
            wanted = FinalizedFeatures(version, FEATURE_STATUS_DISABLED, {})
        elif found is not None and found.status == FEATURE_STATUS_ENABLED:
            wanted = FinalizedFeatures(version, FEATURE_STATUS_ENABLED, found.features)
        else:
            wanted = FinalizedFeatures(version, FEATURE_STATUS_ENABLED, {})
        if found != wanted:
            log.info("Setting %s to %s", paths.FEATURE, wanted)
            self.store.set_finalized_features(wanted)

    def _register_controller_entry(self) -> None:
        """Register the broker entry brokers find this controller by, when the transport has one
        (:class:`~kctl.transports.base.AdvertisedController`): registered while active, in the
        session that holds ``/controller``, so both go together when it ends."""
        if not isinstance(self.transport, AdvertisedController):
            return
        entry = self.transport.controller_registration(self.broker_id)
        if entry is not None:
            self.store.register_broker(entry)
            self._entry_registered = True
            log.info("Registered the controller's entry %s", ",".join(map(str, entry.endpoints)))

    def _deregister_controller_entry(self) -> None:
        if not self._entry_registered:
            return
        self._entry_registered = False
        try:
            self.store.deregister_broker(self.broker_id)
        except KctlError as e:  # an ended session took it with it
            log.warning("Controller %s could not delete its broker entry: %s", self.broker_id, e)

    def _live_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        """The registered brokers with their epochs, without controllers' entries: those never
        lead, host replicas or receive requests."""
        return {b: found for b, found in self.store.get_all_brokers().items() if not found[0].controller_only}

    def _on_controller_failover(self) -> None:
        ctx, store = self.context, self.store
        self._setup_feature_versioning()
        self._register_controller_entry()
        for kind in (WatchKind.BROKER_IDS, WatchKind.TOPICS, WatchKind.DELETE_TOPICS,
                     WatchKind.LOG_DIR_EVENT_NOTIFICATION, WatchKind.ISR_CHANGE_NOTIFICATION,
                     WatchKind.PREFERRED_REPLICA_ELECTION, WatchKind.REASSIGN_PARTITIONS):
            self._watch(kind)
        store.delete_isr_change_notifications(store.get_isr_change_notifications(), ctx.epoch_zk_version)
        store.delete_log_dir_event_notifications(store.get_log_dir_event_notifications(), ctx.epoch_zk_version)
        self._initialize_controller_context()

        queued = store.get_topic_deletions()
        reassigning_topics = self.reassignment_manager.reassigning_topics()
        ineligible = [
            t for t in queued
            if t in reassigning_topics
            or any(not ctx.is_replica_online(r.broker, r.tp) for r in ctx.replicas_for_topic(t))
        ]
        self.deletion_manager.init(queued, ineligible)

        self._send_update_metadata_to_all()
        with self.state_change_logger.held():  # their lines after the elections' writes
            self.replica_state_machine.startup()
            self.partition_state_machine.startup()
        log.info("Ready to serve as the new controller with epoch %s", ctx.epoch)
        self.reassignment_manager.initialize()
        self.deletion_manager.try_topic_deletion()
        pending = sorted(self._fetch_pending_preferred_replica_elections())
        self._on_replica_election(pending, ev.ElectionType.PREFERRED, ev.ElectionTrigger.ZK)
        if self.config.auto_leader_rebalance_enable:
            self._schedule_auto_leader_rebalance(AUTO_REBALANCE_FIRST_DELAY)
        self._announced = True
        self._host().kctl_controller_started(self)

    def _on_controller_resignation(self) -> None:
        for kind, key in list(self._watches):
            self._unwatch(kind, key)
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        was_initialized = self.context.epoch != 0
        self.partition_state_machine.shutdown()
        self.replica_state_machine.shutdown()
        for broker in sorted(self.context.live_or_shutting_down_broker_ids):
            self.channel.remove_broker(broker)
        for batch in (self.batch, self.partition_state_machine.batch, self.replica_state_machine.batch):
            batch.clear()
        self._deregister_controller_entry()
        if was_initialized:
            log.info("Resigned as the controller (broker %s, epoch %s)", self.broker_id, self.context.epoch)
        if self._announced:  # observers hear of a resignation only after its start (a failed failover: neither)
            self._announced = False
            self._host().kctl_controller_resigned(self)
        self.context.reset_context()

    def _host(self) -> PluginHost:
        return self.plugins if self.plugins is not None else get_plugin_host()

    def _initialize_controller_context(self) -> None:
        ctx, store = self.context, self.store
        brokers = self._live_brokers()
        ctx.set_live_brokers({b: epoch for b, (_, epoch) in brokers.items()}, {b: info for b, (info, _) in brokers.items()})
        topics = sorted(store.get_all_topics())
        self._watch_all(WatchKind.TOPIC, topics)  # what _watch_topic watches, for every topic
        self._watch_all(WatchKind.TOPIC_CONFIG, topics)
        self._load_topics(topics)
        ctx.clear_partition_leadership()
        ctx.remove_shutting_down_brokers(list(ctx.shutting_down_broker_ids))
        self._watch_all(WatchKind.BROKER, sorted(brokers))
        self._update_leader_and_isr_cache(ctx.all_partitions())
        for info, _ in (brokers[b] for b in sorted(brokers)):
            self.channel.add_broker(info)

    def _load_topics(self, topics: Sequence[str]) -> dict[str, _Loaded]:
        """Read topics' assignments into the context (giving topic ids to those without);
        returns each loaded topic's partitions and their assignments as read. A topic whose stored
        assignment is unreadable is logged and skipped."""
        ctx = self.context
        read = self.store.get_topic_assignments(topics)
        ctx.reserve_partitions(sum(len(assignment.partitions) for assignment in read.values.values()))
        added: dict[str, _Loaded] = {}
        for topic in topics:
            if topic in read.errors:
                log.error("Skipping topic %s: %s", topic, read.errors[topic])
                continue
            assignment = read.values.get(topic)
            if assignment is None:
                continue
            topic_id = assignment.topic_id
            if topic_id is None and self.config.uses_topic_ids:
                topic_id = admin.generate_topic_id(self.scheduler.rng)
                self.store.set_topic_assignment(topic, TopicAssignment(assignment.partitions, topic_id), ctx.epoch_zk_version)
            ctx.add_topic(topic, topic_id)
            added[topic] = (ctx.put_topic_assignment(topic, assignment.partitions), assignment.partitions)
        return added

    def _update_leader_and_isr_cache(self, partitions: Iterable[TopicPartition]) -> None:
        """Cache stored states as they are (keeping the epoch of the controller that wrote them)."""
        for tp, error in self.context.load_partition_leaderships(self.store, partitions).items():
            log.error("Skipping the stored state of %s: %s", tp, error)

    def _fetch_pending_preferred_replica_elections(self) -> set[TopicPartition]:
        ctx = self.context
        try:
            pending = self.store.get_preferred_replica_election() or set()
        except KctlError as e:
            log.error("Ignoring the pending preferred replica election: %s", e)
            return set()
        result = set()
        for tp in pending:
            if tp.topic not in ctx.all_topics or ctx.is_topic_queued_up_for_deletion(tp.topic):
                continue
            leadership = ctx.partition_leadership(tp)
            replicas = ctx.partition_replica_assignment(tp)
            if leadership is not None and replicas and leadership.leader_and_isr.leader == replicas[0]:
                continue
            result.add(tp)
        return result

    # Brokers ------------------------------------------------------------------------------------

    @_active_only
    def _process_BrokerChange(self, event: ev.BrokerChange) -> None:
        ctx = self.context
        current = self._live_brokers()
        known = ctx.live_or_shutting_down_broker_ids
        new = sorted(b for b in current if b not in known)
        dead = sorted(b for b in known if b not in current)
        bounced = sorted(b for b in current if b in known and current[b][1] > (ctx.live_broker_epoch(b) or -1))
        log.info("Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
                 _joined(new), _joined(dead), _joined(bounced), _joined(sorted(current)))
        for b in new:
            self.channel.add_broker(current[b][0])
        for b in bounced:
            self.channel.remove_broker(b)
            self.channel.add_broker(current[b][0])
        for b in dead:
            self.channel.remove_broker(b)
        if new:
            ctx.add_live_brokers({b: current[b][1] for b in new}, {b: current[b][0] for b in new})
            self._on_broker_startup(new)
        if bounced:
            ctx.remove_live_brokers(bounced)
            self._on_broker_failure(bounced)
            ctx.add_live_brokers({b: current[b][1] for b in bounced}, {b: current[b][0] for b in bounced})
            self._on_broker_startup(bounced)
        if dead:
            ctx.remove_live_brokers(dead)
            self._on_broker_failure(dead)

    @_active_only
    def _process_BrokerModifications(self, event: ev.BrokerModifications) -> None:
        current = self._live_brokers().get(event.broker_id)
        known = {b.id: b for b in self.context.live_or_shutting_down_brokers()}.get(event.broker_id)
        if current is None or known is None:
            return
        info = current[0]
        # Kafka compares endpoints and features only: the rack is static broker config, which
        # changes only with a restart (a new registration, handled as a bounce).
        if info.endpoints != known.endpoints or info.features != known.features:
            log.info("Updated broker metadata: %s -> %s", known, info)
            self.context.update_broker_metadata(info)
            self._send_update_metadata_to_all()

    def _on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.context
        log.info("New broker startup callback for %s", _joined(new_brokers))
        ctx.clear_replicas_on_offline_dirs(new_brokers)
        existing = sorted(ctx.live_or_shutting_down_broker_ids - set(new_brokers))
        self._send_update_metadata_request(existing)
        self._send_update_metadata_request(new_brokers, ctx.partitions_with_leaders())
        replicas = ctx.replicas_on_brokers(new_brokers)
        self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)
        self.partition_state_machine.trigger_online_partition_state_change()
        new = set(new_brokers)
        self.reassignment_manager.maybe_resume_reassignments(lambda tp, ra: any(r in new for r in ra.target_replicas))
        deleting, _ = ctx.split_replicas_by_topic_deletion(replicas)
        if deleting:
            self.deletion_manager.resume_deletion_for_topics(dict.fromkeys(r.tp.topic for r in deleting))
        for broker in new_brokers:
            self._watch(WatchKind.BROKER, broker)

    def _on_broker_failure(self, dead_brokers: list[int]) -> None:
        ctx = self.context
        log.info("Broker failure callback for %s", _joined(dead_brokers))
        ctx.clear_replicas_on_offline_dirs(dead_brokers)
        shutting_down = sorted(set(dead_brokers) & ctx.shutting_down_broker_ids)
        if shutting_down:
            log.info("Removed %s from list of shutting down brokers.", shutting_down)
        ctx.remove_shutting_down_brokers(dead_brokers)
        self._on_replicas_become_offline(ctx.replicas_on_brokers(dead_brokers))
        for broker in dead_brokers:
            self._unwatch(WatchKind.BROKER, broker)

    def _on_replicas_become_offline(self, replicas: Sequence[PartitionReplica]) -> None:
        ctx = self.context
        for_deletion, others = ctx.split_replicas_by_topic_deletion(replicas)
        offline_leader = ctx.partitions_with_offline_leader()
        self.partition_state_machine.handle_state_changes(offline_leader, PartitionState.OFFLINE)
        self.partition_state_machine.trigger_online_partition_state_change()
        self.replica_state_machine.handle_state_changes(others, ReplicaState.OFFLINE)
        if for_deletion:
            self.deletion_manager.fail_replica_deletion(for_deletion)
        if not offline_leader:
            # Nobody was told about the dead replicas through a leader change: tell everyone.
            self._send_update_metadata_to_all()

    def _send_update_metadata_request(self, brokers: Sequence[int], partitions: Iterable[TopicPartition] = ()) -> None:
        self._send_requests(lambda batch: batch.add_update_metadata_request_for_brokers(brokers, partitions))

    def _send_update_metadata_to_all(self, partitions: Iterable[TopicPartition] = ()) -> None:
        """UpdateMetadata of ``partitions`` (none: the live brokers only) to every live or shutting-down broker."""
        self._send_update_metadata_request(sorted(self.context.live_or_shutting_down_broker_ids), partitions)

    def _send_requests(self, add: Callable[[ControllerBrokerRequestBatch], None]) -> None:
        """A new batch of the controller's own, filled by ``add`` and sent; a batch left in a bad
        state makes the controller resign (:meth:`_handle_illegal_state`)."""
        try:
            self.batch.new_batch()
            add(self.batch)
            self.batch.send_requests_to_brokers(self.context.epoch, record=False)
        except IllegalStateError as e:
            self._handle_illegal_state(e)

    # Topics -------------------------------------------------------------------------------------

    @_active_only
    def _process_TopicChange(self, event: ev.TopicChange) -> None:
        ctx = self.context
        topics = self.store.get_all_topics()
        new = sorted(t for t in topics if t not in ctx.all_topics)
        deleted = sorted(t for t in ctx.all_topics if t not in topics)
        for topic in new:
            self._watch_topic(topic)
        for topic in deleted:
            self._unwatch_topic(topic)
            ctx.remove_topic(topic)
        loaded = self._load_topics(new)
        lists = [partitions for partitions, _ in loaded.values()]
        # one new topic (the usual case): its partitions as the context returned them, which the
        # native engine takes back as they are rather than one object per partition
        added = lists[0] if len(lists) == 1 else [tp for partitions in lists for tp in partitions]
        with self._lines_held():
            # the assignment of every new partition, as Kafka prints it, made text after the writes
            log.info("New topics: [%s], deleted topics: [%s], new partition replica assignment [%s]",
                     _joined(new), _joined(deleted), LogText(lambda: _assignments_text(added, loaded)))
            if added:
                self._on_new_partition_creation(added)

    def _process_PartitionModifications(self, event: ev.PartitionModifications) -> None:
        self._fired_topic_watches.discard(event.topic)
        if not self.is_active:
            return
        ctx, topic = self.context, event.topic
        read = self.store.get_topic_assignments([topic])
        if topic in read.errors or topic not in read.values:
            if topic in read.errors and not isinstance(read.errors[topic], NoNodeError):
                log.error("Ignoring a change of topic %s: %s", topic, read.errors[topic])
            return
        stored = read.values[topic].partitions
        known = ctx.partition_full_replica_assignment_for_topic(topic)
        to_add = {TopicPartition(topic, p): ra for p, ra in sorted(stored.items()) if p not in known or not known[p].replicas}
        if ctx.is_topic_queued_up_for_deletion(topic):
            if to_add:
                log.warning("Skipping adding partitions %s for topic %s since it is currently being deleted",
                            sorted(tp.partition for tp in to_add), topic)
                self._restore_partition_replica_assignment(topic)
            return
        if to_add:
            log.info("New partitions to be added %s", [str(tp) for tp in to_add])
            ctx.put_partition_assignments(to_add)
            self._on_new_partition_creation(list(to_add))

    def _restore_partition_replica_assignment(self, topic: str) -> None:
        ctx = self.context
        partitions = self.store.get_topic_partition_ids(topic)
        assignment = {p: ctx.partition_full_replica_assignment(TopicPartition(topic, p)) for p in partitions}
        self.store.set_topic_assignment(topic, TopicAssignment(assignment, ctx.topic_ids.get(topic)), ctx.epoch_zk_version)

    def _lines_held(self) -> AbstractContextManager[None]:
        """The state-change lines and every other kctl line made meanwhile on the event thread,
        written after its writes (:meth:`StateChangeLogger.held_all`), each with its time."""
        return self.state_change_logger.held_all()

    def _on_new_partition_creation(self, partitions: Sequence[TopicPartition]) -> None:
        with self._lines_held():  # the lines of the New transitions, and these, after the states' writes
            log.info("New partition creation callback for %s", LogText(lambda: ", ".join(map(str, partitions))))
            replicas = self.context.replicas_for_partitions(partitions)
            self.partition_state_machine.handle_state_changes(partitions, PartitionState.NEW)
            self.replica_state_machine.handle_state_changes(replicas, ReplicaState.NEW)
            self.partition_state_machine.handle_state_changes(
                partitions, PartitionState.ONLINE, for_config(ElectionKind.OFFLINE, self.config, self.plugins)
            )
            self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)

    @_active_only
    def _process_TopicDeletion(self, event: ev.TopicDeletion) -> None:
        ctx = self.context
        requested = self.store.get_topic_deletions()
        missing = [t for t in requested if t not in ctx.all_topics]
        if missing:
            log.warning("Ignoring request to delete non-existing topics %s", ", ".join(missing))
            self.store.delete_topic_deletions(missing, ctx.epoch_zk_version)
        to_delete = [t for t in requested if t in ctx.all_topics]
        if not self.config.delete_topic_enable:
            if to_delete:
                log.info("Removing %s since delete topic is disabled", ", ".join(to_delete))
                self.store.delete_topic_deletions(to_delete, ctx.epoch_zk_version)
            return
        if not to_delete:
            return
        log.info("Starting topic deletion for topics %s", ", ".join(to_delete))
        reassigning = self.reassignment_manager.reassigning_topics()
        self.deletion_manager.mark_topic_ineligible_for_deletion(
            [t for t in to_delete if t in reassigning], "topic reassignment in progress"
        )
        self.deletion_manager.enqueue_topics_for_deletion(to_delete)

    @_active_only
    def _process_TopicConfigChange(self, event: ev.TopicConfigChange) -> None:
        """Kafka's TopicConfigHandler: enabling unclean election for a topic re-runs its elections."""
        read = self.store.get_topic_configs([event.topic])
        value = read.values.get(event.topic, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
        try:
            enabled = value is not None and parse_topic_config(UNCLEAN_LEADER_ELECTION_ENABLE, value) is True
        except KctlError as e:
            log.warning("Ignoring the stored config of topic %s (%s): %s", event.topic, paths.topic_config(event.topic), e)
            enabled = False
        if enabled:
            self.event_manager.put(ev.TopicUncleanLeaderElectionEnable(topic=event.topic))

    @_active_only
    def _process_UncleanLeaderElectionEnable(self, event: ev.UncleanLeaderElectionEnable) -> None:
        self.partition_state_machine.trigger_online_partition_state_change()

    @_active_only
    def _process_TopicUncleanLeaderElectionEnable(self, event: ev.TopicUncleanLeaderElectionEnable) -> None:
        self.partition_state_machine.trigger_online_partition_state_change(event.topic)

    # Admin requests (topic creation and deletion, partition additions) --------------------------

    def _broker_racks(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in self.context.live_or_shutting_down_brokers() if b.id in self.context.live_broker_ids}

    @_active_or_not_controller
    def _process_CreateTopics(self, event: ev.CreateTopics) -> None:
        results: dict[str, KctlError | None] = {}
        for spec in event.topics:
            name = spec.get("name")
            try:
                if not isinstance(name, str):
                    raise InvalidTopicError(f"Topic name must be a string, not {name!r}")
                unknown = set(spec) - {"name", "partitions", "replication_factor", "assignment", "config"}
                if unknown:
                    raise InvalidTopicError(f"Unknown topic properties {sorted(unknown)} for topic {name}")
                assignment = spec.get("assignment")
                partitions = spec.get("partitions")
                rf = spec.get("replication_factor")
                if assignment is None:
                    partitions = self.config.num_partitions if partitions is None else partitions
                    rf = self.config.default_replication_factor if rf is None else rf
                topic_id = admin.generate_topic_id(self.scheduler.rng) if self.config.uses_topic_ids else None
                admin.create_topic(
                    self.store, name, broker_racks=self._broker_racks(), partitions=partitions,
                    replication_factor=rf, assignment=assignment, config=spec.get("config"),
                    topic_id=topic_id, rng=self.scheduler.rng,
                )
                results[str(name)] = None
            except KctlError as e:
                results[str(name)] = e
        event.future.set_result(results)

    @_active_or_not_controller
    def _process_CreatePartitions(self, event: ev.CreatePartitions) -> None:
        results: dict[str, KctlError | None] = {}
        for topic, total in event.increases.items():
            try:
                manual = event.assignments.get(topic)
                admin.add_partitions(self.store, topic, total, broker_racks=self._broker_racks(), manual=manual)
                results[topic] = None
            except KctlError as e:
                results[topic] = e
        event.future.set_result(results)

    @_active_or_not_controller
    def _process_DeleteTopics(self, event: ev.DeleteTopics) -> None:
        results: dict[str, KctlError | None] = {}
        for topic in event.topics:
            try:
                admin.delete_topic(self.store, topic, delete_topic_enable=self.config.delete_topic_enable)
                results[topic] = None
            except KctlError as e:
                results[topic] = e
        event.future.set_result(results)

    # Reassignment ---------------------------------------------------------------------------------

    @_active_or_not_controller
    def _process_ApiPartitionReassignment(self, event: ev.ApiPartitionReassignment) -> None:
        event.future.set_result(self.reassignment_manager.on_api_reassignment(event.reassignments))

    @_active_only
    def _process_ZkPartitionReassignment(self, event: ev.ZkPartitionReassignment) -> None:
        self.reassignment_manager.on_zk_reassignment()

    @_active_only
    def _process_PartitionReassignmentIsrChange(self, event: ev.PartitionReassignmentIsrChange) -> None:
        self.reassignment_manager.on_isr_change([event.partition])

    @_active_or_not_controller
    def _process_ListPartitionReassignments(self, event: ev.ListPartitionReassignments) -> None:
        event.future.set_result(self.reassignment_manager.list_reassignments(event.partitions))

    # Leader elections ---------------------------------------------------------------------------

    def _process_ReplicaLeaderElection(self, event: ev.ReplicaLeaderElection) -> None:
        ctx = self.context
        if not self.is_active:
            event.future.set_result({p: NotControllerError(f"Broker {self.broker_id} is not the controller")
                                     for p in event.partitions or ()})
            return
        if event.trigger is ev.ElectionTrigger.ZK:
            try:
                requested = self.store.get_preferred_replica_election()
            except KctlError as e:
                log.error("Ignoring the preferred replica election request: %s", e)
                self.store.delete_preferred_replica_election(ctx.epoch_zk_version)
                event.future.set_result({})
                return
            if requested is None:
                event.future.set_result({})
                return
            partitions = requested
        else:
            partitions = set(event.partitions or ())
        results: ElectionResults = {}
        electable: list[TopicPartition] = []
        for tp in sorted(partitions):
            if not ctx.partition_replica_assignment(tp):
                log.info("Skipping replica leader election (%s) for partition %s by %s since it doesn't exist.",
                         event.election_type.value, tp, event.trigger.value)
                results[tp] = UnknownTopicOrPartitionError("The partition does not exist.")
            elif ctx.is_topic_queued_up_for_deletion(tp.topic):
                results[tp] = InvalidTopicError("The topic is being deleted")
            elif self._election_not_needed(tp, event.election_type):
                results[tp] = ElectionNotNeededError("Leader election not needed for topic partition")
            else:
                electable.append(tp)
        for tp, outcome in self._on_replica_election(electable, event.election_type, event.trigger).items():
            if isinstance(outcome, LeaderAndIsr):
                results[tp] = outcome.leader
            elif isinstance(outcome, StateChangeFailedError):
                error_type = (PreferredLeaderNotAvailableError if event.election_type is ev.ElectionType.PREFERRED
                              else EligibleLeadersNotAvailableError)
                results[tp] = error_type(str(outcome))
            else:
                results[tp] = outcome if isinstance(outcome, KctlError) else UnknownServerError(str(outcome))
        event.future.set_result(results)

    def _election_not_needed(self, tp: TopicPartition, election_type: ev.ElectionType) -> bool:
        leadership = self.context.partition_leadership(tp)
        leader = NO_LEADER if leadership is None else leadership.leader_and_isr.leader
        if election_type is ev.ElectionType.PREFERRED:
            replicas = self.context.partition_replica_assignment(tp)
            return leader == replicas[0]
        return leader != NO_LEADER and leader in self.context.live_broker_ids

    def _on_replica_election(
        self, partitions: Sequence[TopicPartition], election_type: ev.ElectionType, trigger: ev.ElectionTrigger
    ) -> Mapping[TopicPartition, ElectionOutcome]:
        try:
            if election_type is ev.ElectionType.PREFERRED:
                election = for_config(ElectionKind.PREFERRED, self.config, self.plugins)
            else:  # unclean only when an admin asked for it
                election = for_config(ElectionKind.OFFLINE, self.config, self.plugins, allow_unclean=trigger is ev.ElectionTrigger.ADMIN)
            results = self.partition_state_machine.handle_state_changes(partitions, PartitionState.ONLINE, election)
            if trigger is not ev.ElectionTrigger.ADMIN:
                for tp, outcome in results.items():
                    if isinstance(outcome, ControllerMovedError):
                        raise outcome
                    if isinstance(outcome, Exception):
                        log.error("Error completing replica leader election (%s) for partition %s: %s",
                                  election_type.value, tp, outcome)
            return results
        finally:
            if trigger is not ev.ElectionTrigger.ADMIN:
                self._remove_partitions_from_preferred_replica_election(partitions, trigger is ev.ElectionTrigger.AUTO)

    def _remove_partitions_from_preferred_replica_election(self, partitions: Sequence[TopicPartition], auto: bool) -> None:
        ctx = self.context
        failed = ctx.partitions_not_led_by_preferred(partitions)
        for tp in failed:
            leadership = ctx.partition_leadership(tp)
            replicas = ctx.partition_replica_assignment(tp)
            log.warning("Partition %s failed to complete preferred replica leader election to %s. Leader is still %s",
                        tp, replicas[0] if replicas else None,
                        NO_LEADER if leadership is None else leadership.leader_and_isr.leader)
        if log.isEnabledFor(logging.INFO) and len(failed) < len(partitions):
            unfinished = set(failed)
            for tp in partitions:
                if tp not in unfinished:
                    log.info("Partition %s completed preferred replica leader election. New leader is %s",
                             tp, ctx.partition_replica_assignment(tp)[0])
        if not auto:
            self.store.delete_preferred_replica_election(ctx.epoch_zk_version)
            self.event_manager.put(ev.ReplicaLeaderElection.zk_triggered())

    def _schedule_auto_leader_rebalance(self, delay: float) -> None:
        def check() -> None:
            self.event_manager.put(ev.AutoPreferredReplicaLeaderElection())

        self._rebalance_timer = self.scheduler.schedule(delay, check, name=f"auto-leader-rebalance-{self.broker_id}")

    @_active_only
    def _process_AutoPreferredReplicaLeaderElection(self, event: ev.AutoPreferredReplicaLeaderElection) -> None:
        try:
            self._check_and_trigger_auto_leader_rebalance()
        finally:
            if self.is_active and self.config.auto_leader_rebalance_enable:
                self._schedule_auto_leader_rebalance(self.config.leader_imbalance_check_interval_seconds)

    def _check_and_trigger_auto_leader_rebalance(self) -> None:
        # Kafka 3.0 checks brokers in turn; any reassignment in progress blocks (KAFKA-10149 lifted it in 3.4).
        for _, candidates in self.context.auto_rebalance_candidates(self.config.leader_imbalance_ratio, True):
            self._on_replica_election(candidates, ev.ElectionType.PREFERRED, ev.ElectionTrigger.AUTO)

    # Controlled shutdown --------------------------------------------------------------------------

    def _process_ControlledShutdown(self, event: ev.ControlledShutdown) -> None:
        try:
            event.future.set_result(self._do_controlled_shutdown(event.broker_id, event.broker_epoch))
        except ControllerMovedError as e:
            event.future.set_exception(e)
            raise
        except KctlError as e:
            event.future.set_exception(e)

    def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        ctx = self.context
        if not self.is_active:
            raise ControllerMovedError("Controller moved to another broker. Aborting controlled shutdown")
        cached = ctx.live_broker_epoch(broker_id)
        if broker_epoch != UNKNOWN_BROKER_EPOCH and cached is not None and broker_epoch < cached:
            message = (f"Received controlled shutdown request from an old broker epoch {broker_epoch} for broker "
                       f"{broker_id}. Current broker epoch is {cached}.")
            log.info(message)
            raise StaleBrokerEpochError(message)
        log.info("Shutting down broker %s", broker_id)
        if cached is None:
            raise BrokerNotAvailableError(f"Broker id {broker_id} does not exist.")
        ctx.add_shutting_down_broker(broker_id)
        led, followed = ctx.controlled_shutdown_partitions(broker_id)
        self.partition_state_machine.handle_state_changes(
            led, PartitionState.ONLINE, for_config(ElectionKind.CONTROLLED_SHUTDOWN, self.config, self.plugins)
        )
        self._send_requests(lambda batch: batch.add_stop_replica_requests_for_brokers([broker_id], followed, False))
        self.replica_state_machine.handle_state_changes(ctx.replicas_of(followed, broker_id), ReplicaState.OFFLINE)
        return list(ctx.partition_leaders_on_broker(broker_id))

    @_active_or_not_controller
    def _process_AllocateProducerIds(self, event: ev.AllocateProducerIds) -> None:
        """Kafka's ``processAllocateProducerIds``: only a live broker at its current epoch gets a block."""
        cached = self.context.live_broker_epoch(event.broker_id)
        if cached is None:
            log.warning("Ignoring AllocateProducerIds due to unknown broker %s", event.broker_id)
            event.future.set_exception(BrokerIdNotRegisteredError(f"Broker id {event.broker_id} is not registered"))
        elif cached != event.broker_epoch:
            log.warning("Ignoring AllocateProducerIds due to stale broker epoch %s for broker %s",
                        event.broker_epoch, event.broker_id)
            event.future.set_exception(StaleBrokerEpochError(
                f"Broker {event.broker_id}'s epoch {event.broker_epoch} is not its current epoch {cached}"))
        else:
            event.future.set_result(allocate_producer_id_block(self.store, event.broker_id))

    # ISR changes ----------------------------------------------------------------------------------

    @_active_or_not_controller
    def _process_AlterPartitionReceived(self, event: ev.AlterPartitionReceived) -> None:
        ctx = self.context
        cached_epoch = ctx.live_broker_epoch(event.broker_id)
        if cached_epoch is None or cached_epoch != event.broker_epoch:
            log.info("Ignoring AlterPartition due to unknown or stale broker epoch %s for broker %s",
                     event.broker_epoch, event.broker_id)
            event.future.set_exception(StaleBrokerEpochError(
                f"Broker {event.broker_id} epoch {event.broker_epoch} is not the current epoch {cached_epoch}"
            ))
            return
        responses: dict[TopicPartition, LeaderAndIsr | KctlError] = {}
        eligible = self._isr_eligible_brokers()
        to_check = ctx.isr_changes_to_check(event.changes, eligible)
        if not to_check:
            to_write = dict(event.changes)  # a roll's plain proposals: written as proposed
        else:
            to_check = set(to_check)
            to_write = {}
            for tp, proposed in event.changes.items():
                verdict = self._alter_partition_verdict(event.broker_id, tp, proposed, eligible) if tp in to_check else None
                if verdict is None:
                    to_write[tp] = proposed
                else:
                    responses[tp] = verdict
        try:
            outcome = self.store.update_partition_states(to_write, ctx.epoch, ctx.epoch_zk_version)
        except ControllerMovedError as e:
            event.future.set_exception(e)
            raise
        except KctlError as e:
            log.error("Error when processing AlterPartition for partitions %s: %s", list(event.changes), e)
            # The writes may have landed with their answers lost: the leader's retry must find them.
            if resynced := self._resync_leader_and_isr_cache(to_write):
                self._send_update_metadata_to_all(resynced)
            event.future.set_exception(UnknownServerError(str(e)))
            return
        for tp, state in outcome.successful.items():
            responses[tp] = state
        for tp, error in outcome.failed.items():
            responses[tp] = error
        # BADVERSION: the state znode moved past the cache, which only a write whose answer was lost
        # (a connection loss) leaves behind; answer from the stored state as the checks see it.
        self._resync_leader_and_isr_cache(outcome.to_retry)
        for tp in outcome.to_retry:
            log.info("Failed to update ISR to %s for partition %s, bad ZK version.", to_write[tp], tp)
            verdict = self._alter_partition_verdict(event.broker_id, tp, to_write[tp], eligible)
            responses[tp] = InvalidUpdateVersionError(f"Partition epoch of {tp} is stale") if verdict is None else verdict
        self._update_leader_and_isr_cache(list(outcome.successful))
        self._send_update_metadata_to_all(list(event.changes))
        event.future.set_result(responses)
        self.reassignment_manager.on_isr_change(tp for tp, response in responses.items() if isinstance(response, LeaderAndIsr))

    def _isr_eligible_brokers(self) -> frozenset[int] | None:
        """The brokers a proposed ISR may name (the live ones) when the inter-broker protocol has
        the check (3.3-IV0 on), else None: read once per AlterPartition, not per partition."""
        if self.config.inter_broker_protocol_version.at_least("3.3-IV0"):
            return frozenset(self.context.live_broker_ids)
        return None

    def _alter_partition_verdict(
        self, broker_id: int, tp: TopicPartition, proposed: LeaderAndIsr, eligible: frozenset[int] | None,
    ) -> LeaderAndIsr | KctlError | None:
        """Kafka 3.9's checks of one proposed state, in its order, against the cached state: the
        answer, or None when the proposal is to be written (``eligible``:
        :meth:`_isr_eligible_brokers`)."""
        leadership = self.context.partition_leadership(tp)
        if leadership is None:
            return UnknownTopicOrPartitionError(f"Partition {tp} does not exist")
        current = leadership.leader_and_isr
        if proposed.partition_epoch > current.partition_epoch or proposed.leader_epoch > current.leader_epoch:
            # The leader knows a newer state than this controller: likely no longer the controller.
            return NotControllerError(
                f"{tp} at leader epoch {proposed.leader_epoch}, partition epoch {proposed.partition_epoch} is newer "
                f"than the controller's {current.leader_epoch}, {current.partition_epoch}"
            )
        if proposed.leader_epoch < current.leader_epoch:
            return FencedLeaderEpochError(
                f"Leader epoch {proposed.leader_epoch} of {tp} is older than the current {current.leader_epoch}"
            )
        if proposed.equals_ignoring_partition_epoch(current):
            return current  # idempotent: checked before the partition epoch, for a retry of a lost answer
        if proposed.partition_epoch < current.partition_epoch:
            return InvalidUpdateVersionError(
                f"Partition epoch {proposed.partition_epoch} of {tp} is older than the current {current.partition_epoch}"
            )
        if (recovery := _recovery_refusal(current, proposed)) is not None:
            log.info("Rejecting AlterPartition from node %s for %s because %s: %s", broker_id, tp, recovery, proposed)
            return InvalidRequestError(f"AlterPartition of {tp} refused: {recovery}")
        if eligible is not None and not eligible.issuperset(proposed.isr):
            ineligible = sorted({b for b in proposed.isr if b not in eligible})
            log.info("Rejecting AlterPartition request from node %s for %s because it specified ineligible "
                     "replicas %s in the new ISR %s.", broker_id, tp, ineligible, list(proposed.isr))
            return IneligibleReplicaError(f"ISR {list(proposed.isr)} of {tp} names brokers that are not live")
        return None

    def _resync_leader_and_isr_cache(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Read the partitions' states back from the store after writes whose outcome the cache
        missed, and cache them; the partitions whose cached state changed. A store that cannot
        answer leaves the cache as it was (the leader retries)."""
        ctx = self.context
        partitions = list(partitions)
        if not partitions:
            return []
        before = {tp: ctx.partition_leadership(tp) for tp in partitions}
        try:
            self._update_leader_and_isr_cache(partitions)
        except KctlError as e:
            log.error("Cannot read back the states of partitions %s: %s", _joined(partitions), e)
            return []
        changed = [tp for tp in partitions if ctx.partition_leadership(tp) != before[tp]]
        if changed:
            log.info("Partitions %s were stored ahead of the controller's cache (a write whose answer was lost); "
                     "cached the stored states", _joined(changed))
        return changed

    @_active_only
    def _process_IsrChangeNotification(self, event: ev.IsrChangeNotification) -> None:
        ctx = self.context
        names = self.store.get_isr_change_notifications()
        try:
            partitions = [tp for tp in self.store.get_isr_change_notification_partitions(names)
                          if ctx.partition_replica_assignment(tp)]
            if partitions:
                self._update_leader_and_isr_cache(partitions)
                self._send_update_metadata_to_all(partitions)
                self.reassignment_manager.on_isr_change(partitions)
        finally:
            self.store.delete_isr_change_notifications(names, ctx.epoch_zk_version)

    # Log directories and broker responses -------------------------------------------------------

    @_active_only
    def _process_LogDirEventNotification(self, event: ev.LogDirEventNotification) -> None:
        names = self.store.get_log_dir_event_notifications()
        try:
            brokers = sorted(set(self.store.get_log_dir_event_brokers(names)))
            log.info("Handling log directory failure for brokers %s", brokers)
            replicas = self.context.replicas_on_brokers(brokers)
            self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)
        finally:
            self.store.delete_log_dir_event_notifications(names, self.context.epoch_zk_version)

    @_active_only
    def _process_LeaderAndIsrResponseReceived(self, event: ev.LeaderAndIsrResponseReceived) -> None:
        self._on_leader_and_isr_response(event.received.broker, event.received.response)

    def _process_UpdateMetadataResponseReceived(self, event: ev.UpdateMetadataResponseReceived) -> None:
        """Kafka only logs errors of UpdateMetadata responses."""
        received = event.received
        if received.response.error is not _NO_ERROR:
            log.error("Received error %s in UpdateMetadata response from broker %s",
                      received.response.error.name, received.broker)

    @_active_only
    def _process_TopicDeletionStopReplicaResponseReceived(self, event: ev.TopicDeletionStopReplicaResponseReceived) -> None:
        self._on_stop_replica_response(event.received)

    def _on_leader_and_isr_response(self, broker: int, response: LeaderAndIsrResponse) -> None:
        ctx = self.context
        if response.error is not Errors.NONE:
            self.state_change_logger.error(f"Received error {response.error.name} in LeaderAndIsr response from broker {broker}")
            return
        # A pass per partition in Python only when needed: answers name thousands of partitions,
        # and usually no replica of the broker is, or goes, offline.
        errors = response.partition_errors
        offline = ([tp for tp, e in errors.items() if e is Errors.KAFKA_STORAGE_ERROR]
                   if Errors.KAFKA_STORAGE_ERROR in errors.values() else [])
        previous = set(ctx.replicas_on_offline_dirs(broker))
        if previous:  # only a replica on an offline dir can come back online
            ctx.remove_replicas_on_offline_dirs(broker, [tp for tp, e in errors.items() if e is Errors.NONE])
        ctx.add_replicas_on_offline_dirs(broker, offline)
        newly_offline = [tp for tp in offline if tp not in previous]
        if newly_offline:
            self.state_change_logger.info(
                f"Mark replicas {','.join(map(str, newly_offline))} on broker {broker} as offline"
            )
            self._on_replicas_become_offline([PartitionReplica(tp, broker) for tp in newly_offline])

    def _on_stop_replica_response(self, received: StopReplicaResponseReceived) -> None:
        ctx = self.context
        errors = {
            tp: e for tp, e in received.response.partition_errors.items()
            if ctx.is_topic_deletion_in_progress(tp.topic) and tp in received.deleted_partitions
        }
        if not errors:
            return
        failed = list(errors) if received.response.error is not Errors.NONE else [tp for tp, e in errors.items() if e is not Errors.NONE]
        self.deletion_manager.fail_replica_deletion([PartitionReplica(tp, received.broker) for tp in failed])
        if len(failed) != len(errors):
            deleted = [tp for tp in errors if tp not in set(failed)]
            self.deletion_manager.complete_replica_deletion([PartitionReplica(tp, received.broker) for tp in deleted])


def _handler(event_type: type[E], handler: Callable[[E], None]) -> tuple[type[ev.ControllerEvent], Callable[[Any], None]]:
    """One entry of the event table; mypy checks that ``handler`` takes ``event_type``."""
    return event_type, handler


def _assignments_text(partitions: Iterable[TopicPartition], loaded: Mapping[str, _Loaded]) -> str:
    """``<tp> -> <assignment>`` of each of ``partitions`` (of the ``loaded`` topics), as Kafka logs
    new topics: a topic's partitions share a few assignments, so each is made text once."""
    texts: dict[ReplicaAssignment, str] = {}
    return ", ".join(
        f"{tp} -> {texts.get(a) or texts.setdefault(a, str(a))}"
        for tp in partitions
        for a in (loaded[tp.topic][1][tp.partition],)
    )


def _joined(items: Iterable[object]) -> str:
    """A collection in a log line as Kafka writes it (``mkString(",")``): ``1,2,3``."""
    return ",".join(map(str, items))


def _check_partitions(partitions: Iterable[TopicPartition]) -> None:
    for tp in partitions:
        validate_partition_id(tp, error=InvalidRequestError)


def _check_sender(broker_id: object, broker_epoch: object) -> None:
    """A broker request's sender as Kafka's protocol carries it: an ``Int`` id, a ``Long`` epoch."""
    validate_int("broker id", broker_id, error=InvalidRequestError)
    validate_int("broker epoch", broker_epoch, INT64_MIN, INT64_MAX, InvalidRequestError)


def _check_alter_partition(broker_id: object, broker_epoch: object, changes: dict[TopicPartition, LeaderAndIsr]) -> None:
    _check_sender(broker_id, broker_epoch)
    if plain_alter_partition(changes):
        return  # nearly always; otherwise the checks below name the first field refused
    _check_partitions(changes)
    for tp, proposed in changes.items():
        fields = [("leader", proposed.leader), ("leader epoch", proposed.leader_epoch), ("partition epoch", proposed.partition_epoch)]
        for name, value in fields + [("ISR member", b) for b in proposed.isr]:
            validate_int(f"partition {tp}: the {name}", value, error=InvalidRequestError)


def _recovery_refusal(current: LeaderAndIsr, proposed: LeaderAndIsr) -> str | None:
    """Why Kafka (3.2+, KIP-704) refuses an AlterPartition for its leader recovery state, or None:
    a recovering leader is alone in its ISR, and a recovered partition never goes back."""
    if proposed.leader_recovery_state is not LeaderRecoveryState.RECOVERING:
        return None
    if len(proposed.isr) > 1:
        return "leader is recovering and ISR is greater than 1"
    if current.leader_recovery_state is LeaderRecoveryState.RECOVERED:
        return "the leader recovery state cannot change from RECOVERED to RECOVERING"
    return None


class _ControllerClient:
    """What a manager asks of the controller; each manager's protocol names its part."""

    def __init__(self, controller: KafkaController) -> None:
        self._controller = controller

    def send_metadata_update(self, partitions: Iterable[TopicPartition]) -> None:
        self._controller._send_update_metadata_to_all(list(partitions))


class _DeletionClient(_ControllerClient):
    """What the topic-deletion manager asks of the controller (fenced store writes, requests)."""

    def delete_topic(self, topic: str) -> None:
        c = self._controller
        c.store.delete_topic(topic, c.context.epoch_zk_version)

    def delete_topic_deletions(self, topics: Iterable[str]) -> None:
        c = self._controller
        c.store.delete_topic_deletions(list(topics), c.context.epoch_zk_version)

    def mute_partition_modifications(self, topic: str) -> None:
        self._controller._unwatch_topic(topic)



class _ReassignmentClient(_ControllerClient):
    """What the reassignment manager asks of the controller (watches, elections, requests)."""

    def watch_isr_changes(self, tp: TopicPartition) -> None:
        c = self._controller
        if not c.config.uses_alter_partition:
            c._watch(WatchKind.PARTITION_STATE, tp)

    def unwatch_isr_changes(self, tp: TopicPartition) -> None:
        c = self._controller
        if not c.config.uses_alter_partition:
            c._unwatch(WatchKind.PARTITION_STATE, tp)

    def reassignment_election(self) -> Election:
        c = self._controller
        return for_config(ElectionKind.REASSIGN, c.config, c.plugins)

    def send_requests(self, add: Callable[[ControllerBrokerRequestBatch], None]) -> None:
        self._controller._send_requests(add)

    def rearm_zk_reassignment(self) -> None:
        self._controller.event_manager.put(ev.ZkPartitionReassignment())
