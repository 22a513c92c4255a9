"""CPU per topic creation on kctl's side alone: the controller process and the ZooKeeper server.

The side-by-side benchmark (``bench_vs_kafka.py``) measures a creation as wall time on a loaded
machine; this script measures what it costs, to compare a change back to back: each *setup* is a
ZooKeeper server (its JVM options) with a ``kctl controller`` and three ``kctl broker`` processes
(``tests/support/process_harness.py``, as the side-by-side benchmark starts them: DEBUG, the
state-change log at TRACE in Kafka's files), the controller running the sources of a
``PYTHONPATH`` of its own. The setups take turns creating a topic of ``--partitions`` partitions
(RF 2, explicit assignment, a topic id), and for each creation the script prints:

- ``zk``: the server's CPU (user + system, ``/proc``) from the topic write to the controller's
  LeaderAndIsr line, and the threads that used it (``/proc/PID/task``: the request processors,
  the network threads, the JIT compilers, the collector);
- ``ctl``: the controller process's CPU over the same span;
- ``first`` / ``last``: the ctime of partition 0's and of the last partition's state znode after
  the topic znode's ctime (the states are written in partition order);
- the load average.

Setups are ``name=OPTIONS`` (JVM options of the server, space-separated, ``-`` for none) with an
optional ``@PYTHONPATH`` for the controller::

    python benches/creation_cpu.py --rounds 3 'fixture=-' 'shipped=-Xms512m -Xmx512m -XX:+UseG1GC'
    python benches/creation_cpu.py 'main=-@/work/main/python' 'branch=-@python'

``--warm-up N`` creations per setup come first, unmeasured; ``--warm-up-server PARTITIONS`` warms
each server first as the side-by-side benchmark does (``bench_vs_kafka.warm_up``: a topic of that
many partitions written in each controller's shape). Results as JSON lines
on stdout (and appended to ``--json``).
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
from collections import Counter
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from tempfile import mkdtemp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kctl import admin  # noqa: E402
from kctl.testing.zookeeper import ZooKeeperEnsemble  # noqa: E402
from benches.bench_vs_kafka import warm_up  # noqa: E402
from tests.support.kafka_harness import KCTL_CONTROLLER, KCTL_CONTROLLER_CONFIG  # noqa: E402
from tests.support.process_harness import ProcessCluster, wait_until  # noqa: E402

BROKERS = (1, 2, 3)
CONFIG = {"auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": "3600000"}
REQUESTS = re.compile(rb"Sending LeaderAndIsr request to broker \d+ with (\d+) become-leader")
THREAD_GROUPS = (
    ("compiler", re.compile(r"C\d CompilerThre|Compiler")),
    ("gc", re.compile(r"GC Thread|G1 |VM Thread|GC ")),
    ("prep", re.compile(r"ProcessThread")),
    ("sync", re.compile(r"SyncThread")),
    ("net", re.compile(r"NIO")),
)


def ticks(path: str) -> int:
    fields = Path(path).read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def threads(pid: int) -> Counter[str]:
    """CPU ticks of the process's threads, by group (:data:`THREAD_GROUPS`, else ``other``)."""
    found: Counter[str] = Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            used = ticks(str(task / "stat"))
        except OSError:
            continue
        group = next((g for g, pattern in THREAD_GROUPS if pattern.search(name)), "other")
        found[group] += used
    return found


class RequestLines:
    """The LeaderAndIsr lines a state-change log gets after ``offset``: their partitions, and when
    the last one was logged (each look reads only what was added)."""

    def __init__(self, log: Path, offset: int) -> None:
        self.log, self.offset = log, offset
        self.rest, self.sent, self.last = b"", 0, ""

    def partitions(self) -> int:
        with self.log.open("rb") as file:
            file.seek(self.offset)
            chunk = file.read()
        self.offset += len(chunk)
        lines, _, self.rest = (self.rest + chunk).rpartition(b"\n")
        for match in REQUESTS.finditer(lines):
            self.sent += int(match.group(1))
            start = lines.rfind(b"\n", 0, match.start()) + 1
            self.last = lines[start + 1 : start + 24].decode()  # [yyyy-mm-dd hh:mm:ss,SSS]
        return self.sent


