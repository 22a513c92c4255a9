"""docs/fleet.md documents every grid field and every column of the dataset, and its example grid is valid."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from kctl.bench.grid import AXES, CLUSTER_FIELDS, FAULT_FIELDS, TOP_FIELDS, TOPIC_FIELDS, parse_grid
from kctl.bench.dataset import COLUMN_TYPES
from kctl.plugins import PluginHost

DOC = Path(__file__).parents[2] / "docs" / "fleet.md"


def test_every_grid_field_and_row_column_has_a_line() -> None:
    text = DOC.read_text()
    for name in (*TOP_FIELDS, *CLUSTER_FIELDS, *TOPIC_FIELDS, *FAULT_FIELDS, *AXES, *COLUMN_TYPES):
        assert f"| `{name}` |" in text, name


def test_the_documented_grid_is_valid(installed_plugins: PluginHost) -> None:
    (block,) = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    grid = parse_grid(tomllib.loads(block), "docs/fleet.md")
    assert len(grid.variants()) == 4 and len(grid.seeds) == 1000
