"""Kafka's log files (:mod:`kctl.logfiles`): the log4j layout, which logger goes to which file under
which Kafka name, and rotation by size."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kctl.errors import IllegalArgumentError
from kctl.logfiles import LogFiles, Log4jFormatter, kafka_loggers, parse_file_size
from kctl import statechange
from kctl.statechange import TRACE, StateChangeLogger


def record(name: str, level: int, message: str, created: float = 1_795_000_000.123) -> logging.LogRecord:
    made = logging.LogRecord(name, level, __file__, 1, message, (), None)
    made.created, made.msecs = created, 123.0
    return made


def test_a_line_is_in_kafkas_layout_with_the_kafka_logger_and_its_ident() -> None:
    formatter = Log4jFormatter(kafka_loggers("controller"), node_id=7)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_795_000_000.123))
    assert formatter.format(record("kctl.controller.controller", logging.INFO, "Ready to serve")) == \
        f"[{when},123] INFO [Controller id=7] Ready to serve (kafka.controller.KafkaController)"
    assert formatter.format(record("kctl.controller.event_manager", logging.WARNING, "slow")) == \
        f"[{when},123] WARN [ControllerEventThread controllerId=7] slow " \
        "(kafka.controller.ControllerEventManager$ControllerEventThread)"
    assert formatter.format(record("kctl.state_change", TRACE, "[Controller id=7 epoch=3] Changed")) == \
        f"[{when},123] TRACE [Controller id=7 epoch=3] Changed (state.change.logger)"
    assert formatter.format(record("kctl.transports.tcp", logging.ERROR, "gone")) == \
        f"[{when},123] ERROR [Channel manager on controller 7]: gone (kafka.controller.ControllerChannelManager)"
    assert formatter.format(record("kazoo.client", logging.CRITICAL, "lost")) == f"[{when},123] FATAL lost (kazoo.client)"


def test_a_traceback_follows_its_line() -> None:
    formatter = Log4jFormatter(kafka_loggers("controller"), node_id=1)
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logging.LogRecord("kctl.controller.controller", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    first, *rest = formatter.format(failed).splitlines()
    assert first.endswith("] ERROR [Controller id=1] failed (kafka.controller.KafkaController)")
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: boom"


@pytest.fixture
def root_handlers() -> Iterator[logging.Logger]:
    """The root logger, its handlers and levels restored afterwards."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    yield root
    for handler in root.handlers:
        handler.close()
    root.handlers[:], root.level = saved, level


def test_each_logger_goes_to_its_file_and_the_rest_to_server_log_and_the_console(
    tmp_path: Path, root_handlers: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    console = logging.StreamHandler()
    console.setFormatter(logging.Formatter("console %(name)s %(message)s"))
    root_handlers.handlers[:] = LogFiles(tmp_path / "logs").handlers(console, "controller", 2)
    root_handlers.setLevel(TRACE)
    logging.getLogger("kctl.controller.controller").info("elected")
    logging.getLogger("kctl.native.statemachine.replica").error("replicas failed")
    logging.getLogger("kctl.state_change").log(TRACE, "[Controller id=2 epoch=1] Changed state of replica 1")
    logging.getLogger("kctl.process").info("started")
    files = {name: (tmp_path / "logs" / name).read_text().splitlines()
             for name in ("controller.log", "state-change.log", "server.log")}
    assert [line.split("] ", 1)[1] for line in files["controller.log"]] == [
        "INFO [Controller id=2] elected (kafka.controller.KafkaController)",
        "ERROR [ReplicaStateMachine controllerId=2] replicas failed (kafka.controller.ZkReplicaStateMachine)",
    ]
    assert [line.split("] ", 1)[1] for line in files["state-change.log"]] == [
        "TRACE [Controller id=2 epoch=1] Changed state of replica 1 (state.change.logger)"
    ]
    assert [line.split("] ", 1)[1] for line in files["server.log"]] == ["INFO started (kctl.process)"]
    assert capsys.readouterr().err == "console kctl.process started\n"


def test_a_broker_keeps_its_transport_in_server_log(tmp_path: Path, root_handlers: logging.Logger) -> None:
    root_handlers.handlers[:] = LogFiles(tmp_path).handlers(logging.NullHandler(), "broker", 4)
    root_handlers.setLevel(logging.INFO)
    logging.getLogger("kctl.transports.tcp").info("AlterPartition to controller 1 failed")
    assert (tmp_path / "controller.log").read_text() == ""
    assert (tmp_path / "server.log").read_text().endswith(
        "] INFO AlterPartition to controller 1 failed (kctl.transports.tcp)\n"
    )


def test_files_roll_over_by_size_keeping_the_newest(tmp_path: Path, root_handlers: logging.Logger) -> None:
    root_handlers.handlers[:] = LogFiles(tmp_path, max_file_size=1024, max_backup_index=2).handlers(
        logging.NullHandler(), "controller", 1
    )
    root_handlers.setLevel(logging.INFO)
    log = logging.getLogger("kctl.controller.controller")
    for n in range(100):
        log.info("line %03d %s", n, "x" * 60)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("controller.log"))
    assert names == ["controller.log", "controller.log.1", "controller.log.2"]
    assert all(p.stat().st_size <= 1024 for p in tmp_path.glob("controller.log*"))
    assert "line 099" in (tmp_path / "controller.log").read_text()
    assert "line 000" not in "".join(p.read_text() for p in tmp_path.glob("controller.log*"))


