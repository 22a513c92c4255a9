"""Kafka's log files: ``controller.log``, ``state-change.log`` and ``server.log`` in Kafka's log4j layout.

Kafka's ``config/log4j.properties`` sends the ZooKeeper-mode controller's loggers
(``kafka.controller``, TRACE and up) to ``controller.log`` only, ``state.change.logger`` to
``state-change.log`` only, and everything else to ``server.log`` and the console, each line as
``[%d] %p %m (%c)``: ``[2026-11-25 14:00:00,123] INFO [Controller id=1] Ready to serve as the new
controller with epoch 2 (kafka.controller.KafkaController)``. With ``--log-dir`` a ``kctl
controller`` or ``kctl broker`` writes the same three files, so tools that read Kafka's logs read
kctl's: each kctl logger that plays a Kafka class logs under that class's name, its lines prefixed
with the class's log ident (``[Controller id=1] ``); other loggers keep their own names. Files
roll over by size, as log4j's ``RollingFileAppender`` (``controller.log.1`` …), at
:data:`DEFAULT_MAX_FILE_SIZE` with :data:`DEFAULT_MAX_BACKUP_INDEX` old files kept by default.
"""

from __future__ import annotations

import enum
import logging
import logging.handlers
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kctl.errors import IllegalArgumentError
from kctl.statechange import LOG4J_LEVELS, Run, line_records

DEFAULT_MAX_FILE_SIZE = 100 * 1024 * 1024
"""Bytes a log file grows to before it rolls over (log4j's ``MaxFileSize``), by default 100MB."""
DEFAULT_MAX_BACKUP_INDEX = 10
"""Rolled-over files kept of each log (log4j's ``MaxBackupIndex``), by default 10."""


class LogFile(enum.Enum):
    CONTROLLER = "controller.log"
    STATE_CHANGE = "state-change.log"
    SERVER = "server.log"


@dataclass(frozen=True)
class KafkaLogger:
    """The Kafka logger a kctl logger plays: its name (``%c``), its log ident and its file."""

    name: str
    ident: str = ""
    file: LogFile = LogFile.CONTROLLER


_CONTROLLER_LOGGERS = {
    "kctl.controller.controller": KafkaLogger("kafka.controller.KafkaController", "[Controller id={id}] "),
    "kctl.controller.event_manager": KafkaLogger("kafka.controller.ControllerEventManager$ControllerEventThread",
                                                 "[ControllerEventThread controllerId={id}] "),
    "kctl.controller.topic_deletion": KafkaLogger("kafka.controller.TopicDeletionManager",
                                                  "[Topic Deletion Manager {id}] "),
    "kctl.reference.partition_state_machine": KafkaLogger("kafka.controller.ZkPartitionStateMachine",
                                                          "[PartitionStateMachine controllerId={id}] "),
    "kctl.native.statemachine.partition": KafkaLogger("kafka.controller.ZkPartitionStateMachine",
                                                      "[PartitionStateMachine controllerId={id}] "),
    "kctl.reference.replica_state_machine": KafkaLogger("kafka.controller.ZkReplicaStateMachine",
                                                        "[ReplicaStateMachine controllerId={id}] "),
    "kctl.native.statemachine.replica": KafkaLogger("kafka.controller.ZkReplicaStateMachine",
                                                    "[ReplicaStateMachine controllerId={id}] "),
    # A controller process's transport carries its requests to the brokers: Kafka's channel manager.
    "kctl.transports": KafkaLogger("kafka.controller.ControllerChannelManager",
                                   "[Channel manager on controller {id}]: "),
    "kctl.state_change": KafkaLogger("state.change.logger", file=LogFile.STATE_CHANGE),
}
_BROKER_LOGGERS = {"kctl.state_change": KafkaLogger("state.change.logger", file=LogFile.STATE_CHANGE)}


def kafka_loggers(role: str) -> Mapping[str, KafkaLogger]:
    """The kctl loggers (and their children) that play Kafka's in a ``role`` process."""
    return _CONTROLLER_LOGGERS if role == "controller" else _BROKER_LOGGERS


