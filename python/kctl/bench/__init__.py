"""Benchmark fleets: many seeded scenarios on simulated clusters, run on Spark (``kctl fleet``).

A grid (:mod:`kctl.bench.grid`) describes a family of random scenarios and the variants compared
on them; :mod:`kctl.bench.scenarios` draws one ``kctl sim`` scenario per seed;
:mod:`kctl.bench.runner` plays it and measures one row; :mod:`kctl.bench.job` is the PySpark job
that runs a whole grid, one seed per task, and writes parquet and an HTML report
(:mod:`kctl.bench.report`). Nothing here imports pyspark at module level: executors import kctl
inside their tasks, and the rest of kctl never needs Spark.
"""

from kctl.bench.grid import Grid, GridError, Variant, load_grid, parse_grid
from kctl.bench.runner import COLUMNS, run_one
from kctl.bench.scenarios import generate

__all__ = ["COLUMNS", "Grid", "GridError", "Variant", "generate", "load_grid", "parse_grid", "run_one"]
