"""``kctl`` imports the chosen command's front end only: ``kctl --help`` stays a handful of modules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

MAX_HELP_MODULES = 15
"""kctl modules ``kctl --help`` may import (issue 13)."""
FRONT_ENDS = ("kctl.info", "kctl.sim.cli", "kctl.bench.cli", "kctl.process", "kctl.tools.commands", "kctl.tools.status")
"""The modules of the built-in commands."""
INDEPENDENT_FRONT_ENDS = ("kctl.info", "kctl.sim.cli", "kctl.bench.cli", "kctl.tools.commands")
"""Front ends none of which imports another (``kctl.tools.commands`` takes ``kctl.process``'s options)."""


def kctl_modules_after(*argv: str) -> list[str]:
    """The kctl modules imported by ``kctl argv`` in a fresh interpreter (entry points loaded, as
    for a user: the process is not under pytest)."""
    script = (
        "import json, sys\n"
        "from kctl.cli import main\n"
        f"status = main({list(argv)!r})\n"
        "print(json.dumps([status, sorted(m for m in sys.modules if m == 'kctl' or m.startswith('kctl.'))]),"
        " file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    status, modules = json.loads(result.stderr.splitlines()[-1])
    assert status == 0, result.stderr
    return list(modules)


def test_help_imports_at_most_a_handful_of_kctl_modules() -> None:
    modules = kctl_modules_after("--help")
    assert len(modules) <= MAX_HELP_MODULES, modules
    assert not set(FRONT_ENDS) & set(modules)


@pytest.mark.parametrize(("argv", "front_end"), [(["topics", "--help"], "kctl.tools.commands"),
                                                 (["config", "--help"], "kctl.info"),
                                                 (["sim", "--help"], "kctl.sim.cli")])
def test_a_command_imports_its_own_front_end_and_no_other(argv: list[str], front_end: str) -> None:
    modules = set(kctl_modules_after(*argv))
    assert front_end in modules
    assert not (set(INDEPENDENT_FRONT_ENDS) - {front_end}) & modules
