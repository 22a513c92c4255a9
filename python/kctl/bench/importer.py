"""``kctl fleet import-logs``: Kafka clusters' logs read with Spark and written as scenarios a grid replays.

Each source is one cluster's logs: a directory (searched recursively), a file or a glob, at any
Hadoop path, named ``NAME=LOCATION`` or after its last path component. Its ``controller.log`` and
``state-change.log`` files (and rolled-over copies) are read by Spark's Hadoop text reader, lines
parsed on the executors (:func:`kctl.bench.incidents.parse_line`), each cluster's events grouped
and reconstructed on an executor (:func:`~kctl.bench.incidents.reconstruct`); the driver receives
only the scenarios and the counts. It writes ``OUT/NAME.toml`` for each cluster (a ``kctl sim``
scenario, and a seed of a grid whose ``scenarios`` is ``OUT``) and ``OUT/import-report.json``: for
each cluster, its lines counted per file and per kind, what could not be replayed, and the leader
changes its controllers made.

The reader never holds a line longer than :data:`~kctl.bench.incidents.MAX_LINE_BYTES`: Hadoop's
``LineRecordReader`` skips it without buffering it (``mapreduce.input.linerecordreader.line.maxlength``),
and the skip shows as a gap between the byte offsets of the lines around it, which is how it is
counted as ``oversized`` (consecutive ones as one). Each file is read as one split: a split
boundary inside a long line would hand the next split a piece of it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from kctl.bench.dataset import HadoopFiles, uri, write_files
from kctl.bench.incidents import (LOG_NAMES, MAX_LINE_BYTES, OVERSIZED, UNPARSED, Incident, file_rank, parse_line,
                                  reconstruct)
from kctl.bench.scenarios import scenario_toml
from kctl.errors import KctlError

REPORT = "import-report.json"
_LOG_FILE = re.compile(r"(controller|state-change)\.log(\.\d{1,6})?")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
MAX_FILES = 10_000
"""Log files one import reads at most (each is a Spark input of its own)."""


class LogImportError(KctlError):
    """A source that names no log file, or a name given twice; nothing was read."""


@dataclass(frozen=True)
class Source:
    """One cluster's logs: its name and where they are."""

    name: str
    location: str

    @classmethod
    def parse(cls, text: str) -> Source:
        """``NAME=LOCATION`` or ``LOCATION`` (named after its last path component)."""
        name, sep, location = text.partition("=")
        if not sep or "/" in name or ":" in name:
            location = text
            name = re.sub(r"[^A-Za-z0-9._-]", "_", PurePosixPath(text.rstrip("/")).name) or "cluster"
        if not _NAME.fullmatch(name) or name in (".", ".."):
            raise LogImportError(f"{text}: the cluster name {name!r} must be 1-100 letters, digits, '.', '_' or '-'")
        if not location:
            raise LogImportError(f"{text}: no location after the name")
        return cls(name, location)


@dataclass(frozen=True)
class Imported:
    """What an import found: each cluster's incident, lines counted per file and kind, and the
    scenarios that :func:`kctl.sim.parse_scenario` rejected (cluster → problems)."""

    incidents: dict[str, Incident]
    lines: dict[str, dict[str, Counter[str]]]
    invalid: dict[str, list[str]]


def log_files(spark: Any, source: Source) -> list[str]:
    """The log files of ``source``: a glob's matches, a directory's files at any depth, whose
    names are controller.log or state-change.log (with a roll-over suffix)."""
    files = HadoopFiles(spark)
    jvm = files.jvm
    location = uri(source.location) if not any(c in source.location for c in "*?[{") else source.location
    pattern = jvm.org.apache.hadoop.fs.Path(location)
    fs = pattern.getFileSystem(files.conf)
    found: list[str] = []
    for status in fs.globStatus(pattern) or []:
        if status.isDirectory():
            listing = fs.listFiles(status.getPath(), True)
            while listing.hasNext() and len(found) <= MAX_FILES:
                path = listing.next().getPath()
                if _LOG_FILE.fullmatch(path.getName()):
                    found.append(path.toString())
        elif _LOG_FILE.fullmatch(status.getPath().getName()):
            found.append(status.getPath().toString())
    if not found:
        raise LogImportError(f"{source.location}: no {' or '.join(LOG_NAMES)} there (cluster {source.name})")
    if len(found) > MAX_FILES:
        raise LogImportError(f"{source.location}: more than {MAX_FILES:,} log files (cluster {source.name})")
    return sorted(found)


def _parse(cluster: str, path: str, records: Iterable[tuple[int, str]]) -> Iterator[tuple[Any, ...]]:
    """One split of one file: its events (``"event", cluster, event``), its lines counted by kind
    (``"count", (cluster, path), counts``) and the byte offsets of its first and last lines
    (``"span", (cluster, path), (first, last)``) to find the lines the reader skipped between splits."""
    rank = file_rank(PurePosixPath(path).name)
    counts: Counter[str] = Counter()
    first = previous = None
    for offset, text in records:
        if previous is not None and offset - previous >= MAX_LINE_BYTES:
            counts[OVERSIZED] += 1
        if first is None:
            first = offset
        previous = offset
        parsed = parse_line(text, rank, offset)
        if isinstance(parsed, str):
            counts[parsed] += 1
        else:
            counts[parsed.kind] += 1
            yield ("event", cluster, parsed)
    yield ("count", (cluster, path), counts)
    if first is not None:
        yield ("span", (cluster, path), (first, previous))


