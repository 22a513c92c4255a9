"""The state-change log: Kafka's ``state.change.logger``, one line per transition.

Lines go to the ``kctl.state_change`` logger (TRACE lines at level 5) and, when a *sink* is given,
are also kept in order so that a whole run's log can be compared bit for bit (same seed, same log;
same input, same log on both engines). Formatting is skipped when nobody would read the line.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import groupby
from operator import itemgetter
from typing import Protocol

TRACE = 5
logging.addLevelName(TRACE, "TRACE")

LOG4J_LEVELS = {TRACE: "TRACE", logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN",
                logging.ERROR: "ERROR", logging.CRITICAL: "FATAL"}
"""Python's levels by log4j's names, as Kafka's logs spell them."""


Run = tuple[logging.LogRecord, list[str]]
"""Consecutive lines of one level: the record they share (its message aside), and the lines."""


HELD_LINES_MAX = 250_000
"""Lines held (:meth:`StateChangeLogger.held`) at most: past it they are written at once, so a
transition of millions of partitions holds no more than this many lines in memory."""


Later = Callable[[], list[Run]]
"""Runs made only when they are written (:meth:`StateChangeLogger.log_later`)."""


class Sink(Protocol):
    """Where a :class:`StateChangeLogger` keeps its lines: a ``list``, or :class:`KeptLines`."""

    def extend(self, lines: Iterable[str], /) -> None: ...


