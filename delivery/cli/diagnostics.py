"""How commands print a workflow's validation errors (one way for every command)."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from delivery.errors import WorkflowInvalid


def print_invalid(invalid: WorkflowInvalid, summary: str, err: TextIO) -> None:
    """Each error diagnostic of `invalid` (warnings are left out), then `summary`."""
    for diagnostic in invalid.diagnostics:
        if diagnostic.severity == "error":
            print(diagnostic.format_text(), file=err)
    print(summary, file=err)


def file_problem(path: Path) -> str | None:
    """Why `path` cannot be read as an input file (None when it can): said plainly, with
    the fix, instead of a "no such file" for a directory or a device."""
    if path.is_file():
        return None
    if path.is_dir():
        return "is a directory; name a file in it"
    if path.exists():
        return "is not a regular file (a device or a pipe); name a file"
    if path.is_symlink():
        return "no such file (a symbolic link to a missing file)"
    return "no such file"
