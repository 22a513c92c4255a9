"""The controller crash on kctl's side alone, setups taking turns: what the side-by-side benchmark
(``bench_vs_kafka.py``) measures as ``controller-crash``, without Kafka's brokers loading the machine.

Each *setup* is a ZooKeeper server with the benchmark's JVM options and warm-up, two ``kctl
controller`` processes (the standby running the sources of a ``PYTHONPATH`` of its own, like the
active one) and three ``kctl broker`` processes (``tests/support/process_harness.py``, as the
benchmark starts them), and a topic of ``--partitions`` partitions (RF 2, each broker the preferred
leader of a third). A crash is kill -9 of the active controller and of broker 3; the standby takes
over once its predecessor's session expires, with broker 3 gone. Per crash the script prints:

- ``crash``: from the standby's "successfully elected" line to the mtime of the last state znode
  taking a partition broker 3 led away from it (the benchmark's measure);
- ``ready``: from the same line to its "Ready to serve" line;
- ``ctl``: the standby's CPU from the kill until every state left broker 3 (a wait of its
  session's expiry included, the same for every setup); ``zk``: the server's over the same span;
- the load average.

Between crashes the old active controller comes back as the standby, broker 3 rejoins every ISR and
a preferred election gives it its partitions back. Setups are ``name=PYTHONPATH``::

    python benches/crash_cpu.py --rounds 4 before=/tmp/main/python after=python

Results as JSON lines on stdout (and appended to ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
import uuid
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kctl import admin  # noqa: E402
from kctl.model import TopicPartition  # noqa: E402
from kctl.testing.zookeeper import ZooKeeperEnsemble  # noqa: E402
from benches.bench_vs_kafka import TOPIC, ZOOKEEPER_JVM_OPTIONS, State, read_states, warm_up  # noqa: E402
from benches.creation_cpu import BROKERS, CONFIG, ticks  # noqa: E402
from tests.support.kafka_harness import KCTL_CONTROLLER, KCTL_CONTROLLER_CONFIG, KCTL_STANDBY  # noqa: E402
from tests.support.process_harness import ProcessCluster, wait_until  # noqa: E402

VICTIM = 3
ELECTED = re.compile(r"^\[([^]]+)\].*successfully elected as the controller", re.M)
READY = re.compile(r"^\[([^]]+)\].*Ready to serve as the new controller", re.M)


def logged_at(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


class Setup:
    """A ZooKeeper server, a kctl cluster of two controllers and three brokers on it, and the topic."""

    def __init__(self, name: str, pythonpath: str, partitions: int, directory: Path, stack: ExitStack) -> None:
        from kazoo.client import KazooClient  # type: ignore[import-untyped]

        self.name, self.directory, self.partitions = name, directory, partitions
        self.server = stack.enter_context(ZooKeeperEnsemble(1, jvm_options=list(ZOOKEEPER_JVM_OPTIONS)))
        warm_up(self.server.hosts, 20_000)
        self.chroot = f"/kctl-{uuid.uuid4().hex}"
        env = {"controller": {"PYTHONPATH": pythonpath}}
        self.cluster = stack.enter_context(
            ProcessCluster(self.server.hosts + self.chroot, directory, dict(CONFIG), env=env))
        self.zk = KazooClient(hosts=self.server.hosts, timeout=10.0)
        self.zk.start(timeout=30)
        stack.callback(self.zk.close)
        stack.callback(self.zk.stop)
        self.start_controller(KCTL_CONTROLLER)
        self.cluster.wait_until(lambda: self.cluster.active_controller() == KCTL_CONTROLLER, 120, "the controller")
        self.start_controller(KCTL_STANDBY)
        for broker in BROKERS:
            self.cluster.start_broker(broker)
        self.replicas = {p: [BROKERS[p % 3], BROKERS[(p + 1) % 3]] for p in range(partitions)}
        admin.create_topic(self.cluster.admin, TOPIC, broker_racks=dict.fromkeys(BROKERS), assignment=self.replicas,
                           topic_id=admin.generate_topic_id(random.Random()))
        self.wait_states("the topic's leaders", lambda s: all(state.leader > 0 for state in s.values()))

    def start_controller(self, controller: int) -> None:
        args = [a for k, v in KCTL_CONTROLLER_CONFIG.items() for a in ("--config", f"{k}={v}")]
        logs = self.directory / f"controller-{controller}"
        self.cluster.start_controller(controller, [*args, "--log-dir", str(logs), "--state-change-log-level", "TRACE"])

    def wait_states(self, what: str, condition: Any) -> dict[int, State]:
        def probe() -> dict[int, State] | None:
            found = read_states(self.zk, self.chroot, self.partitions)
            return found if len(found) == self.partitions and condition(found) else None

        found: dict[int, State] = wait_until(probe, 600, f"{self.name}: {what}", interval=1.0)
        return found

    def crash(self) -> dict[str, object]:
        led = [p for p, state in read_states(self.zk, self.chroot, self.partitions).items() if state.leader == VICTIM]
        active = self.cluster.active_controller()
        standby = KCTL_STANDBY if active == KCTL_CONTROLLER else KCTL_CONTROLLER
        log = self.directory / f"controller-{standby}" / "controller.log"
        offset = log.stat().st_size
        ctl_pid, zk_pid = self.cluster.controllers[standby].pid, self.server.servers[0].pid
        ctl0, zk0 = ticks(f"/proc/{ctl_pid}/stat"), ticks(f"/proc/{zk_pid}/stat")
        self.cluster.controllers[active].kill()
        self.cluster.brokers[VICTIM].kill()

        def lines() -> str:
            with log.open() as file:
                file.seek(offset)
                return file.read()

        ready = wait_until(lambda: READY.search(lines()), 120, f"{self.name}: the standby's Ready line")
        elected = ELECTED.search(lines())
        assert elected is not None
        after = self.wait_states("broker 3 to lead nothing", lambda s: all(st.leader != VICTIM for st in s.values()))
        hz = os.sysconf("SC_CLK_TCK")
        found = {
            "setup": self.name, "crash": max(after[p].mtime for p in led) - logged_at(elected.group(1)),
            "ready": logged_at(ready.group(1)) - logged_at(elected.group(1)), "led": len(led),
            "ctl": (ticks(f"/proc/{ctl_pid}/stat") - ctl0) / hz, "zk": (ticks(f"/proc/{zk_pid}/stat") - zk0) / hz,
            "load": os.getloadavg()[0],
        }
        self.restore(active)
        return found

    def restore(self, controller: int) -> None:
        """The dead controller back as the standby, broker 3 back in every ISR, preferred leaders."""
        self.start_controller(controller)
        self.cluster.wait_until(lambda: VICTIM not in self.cluster.admin.get_all_brokers(), 120, "broker 3 to expire")
        self.cluster.start_broker(VICTIM)
        self.wait_states("broker 3 in every ISR", lambda s: all(
            VICTIM in s[p].isr for p, replicas in self.replicas.items() if VICTIM in replicas))
        moved = [TopicPartition(TOPIC, p) for p, state in read_states(self.zk, self.chroot, self.partitions).items()
                 if state.leader != self.replicas[p][0]]
        admin.request_preferred_replica_election(self.cluster.admin, moved)
        self.wait_states("the preferred leaders", lambda s: all(st.leader == self.replicas[p][0] for p, st in s.items()))
        time.sleep(5)  # the brokers' and controllers' work after the election


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("setups", nargs="+", help="name=PYTHONPATH")
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="append each crash's figures to this file")
    args = parser.parse_args()
    directory = Path(mkdtemp(prefix="kctl-crash-cpu-"))
    with ExitStack() as stack:
        setups = []
        for spec in args.setups:
            name, _, path = spec.partition("=")
            (directory / name).mkdir()
            setups.append(Setup(name, str(Path(path).resolve()), args.partitions, directory / name, stack))
        for round_ in range(args.rounds):
            for setup in setups if round_ % 2 == 0 else setups[::-1]:
                found = setup.crash()
                found["round"] = round_
                print(json.dumps(found), flush=True)
                if args.json is not None:
                    with args.json.open("a") as out:
                        out.write(json.dumps(found) + "\n")


if __name__ == "__main__":
    main()
