"""Files handed to kctl on the command line, hostile: the admin tools' reassignment and election
JSON, scenario TOML and fleet grid TOML. Random bytes, any document, mutated valid files, deep
nesting, non-UTF-8 and huge files give the loader's own error (``AdminCommandFailedError``,
``ScenarioError``, ``GridError``), and from the CLI a clean message, never a traceback."""

from __future__ import annotations

import contextlib
import json
import math
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kctl import cli
from kctl.bench.grid import GridError, load_grid
from kctl.errors import AdminCommandFailedError
from kctl.limits import MAX_FILE_BYTES
from kctl.sim.scenario import ScenarioError, load_scenario
from kctl.tools.files import parse_election_partitions, parse_reassignment, parse_topics_to_move, read_json

from tests.support.hostile_inputs import deep_json, fuzz, hostile_json, mutated, valid_json_documents, with_a_replaced_value

EXAMPLES = Path(__file__).parents[2] / "examples"
SCENARIOS = sorted(p.read_bytes() for p in EXAMPLES.glob("*.toml") if "fleet" not in p.name)
GRIDS = sorted(p.read_bytes() for p in EXAMPLES.glob("fleet*.toml"))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[bytes], Path]]:
    """Write bytes to a file of the module's directory (always the same one: each example overwrites it)."""
    path = tmp_path_factory.mktemp("hostile-files") / "input"

    def write(data: bytes) -> Path:
        path.write_bytes(data)
        return path

    yield write


def huge(path: Path) -> Path:
    """A sparse file one byte over the limit (no disk used)."""
    with path.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    return path


HOSTILE_FILES: dict[str, bytes] = {
    "deep_array": deep_json(100_000),
    "deep_in_partitions": b'{"version":1,"partitions":' + deep_json(990) + b"}",
    "not_utf8": b'{"version":1,"partitions":[{"topic":"\xff","partition":0,"replicas":[1]}]}',
    "utf16": json.dumps({"version": 1, "partitions": []}).encode("utf-16"),
    "long_number": b'{"version":1,"partitions":[{"topic":"t","partition":' + b"1" * 5000 + b',"replicas":[1]}]}',
}


# --- Admin tools' JSON ------------------------------------------------------------------------------------


def admin_file_is_clean(path: Path) -> None:
    for parse in (parse_reassignment, parse_election_partitions, parse_topics_to_move):
        try:
            parse(read_json(path), str(path))
        except AdminCommandFailedError as exc:
            assert str(exc).startswith(str(path)) or str(exc).startswith(f"cannot read {path}")


@pytest.mark.parametrize("data", HOSTILE_FILES.values(), ids=HOSTILE_FILES.keys())
def test_admin_files_that_cannot_be_read_are_refused(files: Callable[[bytes], Path], data: bytes) -> None:
    with pytest.raises(AdminCommandFailedError, match=r"input: (not valid JSON|not UTF-8|nested)"):
        read_json(files(data))


def test_huge_admin_file_is_refused_unread(files: Callable[[bytes], Path]) -> None:
    with pytest.raises(AdminCommandFailedError, match=f"larger than the limit of {MAX_FILE_BYTES} bytes"):
        read_json(huge(files(b"")))


@pytest.mark.parametrize("command", [
    ["reassign", "--execute"],
    ["reassign", "--generate", "--broker-list", "1", "--topics-to-move-json-file"],
    ["elect-leaders", "--election-type", "preferred", "--path-to-json-file"],
])
@pytest.mark.parametrize("data", HOSTILE_FILES.values(), ids=HOSTILE_FILES.keys())
def test_admin_tools_report_an_unreadable_file_in_one_line(
    files: Callable[[bytes], Path], capsys: pytest.CaptureFixture[str], command: list[str], data: bytes
) -> None:
    path = files(data)
    status = cli.main([command[0], "--zk", "127.0.0.1:1", "--zk-timeout", "1", *command[1:], str(path)])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith(f"kctl: error: {path}: ") and err.count("\n") == 1, err


