"""Scenario files refuse ids and counts outside Kafka's ``Int`` and topic configs Kafka would
refuse, when the file is loaded, naming the place and the field (issue 11: such a file once ran
into the engine's ``OverflowError`` or a ``ValueError`` mid-run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kctl.sim import ScenarioError, load_scenario

CLUSTER = "[cluster]\nbrokers = 3\n\n[[topics]]\nname = 'orders'\npartitions = 4\nreplication_factor = 2\n"

MISTAKES = {
    "broker-id-beyond-int": ("[cluster]\nbrokers = [1, 99999999999]\n",
                             "s.toml: [cluster]: brokers: must be at most 2147483647, got 99999999999"),
    "partitions-beyond-int": ("[cluster]\nbrokers = 3\n[[topics]]\nname = 'big'\npartitions = 2147483648\n",
                              "s.toml: topic 1 (big): partitions: must be at most 2147483647, got 2147483648"),
    "rack-key-not-a-broker-id": ("[cluster]\nbrokers = 3\n[cluster.racks]\n'²' = 'a'\n",
                                 "s.toml: [cluster]: racks: expected broker ids as keys, got '²'"),
    "partition-beyond-int": (CLUSTER + "[[steps]]\naction = 'elect_leaders'\npartitions = ['orders-2147483648']\n",
                             "s.toml: step 1 (elect_leaders): partitions: 'orders-2147483648': the partition id must "
                             "be an integer from 0 to 2147483647"),
    "produce-partition-beyond-int": (CLUSTER + "[[steps]]\naction = 'produce'\ntopic = 'orders'\npartition = 2147483648\n",
                                     "s.toml: step 1 (produce): partition: must be at most 2147483647, got 2147483648"),
    "partitions-led-key": (CLUSTER + "[[steps]]\naction = 'expect'\npartitions_led = { '99999999999' = 1 }\n",
                           "s.toml: step 1 (expect): partitions_led: expected broker ids as keys, got '99999999999'"),
    "unknown-topic-config": ("[cluster]\nbrokers = 3\n[[topics]]\nname = 'c'\nconfig = { 'foo.bar' = 1 }\n",
                             "s.toml: topic 1 (c): config: Unknown topic config name: foo.bar"),
    "topic-config-of-the-wrong-type": (CLUSTER + "[[steps]]\naction = 'set_topic_config'\ntopic = 'orders'\n"
                                       "config = { 'retention.ms' = 'abc' }\n",
                                       "s.toml: step 1 (set_topic_config): config: Invalid value abc for configuration "
                                       "retention.ms: Not a number of type LONG"),
}


@pytest.mark.parametrize(("text", "message"), MISTAKES.values(), ids=MISTAKES.keys())
def test_the_loader_refuses_it_naming_the_place_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    found = [p.replace(str(path), "s.toml") for p in raised.value.problems]
    assert len(found) == 1 and found[0].startswith(message), found


def test_a_seed_may_be_any_toml_integer(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("[cluster]\nbrokers = 3\nseed = 9223372036854775807\n")
    assert load_scenario(path).cluster.seed == 2**63 - 1
