"""How much outside input kctl parses: size and nesting bounds, and the bounded JSON and TOML loaders.

Bytes from outside the process (files given on the command line, ZooKeeper data, network frames)
are parsed by decoders that recurse once per nesting level: :func:`json.loads` and
:func:`tomllib.loads` raise :class:`RecursionError` near the interpreter's recursion limit, and a
value nested a thousand deep that does parse makes any later ``repr`` or ``json.dumps`` of it fail
the same way. kctl's own documents are a few levels deep, so every such decoder refuses a document
larger than its size bound or nested deeper than :data:`MAX_DEPTH`, as one
:class:`DocumentError` naming the problem, before the content reaches code that trusts it.
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from kctl.errors import KctlError

MAX_DEPTH = 32
"""The deepest nesting of containers accepted in a document (kctl's own scenario files need 5)."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest file kctl reads (a reassignment file of a million partitions is about 70 MiB;
one of a scenario is a few KiB)."""


_LONG_NUMBER = f"a number has more than {sys.get_int_max_str_digits()} digits"


class DocumentError(KctlError, ValueError):
    """Bytes that kctl will not parse: too large, nested too deeply, not UTF-8, or not the syntax."""


def check_depth(value: object, limit: int = MAX_DEPTH, containers: Collection[type] = (list, dict)) -> None:
    """Refuse ``value`` when its ``containers`` nest more than ``limit`` deep (a scalar is depth 0).

    Walks one level at a time, without recursion, so that the check itself cannot overflow; the
    keys of a mapping are walked too (a msgpack key may be an array).
    """
    level: list[Any] = [value] if type(value) in containers else []
    for _ in range(limit):
        if not level:
            return
        level = [
            child
            for item in level
            for child in (_pairs(item) if type(item) is dict else item)
            if type(child) in containers
        ]
    if level:
        raise DocumentError(f"nested more than {limit} levels deep")


def _pairs(mapping: dict[Any, Any]) -> list[Any]:
    return [*mapping, *mapping.values()]


def decode_text(data: bytes, max_bytes: int) -> str:
    """``data`` as UTF-8 text, refused when longer than ``max_bytes``."""
    if len(data) > max_bytes:
        raise DocumentError(f"{len(data)} bytes, over the limit of {max_bytes}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"not UTF-8: byte {exc.start} is {data[exc.start : exc.start + 1]!r}") from None


def _parse(loads: Callable[[str], Any], text: str, syntax: str) -> Any:
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except tomllib.TOMLDecodeError as exc:
        raise DocumentError(f"not valid TOML: {exc}") from None
    except ValueError:  # an integer of more digits than int() converts
        raise DocumentError(f"not valid {syntax}: {_LONG_NUMBER}") from None
    except RecursionError:
        raise DocumentError(f"not valid {syntax}: nested too deeply to parse") from None


def parse_json(text: str) -> Any:
    """:func:`json.loads`, with every failure (its recursion too) a :class:`DocumentError`; the
    value may still nest deeply: :func:`load_json` checks that, where the caller does not check
    every value's type itself."""
    return _parse(json.loads, text, "JSON")


def load_json(data: bytes, max_bytes: int = MAX_FILE_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """A JSON document from UTF-8 bytes, bounded in size and depth."""
    value = parse_json(decode_text(data, max_bytes))
    check_depth(value, max_depth)
    return value


def load_toml(data: bytes, max_bytes: int = MAX_FILE_BYTES, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """A TOML document from UTF-8 bytes, bounded in size and depth (dotted keys nest tables too)."""
    value: dict[str, Any] = _parse(tomllib.loads, decode_text(data, max_bytes), "TOML")
    check_depth(value, max_depth)
    return value


def read_file(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """A file's bytes; :class:`DocumentError` when it is larger than ``max_bytes`` (read no further),
    :class:`OSError` when it cannot be read."""
    with open(path, "rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise DocumentError(f"larger than the limit of {max_bytes} bytes")
    return data


__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "DocumentError",
    "check_depth",
    "decode_text",
    "load_json",
    "load_toml",
    "parse_json",
    "read_file",
]
