"""The Spark session a fleet runs on: which master, checked before any Spark work, and how
executors get kctl.

Master precedence (STYLE §4.2): ``--master``, then ``KCTL_SPARK_MASTER``, then whatever Spark
itself was told (``spark-submit --master``, ``spark-defaults.conf``, ``MASTER``), whose own default
is ``local[*]``. A master set in code would silently override ``spark-submit``, so nothing is set
unless asked for. A ``spark://`` or ``k8s://`` master must accept a TCP connection before the
session is built, so a typo fails in seconds with a clear message instead of a job that waits
forever for executors.

Local masters run tasks with this very interpreter (``PYSPARK_PYTHON=sys.executable``); any other
master gets kctl as a packed virtualenv through ``spark.archives``
(:mod:`kctl.bench.environment`). The driver's and executors' JVMs compile with C1 only
(:data:`JIT_OPTIONS`).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kctl.bench.environment import ARCHIVE_ALIAS, EXECUTOR_PYTHON
from kctl import extras
from kctl.errors import KctlError
from kctl.limits import MAX_FILE_BYTES, DocumentError, decode_text, read_file

MASTER_ENV = "KCTL_SPARK_MASTER"
CONNECT_TIMEOUT = 3.0
"""Seconds a cluster master has to accept a connection."""
JIT_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The JIT of a fleet's JVMs: C1 only. Python plays the runs; the JVMs only schedule tasks and
decode, sort and write the rows, and C2 kept recompiling that path all through a fleet: in a
2,000-run fleet about 1.3 s of CPU per executor and 0.5 s on the driver, three times what the
rows themselves cost, taken from the Python workers once every core is busy. Prepended to
``spark.{driver,executor}.defaultJavaOptions``, so options given there or in ``extraJavaOptions``
(``-XX:TieredStopAtLevel=4`` for C2) come later and win."""
_LOCAL = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]")
_HOST_PORT = re.compile(r"\[?([^\]]+?)\]?:(\d+)")
_PROPERTY = re.compile(r"([^\s=:]+)\s*[\s=:]\s*(.*)")


class FleetSetupError(KctlError):
    """Spark cannot run the fleet (missing pyspark or Java, an unusable master); nothing was started."""


def require_spark() -> None:
    """pyspark and pyarrow importable (the job runs on Spark and writes Parquet) and a ``java`` to
    run Spark with, or a :class:`FleetSetupError` saying how."""
    for module in ("pyspark", "pyarrow"):
        try:
            extras.require(module, "kctl fleet")
        except extras.MissingDependencyError as exc:
            raise FleetSetupError(str(exc)) from None
    java_home = os.environ.get("JAVA_HOME")
    java = shutil.which("java", path=str(Path(java_home) / "bin")) if java_home else shutil.which("java")
    if java is None:
        raise FleetSetupError("kctl fleet needs Java 17 or later to run Spark (none on PATH or in JAVA_HOME); "
                              "install one, e.g. apt-get install openjdk-17-jre-headless")


def is_local(master: str) -> bool:
    return _LOCAL.fullmatch(master) is not None


def resolve_master(flag: str | None) -> tuple[str, bool]:
    """The master URL and whether kctl chose it (True) or Spark's own configuration did (False)."""
    for chosen in (flag, os.environ.get(MASTER_ENV)):
        if chosen:
            return chosen, True
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # the JVM gateway reads spark-submit's and spark-defaults' settings
    return SparkConf().get("spark.master", "local[*]") or "local[*]", False


def check_master(master: str) -> None:
    """Raise :class:`FleetSetupError` unless ``master`` can run the fleet and, for a cluster
    manager with an address, accepts a connection."""
    if is_local(master) or master == "yarn":
        return
    if master.startswith("sc://"):
        raise FleetSetupError(f"master {master!r} is Spark Connect, which has no RDD API; give a cluster master "
                              "(spark://host:port) or local[N]")
    scheme, _, rest = master.partition("://")
    if scheme not in ("spark", "k8s", "mesos") or not rest:
        raise FleetSetupError(f"unknown Spark master {master!r}: expected local[N], spark://host:port, yarn or "
                              "k8s://https://host:port")
    addresses = [a for a in rest.removeprefix("https://").removeprefix("http://").split(",") if a]
    problems = []
    for address in addresses:
        match = _HOST_PORT.fullmatch(address.split("/")[0])
        if match is None:
            raise FleetSetupError(f"Spark master {master!r}: {address!r} is not host:port")
        host, port = match.group(1), int(match.group(2))
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
                return
        except OSError as e:
            problems.append(f"{host}:{port}: {e.strerror or e}")
    raise FleetSetupError(f"Spark master {master} is unreachable ({'; '.join(problems)}); is the master running? "
                          "(nothing was started)")


def jit_options(conf: Mapping[str, str]) -> dict[str, str]:
    """``spark.{driver,executor}.defaultJavaOptions`` with :data:`JIT_OPTIONS` first, then what
    ``conf`` or Spark's own configuration gives: once Spark's JVM runs, what it read; before (a
    ``--master`` run never asked it for a master), ``spark-defaults.conf`` itself, since the
    driver's JVM options must be known when that JVM starts."""
    from pyspark import SparkConf, SparkContext

    configured: Mapping[str, str] | SparkConf = SparkConf() if SparkContext._jvm is not None else spark_defaults()
    options = {}
    for role in ("driver", "executor"):
        name = f"spark.{role}.defaultJavaOptions"
        given = conf.get(name) or configured.get(name)
        options[name] = given if given and JIT_OPTIONS in given.split() else f"{JIT_OPTIONS} {given or ''}".strip()
    return options


def spark_defaults() -> dict[str, str]:
    """The properties of ``spark-defaults.conf`` in ``SPARK_CONF_DIR`` or ``SPARK_HOME/conf``, as
    Spark reads them (a Java properties file: ``key value``, ``key=value`` or ``key: value``)."""
    from pyspark.find_spark_home import _find_spark_home

    path = Path(os.environ.get("SPARK_CONF_DIR") or Path(_find_spark_home()) / "conf") / "spark-defaults.conf"
    try:
        lines = decode_text(read_file(path), MAX_FILE_BYTES).splitlines()
    except OSError:
        return {}
    except DocumentError as exc:
        raise FleetSetupError(f"{path}: {exc}") from None
    properties = {}
    for line in lines:
        match = _PROPERTY.fullmatch(line.strip())
        if match and not line.lstrip().startswith(("#", "!")):
            properties[match.group(1)] = match.group(2).strip()
    return properties


def build_session(
    master: str, chosen: bool, archive: Path | None = None, app_name: str = "kctl fleet",
    conf: Mapping[str, str] | None = None,
) -> Any:
    """A ``SparkSession`` on ``master`` (set only when ``chosen``); executors of a cluster master
    run the packed environment ``archive``; ``conf``: more Spark properties (tests' ports)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    for name, value in (conf or {}).items():
        builder = builder.config(name, value)
    for name, value in jit_options(conf or {}).items():
        builder = builder.config(name, value)
    if chosen:
        builder = builder.master(master)
    if is_local(master):  # nothing outside this machine needs to reach the driver
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if archive is None:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:
        builder = builder.config("spark.archives", f"{archive.resolve().as_uri()}#{ARCHIVE_ALIAS}")
        os.environ["PYSPARK_PYTHON"] = EXECUTOR_PYTHON
    return builder.getOrCreate()
