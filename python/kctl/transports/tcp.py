"""The ``tcp`` transport: controller and brokers in separate processes, msgpack frames over TCP.

The controller side follows Kafka's ControllerChannelManager (reference §5.5): one FIFO queue and
one sender per broker, created from the broker's registered PLAINTEXT endpoint; the sender keeps
one request in flight and, on any failure (no connection, closed connection, no answer within
``request_timeout``), backs off ``retry_backoff`` seconds and sends the same request again, until
it is answered or the broker is removed from the channel.

Every request's header carries the sender's controller epoch and broker epoch (see
:mod:`kctl.net`); a broker refuses a controller request whose header disagrees with its body, and
its agent answers ``STALE_CONTROLLER_EPOCH`` to a controller older than the newest it has heard
from (invariant I5). A controller also names its own listener in the header: that is how brokers
learn where to send ControlledShutdown and AlterPartition (the controller is not itself a broker
with a registered endpoint here).

Over TLS with authorization (:mod:`kctl.security`), a broker answers CLUSTER_AUTHORIZATION_FAILED
to controller requests from a principal that is not a controller's, and a controller to
ControlledShutdown or AlterPartition not sent by the principal of the broker they name. A header's
listener is learned only from a request the broker accepted, so that no other peer can redirect
its requests to the controller.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kctl.errors import Errors, IllegalStateError
from kctl.hookspecs import hookimpl
from kctl.model import BrokerInfo
from kctl.net import (
    Address,
    EventLoopThread,
    FrameClient,
    FrameServer,
    Header,
    NetworkError,
    Request,
    Respond,
    format_address,
    parse_address,
)
from kctl.messages import (
    AlterPartitionRequest,
    BrokerToControllerRequest,
    ControlledShutdownRequest,
    ControllerRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
    controller_error_response,
)
from kctl.scheduler import Scheduler
from kctl.security import ListenerSecurity
from kctl.transports.base import BrokerHandler, ControllerHandler, deliver_response, error_response

if TYPE_CHECKING:
    from kctl.registry import TransportRegistry

logger = logging.getLogger(__name__)

Callback = Callable[[Any], None]

CONTROLLER_APIS = {r.api: r for r in (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)}
"""Requests a broker accepts from the controller, by api name."""
BROKER_APIS = {r.api: r for r in (ControlledShutdownRequest, AlterPartitionRequest)}
"""Requests a controller accepts from brokers, by api name."""


def broker_address(info: BrokerInfo) -> Address | None:
    """The broker's PLAINTEXT endpoint (its first endpoint when none is called so: its SSL one)."""
    for endpoint in info.endpoints:
        if endpoint.listener_name == "PLAINTEXT":
            return endpoint.host, endpoint.port
    return (info.endpoints[0].host, info.endpoints[0].port) if info.endpoints else None


class _BrokerSender:
    """One broker's queue and the task that drains it, one request at a time."""

    def __init__(self, channel: TcpControllerChannel, broker_id: int, address: Address) -> None:
        self.channel = channel
        self.broker_id = broker_id
        self.address = address
        self.requests: deque[tuple[ControllerRequest, Callback | None]] = deque()
        self.wakeup = asyncio.Event()
        self.task: asyncio.Task[None] = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        transport = self.channel.transport
        while True:
            if not self.requests:
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            request, callback = self.requests[0]
            header = Header(self.channel.controller_id, request.controller_epoch, request.broker_epoch,
                            transport.source)
            try:
                response = await transport.client.call(
                    self.address, Request(request.api, header, request), transport.request_timeout
                )
            except NetworkError as exc:  # Kafka closes the connection, backs off and sends it again
                logger.info("Controller %d: %s to broker %d failed (%s); retrying", self.channel.controller_id,
                            request.api, self.broker_id, exc)
                await asyncio.sleep(transport.retry_backoff)
                continue
            self.requests.popleft()
            if callback is not None:
                deliver_response(callback, response, self.channel.controller_id)