def test_a_file_written_before_counts_towards_its_size(tmp_path: Path, root_handlers: logging.Logger) -> None:
    (tmp_path / "controller.log").write_text("x" * 1000 + "\n")  # a restarted process appends
    root_handlers.handlers[:] = LogFiles(tmp_path, max_file_size=1024, max_backup_index=1).handlers(
        logging.NullHandler(), "controller", 1
    )
    root_handlers.setLevel(logging.INFO)
    logging.getLogger("kctl.controller.controller").info("after the restart")
    assert (tmp_path / "controller.log.1").read_text() == "x" * 1000 + "\n"
    assert "after the restart" in (tmp_path / "controller.log").read_text()


def test_a_line_is_formatted_once(tmp_path: Path, root_handlers: logging.Logger) -> None:
    """A bulk transition logs a line per partition: formatting each twice (once to decide on the
    rollover) cost a third of the time of writing them."""
    handlers = LogFiles(tmp_path).handlers(logging.NullHandler(), "controller", 1)
    formatted = []
    for formatter in {id(h.formatter): h.formatter for h in handlers if h.formatter is not None}.values():
        original = formatter.format
        formatter.format = lambda r, f=original: formatted.append(r.getMessage()) or f(r)  # type: ignore[method-assign]
    root_handlers.handlers[:] = handlers
    root_handlers.setLevel(logging.INFO)
    logging.getLogger("kctl.state_change").info("[Controller id=1 epoch=1] Changed partition t-0")
    assert formatted == ["[Controller id=1 epoch=1] Changed partition t-0"]
    assert (tmp_path / "state-change.log").read_text().endswith(
        "INFO [Controller id=1 epoch=1] Changed partition t-0 (state.change.logger)\n")


@pytest.mark.parametrize("level", [TRACE, logging.INFO])
def test_a_bulk_transitions_lines_reach_every_handler_in_order(
    tmp_path: Path, root_handlers: logging.Logger, level: int
) -> None:
    """Kafka's files take a batch at once, any other handler record by record; levels hold for both."""
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(f"{record.levelname} {record.getMessage()}")

    state_change = logging.getLogger("kctl.state_change")
    saved = state_change.level
    root_handlers.handlers[:] = LogFiles(tmp_path).handlers(logging.NullHandler(), "controller", 1) + [Collect()]
    state_change.setLevel(level)
    try:
        StateChangeLogger(1, lambda: 4).log_all([(logging.INFO, "first"), (TRACE, "second"), (logging.INFO, "third")])
    finally:
        state_change.setLevel(saved)
    expected = [("INFO", "first"), ("TRACE", "second"), ("INFO", "third")]
    expected = [(name, message) for name, message in expected if level == TRACE or name == "INFO"]
    assert seen == [f"{name} [Controller id=1 epoch=4] {message}" for name, message in expected]
    lines = (tmp_path / "state-change.log").read_text().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        f"{name} [Controller id=1 epoch=4] {message} (state.change.logger)" for name, message in expected]


