"""``kctl sim`` says what it runs with: engine, store, transport and each election's leader selector."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kctl import hookimpl
from kctl.cli import main
from kctl.context import ENGINES
from kctl.plugins import get_plugin_host, reset_plugin_host
from kctl.registry import LeaderSelectorRegistry
from kctl.selectors import ElectionKind, KafkaLeaderSelector
from kctl.testing import register_plugin

SCENARIO = """
name = "with a plugin selector"

[cluster]
brokers = 3

[cluster.config]
"kctl.leader.selector.offline" = "kafkas-own"

[[topics]]
name = "orders"
partitions = 2
replication_factor = 2

[[steps]]
action = "kill_broker"
broker = 1
"""


class OfflineSelectorPlugin:
    @hookimpl
    def kctl_register_leader_selectors(self, register: LeaderSelectorRegistry) -> None:
        register.add("kafkas-own", lambda config: KafkaLeaderSelector(ElectionKind.OFFLINE), kind=ElectionKind.OFFLINE)


@pytest.fixture
def host_with_selector() -> Iterator[None]:
    reset_plugin_host()
    with register_plugin(get_plugin_host(), OfflineSelectorPlugin(), "offline-selector"):
        yield
    reset_plugin_host()


@pytest.mark.parametrize("engine", ENGINES)
def test_the_sim_header_names_the_engine_store_transport_and_selectors(
    engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], host_with_selector: None
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    assert main(["sim", str(path), "--no-color", "--engine", engine]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "with a plugin selector: 3 brokers, 1 topics, 1 steps"
    assert lines[1] == (
        f"engine {engine}, store memory, transport inprocess, leader selectors offline=kafkas-own, "
        "reassign=reassign, preferred=preferred, controlled_shutdown=controlled_shutdown"
    )