@fuzz(150)
@given(data=hostile_json | with_a_replaced_value(valid_json_documents()) | mutated(valid_json_documents()))
def test_hostile_admin_files(files: Callable[[bytes], Path], data: bytes) -> None:
    admin_file_is_clean(files(data))


# --- Scenario and grid TOML -------------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    """``value`` as TOML (tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if not isinstance(value, float) or math.isfinite(value) else "nan"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(table: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in table.items())


toml_values = st.recursive(
    st.booleans() | st.integers(-3, 40) | st.floats(-1e3, 1e3)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
    | st.sampled_from(["kill-broker", "reassign", "orders", "preferred", "least-loaded"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


DEEP_TOML: dict[str, bytes] = {
    "arrays": b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "inline_tables": b"a = " + b"{b = " * 3000 + b"1" + b"}" * 3000 + b"\n",
    "dotted_keys": b"a" + b".a" * 5000 + b" = 1\n",
    "table_headers": b"[" + b".".join([b"t"] * 5000) + b"]\n",
    "not_utf8": b'name = "\xff"\n',
    "long_number": b"[cluster]\nbrokers = " + b"1" * 5000 + b"\n",
}

LOADERS: dict[str, tuple[Callable[[Path], object], type[ScenarioError]]] = {
    "scenario": (load_scenario, ScenarioError),
    "grid": (load_grid, GridError),
}


@pytest.mark.parametrize("loader, error", LOADERS.values(), ids=LOADERS.keys())
@pytest.mark.parametrize("data", DEEP_TOML.values(), ids=DEEP_TOML.keys())
def test_toml_that_cannot_be_read_is_refused(
    files: Callable[[bytes], Path], loader: Callable[[Path], object], error: type[ScenarioError], data: bytes
) -> None:
    with pytest.raises(error) as raised:
        loader(files(data))
    assert len(raised.value.problems) == 1 and raised.value.problems[0].startswith(f"{files(data)}: ")


@pytest.mark.parametrize("loader, error", LOADERS.values(), ids=LOADERS.keys())
def test_huge_toml_is_refused_unread(
    files: Callable[[bytes], Path], loader: Callable[[Path], object], error: type[ScenarioError]
) -> None:
    with pytest.raises(error, match=f"larger than the limit of {MAX_FILE_BYTES} bytes"):
        loader(huge(files(b"")))


@pytest.mark.parametrize("command", [["sim"], ["fleet", "scenario", "--seed", "1"]])
@pytest.mark.parametrize("data", DEEP_TOML.values(), ids=DEEP_TOML.keys())
def test_sim_and_fleet_report_an_unreadable_file_as_invalid(
    files: Callable[[bytes], Path], capsys: pytest.CaptureFixture[str], command: list[str], data: bytes
) -> None:
    path = files(data)
    assert cli.main([*command, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kctl {command[0]}: {path} is not a valid ") and "Traceback" not in err, err


LOADED: dict[str, tuple[Callable[[Path], object], type[Exception], list[bytes]]] = {
    "scenario": (load_scenario, ScenarioError, SCENARIOS),
    "grid": (load_grid, GridError, GRIDS),
}


@pytest.mark.parametrize("loader, error, originals", LOADED.values(), ids=LOADED.keys())
@fuzz(200)
@given(data=st.data())
def test_hostile_toml(
    files: Callable[[bytes], Path], loader: Callable[[Path], object], error: type[Exception], originals: list[bytes],
    data: st.DataObject,
) -> None:
    document = data.draw(
        st.binary(max_size=300)
        | mutated(originals)
        | with_a_replaced_value(originals, toml_values, tomllib.loads, toml_document)
        | st.dictionaries(st.text(max_size=8), toml_values, max_size=6).map(lambda t: toml_document(t).encode())
    )
    with contextlib.suppress(error):  # anything else fails the test
        loader(files(document))
