"""The ``zkqueue`` transport: seed 004's per-broker state-change queue in ZooKeeper.

Every broker listens on its queue ``/brokers/state/<broker id>`` (seed 004's path); the controller
puts its requests there as persistent-sequential znodes and the broker consumes them in order,
deleting each one it has answered. The other direction works the same way through the
controller's queue ``/controller_state/<controller id>``: brokers put their requests
(ControlledShutdown, AlterPartition) there, and each side puts its answers in the queue of the
one that asked. An item is a :mod:`kctl.wire` message ``(kind, sender id, token, body)`` with
``kind`` ``"req"`` or ``"resp"``; the token pairs an answer with its request.

A queue is bounded (``max_queue_size`` items). Seed 004's rule when a put finds it full — which
happens when a broker stops consuming for a long time — is to shrink it first: start-replica
requests (LeaderAndIsr here, and UpdateMetadata, which the next one supersedes) are dropped, and
of the close-replica requests (StopReplica) only the latest per partition is kept, so that a
broker coming back still deletes what it must. If the queue is still full,
:class:`FollowerStateChangeQueueFullError` is raised; the controller's channel logs it and keeps
the request, trying again every ``retry_backoff`` seconds, in order.

A request the broker refuses without answering (a controller epoch ahead of what its session
reads of ``/controller_epoch``) is consumed all the same, so the transport answers it
``STALE_CONTROLLER_EPOCH``, as Kafka's broker answers a controller epoch it will not accept.

An item that is not a message (corrupt, hostile, or from an incompatible kctl) is never handed
on: it is logged and moved aside, into the queue's ``dead-letter`` child under its own name, where
the operator can read it and the latest :data:`MAX_DEAD_LETTERS` are kept; so it cannot stop the
queue, nor a process that restarts over it.
"""

from __future__ import annotations

import itertools
import logging
import reprlib
import secrets
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kctl import wire
from kctl.errors import Errors, IllegalStateError, KctlError, StaleControllerEpochError, StoreUnavailableError
from kctl.hookspecs import hookimpl
from kctl.model import BrokerInfo, TopicPartition
from kctl.messages import (
    BrokerToControllerRequest,
    ControllerRequest,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataRequest,
    controller_error_response,
)
from kctl.scheduler import RealTimeScheduler, Scheduler
from kctl.stores import paths
from kctl.stores.zkacl import AclPolicy
from kctl.stores.zkclient import ClientSecurity, ZooKeeperTls
from kctl.stores.zkclient import kazoo_acl, kazoo_client, kazoo_modules, split_connect_string
from kctl.transports.base import BrokerHandler, ControllerHandler, error_response

if TYPE_CHECKING:
    from kctl.registry import TransportRegistry

logger = logging.getLogger(__name__)

Callback = Callable[[Any], None]

BROKER_STATE = paths.BROKER_STATE
"""Seed 004's parent of the per-broker queues."""
CONTROLLER_STATE = paths.CONTROLLER_STATE
"""kctl's parent of the per-controller queues (answers and broker requests for a controller)."""
ITEM_PREFIX = "item-"
DEFAULT_MAX_QUEUE_SIZE = 1000
DEAD_LETTER = "dead-letter"
"""The child of a queue that undecodable items are moved to."""
MAX_DEAD_LETTERS = 10
"""Undecodable items kept per queue (the oldest are deleted); each is at most a znode's size."""


class FollowerStateChangeQueueFullError(KctlError):
    """Seed 004's FollowerStateChangeQueueFull: the queue is full even after shrinking."""


def broker_queue_path(broker_id: int) -> str:
    return f"{BROKER_STATE}/{broker_id}"


def controller_queue_path(controller_id: int) -> str:
    return f"{CONTROLLER_STATE}/{controller_id}"


@dataclass(frozen=True)
class QueueItem:
    """One queued message and the znode holding it."""

    name: str
    kind: str  # "req" or "resp"
    sender: int
    token: str
    body: Any
    version: int


