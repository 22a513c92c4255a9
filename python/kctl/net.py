"""Request/response over TCP between kctl processes: an asyncio loop on a thread of its own.

kctl's controller and broker agent are written against threads and an injected scheduler, so the
network lives beside them: :class:`EventLoopThread` runs one asyncio loop per process,
:class:`FrameServer` answers requests on a listener, and :class:`FrameClient` sends them over
connections it keeps per address. Every frame is a :mod:`kctl.wire` message:

- a request ``("req", correlation id, api, header, body)``, where ``header`` holds the sender's
  ``controller_id``, ``controller_epoch`` and ``broker_epoch`` (so a peer can fence on them before
  looking at the body) and, from a controller, its own listener in ``source``;
- a response ``("resp", correlation id, body)`` or ``("err", correlation id, message)``.

Handlers are called on the loop's thread and must not block; they answer through ``respond``,
which may be called later and from any thread (a controller answers from its event thread).

With a :class:`~kctl.security.ListenerSecurity` for SSL, the listener and the connections speak
TLS: a peer that fails the handshake (no TLS, a certificate the truststore does not accept, none
when one is required) is logged with its address and disconnected before any frame is read, and
every request names the principal its connection authenticated as (:attr:`Request.peer`), which
handlers authorize; what a header says about its sender is only a claim.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import reprlib
import ssl
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kctl import wire
from kctl.errors import IllegalArgumentError, KctlError
from kctl.security import PLAINTEXT_SECURITY, ListenerSecurity, Peer

logger = logging.getLogger(__name__)

T = TypeVar("T")
Address = tuple[str, int]


class NetworkError(KctlError):
    """A request got no answer: no connection, a closed connection, a timeout, or a peer error."""


def parse_address(text: str) -> Address:
    """``HOST:PORT`` (port 0: any free port) as a tuple; a clear error otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise IllegalArgumentError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def format_address(address: Address) -> str:
    return f"{address[0]}:{address[1]}"


@dataclass(frozen=True)
class Header:
    """Who sent a request, with the epochs the receiver fences on (-1: none known)."""

    controller_id: int = -1
    controller_epoch: int = -1
    broker_epoch: int = -1
    source: str | None = None


wire.register_message(Header)


LOCAL_PEER = Peer("local")
"""The peer of a request built in this process (not received on a listener)."""


@dataclass(frozen=True)
class Request:
    """A request; on a listener, ``peer`` is the connection's address and authenticated principal."""

    api: str
    header: Header
    body: Any
    peer: Peer = LOCAL_PEER


Respond = Callable[[Any], None]
Handler = Callable[[Request, Respond], None]


