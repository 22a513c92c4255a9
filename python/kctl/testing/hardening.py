"""The hardening report: a pytest plugin that counts what the hostile-input and fault suites did.

It is listed in kctl's ``tests/conftest.py`` (``pytest_plugins``; elsewhere ``-p
kctl.testing.hardening``) and stays inactive until asked: ``--hardening-report=PATH`` turns it on
(``scripts/hardening-report`` runs ``tests/hostile`` and ``tests/chaos`` so). For every test that
runs it counts:

- inputs tried: each call of a Hypothesis test's body (generated, replayed and explicit examples
  alike; counted by wrapping ``test.hypothesis.inner_test``, the hook Hypothesis offers for
  running each example) and one per ordinary test (each parametrized case is one; a stateful
  Hypothesis test, a ``unittest`` class to pytest, counts as one too);
- faults injected and survived: a fault test records what it did in its ``user_properties`` under
  ``chaos`` (a mapping with ``faults``, the kinds injected, and ``details``, what exactly;
  ``losses``, what was lost by kind; ``checked``, how much the verdict looked at); a fault counts
  as survived when its test passed;
- losses: summed by kind over the fault tests; any loss fails its test, and the report.

At the end it prints a summary and writes it to ``PATH`` as JSON: the run's time, the tests'
outcomes, and the three figures by suite (``tests/<suite>/…``) and kind.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import time
from collections import Counter
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

import pytest

PROPERTY = "chaos"
"""The ``user_properties`` key a fault test records its faults, losses and checks under."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("kctl hardening report").addoption(
        "--hardening-report", default=None, metavar="PATH", help="write the hardening report as JSON to PATH"
    )


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--hardening-report")
    if path:
        config.pluginmanager.register(HardeningReport(Path(path)), "kctl-hardening-report")


def _suite(item: pytest.Item) -> str:
    """``hostile`` for ``tests/hostile/…``: the directory under ``tests`` (or the first one)."""
    parts = Path(os.path.relpath(item.path, item.config.rootpath)).parts
    if len(parts) > 2 and parts[0] == "tests":
        return parts[1]
    return parts[0] if len(parts) > 1 else "."


class HardeningReport:
    """Counts inputs, faults and losses as tests run; reports at the end of the session."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._started = time.time()
        self._clock = time.monotonic()
        self._suites: dict[str, Counter[str]] = {}
        self._outcomes: dict[str, str] = {}  # nodeid → passed / failed / skipped
        self._chaos: dict[str, Mapping[str, Any]] = {}  # nodeid → its recorded property

    # --- Counting ------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        counts = self._suites.setdefault(_suite(item), Counter())
        handle = getattr(getattr(item, "obj", None), "hypothesis", None)
        inner = getattr(handle, "inner_test", None)
        if handle is None or inner is None:
            counts["cases"] += 1
            return (yield)

        @functools.wraps(inner)
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts["hypothesis examples"] += 1
            return inner(*args, **kwargs)

        handle.inner_test = counted
        try:
            return (yield)
        finally:
            handle.inner_test = inner
            counts["hypothesis tests"] += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self._outcomes[report.nodeid] = "failed"
        elif report.skipped and report.nodeid not in self._outcomes:
            self._outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and report.passed:
            self._outcomes.setdefault(report.nodeid, "passed")
        for name, value in report.user_properties:
            if name == PROPERTY and isinstance(value, Mapping):
                self._chaos[report.nodeid] = value

    # --- Reporting -----------------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """The figures so far, as the JSON report holds them."""
        inputs = {suite: dict(counts) for suite, counts in sorted(self._suites.items())}
        for counts in inputs.values():
            counts["inputs"] = counts.get("cases", 0) + counts.get("hypothesis examples", 0)
        faults: dict[str, Counter[str]] = {}
        losses: Counter[str] = Counter()
        checked: Counter[str] = Counter()
        scenarios = {}
        for nodeid, recorded in sorted(self._chaos.items()):
            survived = self._outcomes.get(nodeid) == "passed"
            scenarios[nodeid] = {"passed": survived, "faults": list(recorded.get("details") or recorded.get("faults") or ())}
            for kind in recorded.get("faults") or ():
                counter = faults.setdefault(str(kind), Counter())
                counter["injected"] += 1
                counter["survived"] += survived
            losses.update({str(k): int(v) for k, v in (recorded.get("losses") or {}).items()})
            checked.update({str(k): int(v) for k, v in (recorded.get("checked") or {}).items()})
        outcomes = Counter(self._outcomes.values())
        total_losses = sum(losses.values())
        return {
            "started": datetime.datetime.fromtimestamp(self._started, datetime.timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.monotonic() - self._clock, 1),
            "engine": os.environ.get("KCTL_ENGINE", "rust"),
            "tests": {outcome: outcomes[outcome] for outcome in ("passed", "failed", "skipped")},
            "inputs": {"tried": sum(c["inputs"] for c in inputs.values()), "by_suite": inputs},
            "faults": {
                "injected": sum(c["injected"] for c in faults.values()),
                "survived": sum(c["survived"] for c in faults.values()),
                "by_kind": {kind: dict(c) for kind, c in sorted(faults.items())},
                "by_test": scenarios,
            },
            "losses": {"total": total_losses, "by_kind": dict(sorted(losses.items()))},
            "checked": dict(sorted(checked.items())),
            "ok": outcomes["failed"] == 0 and total_losses == 0,
        }

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        report = self.report()
        write = terminalreporter.write_line
        terminalreporter.section("hardening report")
        write(f"inputs tried: {report['inputs']['tried']}  "
              + "  ".join(f"{suite}: {c['inputs']}" for suite, c in report["inputs"]["by_suite"].items()))
        faults = report["faults"]
        write(f"faults injected: {faults['injected']}, survived: {faults['survived']}  "
              + "  ".join(f"{kind}: {c['survived']}/{c['injected']}" for kind, c in faults["by_kind"].items()))
        write(f"losses: {report['losses']['total']}  {report['losses']['by_kind']}")
        write(f"checked: {report['checked']}")
        write(f"{report['seconds']:g}s, tests {report['tests']}, {'OK' if report['ok'] else 'NOT OK'}")
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._path.write_text(json.dumps(report, indent=2) + "\n")
        write(f"written to {self._path}")


__all__ = ["PROPERTY", "HardeningReport"]
