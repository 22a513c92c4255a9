"""The state-change log: Kafka's ``state.change.logger``, one line per transition.

Lines go to the ``kctl.state_change`` logger (TRACE lines at level 5) and, when a *sink* is given,
are also kept in order so that a whole run's log can be compared bit for bit (same seed, same log;
same input, same log on both engines). Formatting is skipped when nobody would read the line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

TRACE = 5
logging.addLevelName(TRACE, "TRACE")

LOG4J_LEVELS = {TRACE: "TRACE", logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN",
                logging.ERROR: "ERROR", logging.CRITICAL: "FATAL"}
"""Python's levels by log4j's names, as Kafka's logs spell them."""


class StateChangeLogger:
    """Writes ``[Controller id=N epoch=E] message`` lines for one controller."""

    def __init__(
        self,
        controller_id: int,
        epoch: Callable[[], int],
        sink: list[str] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.controller_id = controller_id
        self._epoch = epoch
        self.sink = sink
        self._logger = logger or logging.getLogger("kctl.state_change")

    def enabled(self, level: int) -> bool:
        return self.sink is not None or self._logger.isEnabledFor(level)

    def log(self, level: int, message: str) -> None:
        self.log_all(((level, message),))

    def log_all(self, lines: Iterable[tuple[int, str]]) -> None:
        """:meth:`log` for each ``(level, message)``, with one epoch lookup: the native engine
        returns a bulk transition's hundreds of thousands of lines at once."""
        prefix = f"[Controller id={self.controller_id} epoch={self._epoch()}] "
        sink, logger = self.sink, self._logger
        for level, message in lines:
            line = prefix + message
            if sink is not None:
                sink.append(f"{LOG4J_LEVELS.get(level, str(level))} {line}")
            if logger.isEnabledFor(level):
                # the record made here rather than by logger.log, which walks the stack for the
                # caller's file and line (a fifth of a line's cost; no layout shows them)
                logger.handle(logger.makeRecord(logger.name, level, __file__, 0, line, (), None))

    def trace(self, message: str) -> None:
        self.log(TRACE, message)

    def info(self, message: str) -> None:
        self.log(logging.INFO, message)

    def error(self, message: str) -> None:
        self.log(logging.ERROR, message)
