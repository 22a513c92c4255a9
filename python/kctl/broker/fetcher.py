"""Follower fetching between broker processes: the simulated data plane over the network.

In one process, simulated followers read their leader's replica manager directly through the
shared :class:`~kctl.broker.replica_manager.DataPlaneLedger`. A broker running as its own process
(``kctl broker``) cannot, so :class:`NetworkReplicaManager` sends a ``Fetch`` request per leader
broker and fetch round to the leader's listener instead, and answers the fetches of its own
followers there. The leader's half (recording the follower's offset, growing the ISR, advancing
the high watermark, reporting with AlterPartition) and the follower's half (truncating, copying,
learning the high watermark) are the simulated replica manager's own; only the hop between them
changes. As Kafka's fetcher threads do, a follower keeps fetching every round (there is no
in-process wake-up), and first asks for the leader's epoch history when it must truncate
(OffsetsForLeaderEpoch).

A leader also takes ``Produce`` requests from clients outside the cluster (``records`` 0 only
reads, as ListOffsets does): the answer is its log after the append — leader epoch, log end
offset, high watermark and epoch history — so a client can tell later whether a record it saw
committed is still there (the fault suite checks I8 that way).

With authorization on (:mod:`kctl.security`), a leader serves a fetch only to the principal of the
replica it names, answering TOPIC_AUTHORIZATION_FAILED for each partition otherwise, as Kafka does
for a follower without ClusterAction, and takes produce requests only from a super user.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kctl.errors import Errors
from kctl.model import TopicPartition
from kctl.broker.replica_manager import LeaderLogView, ReplicaRole, SimulatedReplicaManager
from kctl.net import Address, FrameClient, FrameServer, Header, NetworkError, Request, Respond
from kctl.security import PLAINTEXT_SECURITY
from kctl.wire import register_message

logger = logging.getLogger(__name__)

FETCH_API = "Fetch"
PRODUCE_API = "Produce"
EPOCHS_ONLY = -1
"""The fetch offset of a request that only asks for the leader's epoch history."""


@register_message
@dataclass(frozen=True)
class FetchPartition:
    tp: TopicPartition
    leader_epoch: int
    fetch_offset: int  # EPOCHS_ONLY: truncate first


@register_message
@dataclass(frozen=True)
class FetchRequest:
    replica_id: int
    broker_epoch: int
    partitions: tuple[FetchPartition, ...]

    api = FETCH_API


@register_message
@dataclass(frozen=True)
class FetchPartitionResponse:
    tp: TopicPartition
    error: Errors
    log_end_offset: int = -1
    high_watermark: int = -1
    epochs: tuple[tuple[int, int], ...] = ()


@register_message
@dataclass(frozen=True)
class FetchResponse:
    partitions: tuple[FetchPartitionResponse, ...]


@register_message
@dataclass(frozen=True)
class ProduceRequest:
    """Append ``records`` records to the leader replica of ``tp`` (0: append nothing, only answer)."""

    tp: TopicPartition
    records: int

    api = PRODUCE_API


@register_message
@dataclass(frozen=True)
class ProduceResponse(FetchPartitionResponse):
    """The leader's log after the append, as a fetch sees it, and the leader epoch it appended in;
    only ``error`` when the broker does not lead ``tp``."""

    leader_epoch: int = -1


register_message(LeaderLogView)


