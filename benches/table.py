"""Print a pytest-benchmark JSON file as kctl's engine table: per operation and size, the median
on each engine, the reference/rust ratio and the rust engine's heap bytes per partition.

    python benches/table.py benches/results/<run>.json

Benchmarks of one operation with several leader selectors taking turns within each round (their
times in ``extra_info["selector_rounds"]``) get a table of their own.
The side-by-side benchmark against Kafka (``extra_info["vs_kafka"]``) gets a table of its own:
per measure and size, Kafka's median, kctl's and how many times faster kctl was.
Benchmarks without an ``engine``/``partitions`` in their ``extra_info`` are listed below the
tables by group and name, with their medians.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import Any


def seconds(value: float) -> str:
    """A duration with a unit that keeps 3–4 significant digits."""
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} µs"


def size(partitions: int) -> str:
    for unit, scale in (("M", 1_000_000), ("K", 1_000)):
        if partitions >= scale and partitions % scale == 0:
            return f"{partitions // scale}{unit}"
    return str(partitions)


def engine_table(benchmarks: list[dict[str, Any]]) -> list[str]:
    rows: dict[tuple[str, int], dict[str, dict[str, Any]]] = defaultdict(dict)
    for b in benchmarks:
        info = b.get("extra_info", {})
        if "engine" in info and "partitions" in info and "selector_rounds" not in info and str(b.get("group", "")).startswith("engine:"):
            rows[(b["group"].removeprefix("engine:"), int(info["partitions"]))][info["engine"]] = b
    if not rows:
        return []
    lines = ["| operation | partitions | rust (median) | reference (median) | reference / rust | rust bytes/partition |",
             "|---|---:|---:|---:|---:|---:|"]
    for (operation, partitions), by_engine in sorted(rows.items()):
        rust, reference = by_engine.get("rust"), by_engine.get("reference")
        cell = lambda b: seconds(b["stats"]["median"]) if b else "–"  # noqa: E731
        ratio = f"{reference['stats']['median'] / rust['stats']['median']:.0f}×" if rust and reference else "–"
        heap = rust["extra_info"].get("heap_bytes_per_partition") if rust else None
        lines.append(f"| {operation} | {size(partitions)} | {cell(rust)} | {cell(reference)} | {ratio} | "
                     f"{'–' if heap is None else f'{heap:.0f}'} |")
    return lines


def selector_table(benchmarks: list[dict[str, Any]]) -> list[str]:
    """Benchmarks timing one operation with several leader selectors in turn within each round
    (``extra_info["selector_rounds"]``: each selector's time per round): each selector's median and
    minimum, and the median over rounds of its time over the built-in selector's (``kafka``) in the
    same round, which other work on the machine skews least."""
    lines = []
    for b in benchmarks:
        info = b.get("extra_info", {})
        by_round: dict[str, list[float]] = info.get("selector_rounds", {})
        if not by_round:
            continue
        lines += ["", f"{b['group'].removeprefix('engine:')}, {info['engine']} engine, {size(int(info['partitions']))} "
                  f"partitions, {b['stats']['rounds']} rounds:", "",
                  "| selector | median | min | against kafka (median of rounds) |", "|---|---:|---:|---:|"]
        kafka = by_round.get("kafka")
        for selector, times in by_round.items():
            paired = f"{median([t / k for t, k in zip(times, kafka)]):.2f}×" if kafka else "–"
            lines.append(f"| {selector} | {seconds(median(times))} | {seconds(min(times))} | {paired} |")
    return lines


def kafka_table(benchmarks: list[dict[str, Any]]) -> list[str]:
    """Per measure and size of ``bench_vs_kafka.py``: both medians and Kafka's over kctl's."""
    rows = sorted(((measure, int(b["extra_info"]["partitions"])), found)
                  for b in benchmarks if b.get("extra_info", {}).get("vs_kafka")
                  for measure, found in b["extra_info"]["medians"].items())
    if not rows:
        return []
    lines = ["", "| measure | partitions | Kafka 3.9.1 (median) | kctl (median) | Kafka / kctl |", "|---|---:|---:|---:|---:|"]
    for (measure, partitions), found in rows:
        lines.append(f"| {measure} | {size(partitions)} | {seconds(found['kafka'])} | {seconds(found['kctl'])} | "
                     f"{found['kafka_over_kctl']:.1f}× |")
    return lines


def other_rows(benchmarks: list[dict[str, Any]]) -> list[str]:
    lines = []
    for b in benchmarks:
        if not str(b.get("group", "")).startswith("engine:"):
            lines.append(f"{b.get('group') or '-'}  {b['name']}: median {seconds(b['stats']['median'])}, "
                         f"{b['stats']['rounds']} rounds")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    data = json.loads(Path(argv[0]).read_text())
    machine = data.get("machine_info", {})
    print(f"kctl {machine.get('kctl_version', '?')}, engine build {machine.get('kctl_engine_build_profile', '?')}, "
          f"{machine.get('cpu', {}).get('brand_raw', machine.get('processor', '?'))}, {data.get('datetime', '')}")
    if machine.get("kctl_engine_build_profile") not in (None, "release"):
        print("warning: not a release build of the extension; numbers are not comparable", file=sys.stderr)
    benchmarks = data["benchmarks"]
    for line in engine_table(benchmarks) + selector_table(benchmarks) + kafka_table(benchmarks) + [""] + other_rows(benchmarks):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
