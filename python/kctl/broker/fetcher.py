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

Fetches go in incremental fetch sessions (:mod:`kctl.broker.fetch_session`, Kafka's KIP-227): after
a full fetch, a follower names only the partitions whose fetch state changed and those it stopped
fetching (which the leader then counts as no longer fetching), and the leader answers only the
partitions with news, so an idle cluster's fetches carry almost nothing.

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
import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kctl.errors import Errors, InvalidRequestError
from kctl.model import TopicPartition
from kctl.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    MAX_CACHED_PARTITIONS,
    MAX_FETCH_SESSIONS,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    FetchSessionHandler,
    next_epoch,
)
from kctl.broker.replica_manager import LeaderLogView, ReplicaRole, SimulatedReplicaManager, _Replica
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
    """A follower's fetch; ``session_id`` and ``session_epoch`` as Kafka's (the defaults: a full
    fetch without a session), ``forgotten`` the partitions an incremental fetch stops fetching."""

    replica_id: int
    broker_epoch: int
    partitions: tuple[FetchPartition, ...]
    session_id: int = INVALID_SESSION_ID
    session_epoch: int = FINAL_EPOCH
    forgotten: tuple[TopicPartition, ...] = ()

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
    """The partitions with news (all of a full fetch); a top-level ``error`` (a session unknown or
    at another epoch, a request refused) comes with none. ``session_id``: the session a full fetch
    opened, or the incremental fetch's."""

    partitions: tuple[FetchPartitionResponse, ...]
    error: Errors = Errors.NONE
    session_id: int = INVALID_SESSION_ID


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
    :param max_fetch_sessions: followers' sessions this leader holds at most.
    :param max_cached_partitions: partitions held at most over all those sessions.
    """

    def __init__(
        self,
        client: FrameClient,
        resolve: Callable[[int], Address | None],
        *,
        fetch_interval: float = 0.5,
        request_timeout: float = 10.0,
        max_fetch_sessions: int = MAX_FETCH_SESSIONS,
        max_cached_partitions: int = MAX_CACHED_PARTITIONS,
    ) -> None:
        super().__init__(fetch_interval=fetch_interval)
        self._client = client
        self._resolve = resolve
        self._request_timeout = request_timeout
        self._in_flight: set[int] = set()  # leader brokers with a fetch on the way
        self._run = 0  # bumped at each start and stop: answers to an older run's fetches are void
        self._authorizer = PLAINTEXT_SECURITY.authorizer
        self.fetch_sessions = FetchSessionCache(max_fetch_sessions, max_cached_partitions)  # as a leader
        self._session_handlers: dict[int, FetchSessionHandler[FetchPartition]] = {}  # as a follower, by leader

    def serve(self, server: FrameServer) -> None:
        """Answer followers' fetches and clients' produce requests on ``server`` (the broker's listener),
        authorized by its authorizer."""
        self._authorizer = server.security.authorizer
        server.add_handler(FETCH_API, self._handle_fetch)
        server.add_handler(PRODUCE_API, self._handle_produce)

    def startup(self, broker: Any) -> None:
        with self.ledger.lock:
            self._restart()
            super().startup(broker)

    def shutdown(self) -> None:
        with self.ledger.lock:
            self._restart()
            super().shutdown()

    def _restart(self) -> None:
        """A new run: the fetches on the way, and every session on either side, are void."""
        self._run += 1
        self._in_flight.clear()
        self._session_handlers.clear()
        self.fetch_sessions.clear()

    # --- Leader side ---------------------------------------------------------------------------

    def _handle_fetch(self, request: Request, respond: Respond) -> None:
        body = request.body
        if not isinstance(body, FetchRequest):
            raise TypeError(f"a Fetch request carried a {type(body).__name__}")
        _check_fetch(body)
        if not self._authorizer.authorize_broker_request(request.peer, FETCH_API, body.replica_id):
            respond(FetchResponse(tuple(
                FetchPartitionResponse(part.tp, Errors.TOPIC_AUTHORIZATION_FAILED) for part in body.partitions
            )))
            return
        with self.ledger.lock:
            respond(self._fetch_in_session(body))

    def _fetch_in_session(self, body: FetchRequest) -> FetchResponse:
        """Kafka's FetchManager.newContext, then the fetch: a full fetch (opening a session or
        not), or an incremental one in a session known at the expected epoch."""
        cache = self.fetch_sessions
        full = body.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)
        if full:
            if body.session_id != INVALID_SESSION_ID:
                cache.remove(body.session_id)
            if body.session_epoch == FINAL_EPOCH:
                return FetchResponse(tuple(self._serve(body.replica_id, part) for part in body.partitions))
            try:
                session = cache.create(body.replica_id, len(body.partitions))
            except InvalidRequestError as exc:
                logger.warning("Broker %d: refused a fetch session for broker %d: %s", self._broker_id,
                               body.replica_id, exc)
                return FetchResponse((), Errors.INVALID_REQUEST)
        else:
            found = cache.get(body.session_id)
            if found is None or found.replica_id != body.replica_id:
                return FetchResponse((), Errors.FETCH_SESSION_ID_NOT_FOUND)
            if found.epoch != body.session_epoch:
                cache.remove(found.id)  # the follower opens a new one with its next (full) fetch
                return FetchResponse((), Errors.INVALID_FETCH_SESSION_EPOCH)
            session = found
        return self._session_fetch(session, body, full)

    def _session_fetch(self, session: FetchSession, body: FetchRequest, full: bool) -> FetchResponse:
        cached = session.partitions
        added = sum(1 for part in body.partitions if part.tp not in cached)
        if added:
            try:
                self.fetch_sessions.reserve(len(cached) + added, session)
            except InvalidRequestError as exc:
                self.fetch_sessions.remove(session.id)
                logger.warning("Broker %d: closed the fetch session of broker %d: %s", self._broker_id,
                               body.replica_id, exc)
                return FetchResponse((), Errors.INVALID_REQUEST)
        broker = self._broker
        for tp in body.forgotten:
            forgotten = cached.pop(tp, None)
            session.dirty.pop(tp, None)
            if forgotten is not None and broker is not None:
                self._follower_stopped(tp, body.replica_id, forgotten.leader_epoch, broker.scheduler.now())
        for part in body.partitions:
            entry = cached.get(part.tp)
            if entry is None:
                cached[part.tp] = CachedPartition(part.fetch_offset, part.leader_epoch)
            else:
                entry.fetch_offset, entry.leader_epoch = part.fetch_offset, part.leader_epoch
            session.dirty[part.tp] = None  # answered below if it has news
        session.epoch = next_epoch(body.session_epoch)
        results = []
        for tp in (list(cached) if full else list(session.dirty)):
            entry = cached[tp]
            result = self._serve(body.replica_id, FetchPartition(tp, entry.leader_epoch, entry.fetch_offset))
            if result.error is not Errors.NONE:
                session.dirty[tp] = None  # an error is answered until it clears
                results.append(result)
                continue
            session.dirty.pop(tp, None)
            if (full or entry.fetch_offset == EPOCHS_ONLY or result.log_end_offset > entry.fetch_offset
                    or result.high_watermark != entry.high_watermark):
                entry.high_watermark = result.high_watermark
                results.append(result)
        return FetchResponse(tuple(results), Errors.NONE, session.id)

    def _serve(self, replica_id: int, part: FetchPartition) -> FetchPartitionResponse:
        broker = self._broker
        view = None
        if broker is not None:
            offset = None if part.fetch_offset == EPOCHS_ONLY else part.fetch_offset
            view = self.serve_fetch(part.tp, replica_id, part.leader_epoch, offset, broker.scheduler.now())
        if view is None:
            return FetchPartitionResponse(part.tp, Errors.NOT_LEADER_OR_FOLLOWER)
        return FetchPartitionResponse(part.tp, Errors.NONE, view.log_end_offset, view.high_watermark, view.epochs)

    def _wake_followers(self, r: _Replica) -> None:
        """New records or a new high watermark: news for the followers' sessions."""
        super()._wake_followers(r)
        self._mark_dirty(r.tp, r.followers)

    def _leave_role(self, r: _Replica, now: float) -> None:
        if r.role is ReplicaRole.LEADER:
            self._mark_dirty(r.tp, r.followers)  # its followers learn that it no longer leads
        elif r.role is ReplicaRole.FOLLOWER:
            self._fetch_state_changed(r)
        super()._leave_role(r, now)

    def _mark_dirty(self, tp: TopicPartition, followers: Iterable[int]) -> None:
        for follower_id in followers:
            session = self.fetch_sessions.of_replica(follower_id)
            if session is not None and tp in session.partitions:
                session.dirty[tp] = None

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

    def _start_fetching(self, r: _Replica) -> None:
        super()._start_fetching(r)
        self._fetch_state_changed(r)

    def _fetch_state_changed(self, r: _Replica) -> None:
        """The next fetch from ``r``'s leader compares its fetch state with what the session holds."""
        if r.leader >= 0:
            self._session_handlers.setdefault(r.leader, FetchSessionHandler()).changed(r.tp)
            self._fetcher.arm()

    def _fetch_state(self, tp: TopicPartition) -> FetchPartition:
        r = self._replicas[tp]
        return FetchPartition(tp, r.leader_epoch, EPOCHS_ONLY if r.truncate else r.leo)

    def _fetch_round(self) -> bool:
        broker = self._broker
        if broker is None or self._paused:
            return False
        for leader_id in list(self._session_handlers):
            handler = self._session_handlers[leader_id]
            fetching = self._fetch_from.get(leader_id, {})
            if not fetching and not handler.has_changes():
                del self._session_handlers[leader_id]  # nothing fetched there: the leader evicts the session
                continue
            if leader_id in self._in_flight:
                continue
            address = self._resolve(leader_id)
            if address is None:
                continue  # the leader is not among the live brokers we know: try next round
            session_id, epoch = handler.session_id, handler.epoch
            partitions, forgotten = handler.build(fetching, self._fetch_state)
            request = FetchRequest(self._broker_id, broker.broker_epoch, tuple(partitions), session_id, epoch,
                                   tuple(forgotten))
            header = Header(broker_epoch=broker.broker_epoch)
            self._in_flight.add(leader_id)
            self._client.submit(
                address, Request(FETCH_API, header, request), self._request_timeout,
                functools.partial(self._fetched, self._run, leader_id, handler, request),
            )
        return bool(self._session_handlers)

    def _fetched(
        self, run: int, leader_id: int, handler: FetchSessionHandler[FetchPartition], request: FetchRequest,
        response: Any,
    ) -> None:
        with self.ledger.lock:
            if run != self._run:
                return
            self._in_flight.discard(leader_id)
            if isinstance(response, NetworkError) or not isinstance(response, FetchResponse):
                if isinstance(response, NetworkError):
                    logger.debug("Broker %d: fetch from broker %d failed: %s", self._broker_id, leader_id, response)
                else:
                    logger.warning("Broker %d: broker %d answered a fetch with %r", self._broker_id, leader_id,
                                   response)
                handler.handle_error()
                return
            if response.error is not Errors.NONE:
                logger.info("Broker %d: broker %d was unable to process the fetch request with (sessionId=%d, "
                            "epoch=%d): %s", self._broker_id, leader_id, request.session_id, request.session_epoch,
                            response.error.name)
                handler.handle_error(session_not_found=response.error is Errors.FETCH_SESSION_ID_NOT_FOUND)
                return
            handler.handle_response(response.session_id)
            for result in response.partitions:
                part = handler.sent.get(result.tp)
                r = self._replicas.get(result.tp)
                if (part is None or r is None or result.error is not Errors.NONE or r.role is not ReplicaRole.FOLLOWER
                        or (r.leader, r.leader_epoch) != (leader_id, part.leader_epoch)):
                    continue  # the leader moved on, or this replica did, since the request left
                if part.fetch_offset == EPOCHS_ONLY:
                    if r.truncate:
                        self._truncate(r, result.epochs, result.log_end_offset)
                        self._fetch_state_changed(r)
                elif not r.truncate and r.leo == part.fetch_offset:
                    self._apply_fetch(r, part.fetch_offset, result.log_end_offset, result.high_watermark, result.epochs)
                    if r.leo != part.fetch_offset:
                        self._fetch_state_changed(r)


def _check_fetch(body: FetchRequest) -> None:
    """A fetch's fields have the types they claim (the codec checks only their number)."""
    if not all(type(v) is int for v in (body.replica_id, body.broker_epoch, body.session_id, body.session_epoch)):
        raise InvalidRequestError("a Fetch request's ids and epochs must be integers")
    if type(body.partitions) is not tuple or type(body.forgotten) is not tuple:
        raise InvalidRequestError("a Fetch request's partitions and forgotten partitions must be arrays")
    for part in body.partitions:
        if (type(part) is not FetchPartition or not _is_partition(part.tp)
                or type(part.leader_epoch) is not int or type(part.fetch_offset) is not int):
            raise InvalidRequestError(f"a malformed partition in a Fetch request: {reprlib.repr(part)}")
    for tp in body.forgotten:
        if not _is_partition(tp):
            raise InvalidRequestError(f"a malformed forgotten partition in a Fetch request: {reprlib.repr(tp)}")


def _is_partition(tp: object) -> bool:
    return type(tp) is TopicPartition and type(tp.topic) is str and type(tp.partition) is int


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