class Log4jFormatter(logging.Formatter):
    """Kafka's layout ``[%d] %p %m (%c)``: log4j's ISO8601 local time with milliseconds, log4j's
    level name, the Kafka logger's ident and message, and its name; a traceback follows on its own
    lines, as log4j prints a throwable."""

    def __init__(self, loggers: Mapping[str, KafkaLogger], node_id: int) -> None:
        super().__init__()
        self._loggers = loggers
        self._node_id = node_id
        self._kafka: dict[str, KafkaLogger] = {}  # by kctl logger name: a state-change burst is 100Ks of lines
        self._second: tuple[int, str] = (-1, "")  # the last second formatted, and its text

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """log4j's ISO8601 local time with milliseconds; the date and time of day formatted once
        per second (a bulk transition logs thousands of lines within one)."""
        second = int(record.created)
        cached = self._second
        if cached[0] != second:
            cached = self._second = (second, time.strftime("%Y-%m-%d %H:%M:%S", self.converter(second)))
        return f"{cached[1]},{int(record.msecs):03d}"

    def format(self, record: logging.LogRecord) -> str:
        before, after = self.affixes(record)
        line = before + record.getMessage() + after
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line

    def affixes(self, record: logging.LogRecord) -> tuple[str, str]:
        """What comes before and after the message of ``record``'s line (the same for every line
        of a record's logger, level and millisecond)."""
        kafka = self._kafka.get(record.name)
        if kafka is None:
            kafka = self._kafka[record.name] = find_logger(self._loggers, record.name) or KafkaLogger(record.name)
        level = LOG4J_LEVELS.get(record.levelno, record.levelname)
        return f"[{self.formatTime(record)}] {level} {kafka.ident.format(id=self._node_id)}", f" ({kafka.name})"


def find_logger(loggers: Mapping[str, KafkaLogger], name: str) -> KafkaLogger | None:
    """The Kafka logger of kctl logger ``name``: its own entry, or its closest ancestor's."""
    while name:
        if name in loggers:
            return loggers[name]
        name = name.rpartition(".")[0]
    return None


class _ToFile(logging.Filter):
    """Passes the records that belong in one file (server.log takes every logger no other file takes)."""

    by_name = True
    """It decides by the record's logger name alone (:func:`kctl.statechange.handle_runs` asks it once per record)."""

    def __init__(self, loggers: Mapping[str, KafkaLogger], file: LogFile) -> None:
        super().__init__()
        self._loggers, self._file = loggers, file
        self._passes: dict[str, bool] = {}  # by logger name

    def filter(self, record: logging.LogRecord) -> bool:
        passes = self._passes.get(record.name)
        if passes is None:
            kafka = find_logger(self._loggers, record.name)
            passes = self._passes[record.name] = (kafka.file if kafka is not None else LogFile.SERVER) is self._file
        return passes