def decode_item(name: str, data: bytes | None, version: int) -> QueueItem:
    """The item stored as ``data``; :class:`~kctl.wire.WireError` when it is not one."""
    message = wire.decode(data or b"")
    if type(message) is not tuple or len(message) != 4:
        raise wire.WireError(f"not a queue item (kind, sender, token, body): {reprlib.repr(message)}")
    kind, sender, token, body = message
    if kind not in ("req", "resp") or type(sender) is not int or type(token) is not str:
        shown = ", ".join(f"{field} {reprlib.repr(value)}" for field, value in zip(("kind", "sender", "token"), message))
        raise wire.WireError(f"not a queue item: {shown}")
    return QueueItem(name, kind, sender, token, body, version)


def shrink_items(items: Sequence[QueueItem]) -> tuple[list[QueueItem], list[tuple[StopReplicaRequest, str]]]:
    """Seed 004's shrink rule: which items to drop, and the StopReplica requests (with the token
    their answer goes to) to queue instead.

    Every LeaderAndIsr and UpdateMetadata item is dropped; the StopReplica items are replaced by
    requests holding, per partition, only the latest close-replica state (latest: the highest
    controller epoch, then the latest in the queue), one request per controller epoch and broker
    epoch, answered under the token of the latest request merged into it. Answers and broker
    requests are kept as they are.
    """
    dropped: list[QueueItem] = []
    latest: dict[TopicPartition, tuple[tuple[int, int], QueueItem, StopReplicaPartitionState]] = {}
    for position, item in enumerate(items):
        body = item.body
        if item.kind != "req" or not isinstance(body, (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)):
            continue
        dropped.append(item)
        if isinstance(body, StopReplicaRequest):
            rank = (body.controller_epoch, position)
            for state in body.partition_states:
                held = latest.get(state.tp)
                if held is None or rank > held[0]:
                    latest[state.tp] = (rank, item, state)
    groups: dict[tuple[int, int, int], list[tuple[tuple[int, int], QueueItem, StopReplicaPartitionState]]] = {}
    for entry in latest.values():
        request = entry[1].body
        groups.setdefault((request.controller_id, request.controller_epoch, request.broker_epoch), []).append(entry)
    kept = []
    for entries in sorted(groups.values(), key=lambda group: min(rank for rank, _, _ in group)):
        entries.sort(key=lambda entry: entry[0])
        newest = entries[-1][1]
        template = newest.body
        states = tuple(state for _, _, state in entries)
        request = StopReplicaRequest(
            template.version, template.controller_id, template.controller_epoch, template.broker_epoch,
            all(s.delete_partition for s in states), states,
        )
        kept.append((request, newest.token))
    return dropped, kept


