"""Shared configuration of kctl's pytest-benchmark suites (STYLE §4, convention 14).

- ``bench_*.py`` files are collected here, so ``pytest benches`` works without touching the test
  suite's ``python_files``.
- The size of the simulated clusters comes from ``--kctl-bench-scale`` or ``KCTL_BENCH_SCALE``:
  ``smoke`` (the default, what CI's ``pytest benches --benchmark-disable`` runs), ``full`` (the
  sizes of DESIGN §8, for ``scripts/bench``) or ``<brokers>x<partitions>`` such as ``20x10000``.
- ``bench_vs_kafka.py`` and ``bench_kafka_brokers.py`` (marker ``kafka_bench``) start real Kafka
  brokers and run for most of an hour: they are left out unless ``-m`` names the marker
  (``scripts/kafka-diff --bench`` and ``--bench-broker-failure`` do).
- Saved results carry the kctl version and the engine's build profile, so runs of a debug build
  are never compared with release runs by mistake.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import kctl
from kctl import _engine
from kctl.context import ENGINES


@dataclass(frozen=True)
class Scale:
    """How big the simulated cluster of a benchmark is."""

    name: str
    brokers: int
    partitions: int


SCALES = {
    "smoke": Scale("smoke", brokers=10, partitions=2_000),
    "full": Scale("full", brokers=100, partitions=100_000),
}
_CUSTOM_SCALE = re.compile(r"(\d+)x(\d+)")


def parse_scale(text: str) -> Scale:
    """``smoke``, ``full`` or ``<brokers>x<partitions>``."""
    if text in SCALES:
        return SCALES[text]
    match = _CUSTOM_SCALE.fullmatch(text)
    if match is None or int(match[1]) < 1 or int(match[2]) < 1:
        raise pytest.UsageError(
            f"invalid benchmark scale {text!r}: expected {', '.join(SCALES)} or <brokers>x<partitions> (e.g. 20x10000)"
        )
    return Scale(text, int(match[1]), int(match[2]))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kctl benchmarks")
    group.addoption(
        "--kctl-bench-scale",
        default=None,
        help="cluster size: smoke (default, 10 brokers / 2K partitions), full (100 brokers / 100K partitions) "
        "or <brokers>x<partitions>; overrides KCTL_BENCH_SCALE",
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """Collect ``bench_*.py`` unless pytest collects it already (named on the command line, or
    matched by a ``python_files`` pattern)."""
    if file_path.suffix != ".py" or not file_path.name.startswith("bench_"):
        return None
    patterns = parent.config.getini("python_files")
    if parent.session.isinitpath(file_path) or any(fnmatch.fnmatch(file_path.name, p) for p in patterns):
        return None
    return pytest.Module.from_parent(parent, path=file_path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``kafka_bench`` benchmarks unless ``-m`` names them."""
    if "kafka_bench" in (config.getoption("-m") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("kafka_bench") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("kafka_bench")])
        items[:] = kept


def scale_of(config: pytest.Config) -> Scale:
    """The scale this run asked for (option, else ``KCTL_BENCH_SCALE``, else smoke)."""
    option = config.getoption("--kctl-bench-scale")
    return parse_scale(option if option is not None else os.environ.get("KCTL_BENCH_SCALE", "smoke"))


@pytest.fixture(scope="session")
def bench_scale(pytestconfig: pytest.Config) -> Scale:
    """The cluster size every scaled benchmark uses in this run."""
    return scale_of(pytestconfig)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Every engine this build provides, one benchmark each (the ``engine`` axis of the results)."""
    return str(request.param)


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    machine_info["kctl_version"] = kctl.__version__
    machine_info["kctl_engine_build_profile"] = _engine.build_profile
