"""CPU time of one simulated rolling restart, outside pytest: ``bench_cluster.py``'s cluster and
steps (a started cluster on three racks, ten topics of RF 3 created, the collector frozen after
the setup), the roll timed with ``time.process_time``, and the process's peak RSS. One process per
run, so that runs of two trees can be alternated back to back and profiled
(``py-spy record -- python benches/roll_cpu.py``)::

    python benches/roll_cpu.py                 # 100 brokers, 100K partitions (the issue's size)
    python benches/roll_cpu.py 20 20000
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cluster import create_topics, new_cluster, rolling_restart, topic_sizes  # noqa: E402
from conftest import Scale  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("brokers", type=int, nargs="?", default=100)
    parser.add_argument("partitions", type=int, nargs="?", default=100_000)
    parser.add_argument("--engine", default="rust", choices=("rust", "reference"))
    args = parser.parse_args()
    cluster = create_topics(new_cluster(args.engine, Scale("cli", args.brokers, args.partitions)),
                            topic_sizes(args.partitions))
    gc.collect()
    gc.freeze()
    started = time.process_time()
    rolling_restart(cluster)
    cpu = time.process_time() - started
    cluster.stop()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"roll of {args.brokers} brokers x {args.partitions} partitions ({args.engine}): "
          f"{cpu:.2f} s of CPU, peak RSS {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
