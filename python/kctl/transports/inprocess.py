"""The in-process transport: controller and brokers in one process, every message a scheduler step.

Each delivery (a request reaching a broker or a controller, a response coming back) is a callback
of the injected scheduler ``latency`` seconds later, so in a simulation the network interleaves
deterministically with controller events and broker timers, and a run is reproducible from its
seed. The controller side follows Kafka's ControllerChannelManager (reference §5.5): one FIFO
queue per broker, one request in flight per broker, and a request retried every
``retry_backoff`` seconds while the broker process is down, until it is delivered or the broker is
removed from the channel.

Thread-safe: the controller's thread may send while the scheduler's thread delivers (real-time
mode). Handlers and callbacks are always called outside the transport's lock.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from kctl.errors import Errors, IllegalStateError
from kctl.hookspecs import hookimpl
from kctl.model import BrokerInfo
from kctl.messages import (
    BrokerToControllerRequest,
    ControllerRequest,
    ControllerResponse,
    Outgoing,
    UpdateMetadataFanOut,
    built_request,
)
from kctl.scheduler import Scheduler
from kctl.transports.base import REPEAT, BrokerHandler, ControllerHandler, error_response, takes_fan_outs

if TYPE_CHECKING:
    from kctl.registry import TransportRegistry

logger = logging.getLogger(__name__)

Callback = Callable[[Any], None]
T = TypeVar("T")


class _Batching(Protocol):
    """A scheduler that batches (``SimulatedScheduler``): the batch a next item may join."""

    open_batch: list[Any] | None


class _NoBatching:
    """A scheduler that does not batch: no batch is ever open."""

    open_batch: list[Any] | None = None


_FanOutHandler = Callable[[ControllerRequest | UpdateMetadataFanOut], ControllerResponse]
"""A broker handler that takes UpdateMetadata fan-outs as they are (``transports.base.answers_fan_outs``)."""


def _built_for(handler: BrokerHandler, broker_id: int, request: ControllerRequest | UpdateMetadataFanOut) -> ControllerResponse:
    """``handler`` of the request sent to ``broker_id`` (a fan-out's built), for a handler that
    takes no fan-outs."""
    return handler(built_request(request, broker_id))


class _BrokerQueue:
    """The requests waiting for one broker; the head is in flight while ``busy``."""

    __slots__ = ("broker_id", "busy", "closed", "requests")

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.requests: deque[tuple[ControllerRequest | UpdateMetadataFanOut, Callback | None]] = deque()
        self.busy = False
        self.closed = False


class InProcessControllerChannel:
    """One controller's channel to the brokers (Kafka's ControllerChannelManager)."""

    def __init__(self, transport: InProcessTransport, controller_id: int) -> None:
        self.controller_id = controller_id
        self._transport = transport
        self._queues: dict[int, _BrokerQueue] = {}
        self._busy = 0  # queues with a request in flight: idle() is asked between every two instants
        self._deliver_after = transport.batched(self._deliver)
        self._respond_after = transport.batched(self._respond)

    def add_broker(self, broker: BrokerInfo) -> None:
        """Open a queue for the broker; a broker that already has one keeps it, as in Kafka."""
        with self._transport.lock:
            if broker.id not in self._queues:
                self._queues[broker.id] = _BrokerQueue(broker.id)

    def remove_broker(self, broker_id: int) -> None:
        with self._transport.lock:
            queue = self._queues.pop(broker_id, None)
            if queue is not None:
                queue.closed = True
                queue.requests.clear()
                if queue.busy:
                    queue.busy = False
                    self._busy -= 1

    def brokers(self) -> list[int]:
        """The brokers that have a queue, sorted."""
        with self._transport.lock:
            return sorted(self._queues)

    def idle(self) -> bool:
        """No request is queued (a queue is busy from its first request until it is empty)."""
        with self._transport.lock:
            return not self._busy

    def queued(self, broker_id: int) -> int:
        """Requests waiting for the broker, the one in flight included (0 without a queue)."""
        with self._transport.lock:
            queue = self._queues.get(broker_id)
            return 0 if queue is None else len(queue.requests)

    def send_request(self, broker_id: int, request: ControllerRequest, callback: Callback | None) -> None:
        with self._transport.lock:
            queue = self._queues.get(broker_id)
            if queue is None:
                logger.warning(
                    "Controller %d: dropping %s request to broker %d, which has no queue",
                    self.controller_id, request.api, broker_id,
                )
                return
            queue.requests.append((request, callback))
            if not queue.busy:
                queue.busy = True
                self._busy += 1
                self._deliver_after(self._transport.latency, queue)

    def send_requests(self, outgoing: list[Outgoing]) -> None:
        """:meth:`send_request` for each, in order (a fan-out, under one hold of the lock); an
        :class:`UpdateMetadataFanOut` goes to brokers as it is, its requests built only for a
        handler that needs them."""
        transport = self._transport
        with transport.lock:
            queues, latency, deliver_after, batching = self._queues, transport.latency, self._deliver_after, transport.batching
            batch = None  # the deliveries' batch, appended to while open (see SimulatedScheduler.open_batch)
            for broker_id, request, callback in outgoing:
                queue = queues.get(broker_id)
                if queue is None:
                    self.send_request(broker_id, built_request(request, broker_id), callback)  # dropped, with its warning
                    continue
                queue.requests.append((request, callback))
                if not queue.busy:
                    queue.busy = True
                    self._busy += 1
                    if batch is batching.open_batch and batch is not None:
                        batch.append(queue)
                    else:
                        batch = deliver_after(latency, queue)

    def shutdown(self) -> None:
        with self._transport.lock:
            for broker_id in list(self._queues):
                self.remove_broker(broker_id)
        self._transport.forget_channel(self)

    def _deliver(self, queues: list[_BrokerQueue]) -> None:
        """Hand each queue's head request to its broker, in order: the deliveries due at one
        instant (a fan-out's, one per broker) are one call."""
        transport = self._transport
        lock, brokers, respond_after, latency = transport.lock, transport._brokers, self._respond_after, transport.latency
        batching, batch = transport.batching, None  # the responses' batch, appended to while open
        for queue in queues:
            with lock:
                if queue.closed:
                    continue
                request, callback = queue.requests[0]
                handler = brokers.get(queue.broker_id)
            if handler is None:  # the broker process is down: try again, as the send thread reconnects
                self._deliver_after(transport.retry_backoff, queue)
                continue
            try:
                response = handler(request)
            except Exception:  # Kafka closes the connection and retries the same request
                logger.exception("Broker %d failed to handle %s; retrying", queue.broker_id, request.api)
                self._deliver_after(transport.retry_backoff, queue)
                continue
            if batch is batching.open_batch and batch is not None:
                batch.append((queue, callback, response))
            else:
                batch = respond_after(latency, (queue, callback, response))

    def _respond(self, answers: list[tuple[_BrokerQueue, Callback | None, Any]]) -> None:
        """Hand each response to its callback and send the broker's next request, in order: the
        responses due at one instant are one call, and consecutive ones whose callbacks repeat one
        another (``transports.base.repeatable``: a fan-out's answers) one call of their ``repeat``,
        their next requests sent after it."""
        transport = self._transport
        lock, deliver_after, latency, batching = transport.lock, self._deliver_after, transport.latency, transport.batching
        batch = None  # the next deliveries' batch, appended to while open
        start, count = 0, len(answers)
        while start < count:
            _, callback, response = answers[start]
            end, repeat = start + 1, getattr(callback, REPEAT, None)
            if repeat is not None:
                while end < count and answers[end][2] is response and getattr(answers[end][1], REPEAT, None) is repeat:
                    end += 1
            with lock:  # a removed broker's connection, and its response, are gone
                run = [answer for answer in answers[start:end] if not answer[0].closed]
                for queue, _, _ in run:
                    queue.requests.popleft()
            start = end
            if not run:
                continue
            if len(run) == 1 or repeat is None or not repeat(run[0][0].broker_id, response, len(run)):
                for _, each, answer in run:
                    if each is not None:
                        each(answer)
            with lock:
                for queue, _, _ in run:
                    if queue.closed:
                        continue
                    if not queue.requests:
                        queue.busy = False
                        self._busy -= 1
                    elif batch is batching.open_batch and batch is not None:
                        batch.append(queue)
                    else:
                        batch = deliver_after(latency, queue)


class InProcessTransport:
    """Controllers and brokers of one process, connected through the scheduler.

    :param scheduler: every delivery is a callback of this scheduler.
    :param latency: seconds a request or a response spends on the way.
    :param retry_backoff: seconds between attempts to reach a broker that is down.
    """

    def __init__(self, scheduler: Scheduler, latency: float = 0.001, retry_backoff: float = 0.1) -> None:
        self.scheduler = scheduler
        self.latency = latency
        self.retry_backoff = retry_backoff
        self.lock = threading.RLock()
        self.after: Callable[[float, Callable[[], None]], Any] = partial(
            scheduler.schedule, name="inprocess-transport"
        )
        """``after(delay, fn)``: run ``fn`` in ``delay`` seconds (a partial: no Python frame per message)."""
        self._batched: Callable[[Callable[[list[Any]], None], float, Any], list[Any]] | None = getattr(
            scheduler, "schedule_batched", None
        )
        self.batching: _Batching = cast(_Batching, scheduler) if self._batched is not None else _NoBatching()
        """Where the batch that a channel's next message could join is (``open_batch``)."""
        self._brokers: dict[int, _FanOutHandler] = {}
        """Each bound broker's handler, taking UpdateMetadata fan-outs as they are (see ``send_requests``)."""
        self._controllers: dict[int, ControllerHandler] = {}
        self._channels: list[InProcessControllerChannel] = []
        self._to_controllers = 0  # broker requests not yet answered

    def controller_channel(self, controller_id: int) -> InProcessControllerChannel:
        channel = InProcessControllerChannel(self, controller_id)
        with self.lock:
            self._channels.append(channel)
        return channel

    def bind_broker(self, broker_id: int, handler: BrokerHandler) -> None:
        with self.lock:
            if broker_id in self._brokers:
                raise IllegalStateError(f"broker {broker_id} is already bound to the in-process transport")
            self._brokers[broker_id] = (cast(_FanOutHandler, handler) if takes_fan_outs(handler)
                                        else partial(_built_for, handler, broker_id))

    def unbind_broker(self, broker_id: int) -> None:
        with self.lock:
            self._brokers.pop(broker_id, None)

    def is_broker_bound(self, broker_id: int) -> bool:
        with self.lock:
            return broker_id in self._brokers

    def bind_controller(self, controller_id: int, handler: ControllerHandler) -> None:
        with self.lock:
            if controller_id in self._controllers:
                raise IllegalStateError(f"controller {controller_id} is already bound to the in-process transport")
            self._controllers[controller_id] = handler

    def unbind_controller(self, controller_id: int) -> None:
        with self.lock:
            self._controllers.pop(controller_id, None)

    def send_to_controller(self, controller_id: int, request: BrokerToControllerRequest, callback: Callback) -> None:
        """Deliver a broker request after ``latency``; when no controller is bound under
        ``controller_id`` (-1: the broker knows of none) the answer is ``NOT_CONTROLLER``, as from a
        broker that is not (or no longer) the controller."""
        with self.lock:
            self._to_controllers += 1

        def answered(response: Any) -> None:
            with self.lock:
                self._to_controllers -= 1
            callback(response)

        self.after(self.latency, lambda: self._deliver_to_controller(controller_id, request, answered))

    def idle(self) -> bool:
        """Nothing is queued for a broker and every broker request has been answered."""
        with self.lock:
            channels = list(self._channels)
            if self._to_controllers:
                return False
        return all(channel.idle() for channel in channels)

    def close(self) -> None:
        """Shut every channel down and unbind everything."""
        with self.lock:
            channels = list(self._channels)
            self._brokers.clear()
            self._controllers.clear()
        for channel in channels:
            channel.shutdown()

    # --- Used by the channels ----------------------------------------------------------------------

    def batched(self, run: Callable[[list[T]], None]) -> Callable[[float, T], list[T] | None]:
        """``later(delay, item)``: ``run([item])`` in ``delay`` seconds. On a simulated scheduler
        the deliveries of a fan-out (one per broker, due at the same instant) share one scheduler
        entry and one call ``run(items)``, in the same order as entries of their own; ``later``
        then returns the entry's items, to which the channel appends the next message itself while
        they are :attr:`batching`'s ``open_batch`` (:attr:`SimulatedScheduler.open_batch`)."""
        if self._batched is not None:
            return partial(self._batched, run)
        after = self.after

        def later(delay: float, item: T) -> None:
            after(delay, partial(run, [item]))
        return later

    def broker_handler(self, broker_id: int) -> _FanOutHandler | None:
        with self.lock:
            return self._brokers.get(broker_id)

    def forget_channel(self, channel: InProcessControllerChannel) -> None:
        with self.lock:
            if channel in self._channels:
                self._channels.remove(channel)

    def _deliver_to_controller(
        self, controller_id: int, request: BrokerToControllerRequest, callback: Callback
    ) -> None:
        with self.lock:
            handler = self._controllers.get(controller_id)
        if handler is None:
            response = error_response(request, Errors.NOT_CONTROLLER)
            self.after(self.latency, lambda: callback(response))
            return
        handler(request, lambda response: self.after(self.latency, lambda: callback(response)))


@hookimpl
def kctl_register_transports(register: TransportRegistry) -> None:
    """Register the in-process transport as ``inprocess`` (``factory(scheduler, latency=0.001)``)."""
    register.add("inprocess", InProcessTransport)


__all__ = ["InProcessControllerChannel", "InProcessTransport"]
