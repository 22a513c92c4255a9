"""Java programs for tests, fetched from Maven Central: an artifact and its runtime dependencies.

Some tests need a server that Debian does not package at the version they are about (a current
ZooKeeper 3.9, Kafka's brokers). :func:`fetch_jars` asks Maven for artifacts by their coordinates
(``group:artifact:version``) and copies each with its runtime dependencies into one directory of
``~/.cache/kctl`` (``KCTL_CACHE_DIR``), whose jars are then a classpath (``directory/*``). A
directory already fetched for the same coordinates is used as it is, so a second call costs a file
read; Maven is only run when the coordinates change or the directory is missing.

``scripts/fetch-jars`` (called by ``scripts/test`` before pytest) installs Debian's ``maven`` when
``mvn`` is missing and runs this module::

    python -m kctl.testing.maven zookeeper-3.9.5 org.apache.zookeeper:zookeeper:3.9.5 …
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

CACHE_ENV = "KCTL_CACHE_DIR"
"""Where fetched programs are kept, instead of ``~/.cache/kctl`` (shared with the fleet's archives)."""
MVN_ENV = "KCTL_MVN"
"""The ``mvn`` executable to use, instead of the one on ``PATH``."""
INSTALL_HINT = "apt-get update && apt-get install -y maven  (or run scripts/fetch-jars, which does)"
MARKER = "kctl-fetched.txt"
"""The file of a complete directory: the coordinates it was fetched for, one a line."""
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
PROGRAMS = {
    "kafka-3.9.1": (
        "org.apache.kafka:kafka_2.13:3.9.1",
        # the log4j binding the release's own libs/ holds (not in the pom's runtime scope)
        "ch.qos.reload4j:reload4j:1.2.25",
        "org.slf4j:slf4j-reload4j:1.7.36",
    ),
    "kafka-tools-3.9.1": ("org.apache.kafka:kafka-tools:3.9.1",),
}
"""Programs fetched by name alone (``python -m kctl.testing.maven kafka-3.9.1``): Kafka's brokers
for the differential tests (:mod:`kctl.testing.kafka`), and Kafka's command-line tools for the
scenarios only a tool can drive against a broker (a reassignment's cancellation)."""
_COORDINATES = re.compile(r"[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:[A-Za-z0-9_.+-]+")


class FetchError(RuntimeError):
    """Maven is missing or could not fetch the artifacts; the message says which and why."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kctl")


def cached(name: str) -> Path:
    """The directory of the program ``name`` in the cache (``zookeeper-3.9.5``), fetched or not."""
    return cache_root() / name


def fetched(directory: Path, coordinates: Sequence[str]) -> bool:
    """Whether ``directory`` holds a complete fetch of exactly ``coordinates``."""
    try:
        return (directory / MARKER).read_text().split() == list(coordinates)
    except OSError:
        return False


def classpath(directory: Path) -> str:
    """The jars of a fetched directory as a Java classpath."""
    return str(directory / "*")


def fetch_jars(coordinates: Sequence[str], directory: Path, *, timeout: float = 900.0) -> Path:
    """Copy the artifacts ``coordinates`` and their runtime dependencies into ``directory``.

    Idempotent: nothing is run when ``directory`` was fetched for the same coordinates. Otherwise
    Maven resolves them (``dependency:copy-dependencies``, runtime scope) into a fresh directory
    that replaces ``directory`` only once complete, under a lock, so that concurrent callers and
    an interrupted fetch never leave a partial classpath behind.

    :raises FetchError: no ``mvn``, malformed coordinates, or Maven failed (its output is quoted).
    """
    coordinates = list(coordinates)
    bad = [c for c in coordinates if not _COORDINATES.fullmatch(c)]
    if not coordinates or bad:
        raise FetchError(f"expected Maven coordinates GROUP:ARTIFACT:VERSION, got {bad or 'none'}")
    if fetched(directory, coordinates):
        return directory
    mvn = shutil.which(os.environ.get(MVN_ENV) or "mvn")
    if mvn is None:
        raise FetchError(f"cannot fetch {', '.join(coordinates)}: no mvn on PATH; install: {INSTALL_HINT}")
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if fetched(directory, coordinates):
            return directory  # another process fetched them while this one waited
        with tempfile.TemporaryDirectory(prefix=f".{directory.name}-", dir=directory.parent) as work:
            staging = Path(work) / "lib"
            (Path(work) / "pom.xml").write_text(_pom(coordinates))
            command = [mvn, "-B", "-q", f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
                       f"-DoutputDirectory={staging}"]
            try:
                done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=timeout,
                                      stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise FetchError(f"Maven did not fetch {', '.join(coordinates)} within {timeout:g}s") from None
            if done.returncode != 0 or not any(staging.glob("*.jar")):
                output = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
                raise FetchError(f"Maven could not fetch {', '.join(coordinates)} (exit {done.returncode}):\n{output}")
            (staging / MARKER).write_text("\n".join(coordinates) + "\n")
            shutil.rmtree(directory, ignore_errors=True)
            staging.rename(directory)
    return directory


def _pom(coordinates: Sequence[str]) -> str:
    """A project whose only purpose is to depend on ``coordinates``."""
    dependencies = "".join(
        f"<dependency><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId>"
        f"<version>{escape(v)}</version></dependency>"
        for g, a, v in (c.split(":") for c in coordinates)
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>kctl.testing</groupId><artifactId>fetch</artifactId><version>0</version><packaging>pom</packaging>"
        f"<dependencies>{dependencies}</dependencies></project>\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kctl.testing.maven NAME [COORDINATES…]``: fetch into the cache, print the
    directory (without coordinates, ``NAME`` is one of :data:`PROGRAMS`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 1 and args[0] in PROGRAMS:
        args += PROGRAMS[args[0]]
    if len(args) < 2:
        print(f"usage: python -m kctl.testing.maven NAME GROUP:ARTIFACT:VERSION [...], or one of: {', '.join(PROGRAMS)}",
              file=sys.stderr)
        return 2
    try:
        print(fetch_jars(args[1:], cached(args[0])))
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["CACHE_ENV", "PROGRAMS", "FetchError", "cache_root", "cached", "classpath", "fetch_jars", "fetched", "main"]
