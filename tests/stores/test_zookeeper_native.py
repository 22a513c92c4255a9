"""The ZooKeeper store's native partition-state path agrees with the Python one, on a real server.

With a plain :class:`ZooKeeperStore`, the native engine builds the multi and multiRead requests
for partition states itself and decodes the answers (``kctl._engine``'s ZooKeeper codec), the
store only moving bytes; a store whose partition-state methods are overridden is used through
Python. Both must give the same results, logs, requests and stored znodes, including for the
documents the native decoder leaves to ``zkdata`` (a recovery state, corrupt JSON) and for a
deposed controller.
"""

from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from dataclasses import replace
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest

from kctl.election import ControlledShutdownElection, OfflineElection
from kctl.errors import ControllerMovedError
from kctl.model import (
    LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionReplica, PartitionState, ReplicaAssignment, ReplicaState, TopicPartition,
)
from kctl.stores import MATCH_ANY_VERSION, paths
from kctl.stores.base import ReadResult, UpdateResult
from kctl.testing.zookeeper import ZooKeeperEnsemble, in_ci

try:
    from kazoo.client import KazooClient
except ImportError:
    if in_ci():
        raise
    pytest.skip("kazoo is not installed: pip install 'kctl[zookeeper]'", allow_module_level=True)

from kctl.stores.kafkazk import KafkaZkClient
from kctl.stores.zookeeper import ZooKeeperStore

from tests.support.statemachine_harness import Harness, make_harness

PARTITIONS = 40
UNUSUAL = {
    # Kafka 3.2+'s recovery state: zkdata's decoder, not the native one
    4: b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1],"leader_recovery_state":0}',
    # keys in another order, with spaces: still the native decoder's
    5: b' {"isr" : [3, 1, 2], "version": 1, "leader_epoch": 4,\n "leader": 3, "controller_epoch": 1} ',
    6: b"\x00not JSON",  # corrupt: named by zkdata's decoder
    7: b'{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}',  # a newer controller
    8: b'{"controller_epoch":1,"leader":1,"leader_epoch":0,"isr":[1,2,3],"leader":1}',  # duplicated key
}
MISSING = 9  # no state znode


class PythonPathStore(ZooKeeperStore):
    """Overriding the partition-state methods turns the engine's native path off."""

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> ReadResult[TopicPartition, LeaderIsrAndControllerEpoch]:
        return super().get_partition_states(partitions)

    def update_partition_states(
        self, updates: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int, expected_controller_epoch_version: int
    ) -> UpdateResult:
        return super().update_partition_states(updates, controller_epoch, expected_controller_epoch_version)


def replicas(p: int) -> tuple[int, int, int]:
    return p % 3 + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1


@contextmanager
def three_paths(
    server: ZooKeeperEnsemble, python_path: tuple[str, type[ZooKeeperStore]], topic: str, partitions: int
) -> Iterator[list[tuple[str, Harness, str, Any]]]:
    """The same cluster (``topic`` of ``partitions`` partitions) in three chroots: the native engine
    with a store on the native path and with ``python_path`` (its methods overridden: through
    Python), and the reference engine; per path its name, harness, chroot and a raw kazoo session
    on it. Every session is closed at the end (no kazoo thread may outlive the test: it uses the
    global random)."""
    made: list[tuple[str, Harness, str, Any]] = []
    stores: list[ZooKeeperStore] = []
    try:
        for name, cls, engine in (("native", ZooKeeperStore, "rust"), (*python_path, "rust"),
                                  ("reference", ZooKeeperStore, "reference")):
            chroot = f"/kctl-native-{uuid.uuid4().hex}"
            store = cls(server.hosts, chroot)
            stores.append(store)
            harness = make_harness(store=store, engine=engine, topics={topic: {p: replicas(p) for p in range(partitions)}})
            raw = KazooClient(server.hosts + chroot)
            raw.start()
            made.append((name, harness, chroot, raw))
        yield made
    finally:
        for _, harness, _, raw in made:
            raw.stop()
            raw.close()
            for session in [*harness.broker_sessions.values(), *harness.other_sessions]:
                session.close()
        for store in stores:
            store.close()


