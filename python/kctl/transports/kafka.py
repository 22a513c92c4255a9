"""The ``kafka`` transport: kctl's controller sending its requests to real Kafka brokers.

The controller side of Kafka's ``ControllerChannelManager`` over Kafka's own protocol
(:mod:`kctl.kafka`): one FIFO queue and one sender thread per broker, connected to the broker's
endpoint on the inter-broker listener (``listener``, PLAINTEXT by default); a sender keeps one
request in flight and, on any failure (no connection, a closed connection, no answer within
``request_timeout``, bytes that are not the answer), closes the connection, backs off
``retry_backoff`` seconds and sends the same request again, until it is answered or the broker is
removed. Responses reach the callback as kctl's messages, on the sender's thread.

A bound controller answers brokers on ``listen`` (:class:`kctl.kafka.listener.ControllerListener`:
ApiVersions, ControlledShutdown, AlterPartition, AllocateProducerIds). AlterPartition v2+ names topics by id: the ids
resolved are those the controller's own LeaderAndIsr (v5+) and UpdateMetadata (v7+) requests
carried (a broker can only propose the ISR of a partition it was told it leads), plus ``topic_ids``.
A ZooKeeper-mode broker finds its controller only among the live brokers of UpdateMetadata, on the
inter-broker listener: so the bound controller is advertised as a broker entry of its own
(:meth:`KafkaTransport.controller_registration`, marked controller-only), added to every
UpdateMetadata's live brokers here and registered in the store by the controller while it is
active. Brokers here are real Kafka processes, so this transport binds no kctl broker agent and
sends nothing to a controller itself.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kctl.errors import BrokerNotAvailableError, IllegalStateError
from kctl.hookspecs import hookimpl
from kctl.kafka import messages as km
from kctl.kafka.listener import ControllerListener
from kctl.kafka import protocol as p
from kctl.messages import (
    ZERO_UUID,
    BrokerToControllerRequest,
    ControllerRequest,
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
)
from kctl.model import CONTROLLER_ONLY_FEATURE, BrokerInfo, EndPoint
from kctl.scheduler import Scheduler
from kctl.transports.base import BrokerHandler, ControllerHandler, deliver_response

if TYPE_CHECKING:
    from kctl.registry import TransportRegistry

logger = logging.getLogger(__name__)

Callback = Callable[[Any], None]


class _BrokerSender:
    """One broker's queue and the thread that drains it, one request at a time."""

    def __init__(self, channel: KafkaControllerChannel, broker_id: int, address: tuple[str, int]) -> None:
        self.channel = channel
        self.broker_id = broker_id
        self.address = address
        self.requests: deque[tuple[ControllerRequest, Callback | None]] = deque()
        self.wakeup = threading.Condition()
        self.stopped = False
        self.sock: socket.socket | None = None
        self.correlation = itertools.count(1)
        self.failures = 0
        """Attempts failed in a row: the first is logged, the rest (every ``retry_backoff`` while a
        broker is down) at DEBUG, and the recovery once."""
        self.thread = threading.Thread(target=self._run, name=f"kctl-kafka-sender-{broker_id}", daemon=True)
        self.thread.start()

    def enqueue(self, request: ControllerRequest, callback: Callback | None) -> None:
        with self.wakeup:
            self.requests.append((request, callback))
            self.wakeup.notify()

    def stop(self) -> None:
        with self.wakeup:
            self.stopped = True
            self.requests.clear()
            self.wakeup.notify()
        self._close()

    def _close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    def _next(self) -> tuple[ControllerRequest, Callback | None] | None:
        with self.wakeup:
            while not self.requests and not self.stopped:
                self.wakeup.wait()
            return None if self.stopped else self.requests[0]

    def _exchange(self, request: ControllerRequest) -> Any:
        """Send one request and read its answer, as kctl's response message."""
        transport = self.channel.transport
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=transport.request_timeout)
        correlation_id = next(self.correlation)
        client_id = f"kctl-controller-{self.channel.controller_id}-to-broker-{self.broker_id}"
        data = km.encode_controller_request(request, correlation_id, client_id, transport.listener)
        self.sock.sendall(p.frame(data))
        answer = p.read_frame(self.sock, transport.max_response_bytes)
        answered, body = p.decode_response(km.api_of(request), request.version, answer)
        if answered != correlation_id:
            raise p.KafkaProtocolError(f"answer to correlation id {answered}, expected {correlation_id}")
        return km.controller_response(request, body)

    def _run(self) -> None:
        transport = self.channel.transport
        while (item := self._next()) is not None:
            request, callback = item
            try:
                response = self._exchange(request)
            except (OSError, p.KafkaProtocolError) as exc:  # Kafka closes, backs off and sends it again
                level = logging.WARNING if isinstance(exc, p.KafkaProtocolError) else logging.INFO
                self.failures += 1
                logger.log(level if self.failures == 1 else logging.DEBUG,
                           "Controller %d: %s to broker %d failed (%s); retrying every %.3g s",
                           self.channel.controller_id, request.api, self.broker_id, exc, transport.retry_backoff)
                self._close()
                with self.wakeup:
                    self.wakeup.wait_for(lambda: self.stopped, transport.retry_backoff)
                continue
            if self.failures:
                logger.info("Controller %d: broker %d answered %s after %d failed attempts",
                            self.channel.controller_id, self.broker_id, request.api, self.failures)
                self.failures = 0
            with self.wakeup:
                if self.stopped:
                    return
                self.requests.popleft()
            if callback is not None:
                deliver_response(callback, response, self.channel.controller_id)


