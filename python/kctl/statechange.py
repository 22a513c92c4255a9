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


def handle_all(logger: logging.Logger, records: list[logging.LogRecord]) -> None:
    """``logger.handle(record)`` for each record, in order, except that a handler with a
    ``handle_all`` method (Kafka's log files, :mod:`kctl.logfiles`) takes all its records in one
    call: one lock, one flush for a bulk transition's thousands of lines."""
    if logger.disabled or not records:
        return
    kept = [record for record in records if logger.filter(record)]
    handlers = []
    current: logging.Logger | None = logger
    while current is not None:
        handlers += current.handlers
        current = current.parent if current.propagate else None
    if not handlers:  # logging's last resort, record by record
        for record in kept:
            logger.callHandlers(record)
        return
    for handler in handlers:
        mine = [record for record in kept if record.levelno >= handler.level]
        bulk = getattr(handler, "handle_all", None)
        if bulk is not None:
            bulk(mine)
        else:
            for record in mine:
                handler.handle(record)


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
        records = []
        made: dict[int, logging.LogRecord] = {}  # a record per level, made once: the lines are logged at once
        for level, message in lines:
            line = prefix + message
            if sink is not None:
                sink.append(f"{LOG4J_LEVELS.get(level, str(level))} {line}")
            if logger.isEnabledFor(level):
                template = made.get(level)
                if template is None:  # made here rather than by logger.log, which walks the stack
                    template = made[level] = logger.makeRecord(logger.name, level, __file__, 0, "", (), None)
                record = logging.LogRecord.__new__(logging.LogRecord)
                record.__dict__.update(template.__dict__)
                record.msg = line
                records.append(record)
        handle_all(logger, records)

    def trace(self, message: str) -> None:
        self.log(TRACE, message)

    def info(self, message: str) -> None:
        self.log(logging.INFO, message)

    def error(self, message: str) -> None:
        self.log(logging.ERROR, message)
