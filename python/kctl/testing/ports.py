"""Loopback ports for the servers tests start, confined to ``KCTL_TEST_PORTS=LOW-HIGH`` when set.

Every server a kctl test starts (ZooKeeper, ``kctl controller`` and ``kctl broker`` processes, the
in-process ``FrameServer``\\ s, Spark's master, worker and driver) takes its port from
:func:`free_ports`, so that a machine whose firewall or sandbox opens only some ports, or a CI host
running several suites at once, can give kctl's tests a range of their own. Without the variable
the kernel picks the ports, as with ``bind(port 0)``.

A port is handed out only when this process holds its lock file (``flock`` on
``<tmp>/kctl-test-ports-<uid>/<port>.lock``) and a trial bind on 127.0.0.1 succeeds: two test
processes that look for ports at the same moment never get the same one, although each releases
its trial socket before the server binds. The lock is kept until :func:`release_ports` or the end
of the process (the kernel drops it then, even after a crash), so a server stopped and started
again keeps its port, and a port is not reused while a slow JVM is still starting on it.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import threading
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path
from typing import IO

PORTS_ENV = "KCTL_TEST_PORTS"
"""``LOW-HIGH``: the inclusive range test servers bind their ports in (unset: any free port)."""
LOOPBACK = "127.0.0.1"
KERNEL_ATTEMPTS = 100
"""How many ports the kernel may offer that other test processes hold before giving up."""
_LISTEN = "0A"
"""The LISTEN state in ``/proc/net/tcp``."""


class PortRangeError(ValueError):
    """``KCTL_TEST_PORTS`` is not a range of ports; the message shows the value and the form."""


class PortsExhaustedError(RuntimeError):
    """Not enough free ports: the message says how many the range has and who holds them."""


def port_range() -> range | None:
    """The ports of ``KCTL_TEST_PORTS`` (None when unset or empty)."""
    value = os.environ.get(PORTS_ENV, "").strip()
    if not value:
        return None
    low, dash, high = value.partition("-")
    if not (dash and low.strip().isdigit() and high.strip().isdigit()):
        raise PortRangeError(f"{PORTS_ENV}={value!r} is not LOW-HIGH (two port numbers, e.g. 20000-20999)")
    first, last = int(low), int(high)
    if not 1 <= first <= last <= 65535:
        raise PortRangeError(f"{PORTS_ENV}={value!r}: need 1 <= LOW <= HIGH <= 65535")
    return range(first, last + 1)


class _Reservations:
    """The ports this process holds: their open lock files, and where the next search starts."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.gettempdir()) / f"kctl-test-ports-{os.getuid()}"
        self.held: dict[int, IO[bytes]] = {}
        self.lock = threading.Lock()
        self.cursor: int | None = None

    def reserve(self, port: int) -> bool:
        """Take ``port`` if no test process holds it and nothing else is bound to it."""
        if port in self.held:
            return False
        self.directory.mkdir(mode=0o700, exist_ok=True)
        lock = (self.directory / f"{port}.lock").open("ab")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            return False
        if not _bindable(port):
            lock.close()  # closing drops the lock
            return False
        self.held[port] = lock
        return True

    def release(self, port: int) -> None:
        lock = self.held.pop(port, None)
        if lock is not None:
            lock.close()


_RESERVATIONS = _Reservations()


def _bindable(port: int) -> bool:
    """Whether a server could bind ``port`` on loopback now (``SO_REUSEADDR``, as servers set it:
    a port whose last connections linger in TIME_WAIT is free)."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that are free now, from ``KCTL_TEST_PORTS`` when set,
    reserved for this process until :func:`release_ports` (or its end).

    Raises :class:`PortRangeError` for a malformed range and :class:`PortsExhaustedError` when
    the range (or the kernel) has fewer free ports than asked for; nothing stays reserved then.
    """
    if count < 1:
        raise ValueError(f"ask for at least one port, not {count}")
    ports = port_range()
    with _RESERVATIONS.lock:
        return _from_range(ports, count) if ports is not None else _from_kernel(count)


def release_ports(ports: Iterable[int]) -> None:
    """Give back ports :func:`free_ports` reserved (their servers have stopped)."""
    with _RESERVATIONS.lock:
        for port in ports:
            _RESERVATIONS.release(port)


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on, from Linux's ``/proc`` (its sockets in LISTEN
    state): what a test checks to prove a server bound only the ports it was given."""
    proc = Path("/proc") / str(pid)
    sockets = set()
    for fd in (proc / "fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            sockets.add(target.removeprefix("socket:[").removesuffix("]"))
    ports = set()
    for table in ("tcp", "tcp6"):
        for row in (proc / "net" / table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == _LISTEN and fields[9] in sockets:
                ports.add(int(fields[1].rpartition(":")[2], 16))
    return ports


def _from_range(ports: range, count: int) -> list[int]:
    """Scan the range circularly from where the last search stopped (a random place at first, so
    that concurrent test processes start apart and a released port is not reused at once)."""
    reservations = _RESERVATIONS
    if reservations.cursor is None or reservations.cursor not in ports:
        reservations.cursor = random.choice(ports)
    start = reservations.cursor - ports.start
    found: list[int] = []
    for offset in range(len(ports)):
        port = ports[(start + offset) % len(ports)]
        if reservations.reserve(port):
            found.append(port)
            if len(found) == count:
                reservations.cursor = ports[(start + offset + 1) % len(ports)]
                return found
    for port in found:
        reservations.release(port)
    mine = sum(1 for port in reservations.held if port in ports)
    raise PortsExhaustedError(
        f"{PORTS_ENV}={ports.start}-{ports[-1]} has {len(ports)} ports but not {count} free ones: this test process "
        f"holds {mine}, the rest are held by other test processes or in use; widen the range or run fewer suites at once"
    )


def _from_kernel(count: int) -> list[int]:
    """Ports the kernel chooses (``bind`` to port 0), skipping those other test processes hold."""
    found: list[int] = []
    for _ in range(count * KERNEL_ATTEMPTS):
        with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
            sock.bind((LOOPBACK, 0))
            port = int(sock.getsockname()[1])
        if _RESERVATIONS.reserve(port):
            found.append(port)
            if len(found) == count:
                return found
    for port in found:
        _RESERVATIONS.release(port)
    raise PortsExhaustedError(f"the kernel offered no {count} free loopback ports that other test processes do not hold")


__all__ = [
    "LOOPBACK", "PORTS_ENV", "PortRangeError", "PortsExhaustedError", "free_ports", "listening_ports", "port_range",
    "release_ports",
]
