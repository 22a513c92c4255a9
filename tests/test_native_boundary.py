"""The boundary between kctl and its extension: the extension builds exactly the classes
``kctl.native`` hands it (``kctl._engine.bind``), never kctl modules found by path, and takes a
store's native fast path by the protocol the store offers (``kctl.stores.base.NativeStateTable``),
not by its class.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from kctl.context import ControllerContext
from kctl.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.stores.base import NativeStateTable, ReadResult, UpdateResult
from kctl.stores.memory import MemoryStore, MemoryTree

TPS = [TopicPartition("t", p) for p in range(3)]


def test_the_extension_builds_the_classes_it_was_handed() -> None:
    """In a process that never imports ``kctl.native``: before ``bind`` the engine says what is
    missing; after it, a request's partition states are built from the classes given, wherever
    they are defined."""
    script = textwrap.dedent(
        """
        import enum
        import kctl._engine as engine

        class Made:
            def __init__(self, *args):
                self.args = args

        class Recovery(enum.IntEnum):
            RECOVERED = 0
            RECOVERING = 1

        class Error(Exception):
            pass

        class Codes(enum.IntEnum):  # Kafka's error codes of a broker's answers per partition
            NONE = 0
            UNKNOWN_TOPIC_OR_PARTITION = 3
            STALE_CONTROLLER_EPOCH = 11
            KAFKA_STORAGE_ERROR = 56
            FENCED_LEADER_EPOCH = 74

        native = engine.Engine()
        native.set_live_brokers([(1, 10)])
        slot = native.new_batch_slot()
        native.batch_add_leader_and_isr(slot, [1], "t", 0, (1, [1], 3, 4, 0, 5), ([1], [], []), True)
        per_broker, _, _ = native.batch_pending(slot)
        states = per_broker[0][3]
        try:
            states[0]
        except RuntimeError as e:
            print("unbound:", e)
        names = ["topic_partition", "leader_and_isr", "leader_isr_and_controller_epoch",
                 "leader_and_isr_partition_state", "update_metadata_partition_state",
                 "stop_replica_partition_state"]
        errors = ["kctl_error", "store_error", "no_node_error", "controller_moved_error",
                  "state_change_failed_error", "illegal_state_error", "illegal_argument_error",
                  "plugin_error"]
        engine.bind(leader_recovery_state=Recovery, kafka_errors=Codes, **{n: Made for n in names}, **{n: Error for n in errors})
        built = states[0]
        print("built:", type(built).__name__, built.args[:2], built.args[-1] is Recovery.RECOVERED)
        _, answers = engine.HostedPartitions().become_leader_or_follower(states, 2, False)
        print("answered:", answers.values())
        try:
            engine.bind(leader_recovery_state=Recovery, kafka_errors=Codes, **{n: Made for n in names}, **{n: Error for n in errors})
        except RuntimeError as e:
            print("again:", e)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "unbound: kctl._engine.bind() has not been called: import kctl.native before using the engine",
        "built: Made ('t', 0) True",
        "answered: [<Codes.UNKNOWN_TOPIC_OR_PARTITION: 3>]",
        "again: kctl._engine.bind() was already called",
    ]


def stored() -> MemoryTree:
    """A tree with topic ``t``'s three partition states (leader 1, ISR [1, 2])."""
    tree = MemoryTree()
    store = MemoryStore(tree)
    store.create_topic("t", {tp.partition: ReplicaAssignment((1, 2)) for tp in TPS})
    created = store.create_partition_states(
        {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2)), 1) for tp in TPS}, -1
    )
    assert all(error is None for error in created.values())
    return tree


class Overriding(MemoryStore):
    """A memory store whose partition-state reads are its own: the engine must call them."""

    def __init__(self, tree: MemoryTree) -> None:
        super().__init__(tree)
        self.reads: list[TopicPartition] = []

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> ReadResult[TopicPartition, LeaderIsrAndControllerEpoch]:
        keys = list(partitions)
        self.reads.extend(keys)
        return super().get_partition_states(keys)


