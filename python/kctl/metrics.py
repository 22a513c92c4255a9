"""Kafka's metrics in Prometheus' text format, named as the Prometheus JMX exporter names Kafka's MBeans.

Kafka is scraped through the JMX exporter and its Kafka rules, which turn the MBean
``kafka.<domain>:type=<Type>,name=<Name>`` into the lowercased ``kafka_<domain>_<type>_<name>``:
a gauge's ``Value`` is that gauge; a meter's ``Count`` (``…PerSec``) a counter, ``PerSec`` dropped
and ``_total`` added; a timer's or histogram's ``Count`` and ``NNthPercentile`` attributes the
``_count`` and ``{quantile="0.NN"}`` samples. kctl's controllers and brokers expose their metrics
under the same names, so what was written for Kafka (dashboards, alerts on
``kafka_controller_kafkacontroller_activecontrollercount``) works unchanged; the table is in
docs/operations.md. Timers and histograms are Prometheus summaries, which adds the ``_sum`` that
the exporter's rules cannot give.

Every controller, broker or embedded cluster gets a registry of its own (:func:`node_registry`,
:func:`nodes_registry`), never
prometheus_client's process-wide default, so that several in one process do not collide. Values
are read when scraped: a controller's between two of its events (:meth:`KafkaController.inspect`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import prometheus_client
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from kctl.controller import KafkaController
from kctl.controller.event_manager import QUANTILES, HistogramSnapshot
from kctl.controller.events import ControllerState
from kctl.net import Address, NetworkError, format_address, parse_address

if TYPE_CHECKING:
    from kctl.broker import BrokerAgent

QUANTILE_LABELS = ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")
"""The ``quantile`` label of each of :data:`QUANTILES`: the exporter's ``0.$N`` of ``NNthPercentile``."""
assert len(QUANTILE_LABELS) == len(QUANTILES)


class Kind(enum.Enum):
    """The kinds of Yammer metric Kafka registers, as Prometheus types."""

    GAUGE = "gauge"
    METER = "counter"
    TIMER = "summary"  # and histograms


@dataclass(frozen=True)
class MBean:
    """A Kafka metric's JMX name, ``kafka.<domain>:type=<type>,name=<name>``."""

    domain: str
    type: str
    name: str

    @property
    def object_name(self) -> str:
        return f"kafka.{self.domain}:type={self.type},name={self.name}"

    @property
    def prometheus_name(self) -> str:
        """The JMX exporter's name: lowercased, a meter's name without ``PerSec`` (the rules' ``(.+)PerSec\\w*``)."""
        return f"kafka_{self.domain}_{self.type}_{self.name.removesuffix('PerSec')}".lower()


@dataclass(frozen=True)
class Reading:
    """One metric of one node as scraped: a number, or a histogram's snapshot for a timer."""

    mbean: MBean
    kind: Kind
    value: float | HistogramSnapshot

    def add_to(self, family: Metric, labels: Mapping[str, str]) -> None:
        name = family.name
        if isinstance(self.value, HistogramSnapshot):
            for label, quantile in zip(QUANTILE_LABELS, self.value.quantiles):
                family.add_sample(name, {**labels, "quantile": label}, quantile)
            family.add_sample(f"{name}_count", dict(labels), self.value.count)
            family.add_sample(f"{name}_sum", dict(labels), self.value.total)
        else:
            family.add_sample(f"{name}_total" if self.kind is Kind.METER else name, dict(labels), self.value)


# --- What a controller and a broker report ----------------------------------------------------------

_CONTROLLER_GAUGES = (
    "ActiveControllerCount", "OfflinePartitionsCount", "PreferredReplicaImbalanceCount", "ControllerState",
    "GlobalTopicCount", "GlobalPartitionCount", "TopicsToDeleteCount", "ReplicasToDeleteCount",
    "TopicsIneligibleToDeleteCount", "ReplicasIneligibleToDeleteCount", "ActiveBrokerCount", "FencedBrokerCount",
)
_TIMED_STATES = tuple(state for state in ControllerState if state.rate_and_time_metric is not None)
_EMPTY = HistogramSnapshot(0, 0.0, tuple(0.0 for _ in QUANTILES))


