"""The fleet's dataset: runs as parquet partitioned by grid and variant, at any Hadoop path.

A fleet's output ``OUT`` (a local path, ``file://``, ``s3a://``, ``hdfs://`` …) holds the dataset
``OUT/runs/grid=NAME/variant=LABEL/part-*.parquet``, written by the executors through Spark's
DataFrame writer (append, one commit per batch of seeds), next to the small files the driver
writes through the same Hadoop file system (the report, ``meta.json``, the grid).

Why grid and variant: every report query groups or joins by variant (per-variant statistics,
each variant against the first, seed by seed) and filters by grid, so both prune directories; the
resume check reads only the ``seed`` column under them. A grid extended with seeds appends files
to the same directories; one extended with a variant adds a directory. Seed ranges would split
files by what changes between runs instead of by what the report compares.

Every row is checked against :data:`SCHEMA` on the executor before Spark sees it (a misspelt or
mistyped column fails the job with :class:`RowSchemaError` naming the column), and read back with
the same explicit schema, so a partition value such as ``variant=1`` stays a string.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kctl.bench.runner import COLUMNS
from kctl.errors import KctlError
from kctl.limits import MAX_FILE_BYTES, DocumentError

RUNS = "runs"
"""The dataset's directory under a fleet's output."""
PARTITION_COLUMNS = ("grid", "variant")
COLUMN_TYPES: dict[str, str] = {**COLUMNS, "run_id": "string", "kctl_version": "string"}
"""Every column of the dataset: a row's :data:`~kctl.bench.runner.COLUMNS`, then which ``kctl
fleet run`` wrote it and with which kctl."""
REQUIRED = frozenset({"grid", "seed", "variant", "selector", "engine", "run_id", "kctl_version"})
"""Columns that are never null."""
STALE_COMMIT = "_temporary"
"""Where Hadoop's committer stages a job's files; one left by an interrupted fleet would be
committed by the next job, so the writer removes it first (one writer per dataset at a time)."""


class RowSchemaError(KctlError):
    """A row that does not match the dataset's schema: the message names the column."""


class FleetPathError(KctlError):
    """A fleet output that cannot be read as one (no dataset, an unreadable file)."""


def _spark_type(kind: str) -> Any:
    from pyspark.sql import types

    if kind.startswith("array<"):
        return types.ArrayType(_spark_type(kind[6:-1]), containsNull=False)
    return {"string": types.StringType(), "bigint": types.LongType(), "double": types.DoubleType()}[kind]


def schema() -> Any:
    """The dataset's Spark schema (:data:`COLUMN_TYPES`, non-null where :data:`REQUIRED`)."""
    from pyspark.sql import types

    return types.StructType([types.StructField(name, _spark_type(kind), name not in REQUIRED)
                             for name, kind in COLUMN_TYPES.items()])


def _check(kind: str, value: Any) -> bool:
    if kind.startswith("array<"):
        return isinstance(value, (list, tuple)) and all(_check(kind[6:-1], v) for v in value)
    if isinstance(value, bool):
        return False
    accepted: dict[str, type | tuple[type, ...]] = {"string": str, "bigint": int, "double": (int, float)}
    return isinstance(value, accepted[kind])


def record(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """``row`` as a tuple in :data:`COLUMN_TYPES` order, or :class:`RowSchemaError` naming the
    first column that is missing, unknown, null where it may not be, or of the wrong type."""
    where = f"row of seed {row.get('seed')!r}, variant {row.get('variant')!r}"
    unknown = sorted(set(row) - set(COLUMN_TYPES))
    if unknown:
        raise RowSchemaError(f"{where}: unknown column {unknown[0]!r}")
    values = []
    for name, kind in COLUMN_TYPES.items():
        if name not in row:
            raise RowSchemaError(f"{where}: column {name!r} is missing")
        value = row[name]
        if value is None:
            if name in REQUIRED:
                raise RowSchemaError(f"{where}: column {name!r} ({kind}) is null")
        elif not _check(kind, value):
            raise RowSchemaError(f"{where}: column {name!r} is {kind}, not {type(value).__name__} {value!r:.60}")
        elif kind == "double":
            value = float(value)
        elif kind == "array<double>":
            value = [float(v) for v in value]
        values.append(value)
    return tuple(values)


def uri(location: str | Path) -> str:
    """A Hadoop path for ``location``: a URI as given, a plain path as an absolute ``file:`` URI."""
    text = str(location)
    if "://" in text or text.startswith("file:"):
        return text.rstrip("/")
    return Path(text).resolve().as_uri()


def runs_uri(out: str | Path) -> str:
    return f"{uri(out)}/{RUNS}"


class HadoopFiles:
    """The driver's small files (report, meta, grid) on the Hadoop file system of a fleet's output,
    through the session's JVM: the same paths the executors write the dataset to."""

    def __init__(self, spark: Any) -> None:
        self.jvm = spark.sparkContext._jvm
        self.conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, location: str) -> tuple[Any, Any]:
        path = self.jvm.org.apache.hadoop.fs.Path(location)
        return path.getFileSystem(self.conf), path

    def exists(self, location: str) -> bool:
        fs, path = self._fs(location)
        return bool(fs.exists(path))

    def remove(self, location: str) -> None:
        fs, path = self._fs(location)
        fs.delete(path, True)

    def write(self, location: str, text: str) -> None:
        fs, path = self._fs(location)
        fs.setWriteChecksum(False)  # no .crc files beside report.html on a local disk
        stream = fs.create(path, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def read(self, location: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
        """A file's bytes; :class:`FleetPathError` when absent, :class:`DocumentError` when larger
        than ``max_bytes`` (not read)."""
        fs, path = self._fs(location)
        if not fs.exists(path):
            raise FleetPathError(f"{location}: no such file")
        if fs.getFileStatus(path).getLen() > max_bytes:
            raise DocumentError(f"{location}: larger than the limit of {max_bytes} bytes")
        stream = fs.open(path)
        try:
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()


def write_files(spark: Any, out: str | Path, files: Mapping[str, str]) -> list[str]:
    """Write ``files`` (relative name → text) under ``out`` through its Hadoop file system;
    returns their locations."""
    writer, base = HadoopFiles(spark), uri(out)
    written = []
    for name, text in files.items():
        writer.write(f"{base}/{name}", text)
        written.append(f"{base}/{name}")
    return written


def read_runs(spark: Any, out: str | Path) -> Any:
    """The dataset under ``out`` as a DataFrame with :func:`schema`, one row per (grid, seed,
    variant): a pair written twice (two fleets writing at once) counts once."""
    location = runs_uri(out)
    if not HadoopFiles(spark).exists(location):
        raise FleetPathError(f"{location}: no fleet dataset there (kctl fleet run writes it)")
    frame = spark.read.schema(schema()).option("basePath", location).parquet(location)
    return frame.dropDuplicates(["grid", "seed", "variant"]).select(*COLUMN_TYPES)
