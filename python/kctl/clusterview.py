"""What a leader selector sees of the cluster it elects in: ``batch.cluster``.

Every ``select_leaders`` call gets a :class:`ClusterView`, a read-only snapshot of the controller's
cache taken for that call: the registered brokers (rack, broker epoch, controlled shutdown), the
load per broker (partitions led, replicas hosted) as cached before the batch, the controller epoch,
and topic configs as stored. The per-partition inputs (assignment, ISR, allowed replicas) are the
batch's own columns.

Nothing is computed before a selector looks, and each part only once per call; Kafka's built-in
selectors never look (on the native engine they never even reach Python), so the view costs them
nothing. Both engines build the same view from their own context. Once the call returns the view is
closed: reading it later is an :class:`~kctl.errors.IllegalStateError`, since the cluster has moved
on by then.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from kctl.config import topic_unclean_leader_election_enable
from kctl.errors import IllegalStateError

if TYPE_CHECKING:
    from kctl.model import BrokerInfo
    from kctl.stores.base import StateStore


@dataclass(frozen=True)
class TopicConfigSource:
    """Where a view reads topic configs: ``read(topics)`` returns the stored overrides of those
    topics (raising the store's error if one cannot be read); ``unclean_default`` is the broker's
    ``unclean.leader.election.enable``."""

    read: Callable[[Sequence[str]], Mapping[str, Mapping[str, str]]]
    unclean_default: bool = False

    @classmethod
    def of_store(cls, store: StateStore, unclean_default: bool) -> TopicConfigSource:
        def read(topics: Sequence[str]) -> Mapping[str, Mapping[str, str]]:
            result = store.get_topic_configs(topics)
            for topic in topics:
                if topic in result.errors:
                    raise result.errors[topic]
            return result.values

        return cls(read, unclean_default)


@dataclass(frozen=True)
class BrokerView:
    """A registered broker, as the controller caches it."""

    id: int
    rack: str | None
    """``broker.rack``, None when the broker registered without one."""
    epoch: int
    """The broker epoch (the zxid that created its registration)."""
    shutting_down: bool
    """In a controlled shutdown: still registered, but no longer a candidate for leadership."""


class BrokerCounts(Mapping[int, int]):
    """Partitions per broker id, in ascending id order; ``counts[b]`` is 0 for a broker without any
    (only brokers with at least one are keys)."""

    __slots__ = ("_counts",)

    def __init__(self, counts: Mapping[int, int] | Iterable[tuple[int, int]] = ()) -> None:
        items = counts.items() if isinstance(counts, Mapping) else counts
        self._counts: dict[int, int] = {b: n for b, n in sorted(items) if n}

    def __getitem__(self, broker: int) -> int:
        return self._counts.get(broker, 0)

    def __contains__(self, broker: object) -> bool:
        return broker in self._counts

    def __iter__(self) -> Iterator[int]:
        return iter(self._counts)

    def __len__(self) -> int:
        return len(self._counts)

    def __repr__(self) -> str:
        return f"BrokerCounts({self._counts})"


class ClusterView:
    """The cluster as one selector call sees it (see the module docstring).

    The engines build theirs from the controller, lazily; ``ClusterView.of(brokers,
    leader_counts=...)`` holds the values given, which is what a selector's unit tests need.
    """

    def __init__(
        self,
        controller_epoch: int,
        brokers: Callable[[], Iterable[BrokerView]],
        leader_counts: Callable[[], Mapping[int, int] | Iterable[tuple[int, int]]],
        replica_counts: Callable[[], Mapping[int, int] | Iterable[tuple[int, int]]],
        configs: TopicConfigSource,
        batch_topics: Callable[[], Sequence[str]],
    ) -> None:
        """The view an engine builds: each part loaded on first use. Topic configs are read for
        every topic of the batch (``batch_topics``) at once, with the first one asked for."""
        self._open = True
        self._controller_epoch = controller_epoch
        self._load_brokers = brokers
        self._load_leader_counts = leader_counts
        self._load_replica_counts = replica_counts
        self._config_source = configs
        self._batch_topics = batch_topics
        self._brokers: Mapping[int, BrokerView] | None = None
        self._live: tuple[int, ...] | None = None
        self._leader_counts: BrokerCounts | None = None
        self._replica_counts: BrokerCounts | None = None
        self._configs: dict[str, Mapping[str, str]] = {}

    @classmethod
    def of(
        cls,
        brokers: Iterable[BrokerView] = (),
        *,
        leader_counts: Mapping[int, int] | None = None,
        replica_counts: Mapping[int, int] | None = None,
        topic_configs: Mapping[str, Mapping[str, str]] | None = None,
        unclean_leader_election_enable: bool = False,
        controller_epoch: int = 0,
    ) -> ClusterView:
        """A view of the values given (each optional), for a selector's unit tests."""
        listed = tuple(brokers)
        configs = dict(topic_configs or {})
        return cls(
            controller_epoch,
            lambda: listed,
            lambda: leader_counts or {},
            lambda: replica_counts or {},
            TopicConfigSource(lambda topics: configs, unclean_leader_election_enable),
            lambda: (),
        )

    def close(self) -> None:
        """End the call this view was taken for (done by kctl when ``select_leaders`` returns)."""
        self._open = False

    def _check_open(self) -> None:
        if not self._open:
            raise IllegalStateError("a cluster view is only valid during the select_leaders call it was given to")

    # --- Brokers -------------------------------------------------------------------------------

    @property
    def controller_epoch(self) -> int:
        """The epoch of the controller running the election."""
        self._check_open()
        return self._controller_epoch

    @property
    def brokers(self) -> Mapping[int, BrokerView]:
        """Every registered broker (live or shutting down), by ascending id."""
        self._check_open()
        if self._brokers is None:
            self._brokers = MappingProxyType({b.id: b for b in sorted(self._load_brokers(), key=lambda b: b.id)})
        return self._brokers

    @property
    def live_brokers(self) -> tuple[int, ...]:
        """Registered brokers that are not shutting down, ascending: those that may lead."""
        self._check_open()
        if self._live is None:
            self._live = tuple(b for b, view in self.brokers.items() if not view.shutting_down)
        return self._live

    def rack(self, broker: int) -> str | None:
        """A broker's rack; None when it has none or is not registered."""
        view = self.brokers.get(broker)
        return None if view is None else view.rack

    # --- Load ------------------------------------------------------------------------------------

    @property
    def leader_counts(self) -> BrokerCounts:
        """Partitions each broker leads, in the controller's cache before this batch."""
        self._check_open()
        if self._leader_counts is None:
            self._leader_counts = BrokerCounts(self._load_leader_counts())
        return self._leader_counts

    @property
    def replica_counts(self) -> BrokerCounts:
        """Partitions each broker hosts a replica of (its assignments), before this batch."""
        self._check_open()
        if self._replica_counts is None:
            self._replica_counts = BrokerCounts(self._load_replica_counts())
        return self._replica_counts

    # --- Topic configs ---------------------------------------------------------------------------

    def topic_config(self, topic: str) -> Mapping[str, str]:
        """The topic's config overrides as stored (``/config/topics/<topic>``; empty without any).
        A store that cannot read them raises its error."""
        self._check_open()
        if topic not in self._configs:
            wanted = [t for t in dict.fromkeys((topic, *self._batch_topics())) if t not in self._configs]
            read = self._config_source.read(wanted)
            for t in wanted:
                self._configs[t] = MappingProxyType(dict(read.get(t, {})))
        return self._configs[topic]

    def unclean_leader_election_enable(self, topic: str) -> bool:
        """The topic's effective ``unclean.leader.election.enable``: its override, else the broker's.
        An override that is not a boolean raises :class:`~kctl.errors.StateChangeFailedError`."""
        default = self._config_source.unclean_default
        return topic_unclean_leader_election_enable(topic, self.topic_config(topic), default)

    def __repr__(self) -> str:
        state = "open" if self._open else "closed"
        return f"<ClusterView epoch={self._controller_epoch} {state}>"


def broker_views(
    epochs: Mapping[int, int], shutting_down: Collection[int], infos: Iterable[BrokerInfo]
) -> list[BrokerView]:
    """The registered brokers' views from a context's broker epochs, shutting-down set and
    registrations."""
    racks = {info.id: info.rack for info in infos}
    return [BrokerView(b, racks.get(b), epoch, b in shutting_down) for b, epoch in sorted(epochs.items())]