def controller_readings(controller: KafkaController) -> list[Reading]:
    """The controller's ``KafkaController`` gauges, its ``ControllerEventManager`` queue size and
    queue time, and its ``ControllerStats``: unclean elections and one timer per event state (every
    one, from count 0, as Kafka registers them), read between two events (:meth:`KafkaController.inspect`)."""
    values = controller.metrics()

    def histograms(c: KafkaController) -> tuple[HistogramSnapshot, dict[ControllerState, HistogramSnapshot]]:
        stats = c.event_manager.stats
        return stats.queue_time_ms.snapshot(), {s: h.snapshot() for s, h in stats.processing_time_ms.items()}

    queue_time, timers = controller.inspect(histograms)
    readings = [Reading(MBean("controller", "KafkaController", key), Kind.GAUGE, values[key])
                for key in _CONTROLLER_GAUGES]
    readings += [
        Reading(MBean("controller", "ControllerEventManager", "EventQueueSize"), Kind.GAUGE, values["EventQueueSize"]),
        Reading(MBean("controller", "ControllerEventManager", "EventQueueTimeMs"), Kind.TIMER, queue_time),
        Reading(MBean("controller", "ControllerStats", "UncleanLeaderElectionsPerSec"), Kind.METER,
                values["UncleanLeaderElections"]),
    ]
    readings += [Reading(MBean("controller", "ControllerStats", str(state.rate_and_time_metric)), Kind.TIMER,
                         timers.get(state, _EMPTY)) for state in _TIMED_STATES]
    return readings


_BROKER_METRICS = {
    "BrokerState": (MBean("server", "KafkaServer", "BrokerState"), Kind.GAUGE),
    "LeaderCount": (MBean("server", "ReplicaManager", "LeaderCount"), Kind.GAUGE),
    "PartitionCount": (MBean("server", "ReplicaManager", "PartitionCount"), Kind.GAUGE),
    "UnderReplicatedPartitions": (MBean("server", "ReplicaManager", "UnderReplicatedPartitions"), Kind.GAUGE),
    "OfflineReplicaCount": (MBean("server", "ReplicaManager", "OfflineReplicaCount"), Kind.GAUGE),
    "IsrExpands": (MBean("server", "ReplicaManager", "IsrExpandsPerSec"), Kind.METER),
    "IsrShrinks": (MBean("server", "ReplicaManager", "IsrShrinksPerSec"), Kind.METER),
}


def broker_readings(agent: BrokerAgent) -> list[Reading]:
    """The broker's ``KafkaServer`` state and, when its replica manager keeps them, its
    ``ReplicaManager`` metrics."""
    values = agent.metrics()
    return [Reading(mbean, kind, values[key]) for key, (mbean, kind) in _BROKER_METRICS.items() if key in values]


# --- Registries ---------------------------------------------------------------------------------------

Nodes = Callable[[], Iterable[tuple[Mapping[str, str], Iterable[Reading]]]]
"""What a collector scrapes: each node's labels and readings."""


class KafkaCollector(Collector):
    """The readings of one or more nodes, one family per metric, each node's samples with its labels."""

    def __init__(self, nodes: Nodes) -> None:
        self._nodes = nodes

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for labels, readings in self._nodes():
            for reading in readings:
                name = reading.mbean.prometheus_name
                family = families.get(name)
                if family is None:
                    family = families[name] = Metric(name, reading.mbean.object_name, reading.kind.value)
                reading.add_to(family, labels)
        yield from families.values()


def _registry(nodes: Nodes) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(KafkaCollector(nodes))
    return registry


def readings(node: KafkaController | BrokerAgent) -> list[Reading]:
    """A controller candidate's or a broker's readings."""
    return controller_readings(node) if isinstance(node, KafkaController) else broker_readings(node)


def node_registry(node: KafkaController | BrokerAgent) -> CollectorRegistry:
    """A registry of one controller's or broker's metrics (what ``kctl controller`` and ``kctl broker`` serve)."""
    return _registry(lambda: [({}, readings(node))])


def nodes_registry(nodes: Callable[[], Iterable[tuple[int, KafkaController | BrokerAgent]]]) -> CollectorRegistry:
    """A registry of several nodes, listed by ``nodes()`` at each scrape: an embedded cluster's
    controller candidates and running brokers, the same names with a ``node_id`` label (the broker
    id the candidate or broker runs as)."""
    return _registry(lambda: [({"node_id": str(node_id)}, readings(node)) for node_id, node in nodes()])


# --- Serving ------------------------------------------------------------------------------------------


class MetricsServer:
    """A registry served over HTTP in Prometheus' text format, on a thread of its own (``--metrics-listen``)."""

    def __init__(self, registry: CollectorRegistry, listen: str) -> None:
        host, port = parse_address(listen)
        try:
            self._server, self._thread = prometheus_client.start_http_server(port, host, registry)
        except OSError as exc:
            raise NetworkError(f"cannot serve metrics on {listen}: {exc.strerror or exc}") from exc

    @property
    def address(self) -> Address:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def describe(self) -> str:
        return f"http://{format_address(self.address)}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


__all__ = [
    "KafkaCollector",
    "Kind",
    "MBean",
    "MetricsServer",
    "QUANTILE_LABELS",
    "Reading",
    "broker_readings",
    "controller_readings",
    "node_registry",
    "nodes_registry",
    "readings",
]