class KafkaControllerChannel:
    """The controller's queues to real Kafka brokers, one per registered broker."""

    def __init__(self, transport: KafkaTransport, controller_id: int) -> None:
        self.transport = transport
        self.controller_id = controller_id
        self._senders: dict[int, _BrokerSender] = {}
        self._lock = threading.Lock()

    def add_broker(self, broker: BrokerInfo) -> None:
        endpoint = next((e for e in broker.endpoints if e.listener_name == self.transport.listener), None)
        if endpoint is None:
            logger.warning("Controller %d: broker %d has no %s endpoint; requests to it are dropped",
                           self.controller_id, broker.id, self.transport.listener)
            return
        with self._lock:
            if broker.id not in self._senders:
                self._senders[broker.id] = _BrokerSender(self, broker.id, (endpoint.host, endpoint.port))

    def remove_broker(self, broker_id: int) -> None:
        with self._lock:
            sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def send_request(self, broker_id: int, request: ControllerRequest, callback: Callback | None) -> None:
        if isinstance(request, (LeaderAndIsrRequest, UpdateMetadataRequest)):
            self.transport.learn_topic_ids(request.topic_ids)
        if isinstance(request, UpdateMetadataRequest):
            request = self.transport.with_controller_entry(self.controller_id, request)
        with self._lock:
            sender = self._senders.get(broker_id)
        if sender is None:
            logger.warning("Controller %d: no channel to broker %d; dropping %s", self.controller_id, broker_id,
                           request.api)
            return
        sender.enqueue(request, callback)

    def queued(self) -> dict[int, int]:
        """Requests waiting per broker (the one in flight included)."""
        with self._lock:
            return {broker: len(sender.requests) for broker, sender in self._senders.items()}

    def shutdown(self) -> None:
        with self._lock:
            senders = list(self._senders.values())
            self._senders.clear()
        for sender in senders:
            sender.stop()


