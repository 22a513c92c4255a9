"""Scenarios for ``kctl sim`` and ``kctl demo``: a TOML timeline of operations and faults played on
a simulated :class:`~kctl.cluster.EmbeddedCluster`, with a report of what the cluster went through."""

from kctl.sim.runner import Report, run_scenario
from kctl.sim.scenario import Scenario, ScenarioError, load_scenario, parse_scenario

__all__ = ["Report", "Scenario", "ScenarioError", "load_scenario", "parse_scenario", "run_scenario"]