def read_logs(spark: Any, sources: Sequence[Source]) -> Imported:
    """Read, parse and reconstruct every source's logs on ``spark``."""
    names = Counter(s.name for s in sources)
    twice = sorted(n for n, k in names.items() if k > 1)
    if twice:
        raise LogImportError(f"cluster {twice[0]!r} is named twice; name sources NAME=LOCATION")
    sc = spark.sparkContext
    conf = {"mapreduce.input.linerecordreader.line.maxlength": str(MAX_LINE_BYTES),
            "mapreduce.input.fileinputformat.split.minsize": str(2**63 - 1)}  # a file is one split: see above
    sizes: dict[tuple[str, str], int] = {}
    rdds = []
    for source in sources:
        for path in log_files(spark, source):
            sizes[(source.name, path)] = _size(spark, path)
            records = sc.newAPIHadoopFile(path, "org.apache.hadoop.mapreduce.lib.input.TextInputFormat",
                                        "org.apache.hadoop.io.LongWritable", "org.apache.hadoop.io.Text", conf=conf)
            rdds.append(records.mapPartitions(lambda records, c=source.name, p=path: _parse(c, p, records)))
    parsed = sc.union(rdds).cache()
    try:
        incidents = dict(parsed.filter(lambda r: r[0] == "event").map(lambda r: (r[1], r[2])).groupByKey()
                         .map(lambda kv: (kv[0], reconstruct(kv[0], kv[1]))).collect())
        counted = parsed.filter(lambda r: r[0] != "event").map(lambda r: r[1:]).collect()
    finally:
        parsed.unpersist()
    lines: dict[str, dict[str, Counter[str]]] = {s.name: {} for s in sources}
    spans: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for key, value in counted:
        if isinstance(value, Counter):
            lines[key[0]].setdefault(key[1], Counter()).update(value)
        else:
            spans.setdefault(key, []).append(value)
    for key, size in sizes.items():
        counts = lines[key[0]].setdefault(key[1], Counter())
        skipped = _skipped_between(sorted(spans.get(key, [])), size)
        if skipped:
            counts[OVERSIZED] += skipped
    for source in sources:
        incidents.setdefault(source.name, reconstruct(source.name, ()))
    problems = {name: _problems(incident) for name, incident in incidents.items()}
    return Imported(incidents, lines, {name: found for name, found in problems.items() if found})


def _size(spark: Any, path: str) -> int:
    files = HadoopFiles(spark)
    target = files.jvm.org.apache.hadoop.fs.Path(path)
    return int(target.getFileSystem(files.conf).getFileStatus(target).getLen())


def _skipped_between(spans: Sequence[tuple[int, int]], size: int) -> int:
    """Lines the reader skipped where the splits meet, and at the file's end (the reader's key of
    a line after a skipped one is where the skipped one began, so a skip shows as an offset gap of
    at least :data:`MAX_LINE_BYTES` before the next line, or before the end of the file)."""
    if not spans:
        return 1 if size > 0 else 0
    skipped = sum(1 for (_, last), (first, _) in zip(spans, spans[1:]) if first - last >= MAX_LINE_BYTES)
    return skipped + (1 if size - spans[-1][1] >= MAX_LINE_BYTES else 0)


def _problems(incident: Incident) -> list[str]:
    from kctl.sim import parse_scenario
    from kctl.sim.scenario import ScenarioError

    try:
        parse_scenario(incident.scenario, f"{incident.name}.toml")
    except ScenarioError as e:
        return e.problems
    return []


def report(imported: Imported) -> dict[str, Any]:
    """``import-report.json``: per cluster, its lines by file and kind, what was not replayed, its
    scenario's problems, the steps and the leader changes."""
    clusters = {}
    for name, incident in sorted(imported.incidents.items()):
        files = imported.lines.get(name, {})
        total: Counter[str] = Counter()
        for counts in files.values():
            total.update(counts)
        clusters[name] = {
            "scenario": None if name in imported.invalid else f"{name}.toml",
            "problems": imported.invalid.get(name, []),
            "lines": dict(sorted(total.items())),
            "files": {path: dict(sorted(counts.items())) for path, counts in sorted(files.items())},
            "not_replayed": dict(sorted(incident.skipped.items())),
            "steps": len(incident.scenario["steps"]),
            "leader_changes": [list(change) for change in incident.leaders],
        }
    return {"clusters": clusters}


def write(spark: Any, imported: Imported, out: str) -> list[str]:
    """Write each valid scenario and the report under ``out``; returns the locations written."""
    files = {f"{name}.toml": scenario_toml(incident.scenario) for name, incident in sorted(imported.incidents.items())
             if name not in imported.invalid}
    files[REPORT] = json.dumps(report(imported), indent=2) + "\n"
    return write_files(spark, out, files)


def summary(imported: Imported) -> list[list[str]]:
    """One row per cluster: its name, steps, leader changes and the lines it could not parse."""
    rows = []
    for name, incident in sorted(imported.incidents.items()):
        total: Counter[str] = Counter()
        for counts in imported.lines.get(name, {}).values():
            total.update(counts)
        unparsed = {kind: n for kind, n in total.items() if _unparsed(kind)}
        rows.append([name, str(len(incident.scenario["steps"])), str(len(incident.leaders)), str(sum(total.values())),
                     ", ".join(f"{n} {kind}" for kind, n in sorted(unparsed.items())) or "none"])
    return rows


def _unparsed(kind: str) -> bool:
    return kind in UNPARSED or kind.startswith("malformed")
