"""Benchmark fleets: many seeded scenarios on simulated clusters, run on Spark (``kctl fleet``).

A grid (:mod:`kctl.bench.grid`) describes a family of random scenarios and the variants compared
on them; :mod:`kctl.bench.scenarios` draws one ``kctl sim`` scenario per seed;
:mod:`kctl.bench.runner` plays it and measures one row; :mod:`kctl.bench.job` is the PySpark job
that runs the missing (seed, variant) pairs of a grid, seed ranges per task, into a parquet
dataset (:mod:`kctl.bench.dataset`), and the HTML report (:mod:`kctl.bench.report`) computed from
it with Spark SQL (:mod:`kctl.bench.queries`). Nothing here imports pyspark at module level: executors import kctl
inside their tasks, and the rest of kctl never needs Spark.
"""

from kctl.bench.grid import Grid, GridError, Variant, load_grid, parse_grid
from kctl.bench.runner import COLUMNS, run_one
from kctl.bench.scenarios import generate

__all__ = ["COLUMNS", "Grid", "GridError", "Variant", "generate", "load_grid", "parse_grid", "run_one"]
