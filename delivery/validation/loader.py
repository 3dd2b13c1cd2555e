"""Reading a workflow file: parse → build the model → validate, all before any run."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from delivery.errors import Position, WorkflowInvalid, WorkflowSyntaxError
from delivery.lang.builder import build_workflow
from delivery.lang.diagnostics import Diagnostic, has_errors, sort_diagnostics
from delivery.lang.model import Workflow
from delivery.lang.parser import parse_dot
from delivery.lang.syntax import DotGraph
from delivery.validation.agent_rules import check_model_attributes
from delivery.validation.forge_rules import check_forge_attributes
from delivery.validation.validator import validate


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Parsing allocates many small acyclic objects; the cyclic collector would rescan them
    again and again (super-linear on large graphs) while finding nothing to free.

    On the way out, what was allocated meanwhile (the model, ~1M objects at 20,000 nodes)
    goes straight to the oldest generation: freeze() then unfreeze() moves every tracked
    object there without a pass over them, where re-enabling alone would have the next
    allocation run a young collection over all of them, then a middle one (~0.4 s of a
    1.5 s check at 20,000 nodes). Cyclic garbage among them, if any, is still found by the
    next full collection. Skipped when the process has frozen objects of its own, which
    unfreeze() would release."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def _check(parsed: list[DotGraph]) -> tuple[Workflow, list[Diagnostic]]:
    """`parsed` holds the only reference to the syntax tree, dropped once the model is
    built: the validator's sets then reuse its memory (a 20,000-node file's tree is ~20 MB
    beyond the values the model keeps)."""
    workflow, diagnostics = build_workflow(parsed.pop())
    diagnostics += validate(workflow)
    diagnostics += check_model_attributes(workflow)
    diagnostics += check_forge_attributes(workflow)
    return workflow, sort_diagnostics(diagnostics)


def check_source(source: str, file: str = "<workflow>") -> tuple[Workflow | None, list[Diagnostic]]:
    """The model (None when the text does not parse) and every diagnostic, sorted."""
    source = source.removeprefix(BOM)
    with _collector_paused():
        try:
            parsed = [parse_dot(source, file)]
        except WorkflowSyntaxError as err:
            return None, [_syntax_diagnostic(err)]
        return _check(parsed)


# Far above any real workflow (20,000 nodes are ~2.5 MB) and low enough that parsing a
# file of the limit stays within a few hundred MB of memory.
MAX_WORKFLOW_BYTES = 8 * 1024 * 1024
BOM = "\ufeff"


def read_workflow_text(path: Path) -> str:
    """The text of a workflow file (a UTF-8 byte order mark at the start is dropped), or
    WorkflowSyntaxError when it is over MAX_WORKFLOW_BYTES."""
    size = path.stat().st_size
    if size > MAX_WORKFLOW_BYTES:
        raise WorkflowSyntaxError(Position(str(path), 1, 1),
                                  f"a workflow file of at most {MAX_WORKFLOW_BYTES} bytes (8 MiB)",
                                  f"{size} bytes", "split the workflow into smaller ones")
    return path.read_text(encoding="utf-8").removeprefix(BOM)


def _syntax_diagnostic(err: WorkflowSyntaxError) -> Diagnostic:
    pos = err.position
    return Diagnostic("syntax", "error", f"expected {err.expected}, found {err.found}",
                      pos.file, pos.line, pos.column, fix=err.fix)


def _not_utf8(path: Path, error: UnicodeDecodeError) -> WorkflowSyntaxError:
    before = bytes(error.object[:error.start])
    line = before.count(b"\n") + 1
    column = error.start - (before.rfind(b"\n") + 1) + 1
    bad = bytes(error.object[error.start:error.start + 1])
    return WorkflowSyntaxError(Position(str(path), line, column), "UTF-8 text",
                               f"the byte 0x{bad.hex()}", "save the workflow file as UTF-8")


def check_file(path: str | Path) -> tuple[Workflow | None, list[Diagnostic]]:
    path = Path(path)
    try:
        source = read_workflow_text(path)
    except WorkflowSyntaxError as err:
        return None, [_syntax_diagnostic(err)]
    return check_source(source, str(path))


def load_workflow(path: str | Path) -> Workflow:
    """A workflow that is safe to run, or WorkflowSyntaxError / WorkflowInvalid."""
    path = Path(path)
    try:
        source = read_workflow_text(path)
    except UnicodeDecodeError as error:
        raise _not_utf8(path, error) from None
    with _collector_paused():
        workflow, diagnostics = _check([parse_dot(source, str(path))])
    if has_errors(diagnostics):
        raise WorkflowInvalid(str(path), diagnostics)
    return workflow