@pytest.mark.parametrize("null_handler", [False, True])
@pytest.mark.parametrize("max_file_size", [10**8, 4096])
def test_a_bulk_transitions_lines_are_laid_out_once_and_written_as_one_by_one(
    tmp_path: Path, root_handlers: logging.Logger, monkeypatch: pytest.MonkeyPatch, max_file_size: int,
    null_handler: bool,
) -> None:
    """A creation of 20K partitions logs 60K lines before its first ZooKeeper write: a record,
    filter and layout per line took most of that time. The file gets the same bytes, across a
    rollover too, and a handler that takes records on the way (the NullHandler a fleet's tasks put
    on ``kctl``) does not make the files take them record by record."""
    monkeypatch.setattr(time, "time", lambda: 1_795_000_000.5)  # one millisecond for every line
    state_change = logging.getLogger("kctl.state_change")
    monkeypatch.setattr(state_change, "level", TRACE)
    if null_handler:
        monkeypatch.setattr(logging.getLogger("kctl"), "handlers", [logging.NullHandler()])
    root_handlers.setLevel(TRACE)
    lines = [(logging.INFO if p % 50 else TRACE, f"Changed partition t-{p} state") for p in range(200)]
    written = {}
    for way in ("bulk", "one-by-one"):
        directory = tmp_path / way
        root_handlers.handlers[:] = LogFiles(directory, max_file_size=max_file_size, max_backup_index=20).handlers(
            logging.NullHandler(), "controller", 1)
        layouts = []
        formatter = root_handlers.handlers[0].formatter
        assert isinstance(formatter, Log4jFormatter)  # one for every file
        monkeypatch.setattr(formatter, "affixes", lambda r, f=formatter.affixes, seen=layouts: seen.append(r) or f(r))
        if way == "bulk":
            StateChangeLogger(1, lambda: 4).log_all(lines)
            if max_file_size == 10**8:
                assert len(layouts) == 2  # once per level: TRACE, INFO × 49, TRACE, … share two records
        else:
            for level, message in lines:
                state_change.log(level, "[Controller id=1 epoch=4] " + message)
        for handler in root_handlers.handlers:
            handler.close()
        written[way] = {p.name: p.read_bytes() for p in directory.iterdir()}
    assert written["bulk"] == written["one-by-one"]
    assert ("state-change.log.1" in written["bulk"]) == (max_file_size == 4096)  # rolled over among the lines


def test_lines_of_alternating_levels_are_written_and_flushed_at_once(
    tmp_path: Path, root_handlers: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ISR shrink logs an INFO and a TRACE line per partition: a controller taking over after a
    broker crashed at 20K partitions logs 13K of each, alternating, and a write and a flush per
    line took a third of a second before its elections. The file gets them in order, at once."""
    state_change = logging.getLogger("kctl.state_change")
    monkeypatch.setattr(state_change, "level", TRACE)
    monkeypatch.setattr(state_change, "_cache", {})  # what setLevel would drop
    root_handlers.setLevel(TRACE)
    root_handlers.handlers[:] = LogFiles(tmp_path).handlers(logging.NullHandler(), "controller", 1)
    flushes: list[str] = []
    for handler in root_handlers.handlers:
        if isinstance(handler, logging.FileHandler):
            monkeypatch.setattr(handler, "_flush", lambda h=handler, f=handler._flush: flushes.append(h.baseFilename) or f())
    lines = [(TRACE if p % 2 else logging.INFO, f"line {p}") for p in range(400)]
    StateChangeLogger(1, lambda: 4).log_all(lines)
    assert flushes == [str(tmp_path / "state-change.log")]
    written = (tmp_path / "state-change.log").read_text().splitlines()
    assert [line.split("] ", 1)[1] for line in written] == [
        f"{'TRACE' if p % 2 else 'INFO'} [Controller id=1 epoch=4] line {p} (state.change.logger)" for p in range(400)]


@pytest.mark.parametrize(("text", "size"), [("100MB", 100 * 1024**2), ("512kb", 512 * 1024), ("1GB", 1024**3),
                                            ("4096", 4096)])
def test_sizes_are_written_as_log4j_writes_them(text: str, size: int) -> None:
    assert parse_file_size(text) == size


@pytest.mark.parametrize("text", ["", "0", "10 TB", "-1MB", "MB"])
def test_a_bad_size_is_refused(text: str) -> None:
    with pytest.raises(IllegalArgumentError, match="expected a size such as 100MB"):
        parse_file_size(text)


def test_an_unwritable_log_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(IllegalArgumentError, match=f"cannot create the log directory {blocker / 'logs'}"):
        LogFiles(blocker / "logs").handlers(logging.NullHandler(), "controller", 1)


def test_held_lines_are_written_at_the_end_in_order_with_the_times_they_were_made(
    root_handlers: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller holds its bulk transitions' lines until their ZooKeeper writes are done; the
    lines then reach the handlers as they would have (order, times), and at most
    HELD_LINES_MAX of them are held at once."""
    seen: list[tuple[str, float]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.getMessage(), record.created))

    state_change = logging.getLogger("kctl.state_change")
    monkeypatch.setattr(state_change, "level", TRACE)
    monkeypatch.setattr(state_change, "_cache", {})  # what setLevel would drop
    root_handlers.handlers[:] = [Collect()]
    monkeypatch.setattr(statechange, "HELD_LINES_MAX", 5)
    machine, batch = StateChangeLogger(1, lambda: 4), StateChangeLogger(1, lambda: 4)
    clock = iter(range(100))
    monkeypatch.setattr(time, "time", lambda: float(next(clock)))
    with machine.held():
        machine.log_all([(logging.INFO, "a"), (TRACE, "b")])
        with batch.held():  # part of the outer hold
            batch.info("c")
        assert seen == []
        other = threading.Thread(target=lambda: machine.info("elsewhere"))  # another thread's lines are not held
        other.start()
        other.join()
        assert [message for message, _ in seen] == ["[Controller id=1 epoch=4] elsewhere"]
        machine.log_all([(TRACE, "d"), (TRACE, "e")])  # the fifth line: all five written
        assert len(seen) == 6
        machine.info("f")
        assert len(seen) == 6
    assert [message.split("] ")[1] for message, _ in seen] == ["elsewhere", "a", "b", "c", "d", "e", "f"]
    times = [created for _, created in seen]
    assert times[1] == 0.0 and times[3] == 2.0 and times[-1] > times[3]  # as made, not as written


