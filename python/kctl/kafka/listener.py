"""The controller's listener for real Kafka brokers: ApiVersions, ControlledShutdown,
AlterPartition and AllocateProducerIds in Kafka's protocol, answered through the transport's
controller handler.

As Kafka's socket server does: requests on one connection are answered in order, one at a time;
a frame larger than ``max_request_bytes``, an unknown api key, a version kctl lacks (but
ApiVersions'), or bytes that are not the request they claim close that connection with a WARNING
naming the peer and the problem, and the listener goes on serving the others. ApiVersions at a
version kctl lacks is answered at v0 with ``UNSUPPORTED_VERSION`` and the versions kctl has, so the
broker can ask again at one of them. Without a controller bound the answer is ``NOT_CONTROLLER``;
a controller that does not answer within ``answer_timeout`` gets the connection closed (the broker
sends its request again). AlterPartition from v2 names topics by id, resolved through
``topic_ids`` (name → id, asked per request); partitions of an unknown id are answered
``UNKNOWN_TOPIC_ID`` without reaching the controller.

A thread serves each connection, so connections are bounded as Kafka bounds them: beyond
``max_connections`` a new one is closed at once (Kafka's ``max.connections``), and one idle for
``idle_timeout`` seconds is closed (Kafka's ``connections.max.idle.ms``, 10 minutes by default).
"""

from __future__ import annotations

import logging
import queue
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kctl.errors import Errors
from kctl.kafka import messages as km
from kctl.kafka import protocol as p
from kctl.messages import AllocateProducerIdsResponse, AlterPartitionResponse, ControlledShutdownResponse
from kctl.transports.base import ControllerHandler, error_response

logger = logging.getLogger(__name__)


class ControllerListener:
    """A TCP listener on ``host:port`` (0: any free port; see :attr:`address`) answering brokers for
    the controller whose ``handler`` is bound (:meth:`bind`)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 topic_ids: Callable[[], Mapping[str, str]] = dict, max_request_bytes: int = p.MAX_FRAME_BYTES,
                 answer_timeout: float = 30.0, max_connections: int = 1000, idle_timeout: float = 600.0) -> None:
        self.topic_ids = topic_ids
        self.max_request_bytes = max_request_bytes
        self.answer_timeout = answer_timeout
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        self.handler: ControllerHandler | None = None
        self._server = socket.create_server((host, port))
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="kctl-kafka-listener", daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.getsockname()[:2]
        return host, port

    def bind(self, handler: ControllerHandler | None) -> None:
        self.handler = handler

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = list(self._connections)
        self._server.close()
        for conn in connections:
            conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self._server.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                full = len(self._connections) >= self.max_connections
                if not full:
                    self._connections.add(conn)
            if full:
                logger.warning("Closing the connection from %s:%d: %d connections are open already (max_connections)",
                               peer[0], peer[1], self.max_connections)
                conn.close()
                continue
            conn.settimeout(self.idle_timeout)
            threading.Thread(target=self._serve, args=(conn, peer), name=f"kctl-kafka-listener-{peer[1]}",
                             daemon=True).start()

    def _serve(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        try:
            while True:
                conn.sendall(p.frame(self._answer(p.read_frame(conn, self.max_request_bytes))))
        except ConnectionError:
            pass  # the broker closed it
        except (OSError, p.KafkaProtocolError, queue.Empty) as exc:
            if not self._closed:
                reason = (f"no answer from the controller within {self.answer_timeout} s" if isinstance(exc, queue.Empty)
                          else f"idle for {self.idle_timeout} s" if isinstance(exc, TimeoutError) else str(exc))
                logger.warning("Closing the connection from %s:%d: %s", peer[0], peer[1], reason)
        finally:
            with self._lock:
                self._connections.discard(conn)
            conn.close()

    def _answer(self, data: bytes) -> bytes:
        """The response to one request (header and body)."""
        if len(data) >= 8:
            api_key, version, correlation_id = struct.unpack_from(">hhi", data)
            if api_key == p.API_VERSIONS.key and not 0 <= version <= p.API_VERSIONS.max_version:
                body = km.api_versions_response_body(km.UNSUPPORTED_VERSION)
                return p.encode_response(p.API_VERSIONS, 0, correlation_id, body)
        header, request = p.decode_request(data)
        a = p.api(header.api_key)
        if a is p.API_VERSIONS:
            body = km.api_versions_response_body()
        elif a is p.CONTROLLED_SHUTDOWN:
            shutdown = self._ask(km.controlled_shutdown_request(request), ControlledShutdownResponse)
            body = km.controlled_shutdown_response_body(shutdown)
        elif a is p.ALTER_PARTITION:
            ids = self.topic_ids()
            received = km.alter_partition_request(request, {tid: name for name, tid in ids.items()})
            altered = (self._ask(received.request, AlterPartitionResponse) if received.request.changes
                       else AlterPartitionResponse())
            body = km.alter_partition_response_body(altered, header.api_version, ids, received.unknown_topic_ids)
        elif a is p.ALLOCATE_PRODUCER_IDS:
            allocated = self._ask(km.allocate_producer_ids_request(request), AllocateProducerIdsResponse)
            body = km.allocate_producer_ids_response_body(allocated)
        else:
            raise p.UnsupportedApiError(f"{a.name} is not answered by a controller")
        return p.encode_response(a, header.api_version, header.correlation_id, body)

    def _ask(self, request: Any, expected: type) -> Any:
        """The bound controller's answer, or NOT_CONTROLLER without one."""
        handler = self.handler
        if handler is None:
            return error_response(request, Errors.NOT_CONTROLLER)
        answers: queue.Queue[Any] = queue.Queue()
        handler(request, answers.put)
        answer = answers.get(timeout=self.answer_timeout)
        if not isinstance(answer, expected):
            raise p.KafkaProtocolError(f"the controller answered {request.api} with {answer!r}")
        return answer


__all__ = ["ControllerListener"]