class TcpControllerChannel:
    """One controller's channel to the brokers (Kafka's ControllerChannelManager) over TCP."""

    def __init__(self, transport: TcpTransport, controller_id: int) -> None:
        self.transport = transport
        self.controller_id = controller_id
        self._senders: dict[int, _BrokerSender] = {}
        self._lock = threading.Lock()
        self._idle_brokers: set[int] = set()

    def add_broker(self, broker: BrokerInfo) -> None:
        """Open a queue towards the broker's endpoint; a broker that has one keeps it, as in Kafka."""
        address = broker_address(broker)
        if address is None:
            logger.warning("Controller %d: broker %d registered no endpoint; requests to it are dropped",
                           self.controller_id, broker.id)
            return

        def add() -> None:
            if broker.id not in self._senders:
                self._senders[broker.id] = _BrokerSender(self, broker.id, address)

        self.transport.network.call_soon(add)

    def remove_broker(self, broker_id: int) -> None:
        def remove() -> None:
            sender = self._senders.pop(broker_id, None)
            if sender is not None:
                sender.task.cancel()
                sender.requests.clear()

        self.transport.network.call_soon(remove)

    def send_request(self, broker_id: int, request: ControllerRequest, callback: Callback | None) -> None:
        def send() -> None:
            sender = self._senders.get(broker_id)
            if sender is None:
                logger.warning("Controller %d: dropping %s request to broker %d, which has no queue",
                               self.controller_id, request.api, broker_id)
                return
            sender.requests.append((request, callback))
            sender.wakeup.set()

        self.transport.network.call_soon(send)

    def queued(self) -> dict[int, int]:
        """Requests waiting per broker, the one in flight included (for tests and tools)."""

        async def count() -> dict[int, int]:
            return {b: len(s.requests) for b, s in self._senders.items()}

        return self.transport.network.run(count(), timeout=10)

    def shutdown(self) -> None:
        def stop_all() -> None:
            for broker_id in list(self._senders):
                self._senders.pop(broker_id).task.cancel()

        self.transport.network.call_soon(stop_all)


