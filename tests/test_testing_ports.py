"""kctl.testing.ports: the ports test servers bind, confined by ``KCTL_TEST_PORTS``, never handed to
two test processes at once; a ZooKeeper ensemble and kctl processes started on a narrow range bind
nothing outside it."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl.transports.tcp import broker_address
from kctl.testing.ports import (
    LOOPBACK,
    PORTS_ENV,
    PortRangeError,
    PortsExhaustedError,
    free_ports,
    listening_ports,
    port_range,
    release_ports,
)
from kctl.testing.zookeeper import ZooKeeperEnsemble, require_zookeeper

from tests.support.process_harness import ProcessCluster


def free_window(size: int) -> range:
    """``size`` consecutive ports nothing uses now, below Linux's ephemeral ports (so that no
    outgoing connection takes one meanwhile)."""
    for _ in range(200):
        low = random.randrange(20000, 30000 - size)
        window = range(low, low + size)
        sockets = []
        try:
            for port in window:
                sock = socket.socket()
                sockets.append(sock)
                sock.bind((LOOPBACK, port))
            return window
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise AssertionError(f"no {size} consecutive free ports between 20000 and 30000")


@pytest.fixture
def window(monkeypatch: pytest.MonkeyPatch) -> Iterator[range]:
    """A range of four free ports as ``KCTL_TEST_PORTS``; whatever the test reserved is given back."""
    ports = free_window(4)
    monkeypatch.setenv(PORTS_ENV, f"{ports.start}-{ports[-1]}")
    yield ports
    release_ports(ports)


def reserve_in_another_process(count: int) -> subprocess.CompletedProcess[str]:
    """What ``free_ports(count)`` gives a second test process with the same environment."""
    code = f"from kctl.testing.ports import free_ports; print(*free_ports({count}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_ports_come_from_the_range(window: range) -> None:
    ports = free_ports(3)
    assert len(set(ports)) == 3 and set(ports) <= set(window)
    assert port_range() == window


def test_a_port_something_listens_on_is_skipped(window: range) -> None:
    with socket.create_server((LOOPBACK, window[1])):
        ports = free_ports(3)
        assert sorted(ports) == [window[0], window[2], window[3]]


def test_an_exhausted_range_is_a_clear_error_and_keeps_nothing(window: range) -> None:
    held = free_ports(1)
    with pytest.raises(PortsExhaustedError, match=rf"{PORTS_ENV}={window.start}-{window[-1]} has 4 ports but not 4 "
                                                  r"free ones: this test process holds 1"):
        free_ports(4)
    assert sorted(held + free_ports(3)) == list(window)  # the failed call reserved nothing


@pytest.mark.parametrize("value", ["20000", "a-b", "2000-1000", "0-10", "1-65536", "-5", "100-200-300", "1 000-2000"])
def test_a_malformed_range_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(PORTS_ENV, value)
    with pytest.raises(PortRangeError, match=f"{PORTS_ENV}={value!r}"):
        free_ports(1)


def test_another_test_process_never_gets_a_reserved_port(window: range) -> None:
    mine = free_ports(2)
    other = reserve_in_another_process(2)
    assert other.returncode == 0, other.stderr
    theirs = [int(port) for port in other.stdout.split()]
    assert sorted(mine + theirs) == list(window)
    refused = reserve_in_another_process(3)
    assert refused.returncode == 1 and "PortsExhaustedError" in refused.stderr and "holds 0" in refused.stderr


def test_released_ports_are_free_for_other_processes(window: range) -> None:
    release_ports(free_ports(4))
    other = reserve_in_another_process(4)
    assert other.returncode == 0, other.stderr
    assert sorted(int(port) for port in other.stdout.split()) == list(window)


def test_without_a_range_the_kernel_chooses_and_processes_still_never_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PORTS_ENV, raising=False)
    mine = free_ports(50)
    try:
        assert len(set(mine)) == 50
        other = reserve_in_another_process(50)
        assert other.returncode == 0, other.stderr
        assert not set(mine) & {int(port) for port in other.stdout.split()}
    finally:
        release_ports(mine)


def test_listening_ports_shows_a_server_while_it_listens() -> None:
    (port,) = free_ports(1)
    with socket.create_server((LOOPBACK, port)):
        assert port in listening_ports(os.getpid())
    assert port not in listening_ports(os.getpid())
    release_ports([port])


def test_zookeeper_and_kctl_processes_listen_only_on_ports_of_the_range(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Three ZooKeeper servers (client, peer and election ports each) and a controller and a broker
    process (--listen): eleven ports, and the range has eleven."""
    installation = require_zookeeper()
    ports = free_window(11)
    monkeypatch.setenv(PORTS_ENV, f"{ports.start}-{ports[-1]}")
    with ZooKeeperEnsemble(3, installation=installation) as zookeeper:
        bound = set()
        for server in zookeeper.servers:
            assert server.pid is not None and server.client_port in ports
            bound |= listening_ports(server.pid)
        assert bound <= set(ports) and len(bound) >= 7  # the leader alone listens on its peer port
        with ProcessCluster(zookeeper.hosts + "/kctl-ports", tmp_path) as cluster:
            controller = cluster.start_controller(1)
            broker = cluster.start_broker(1)
            address = broker_address(cluster.admin.get_all_brokers()[1][0])
            assert address is not None and address[1] in ports
            cluster.wait_until(lambda: listening_ports(controller.pid), 30, "the controller to listen", watch=controller)
            assert listening_ports(broker.pid) == {address[1]}
            (controller_port,) = listening_ports(controller.pid)
            assert controller_port in set(ports) - bound - {address[1]}
            with pytest.raises(PortsExhaustedError, match="has 11 ports but not 1 free ones: this test process holds 11"):
                cluster.start_broker(2)
