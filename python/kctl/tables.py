"""The text tables every command prints: plain columns for a terminal, Markdown for documents.

One layout for ``kctl sim``, ``kctl cluster status``, ``kctl plugins`` and the fleet's report, so
their tables read alike; it sits below every front end that prints one.
"""

from __future__ import annotations

from collections.abc import Sequence


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns under an upper-case header; ``(none)`` when there are no rows."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in (header, *rows)]
    return "\n".join(lines if rows else [*lines, "(none)"])


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; the first column is code (property and metric names)."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join([f"`{row[0]}`", *row[1:]]) + " |" for row in rows]
    return "\n".join(lines)
