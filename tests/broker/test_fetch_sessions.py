"""Incremental fetch sessions between broker processes (KIP-227): a follower names only what changed,
a leader answers only what has news, and a session out of step falls back to a full fetch.

Two broker agents with network replica managers on one simulated scheduler; their fetches go
through :class:`Loopback`, which hands each request to the leader's handler as its listener would
and records both directions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from kctl.broker import BrokerAgent
from kctl.broker.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionCache
from kctl.broker.fetcher import (
    EPOCHS_ONLY,
    FETCH_API,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    NetworkReplicaManager,
)
from kctl.errors import Errors, IllegalArgumentError
from kctl.model import TopicPartition
from kctl.net import EventLoopThread, FrameClient, FrameServer, Header, NetworkError, Request
from kctl.scheduler import SimulatedScheduler
from kctl.stores import MemoryStore, MemoryTree, paths
from kctl.testing.ports import LOOPBACK, free_ports
from kctl.transports.inprocess import InProcessTransport

from tests.support.broker_harness import lai_state, leader_and_isr

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
INTERVAL = 0.1


class Loopback:
    """A FrameClient stand-in: the request goes to the addressed manager's fetch handler at once."""

    def __init__(self) -> None:
        self.managers: dict[Any, NetworkReplicaManager] = {}
        self.exchanges: list[tuple[FetchRequest, Any]] = []
        self.down = False

    def submit(self, address: Any, request: Request, timeout: float, callback: Callable[[Any], None]) -> None:
        def answer(response: Any) -> None:
            self.exchanges.append((request.body, response))
            callback(response)

        if self.down:
            answer(NetworkError("connection refused"))
        else:
            self.managers[address]._handle_fetch(request, answer)


class Pair:
    """Broker 1 leads, broker 2 follows; :meth:`run` plays the scheduler for some seconds."""

    def __init__(self) -> None:
        self.scheduler = SimulatedScheduler(0)
        self.net = Loopback()
        tree = MemoryTree()
        tree.set_raw(paths.CONTROLLER_EPOCH, 1)
        self.agents: dict[int, BrokerAgent] = {}
        for broker_id in (1, 2):
            manager = NetworkReplicaManager(self.net, lambda b: ("broker", b), fetch_interval=INTERVAL)  # type: ignore[arg-type]
            self.net.managers[("broker", broker_id)] = manager
            self.agents[broker_id] = BrokerAgent(broker_id, MemoryStore(tree), InProcessTransport(self.scheduler),
                                                 self.scheduler, replica_manager=manager)
            self.agents[broker_id].startup()

    def manager(self, broker_id: int) -> NetworkReplicaManager:
        return self.net.managers[("broker", broker_id)]

    def lead(self, *tps: TopicPartition, leader: int = 1, leader_epoch: int = 0) -> None:
        states = [lai_state(tp, leader, [1, 2], leader_epoch=leader_epoch) for tp in tps]
        for agent in self.agents.values():
            agent.handle_request(leader_and_isr(*states))

    def run(self, seconds: float) -> list[tuple[FetchRequest, Any]]:
        """Play ``seconds`` of simulated time; the fetches exchanged meanwhile."""
        start = len(self.net.exchanges)
        self.scheduler.run_until(self.scheduler.now() + seconds)
        return self.net.exchanges[start:]

    def leo(self, broker_id: int, tp: TopicPartition) -> int:
        state = self.manager(broker_id).replica_state(tp)
        assert state is not None
        return state.log_end_offset


@pytest.fixture
def pair() -> Pair:
    return Pair()


def named(request: FetchRequest) -> set[TopicPartition]:
    return {part.tp for part in request.partitions}


def answered(response: FetchResponse) -> set[TopicPartition]:
    return {part.tp for part in response.partitions}


