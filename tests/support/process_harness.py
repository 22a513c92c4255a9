"""Start, stop and observe ``kctl controller`` / ``kctl broker`` processes on a real ZooKeeper.

Everything is observed the way an operator would: through ZooKeeper (an admin session of the
``zookeeper`` store) and the processes' stderr logs. Waits poll a condition with a deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from kctl.errors import StoreUnavailableError
from kctl.model import LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kctl.requests import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from kctl.stores.zookeeper import ZooKeeperStore
from kctl.testing.ports import LOOPBACK, free_ports, release_ports

T = TypeVar("T")

KCTL = str(Path(sys.executable).with_name("kctl"))
"""The virtualenv's ``kctl`` script: what a user runs."""

FAST = {
    "zookeeper.session.timeout.ms": "2000",  # a killed process's znodes go within ~2 s
    "controlled.shutdown.retry.backoff.ms": "200",
    "auto.leader.rebalance.enable": "false",  # no leader moves the test did not ask for
    "request.timeout.ms": "5000",
}
"""Broker properties that keep the tests quick."""


def leader_and_isr_request(controller_epoch: int, leader_epoch: int, broker_epoch: int = -1) -> LeaderAndIsrRequest:
    """Controller 9 makes broker 1 the leader of ``t-0``."""
    state = LeaderAndIsrPartitionState("t", 0, controller_epoch, 1, leader_epoch, (1,), 0, (1,), (), (), True)
    return LeaderAndIsrRequest(5, 9, controller_epoch, broker_epoch, (state,), {}, ())


