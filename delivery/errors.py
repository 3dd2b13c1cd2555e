"""The errors `delivery` raises, in one hierarchy (and the one control signal beside it).

    DeliveryError                      anything this package raises on purpose
    ├── WorkflowError                  the workflow *definition* is wrong (before any run)
    │   ├── WorkflowSyntaxError        the .dot text does not parse: file:line:col, expected, found
    │   ├── DeclarationError           an attribute's mini-language (inputs, outputs, ...) is wrong
    │   ├── ConditionSyntaxError       an edge condition does not parse
    │   ├── TemplateProblem            a prompt/script template does not parse (validator)
    │   ├── StylesheetError            a `model_stylesheet` does not parse
    │   └── WorkflowInvalid            the graph parsed but the validator found errors
    ├── ScenarioFileError              a route-scenario file (`delivery test`) is wrong
    ├── Superseded                     another job moved the run's state ref first (§13): a
    │                                  signal, reported as status `superseded`, exit 0
    └── RunError                       something went wrong while running (run-time)
        ├── RunRefused                 the run cannot start: a bad input, goal or setting (exit 2)
        │   ├── MalformedEvent         an Actions event payload whose fields are not GitHub's types
        │   └── NotOwner               a PR carries a run's marker but is not that run's PR
        │                              (another repository or branch): ignored, nothing claimed
        ├── RunStoreError              the run's store (directory, checkpoint, event log) is
        │   │                          unusable or cannot be written; mid-run it stops the run
        │   │                          (exit 1) and the run stays resumable
        │   └── StateSaveFailed        a stage's state could not reach the state ref (§13)
        ├── ResumeStopped              a resume could not re-create the run's worktrees: it
        │                              stops before any stage (exit 1), the run resumable
        ├── RunStateChanged            a stage's process changed a file of the run directory
        │                              that decides what runs next (§14): the run fails
        ├── ArtifactError              an artifact pointer cannot be read
        ├── GitError                   a git operation on a folder failed (clone, worktree, push)
        │   ├── GitStalled             a fetch or push did not finish within the stage's timeout
        │   └── BranchConflict         the run's work does not replay on the PR branch as
        │                              people left it (their commits, a force-push)
        ├── ForgeError                 a forge (GitHub, local) refused or could not read or write
        └── StageError                 a stage failed; the engine records it as the stage's
            │                          failure_reason and routes on the failure
            ├── AgentError             the agent backend produced no reply
            ├── ContractViolation      the reply breaks the node's output contract
            ├── TemplateRenderError    a prompt or script template did not render
            ├── FactsFormatError       a script's $DELIVERY_FACTS file is malformed
            └── StageProblem           a folder stage cannot work on a folder (no such folder,
                                       no forge or repository, no branch or git cache)

    PauseRequested (BaseException)     not an error: a control signal — a human gate has no
                                       answer yet and the run stops as `paused` (exit 3)
    RunInterrupted (KeyboardInterrupt) Ctrl-C or SIGTERM stopped a run between saves: it is
                                       left resumable, and the message says how to resume
    Terminated (KeyboardInterrupt)     SIGTERM, raised by the command line's handler: stops
                                       like Ctrl-C (exit 143 instead of 130)

Each error carries the thing it is about as fields, and its message says what was
expected, what was found and what to do. Definition errors and run-time errors are
kept apart: a workflow that validated never raises a WorkflowError while running.
Exit 2 ("refused to start") is only for what goes wrong before the first stage runs.
"""

from __future__ import annotations

import errno
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
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


class TemplateProblem(WorkflowError):
    """A template in the workflow does not parse; `lineno` is the line inside the template."""

    def __init__(self, message: str, lineno: int) -> None:
        self.message = message
        self.lineno = lineno
        super().__init__(message)


class StylesheetError(WorkflowError, ValueError):
    """The model stylesheet does not parse; `offset` indexes into its text."""

    def __init__(self, offset: int, problem: str, fix: str) -> None:
        self.offset = offset
        self.problem = problem
        self.fix = fix
        super().__init__(f"character {offset + 1}: {problem}")


class WorkflowInvalid(WorkflowError):
    """The workflow parsed but has validation errors; `diagnostics` lists all of them."""

    def __init__(self, file: str, diagnostics: Sequence[Diagnostic]) -> None:
        self.file = file
        self.diagnostics = list(diagnostics)
        errors = [d for d in self.diagnostics if d.severity == "error"]
        first = errors[0].format_text() if errors else ""
        super().__init__(f"{file}: {len(errors)} validation error(s); first: {first}")