class Setup:
    """A ZooKeeper server and a kctl cluster on it, the controller with its own sources."""

    def __init__(self, name: str, jvm_options: list[str], pythonpath: str, directory: Path, stack: ExitStack) -> None:
        self.name = name
        self.server = stack.enter_context(ZooKeeperEnsemble(1, jvm_options=jvm_options))
        chroot = f"/kctl-{uuid.uuid4().hex}"
        env = {"controller": {"PYTHONPATH": pythonpath}}
        self.cluster = stack.enter_context(ProcessCluster(self.server.hosts + chroot, directory, dict(CONFIG), env=env))
        logs = directory / "logs"
        args = [a for k, v in KCTL_CONTROLLER_CONFIG.items() for a in ("--config", f"{k}={v}")]
        self.controller = self.cluster.start_controller(
            KCTL_CONTROLLER, [*args, "--log-dir", str(logs), "--state-change-log-level", "TRACE"])
        self.cluster.wait_until(lambda: self.cluster.active_controller() == KCTL_CONTROLLER, 120, "the controller")
        for broker in BROKERS:
            self.cluster.start_broker(broker)
        self.state_change_log = logs / "state-change.log"
        self.topics = 0

    def create(self, partitions: int) -> dict[str, object]:
        topic = f"t{self.topics}"
        self.topics += 1
        assignment = {p: [BROKERS[p % 3], BROKERS[(p + 1) % 3]] for p in range(partitions)}
        offset = self.state_change_log.stat().st_size if self.state_change_log.exists() else 0
        zk_pid, ctl_pid = self.server.servers[0].pid, self.controller.pid
        zk_threads, zk0, ctl0 = threads(zk_pid), ticks(f"/proc/{zk_pid}/stat"), ticks(f"/proc/{ctl_pid}/stat")
        admin.create_topic(self.cluster.admin, topic, broker_racks=dict.fromkeys(BROKERS), assignment=assignment,
                           topic_id=admin.generate_topic_id(random.Random()))

        tail = RequestLines(self.state_change_log, offset)
        wait_until(lambda: tail.partitions() >= partitions, 300, f"{self.name}: LeaderAndIsr requests for {topic}", interval=0.1)
        hz = os.sysconf("SC_CLK_TCK")
        zk = (ticks(f"/proc/{zk_pid}/stat") - zk0) / hz
        ctl = (ticks(f"/proc/{ctl_pid}/stat") - ctl0) / hz
        by_thread = {g: round(t / hz, 2) for g, t in (threads(zk_pid) - zk_threads).items()}
        sent_at = datetime.strptime(tail.last, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        return {"setup": self.name, "zk": zk, "ctl": ctl, "zk_threads": by_thread,
                **self.times(topic, partitions, sent_at), "load": os.getloadavg()[0]}

    def times(self, topic: str, partitions: int, sent_at: float) -> dict[str, float]:
        """The first and the last state's ctime, and the LeaderAndIsr line, after the topic znode's ctime."""
        from kazoo.client import KazooClient  # type: ignore[import-untyped]

        zk = KazooClient(hosts=self.cluster.zk, timeout=10.0)
        zk.start(timeout=30)
        try:
            created = zk.exists(f"/brokers/topics/{topic}").ctime
            first = zk.exists(f"/brokers/topics/{topic}/partitions/0/state").ctime
            last = zk.exists(f"/brokers/topics/{topic}/partitions/{partitions - 1}/state").ctime
        finally:
            zk.stop()
            zk.close()
        return {"first": (first - created) / 1e3, "last": (last - created) / 1e3, "sent": sent_at - created / 1e3,
                "created": created / 1e3}


def quiet(setups: list[Setup], window: float = 2.0, busy: float = 0.1, timeout: float = 120.0) -> None:
    """Wait until no process of any setup uses more than ``busy`` of a core over ``window``."""
    pids = [p.pid for s in setups for p in s.cluster.processes] + [s.server.servers[0].pid for s in setups]
    deadline = time.monotonic() + timeout
    hz = os.sysconf("SC_CLK_TCK")
    while time.monotonic() < deadline:
        before = {pid: ticks(f"/proc/{pid}/stat") for pid in pids}
        time.sleep(window)
        if all((ticks(f"/proc/{pid}/stat") - t) / hz < busy * window for pid, t in before.items()):
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("setups", nargs="+", help="name=JVM OPTIONS[@PYTHONPATH]")
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warm-up", type=int, default=0, help="creations per setup before the measured ones")
    parser.add_argument("--warm-up-server", type=int, default=0, metavar="PARTITIONS",
                        help="warm each server up first as the side-by-side benchmark does (bench_vs_kafka.warm_up)")
    parser.add_argument("--json", type=Path, help="append each creation's figures to this file")
    args = parser.parse_args()
    directory = Path(mkdtemp(prefix="kctl-creation-cpu-"))
    with ExitStack() as stack:
        setups = []
        for spec in args.setups:
            name, _, rest = spec.partition("=")
            options, _, path = rest.partition("@")
            pythonpath = str(Path(path).resolve()) if path else os.environ.get("PYTHONPATH", "")
            (directory / name).mkdir()
            setups.append(Setup(name, [] if options.strip() in ("", "-") else options.split(), pythonpath,
                                directory / name, stack))
            if args.warm_up_server:
                warm_up(setups[-1].server.hosts, args.warm_up_server)
        for round_ in range(-args.warm_up, args.rounds):
            order = setups if round_ % 2 == 0 else setups[::-1]
            for setup in order:
                quiet(setups)
                found = setup.create(args.partitions)
                found["round"] = round_
                print(json.dumps(found), flush=True)
                if args.json is not None and round_ >= 0:
                    with args.json.open("a") as out:
                        out.write(json.dumps(found) + "\n")


if __name__ == "__main__":
    main()
