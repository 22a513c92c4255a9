"""kctl.testing.zookeeper's server options: a session's expiry in the server's log, stamped as log4j
stamps Kafka's lines, so that benches/bench_kafka_brokers.py can time a broker failure from it, and
JVM options of the caller's (a heap for millions of znodes)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import datetime

from kctl.testing.zookeeper import ZooKeeperEnsemble, require_zookeeper

SESSION = "import kazoo.client, time; c = kazoo.client.KazooClient(hosts={hosts!r}, timeout=2.0); c.start(); " \
          "print(c.client_id[0], flush=True); time.sleep(600)"


def test_an_expired_session_is_logged_with_a_log4j_timestamp() -> None:
    with ZooKeeperEnsemble(1, installation=require_zookeeper(), log_sessions=True) as zookeeper:
        client = subprocess.Popen([sys.executable, "-c", SESSION.format(hosts=zookeeper.hosts)], stdout=subprocess.PIPE,
                                  text=True)
        with client:
            try:
                assert client.stdout is not None
                session = int(client.stdout.readline())
            finally:
                client.kill()  # its session expires, as a kill -9'd broker's does
        killed = time.time()
        line = re.compile(rf"^\[(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d,\d{{3}})\] .*Expiring session 0x{session:x}, ",
                          re.MULTILINE)
        deadline = time.monotonic() + 60
        while not (found := line.search(zookeeper.servers[0].log_path.read_text())):
            assert time.monotonic() < deadline, zookeeper.servers[0].log_tail()
            time.sleep(0.2)
        expired = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        assert killed - 1 < expired < killed + 30  # the server's clock, as the log's reader parses it



def test_jvm_options_come_after_the_defaults_so_a_larger_heap_wins() -> None:
    with ZooKeeperEnsemble(1, installation=require_zookeeper(), jvm_options=["-Xmx2g"]) as zookeeper:
        pid = zookeeper.servers[0].pid
        assert pid is not None
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            arguments = cmdline.read().decode().split("\0")
        assert arguments.index("-Xmx2g") > arguments.index("-Xmx1g")
        assert zookeeper.servers[0].mode() == "standalone"


def test_a_collector_in_jvm_options_replaces_the_serial_one() -> None:
    """The JVM refuses two collectors: G1 (as Kafka's zookeeper-server-start.sh runs ZooKeeper)
    must replace the fixture's serial collector, not come after it."""
    with ZooKeeperEnsemble(1, installation=require_zookeeper(), jvm_options=["-XX:+UseG1GC"]) as zookeeper:
        pid = zookeeper.servers[0].pid
        assert pid is not None
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            arguments = cmdline.read().decode().split("\0")
        assert "-XX:+UseG1GC" in arguments and "-XX:+UseSerialGC" not in arguments
        assert zookeeper.servers[0].mode() == "standalone"
