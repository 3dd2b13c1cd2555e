"""A diagnostic: one problem found in a workflow, with where it is and how to fix it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    rule: str  # stable id, e.g. "availability"; see docs/rules.md
    severity: Severity
    message: str
    file: str
    line: int
    column: int
    node: str | None = None
    edge: str | None = None  # "a -> b"
    fix: str = ""

    def format_text(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        subject = f" [{self.node}]" if self.node else f" [{self.edge}]" if self.edge else ""
        text = f"{where}: {self.severity}[{self.rule}]{subject} {self.message}"
        if self.fix:
            text += f"\n    fix: {self.fix}"
        return text

    def format_github(self) -> str:
        level = "error" if self.severity == "error" else "warning"
        message = f"[{self.rule}] {self.message}" + (f" Fix: {self.fix}" if self.fix else "")
        return (f"::{level} file={_github_property(self.file)},line={self.line},"
                f"col={self.column}::{_github_data(message)}")


def _github_data(text: str) -> str:
    """Escaped as GitHub's workflow commands read a message (actions/toolkit escapeData)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    """Escaped as a workflow command property (escapeProperty): also ':' and ','."""
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity == "error" for d in diagnostics)


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.file, d.line, d.column, d.rule, d.message))


def to_json(diagnostics: Sequence[Diagnostic]) -> str:
    return json.dumps({"diagnostics": [asdict(d) for d in diagnostics]}, indent=2)