class KeptLines:
    """A sink that makes its lines text only when they are read: an embedded cluster keeps every
    state-change line of its run (millions in a rolling restart of 100 brokers and 100K
    partitions) for :attr:`~kctl.cluster.EmbeddedCluster.state_change_log`, which a run seldom
    reads. ``extend`` keeps the iterable it is given, which must not change afterwards (the
    logger's are maps over lists of its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # kept on a controller's thread, read on the caller's
        self._lines: list[str] = []
        self._pending: list[Iterable[str]] = []

    def extend(self, lines: Iterable[str], /) -> None:
        with self._lock:
            self._pending.append(lines)

    def keep_engine_lines(self, prefix: str, lines: Sequence[tuple[int, bool, str]]) -> None:
        """Keep the native engine's ``(level, from_batch, message)`` lines, with their prefix: their
        messages and levels, not the tuples (which the collector would walk once more)."""
        levels, messages = bytes(map(itemgetter(0), lines)), list(map(itemgetter(2), lines))
        self.extend(f"{LOG4J_LEVELS.get(level, str(level))} {prefix}{message}" for level, message in zip(levels, messages))

    def lines(self) -> list[str]:
        """Every line kept so far, in order."""
        with self._lock:
            for lines in self._pending:
                self._lines.extend(lines)
            self._pending.clear()
            return list(self._lines)


class _Held:
    """The runs held for one logger, and how many lines they hold."""

    def __init__(self) -> None:
        self.runs: list[Run | Later] = []
        self.lines = 0

    def take(self) -> list[Run]:
        """The runs held, those made later made now; none held any more."""
        runs = [run for entry in self.runs for run in (entry() if callable(entry) else (entry,))]
        self.runs, self.lines = [], 0
        return runs


_held: dict[tuple[str, int], _Held] = {}  # by logger name and thread, while held


def handle_runs(logger: logging.Logger, runs: list[Run]) -> None:
    """``logger.handle`` of a record per line (a copy of its run's record with the line as its
    message), in order, except that a handler with a ``handle_runs`` method (Kafka's log files,
    :mod:`kctl.logfiles`) takes them all in one call: one lock, one flush and each record's layout
    made once for a bulk transition's thousands of lines, even when its levels alternate (an ISR
    shrink logs an INFO and a TRACE line per partition: a run per line). Records are made only
    for filters and handlers that need them."""
    if logger.disabled or not runs:
        return
    held = _held.get((logger.name, threading.get_ident())) if _held else None
    if held is not None:
        held.runs += runs
        held.lines += sum(len(lines) for _, lines in runs)
        if held.lines >= HELD_LINES_MAX:
            _write_runs(logger, held.take())
        return
    _write_runs(logger, runs)


def _write_runs(logger: logging.Logger, runs: list[Run]) -> None:
    """:func:`handle_runs`, the lines written now."""
    if not runs:
        return
    handlers = []
    current: logging.Logger | None = logger
    while current is not None:
        handlers += current.handlers
        current = current.parent if current.propagate else None
    filtered: list[logging.LogRecord] | None = None  # the lines the logger's own filters let through
    if logger.filters or not handlers:
        filtered = [record for template, lines in runs for record in line_records(template, lines)
                    if logger.filter(record)]
        if not handlers:  # logging's last resort, record by record
            for record in filtered:
                logger.callHandlers(record)
            return
    records = filtered
    for handler in handlers:
        by_name = all(getattr(f, "by_name", False) for f in handler.filters)
        verdicts: dict[int, bool] = {}  # by run record: its level passes, and by-name filters let it through
        for template, _ in runs:
            if id(template) not in verdicts:
                verdicts[id(template)] = template.levelno >= handler.level and not (
                    handler.filters and by_name and not handler.filter(template))
        if not any(verdicts.values()):
            continue
        bulk = getattr(handler, "handle_runs", None)
        if bulk is not None and filtered is None and by_name:
            bulk([run for run in runs if verdicts[id(run[0])]])  # even when another handler took records
            continue
        if records is None:
            records = [record for template, lines in runs for record in line_records(template, lines)]
        for record in records:
            if record.levelno >= handler.level:
                handler.handle(record)


def line_records(template: logging.LogRecord, lines: list[str]) -> list[logging.LogRecord]:
    """A record per line: a copy of ``template`` with the line as its message."""
    records = []
    for line in lines:
        record = logging.LogRecord.__new__(logging.LogRecord)
        record.__dict__.update(template.__dict__)
        record.msg = line
        records.append(record)
    return records


class _HeldRecords(logging.Filter):
    """Keeps the records of the threads that hold them (:func:`held_records`), in order, instead
    of letting their loggers pass them on."""

    def __init__(self) -> None:
        super().__init__()
        self.by_thread: dict[int, list[logging.LogRecord]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        thread = threading.get_ident()
        held = self.by_thread.get(thread)
        if held is None:
            return True
        held.append(record)
        if len(held) >= HELD_LINES_MAX:  # as many as the state-change lines: written now, in order
            del self.by_thread[thread]
            try:
                _handle_records(held)
            finally:
                self.by_thread[thread] = []
        return False


def _handle_records(records: list[logging.LogRecord]) -> None:
    """Each held record handled by its own logger, in order (the thread holds none meanwhile)."""
    for record in records:
        logging.getLogger(record.name).handle(record)


_held_records = _HeldRecords()


@contextmanager
def held_records(*loggers: logging.Logger) -> Iterator[None]:
    """Hold the records ``loggers`` are given meanwhile on this thread, and have each logger handle
    its own at the end, in the order they came: each keeps the time it was made, and an argument
    that becomes text only when a handler formats the line (:class:`LogText`) is made text then. A
    controller lists every new partition in a line or two of its own log; at 20K partitions
    making and writing them took as long as a tenth of the partitions' writes, which now come
    first. Nested holds are part of the outer one; past ``HELD_LINES_MAX`` records the held ones
    are written at once, so that a hold keeps a bounded number in memory."""
    for logger in loggers:
        logger.addFilter(_held_records)  # once: it passes every record of a thread holding none
    thread = threading.get_ident()
    if thread in _held_records.by_thread:
        yield
        return
    _held_records.by_thread[thread] = []
    try:
        yield
    finally:
        _handle_records(_held_records.by_thread.pop(thread))


class LogText:
    """A log record's argument made text by ``make`` when a handler first formats the line: with
    :func:`held_records`, after the work the line was logged before."""

    __slots__ = ("_make", "_text")

    def __init__(self, make: Callable[[], str]) -> None:
        self._make: Callable[[], str] | None = make
        self._text = ""

    def __str__(self) -> str:
        if self._make is not None:
            self._text, self._make = self._make(), None
        return self._text


class StateChangeLogger:
    """Writes ``[Controller id=N epoch=E] message`` lines for one controller."""

    def __init__(
        self,
        controller_id: int,
        epoch: Callable[[], int],
        sink: Sink | None = None,
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
        returns a bulk transition's hundreds of thousands of lines at once. The lines of one level
        share one record (made here rather than by ``logger.log``, which walks the stack): they
        are made at once, and a handler that takes runs of lines (:func:`handle_runs`) formats
        each record's parts once and writes all of them in one piece."""
        handle_runs(self._logger, self._runs(lines, self._prefix(), None))

    def log_later(self, lines: Callable[[], Iterable[tuple[int, str]]], count: int) -> bool:
        """:meth:`log_all` of the ``count`` lines ``lines()`` gives, called only when they are
        written, if this thread holds this logger's lines (:meth:`held`) and no sink keeps them:
        a bulk transition's lines then cost nothing before its writes. They keep the time and the
        epoch of this call. False, having logged nothing, otherwise."""
        held = _held.get((self._logger.name, threading.get_ident())) if _held and self.sink is None else None
        if held is None:
            return False
        prefix = self._prefix()
        at = self._record(logging.NOTSET, None)  # the lines' time
        held.runs.append(lambda: self._runs(lines(), prefix, at))
        held.lines += count
        if held.lines >= HELD_LINES_MAX:
            _write_runs(self._logger, held.take())
        return True

    def keep_unlogged(self, lines: Sequence[tuple[int, bool, str]]) -> bool:
        """Keep the native engine's ``(level, from_batch, message)`` lines in the sink only, as
        they are, if it is a :class:`KeptLines` and the logger takes none of them: made into text
        only if the sink is read (a rolling restart of 100 brokers and 100K partitions makes
        millions, which nobody logs). False, having kept nothing, otherwise."""
        sink = self.sink
        if not lines or not isinstance(sink, KeptLines):
            return False
        top = max(map(itemgetter(0), lines))
        if top > 255 or self._logger.isEnabledFor(top):  # levels kept as bytes
            return False
        sink.keep_engine_lines(self._prefix(), lines)
        return True

    def _prefix(self) -> str:
        return f"[Controller id={self.controller_id} epoch={self._epoch()}] "

    def _record(self, level: int, at: logging.LogRecord | None) -> logging.LogRecord:
        """A record of ``level`` for lines to share, made now or, with ``at``, as at its time."""
        record = self._logger.makeRecord(self._logger.name, level, __file__, 0, "", (), None)
        if at is not None:
            record.created, record.msecs, record.relativeCreated = at.created, at.msecs, at.relativeCreated
        return record

    def _runs(self, lines: Iterable[tuple[int, str]], prefix: str, at: logging.LogRecord | None) -> list[Run]:
        """The runs of ``lines`` (kept in the sink as they go), their records made as at ``at``."""
        sink, logger = self.sink, self._logger
        made: dict[int, logging.LogRecord | None] = {}
        runs: list[Run] = []
        for level, run in groupby(lines, key=itemgetter(0)):  # a bulk transition's lines are one run
            messages = list(map(itemgetter(1), run))
            if level not in made:
                made[level] = self._record(level, at) if logger.isEnabledFor(level) else None
            if sink is not None:
                sink.extend(map(f"{LOG4J_LEVELS.get(level, str(level))} {prefix}".__add__, messages))
            template = made[level]
            if template is None:
                continue
            if runs and runs[-1][0] is template:  # only lines of a level not logged came between
                runs[-1][1].extend(map(prefix.__add__, messages))
            else:
                runs.append((template, list(map(prefix.__add__, messages))))
        return runs

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lines every state-change logger of this one's logger is given meanwhile on
        this thread, and write them at the end (in order, each with the time it was made, the file's bytes the
        same): a controller's bulk transitions then write to ZooKeeper one after the other, and
        their thousands of lines (a third of a second at 20K partitions on a busy machine) come
        after the writes rather than between them. Nested holds are part of the outer one."""
        key = (self._logger.name, threading.get_ident())
        if key in _held:
            yield
            return
        _held[key] = _Held()
        try:
            yield
        finally:
            _write_runs(self._logger, _held.pop(key).take())

    @contextmanager
    def held_all(self) -> Iterator[None]:
        """:meth:`held`, and :func:`held_records` of every other kctl logger made so far (they are
        made as their modules load): a bulk transition's other lines (the controller's, listing
        every partition) wait for its writes as its state changes do, each file's lines in order."""
        own = self._logger.name
        others = [logger for name, logger in list(logging.Logger.manager.loggerDict.items())
                  if isinstance(logger, logging.Logger) and name.startswith("kctl.")
                  and name != own and not name.startswith(own + ".")]
        with self.held(), held_records(*others):
            yield

    def trace(self, message: str) -> None:
        self.log(TRACE, message)

    def info(self, message: str) -> None:
        self.log(logging.INFO, message)

    def error(self, message: str) -> None:
        self.log(logging.ERROR, message)