class StateChangeQueue:
    """A bounded queue of messages as sequential znodes under ``path`` (seed 004's StateChangeQueue)."""

    def __init__(
        self,
        client: Any,
        path: str,
        max_size: int = DEFAULT_MAX_QUEUE_SIZE,
        acl: Callable[[str], Any] = lambda path: None,
    ) -> None:
        if max_size < 1:
            raise ValueError(f"a state-change queue holds at least one item, not {max_size}")
        self.client = client
        self.path = path
        self.max_size = max_size
        self._acl = acl  # the kazoo ACL of a znode to create (None: the client's default)
        self._item_acl = acl(f"{path}/{ITEM_PREFIX}")
        self._lock = threading.Lock()
        self._unmovable: set[str] = set()  # undecodable items that could not be moved aside
        client.ensure_path(path, acl=acl(path))

    def names(self) -> list[str]:
        try:
            return sorted(n for n in self.client.get_children(self.path) if n.startswith(ITEM_PREFIX))
        except kazoo_modules().exceptions.NoNodeError:
            return []

    def size(self) -> int:
        return len(self.names())

    def is_full(self) -> bool:
        return self.size() >= self.max_size

    def items(self) -> list[QueueItem]:
        """The queued items, oldest first (an undecodable one is logged and moved aside)."""
        found = []
        exceptions = kazoo_modules().exceptions
        for name in self.names():
            if name in self._unmovable:
                continue
            try:
                data, stat = self.client.get(f"{self.path}/{name}")
            except exceptions.NoNodeError:
                continue  # consumed meanwhile
            try:
                found.append(decode_item(name, data, int(stat.version)))
            except wire.WireError as exc:
                self.set_aside(name, data, int(stat.version), str(exc))
        return found

    def dead_letters(self) -> list[str]:
        """The names of the items moved aside, oldest first."""
        try:
            return sorted(self.client.get_children(f"{self.path}/{DEAD_LETTER}"))
        except kazoo_modules().exceptions.NoNodeError:
            return []

    def set_aside(self, name: str, data: bytes | None, version: int, reason: str) -> None:
        """Move an undecodable item to the dead letters, keeping the latest :data:`MAX_DEAD_LETTERS`;
        an item ZooKeeper refuses to move is skipped for as long as this queue object lives."""
        exceptions = kazoo_modules().exceptions
        dead = f"{self.path}/{DEAD_LETTER}"
        try:
            self.client.ensure_path(dead, acl=self._acl(dead))
            transaction = self.client.transaction()
            transaction.create(f"{dead}/{name}", data or b"", acl=self._acl(f"{dead}/{name}"))
            transaction.delete(f"{self.path}/{name}", version=version)
            for result in transaction.commit():
                if isinstance(result, (exceptions.NoNodeError, exceptions.BadVersionError)):
                    return  # consumed or replaced meanwhile: the next read sees what is there now
                if isinstance(result, exceptions.KazooException) and not isinstance(
                    result, (exceptions.RolledBackError, exceptions.RuntimeInconsistency)
                ):
                    raise result
        except (exceptions.ConnectionLoss, exceptions.SessionExpiredError):
            raise  # not the item's fault: the consumer reads the queue again once connected
        except exceptions.KazooException as exc:
            self._unmovable.add(name)
            logger.error("Skipping the undecodable queue item %s/%s, which cannot be moved aside (%s): %s",
                         self.path, name, type(exc).__name__, reason)
            return
        logger.error("Moved the undecodable queue item %s/%s to %s: %s", self.path, name, dead, reason)
        for old in self.dead_letters()[:-MAX_DEAD_LETTERS]:
            try:
                self.client.delete(f"{dead}/{old}")
            except exceptions.NoNodeError:
                pass

    def put(self, kind: str, sender: int, token: str, body: Any) -> str:
        """Append a message; shrink a full queue first; raise
        :class:`FollowerStateChangeQueueFullError` if it is still full. Returns the znode's name."""
        data = wire.encode((kind, sender, token, body))
        with self._lock:
            if self.is_full():
                self.shrink()
                if self.is_full():
                    raise FollowerStateChangeQueueFullError(
                        f"the state change queue {self.path} is full ({self.max_size} items) even after shrinking"
                    )
            created: str = self.client.create(f"{self.path}/{ITEM_PREFIX}", data, acl=self._item_acl, sequence=True)
            return created.rpartition("/")[2]

    def shrink(self) -> int:
        """Apply :func:`shrink_items` in one transaction; returns how many items were removed."""
        exceptions = kazoo_modules().exceptions
        for _ in range(10):  # the consumer may take items meanwhile: start again
            items = self.items()
            dropped, kept = shrink_items(items)
            if not dropped:
                return 0
            transaction = self.client.transaction()
            for item in dropped:
                transaction.delete(f"{self.path}/{item.name}", version=item.version)
            for request, token in kept:
                data = wire.encode(("req", request.controller_id, token, request))
                transaction.create(f"{self.path}/{ITEM_PREFIX}", data, acl=self._item_acl, sequence=True)
            results = transaction.commit()
            if not any(isinstance(r, exceptions.KazooException) for r in results):
                removed = len(dropped) - len(kept)
                logger.warning("Shrank the state change queue %s by %d items (%d close-replica requests kept)",
                               self.path, removed, len(kept))
                return removed
        raise StoreUnavailableError(f"could not shrink {self.path}: its items kept changing")

    def delete(self, name: str) -> None:
        try:
            self.client.delete(f"{self.path}/{name}")
        except kazoo_modules().exceptions.NoNodeError:
            pass