@pytest.fixture
def harnesses(zookeeper_server: ZooKeeperEnsemble) -> Iterator[dict[str, tuple[Harness, list[str]]]]:
    """The same cluster in three chroots: the native engine with a store on the native path and
    with one on the Python path, and the reference engine (always through Python); each with the
    partitions the store's Python ``get_partition_states`` was asked for."""
    built: dict[str, tuple[Harness, list[str]]] = {}
    with three_paths(zookeeper_server, ("python", PythonPathStore), "t", PARTITIONS) as made:
        for name, harness, _, raw in made:
            tps = [TopicPartition("t", p) for p in range(PARTITIONS)]
            for tp in tps:
                if tp.partition != MISSING:
                    harness.write_state(tp, replicas(tp.partition)[0], replicas(tp.partition), cache=False)
            for p, document in UNUSUAL.items():
                raw.set(paths.partition_state(TopicPartition("t", p)), document)
            read: list[str] = []
            store, python_read = harness.store, harness.store.get_partition_states

            def recording(partitions: Iterable[TopicPartition], read: list[str] = read, python_read: Any = python_read) -> Any:
                keys = list(partitions)
                read.extend(str(tp) for tp in keys)
                return python_read(keys)

            store.get_partition_states = recording  # type: ignore[method-assign]  # an instance attribute
            built[name] = harness, read
        yield built


def observe(h: Harness) -> tuple[object, ...]:
    tps = [TopicPartition("t", p) for p in range(PARTITIONS)]
    stored = h.store.get_partition_states(tps)
    return (
        h.log, h.batch_log, [(s.broker, replace(s.request, broker_epoch=0)) for s in h.channel.sent],  # zxids differ
        stored.values, {tp: (type(e).__name__, str(e)) for tp, e in stored.errors.items()},
        {tp: h.context.partition_leadership(tp) for tp in tps},
    )


def test_controlled_shutdown_is_the_same_on_both_paths(harnesses: dict[str, tuple[Harness, list[str]]]) -> None:
    seen = {}
    for name, (h, read) in harnesses.items():
        tps = [TopicPartition("t", p) for p in range(PARTITIONS)]
        errors = h.context.load_partition_leaderships(h.store, tps)
        assert {str(tp) for tp in errors} == {"t-6"}, errors  # the corrupt one; the missing one is no error
        h.partition_sm.startup()
        h.replica_sm.startup()
        h.reset_observations()
        h.context.add_shutting_down_broker(1)
        led, followed = h.context.controlled_shutdown_partitions(1)
        h.partition_sm.handle_state_changes(led, PartitionState.ONLINE, ControlledShutdownElection())
        h.replica_sm.handle_state_changes([PartitionReplica(tp, 1) for tp in followed], ReplicaState.OFFLINE)
        reads = list(read)
        seen[name] = observe(h), reads
    (native, native_reads), (python, python_reads) = seen["native"], seen["python"]
    assert native == python == seen["reference"][0]
    assert set(native_reads) == {"t-4", "t-6", "t-8"}  # what the native decoder leaves to zkdata
    assert len(python_reads) > PARTITIONS
    states = native[3]
    assert isinstance(states, dict)
    assert states[TopicPartition("t", 5)].leader_and_isr.leader == 3  # decoded natively, left as it was
    still_on_1 = {tp.partition for tp, s in states.items() if 1 in (s.leader_and_isr.leader, *s.leader_and_isr.isr)}
    assert still_on_1 == {7}  # written by a newer controller: left alone (6 is corrupt, 9 missing)


def test_a_deposed_controller_learns_it_on_both_paths(harnesses: dict[str, tuple[Harness, list[str]]]) -> None:
    outcomes = {}
    for name, (h, _) in harnesses.items():
        tps = [TopicPartition("t", p) for p in range(PARTITIONS)]
        h.context.load_partition_leaderships(h.store, tps)
        h.partition_sm.startup()
        h.reset_observations()
        h.another_controller_takes_over()
        h.context.add_shutting_down_broker(1)
        led, _ = h.context.controlled_shutdown_partitions(1)
        try:
            results = h.partition_sm.handle_state_changes(led, PartitionState.ONLINE, ControlledShutdownElection())
            outcome: object = {str(tp): (type(r).__name__, str(r)) for tp, r in results.items()}
        except ControllerMovedError as exc:
            outcome = str(exc), type(exc.__cause__).__name__
        written = {tp: s.leader_and_isr.new_epoch() for tp, s in h.store.get_partition_states(tps).values.items()}
        with pytest.raises(ControllerMovedError, match="Expected zkVersion = 1"):
            h.store.update_partition_states({}, 1, h.context.epoch_zk_version)  # even with nothing to write
        unfenced = h.store.update_partition_states(written, 1, MATCH_ANY_VERSION)
        outcomes[name] = outcome, h.log, observe(h)[3], len(unfenced.successful)
    assert outcomes["native"] == outcomes["python"] == outcomes["reference"]
    assert outcomes["native"][0] == ("Controller epoch zkVersion check fails. Expected zkVersion = 1", "BadVersionError")
    assert outcomes["native"][3] == PARTITIONS - 1  # unfenced writes still land (not on the corrupt 6)


