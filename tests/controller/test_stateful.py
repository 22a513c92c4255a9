"""Random operations and faults on a simulated cluster, with invariants I1–I8 checked after every step.

Hypothesis drives a 5-broker cluster (every broker a controller candidate) through topic creation
and deletion, broker crashes, restarts and controlled shutdowns, reassignments and cancellations,
preferred and unclean elections, controller crashes, produced records, passing time and unclean
election enabled at run time. After every step ``check_invariants()`` must be empty and the metrics
must agree with the controller's state; at the end every broker is restarted, the cluster settles
and the invariants (now including I7) must still hold.

Left out, because Kafka 3.0 itself (and kctl, faithfully) does not converge after them:
- log-directory failures: a restart replaces the failed directory with an empty one, and an empty
  last ISR member is then elected cleanly, losing committed records (I8 rightly flags it);
- reusing a topic name: ControllerContext.removeTopic keeps a deleted topic's deletion-ineligibility
  mark and its reassigning partitions, which a later topic of that name inherits (its deletion
  never starts); test_deletion covers re-creation on its own;
- the reassignment requests described in :meth:`ClusterMachine.strands_the_partition`.

Examples: ``KCTL_STATEFUL_EXAMPLES`` if set, else 200 under CI (derandomized, so a CI failure
reproduces) and fewer locally.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from kctl.cluster import EmbeddedCluster
from kctl.config import ControllerConfig
from kctl.errors import KctlError, UnknownTopicOrPartitionError
from kctl.model import PartitionState, TopicPartition

from tests.support.controller import active

CI = os.environ.get("CI", "").lower() in ("true", "1")
EXAMPLES = int(os.environ.get("KCTL_STATEFUL_EXAMPLES", "200" if CI else "100"))

BROKERS = (1, 2, 3, 4, 5)
MIN_LIVE = 2  # a crash or shutdown never leaves fewer live brokers (candidates) than this

DELETE_ERRORS = {"UNKNOWN_TOPIC_OR_PARTITION", "INVALID_TOPIC_EXCEPTION"}
REASSIGN_RESULTS = {"NONE", "INVALID_REPLICA_ASSIGNMENT", "UNKNOWN_TOPIC_OR_PARTITION", "NO_REASSIGNMENT_IN_PROGRESS"}
ELECTION_RESULTS = {"NONE", "ELECTION_NOT_NEEDED", "PREFERRED_LEADER_NOT_AVAILABLE", "ELIGIBLE_LEADERS_NOT_AVAILABLE",
                    "INVALID_TOPIC_EXCEPTION", "UNKNOWN_TOPIC_OR_PARTITION"}


ISR_CHECK_PERIOD = ControllerConfig().replica_lag_time_max_ms / 2000
"""Seconds between a simulated leader's ISR-expiration checks (replica.lag.time.max.ms / 2)."""


def assert_invariants(cluster: EmbeddedCluster) -> None:
    """``check_invariants()`` must be empty — with one allowance for I7 ("all brokers up and a quiet
    period"): the simulated data plane looks idle while a caught-up follower waits for its leader's
    next ISR check to join the ISR (its expansion was held back by an earlier one in flight), so an
    incomplete ISR counts only if it outlasts one such check."""
    violations = cluster.check_invariants()
    if violations and all(v.startswith("I7: ") and v.endswith("is not online with a full ISR") for v in violations):
        cluster.advance(ISR_CHECK_PERIOD)
        cluster.run_until(cluster.is_quiet, timeout=60)
        violations = cluster.check_invariants()
    assert not violations, "\n".join(violations)


def result_names(results: dict[TopicPartition, object]) -> set[str]:
    return {r.error.name if isinstance(r, KctlError) else "NONE" for r in results.values()}


