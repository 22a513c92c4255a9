"""Grid files and the scenario generators: checked before anything runs, deterministic by seed."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from kctl.bench.grid import SELECTOR_PROPERTY, GridError, load_grid, parse_grid
from kctl.bench.scenarios import FAULT_NOTE, RESTART_NOTE, SAMPLE_NOTE, generate, scenario_toml
from kctl.plugins import PluginHost
from kctl.sim import parse_scenario

EXAMPLES = Path(__file__).parents[2] / "examples"

WIDE: dict[str, Any] = {
    "seeds": 200, "duration": 400, "sample_interval": 50,
    "cluster": {"brokers": {"between": [3, 8]}, "racks": {"one_of": [0, 2, 3]}, "controllers": {"between": [2, 3]},
                "config": {"unclean.leader.election.enable": {"one_of": [True, False]}}},
    "topics": {"count": {"between": [1, 3]}, "partitions": {"between": [1, 12]},
               "replication_factor": {"between": [1, 3]}},
    "faults": {"count": {"between": [0, 8]}, "kinds": ["kill_broker", "shutdown_broker", "kill_controller",
                                                       "fail_log_dir"],
               "window": {"between": [50, 300]}, "downtime": {"between": [0, 500]}, "max_down": {"between": [1, 3]}},
    "grid": {"selector": ["offline"], "auto.leader.rebalance.enable": [True, False]},
}


def problems(data: dict[str, Any], plugins: PluginHost | None = None) -> list[str]:
    with pytest.raises(GridError) as error:
        parse_grid(data, "g.toml", plugins)
    return error.value.problems


def test_the_example_grids_are_valid(installed_plugins: PluginHost) -> None:
    grids = sorted(EXAMPLES.glob("fleet-*.toml"))
    assert grids, "no examples/fleet-*.toml"
    for path in grids:
        grid = load_grid(path, installed_plugins)
        assert len(grid.seeds) >= 1000 and {v.selector for v in grid.variants()} == {"offline", "least-loaded"}


def test_every_problem_is_reported_at_once_with_its_place() -> None:
    found = problems({
        "seed": 3,
        "cluster": {"brokers": {"between": [2, 4]}, "rack": 2},
        "topics": {"replication_factor": 3, "partitions": 0},
        "faults": {"kinds": ["kill_broker", "power_cut"]},
        "grid": {"selector": ["offline", "nope"], "engine": ["fortran"], "unclean.leader.election.enabel": [True]},
    })
    assert found == [
        "g.toml: top level: unknown key 'seed' (did you mean 'seeds'?); expected name, description, seeds, "
        "duration, sample_interval, cluster, topics, faults, grid, scenarios",
        "g.toml: [cluster]: unknown key 'rack' (did you mean 'racks'?); expected brokers, racks, controllers, config",
        "g.toml: [topics] partitions: must be at least 1, got 0",
        "g.toml: [topics] replication_factor: impossible shape: the replication factor can be 3 but the brokers "
        "can be as few as 2",
        "g.toml: [faults] kinds: unknown fault kind 'power_cut'; kinds: kill_broker, shutdown_broker, "
        "kill_controller, fail_log_dir",
        "g.toml: [grid]: unknown key 'unclean.leader.election.enabel' (did you mean "
        "'unclean.leader.election.enable'?); " + found[5].split("; ", 1)[1],
        "g.toml: [grid] selector: kctl.leader.selector.offline = 'nope': no leader selector is registered as "
        "'nope'; offline selectors: offline (a plugin's selector needs its distribution installed)",
        "g.toml: [grid] engine: unknown engine 'fortran'; engines: reference, rust",
    ]


@pytest.mark.parametrize(("data", "expected"), [
    ({"cluster": {"brokers": 2, "controllers": 3}},
     "[cluster] controllers: can be 3 controller candidates but the brokers can be as few as 2"),
    ({"cluster": {"controllers": 1}, "faults": {"kinds": ["kill_controller"]}},
     "[faults] kinds: kill_controller needs at least 2 controller candidates ([cluster] controllers)"),
    ({"duration": 100, "faults": {"window": 200}},
     "[faults] window: faults could begin at 200 s, after the end of the run (duration = 100)"),
    ({"cluster": {"config": {"unclean.leader.election.enable": "maybe"}}},
     "[cluster] config unclean.leader.election.enable: Invalid value 'maybe' for configuration "
     "unclean.leader.election.enable: expected a boolean (true or false)"),
    ({"cluster": {"brokers": {"between": [5, 3]}}}, "[cluster] brokers: between [5, 3]: the low end is above the high end"),
    ({"cluster": {"brokers": {"some_of": [1]}}},
     "[cluster] brokers: expected a value, { between = [low, high] } or { one_of = [...] }, got {'some_of': [1]}"),
    ({"grid": {"selector": "offline"}}, "[grid] selector: expected a non-empty array of values to cross, got 'offline'"),
    ({"grid": {"selector": ["preferred"]}},
     "[grid] selector: kctl.leader.selector.offline = 'preferred': 'preferred' is a leader selector for "
     "preferred elections, not offline ones; offline selectors: offline"),
    ({"grid": {"kctl.leader.selector.reassign": ["reasign"]}},
     "[grid] kctl.leader.selector.reassign: kctl.leader.selector.reassign = 'reasign': no leader selector is "
     "registered as 'reasign' (did you mean 'reassign'?); reassign selectors: reassign (a plugin's selector needs "
     "its distribution installed)"),
    ({"cluster": {"config": {"kctl.leader.selector.preferred": {"one_of": ["preferred", "offline"]}}}},
     "[cluster] config kctl.leader.selector.preferred: kctl.leader.selector.preferred = 'offline': 'offline' is a "
     "leader selector for offline elections, not preferred ones; preferred selectors: preferred"),
    ({"cluster": {"config": {SELECTOR_PROPERTY: "offline"}}},
     f"[cluster] config {SELECTOR_PROPERTY}: use the [grid] selector axis instead"),
    ({"seeds": {"first": 5, "size": 3}}, "seeds: unknown key 'size'; expected first, count"),
])
def test_a_grid_that_cannot_run_is_rejected(data: dict[str, Any], expected: str) -> None:
    assert problems(data) == [f"g.toml: {expected}"]


def test_a_plugin_selector_needs_its_plugin() -> None:
    (problem,) = problems({"grid": {"selector": ["least-loaded"]}}, PluginHost(load_entrypoints=False))
    assert "no leader selector is registered as 'least-loaded'" in problem
    assert "needs its distribution installed" in problem


def test_variants_cross_the_axes_in_file_order() -> None:
    grid = parse_grid(WIDE | {"grid": {"selector": ["offline"], "engine": ["reference", "rust"],
                                       "auto.leader.rebalance.enable": [True, False]}})
    assert [v.label for v in grid.variants()] == [
        "offline, reference, auto.leader.rebalance.enable=true", "offline, reference, auto.leader.rebalance.enable=false",
        "offline, rust, auto.leader.rebalance.enable=true", "offline, rust, auto.leader.rebalance.enable=false",
    ]
    assert grid.variants()[1].properties == {SELECTOR_PROPERTY: "offline", "auto.leader.rebalance.enable": False}
    assert [v.label for v in parse_grid({}).variants()] == ["default"]


def test_a_seed_always_draws_the_same_scenario_and_every_variant_plays_it() -> None:
    grid = parse_grid(WIDE)
    first, second = grid.variants()
    for seed in range(20):
        a, b = generate(grid, seed, first), generate(grid, seed, second)
        assert a == generate(grid, seed, first)
        assert a["steps"] == b["steps"] and a["topics"] == b["topics"]
        assert a["cluster"]["config"]["auto.leader.rebalance.enable"] is True
        assert b["cluster"]["config"]["auto.leader.rebalance.enable"] is False
    assert len({str(generate(grid, seed, first)) for seed in range(20)}) == 20


def test_generated_schedules_are_valid_scenarios_within_the_limits() -> None:
    grid = parse_grid(WIDE)
    kinds = set()
    for seed in grid.seeds:
        data = generate(grid, seed, grid.variants()[0])
        scenario = parse_scenario(data, f"seed {seed}")  # kctl sim's own checks, e.g. a controller is left
        brokers = data["cluster"]["brokers"]
        assert all(t["replication_factor"] <= brokers for t in data["topics"])
        times = [s["at"] for s in data["steps"]]
        assert times == sorted(times) and times[-1] == grid.duration
        down: set[int] = set()
        max_down = 0
        for step in scenario.steps:
            broker = step.args.get("broker")
            if step.note == FAULT_NOTE and step.action != "kill_controller":
                assert broker not in down
                down.add(broker)
                kinds.add(step.action)
            elif step.note == RESTART_NOTE and step.action == "start_broker":
                down.remove(broker)
            else:
                assert step.note in (FAULT_NOTE, RESTART_NOTE, SAMPLE_NOTE)
            max_down = max(max_down, len(down))
        assert max_down <= 3
    assert kinds == {"kill_broker", "shutdown_broker", "fail_log_dir"}


def test_a_generated_scenario_is_a_kctl_sim_file() -> None:
    grid = parse_grid(WIDE)
    data = generate(grid, 7, grid.variants()[1])
    assert tomllib.loads(scenario_toml(data)) == data
