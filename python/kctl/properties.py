"""Kafka's properties files (``server.properties``), read as Java's ``Properties.load`` reads them.

``#`` and ``!`` start comments; a line holds ``NAME=VALUE``, ``NAME: VALUE`` or ``NAME VALUE``; a
trailing backslash continues it on the next line; backslash escapes (``\\t``, ``\\uXXXX``, ``\\=``)
work in names and values. kctl reads the file as UTF-8 (Java reads ISO-8859-1) and refuses one
larger than :data:`MAX_PROPERTIES_BYTES`: every problem is an
:class:`~kctl.errors.InvalidConfigurationError` naming the file.
"""

from __future__ import annotations

import re

from kctl.errors import InvalidConfigurationError

MAX_PROPERTIES_BYTES = 1 << 20
"""A properties file larger than this is refused (it is not a broker's configuration)."""

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_KEY_END = re.compile(r"(?<!\\)(?:\\\\)*[=:\s]")


def _unescape(text: str) -> str:
    """Java's properties escapes: ``\\t``, ``\\n``, ``\\uXXXX``; any other ``\\c`` is c."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
        elif text[i + 1] == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
    return "".join(out)


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file (Kafka's ``server.properties``): ``#`` and ``!`` comments, ``NAME=VALUE``,
    ``NAME: VALUE`` or ``NAME VALUE``, lines continued by a trailing backslash; UTF-8."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PROPERTIES_BYTES + 1)
    except OSError as exc:
        raise InvalidConfigurationError(f"cannot read the properties file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_PROPERTIES_BYTES:
        raise InvalidConfigurationError(f"the properties file {path} is larger than {MAX_PROPERTIES_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidConfigurationError(f"the properties file {path} is not UTF-8 (byte {exc.start})") from None
    properties: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        line = line.lstrip() if not logical else line.lstrip(" \t\f")
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:  # an odd number of backslashes: the line goes on
            logical += line[:-1]
            continue
        logical += line
        end = _KEY_END.search(logical)
        key, rest = (logical, "") if end is None else (logical[:end.end() - 1], logical[end.end() - 1:])
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        properties[_unescape(key)] = _unescape(rest)
        logical = ""
    if logical:
        raise InvalidConfigurationError(f"the properties file {path} ends inside a continued line")
    return properties


__all__ = ["MAX_PROPERTIES_BYTES", "read_properties"]
