"""Incremental fetch sessions (Kafka's KIP-227) between broker processes.

A follower fetching thousands of partitions from a leader every round sent them all, and the
leader answered them all, although almost none had news: at 20K partitions each ``kctl broker``
spent a third of a core encoding and decoding fetches while the cluster was idle. With a session,
the first fetch is *full* (every partition, and the leader creates a session holding each one's
fetch state); the following ones are *incremental*: the follower names only the partitions whose
fetch state changed and those it stopped fetching (``forgotten``), and the leader answers only the
partitions with news (records, a new high watermark, an error).

Kafka's names and rules (``FetchMetadata``, ``FetchSessionHandler``, ``FetchSessionCache``):

- a request carries ``session_id`` and ``session_epoch``. Epoch ``INITIAL_EPOCH`` (0) is a full
  fetch opening a new session (closing ``session_id``'s if one is named); ``FINAL_EPOCH`` (-1) a
  full fetch without a session; any other epoch an incremental fetch in ``session_id``, whose
  epochs go 1, 2, … (after ``2**31 - 1``, 1 again);
- the leader answers an unknown session with ``FETCH_SESSION_ID_NOT_FOUND`` and an epoch other
  than the one it expects with ``INVALID_FETCH_SESSION_EPOCH``, with no partitions; the follower
  then sends a full fetch (a new session, closing the old one);
- the follower also falls back to a full fetch after a network error;
- the leader's cache holds at most ``max_sessions`` sessions (Kafka's
  ``max.incremental.fetch.session.cache.slots``) and ``max_cached_partitions`` partitions over
  them all, evicting the least recently used; a replica holds one session, since opening one closes
  its previous one. A request that alone exceeds the partition bound is refused
  (``INVALID_REQUEST``).

Which partitions have news is known without looking at every one: the leader marks a partition of
a session *dirty* when its log end, high watermark or leadership changes (where the in-process
simulation wakes its followers), and an incremental fetch looks only at those and at the ones the
request names. A partition answered with an error stays dirty, so it is answered again, as Kafka
does, until the follower forgets it or the leader can serve it.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Generic, TypeVar

from kctl.errors import IllegalArgumentError, InvalidRequestError
from kctl.model import TopicPartition

INVALID_SESSION_ID = 0
"""No session: a request opening one, or a response from a leader that made none."""
INITIAL_EPOCH = 0
"""The epoch of a full fetch opening a session."""
FINAL_EPOCH = -1
"""The epoch of a full fetch without a session (closing ``session_id``'s if one is named)."""
MAX_FETCH_SESSIONS = 1000
"""Kafka's ``max.incremental.fetch.session.cache.slots`` default."""
MAX_CACHED_PARTITIONS = 1_000_000
"""The partitions all sessions of a leader may hold together (kctl's largest cluster, 100K
partitions at RF 3, needs 300K)."""
P = TypeVar("P")


def next_epoch(epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``: the epoch of the fetch after one at ``epoch``."""
    if epoch < 0:
        return INITIAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


@dataclass
class CachedPartition:
    """A partition of a session as the leader knows it: where the follower fetches (``fetch_offset``,
    ``leader_epoch``, as its last request naming it said) and the high watermark last answered."""

    fetch_offset: int
    leader_epoch: int
    high_watermark: int = -1


class FetchSession:
    """One follower's session in a leader's cache."""

    __slots__ = ("dirty", "epoch", "id", "partitions", "replica_id")

    def __init__(self, session_id: int, replica_id: int) -> None:
        self.id = session_id
        self.replica_id = replica_id
        self.epoch = next_epoch(INITIAL_EPOCH)  # the epoch of the next incremental fetch
        self.partitions: dict[TopicPartition, CachedPartition] = {}
        self.dirty: dict[TopicPartition, None] = {}  # partitions that may have news


class FetchSessionCache:
    """A leader's sessions, bounded in number and in partitions (the least recently used evicted).

    :param max_sessions: sessions held at most.
    :param max_cached_partitions: partitions held at most over every session.
    :param rng: makes session ids (random, as Kafka's: an id is no guess at another's).
    """

    def __init__(self, max_sessions: int = MAX_FETCH_SESSIONS, max_cached_partitions: int = MAX_CACHED_PARTITIONS,
                 rng: random.Random | None = None) -> None:
        if max_sessions < 1 or max_cached_partitions < 1:
            raise IllegalArgumentError(f"a fetch session cache holds at least one session and one partition, "
                                       f"not {max_sessions} and {max_cached_partitions}")
        self.max_sessions = max_sessions
        self.max_cached_partitions = max_cached_partitions
        self._rng = rng if rng is not None else random.Random()
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self._by_replica: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        """The session, now the most recently used; None when unknown (never made, or evicted)."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._sessions.move_to_end(session_id)
        return session

    def of_replica(self, replica_id: int) -> FetchSession | None:
        return self._by_replica.get(replica_id)

    def create(self, replica_id: int, partitions: int) -> FetchSession:
        """A new session for ``replica_id`` (closing its previous one) that will hold ``partitions``
        partitions, evicting the least recently used sessions to make room."""
        previous = self._by_replica.get(replica_id)
        if previous is not None:
            self.remove(previous.id)
        self.reserve(partitions)
        while len(self._sessions) >= self.max_sessions:
            self._evict(next(iter(self._sessions.values())))
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self._sessions:
            session_id = self._rng.randint(1, 2**31 - 1)
        session = self._sessions[session_id] = FetchSession(session_id, replica_id)
        self._by_replica[replica_id] = session
        return session

    def reserve(self, size: int, growing: FetchSession | None = None) -> None:
        """Make room for a session of ``size`` partitions (``growing`` to that size, or a new one),
        evicting the least recently used others; :class:`InvalidRequestError` when it is larger
        than the whole cache."""
        if size > self.max_cached_partitions:
            raise InvalidRequestError(
                f"a fetch session of {size} partitions exceeds the {self.max_cached_partitions} a leader caches"
            )
        held = self.cached_partitions() - (len(growing.partitions) if growing is not None else 0)
        while held + size > self.max_cached_partitions:
            oldest = next(s for s in self._sessions.values() if s is not growing)
            held -= len(oldest.partitions)
            self._evict(oldest)

    def cached_partitions(self) -> int:
        return sum(len(session.partitions) for session in self._sessions.values())

    def remove(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None and self._by_replica.get(session.replica_id) is session:
            del self._by_replica[session.replica_id]

    def clear(self) -> None:
        self._sessions.clear()
        self._by_replica.clear()

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.id)
        self.evictions += 1


class FetchSessionHandler(Generic[P]):
    """A follower's side of its session with one leader (Kafka's ``FetchSessionHandler``): what
    the leader holds of its fetch state, and what changed since.

    The partitions whose fetch state may have changed are marked with :meth:`changed`; building a
    request compares only those with what the session holds.
    """

    __slots__ = ("_changed", "epoch", "sent", "session_id")

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, P] = {}  # the session's partitions, as last sent
        self._changed: dict[TopicPartition, None] = {}

    @property
    def full(self) -> bool:
        """The next request is a full fetch."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def changed(self, tp: TopicPartition) -> None:
        self._changed[tp] = None

    def has_changes(self) -> bool:
        return bool(self._changed)

    def build(
        self, fetching: Collection[TopicPartition], fetch_state: Callable[[TopicPartition], P]
    ) -> tuple[list[P], list[TopicPartition]]:
        """The next request's partitions and forgotten partitions, the session updated to match:
        a full fetch names every partition in ``fetching``, an incremental one those marked changed
        whose ``fetch_state`` differs from what the session holds, and forgets those no longer
        in ``fetching``."""
        if self.full:
            self.sent = {tp: fetch_state(tp) for tp in fetching}
            self._changed.clear()
            return list(self.sent.values()), []
        partitions: list[P] = []
        forgotten: list[TopicPartition] = []
        for tp in self._changed:
            if tp not in fetching:
                if self.sent.pop(tp, None) is not None:
                    forgotten.append(tp)
                continue
            now = fetch_state(tp)
            if self.sent.get(tp) != now:
                self.sent[tp] = now
                partitions.append(now)
        self._changed.clear()
        return partitions, forgotten

    def handle_response(self, session_id: int) -> None:
        """A fetch was answered without a top-level error: the next one is incremental in the
        session the leader named (full again when it made none)."""
        if self.full:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != INVALID_SESSION_ID else INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)

    def handle_error(self, session_not_found: bool = False) -> None:
        """The fetch failed: the next one is full, in a new session (closing the old one unless
        the leader no longer knows it)."""
        if session_not_found:
            self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH


__all__ = [
    "CachedPartition",
    "FINAL_EPOCH",
    "FetchSession",
    "FetchSessionCache",
    "FetchSessionHandler",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "MAX_CACHED_PARTITIONS",
    "MAX_FETCH_SESSIONS",
    "next_epoch",
]