class Delegating:
    """No memory store, but one that offers the in-memory fast path (``NativeStateTable``) by
    delegating to one: the engine must take the fast path."""

    def __init__(self, tree: MemoryTree) -> None:
        self.store = MemoryStore(tree)
        self.reads: list[TopicPartition] = []

    def native_begin(self) -> Any:
        return self.store.native_begin()

    def native_end(self, wrote: bool, written: Sequence[tuple[str, int]] = ()) -> None:
        self.store.native_end(wrote, written)

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> ReadResult[TopicPartition, LeaderIsrAndControllerEpoch]:
        keys = list(partitions)
        self.reads.extend(keys)
        return self.store.get_partition_states(keys)

    def update_partition_states(
        self, updates: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int, expected_controller_epoch_version: int
    ) -> UpdateResult:
        return self.store.update_partition_states(updates, controller_epoch, expected_controller_epoch_version)


@pytest.mark.parametrize(
    ("cls", "fast"), [(Overriding, False), (Delegating, True)], ids=["overridden methods", "protocol by delegation"]
)
def test_the_fast_path_is_taken_by_the_protocol_a_store_offers(cls: Any, fast: bool) -> None:
    store = cls(stored())
    if fast:
        native: NativeStateTable = store  # what mypy would check of a real store
        assert native is store
    context = ControllerContext(engine="rust")
    assert context.load_partition_leaderships(store, TPS) == {}
    assert {tp: context.partition_leadership(tp) for tp in TPS} == {
        tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, (1, 2)), 1) for tp in TPS
    }
    assert store.reads == ([] if fast else TPS)


def test_an_update_metadata_fan_out_is_one_sent_item_for_its_registered_recipients() -> None:
    """The engine hands over an UpdateMetadata fan-out as one item (not one per broker): its
    recipients registered at send, ascending, in place of a broker (-1) and its epoch (-1; each
    recipient's own is the context's); the log line names every broker it was added for."""
    import kctl.native  # noqa: F401  (binds the extension's classes)
    from kctl._engine import Engine

    native = Engine()
    native.set_live_brokers([(1, 10), (2, 20), (3, 30)])
    slot = native.new_batch_slot()
    native.batch_add_update_metadata(slot, [3, 9, 1], [])
    lines, raw = native.batch_send(slot, 3, True)
    assert [(kind, broker, epoch, len(states), brokers, delete) for kind, broker, epoch, states, brokers, delete in raw] == [
        ("UpdateMetadata", -1, -1, 0, [1, 3], False)
    ]
    assert [text for _, _, text in lines.made()] == ["Sending UpdateMetadata request to brokers [1, 3, 9] for 0 partitions"]
    native.batch_add_update_metadata(slot, [9], [])
    assert native.batch_send(slot, 3, True)[1] == []


def test_plain_alter_partition_accepts_only_plain_int32s() -> None:
    """The controller's quick check of an AlterPartition: any field that is not a plain ``int``
    within Kafka's ``Int`` (or not there at all) sends the request to the checks that name it."""
    from kctl._engine import plain_alter_partition

    class Int(int):
        pass

    tp = TopicPartition("t", 0)
    plain = LeaderAndIsr(1, (1, 2), 3, 4)
    assert plain_alter_partition({tp: plain, TopicPartition("u", 2**31 - 1): LeaderAndIsr(-1, [], -2**31, 0)})
    assert plain_alter_partition({})
    refused: list[dict[Any, Any]] = [
        {TopicPartition("t", 2**31): plain},
        {tp: LeaderAndIsr(True, (1,), 3, 4)},
        {tp: LeaderAndIsr(Int(1), (1,), 3, 4)},
        {tp: LeaderAndIsr(1, (1, 2.0), 3, 4)},  # type: ignore[arg-type]
        {tp: LeaderAndIsr(1, (1,), 2**31, 4)},
        {tp: LeaderAndIsr(1, (1,), 3, -2**31 - 1)},
        {tp: "not a state"},
        {("t", 0): plain},
        {tp: plain, TopicPartition("t", 1): LeaderAndIsr(1, (1, 2**40), 3, 4)},
    ]
    for changes in refused:
        assert not plain_alter_partition(changes), changes
    not_iterable = LeaderAndIsr(1, (1,), 3, 4)
    object.__setattr__(not_iterable, "isr", 5)
    assert not plain_alter_partition({tp: not_iterable})