class Superseded(DeliveryError):
    """Another job claimed or advanced the run first (its state ref moved under us): this
    job changes nothing more and reports status `superseded` (SPEC §13)."""

    def __init__(self, run_id: str, why: str) -> None:
        self.run_id = run_id
        self.why = why
        super().__init__(f"run {run_id} was superseded: {why}; this job stops without "
                         "changing it")


class RunError(DeliveryError):
    """Something went wrong while running a workflow."""


class RunRefused(RunError):
    """The run cannot start; `subject` names the input, option or setting that is wrong."""

    def __init__(self, subject: str, problem: str, fix: str) -> None:
        self.subject = subject
        self.problem = problem
        self.fix = fix
        super().__init__(f"{subject}: {problem} — {fix}")


class MalformedEvent(RunRefused):
    """An Actions event payload whose fields do not have GitHub's types (`subject` names the
    field), refused in one line instead of a traceback (SPEC §14)."""


class RunStoreError(RunError):
    """A run directory, checkpoint or event log cannot be used; the message names the path."""


class StateSaveFailed(RunStoreError):
    """A save to the run's state ref failed mid-run (the remote unreachable, a push refused):
    the run stops as failed; it stays resumable from its last save on the ref."""

    def __init__(self, run_id: str, problem: str) -> None:
        self.run_id = run_id
        self.problem = problem
        super().__init__(f"run {run_id}: its state could not be saved to the state ref: "
                         f"{problem} — the run stopped; resume it once the state repository "
                         "is reachable (the stage after the last save runs again)")


class NotOwner(RunRefused):
    """A PR carries a run's marker but is not a PR that run opened (another repository,
    another branch, a fork): its events are ignored (SPEC §13), nothing is claimed."""


class ResumeStopped(RunError):
    """A resume stopped before its first stage because what the run needs on this machine
    (its worktrees) could not be re-created: exit 1, nothing ran, the run stays resumable."""

    def __init__(self, run_id: str, problem: str) -> None:
        self.run_id = run_id
        self.problem = problem
        super().__init__(f"run {run_id}: its worktrees could not be re-created: {problem} "
                         "— nothing ran; fix that and resume (the run is unchanged)")


class RunStateChanged(RunError):
    """A file of the run directory that decides what runs next (run.json, the workflow copy,
    its model cache, the checkpoint, the event log) changed while a stage ran: a process of
    the stage (a prompt-injected agent) wrote it, not delivery. The run fails there, before
    any later stage (SPEC §14)."""

    def __init__(self, node_id: str, changes: Sequence[tuple[str, str]]) -> None:
        self.node_id = node_id
        self.changes = list(changes)  # (file name, how it changed)
        self.files = [name for name, _ in changes]
        what = ", ".join(f"{name} ({how})" for name, how in changes)
        were = "were" if len(changes) > 1 else "was"
        super().__init__(f"{what} {were} changed while stage '{node_id}' ran; the run is "
                         "stopped: a stage's processes must not write the run directory - "
                         "check what the stage did (a prompt-injected agent?) and start a "
                         "new run")


class ArtifactError(RunError):
    """An artifact pointer cannot be read: outside the store, missing or not JSON."""

    def __init__(self, pointer: str, problem: str) -> None:
        self.pointer = pointer
        self.problem = problem
        super().__init__(f"artifact {pointer}: {problem}")


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


class GitStalled(GitError):
    """A git network call did not finish by its deadline (the stage's timeout) or stopped
    moving bytes: retrying within the same stage cannot help."""


def write_failure(path: object, error: OSError) -> str:
    """One line for a write that failed where the disk did (full, over a quota or the file
    size limit): what, the path, and the fix (SPEC §14)."""
    what = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
            errno.EFBIG: "file too large for the file size limit"}.get(
        error.errno or 0, error.strerror or str(error))
    return (f"{what} writing {path}: free space on that disk (or raise the limit), then "
            "resume")


