"""kctl's optional dependencies: the extra that installs each, and the error when one is missing.

kctl itself needs pluggy and prometheus_client only. ZooKeeper (kazoo, pure-sasl), the network
between processes (msgpack) and Spark fleets (pyspark, venv-pack, pyarrow) come with extras, and
each is imported where it is first needed, through :func:`require`: a missing one is a
:class:`MissingDependencyError`, which the ``kctl`` command prints as one ``kctl: error:`` line
naming the extra to install, never a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from kctl.errors import KctlError

EXTRAS: dict[str, tuple[str, str]] = {
    "kazoo": ("kazoo", "zookeeper"),
    "puresasl": ("pure-sasl", "zookeeper"),
    "msgpack": ("msgpack", "tcp"),
    "pyspark": ("pyspark", "fleet"),
    "venv_pack": ("venv-pack", "fleet"),
    "pyarrow": ("pyarrow", "fleet"),
}
"""Each optional top-level module: the distribution that provides it and the kctl extra that installs it."""


class MissingDependencyError(KctlError, ImportError):
    """An optional package is not importable; the message names the extra that installs it. Also an
    :class:`ImportError`, so that code guarding an optional import keeps working."""


def install_hint(module: str) -> str:
    """The command that installs ``module`` (a top-level name of :data:`EXTRAS`)."""
    return f"pip install 'kctl[{EXTRAS[module][1]}]'"


def missing(module: str, purpose: str, cause: ImportError) -> MissingDependencyError:
    """The error for ``module`` (dotted or not), which ``purpose`` needs, failing to import with ``cause``."""
    top = module.partition(".")[0]
    reason = str(cause) or type(cause).__name__
    return MissingDependencyError(f"{purpose} needs {EXTRAS[top][0]} ({reason}): {install_hint(top)}")


def require(module: str, purpose: str) -> ModuleType:
    """``module`` imported, or a :class:`MissingDependencyError` saying that ``purpose`` (say "the
    zookeeper store") needs it and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing(module, purpose, exc) from exc


__all__ = ["EXTRAS", "MissingDependencyError", "install_hint", "missing", "require"]