class NetworkReplicaManager(SimulatedReplicaManager):
    """A :class:`SimulatedReplicaManager` whose followers fetch from leaders in other processes.

    :param client: the process's connections to other brokers.
    :param resolve: a broker id's listener address (from the metadata cache), None when unknown.
    :param fetch_interval: seconds between fetch rounds.
    :param request_timeout: seconds before an unanswered fetch is given up (and sent next round).
    """

    def __init__(
        self,
        client: FrameClient,
        resolve: Callable[[int], Address | None],
        *,
        fetch_interval: float = 0.5,
        request_timeout: float = 10.0,
    ) -> None:
        super().__init__(fetch_interval=fetch_interval)
        self._client = client
        self._resolve = resolve
        self._request_timeout = request_timeout
        self._in_flight: set[int] = set()  # leader brokers with a fetch on the way
        self._run = 0  # bumped at each start and stop: answers to an older run's fetches are void
        self._authorizer = PLAINTEXT_SECURITY.authorizer

    def serve(self, server: FrameServer) -> None:
        """Answer followers' fetches and clients' produce requests on ``server`` (the broker's listener),
        authorized by its authorizer."""
        self._authorizer = server.security.authorizer
        server.add_handler(FETCH_API, self._handle_fetch)
        server.add_handler(PRODUCE_API, self._handle_produce)

    def startup(self, broker: Any) -> None:
        with self.ledger.lock:
            self._run += 1
            self._in_flight.clear()
            super().startup(broker)

    def shutdown(self) -> None:
        with self.ledger.lock:
            self._run += 1
            self._in_flight.clear()
            super().shutdown()

    # --- Leader side ---------------------------------------------------------------------------

    def _handle_fetch(self, request: Request, respond: Respond) -> None:
        body = request.body
        if not isinstance(body, FetchRequest):
            raise TypeError(f"a Fetch request carried a {type(body).__name__}")
        if not self._authorizer.authorize_broker_request(request.peer, FETCH_API, body.replica_id):
            respond(FetchResponse(tuple(
                FetchPartitionResponse(part.tp, Errors.TOPIC_AUTHORIZATION_FAILED) for part in body.partitions
            )))
            return
        with self.ledger.lock:
            broker = self._broker
            results = []
            for part in body.partitions:
                view = None
                if broker is not None:
                    offset = None if part.fetch_offset == EPOCHS_ONLY else part.fetch_offset
                    view = self.serve_fetch(part.tp, body.replica_id, part.leader_epoch, offset, broker.scheduler.now())
                if view is None:
                    results.append(FetchPartitionResponse(part.tp, Errors.NOT_LEADER_OR_FOLLOWER))
                else:
                    results.append(FetchPartitionResponse(
                        part.tp, Errors.NONE, view.log_end_offset, view.high_watermark, view.epochs
                    ))
        respond(FetchResponse(tuple(results)))

    def _handle_produce(self, request: Request, respond: Respond) -> None:
        body = request.body
        if not isinstance(body, ProduceRequest):
            raise TypeError(f"a Produce request carried a {type(body).__name__}")
        if not self._authorizer.authorize_client_request(request.peer, PRODUCE_API):
            respond(ProduceResponse(body.tp, Errors.TOPIC_AUTHORIZATION_FAILED))
            return
        with self.ledger.lock:
            r = self._replicas.get(body.tp)
            if body.records < 0:
                error = Errors.INVALID_REQUEST
            elif body.records > 0:
                error = self.produce(body.tp, body.records)
            elif r is None or self._broker is None:
                error = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                error = Errors.NONE if r.role is ReplicaRole.LEADER else Errors.NOT_LEADER_OR_FOLLOWER
            if error is not Errors.NONE or r is None:
                respond(ProduceResponse(body.tp, error))
            else:
                respond(ProduceResponse(body.tp, Errors.NONE, r.leo, r.hw, r.epochs, r.leader_epoch))

    # --- Follower side -------------------------------------------------------------------------

    def _fetch_round(self) -> bool:
        broker = self._broker
        if broker is None or self._paused:
            return False
        for leader_id, pending in self._fetch_from.items():
            if leader_id in self._in_flight:
                continue
            address = self._resolve(leader_id)
            if address is None:
                continue  # the leader is not among the live brokers we know: try next round
            sent = tuple(
                FetchPartition(tp, r.leader_epoch, EPOCHS_ONLY if r.truncate else r.leo)
                for tp in pending
                for r in (self._replicas[tp],)
            )
            request = FetchRequest(self._broker_id, broker.broker_epoch, sent)
            header = Header(broker_epoch=broker.broker_epoch)
            run = self._run
            self._in_flight.add(leader_id)
            self._client.submit(
                address, Request(FETCH_API, header, request), self._request_timeout,
                functools.partial(self._fetched, run, leader_id, sent),
            )
        return bool(self._fetch_from)

    def _fetched(self, run: int, leader_id: int, sent: tuple[FetchPartition, ...], response: Any) -> None:
        with self.ledger.lock:
            if run != self._run:
                return
            self._in_flight.discard(leader_id)
            if isinstance(response, NetworkError):
                logger.debug("Broker %d: fetch from broker %d failed: %s", self._broker_id, leader_id, response)
                return
            if not isinstance(response, FetchResponse):
                logger.warning("Broker %d: broker %d answered a fetch with %r", self._broker_id, leader_id, response)
                return
            asked = {part.tp: part for part in sent}
            for result in response.partitions:
                part = asked.get(result.tp)
                r = self._replicas.get(result.tp)
                if (part is None or r is None or result.error is not Errors.NONE or r.role is not ReplicaRole.FOLLOWER
                        or (r.leader, r.leader_epoch) != (leader_id, part.leader_epoch)):
                    continue  # the leader moved on, or this replica did, since the request left
                view = LeaderLogView(result.log_end_offset, result.high_watermark, result.epochs)
                if part.fetch_offset == EPOCHS_ONLY:
                    if r.truncate:
                        self._truncate(r, view)
                elif not r.truncate and r.leo == part.fetch_offset:
                    self._apply_fetch(r, part.fetch_offset, view)


__all__ = [
    "EPOCHS_ONLY",
    "FETCH_API",
    "FetchPartition",
    "FetchPartitionResponse",
    "FetchRequest",
    "FetchResponse",
    "NetworkReplicaManager",
    "PRODUCE_API",
    "ProduceRequest",
    "ProduceResponse",
]