def test_after_a_full_fetch_only_changes_travel(pair: Pair) -> None:
    pair.lead(T0, T1, T2)
    first, *rest = pair.run(1.0)
    request, response = first
    assert (request.session_id, request.session_epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    assert named(request) == {T0, T1, T2} and {p.fetch_offset for p in request.partitions} == {EPOCHS_ONLY}
    assert response.error is Errors.NONE and response.session_id != INVALID_SESSION_ID
    assert answered(response) == {T0, T1, T2}
    session = response.session_id
    # Then incremental, epochs 1, 2, … in that session; once truncated and idle, nothing travels.
    assert [(r.session_id, r.session_epoch) for r, _ in rest] == [(session, e) for e in range(1, len(rest) + 1)]
    assert all(not r.partitions and not r.forgotten for r, _ in rest[1:])
    assert all(not a.partitions for _, a in rest[1:])

    assert pair.manager(1).produce(T1, 5) is Errors.NONE
    (request, response), *idle = pair.run(3 * INTERVAL)
    assert not request.partitions and answered(response) == {T1}  # the leader's news, unasked
    assert (response.partitions[0].log_end_offset, pair.leo(2, T1)) == (5, 5)
    request, response = idle[0]
    assert named(request) == {T1} and request.partitions[0].fetch_offset == 5  # the follower moved on
    assert answered(response) == {T1} and response.partitions[0].high_watermark == 5  # which commits the records
    assert pair.manager(2).replica_state(T1).high_watermark == 5  # type: ignore[union-attr]
    assert all(not r.partitions and not a.partitions for r, a in idle[1:])


def test_a_partition_the_follower_stops_fetching_is_forgotten(pair: Pair) -> None:
    pair.lead(T0, T1)
    pair.run(1.0)
    pair.lead(T1, leader=2, leader_epoch=1)  # broker 2 now leads t-1: it no longer fetches it
    exchanges = pair.run(3 * INTERVAL)
    assert [r.forgotten for r, _ in exchanges if r.forgotten] == [(T1,)]
    session = pair.manager(1).fetch_sessions.of_replica(2)
    assert session is not None and list(session.partitions) == [T0]
    assert pair.manager(1).produce(T0, 1) is Errors.NONE
    assert pair.run(3 * INTERVAL) and pair.leo(2, T0) == 1


def test_leadership_lost_is_news_answered_until_the_follower_moves_on(pair: Pair) -> None:
    pair.lead(T0, T1)
    pair.run(1.0)
    # Only the leader hears of a new leader epoch: the follower fetches at the old one.
    pair.agents[1].handle_request(leader_and_isr(lai_state(T0, 1, [1, 2], leader_epoch=1)))
    exchanges = pair.run(3 * INTERVAL)
    assert exchanges and all(
        [(p.tp, p.error) for p in a.partitions] == [(T0, Errors.NOT_LEADER_OR_FOLLOWER)] for _, a in exchanges
    )
    pair.agents[2].handle_request(leader_and_isr(lai_state(T0, 1, [1, 2], leader_epoch=1)))
    (request, response), *idle = pair.run(3 * INTERVAL)
    assert [(p.tp, p.leader_epoch, p.fetch_offset) for p in request.partitions] == [(T0, 1, EPOCHS_ONLY)]
    assert [(p.tp, p.error) for p in response.partitions] == [(T0, Errors.NONE)]
    assert idle and all(not a.partitions for _, a in idle[1:])


def test_a_session_the_leader_no_longer_holds_is_opened_again_with_a_full_fetch(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    pair.lead(T0, T1)
    pair.run(1.0)
    old = pair.manager(1).fetch_sessions.of_replica(2)
    assert old is not None
    pair.manager(1).fetch_sessions.remove(old.id)  # evicted
    with caplog.at_level(logging.INFO, "kctl.broker.fetcher"):
        (stale, refused), (full, opened), *_ = pair.run(3 * INTERVAL)
    assert (stale.session_id, refused.error, refused.partitions) == (old.id, Errors.FETCH_SESSION_ID_NOT_FOUND, ())
    assert "unable to process the fetch request" in caplog.text and "FETCH_SESSION_ID_NOT_FOUND" in caplog.text
    assert (full.session_id, full.session_epoch, named(full)) == (INVALID_SESSION_ID, INITIAL_EPOCH, {T0, T1})
    assert opened.error is Errors.NONE and opened.session_id not in (INVALID_SESSION_ID, old.id)
    assert pair.manager(1).produce(T0, 2) is Errors.NONE
    pair.run(3 * INTERVAL)
    assert pair.leo(2, T0) == 2


def test_a_wrong_epoch_is_refused_and_the_session_replaced(pair: Pair) -> None:
    pair.lead(T0)
    pair.run(1.0)
    session = pair.manager(1).fetch_sessions.of_replica(2)
    assert session is not None
    session.epoch += 5  # the leader expects another epoch than the follower sends
    (wrong, refused), (full, opened), *_ = pair.run(3 * INTERVAL)
    assert refused == FetchResponse((), Errors.INVALID_FETCH_SESSION_EPOCH)
    assert pair.manager(1).fetch_sessions.get(session.id) is None
    assert (full.session_id, full.session_epoch, named(full)) == (session.id, INITIAL_EPOCH, {T0})  # closes it
    assert opened.error is Errors.NONE and opened.session_id != INVALID_SESSION_ID


def test_a_network_error_makes_the_next_fetch_full(pair: Pair) -> None:
    pair.lead(T0)
    pair.run(1.0)
    pair.net.down = True
    assert isinstance(pair.run(INTERVAL)[0][1], NetworkError)
    pair.net.down = False
    (full, _), *_ = pair.run(INTERVAL)
    assert full.session_epoch == INITIAL_EPOCH and named(full) == {T0}


def test_a_restarted_follower_forgets_its_sessions(pair: Pair) -> None:
    pair.lead(T0)
    pair.run(1.0)
    pair.agents[2].kill()
    pair.agents[2].restart()
    pair.lead(T0, leader_epoch=1)
    (full, _), *_ = pair.run(3 * INTERVAL)
    assert (full.session_id, full.session_epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)


# --- The leader's cache, bounded ----------------------------------------------------------------------


def fetch(manager: NetworkReplicaManager, body: FetchRequest) -> FetchResponse:
    answers: list[Any] = []
    manager._handle_fetch(Request(FETCH_API, Header(), body), answers.append)
    (answer,) = answers
    assert isinstance(answer, FetchResponse)
    return answer


def test_sessions_are_bounded_one_per_replica_and_the_least_recently_used_evicted() -> None:
    manager = NetworkReplicaManager(Loopback(), lambda b: None, max_fetch_sessions=2)  # type: ignore[arg-type]
    part = FetchPartition(T0, 0, 0)
    first = fetch(manager, FetchRequest(2, 1, (part,), INVALID_SESSION_ID, INITIAL_EPOCH)).session_id
    again = fetch(manager, FetchRequest(2, 1, (part,), INVALID_SESSION_ID, INITIAL_EPOCH)).session_id
    assert len(manager.fetch_sessions) == 1 and manager.fetch_sessions.get(first) is None  # replaced
    third = fetch(manager, FetchRequest(3, 1, (part,), INVALID_SESSION_ID, INITIAL_EPOCH)).session_id
    assert fetch(manager, FetchRequest(2, 1, (), again, 1)).error is Errors.NONE  # broker 2's is used last
    fetch(manager, FetchRequest(4, 1, (part,), INVALID_SESSION_ID, INITIAL_EPOCH))
    assert fetch(manager, FetchRequest(3, 1, (), third, 1)).error is Errors.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(manager, FetchRequest(2, 1, (), again, 2)).error is Errors.NONE
    assert manager.fetch_sessions.evictions == 1
    # Another replica cannot use a session it did not open.
    assert fetch(manager, FetchRequest(3, 1, (), again, 3)).error is Errors.FETCH_SESSION_ID_NOT_FOUND


def test_sessions_are_bounded_in_partitions() -> None:
    manager = NetworkReplicaManager(Loopback(), lambda b: None, max_cached_partitions=3)  # type: ignore[arg-type]
    parts = tuple(FetchPartition(TopicPartition("t", p), 0, 0) for p in range(4))
    assert fetch(manager, FetchRequest(2, 1, parts, INVALID_SESSION_ID, INITIAL_EPOCH)) == FetchResponse(
        (), Errors.INVALID_REQUEST)
    assert len(manager.fetch_sessions) == 0
    other = fetch(manager, FetchRequest(3, 1, parts[:2], INVALID_SESSION_ID, INITIAL_EPOCH)).session_id
    mine = fetch(manager, FetchRequest(2, 1, parts[:2], INVALID_SESSION_ID, INITIAL_EPOCH)).session_id
    assert manager.fetch_sessions.get(other) is None  # evicted to make room
    assert fetch(manager, FetchRequest(2, 1, parts[2:], mine, 1)) == FetchResponse((), Errors.INVALID_REQUEST)
    assert manager.fetch_sessions.get(mine) is None  # closed: its next fetch is full
    sessionless = fetch(manager, FetchRequest(2, 1, parts, INVALID_SESSION_ID, FINAL_EPOCH))
    assert sessionless.session_id == INVALID_SESSION_ID and len(sessionless.partitions) == 4


@pytest.mark.parametrize("sessions, partitions", [(0, 10), (10, 0)])
def test_a_session_cache_holds_something(sessions: int, partitions: int) -> None:
    with pytest.raises(IllegalArgumentError, match="at least one session and one partition"):
        FetchSessionCache(sessions, partitions)


def test_a_session_cache_never_hands_out_the_invalid_or_a_taken_id() -> None:
    class Rigged:
        def __init__(self) -> None:
            self.ids = iter([0, 7, 7, 9])

        def randint(self, low: int, high: int) -> int:
            return next(self.ids)

    cache = FetchSessionCache(rng=Rigged())  # type: ignore[arg-type]
    assert [cache.create(replica, 1).id for replica in (1, 2)] == [7, 9]


@pytest.mark.parametrize("body, problem", [
    (FetchRequest(2, 1, (), "x", 1), "ids and epochs must be integers"),  # type: ignore[arg-type]
    (FetchRequest(2, 1, (FetchPartition(T0, 0, 0),), 5, None), "ids and epochs must be integers"),  # type: ignore[arg-type]
    (FetchRequest(2, 1, (1, 2)), "malformed partition in a Fetch request: 1"),  # type: ignore[arg-type]
    (FetchRequest(2, 1, (FetchPartition(TopicPartition(1, "a"), 0, 0),)), "malformed partition in a Fetch request: FetchPartitio"),  # type: ignore[arg-type]
    (FetchRequest(2, 1, (FetchPartition(T0, 0, "0"),)), "malformed partition in a Fetch request: FetchPartitio"),  # type: ignore[arg-type]
    (FetchRequest(2, 1, (), 5, 1, (("t", 0),)), "malformed forgotten partition in a Fetch request: ('t', 0)"),  # type: ignore[arg-type]
    (FetchRequest(2, 1, {}, 5, 1), "must be arrays"),  # type: ignore[arg-type]
])
def test_a_malformed_fetch_gets_a_clear_error_over_the_wire(body: FetchRequest, problem: str) -> None:
    network = EventLoopThread("test-fetch-sessions")
    server = FrameServer(network, (LOOPBACK, free_ports(1)[0]))
    client = FrameClient(network)
    NetworkReplicaManager(client, lambda b: None).serve(server)
    try:
        address = server.start()
        with pytest.raises(NetworkError, match="answered: .*" + problem.replace("(", r"\(").replace(")", r"\)")):
            network.run(client.call(address, Request(FETCH_API, Header(), body), 10), timeout=20)
        good = network.run(client.call(address, Request(FETCH_API, Header(), FetchRequest(2, 1, ())), 10), 20)
        assert good == FetchResponse((), Errors.NONE)  # still serving
    finally:
        client.close()
        server.close()
        network.stop()


def test_unknown_sessions_and_stale_epochs_get_kafkas_errors() -> None:
    manager = NetworkReplicaManager(Loopback(), lambda b: None)  # type: ignore[arg-type]
    assert fetch(manager, FetchRequest(2, 1, (), 12345, 1)) == FetchResponse((), Errors.FETCH_SESSION_ID_NOT_FOUND)
    opened = fetch(manager, FetchRequest(2, 1, (), INVALID_SESSION_ID, INITIAL_EPOCH)).session_id
    assert fetch(manager, FetchRequest(2, 1, (), opened, 1)).error is Errors.NONE
    assert fetch(manager, FetchRequest(2, 1, (), opened, 1)) == FetchResponse((), Errors.INVALID_FETCH_SESSION_EPOCH)
    assert fetch(manager, FetchRequest(2, 1, (), opened, 2)).error is Errors.FETCH_SESSION_ID_NOT_FOUND  # closed
