"""The closing table of a run's pull requests, one row per folder — printed whether stdout
is a terminal or a pipe (a CI log shows it too)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TextIO

Row = tuple[str, str, str, str]  # folder, PR, state, link


def pr_rows(context: Mapping[str, Any]) -> list[Row]:
    """The folders' PRs as the run last saw them (`<folder>.pr.number|state|url`)."""
    folders = [key.removesuffix(".pr.number") for key in context
               if key.endswith(".pr.number") and key.count(".") == 2]
    rows = []
    for folder in folders:
        number = context.get(f"{folder}.pr.number")
        rows.append((folder, f"#{number}" if number else "-",
                     str(context.get(f"{folder}.pr.state") or "-"),  # not probed
                     str(context.get(f"{folder}.pr.url") or "")))
    return rows


def print_table(rows: Sequence[Row], out: TextIO) -> None:
    header = ("folder", "PR", "state", "link")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        print("  " + "  ".join([*cells, row[3]]).rstrip(), file=out)