class KafkaTransport:
    """``listener``: the brokers' inter-broker listener name; ``request_timeout`` (Kafka's
    ``controller.socket.timeout.ms``) bounds connecting and each answer; ``max_response_bytes``
    the largest frame read; ``listen``: the bound controller's ``host:port``; ``topic_ids``:
    name → id of topics brokers may name by id besides those the controller's requests carried."""

    def __init__(self, scheduler: Scheduler | None = None, listener: str = "PLAINTEXT", request_timeout: float = 30.0,
                 retry_backoff: float = 0.1, max_response_bytes: int = p.MAX_FRAME_BYTES,
                 listen: str = "127.0.0.1:0", topic_ids: Callable[[], Mapping[str, str]] = dict) -> None:
        # ``scheduler``: taken as every transport factory is called; real brokers run on wall time,
        # so senders are threads whatever the scheduler.
        self.listener = listener
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.max_response_bytes = max_response_bytes
        self.listen = listen
        self.topic_ids = topic_ids
        self._sent_topic_ids: dict[str, str] = {}
        self._topic_ids_lock = threading.Lock()
        self._channels: list[KafkaControllerChannel] = []
        self._controller_listener: ControllerListener | None = None

    @property
    def listener_address(self) -> tuple[str, int] | None:
        """Where the bound controller answers brokers (None before :meth:`bind_controller`)."""
        return None if self._controller_listener is None else self._controller_listener.address

    def learn_topic_ids(self, topic_ids: Mapping[str, str]) -> None:
        """Remember the ids a request to brokers carried (Kafka's zero id is no id)."""
        known = {topic: tid for topic, tid in topic_ids.items() if tid != ZERO_UUID}
        if known:
            with self._topic_ids_lock:
                self._sent_topic_ids.update(known)

    def known_topic_ids(self) -> dict[str, str]:
        """name → id of every topic brokers may name by id: ``topic_ids`` and those sent."""
        with self._topic_ids_lock:
            return {**self.topic_ids(), **self._sent_topic_ids}

    def controller_registration(self, controller_id: int) -> BrokerInfo | None:
        """The broker entry brokers find the bound controller by: one endpoint, on the
        inter-broker ``listener``, at the controller listener's address, and the controller-only
        mark (None before :meth:`bind_controller`)."""
        address = self.listener_address
        if address is None:
            return None
        return BrokerInfo(controller_id, (EndPoint(address[0], address[1], self.listener),),
                          features=((CONTROLLER_ONLY_FEATURE, (1, 1)),))

    def with_controller_entry(self, controller_id: int, request: UpdateMetadataRequest) -> UpdateMetadataRequest:
        """``request`` with the bound controller's entry among its live brokers."""
        entry = self.controller_registration(controller_id)
        if entry is None or any(b.id == controller_id for b in request.live_brokers):
            return request
        return dataclasses.replace(request, live_brokers=(*request.live_brokers, entry))

    def controller_channel(self, controller_id: int) -> KafkaControllerChannel:
        channel = KafkaControllerChannel(self, controller_id)
        self._channels.append(channel)
        return channel

    def bind_broker(self, broker_id: int, handler: BrokerHandler) -> None:
        raise IllegalStateError("the kafka transport talks to real Kafka brokers; kctl's broker agents use tcp")

    def unbind_broker(self, broker_id: int) -> None:
        raise IllegalStateError("the kafka transport binds no kctl broker")

    def bind_controller(self, controller_id: int, handler: ControllerHandler) -> None:
        """Answer brokers for this controller on ``listen`` (started on the first bind)."""
        if self._controller_listener is None:
            host, _, port = self.listen.rpartition(":")
            self._controller_listener = ControllerListener(host, int(port), topic_ids=self.known_topic_ids,
                                                           max_request_bytes=self.max_response_bytes,
                                                           answer_timeout=self.request_timeout)
        elif self._controller_listener.handler is not None:
            raise IllegalStateError(f"a controller is already bound to this transport (not {controller_id})")
        self._controller_listener.bind(handler)

    def unbind_controller(self, controller_id: int) -> None:
        """Brokers asking from now on are told NOT_CONTROLLER."""
        if self._controller_listener is not None:
            self._controller_listener.bind(None)

    def send_to_controller(self, controller_id: int, request: BrokerToControllerRequest, callback: Callback) -> None:
        callback(BrokerNotAvailableError(f"controller {controller_id} is not reachable over the kafka transport"))

    def close(self) -> None:
        for channel in self._channels:
            channel.shutdown()
        self._channels.clear()
        if self._controller_listener is not None:
            self._controller_listener.close()
            self._controller_listener = None


@hookimpl
def kctl_register_transports(register: TransportRegistry) -> None:
    """Register the transport to real Kafka brokers as ``kafka`` (``factory(listener="PLAINTEXT", …)``)."""
    register.add("kafka", KafkaTransport)


__all__ = ["KafkaControllerChannel", "KafkaTransport"]
