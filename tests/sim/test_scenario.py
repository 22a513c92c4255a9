"""The scenario loader: what a valid file becomes, and one test per kind of mistake, each reported
with the file, the place and the field before anything runs (``kctl sim`` exits 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kctl.cli import main
from kctl.model import TopicPartition
from kctl.sim import ScenarioError, load_scenario
from kctl.sim.scenario import ACTIONS, ClusterSpec, Step, TopicSpec

CLUSTER = """
[cluster]
brokers = 3

[[topics]]
name = "orders"
partitions = 4
replication_factor = 2
"""


def problems(tmp_path: Path, text: str) -> list[str]:
    """The problems ``load_scenario`` reports for ``text``, with the file name shortened to ``s.toml``."""
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    return [p.replace(str(path), "s.toml") for p in raised.value.problems]


def test_a_valid_scenario_is_parsed_into_checked_values(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text('name = "story"\n' + CLUSTER + """
[cluster.config]
"unclean.leader.election.enable" = true

[[topics]]
name = "pinned"
assignment = [[1, 2], [2, 3]]
config = { "unclean.leader.election.enable" = false }

[[steps]]
at = 5
action = "kill_broker"
broker = 2
wait = false
note = "why"

[[steps]]
after = 1.5
action = "reassign"
partitions = { "orders-1" = [3, 1] }
timeout = 30

