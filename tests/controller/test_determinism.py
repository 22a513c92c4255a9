"""Determinism (DESIGN §1 rule 4): a simulated run is reproducible bit for bit from its seed — the
same state-change log and the same requests, at the same virtual times, to the same brokers — in
one process and across processes with different string-hash seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import digest, scripted_run

HERE = Path(__file__).parent


def test_the_same_seed_gives_the_same_log_and_requests() -> None:
    first, second = scripted_run(seed=42), scripted_run(seed=42)

    assert len(first.state_change_log) > 100 and len(first.sent_requests) > 100
    assert first.state_change_log == second.state_change_log
    assert first.sent_requests == second.sent_requests
    assert digest(first) == digest(second)


@pytest.mark.parametrize("hash_seed", ["0", "1", "4242"])
def test_the_same_seed_gives_the_same_run_whatever_the_hash_seed(hash_seed: str) -> None:
    expected = digest(scripted_run(seed=42))
    program = "from helpers import digest, scripted_run; print(*digest(scripted_run(seed=42)))"
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": path}

    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)

    assert tuple(done.stdout.split()) == expected