READ_STATE = re.compile(rb"/brokers/topics/t/partitions/(\d+)/state")
CHANGED = {
    0: ((1, 2), None),  # led by 1: its ISR lost 3, so the election's ISR is (2,) not (2, 3)
    1: ((2, 3), None),  # followed by 1: 1 has left its ISR already, so there is nothing to write
    2: ((3, 1, 2), 2),  # a newer controller's (epoch 2): broker 1's removal aborts
}
"""What another session writes: partition → (ISR, the controller epoch written, None to keep it)."""


def test_a_state_changed_after_the_failover_loaded_it_gets_kafkas_writes(
    harnesses: dict[str, tuple[Harness, list[str]]],
) -> None:
    """A failover with broker 1 gone (the side-by-side benchmark's controller crash). The native
    engine writes from the states the context loaded and wrote, with their znode versions, where
    Kafka reads each again first: another session's changes after the load fail those writes on
    their versions, and the partitions are read and written again. That is what Kafka does when
    the same changes land between its read and its write (the other paths, which read): every path
    ends with the same znodes, versions, results, lines and requests."""
    seen = {}
    for name, (h, _) in harnesses.items():
        tps = [TopicPartition("t", p) for p in range(PARTITIONS)]
        h.context.remove_live_brokers([1])
        h.context.load_partition_leaderships(h.store, tps)
        writers = [h.concurrent_state_write(TopicPartition("t", p), isr[0], isr, epoch) for p, (isr, epoch) in CHANGED.items()]
        if name == "native":
            for write in writers:
                write()
        else:
            h.store.update_partition_states = _after_the_read(h.store, writers)  # type: ignore[method-assign]
        reads: list[int] = []
        exchange = h.store.native_exchange

        def recording(opcode: int, requests: Any, reads: list[int] = reads, exchange: Any = exchange) -> Any:
            if opcode == 22:  # multiRead
                reads.extend(int(m) for body, _ in requests for m in READ_STATE.findall(body))
            return exchange(opcode, requests)

        h.store.native_exchange = recording  # type: ignore[method-assign]  # an instance attribute
        h.reset_observations()
        h.replica_sm.startup()
        h.partition_sm.startup()
        read = sorted(reads)  # before observe's own read
        seen[name] = observe(h), read
    native, python, reference = (seen[name][0] for name in ("native", "python", "reference"))
    assert native == python == reference
    log, states = native[0], native[3]
    assert isinstance(log, list) and isinstance(states, dict)
    assert states[TopicPartition("t", 0)].leader_and_isr.isr == (2,)
    assert states[TopicPartition("t", 1)].leader_and_isr.partition_epoch == 1  # the other session's write only
    assert any("t-2" in line and "another controller was elected with epoch 2" in line for line in log)
    # The native path read only the changed states (after their writes failed) and the state a
    # newer controller wrote before the load, led by 1 (no cache stands in for it: read by both
    # transitions); the others read each state before each write.
    assert seen["native"][1] == [0, 1, 2, 7, 7]
    assert len(seen["reference"][1]) > PARTITIONS


def _after_the_read(store: ZooKeeperStore, writers: list[Any]) -> Any:
    """``store.update_partition_states`` with ``writers`` run before its first call, after the
    controller read the states to write."""
    update = store.update_partition_states

    def updating(*args: Any) -> Any:
        while writers:
            writers.pop()()
        return update(*args)

    return updating


