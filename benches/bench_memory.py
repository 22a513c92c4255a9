"""The whole process's peak memory at scale, next to the time (issue #16: ≤ 6 GiB at 10M partitions).

Group ``memory:cluster`` builds ``bench_engine.py``'s cluster (100 brokers, RF 3, 1,000 partitions
per topic, the memory store, the rust engine), starts its controller and fails a broker, in a
process of its own per size: the peak resident set (``ru_maxrss``) only ever grows, so one
process per size is the only way to tell sizes apart. ``extra_info`` records, per phase (the store
built, the controller ready, the broker failed), the process's peak RSS and its CPU time
(``time.process_time``, which a loaded machine inflates far less than wall time), plus the
engine's heap bytes per partition; the benchmark's own time is the child process's wall time.

The broker failure is timed ``FAILURES`` times after the one failover, the cluster healed between
them as ``bench_engine.py``'s rounds do (untimed): ``broker_failure_cpu_s`` is their median (issue
#16's 10M target is a median), ``broker_failure_rounds_cpu_s`` each of them, the first one first;
``peak_rss_mib`` is the peak after the first failure.

Sizes: ``KCTL_BENCH_MEMORY_PARTITIONS`` (comma-separated, e.g. ``1000000,10000000``), else 1M and
10M at the ``full`` scale (10M takes about 6 GiB and several minutes) and 10K under ``smoke``.
Run ``python benches/bench_memory.py <partitions>`` to get one size's figures as JSON.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import scale_of

HERE = Path(__file__).resolve().parent
TIMEOUT = 3 * 3600
"""Seconds a size may take (10M partitions take minutes on a quiet machine)."""
FAILURES = 3
"""Broker failures timed after the failover."""


def sizes(config: pytest.Config) -> list[int]:
    text = os.environ.get("KCTL_BENCH_MEMORY_PARTITIONS")
    if text:
        return [int(n) for n in text.split(",")]
    return [1_000_000, 10_000_000] if scale_of(config).name == "full" else [10_000]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "partitions" in metafunc.fixturenames:
        chosen = sizes(metafunc.config)
        metafunc.parametrize("partitions", chosen, ids=[str(n) for n in chosen])


def peak_rss_mib() -> float:
    """The process's peak resident set so far (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(partitions: int) -> dict[str, Any]:
    """Build, start and fail a broker in this process; its peak RSS and CPU time after each phase."""
    from bench_engine import BROKERS, Cluster, check_failed

    figures: dict[str, Any] = {"partitions": partitions, "brokers": BROKERS, "start_peak_rss_mib": peak_rss_mib()}
    cluster = Cluster("rust", partitions)
    started = time.process_time()
    cluster.build()  # the store, then the controller's election and failover
    figures.update(build_cpu_s=time.process_time() - started, build_peak_rss_mib=peak_rss_mib())
    cluster.check_healthy()
    engine = cluster.active().context.native  # type: ignore[attr-defined]
    figures["engine_heap_bytes_per_partition"] = engine.heap_bytes() / partitions
    failures: list[float] = []
    for _ in range(FAILURES):
        if failures:
            cluster.heal()
        broker = cluster.take_down()
        started = time.process_time()
        cluster.sessions[broker].expire_session()
        cluster.drain()
        failures.append(time.process_time() - started)
        figures.setdefault("peak_rss_mib", peak_rss_mib())
        check_failed(cluster, broker)
    figures.update(broker_failure_cpu_s=statistics.median(failures), broker_failure_rounds_cpu_s=failures)
    figures["peak_rss_bytes_per_partition"] = figures["peak_rss_mib"] * 2**20 / partitions
    return figures


@pytest.mark.benchmark(group="memory:cluster")
def test_peak_memory(benchmark: Any, partitions: int) -> None:
    """One child process per size; what it measured goes in ``extra_info``."""
    results: list[dict[str, Any]] = []

    def child() -> None:
        done = subprocess.run(
            [sys.executable, str(HERE / "bench_memory.py"), str(partitions)],
            capture_output=True, text=True, timeout=TIMEOUT, cwd=HERE, check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        results.append(json.loads(done.stdout.splitlines()[-1]))

    benchmark.pedantic(child, rounds=1, iterations=1)
    figures = results[-1]
    benchmark.extra_info.update(figures, engine="rust")
    assert figures["partitions"] == partitions
    assert figures["start_peak_rss_mib"] < figures["build_peak_rss_mib"] <= figures["peak_rss_mib"]


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    print(json.dumps(measure(int(sys.argv[1]))))