class EventLoopThread:
    """One asyncio loop on a daemon thread; everything else in the process stays synchronous."""

    def __init__(self, name: str = "kctl-network") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn, *args)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the loop and wait for its result (never from the loop's thread)."""
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        if threading.current_thread() is self._thread:
            raise RuntimeError("the network loop cannot stop itself")

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.run(cancel_all(), timeout=5)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    header = await reader.readexactly(wire.FRAME_HEADER.size)
    return wire.decode(await reader.readexactly(wire.frame_length(header)))


# --- Server ----------------------------------------------------------------------------------------


HANDSHAKE_TIMEOUT = 10.0
"""Seconds a peer has to complete the TLS handshake."""


class FrameServer:
    """A listener answering requests by api name (``add_handler``).

    :param listen: ``(host, port)``; port 0 picks a free one, :attr:`address` says which.
    :param security: TLS and the authorizer handlers consult (default: PLAINTEXT, no authorizer).
    """

    def __init__(self, network: EventLoopThread, listen: Address, security: ListenerSecurity | None = None) -> None:
        self.network = network
        self.security = security or PLAINTEXT_SECURITY
        self._listen = listen
        self._handlers: dict[str, Handler] = {}
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.address: Address | None = None

    def add_handler(self, api: str, handler: Handler) -> None:
        self._handlers[api] = handler

    def remove_handler(self, api: str) -> None:
        self._handlers.pop(api, None)

    def start(self) -> Address:
        """Listen (once); returns the bound address."""
        if self.address is None:
            self.address = self.network.run(self._start(), timeout=30)
        return self.address

    async def _start(self) -> Address:
        host, port = self._listen
        try:
            self._server = await asyncio.start_server(self._serve, host, port)
        except OSError as exc:
            raise NetworkError(f"cannot listen on {format_address(self._listen)}: {exc.strerror or exc}") from exc
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            try:
                self.network.run(self._close(server), timeout=10)
            except (concurrent.futures.TimeoutError, RuntimeError):
                pass

    async def _close(self, server: asyncio.Server) -> None:
        server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        peername = writer.get_extra_info("peername")
        peer = Peer(format_address((str(peername[0]), int(peername[1]))) if peername else "unknown")
        try:
            if self.security.server_context is not None:
                peer = await self._authenticate(writer, peer)
            while True:
                message = await _read_frame(reader)
                self._dispatch(message, writer, peer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the peer went away
        except (wire.WireError, _Unauthenticated) as exc:
            logger.warning("Closing the connection from %s (principal %s): %s", peer.address, peer.principal, exc)
        finally:
            self._writers.discard(writer)
            writer.transport.abort()  # at once: a TLS goodbye would wait for a peer that may never answer

    async def _authenticate(self, writer: asyncio.StreamWriter, peer: Peer) -> Peer:
        """The TLS handshake, then the principal of the peer's certificate (Kafka's SslAuthenticator)."""
        assert self.security.server_context is not None
        try:
            await writer.start_tls(self.security.server_context, ssl_handshake_timeout=HANDSHAKE_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as exc:
            raise _Unauthenticated(f"TLS handshake failed: {str(exc) or type(exc).__name__}") from None
        try:
            return Peer(peer.address, self.security.principal(writer.get_extra_info("peercert")))
        except KctlError as exc:  # no principal mapping rule applies
            raise _Unauthenticated(f"no principal: {exc}") from None

    def _dispatch(self, message: Any, writer: asyncio.StreamWriter, peer: Peer) -> None:
        if not (isinstance(message, tuple) and len(message) == 5 and message[0] == "req"):
            raise wire.WireError(f"not a request frame: {reprlib.repr(message)}")
        _, correlation, api, header, body = message
        if type(correlation) is not int or type(api) is not str:
            raise wire.WireError(f"not a request frame: {reprlib.repr(message)}")
        if not isinstance(header, Header):
            raise wire.WireError(f"{api} request without a header")
        answered = False

        def respond(response: Any, kind: str = "resp") -> None:
            nonlocal answered
            if answered:
                return
            answered = True
            try:
                data = wire.frame((kind, correlation, response))
            except wire.WireError as exc:
                logger.error("Cannot answer %s: %s", api, exc)
                data = wire.frame(("err", correlation, str(exc)))
            self.network.call_soon(self._write, writer, data)

        handler = self._handlers.get(api)
        if handler is None:
            respond(f"no handler for {api} requests here", "err")
            return
        try:
            handler(Request(api, header, body, peer), respond)
        except KctlError as exc:  # refused on purpose: the handler said why
            logger.info("Answered %s from %s with an error: %s", api, peer.address, exc)
            respond(f"{type(exc).__name__}: {exc}", "err")
        except Exception as exc:
            logger.exception("Handler for %s failed", api)
            respond(f"{type(exc).__name__}: {exc}", "err")

    @staticmethod
    def _write(writer: asyncio.StreamWriter, data: bytes) -> None:
        if not writer.is_closing():
            writer.write(data)


# --- Client ----------------------------------------------------------------------------------------


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    pending: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    closed: str | None = None  # why it was dropped


class _Unauthenticated(Exception):
    """A connection that did not authenticate: it is closed before any request is read."""


class FrameClient:
    """Connections to peers, one per address, opened on first use and dropped on any error.

    :param security: with SSL, connections use its client context (this process's certificate;
        the server's checked against the truststore and, by default, its host name).
    """

    def __init__(
        self, network: EventLoopThread, connect_timeout: float = 10.0, security: ListenerSecurity | None = None
    ) -> None:
        self.network = network
        self.connect_timeout = connect_timeout
        self.security = security or PLAINTEXT_SECURITY
        self._connections: dict[Address, _Connection] = {}
        self._connecting: dict[Address, asyncio.Future[_Connection]] = {}
        self._ids = itertools.count(1)

    async def call(self, address: Address, request: Request, timeout: float) -> Any:
        """Send and wait for the answer (on the loop); :class:`NetworkError` on any failure."""
        try:
            connection = await asyncio.wait_for(self._connection(address), self.connect_timeout)
        except ssl.SSLError as exc:
            raise NetworkError(f"cannot connect to {format_address(address)}: TLS handshake failed: {exc}") from None
        except (OSError, asyncio.TimeoutError) as exc:
            raise NetworkError(f"cannot connect to {format_address(address)}: {exc or 'timed out'}") from None
        if connection.closed is not None:  # dropped (the peer's first bytes were no answer, or it refused us)
            raise NetworkError(f"connection to {format_address(address)} {connection.closed}")
        correlation = next(self._ids)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        connection.pending[correlation] = answer
        try:
            connection.writer.write(wire.frame(("req", correlation, request.api, request.header, request.body)))
            return await asyncio.wait_for(answer, timeout)
        except asyncio.TimeoutError:
            self._drop(address, connection)  # a late answer must not be taken for another's
            raise NetworkError(f"{request.api} to {format_address(address)}: no answer within {timeout:g}s") from None
        finally:
            connection.pending.pop(correlation, None)

    def submit(self, address: Address, request: Request, timeout: float, callback: Callable[[Any], None]) -> None:
        """Send from any thread; ``callback`` gets the answer or the :class:`NetworkError` (on the loop)."""

        async def run() -> None:
            try:
                result: Any = await self.call(address, request, timeout)
            except NetworkError as exc:
                result = exc
            except asyncio.CancelledError:
                return
            try:
                callback(result)
            except Exception:
                logger.exception("Callback for %s to %s failed", request.api, format_address(address))

        self.network.call_soon(lambda: asyncio.ensure_future(run()))

    def close(self) -> None:
        def drop_all() -> None:
            for address, connection in list(self._connections.items()):
                self._drop(address, connection)

        self.network.call_soon(drop_all)

    async def _connection(self, address: Address) -> _Connection:
        existing = self._connections.get(address)
        if existing is not None and not existing.writer.is_closing():
            return existing
        waiting = self._connecting.get(address)
        if waiting is not None:
            return await asyncio.shield(waiting)
        opened: asyncio.Future[_Connection] = asyncio.get_running_loop().create_future()
        self._connecting[address] = opened
        try:
            context = self.security.client_context
            reader, writer = await asyncio.open_connection(
                *address, ssl=context, ssl_handshake_timeout=None if context is None else self.connect_timeout
            )
            connection = _Connection(reader, writer)
            connection.task = asyncio.ensure_future(self._read(address, connection))
            self._connections[address] = connection
            opened.set_result(connection)
            return connection
        except BaseException as exc:
            opened.set_exception(exc if isinstance(exc, Exception) else NetworkError("cancelled"))
            opened.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._connecting[address]

    async def _read(self, address: Address, connection: _Connection) -> None:
        reason = "closed by the peer"
        try:
            while True:
                message = await _read_frame(connection.reader)
                if not (isinstance(message, tuple) and len(message) == 3 and message[0] in ("resp", "err")):
                    raise wire.WireError(f"not a response frame: {reprlib.repr(message)}")
                kind, correlation, body = message
                if type(correlation) is not int:
                    raise wire.WireError(f"not a response frame: {reprlib.repr(message)}")
                answer = connection.pending.get(correlation)
                if answer is None or answer.done():
                    continue
                if kind == "resp":
                    answer.set_result(body)
                else:
                    answer.set_exception(NetworkError(f"{format_address(address)} answered: {body}"))
        except (asyncio.IncompleteReadError, OSError) as exc:  # OSError: ssl.SSLError (a TLS alert) among them
            reason = f"closed: {exc}"
        except wire.WireError as exc:
            reason = f"dropped: {exc}"
            logger.warning("Dropping the connection to %s: %s", format_address(address), exc)
        except asyncio.CancelledError:
            reason = "closed"
        finally:
            self._drop(address, connection, reason)

    def _drop(self, address: Address, connection: _Connection, reason: str = "dropped") -> None:
        connection.closed = reason
        if self._connections.get(address) is connection:
            del self._connections[address]
        connection.writer.transport.abort()  # at once, TLS or not: the connection is given up
        for answer in connection.pending.values():
            if not answer.done():
                answer.set_exception(NetworkError(f"connection to {format_address(address)} {reason}"))
        connection.pending.clear()
        if connection.task is not None and connection.task is not asyncio.current_task():
            connection.task.cancel()


__all__ = [
    "Address",
    "EventLoopThread",
    "FrameClient",
    "FrameServer",
    "HANDSHAKE_TIMEOUT",
    "Handler",
    "Header",
    "LOCAL_PEER",
    "NetworkError",
    "Request",
    "Respond",
    "format_address",
    "parse_address",
]
