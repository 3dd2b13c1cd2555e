"""How commands print a workflow's validation errors (one way for every command)."""

from __future__ import annotations

from typing import TextIO

from delivery.errors import WorkflowInvalid


def print_invalid(invalid: WorkflowInvalid, summary: str, err: TextIO) -> None:
    """Each error diagnostic of `invalid` (warnings are left out), then `summary`."""
    for diagnostic in invalid.diagnostics:
        if diagnostic.severity == "error":
            print(diagnostic.format_text(), file=err)
    print(summary, file=err)
