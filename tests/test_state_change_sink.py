"""An embedded cluster's state-change lines: kept as the engine gives them and made text only when
read (:class:`kctl.statechange.KeptLines`), or not kept at all (``record_state_changes=False``),
the lines are those the ``kctl.state_change`` logger's handlers are given when it logs them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kctl.cluster import EmbeddedCluster
from kctl.errors import IllegalStateError
from kctl.statechange import LOG4J_LEVELS, TRACE, KeptLines


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(TRACE)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{LOG4J_LEVELS[record.levelno]} {record.getMessage()}")


@contextmanager
def _logged() -> Iterator[_Lines]:
    """Every state-change line, at TRACE and above, as the cluster's sink spells them."""
    logger = logging.getLogger("kctl.state_change")
    handler, level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(TRACE)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _roll(cluster: EmbeddedCluster) -> EmbeddedCluster:
    """A creation, a controlled shutdown and restart of every broker, and a crash: every kind of
    bulk transition's lines (the controller's broker among the restarted)."""
    cluster.start()
    try:
        cluster.create_topic("t", 40, 3)
        cluster.run_until_stable()
        for broker in cluster.broker_ids:
            cluster.shutdown_broker(broker)
            cluster.start_broker(broker)
            cluster.run_until_stable()
        cluster.kill_broker(cluster.broker_ids[0])
        cluster.run_until_stable()
    finally:
        cluster.stop()
    return cluster


def test_lines_kept_unlogged_are_the_lines_logged(engine: str) -> None:
    unlogged = _roll(EmbeddedCluster(4, engine=engine, seed=3)).state_change_log
    with _logged() as handler:
        logged = _roll(EmbeddedCluster(4, engine=engine, seed=3)).state_change_log
    assert any(line.startswith("TRACE ") for line in unlogged) and any(line.startswith("INFO ") for line in unlogged)
    assert unlogged == logged == handler.lines


def test_a_cluster_that_keeps_no_state_change_lines_logs_the_same_lines(engine: str) -> None:
    kept = _roll(EmbeddedCluster(4, engine=engine, seed=3)).state_change_log
    with _logged() as handler:
        cluster = _roll(EmbeddedCluster(4, engine=engine, seed=3, record_state_changes=False))
    assert handler.lines == kept
    with pytest.raises(IllegalStateError, match="record_state_changes=True"):
        cluster.state_change_log  # noqa: B018


def test_kept_lines_are_made_text_once_in_order() -> None:
    kept = KeptLines()
    kept.extend(["first"])
    kept.keep_engine_lines("[Controller id=1 epoch=2] ", [(TRACE, False, "second"), (logging.INFO, True, "third")])
    kept.extend(iter(["fourth"]))
    assert kept.lines() == ["first", "TRACE [Controller id=1 epoch=2] second", "INFO [Controller id=1 epoch=2] third",
                            "fourth"]
    assert kept.lines() == kept.lines()