def test_held_records_reach_their_loggers_at_the_end_in_order_with_their_times_and_text_made_then(
    root_handlers: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``held_records``: the records of the held loggers made on this thread wait, each keeping the
    time it was made, and reach their loggers' handlers in order at the end of the outermost hold; a
    ``LogText`` argument is made text once, when the line is formatted. Other loggers and other
    threads are not held."""
    seen: list[tuple[str, str, float]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.name, record.getMessage(), record.created))

    root_handlers.handlers[:] = [Collect()]
    root_handlers.setLevel(logging.INFO)
    controller, machine, other = (logging.getLogger(f"kctl.test_held.{name}") for name in ("controller", "machine", "other"))
    made: list[str] = []
    clock = iter(range(100))
    monkeypatch.setattr(time, "time", lambda: float(next(clock)))
    with statechange.held_records(controller, machine):
        controller.info("a %s", statechange.LogText(lambda: made.append("a") or "made"))
        with statechange.held_records(machine):  # part of the outer hold
            machine.info("b")
        other.info("c")
        thread = threading.Thread(target=lambda: controller.info("elsewhere"))
        thread.start()
        thread.join()
        assert [message for _, message, _ in seen] == ["c", "elsewhere"] and made == []
        controller.info("d")
    assert [(name.rpartition(".")[2], message) for name, message, _ in seen] == [
        ("other", "c"), ("controller", "elsewhere"), ("controller", "a made"), ("machine", "b"), ("controller", "d")]
    assert made == ["a"]  # once, though formatted (getMessage) by the handler
    assert [created for _, message, created in seen if message in ("a made", "b", "d")] == [0.0, 1.0, 4.0]
    controller.info("e")  # no longer held
    assert seen[-1][1] == "e"


def test_held_records_past_the_most_held_are_written_at_once_in_order(
    root_handlers: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``held_records`` keeps at most ``HELD_LINES_MAX`` records: reaching it writes those held, in
    order, and the hold goes on for the records after them."""
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    root_handlers.handlers[:] = [Collect()]
    root_handlers.setLevel(logging.INFO)
    monkeypatch.setattr(statechange, "HELD_LINES_MAX", 3)
    logger = logging.getLogger("kctl.test_held.bounded")
    with statechange.held_records(logger):
        for n in range(5):
            logger.info("r%d", n)
        assert seen == ["r0", "r1", "r2"]
    assert seen == ["r0", "r1", "r2", "r3", "r4"]


@pytest.fixture
def messages(root_handlers: logging.Logger, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The messages every record reaching the root logger's (only) handler has, the state-change
    logger at TRACE."""
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    state_change = logging.getLogger("kctl.state_change")
    monkeypatch.setattr(state_change, "level", TRACE)
    monkeypatch.setattr(state_change, "_cache", {})
    root_handlers.handlers[:] = [Collect()]
    return seen


def test_holding_all_holds_every_kctl_loggers_records_and_the_state_change_lines(
    root_handlers: logging.Logger, messages: list[str]
) -> None:
    """``held_all``: the state-change lines and the records of every other kctl logger (the
    controller's, a transport's) made meanwhile on this thread wait for its end; the state-change
    logger keeps no filter (its bulk path takes none), and other libraries' loggers are not held."""
    import kctl.controller.controller  # noqa: F401 (makes the controller's loggers)
    import kctl.transports.tcp  # noqa: F401

    seen = messages
    root_handlers.setLevel(logging.INFO)
    machine = StateChangeLogger(1, lambda: 4)
    with machine.held_all():
        logging.getLogger("kctl.controller.controller").info("controller")
        machine.info("state change")
        logging.getLogger("kctl.transports.tcp").warning("transport")
        # another library's logger (not kazoo's: running kctl's commands in process sets its level)
        logging.getLogger("another_library.client").warning("another library")
        assert seen == ["another library"]
    assert seen == ["another library", "controller", "transport", "[Controller id=1 epoch=4] state change"]
    assert not logging.getLogger("kctl.state_change").filters


def test_lines_logged_later_are_made_only_when_written_with_the_time_and_epoch_of_their_call(
    root_handlers: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``log_later``: while held, the lines are made (prefixed, grouped by level) only when written,
    in their place among the other held lines, keeping the call's time and epoch; past
    HELD_LINES_MAX they are written at once. Not held, or kept in a sink, it logs nothing and
    says so."""
    seen: list[tuple[str, str, float]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelname, record.getMessage(), record.created))

    state_change = logging.getLogger("kctl.state_change")
    monkeypatch.setattr(state_change, "level", TRACE)
    monkeypatch.setattr(state_change, "_cache", {})
    root_handlers.handlers[:] = [Collect()]
    monkeypatch.setattr(statechange, "HELD_LINES_MAX", 6)
    epoch = [4]
    machine = StateChangeLogger(1, lambda: epoch[0])
    made: list[str] = []

    def lines(*texts: str) -> Callable[[], Iterator[tuple[int, str]]]:
        def make() -> Iterator[tuple[int, str]]:
            made.extend(texts)
            return ((TRACE if text.startswith("t") else logging.INFO, text) for text in texts)
        return make

    clock = iter(range(100))
    monkeypatch.setattr(time, "time", lambda: float(next(clock)))
    assert not machine.log_later(lines("not held"), 1) and made == seen == []
    with machine.held():
        machine.info("a")
        assert machine.log_later(lines("t1", "i2", "t3"), 3)
        epoch[0] = 5
        machine.info("b")
        assert made == [] and seen == []
        assert machine.log_later(lines("t4"), 1)  # the sixth line: all six written
        assert made == ["t1", "i2", "t3", "t4"] and len(seen) == 6
        assert machine.log_later(lines("t5"), 1)
    assert [(level, message) for level, message, _ in seen] == [
        ("INFO", "[Controller id=1 epoch=4] a"), ("TRACE", "[Controller id=1 epoch=4] t1"),
        ("INFO", "[Controller id=1 epoch=4] i2"), ("TRACE", "[Controller id=1 epoch=4] t3"),
        ("INFO", "[Controller id=1 epoch=5] b"), ("TRACE", "[Controller id=1 epoch=5] t4"),
        ("TRACE", "[Controller id=1 epoch=5] t5")]
    times = [created for _, _, created in seen]
    assert times[:6] == [0.0, 1.0, 1.0, 1.0, 2.0, 3.0] and times[6] > times[5]  # as called, not as written
    sink: list[str] = []
    with StateChangeLogger(1, lambda: 4, sink).held():
        assert not StateChangeLogger(1, lambda: 4, sink).log_later(lines("t6"), 1)


def test_the_native_engines_lines_are_made_only_when_written_while_held(messages: list[str]) -> None:
    """``kctl.native.request_batch.emit``: a controller's machines and batch share one logger, and
    while its lines are held the engine makes the text of its lines (``StateChangeLines.made``)
    only when they are written; otherwise at once."""
    from kctl.native.request_batch import emit

    class Watched:
        """The engine's lines of one call, counting the times their text is made."""

        made_times = 0

        def __init__(self, lines: list[tuple[int, bool, str]]) -> None:
            self.lines = lines

        def __len__(self) -> int:
            return len(self.lines)

        def made(self) -> list[tuple[int, bool, str]]:
            Watched.made_times += 1
            return list(self.lines)

    written = messages
    machine, batch = StateChangeLogger(1, lambda: 4), StateChangeLogger(1, lambda: 4)
    lines: Any = Watched([(TRACE, False, "x"), (logging.INFO, True, "y")])
    with machine.held():
        emit(machine, machine, lines)
        assert Watched.made_times == 0
        emit(machine, batch, lines)  # two loggers: at once
        assert Watched.made_times == 1
    assert Watched.made_times == 2
    assert written == ["[Controller id=1 epoch=4] x", "[Controller id=1 epoch=4] y"] * 2
