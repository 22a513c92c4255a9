"""The Python environment a Spark cluster's executors run the fleet in: a packed virtualenv.

kctl has a native extension, which ``--py-files`` cannot ship, so executors get a whole virtualenv
through ``spark.archives`` (Spark's own packaging guide does the same with venv-pack). The
environment holds kctl, every installed distribution with a ``kctl`` entry point (the plugins a
grid's selectors may come from) and, recursively, what they require: not the driver's whole
virtualenv, whose pyspark alone is hundreds of megabytes (executors use their Spark's own).

Editable installs (a developer's checkout) are copied as real files, so the archive never points
back into a source tree. The archive is cached under ``KCTL_CACHE_DIR`` (default
``~/.cache/kctl``), named after a fingerprint of every file it holds, and built again only when
one of them changes. Its ``bin/python`` links to the interpreter this virtualenv was made from,
so executor machines need Python at the same path (venv-pack's rule).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from kctl import extras
from kctl.plugins import ENTRY_POINT_GROUP

ARCHIVE_ALIAS = "environment"
"""The directory the archive unpacks into on executors (``spark.archives=…#environment``)."""
EXECUTOR_PYTHON = f"./{ARCHIVE_ALIAS}/bin/python"
CACHE_ENV = "KCTL_CACHE_DIR"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class PackedFile:
    source: Path
    target: str
    """Path inside site-packages."""


def distributions() -> list[metadata.Distribution]:
    """kctl, the installed kctl plugins, and everything they require that is installed."""
    roots = ["kctl"] + [ep.dist.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.dist is not None]
    found: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        name = _normalise(todo.pop())
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional requirement that is not installed
        found[name] = dist
        for requirement in dist.requires or ():
            match = _NAME.match(requirement)
            if match is not None and "extra ==" not in requirement.partition(";")[2]:
                todo.append(match.group())
    return [found[name] for name in sorted(found)]


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def packed_files(dist: metadata.Distribution) -> Iterator[PackedFile]:
    """What ``dist`` puts in site-packages; for an editable install, the importable files of the
    directories its ``.pth`` files add to ``sys.path`` instead of the ``.pth`` files."""
    editable = _is_editable(dist)
    for path in dist.files or ():
        target = str(path)
        if target.startswith("..") or "__pycache__" in path.parts or target.endswith(".pyc"):
            continue  # scripts outside site-packages, byte code
        source = Path(str(dist.locate_file(path)))
        if editable and (target.endswith(".pth") or path.name == "direct_url.json"):
            if target.endswith(".pth"):
                yield from _pth_sources(source)
            continue
        if editable and not target.split("/")[0].endswith(".dist-info"):
            continue  # the editable finder's own modules
        if source.is_file():
            yield PackedFile(source, target)


def _is_editable(dist: metadata.Distribution) -> bool:
    direct = dist.read_text("direct_url.json")
    return direct is not None and bool(json.loads(direct).get("dir_info", {}).get("editable"))


def _pth_sources(pth: Path) -> Iterator[PackedFile]:
    for line in pth.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "import ")):
            continue
        root = Path(line)
        for entry in sorted(root.iterdir()) if root.is_dir() else ():
            importable = (entry / "__init__.py").is_file() or entry.suffix in (".py", ".so", ".pyd")
            if not importable:
                continue
            files = sorted(entry.rglob("*")) if entry.is_dir() else [entry]
            for source in files:
                if source.is_file() and "__pycache__" not in source.parts and source.suffix != ".pyc":
                    yield PackedFile(source, str(source.relative_to(root)))


def fingerprint(files: list[PackedFile]) -> str:
    digest = hashlib.sha256(f"{sys.version}\n{sys.base_prefix}\n".encode())
    for f in files:
        stat = f.source.stat()
        digest.update(f"{f.target}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kctl")


def pack_environment(directory: Path | None = None) -> Path:
    """The executors' environment as a ``.tar.gz`` for ``spark.archives`` (built if not cached)."""
    venv_pack = extras.require("venv_pack", "packing the executors' environment")
    files = [f for dist in distributions() for f in packed_files(dist)]
    directory = directory or cache_dir()
    archive = directory / f"kctl-environment-{fingerprint(files)}.tar.gz"
    if archive.exists():
        return archive
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kctl-environment-") as staging:
        prefix = Path(staging) / "venv"
        venv.EnvBuilder(with_pip=False, symlinks=True).create(prefix)
        site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        for f in files:
            (site / f.target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f.source, site / f.target)
        partial = archive.with_suffix(".partial")
        venv_pack.pack(prefix=str(prefix), output=str(partial), format="tar.gz", force=True)
        partial.replace(archive)  # another fleet packing at the same time never sees half a file
    return archive
