"""The errors `delivery` raises, in one hierarchy.

    DeliveryError                      anything this package raises on purpose
    ├── WorkflowError                  the workflow *definition* is wrong (before any run)
    │   ├── WorkflowSyntaxError        the .dot text does not parse: file:line:col, expected, found
    │   ├── DeclarationError           an attribute's mini-language (inputs, outputs, ...) is wrong
    │   ├── ConditionSyntaxError       an edge condition does not parse
    │   └── WorkflowInvalid            the graph parsed but the validator found errors
    ├── ScenarioFileError              a route-scenario file (`delivery test`) is wrong
    └── RunError                       something went wrong while running (run-time)
        ├── RunRefused                 the run cannot start: a bad input, goal or setting
        ├── RunStoreError              a run directory, checkpoint or event log is unusable
        ├── GitError                   a git operation on a folder failed (clone, worktree, push)
        └── ForgeError                 a forge (GitHub, local) refused or could not read or write

Each error carries the thing it is about as fields, and its message says what was
expected, what was found and what to do. Definition errors and run-time errors are
kept apart: a workflow that validated never raises a WorkflowError while running.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from delivery.lang.diagnostics import Diagnostic


@dataclass(frozen=True, slots=True)
class Position:
    """A place in a workflow file; line and column count from 1."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class DeliveryError(Exception):
    """Base of every error this package raises on purpose."""


class WorkflowError(DeliveryError):
    """The workflow definition is wrong; found before the first stage runs."""


class WorkflowSyntaxError(WorkflowError):
    """The DOT text does not parse."""

    def __init__(self, position: Position, expected: str, found: str, fix: str = "") -> None:
        self.position = position
        self.expected = expected
        self.found = found
        self.fix = fix
        message = f"{position}: expected {expected}, found {found}"
        if fix:
            message += f" ({fix})"
        super().__init__(message)


class DeclarationError(WorkflowError):
    """A declaration attribute (`inputs`, `defaults`, `outputs`, `facts`, `probe`) is wrong.

    `offset` is the index into the attribute's value where the problem starts.
    """

    def __init__(self, attribute: str, text: str, offset: int, problem: str, fix: str) -> None:
        self.attribute = attribute
        self.text = text
        self.offset = offset
        self.problem = problem
        self.fix = fix
        super().__init__(f"{attribute}={text!r}: {problem}")


class ConditionSyntaxError(WorkflowError):
    """An edge condition does not parse; `offset` indexes into the condition text."""

    def __init__(self, text: str, offset: int, expected: str, found: str) -> None:
        self.text = text
        self.offset = offset
        self.expected = expected
        self.found = found
        super().__init__(
            f"condition {text!r} at character {offset + 1}: expected {expected}, found {found}"
        )


class WorkflowInvalid(WorkflowError):
    """The workflow parsed but has validation errors; `diagnostics` lists all of them."""

    def __init__(self, file: str, diagnostics: Sequence[Diagnostic]) -> None:
        self.file = file
        self.diagnostics = list(diagnostics)
        errors = [d for d in self.diagnostics if d.severity == "error"]
        first = errors[0].format_text() if errors else ""
        super().__init__(f"{file}: {len(errors)} validation error(s); first: {first}")


class RunError(DeliveryError):
    """Something went wrong while running a workflow."""


class RunRefused(RunError):
    """The run cannot start; `subject` names the input, option or setting that is wrong."""

    def __init__(self, subject: str, problem: str, fix: str) -> None:
        self.subject = subject
        self.problem = problem
        self.fix = fix
        super().__init__(f"{subject}: {problem} — {fix}")


class RunStoreError(RunError):
    """A run directory, checkpoint or event log cannot be used; the message names the path."""


class GitError(RunError):
    """A git operation failed; `operation` names it, `location` the repository or worktree.
    The message carries git's own words, never the command line (it may hold a token)."""

    def __init__(self, operation: str, location: str, problem: str, fix: str = "") -> None:
        self.operation = operation
        self.location = location
        self.problem = problem
        self.fix = fix
        message = f"git {operation} in {location}: {problem}"
        super().__init__(f"{message} — {fix}" if fix else message)


class ForgeError(RunError):
    """A forge operation failed: `operation` on `repository` (e.g. "create the PR for
    delivery/T-1"), `problem` as the forge put it, and what to do."""

    def __init__(self, forge: str, repository: str, operation: str, problem: str,
                 fix: str = "") -> None:
        self.forge = forge
        self.repository = repository
        self.operation = operation
        self.problem = problem
        self.fix = fix
        message = f"{forge} {repository}: cannot {operation}: {problem}"
        super().__init__(message + (f" — {fix}" if fix else ""))


class ScenarioFileError(DeliveryError):
    """A route-scenario file (`delivery test`) is wrong: unreadable, not TOML, not the
    scenario format, or naming a node, folder or fact the workflow does not have."""

    def __init__(self, file: str, line: int, problem: str, fix: str) -> None:
        self.file = file
        self.line = line
        self.problem = problem
        self.fix = fix
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {problem} — {fix}")
