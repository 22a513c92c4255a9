"""The ``zkqueue`` transport's queues on a real ZooKeeper, holding items that are not messages: each
is moved aside into the queue's dead letters (a bounded number kept), logged, and never handed on
or tried again; the messages around it are delivered in order."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import msgpack  # type: ignore[import-untyped]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl import wire
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.zookeeper import ZooKeeperEnsemble
from kctl.transports.zkqueue import (
    DEAD_LETTER,
    ITEM_PREFIX,
    MAX_DEAD_LETTERS,
    StateChangeQueue,
    ZkQueueTransport,
)

from tests.support.hostile_inputs import fuzz, msgpack_values, mutated, nested_extensions, valid_frames
from tests.support.process_harness import wait_until


QUEUE = "/brokers/state/7"


@pytest.fixture(scope="module")
def transport(zookeeper_server: ZooKeeperEnsemble) -> Iterator[ZkQueueTransport]:
    chroot = f"/kctl-hostile-zkqueue-{uuid.uuid4().hex}"
    ZooKeeperStore(zookeeper_server.hosts + chroot).close()  # creates the chroot
    t = ZkQueueTransport(hosts=zookeeper_server.hosts + chroot)
    yield t
    t.close()


@pytest.fixture
def queue(transport: ZkQueueTransport) -> StateChangeQueue:
    """An empty queue without dead letters."""
    transport.client.delete(QUEUE, recursive=True)
    return transport.queue(QUEUE)


def put_raw(queue: StateChangeQueue, data: bytes) -> str:
    created: str = queue.client.create(f"{queue.path}/{ITEM_PREFIX}", data, sequence=True)
    return created.rpartition("/")[2]


def dead_letter(queue: StateChangeQueue, name: str) -> bytes:
    data: bytes = queue.client.get(f"{queue.path}/{DEAD_LETTER}/{name}")[0]
    return data


def test_undecodable_items_are_moved_aside_and_the_others_delivered_in_order(
    queue: StateChangeQueue, caplog: pytest.LogCaptureFixture
) -> None:
    queue.put("req", 1, "a", "first")
    poisoned = put_raw(queue, nested_extensions())
    not_an_item = put_raw(queue, wire.encode(("req", "one", "b", "body")))  # the sender is no id
    queue.put("resp", 2, "c", "last")
    with caplog.at_level(logging.ERROR, logger="kctl.transports.zkqueue"):
        assert [(i.kind, i.sender, i.body) for i in queue.items()] == [("req", 1, "first"), ("resp", 2, "last")]
    assert queue.dead_letters() == [poisoned, not_an_item]
    assert dead_letter(queue, poisoned) == nested_extensions()  # kept as it was, for the operator
    assert len(queue.names()) == 2
    moved = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Moved the undecodable")]
    assert len(moved) == 2 and f"{QUEUE}/{poisoned}" in moved[0] and "nested more than" in moved[0]


def test_dead_letters_keep_only_the_latest(queue: StateChangeQueue) -> None:
    names = [put_raw(queue, b"\xc1garbage %d" % i) for i in range(MAX_DEAD_LETTERS + 3)]
    assert queue.items() == []
    assert queue.dead_letters() == names[-MAX_DEAD_LETTERS:]
    assert queue.names() == []


def test_an_item_that_cannot_be_moved_aside_is_skipped_and_not_tried_again(
    queue: StateChangeQueue, caplog: pytest.LogCaptureFixture
) -> None:
    name = put_raw(queue, b"\xc1")
    queue.client.create(f"{QUEUE}/{DEAD_LETTER}/{name}", b"in the way", makepath=True)
    queue.put("req", 1, "a", "after")
    with caplog.at_level(logging.ERROR, logger="kctl.transports.zkqueue"):
        for _ in range(3):
            assert [i.body for i in queue.items()] == ["after"]
    skipped = [r for r in caplog.records if r.getMessage().startswith("Skipping the undecodable")]
    assert len(skipped) == 1 and "NodeExistsError" in skipped[0].getMessage()


def test_a_broker_consuming_its_queue_gets_past_a_poisoned_item(transport: ZkQueueTransport) -> None:
    queue = transport.queue("/brokers/state/8")
    put_raw(queue, nested_extensions())
    queue.put("req", 9, "t", "hello")
    seen: list[object] = []
    transport.bind_broker(8, lambda body: seen.append(body))
    try:
        wait_until(lambda: seen and not queue.names(), 30, "the broker to consume its queue")
        assert seen == ["hello"]
        assert len(queue.dead_letters()) == 1
    finally:
        transport.unbind_broker(8)


hostile_items = st.one_of(
    st.binary(max_size=200),
    msgpack_values.map(lambda v: msgpack.packb(v, use_bin_type=True)),
    st.tuples(st.sampled_from(["req", "resp", "x"]), msgpack_values, msgpack_values, msgpack_values).map(
        lambda item: msgpack.packb(list(item), use_bin_type=True)
    ),
    mutated(valid_frames()),
)


@fuzz(30)
@given(st.lists(hostile_items, min_size=1, max_size=3))
def test_hostile_items_never_stop_the_queue(transport: ZkQueueTransport, items: list[bytes]) -> None:
    queue = transport.queue("/brokers/state/9")
    for name in queue.names():
        queue.delete(name)
    for data in items:
        put_raw(queue, data)
    queue.put("req", 1, "marker", "marker")
    delivered = queue.items()
    assert delivered[-1].body == "marker"
    for item in delivered:
        assert item.kind in ("req", "resp") and type(item.sender) is int and type(item.token) is str
    assert len(queue.names()) == len(delivered)  # the others were moved aside
    assert len(queue.dead_letters()) <= MAX_DEAD_LETTERS