class KazooCreatesStore(ZooKeeperStore):
    """Creates through the client's multis (Kafka's semantics in ``KafkaZkClient``, an ``Op`` and a
    kazoo answer per znode), as they were before the native codec wrote them."""

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected_controller_epoch_version: int
    ) -> dict[TopicPartition, Any]:
        return KafkaZkClient.create_partition_states(self, states, expected_controller_epoch_version)


NEW = 30  # partitions of the new topic


@pytest.fixture
def creations(zookeeper_server: ZooKeeperEnsemble) -> Iterator[dict[str, tuple[Harness, list[str]]]]:
    """A new topic ``n`` in three chroots, created natively by the native engine, through the
    client's multis, and by the reference engine (through the store's own, native, creates); its
    ``/partitions/1`` exists already, and so does the state of partition 2. Topic ``gone`` is in
    the context but not in the store. Each with the paths its client's multis were given."""
    built: dict[str, tuple[Harness, list[str]]] = {}
    with three_paths(zookeeper_server, ("kazoo", KazooCreatesStore), "n", NEW) as made:
        for name, harness, _, raw in made:
            harness.context.add_topic("gone", None)
            harness.context.put_partition_assignments({TopicPartition("gone", p): ReplicaAssignment((1, 2)) for p in (0, 1)})
            raw.ensure_path(paths.topic_partition(TopicPartition("n", 1)))
            raw.create(paths.partition_state(TopicPartition("n", 2)), UNUSUAL[7], makepath=True)
            written: list[str] = []
            client = harness.store._client  # type: ignore[attr-defined]
            multi = client.multi

            def recording(items: Iterable[Any], fence: int, written: list[str] = written, multi: Any = multi) -> Any:
                listed = list(items)
                written.extend(op.path for ops in listed for op in ops)
                return multi(listed, fence)

            client.multi = recording
            built[name] = harness, written
        yield built


def create(h: Harness, gone: bool = True) -> object:
    tps = [*(TopicPartition("n", p) for p in range(NEW)), *(TopicPartition("gone", p) for p in range(2 * gone))]
    h.partition_sm.handle_state_changes(tps, PartitionState.NEW)
    try:
        h.partition_sm.handle_state_changes(tps, PartitionState.ONLINE, OfflineElection())
    except ControllerMovedError as exc:
        return str(exc), type(exc.__cause__).__name__
    return h.partition_states(tps)


def test_creation_is_the_same_natively_and_through_the_client(creations: dict[str, tuple[Harness, list[str]]]) -> None:
    seen = {}
    for name, (h, written) in creations.items():
        outcome = create(h)
        stored = h.store.get_partition_states(TopicPartition("n", p) for p in range(NEW))
        seen[name] = outcome, h.log, observe(h)[2], stored.values, sorted(written)
    native, kazoo, reference = seen["native"], seen["kazoo"], seen["reference"]
    assert native[:4] == kazoo[:4] == reference[:4]
    states = native[0]
    assert isinstance(states, dict)
    assert [str(tp) for tp, s in states.items() if s is not PartitionState.ONLINE] == ["n-2", "gone-0", "gone-1"]
    errors = [line for line in native[1] if line.startswith("ERROR ")]
    assert len(errors) == 3
    assert "/brokers/topics/n/partitions/2/state already exists" in errors[0]
    assert "cannot create /brokers/topics/gone/partitions: its parent does not exist" in errors[1]
    # Only a topic's missing /partitions goes through the client's multis; the states are the codec's.
    assert native[4] == reference[4] == ["/brokers/topics/gone/partitions"]
    assert len(kazoo[4]) == 1 + 2 * NEW - 2  # n's /partitions/1 and 2 exist


def test_a_deposed_controller_creates_nothing_on_any_path(creations: dict[str, tuple[Harness, list[str]]]) -> None:
    outcomes = {}
    for name, (h, _) in creations.items():
        h.another_controller_takes_over()
        outcome = create(h, gone=False)  # n's /partitions exists: the fence of the states' multis fails
        stored = h.store.get_partition_states(TopicPartition("n", p) for p in range(NEW))
        outcomes[name] = outcome, h.log, sorted(str(tp) for tp in stored.values)
    assert outcomes["native"] == outcomes["kazoo"] == outcomes["reference"]
    assert outcomes["native"][0] == ("Controller epoch zkVersion check fails. Expected zkVersion = 1", "BadVersionError")
    assert outcomes["native"][2] == ["n-2"]