class _Consumer:
    """Takes the items of one queue in order on a thread of its own, woken by a children watch
    (and every ``poll`` seconds, in case a watch was lost with a session)."""

    def __init__(self, queue: StateChangeQueue, handle: Callable[[QueueItem], None], poll: float = 1.0) -> None:
        self.queue = queue
        self._handle = handle
        self._poll = poll
        self._wake = threading.Condition()
        self._dirty = True
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"zkqueue{queue.path}", daemon=True)
        queue.client.ChildrenWatch(queue.path, self._changed, send_event=False)
        self._thread.start()

    def _changed(self, children: list[str]) -> bool:
        with self._wake:
            self._dirty = True
            self._wake.notify()
        return not self._stopped  # False ends kazoo's watch

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._dirty and not self._stopped:
                    if not self._wake.wait(self._poll):
                        break
                if self._stopped:
                    return
                self._dirty = False
            try:
                for item in self.queue.items():
                    if self._stopped:
                        return
                    try:
                        self._handle(item)
                    except Exception:
                        logger.exception("Failed to handle %s/%s", self.queue.path, item.name)
                    self.queue.delete(item.name)
            except Exception as exc:  # the connection is down: the poll tries again
                logger.info("Cannot read %s: %s", self.queue.path, exc)

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)


class ZkQueueControllerChannel:
    """One controller's channel: a queue per broker, with a backlog kept in order while one is full."""

    def __init__(self, transport: ZkQueueTransport, controller_id: int) -> None:
        self.transport = transport
        self.controller_id = controller_id
        self._lock = threading.Lock()
        self._queues: dict[int, StateChangeQueue] = {}
        self._backlog: dict[int, deque[tuple[ControllerRequest, Callback | None]]] = {}

    def add_broker(self, broker: BrokerInfo) -> None:
        with self._lock:
            if broker.id not in self._queues:
                self._queues[broker.id] = self.transport.queue(broker_queue_path(broker.id))
                self._backlog[broker.id] = deque()

    def remove_broker(self, broker_id: int) -> None:
        with self._lock:
            self._queues.pop(broker_id, None)
            self._backlog.pop(broker_id, None)

    def send_request(self, broker_id: int, request: ControllerRequest, callback: Callback | None) -> None:
        with self._lock:
            backlog = self._backlog.get(broker_id)
            if backlog is None:
                logger.warning("Controller %d: dropping %s request to broker %d, which has no queue",
                               self.controller_id, request.api, broker_id)
                return
            backlog.append((request, callback))
        self._flush(broker_id)

    def _flush(self, broker_id: int) -> None:
        with self._lock:
            queue, backlog = self._queues.get(broker_id), self._backlog.get(broker_id)
            while queue is not None and backlog:
                request, callback = backlog[0]
                try:
                    self.transport.put(queue, self.controller_id, request, callback)
                except FollowerStateChangeQueueFullError as exc:
                    logger.error("Controller %d: %s; retrying in %gs", self.controller_id, exc,
                                 self.transport.retry_backoff)
                    self.transport.scheduler.schedule(
                        self.transport.retry_backoff, lambda: self._flush(broker_id), "zkqueue-retry"
                    )
                    return
                except Exception as exc:  # ZooKeeper unreachable: as Kafka's sender, try again
                    logger.warning("Controller %d: cannot queue %s for broker %d: %s", self.controller_id,
                                   request.api, broker_id, exc)
                    self.transport.scheduler.schedule(
                        self.transport.retry_backoff, lambda: self._flush(broker_id), "zkqueue-retry"
                    )
                    return
                backlog.popleft()

    def backlog(self, broker_id: int) -> int:
        with self._lock:
            return len(self._backlog.get(broker_id, ()))

    def shutdown(self) -> None:
        with self._lock:
            self._queues.clear()
            self._backlog.clear()