class BranchConflict(GitError):
    """The run's work does not replay on the PR branch as people left it."""

    def __init__(self, location: str, branch: str, files: Sequence[str], *,
                 rewritten: bool, backup: str) -> None:
        self.files = tuple(files)
        self.rewritten = rewritten
        self.backup = backup
        what = (f"the PR branch {branch} was rewritten (force-pushed) since the run last "
                f"pushed it, and re-applying the run's unpublished work on it conflicts"
                if rewritten else
                f"the PR branch {branch} has commits a person pushed that conflict with the "
                f"run's new work")
        where = f" in {', '.join(self.files)}" if self.files else ""
        super().__init__("publish", location, f"{what}{where}; nothing was pushed, the run's "
                         f"work is kept on {backup}",
                         f"bring the run's work onto origin/{branch} by hand in {location} "
                         f"(git rebase origin/{branch}), then resume")


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


class StageError(RunError):
    """A stage failed in a way its handler reports as the stage's failure_reason."""


class AgentError(StageError):
    """A backend failed to produce a reply; the message names the node and says why."""


class ContractViolation(StageError):
    """The reply does not satisfy the output contract; `problems` lists every problem."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("the reply does not satisfy the output contract: " + "; ".join(problems))


class TemplateRenderError(StageError):
    """A template could not be rendered; `line` is the template line when known."""

    def __init__(self, problem: str, line: int | None = None) -> None:
        self.problem = problem
        self.line = line
        super().__init__(f"template line {line}: {problem}" if line else f"template: {problem}")


class FactsFormatError(StageError):
    """A script's facts file ($DELIVERY_FACTS) is malformed; the message names the line."""


class StageProblem(StageError):
    """A folder stage cannot do its work; the message names the folder and what is wrong."""


class PauseReason(StrEnum):
    """Why a run paused: `RunOutcome.pause_reason`, the `run_paused` event's `reason`."""

    GATE = "gate"  # a human gate has no answer yet
    WAIT = "wait"  # a wait stage in event mode: an event resumes it
    BUDGET = "budget"  # the next agent stage would pass the run's budget
    STOP_LABEL = "stop_label"  # a person set the stop label
    DRY_RUN = "dry_run"  # `run --dry-run` reached the first stage that writes to a forge
    RATE_LIMIT = "rate_limit"  # GitHub's limits leave no room within the stage's patience
    FAN_OUT = "fan_out"  # a foreach stage's folders were split into chunks for worker jobs


# the context key saying why a paused run paused (`runs`, `inspect`); gone once it goes on
PAUSED_KEY = "internal.paused"


def paused_why(context: Mapping[str, object]) -> tuple[str, str]:
    """(reason, until) of a paused run, from what the engine saved when it paused."""
    paused = context.get(PAUSED_KEY)
    if not isinstance(paused, Mapping):
        return "", ""
    return str(paused.get("reason") or ""), str(paused.get("until") or "")


class PauseRequested(BaseException):
    """A human gate has no answer yet and the run should stop here, to be resumed with one.

    Not an error and not a stage failure: a control signal (like KeyboardInterrupt, outside
    `Exception`, so that no handler's `except Exception` swallows it). The engine saves the
    run as `paused` before the gate. Other pauses are subclasses that declare their
    `reason`; `message` replaces the gate's, `event_fields` go into the `run_paused` event.
    """

    reason: PauseReason = PauseReason.GATE

    def __init__(self, node_id: str, choices: Sequence[str] = (), *, message: str = "",
                 event_fields: Mapping[str, str] | None = None) -> None:
        self.node_id = node_id
        self.choices = list(choices)
        self.event_fields: dict[str, str] = dict(event_fields or {})
        listed = ", ".join(choices)
        super().__init__(message or f"human gate '{node_id}' is waiting for an answer "
                         f"({listed}): resume with --answer {node_id}=LABEL")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM stopped a run: the stage's processes were ended, the run
    is left as its last save has it (resumable) and `run_dir` says where.

    A KeyboardInterrupt, so that code that lets Ctrl-C through lets this through too."""

    def __init__(self, run_id: str, run_dir: str, signal_name: str = "SIGINT", *,
                 hint: str = "") -> None:
        self.run_id = run_id
        self.run_dir = run_dir
        self.signal_name = signal_name
        # the command that continues it (the demo's is its own)
        self.hint = hint or f"delivery resume {shlex.quote(run_dir)}"
        super().__init__(f"run {run_id} stopped by {signal_name}; it is resumable: "
                         f"{self.hint}")


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI runner cancelling the job) asked the process to stop: handled exactly
    like Ctrl-C, and told apart only in what is printed and the exit status."""


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