def wait_until(condition: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll until ``condition()`` returns something truthy; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


class KctlProcess:
    """One ``kctl`` process, its stderr in a file; stopped only by its PID."""

    def __init__(self, name: str, args: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.args = list(args)
        self.log_path = log_path
        environment = None if env is None else {**os.environ, **env}
        with log_path.open("ab") as log:
            self.popen = subprocess.Popen([KCTL, *args], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          env=environment)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, signum: signal.Signals) -> None:
        if self.running():
            os.kill(self.pid, signum)

    def kill(self) -> None:
        """kill -9: no goodbye to ZooKeeper or the controller."""
        if self.running():
            os.kill(self.pid, signal.SIGKILL)
            self.popen.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for the exit status (SIGKILL after ``timeout``)."""
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not stop within {timeout:g}s after SIGTERM:\n{self.log()[-3000:]}") from None


class ProcessCluster:
    """kctl processes sharing one ZooKeeper connect string (with its chroot)."""

    def __init__(self, zk: str, directory: Path, config: dict[str, str] | None = None,
                 transport: str = "tcp", env: Mapping[str, Mapping[str, str]] | None = None,
                 admin_options: Mapping[str, object] | None = None) -> None:
        """``env``: environment variables by role (``controller``, ``broker``), such as a secured
        cluster's ``KCTL_ZK_AUTH``; ``admin_options``: more options of the operator's session."""
        self.zk = zk
        self.directory = directory
        self.config = {**FAST, **(config or {})}
        self.transport = transport
        self.env = dict(env or {})
        self.admin_options = dict(admin_options or {})
        self.processes: list[KctlProcess] = []
        self.controllers: dict[int, KctlProcess] = {}
        self.brokers: dict[int, KctlProcess] = {}
        self._admin: ZooKeeperStore | None = None
        self._ports: list[int] = []  # the --listen ports given, held until close

    def __enter__(self) -> ProcessCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for process in self.processes:
            process.kill()
        release_ports(self._ports)
        if self._admin is not None:
            self._admin.close()

    @property
    def admin(self) -> ZooKeeperStore:
        """An operator's session (created on first use; the chroot then exists)."""
        if self._admin is None:
            self._admin = ZooKeeperStore(self.zk, session_timeout=10.0, connection_timeout=30.0,
                                         **self.admin_options)  # type: ignore[arg-type]
        else:  # as an operator would: a new session once ZooKeeper expired this one (down past its timeout)
            self._admin.reconnect()
        return self._admin

    def _start(self, role: str, ident: int, extra: Sequence[str], env: Mapping[str, str] | None = None) -> KctlProcess:
        args = [role, "--id", str(ident), "--zk", self.zk, "--transport", self.transport, "--log-level", "DEBUG"]
        if "--listen" not in extra:  # a port from KCTL_TEST_PORTS, as every server of the tests
            self._ports += free_ports(1)
            args += ["--listen", f"{LOOPBACK}:{self._ports[-1]}"]
        for name, value in self.config.items():
            args += ["--config", f"{name}={value}"]
        count = sum(1 for p in self.processes if p.name.startswith(f"{role}-{ident}"))
        environment = {**self.env.get(role, {}), **(env or {})}
        process = KctlProcess(f"{role}-{ident}", [*args, *extra],
                              self.directory / f"{role}-{ident}.{count}.log", environment or None)
        self.processes.append(process)
        return process

    def start_controller(self, controller_id: int, extra: Sequence[str] = (),
                         env: Mapping[str, str] | None = None) -> KctlProcess:
        process = self.controllers[controller_id] = self._start("controller", controller_id, extra, env)
        return process

    def start_broker(self, broker_id: int, wait: bool = True, extra: Sequence[str] = (),
                     env: Mapping[str, str] | None = None) -> KctlProcess:
        process = self.brokers[broker_id] = self._start("broker", broker_id, ["--fetch-interval", "0.1", *extra], env)
        if wait:
            self.wait_until(lambda: broker_id in self.admin.get_all_brokers(), 60, f"broker {broker_id} to register",
                            watch=process)
        return process

    def wait_until(self, condition: Callable[[], T | None], timeout: float, what: str,
                   watch: KctlProcess | None = None) -> T:
        """:func:`wait_until`, failing early (with its log) if ``watch`` exits meanwhile."""

        def check() -> T | None:
            if watch is not None and not watch.running():
                raise AssertionError(f"{watch.name} exited ({watch.popen.returncode}):\n{watch.log()[-3000:]}")
            try:
                return condition()
            except StoreUnavailableError:  # the operator's session expired under the read: asked again
                return None

        try:
            return wait_until(check, timeout, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def logs(self, tail: int = 2500) -> str:
        return "\n".join(f"--- {p.name} (pid {p.pid}):\n{p.log()[-tail:]}" for p in self.processes)

    # --- Observation ------------------------------------------------------------------------------

    def active_controller(self) -> int | None:
        return self.admin.get_controller_id()

    def controller_epoch(self) -> int:
        found = self.admin.get_controller_epoch()
        return 0 if found is None else found[0]

    def assignment(self, topic: str) -> dict[int, ReplicaAssignment]:
        return dict(self.admin.get_topic_assignments([topic]).values[topic].partitions)

    def state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self.admin.get_partition_states([tp]).values.get(tp)

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition → leader for every partition of the topic with a state znode."""
        tps = [TopicPartition(topic, p) for p in self.assignment(topic)]
        states = self.admin.get_partition_states(tps).values
        return {tp.partition: s.leader_and_isr.leader for tp, s in states.items()}

    def wait_for_reassignments(self, targets: Mapping[TopicPartition, Sequence[int]], timeout: float) -> None:
        self.wait_until(lambda: all(self.reassignment_done(tp, t) for tp, t in targets.items()), timeout,
                        f"the reassignment of {', '.join(map(str, targets))} to complete")

    def reassignment_done(self, tp: TopicPartition, target: Sequence[int]) -> bool:
        """The partition has exactly ``target`` as replicas, its ISR within it, and no request is left."""
        current = self.assignment(tp.topic)[tp.partition]
        state = self.state(tp)
        return (
            current == ReplicaAssignment(tuple(target))
            and state is not None
            and state.leader_and_isr.leader in target
            and set(state.leader_and_isr.isr) <= set(target)
            and self.admin.get_partition_reassignments() is None
        )