class ZkQueueTransport:
    """Controller and brokers talking through queues in ZooKeeper.

    :param hosts: ZooKeeper's connect string (``host:port[,…][/chroot]``); the transport opens its
        own session.
    :param max_queue_size: items a queue holds before it is shrunk (seed 004's bound).
    :param retry_backoff: seconds between attempts to queue into a full queue.
    :param auth: ``(user, password)``: the process's ZooKeeper digest identity.
    :param sasl: ``(user, password)``: the process's SASL DIGEST-MD5 login.
    :param tls: connect over TLS (:class:`~kctl.stores.zkclient.ZooKeeperTls`).
    :param acl: the cluster's :class:`~kctl.stores.zkacl.AclPolicy` (queues are written by the
        controller and broker identities only).
    """

    def __init__(
        self,
        scheduler: Scheduler | None = None,
        hosts: str = "127.0.0.1:2181",
        *,
        chroot: str = "",
        session_timeout: float = 18.0,
        connection_timeout: float = 15.0,
        max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE,
        retry_backoff: float = 1.0,
        auth: tuple[str, str] | None = None,
        sasl: tuple[str, str] | None = None,
        tls: ZooKeeperTls | None = None,
        acl: AclPolicy | None = None,
    ) -> None:
        servers, chroot = split_connect_string(hosts, chroot)
        self._owns_scheduler = scheduler is None
        self.scheduler: Scheduler = scheduler if scheduler is not None else RealTimeScheduler(name="zkqueue")
        self.max_queue_size = max_queue_size
        self.retry_backoff = retry_backoff
        self._policy = acl
        security = ClientSecurity(auth, sasl, tls)
        self.client = kazoo_client(
            servers + chroot,
            security,
            timeout=session_timeout,
            default_acl=None if acl is not None else kazoo_acl(security.creator_acl()),  # as the store's
        )
        try:
            self.client.start(timeout=connection_timeout)
        except self.client.handler.timeout_exception:
            self.client.close()
            raise StoreUnavailableError(f"cannot connect to ZooKeeper at {servers} within {connection_timeout:g}s") from None
        self._lock = threading.Lock()
        self._prefix = secrets.token_hex(6)
        self._tokens = itertools.count(1)
        self._callbacks: dict[str, Callback] = {}
        self._consumers: dict[str, _Consumer] = {}
        self._brokers: dict[int, BrokerHandler] = {}
        self._controllers: dict[int, ControllerHandler] = {}
        self._channels: list[ZkQueueControllerChannel] = []

    def queue(self, path: str) -> StateChangeQueue:
        return StateChangeQueue(self.client, path, self.max_queue_size, self._acl)

    def _acl(self, path: str) -> Any:
        """The kazoo ACL of a znode created at ``path`` under the policy (None: the default)."""
        return None if self._policy is None else kazoo_acl(self._policy.acl(path))

    def put(self, queue: StateChangeQueue, sender: int, request: Any, callback: Callback | None) -> None:
        """Queue a request, remembering the callback its answer goes to."""
        token = f"{self._prefix}-{next(self._tokens)}"
        if callback is not None:
            with self._lock:
                self._callbacks[token] = callback
        try:
            queue.put("req", sender, token, request)
        except BaseException:
            with self._lock:
                self._callbacks.pop(token, None)
            raise

    def _answer(self, item: QueueItem) -> None:
        with self._lock:
            callback = self._callbacks.pop(item.token, None)
        if callback is not None:  # else: an answer to an earlier run of this process, or shrunk away
            callback(item.body)

    def _reply(self, path: str, sender: int, token: str, response: Any) -> None:
        try:
            self.queue(path).put("resp", sender, token, response)
        except Exception as exc:
            logger.error("Cannot answer through %s: %s", path, exc)

    # --- Controller side -------------------------------------------------------------------------

    def controller_channel(self, controller_id: int) -> ZkQueueControllerChannel:
        channel = ZkQueueControllerChannel(self, controller_id)
        with self._lock:
            self._channels.append(channel)
        return channel

    def bind_controller(self, controller_id: int, handler: ControllerHandler) -> None:
        with self._lock:
            if controller_id in self._controllers:
                raise IllegalStateError(f"controller {controller_id} is already bound to this transport")
            self._controllers[controller_id] = handler

        def handle(item: QueueItem) -> None:
            if item.kind == "resp":
                self._answer(item)
                return
            reply_to = broker_queue_path(item.sender)
            with self._lock:
                bound = self._controllers.get(controller_id)
            if bound is None:
                self._reply(reply_to, controller_id, item.token, error_response(item.body, Errors.NOT_CONTROLLER))
            else:
                bound(item.body, lambda response: self._reply(reply_to, controller_id, item.token, response))

        self._consume(controller_queue_path(controller_id), handle)

    def unbind_controller(self, controller_id: int) -> None:
        with self._lock:
            self._controllers.pop(controller_id, None)
        self._stop_consuming(controller_queue_path(controller_id))

    def send_to_controller(self, controller_id: int, request: BrokerToControllerRequest, callback: Callback) -> None:
        path = controller_queue_path(controller_id)
        if controller_id < 0 or not self.client.exists(path):
            self.scheduler.schedule(0, lambda: callback(error_response(request, Errors.NOT_CONTROLLER)), "zkqueue")
            return
        try:
            self.put(self.queue(path), request.broker_id, request, callback)
        except Exception as exc:
            logger.warning("Cannot queue %s for controller %d: %s", request.api, controller_id, exc)
            self.scheduler.schedule(0, lambda: callback(error_response(request, Errors.NOT_CONTROLLER)), "zkqueue")

    # --- Broker side -----------------------------------------------------------------------------

    def bind_broker(self, broker_id: int, handler: BrokerHandler) -> None:
        with self._lock:
            if broker_id in self._brokers:
                raise IllegalStateError(f"broker {broker_id} is already bound to this transport")
            self._brokers[broker_id] = handler

        def handle(item: QueueItem) -> None:
            if item.kind == "resp":
                self._answer(item)
                return
            with self._lock:
                bound = self._brokers.get(broker_id)
            if bound is None:
                return
            try:
                response = bound(item.body)
            except StaleControllerEpochError as exc:
                # Refused unanswered (a controller epoch the broker cannot confirm): the item is
                # consumed, so answer the error, as Kafka's broker answers a stale controller epoch.
                logger.warning("Broker %d: answering %s to %s from controller %d: %s",
                               broker_id, exc.error.name, item.body.api, item.sender, exc)
                response = controller_error_response(item.body, exc.error)
            self._reply(controller_queue_path(item.sender), broker_id, item.token, response)

        self._consume(broker_queue_path(broker_id), handle)

    def unbind_broker(self, broker_id: int) -> None:
        with self._lock:
            self._brokers.pop(broker_id, None)
        self._stop_consuming(broker_queue_path(broker_id))

    def _consume(self, path: str, handle: Callable[[QueueItem], None]) -> None:
        consumer = _Consumer(self.queue(path), handle)
        with self._lock:
            previous = self._consumers.pop(path, None)
            self._consumers[path] = consumer
        if previous is not None:
            previous.stop()

    def _stop_consuming(self, path: str) -> None:
        with self._lock:
            consumer = self._consumers.pop(path, None)
        if consumer is not None:
            consumer.stop()

    def close(self) -> None:
        with self._lock:
            consumers = list(self._consumers.values())
            self._consumers.clear()
            channels = list(self._channels)
            self._brokers.clear()
            self._controllers.clear()
        for consumer in consumers:
            consumer.stop()
        for channel in channels:
            channel.shutdown()
        self.client.stop()
        self.client.close()
        if self._owns_scheduler and isinstance(self.scheduler, RealTimeScheduler):
            self.scheduler.shutdown()


@hookimpl
def kctl_register_transports(register: TransportRegistry) -> None:
    """Register the ZooKeeper queue transport as ``zkqueue`` (``factory(scheduler, hosts=…)``)."""
    register.add("zkqueue", ZkQueueTransport)


__all__ = [
    "BROKER_STATE",
    "CONTROLLER_STATE",
    "DEAD_LETTER",
    "DEFAULT_MAX_QUEUE_SIZE",
    "MAX_DEAD_LETTERS",
    "FollowerStateChangeQueueFullError",
    "QueueItem",
    "StateChangeQueue",
    "ZkQueueControllerChannel",
    "ZkQueueTransport",
    "broker_queue_path",
    "controller_queue_path",
    "decode_item",
    "shrink_items",
]