[[steps]]
action = "expect"
leaders = { "orders-0" = -1 }
partitions_led = { 3 = 2 }
""")
    scenario = load_scenario(path)
    assert scenario.name == "story" and scenario.source == str(path)
    assert scenario.cluster == ClusterSpec((1, 2, 3), None, (1, 2, 3), 0, {"unclean.leader.election.enable": True})
    assert scenario.topics == (
        TopicSpec("orders", 4, 2),
        TopicSpec("pinned", assignment={0: (1, 2), 1: (2, 3)}, config={"unclean.leader.election.enable": False}),
    )
    assert scenario.topics[1].create_arguments() == {
        "name": "pinned", "assignment": {0: (1, 2), 1: (2, 3)}, "config": {"unclean.leader.election.enable": False},
    }
    assert scenario.steps == (
        Step(1, "kill_broker", {"broker": 2}, at=5.0, note="why", wait=False),
        Step(2, "reassign", {"partitions": {TopicPartition("orders", 1): (3, 1)}}, after=1.5, timeout=30.0),
        Step(3, "expect", {"leaders": {TopicPartition("orders", 0): -1}, "partitions_led": {3: 2}}),
    )


def test_racks_and_controllers_have_short_forms(tmp_path: Path) -> None:
    path = tmp_path / "racks.toml"
    path.write_text("[cluster]\nbrokers = [10, 11, 12, 13]\nracks = 2\ncontrollers = 2\nseed = 9\n")
    cluster = load_scenario(path).cluster
    assert cluster == ClusterSpec((10, 11, 12, 13), {10: "r1", 11: "r2", 12: "r1", 13: "r2"}, (10, 11), 9, {})
    path.write_text('[cluster]\nbrokers = 2\nracks = { 1 = "east", 2 = "west" }\ncontrollers = [2]\n')
    assert load_scenario(path).cluster.racks == {1: "east", 2: "west"}


MISTAKES = {
    "toml-syntax": ("[cluster\nbrokers = 3\n", "s.toml: not valid TOML: Expected ']' at the end of a table declaration (at line 1, column 9)"),
    "missing-cluster": ("[[steps]]\naction = 'advance'\nseconds = 1\n", "s.toml: top level: missing the [cluster] table"),
    "unknown-top-level-key": ("stpes = []\n" + CLUSTER,
                              "s.toml: top level: unknown field 'stpes' (did you mean 'steps'?); "
                              "expected name, description, cluster, topics, steps"),
    "bad-broker-count": ("[cluster]\nbrokers = 0\n", "s.toml: [cluster]: brokers: must be at least 1, got 0"),
    "unknown-cluster-key": ("[cluster]\nbrokers = 3\nrack = 2\n",
                            "s.toml: [cluster]: unknown field 'rack' (did you mean 'racks'?); "
                            "expected brokers, racks, controllers, seed, config"),
    "racks-do-not-match-brokers": ("[cluster]\nbrokers = 3\nracks = ['a', 'b']\n",
                                   "s.toml: [cluster]: racks: 2 racks for 3 brokers: give one rack per broker"),
    "too-many-controllers": ("[cluster]\nbrokers = 2\ncontrollers = 3\n",
                             "s.toml: [cluster]: controllers: 3 controller candidates but only 2 brokers"),
    "unknown-config-property": ("[cluster]\nbrokers = 3\nconfig = { 'unclean.leader.election' = true }\n",
                                "s.toml: [cluster]: config: Unknown configuration 'unclean.leader.election'; known properties: "),
    "bad-config-value": ("[cluster]\nbrokers = 3\nconfig = { 'num.partitions' = 'many' }\n",
                         "s.toml: [cluster]: config: Invalid value 'many' for configuration num.partitions: expected an integer"),
    "rf-above-broker-count": ("[cluster]\nbrokers = 3\n[[topics]]\nname = 'big'\npartitions = 1\nreplication_factor = 4\n",
                              "s.toml: topic 1 (big): replication_factor: replication factor 4 is larger than the number of brokers (3)"),
    "assignment-with-unknown-broker": ("[cluster]\nbrokers = 3\n[[topics]]\nname = 'p'\nassignment = [[1, 2], [2, 7]]\n",
                                       "s.toml: topic 1 (p): assignment: partition 1: unknown broker 7; the brokers are 1-3"),
    "assignment-and-partitions": ("[cluster]\nbrokers = 3\n[[topics]]\nname = 'p'\nassignment = [[1]]\npartitions = 2\n",
                                  "s.toml: topic 1 (p): partitions: give either assignment or partitions and replication_factor"),
    "invalid-topic-name": ("[cluster]\nbrokers = 3\n[[topics]]\nname = 'a/b'\n",
                           "s.toml: topic 1 (a/b): name: Topic name \"a/b\" is illegal, it contains a character other "
                           "than ASCII alphanumerics, '.', '_' and '-'"),
    "duplicate-topic": (CLUSTER + "[[topics]]\nname = 'orders'\n",
                        "s.toml: topic 2 (orders): name: topic 'orders' already exists at this step"),
    "missing-action": (CLUSTER + "[[steps]]\nbroker = 1\n", "s.toml: step 1: action: missing; actions: "),
    "unknown-action": (CLUSTER + "[[steps]]\naction = 'kil_broker'\nbroker = 1\n",
                       "s.toml: step 1: action: unknown action 'kil_broker' (did you mean 'kill_broker'?); actions: "),
    "unknown-step-field": (CLUSTER + "[[steps]]\naction = 'kill_broker'\nbroker = 1\nbrokr = 2\n",
                           "s.toml: step 1 (kill_broker): unknown field 'brokr' (did you mean 'broker'?); "
                           "expected broker, action, at, after, note, wait, timeout"),
    "missing-required-field": (CLUSTER + "[[steps]]\naction = 'kill_broker'\n", "s.toml: step 1 (kill_broker): broker: required"),
    "bad-field-type": (CLUSTER + "[[steps]]\naction = 'kill_broker'\nbroker = 'three'\n",
                       "s.toml: step 1 (kill_broker): broker: expected an integer, got 'three' (string)"),
    "unknown-broker": (CLUSTER + "[[steps]]\naction = 'shutdown_broker'\nbroker = 9\n",
                       "s.toml: step 1 (shutdown_broker): broker: unknown broker 9; the brokers are 1-3"),
    "broker-already-running": (CLUSTER + "[[steps]]\naction = 'start_broker'\nbroker = 2\n",
                               "s.toml: step 1 (start_broker): broker: broker 2 is already running at this step"),
    "broker-already-stopped": (CLUSTER + "[[steps]]\naction = 'kill_broker'\nbroker = 2\n"
                               "[[steps]]\naction = 'fail_log_dir'\nbroker = 2\n",
                               "s.toml: step 2 (fail_log_dir): broker: broker 2 is not running at this step"),
    "unknown-topic": (CLUSTER + "[[steps]]\naction = 'delete_topic'\ntopic = 'order'\n",
                      "s.toml: step 1 (delete_topic): topic: unknown topic 'order' (did you mean 'orders'?); "
                      "topics at this step: orders"),
    "topic-deleted-earlier": (CLUSTER + "[[steps]]\naction = 'delete_topic'\ntopic = 'orders'\n"
                              "[[steps]]\naction = 'produce'\ntopic = 'orders'\n",
                              "s.toml: step 2 (produce): topic: unknown topic 'orders'; topics at this step: none"),
    "unknown-partition": (CLUSTER + "[[steps]]\naction = 'expect'\nleaders = { 'orders-4' = 1 }\n",
                          "s.toml: step 1 (expect): leaders: orders-4 does not exist: orders has partitions 0-3"),
    "malformed-partition": (CLUSTER + "[[steps]]\naction = 'elect_leaders'\npartitions = ['orders']\n",
                            "s.toml: step 1 (elect_leaders): partitions: 'orders' is not of the form <topic>-<partition>"),
    "at-and-after": (CLUSTER + "[[steps]]\naction = 'advance'\nseconds = 1\nat = 5\nafter = 1\n",
                     "s.toml: step 1 (advance): after: give either at or after, not both"),
    "at-goes-back": (CLUSTER + "[[steps]]\nat = 10\naction = 'advance'\nseconds = 1\n"
                     "[[steps]]\nat = 2\naction = 'advance'\nseconds = 1\n",
                     "s.toml: step 2 (advance): at: 2 s is before an earlier step's at (10 s); "
                     "steps run in the order they are written"),
    "negative-time": (CLUSTER + "[[steps]]\naction = 'advance'\nseconds = -1\n",
                      "s.toml: step 1 (advance): seconds: must not be negative, got -1"),
    "wait-on-a-step-that-does-not-wait": (CLUSTER + "[[steps]]\naction = 'advance'\nseconds = 1\nwait = true\n",
                                          "s.toml: step 1 (advance): unknown field 'wait'; expected seconds, action, at, after, note"),
    "one-of-two-fields": (CLUSTER + "[[steps]]\naction = 'cancel_reassignment'\ntopic = 'orders'\npartitions = ['orders-0']\n",
                          "s.toml: step 1 (cancel_reassignment): topic: give only one of partitions or topic"),
    "whole-topic-move-onto-too-few-brokers": (CLUSTER + "[[steps]]\naction = 'reassign'\ntopic = 'orders'\nbrokers = [3]\n",
                                              "s.toml: step 1 (reassign): brokers: orders has replication factor 2 "
                                              "but only 1 target brokers"),
    "bad-election-kind": (CLUSTER + "[[steps]]\naction = 'elect_leaders'\nkind = 'dirty'\n",
                          "s.toml: step 1 (elect_leaders): kind: expected preferred or unclean, got 'dirty'"),
    "bad-dynamic-config": (CLUSTER + "[[steps]]\naction = 'update_config'\nproperties = { 'leader.imbalance.per.broker.percentage' = 101 }\n",
                           "s.toml: step 1 (update_config): properties: Invalid value 101 for configuration "
                           "leader.imbalance.per.broker.percentage: must be in [0, 100]"),
    "no-controller-to-fail-over-to": ("[cluster]\nbrokers = 3\ncontrollers = 1\n[[steps]]\naction = 'kill_controller'\n",
                                      "s.toml: step 1 (kill_controller): action: needs a second running controller "
                                      "candidate to take over; running candidates: 1"),
    "no-controller-left": ("[cluster]\nbrokers = 3\ncontrollers = 2\n[[steps]]\naction = 'kill_broker'\nbroker = 1\n"
                           "[[steps]]\naction = 'shutdown_broker'\nbroker = 2\n",
                           "s.toml: step 2 (shutdown_broker): broker: broker 2 is the last running controller candidate: "
                           "the cluster would have no controller (list more candidates in [cluster] controllers)"),
    "empty-expect": (CLUSTER + "[[steps]]\naction = 'expect'\n",
                     "s.toml: step 1 (expect): action: an expect step needs something to check: invariants, "),
    "unknown-metric": (CLUSTER + "[[steps]]\naction = 'expect'\nmetrics = { OfflinePartitionCount = 0 }\n",
                       "s.toml: step 1 (expect): metrics: unknown metric 'OfflinePartitionCount' "
                       "(did you mean 'OfflinePartitionsCount'?); metrics: ActiveControllerCount, "),
    "invariants-false": (CLUSTER + "[[steps]]\naction = 'expect'\ninvariants = false\n",
                         "s.toml: step 1 (expect): invariants: can only be true (invariants are checked after every step anyway)"),
}


@pytest.mark.parametrize("text, message", MISTAKES.values(), ids=MISTAKES.keys())
def test_each_kind_of_mistake_is_reported_with_file_place_and_field(tmp_path: Path, text: str, message: str) -> None:
    found = problems(tmp_path, text)
    assert len(found) == 1, found
    assert found[0].startswith(message), found[0]


def test_a_controller_expectation_must_name_a_candidate(tmp_path: Path) -> None:
    found = problems(tmp_path, "[cluster]\nbrokers = 4\ncontrollers = [1, 2]\n[[steps]]\naction = 'expect'\ncontroller = 3\n")
    assert found == ["s.toml: step 1 (expect): controller: broker 3 is not a controller candidate; the candidates are 1, 2"]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    found = problems(tmp_path, CLUSTER + """
[[steps]]
action = "kill_broker"
broker = 7

[[steps]]
action = "advance"

[[steps]]
action = "expect"
offline_partitions = -1
""")
    assert found == [
        "s.toml: step 1 (kill_broker): broker: unknown broker 7; the brokers are 1-3",
        "s.toml: step 2 (advance): seconds: required",
        "s.toml: step 3 (expect): offline_partitions: must be at least 0, got -1",
    ]


def test_a_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"nope\.toml: cannot read the scenario: No such file or directory"):
        load_scenario(tmp_path / "nope.toml")


def test_kctl_sim_exits_2_on_an_invalid_scenario_before_running_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(CLUSTER + "[[steps]]\naction = 'kill_broker'\nbroker = 9\n[[steps]]\naction = 'explode'\n")
    assert main(["sim", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"kctl sim: {path} is not a valid scenario:",
        f"  {path}: step 1 (kill_broker): broker: unknown broker 9; the brokers are 1-3",
        f"  {path}: step 2: action: unknown action 'explode'; actions: " + ", ".join(ACTIONS),
    ]
