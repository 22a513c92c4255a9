"""The hardening report plugin (kctl.testing.hardening) on a small suite of its own, run by pytest
in a subprocess: inputs counted per Hypothesis example and per case, faults and losses from the
fault tests' user_properties, the JSON written."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SUITE = {
    "tests/hostile/test_inputs.py": """
        import pytest
        from hypothesis import Phase, given, settings, strategies as st

        @settings(max_examples=7, database=None, phases=[Phase.generate], derandomize=True)
        @given(st.integers())
        def test_generated(n):
            assert isinstance(n, int)

        @pytest.mark.parametrize("case", ["a", "b", "c"])
        def test_cases(case):
            assert case
    """,
    "tests/chaos/test_faults.py": """
        def test_survived(record_property):
            record_property("chaos", {"faults": ["kill -9 controller", "broker flap"], "details": ["91", "broker 2"],
                                      "losses": {"topics": 0, "committed records": 0},
                                      "checked": {"transactions": 40}})

        def test_not_survived(record_property):
            record_property("chaos", {"faults": ["broker flap"], "losses": {"topics": 1}, "checked": {}})
            assert False, "a topic was lost"
    """,
}


def test_the_report_counts_inputs_faults_and_losses(tmp_path: Path) -> None:
    for name, source in SUITE.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    out = tmp_path / "report.json"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "kctl.testing.hardening", f"--hardening-report={out}", "-q",
         "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # the failing fault test
    assert "inputs tried: 12  chaos: 2  hostile: 10" in run.stdout, run.stdout
    assert "faults injected: 3, survived: 2  broker flap: 1/2  kill -9 controller: 1/1" in run.stdout
    report = json.loads(out.read_text())
    assert report["inputs"] == {"tried": 12, "by_suite": {
        "chaos": {"cases": 2, "inputs": 2},
        "hostile": {"cases": 3, "hypothesis examples": 7, "hypothesis tests": 1, "inputs": 10},
    }}
    assert report["faults"]["by_kind"] == {"broker flap": {"injected": 2, "survived": 1},
                                           "kill -9 controller": {"injected": 1, "survived": 1}}
    assert report["faults"]["by_test"] == {
        "tests/chaos/test_faults.py::test_not_survived": {"passed": False, "faults": ["broker flap"]},
        "tests/chaos/test_faults.py::test_survived": {"passed": True, "faults": ["91", "broker 2"]},
    }
    assert report["losses"] == {"total": 1, "by_kind": {"committed records": 0, "topics": 1}}
    assert report["checked"] == {"transactions": 40}
    assert report["tests"] == {"passed": 5, "failed": 1, "skipped": 0} and report["ok"] is False
    assert report["seconds"] >= 0 and report["started"].endswith("+00:00")
