"""A Java server run by tests (ZooKeeper, Kafka's brokers), known only by its PID.

Tests end only the processes they started: each server keeps its ``Popen``, is signalled by its
PID, and is waited for with a deadline after which it is killed, so that no server outlives a test
however it shut down (or failed to).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path


class JavaProcess:
    """One JVM: ``launch()`` starts it with its output appended to a log file; ``stop()`` is a clean
    shutdown (SIGTERM, SIGKILL after a timeout), ``kill()`` a crash."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self.running else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def launch(self, command: Sequence[str], cwd: Path, log_path: Path) -> None:
        with log_path.open("ab") as log:
            self._process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT)

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the process down by its PID: SIGTERM, then SIGKILL if it lingers ``timeout`` seconds."""
        self.signal(signal.SIGTERM)
        self.wait(timeout)

    def kill(self) -> None:
        """Crash the process (SIGKILL): no goodbye to clients or peers."""
        self.signal(signal.SIGKILL)
        self.wait(10.0)

    def signal(self, signum: signal.Signals) -> None:
        """Send ``signum`` if the process runs (to stop several at once, then :meth:`wait` for each)."""
        if self._process is not None and self.running:
            os.kill(self._process.pid, signum)

    def wait(self, timeout: float) -> None:
        """Wait for the process to exit, killing it at ``timeout``."""
        if self._process is None:
            return
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file (``(no log)`` if there is none)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


__all__ = ["JavaProcess", "tail"]
