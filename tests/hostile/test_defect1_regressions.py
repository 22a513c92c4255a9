"""Issue 11, defect 1: a ~700-byte msgpack frame of nested extension values made ``wire`` recurse
once per level until the process's C stack overflowed. Each test meets it in a process of its own,
so that the crash it caused shows as a failure rather than a dead pytest: decoded in a subprocess,
sent over tcp to a ``kctl broker``, and stored as a persistent item in a ``kctl controller``'s
zkqueue queue before the controller restarts. Each process must survive and keep serving, and the
queue item be moved aside.

Only names that existed before the fix are imported, so the tests run (and fail) on that code too.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

from kctl import admin, wire
from kctl.broker.fetcher import FETCH_API, FetchPartition, FetchRequest, FetchResponse
from kctl.errors import Errors
from kctl.model import TopicPartition
from kctl.net import EventLoopThread, FrameClient, Header, Request
from kctl.stores.zkclient import kazoo_modules
from kctl.testing.zookeeper import ZooKeeperEnsemble
from kctl.transports.tcp import broker_address
from kctl.transports.zkqueue import ITEM_PREFIX, controller_queue_path

from tests.support.hostile_inputs import nested_extensions
from tests.support.process_harness import ProcessCluster


DEAD_LETTER = "dead-letter"
"""Where a queue's undecodable items go (docs/operations.md)."""
QUEUE_ITEM_DEPTH = 1000
"""The queue item nests deeper than the 200 levels of the tcp frame (3.9 KiB instead of 714 bytes):
each level took about 40 KiB of C stack, so 200 levels sit at the edge of a thread's 8 MiB and
decoded on the queue consumer's fresh thread where they overflowed the network thread."""


def test_nested_extension_frame_is_a_wire_error_in_a_process_of_its_own() -> None:
    hostile = nested_extensions()
    frame = wire.FRAME_HEADER.pack(len(hostile)) + hostile
    assert len(frame) == 718
    script = textwrap.dedent(f"""
        from kctl import wire
        try:
            print("decoded:", wire.split_frames(bytes.fromhex({frame.hex()!r})))
        except wire.WireError as exc:
            print("WireError:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"the decoding process died ({done.returncode}): {done.stderr[-2000:]}"
    assert done.stdout.startswith("WireError: extension values nested more than")


def test_broker_process_survives_the_nested_extension_frame_and_keeps_serving(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with ProcessCluster(zookeeper_server.hosts + zookeeper_chroot, tmp_path_factory.mktemp("hostile-tcp")) as cluster:
        broker = cluster.start_broker(1)
        address = broker_address(cluster.admin.get_all_brokers()[1][0])
        assert address is not None
        hostile = nested_extensions()
        with socket.create_connection(address, timeout=30) as sock:
            sock.sendall(wire.FRAME_HEADER.pack(len(hostile)) + hostile)
            assert sock.recv(65536) == b""  # the broker closed this connection
        cluster.wait_until(lambda: "Closing the connection from" in broker.log(), 30, "the broker to log it",
                           watch=broker)
        network = EventLoopThread()
        client = FrameClient(network)
        try:
            tp = TopicPartition("t", 0)
            fetch = Request(FETCH_API, Header(), FetchRequest(2, -1, (FetchPartition(tp, 0, 0),)))
            answer = network.run(client.call(address, fetch, 30), timeout=40)
        finally:
            client.close()
            network.stop()
        assert isinstance(answer, FetchResponse)
        assert [(p.tp, p.error) for p in answer.partitions] == [(tp, Errors.NOT_LEADER_OR_FOLLOWER)]
        assert broker.running() and 1 in cluster.admin.get_all_brokers()
        assert "extension values nested more than" in broker.log()


@pytest.mark.usefixtures("engine")
def test_controller_restarted_over_a_poisoned_queue_item_becomes_active_and_moves_it_aside(
    zookeeper_server: ZooKeeperEnsemble, zookeeper_chroot: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    zk = zookeeper_server.hosts + zookeeper_chroot
    with ProcessCluster(zk, tmp_path_factory.mktemp("hostile-zkqueue"), transport="zkqueue") as cluster:
        first = cluster.start_controller(1)
        cluster.wait_until(lambda: cluster.active_controller() == 1, 60, "controller 1 to be active", watch=first)
        epoch = cluster.controller_epoch()
        first.kill()

        client = kazoo_modules().client.KazooClient(hosts=zk)
        client.start(timeout=30)
        try:
            queue = controller_queue_path(1)
            client.ensure_path(queue)
            item = nested_extensions(QUEUE_ITEM_DEPTH)
            poisoned = client.create(f"{queue}/{ITEM_PREFIX}", item, sequence=True).rpartition("/")[2]

            restarted = cluster.start_controller(1)
            cluster.wait_until(lambda: cluster.active_controller() == 1 and cluster.controller_epoch() > epoch, 60,
                               "controller 1 to be active again", watch=restarted)
            cluster.start_broker(1)
            admin.create_topic(cluster.admin, "orders", broker_racks={1: None}, assignment={0: [1]})
            cluster.wait_until(lambda: cluster.leaders("orders") == {0: 1}, 60, "a leader for orders-0",
                               watch=restarted)
            cluster.wait_until(lambda: client.exists(f"{queue}/{DEAD_LETTER}/{poisoned}"), 30,
                               "the poisoned item to be moved aside", watch=restarted)
            assert client.get(f"{queue}/{DEAD_LETTER}/{poisoned}")[0] == item
            assert not client.exists(f"{queue}/{poisoned}")
            assert "Moved the undecodable queue item" in restarted.log()
            assert restarted.running()
        finally:
            client.stop()
            client.close()