class _RollingFile(logging.handlers.RotatingFileHandler):
    """log4j's ``RollingFileAppender``. Python's handler formats every record twice and looks the
    file up twice (two stats) to decide whether to roll over, most of a line's cost when a bulk
    transition logs a line per partition; this one formats a record once and counts the bytes it
    wrote. Every line is still flushed as it is written, as log4j's ``immediateFlush``."""

    def __init__(self, path: Path, max_bytes: int, backup_count: int) -> None:
        super().__init__(path, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8")
        self._size = path.stat().st_size  # appended to, as log4j does

    def doRollover(self) -> None:
        super().doRollover()
        self._size = 0

    def emit(self, record: logging.LogRecord) -> None:
        self._write(record)
        self._flush()

    def handle_runs(self, runs: list[Run]) -> None:
        """:meth:`handle` of a copy of its run's record per line (:func:`kctl.statechange.handle_runs`),
        under one lock and flushed once at the end (a bulk transition's lines are made at once:
        they appear at once). Its filters look at the logger's name only, and the layout is the
        same for every line of a record: both are worked out once per record, and the lines
        written in one piece unless the file rolls over among them."""
        formatter = self.formatter
        with self.lock:  # type: ignore[union-attr]
            if not all(isinstance(f, _ToFile) for f in self.filters) or not isinstance(formatter, Log4jFormatter):
                for template, lines in runs:
                    for record in line_records(template, lines):
                        if self.filter(record):
                            self._write(record)
            else:
                layouts: dict[int, tuple[str, str] | None] = {}  # by record: None when filtered out
                pieces = []
                for template, lines in runs:
                    if id(template) not in layouts:
                        layouts[id(template)] = formatter.affixes(template) if self.filter(template) else None
                    layout = layouts[id(template)]
                    if layout is not None:
                        before, after = layout
                        pieces += [before + line + after + self.terminator for line in lines]
                text = "".join(pieces)
                size = len(text.encode("utf-8", "replace"))
                if 0 < self.maxBytes < self._size + size:
                    for template, lines in runs:
                        if layouts[id(template)] is not None:
                            for record in line_records(template, lines):
                                self._write(record)
                elif text:
                    try:
                        if self.stream is None:  # closed meanwhile: reopened, as FileHandler does
                            self.stream = self._open()
                        self.stream.write(text)
                        self._size += size
                    except Exception:
                        self.handleError(runs[0][0])
            self._flush()

    def _write(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
            size = len(line.encode("utf-8", "replace"))
            if 0 < self.maxBytes < self._size + size and self._size:
                self.doRollover()
            if self.stream is None:  # closed meanwhile: reopened, as FileHandler does
                self.stream = self._open()
            self.stream.write(line)
            self._size += size
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def _flush(self) -> None:
        if self.stream is not None:
            self.stream.flush()


@dataclass(frozen=True)
class LogFiles:
    """Where and how a process writes Kafka's log files (``--log-dir`` and its size options)."""

    directory: Path
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    max_backup_index: int = DEFAULT_MAX_BACKUP_INDEX

    def handlers(self, console: logging.Handler, role: str, node_id: int) -> list[logging.Handler]:
        """The root logger's handlers: one per file, and ``console``, which from now on gets only
        what goes to server.log (as Kafka's console appender gets what its root logger does)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IllegalArgumentError(f"cannot create the log directory {self.directory}: {exc.strerror}") from None
        loggers = kafka_loggers(role)
        formatter = Log4jFormatter(loggers, node_id)
        handlers: list[logging.Handler] = []
        for file in LogFile:
            path = self.directory / file.value
            try:
                handler = _RollingFile(path, self.max_file_size, self.max_backup_index)
            except OSError as exc:
                raise IllegalArgumentError(f"cannot write the log file {path}: {exc.strerror}") from None
            handler.setFormatter(formatter)
            handler.addFilter(_ToFile(loggers, file))
            handlers.append(handler)
        console.addFilter(_ToFile(loggers, LogFile.SERVER))
        return [*handlers, console]


_SIZE = re.compile(r"(\d+)\s*(KB|MB|GB)?", re.IGNORECASE)
_UNITS = {None: 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}


def parse_file_size(text: str) -> int:
    """A size as log4j's ``MaxFileSize`` takes it: bytes, or a number of KB, MB or GB (powers of 1,024)."""
    m = _SIZE.fullmatch(text.strip())
    if not m or int(m.group(1)) < 1:
        raise IllegalArgumentError(f"expected a size such as 100MB, 512KB or 1048576, got {text!r}")
    unit = m.group(2).upper() if m.group(2) else None
    return int(m.group(1)) * _UNITS[unit]


__all__ = [
    "DEFAULT_MAX_BACKUP_INDEX",
    "DEFAULT_MAX_FILE_SIZE",
    "KafkaLogger",
    "Log4jFormatter",
    "LogFile",
    "LogFiles",
    "find_logger",
    "kafka_loggers",
    "parse_file_size",
]