class TcpTransport:
    """The transport of one process: a listener for what it serves, connections for what it sends.

    :param scheduler: unused by the network itself; kept so every transport factory has the same
        first argument.
    :param listen: ``HOST:PORT`` to serve on (port 0: a free one); started by :meth:`listen` or the
        first ``bind_*``.
    :param server: serve on an existing :class:`~kctl.net.FrameServer` instead (a broker process
        shares its listener with the data plane).
    :param request_timeout: seconds to wait for an answer before the request is sent again.
    :param retry_backoff: seconds between attempts (Kafka: 100 ms).
    :param security: TLS and authorization for the listener and the connections (default
        PLAINTEXT); with ``server``, the server's.
    """

    def __init__(
        self,
        scheduler: Scheduler | None = None,
        listen: str = "127.0.0.1:0",
        *,
        server: FrameServer | None = None,
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        retry_backoff: float = 0.1,
        security: ListenerSecurity | None = None,
    ) -> None:
        self.scheduler = scheduler
        self._owns_network = server is None
        self.network = server.network if server is not None else EventLoopThread("kctl-tcp")
        self.server = server if server is not None else FrameServer(self.network, parse_address(listen), security)
        self.client = FrameClient(self.network, connect_timeout, self.server.security)
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self._lock = threading.Lock()
        self._brokers: dict[int, BrokerHandler] = {}
        self._controllers: dict[int, ControllerHandler] = {}
        self._controller_addresses: dict[int, Address] = {}  # learned from their requests
        self._channels: list[TcpControllerChannel] = []
        self._closed = False

    @property
    def source(self) -> str | None:
        """This process's listener as ``HOST:PORT`` once it listens."""
        return None if self.server.address is None else format_address(self.server.address)

    def listen(self) -> Address:
        """Start serving; returns the bound address (to register as the broker's endpoint)."""
        return self.server.start()

    # --- Controller side -------------------------------------------------------------------------

    def controller_channel(self, controller_id: int) -> TcpControllerChannel:
        channel = TcpControllerChannel(self, controller_id)
        with self._lock:
            self._channels.append(channel)
        return channel

    def bind_controller(self, controller_id: int, handler: ControllerHandler) -> None:
        with self._lock:
            if controller_id in self._controllers:
                raise IllegalStateError(f"controller {controller_id} is already bound to this transport")
            self._controllers[controller_id] = handler
        self.listen()
        for api in BROKER_APIS:
            self.server.add_handler(api, self._serve_broker_request)

    def unbind_controller(self, controller_id: int) -> None:
        with self._lock:
            self._controllers.pop(controller_id, None)

    def _serve_broker_request(self, request: Request, respond: Respond) -> None:
        body = request.body
        expected = BROKER_APIS.get(request.api)
        if expected is None or not isinstance(body, expected):
            raise IllegalStateError(f"a {request.api} request carried a {type(body).__name__}")
        if not self.server.security.authorizer.authorize_broker_request(request.peer, request.api, body.broker_id):
            respond(error_response(body, Errors.CLUSTER_AUTHORIZATION_FAILED))
            return
        with self._lock:
            handlers = list(self._controllers.values())
        if not handlers:  # this process's controller stopped: tell the broker to look elsewhere
            respond(error_response(body, Errors.NOT_CONTROLLER))
            return
        handlers[0](body, respond)

    # --- Broker side -----------------------------------------------------------------------------

    def bind_broker(self, broker_id: int, handler: BrokerHandler) -> None:
        with self._lock:
            if broker_id in self._brokers:
                raise IllegalStateError(f"broker {broker_id} is already bound to this transport")
            self._brokers[broker_id] = handler
        self.listen()
        for api in CONTROLLER_APIS:
            self.server.add_handler(api, self._serve_controller_request)

    def unbind_broker(self, broker_id: int) -> None:
        with self._lock:
            self._brokers.pop(broker_id, None)

    def _serve_controller_request(self, request: Request, respond: Respond) -> None:
        body, header = request.body, request.header
        expected = CONTROLLER_APIS.get(request.api)
        if expected is None or not isinstance(body, expected):
            raise IllegalStateError(f"a {request.api} request carried a {type(body).__name__}")
        if (header.controller_id, header.controller_epoch, header.broker_epoch) != (
            body.controller_id, body.controller_epoch, body.broker_epoch
        ):
            raise IllegalStateError(
                f"{request.api}: the header's controller {header.controller_id}, controller epoch "
                f"{header.controller_epoch} and broker epoch {header.broker_epoch} disagree with the request's"
            )
        if not self.server.security.authorizer.authorize_controller_request(request.peer, request.api):
            respond(controller_error_response(body, Errors.CLUSTER_AUTHORIZATION_FAILED))
            return
        source = None if header.source is None else parse_address(header.source)
        with self._lock:
            handlers = list(self._brokers.values())
        if not handlers:
            raise IllegalStateError("no broker is running here")
        response = handlers[0](body)  # an exception (broker stopped) is an error answer: the sender retries
        if source is not None and response.error is Errors.NONE:
            with self._lock:
                self._controller_addresses[header.controller_id] = source
        respond(response)

    def send_to_controller(self, controller_id: int, request: BrokerToControllerRequest, callback: Callback) -> None:
        """Send to the controller's listener (learned from its requests); the answer is
        ``NOT_CONTROLLER`` when this broker has not heard from that controller or cannot reach it."""
        with self._lock:
            address = self._controller_addresses.get(controller_id)
        if address is None:
            self.network.call_soon(callback, error_response(request, Errors.NOT_CONTROLLER))
            return
        header = Header(controller_id, -1, request.broker_epoch, self.source)

        def answered(response: Any) -> None:
            if isinstance(response, NetworkError):
                logger.info("%s to controller %d failed: %s", request.api, controller_id, response)
                response = error_response(request, Errors.NOT_CONTROLLER)
            callback(response)

        self.client.submit(address, Request(request.api, header, request), self.request_timeout, answered)

    def close(self) -> None:
        """Stop every channel, the listener and (when it owns it) the network thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            channels = list(self._channels)
            self._brokers.clear()
            self._controllers.clear()
        for channel in channels:
            channel.shutdown()
        self.client.close()
        if self._owns_network:
            self.server.close()
            self.network.stop()


@hookimpl
def kctl_register_transports(register: TransportRegistry) -> None:
    """Register the TCP transport as ``tcp`` (``factory(scheduler, listen="127.0.0.1:0", …)``)."""
    register.add("tcp", TcpTransport)


__all__ = ["BROKER_APIS", "CONTROLLER_APIS", "TcpControllerChannel", "TcpTransport", "broker_address"]