class ClusterMachine(RuleBasedStateMachine):
    cluster: EmbeddedCluster

    @initialize(seed=st.integers(0, 2**16), unclean=st.booleans())
    def start(self, seed: int, unclean: bool) -> None:
        """A fresh cluster; in half of the runs nobody ever allows an unclean election (I3)."""
        self.unclean = unclean
        config = {"leader.imbalance.check.interval.seconds": 30, "leader.imbalance.per.broker.percentage": 20}
        self.cluster = EmbeddedCluster(len(BROKERS), controllers=len(BROKERS), seed=seed, config=config)
        self.cluster.start()
        self.cluster.create_topic("t0", partitions=2, replication_factor=3)
        self.created = 1

    def teardown(self) -> None:
        cluster = getattr(self, "cluster", None)
        if cluster is None:
            return
        try:
            for broker in self.dead():  # every broker up: I7 applies
                self.restart(broker)
            # Not asserted: a replica whose StopReplica died with a crashed controller stays behind
            # as a stray follower (as in Kafka's ZooKeeper mode), and the simulated data plane then
            # never looks idle.
            cluster.run_until_stable(timeout=300)
            assert_invariants(cluster)
        finally:
            cluster.stop()

    # --- Helpers -----------------------------------------------------------------------------------

    def live(self) -> list[int]:
        return self.cluster.live_brokers()

    def dead(self) -> list[int]:
        return [b for b in BROKERS if b not in self.live()]

    def restart(self, broker: int) -> None:
        """Start a stopped broker once a controller has seen it stop (a restart takes longer).

        Bounced unseen while the controller moved too, a broker that led a partition leads it again
        at the same leader epoch, and the simulated followers that had caught up with its previous
        process never fetch from the new one: a gap of the simulated data plane, not of the
        controller. Bounces themselves are tested in test_operations.
        """
        self.cluster.run_until(
            lambda: (c := self.cluster.active_controller) is not None
            and broker not in c.context.live_or_shutting_down_broker_ids,
            what=f"a controller to see broker {broker} stopped",
        )
        self.cluster.start_broker(broker)

    def topics(self) -> list[str]:
        """The topics in the store (there may be no active controller right now)."""
        return sorted(self.cluster.store.get_all_topics())

    def partitions(self) -> list[TopicPartition]:
        assignments = self.cluster.store.get_topic_assignments(self.topics()).values
        return sorted(TopicPartition(t, p) for t, assignment in assignments.items() for p in assignment.partitions)

    def controller_caught_up(self) -> None:
        """Let the active controller process what is queued, so that no election is pending."""
        self.cluster.run_until(
            lambda: (c := self.cluster.active_controller) is not None and c.event_manager.is_empty(),
            what="the controller to process its events",
        )

    def strands_the_partition(self, tp: TopicPartition, target: tuple[int, ...] | None) -> bool:
        """Whether re-targeting (or cancelling, ``None``) an in-flight reassignment stops the
        replica that leads the partition, or every ISR member — adding replicas that took over
        after failures.

        Kafka 3.0 (reference §6.8 U3, §4.3) then leaves the partition leaderless: still
        OnlinePartition until a later broker failure or failover elects a leader, or with an ISR
        of removed replicas that no clean election can use. kctl does the same. Such requests are
        left out so that the run can converge.
        """
        store = self.cluster.store
        read = store.get_topic_assignments([tp.topic]).values.get(tp.topic)
        current = None if read is None else read.partitions.get(tp.partition)
        state = store.get_partition_states([tp]).values.get(tp)
        if current is None or not current.is_being_reassigned or state is None:
            return False
        kept = set(current.reassign_to(current.origin_replicas if target is None else target).replicas)
        leader, isr = state.leader_and_isr.leader, set(state.leader_and_isr.isr)
        return leader in set(current.replicas) - kept or not isr & kept

    # --- Topics ------------------------------------------------------------------------------------

    @rule(partitions=st.integers(1, 3), replication_factor=st.integers(1, 3))
    def create_topic(self, partitions: int, replication_factor: int) -> None:
        name, self.created = f"t{self.created}", self.created + 1
        try:
            self.cluster.create_topic(name, partitions, replication_factor, wait=False)
        except KctlError as e:
            assert e.error.name == "INVALID_REPLICATION_FACTOR", e  # more than the live brokers

    @rule(data=st.data())
    def delete_topic(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from([*self.topics(), "never-created"]), label="topic")
        try:
            self.cluster.delete_topic(name, wait=False)
        except KctlError as e:
            assert e.error.name in DELETE_ERRORS, e

    # --- Brokers -----------------------------------------------------------------------------------

    @precondition(lambda self: len(self.live()) > MIN_LIVE)
    @rule(data=st.data())
    def kill_broker(self, data: st.DataObject) -> None:
        self.cluster.kill_broker(data.draw(st.sampled_from(self.live()), label="broker"))

    @precondition(lambda self: len(self.live()) > MIN_LIVE)
    @rule(data=st.data())
    def shutdown_broker(self, data: st.DataObject) -> None:
        self.cluster.shutdown_broker(data.draw(st.sampled_from(self.live()), label="broker"))

    @precondition(lambda self: len(self.live()) < len(BROKERS))
    @rule(data=st.data())
    def start_broker(self, data: st.DataObject) -> None:
        self.restart(data.draw(st.sampled_from(self.dead()), label="broker"))

    @precondition(lambda self: len(self.live()) >= MIN_LIVE)
    @rule()
    def kill_controller(self) -> None:
        self.cluster.kill_controller()
        assert active(self.cluster).epoch == self.cluster.store.get_controller_epoch()[0]

    # --- Reassignments and elections ---------------------------------------------------------------

    @precondition(lambda self: bool(self.partitions()))
    @rule(data=st.data(), replicas=st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True))
    def reassign(self, data: st.DataObject, replicas: list[int]) -> None:
        tp = data.draw(st.sampled_from(self.partitions()), label="partition")
        self.controller_caught_up()
        if not self.strands_the_partition(tp, tuple(replicas)):
            results = self.cluster.reassign({tp: replicas}, wait=False)
            assert result_names(results) <= REASSIGN_RESULTS, results

    @precondition(lambda self: bool(self.partitions()))
    @rule(data=st.data())
    def cancel_reassignment(self, data: st.DataObject) -> None:
        tp = data.draw(st.sampled_from(self.partitions()), label="partition")
        self.controller_caught_up()
        if not self.strands_the_partition(tp, None):
            assert result_names(self.cluster.cancel_reassignment([tp], wait=False)) <= REASSIGN_RESULTS

    @precondition(lambda self: bool(self.partitions()))
    @rule(data=st.data())
    def elect_leaders(self, data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(["preferred", "unclean"] if self.unclean else ["preferred"]), label="kind")
        tps = data.draw(st.lists(st.sampled_from(self.partitions()), min_size=1, max_size=3, unique=True))
        assert result_names(self.cluster.elect_leaders(tps, kind, wait=False)) <= ELECTION_RESULTS

    @precondition(lambda self: self.unclean)
    @rule(data=st.data())
    def enable_unclean_election(self, data: st.DataObject) -> None:
        """Cluster-wide (a dynamic broker config) or for one topic (a topic config)."""
        topic = data.draw(st.sampled_from([None, *self.topics()]), label="topic")
        if topic is None:
            self.cluster.update_config({"unclean.leader.election.enable": True})
        else:
            self.cluster.set_topic_config(topic, {"unclean.leader.election.enable": True})

    # --- Data and time -----------------------------------------------------------------------------

    @precondition(lambda self: bool(self.partitions()))
    @rule(data=st.data(), records=st.integers(1, 50))
    def produce(self, data: st.DataObject, records: int) -> None:
        tp = data.draw(st.sampled_from(self.partitions()), label="partition")
        try:
            self.cluster.produce(tp, records)
        except UnknownTopicOrPartitionError:
            pass  # no leader right now

    @rule(seconds=st.floats(0.001, 60))
    def advance(self, seconds: float) -> None:
        self.cluster.advance(seconds)

    @rule()
    def settle(self) -> None:
        self.cluster.run_until(self.cluster.is_quiet, timeout=60)

    # --- Invariants --------------------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        assert_invariants(self.cluster)

    @invariant()
    def metrics_match_the_controller_state(self) -> None:
        controller = self.cluster.active_controller
        if controller is None:
            return  # between a crash and the next election
        ctx = controller.context
        offline = [tp for tp in ctx.all_partitions() if ctx.partition_state(tp) is PartitionState.OFFLINE
                   and not ctx.is_topic_deletion_in_progress(tp.topic)]
        metrics = self.cluster.metrics()
        assert metrics["OfflinePartitionsCount"] == len(offline), offline
        assert (metrics["ActiveControllerCount"], metrics["GlobalTopicCount"]) == (1, len(ctx.all_topics))


def test_random_operations_and_faults() -> None:
    """A pytest function rather than ``ClusterMachine.TestCase`` (a unittest case, which pytest does
    not parametrize): it runs on each engine like the rest of the suite."""
    run_state_machine_as_test(ClusterMachine, settings=settings(
        max_examples=EXAMPLES,
        stateful_step_count=40,
        deadline=None,
        derandomize=CI,
        database=None if CI else settings.default.database,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    ))
