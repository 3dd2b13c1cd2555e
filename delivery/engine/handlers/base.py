"""What a handler is given and what it returns.

A handler runs one stage. It gets the node, the attempt number, the run's context (read
it, do not write it: return updates instead) and the outside world (`StageEnv`), and
returns a StageResult. The engine applies the result to the context, records it and
routes; a handler never routes and never touches the checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from delivery.agents.base import AgentBackend
from delivery.engine.agent_runtime import AgentRuntime
from delivery.engine.child import ChildRunner
from delivery.engine.context import Context
from delivery.engine.interviewer import Interviewer
from delivery.engine.templating import Renderer
from delivery.forges.base import Forge
from delivery.lang.model import Node, Workflow
from delivery.lang.outcomes import Outcome as Outcome
from delivery.lang.outcomes import StageOutcome, outcome_of
from delivery.store.files import StageText
from delivery.store.records import GateMode
from delivery.token_shapes import has_token_shape


@dataclass
class StageResult:
    # a standard outcome (SPEC §2), or a custom one an agent reported (`yes`), which
    # routes as a success; a plain string given is read as one or the other
    outcome: Outcome
    failure_reason: str = ""
    updates: dict[str, Any] = field(default_factory=dict)
    # Attractor's failure_class when the handler knows it (else the engine classifies the
    # reason: delivery.engine.failures)
    failure_class: str = ""
    preferred_label: str = ""
    keep_outcome: bool = False  # conditional nodes: the previous stage's outcome stands
    suggested_next_ids: tuple[str, ...] = ()  # routing step 3 (SPEC §1.3)
    # (type, fields) the engine appends to the event log after the stage, with its node
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # event mode (SPEC §13): the run saves after this stage and pauses before the next,
    # to be resumed by an event instead of holding a runner (a `wait` stage)
    pause_after: bool = False
    # what a pausing stage would have slept: a wait inside a parallel branch (which cannot
    # pause on its own: the section is one unit) sleeps it instead
    pause_seconds: float = 0.0
    # tokens the stage's agent turns cost ({input_tokens, output_tokens, total_tokens})
    usage: dict[str, int] | None = None
    cost_usd: float | None = None  # what they cost, when the backend reports it

    def __post_init__(self) -> None:
        if type(self.outcome) is str:  # (a caller's text: custom unless a standard name)
            self.outcome = outcome_of(self.outcome)

    @classmethod
    def ok(cls, **updates: Any) -> StageResult:
        return cls(StageOutcome.SUCCEEDED, updates=dict(updates))

    @classmethod
    def fail(cls, reason: str, updates: Mapping[str, Any] | None = None) -> StageResult:
        return cls(StageOutcome.FAILED, reason, dict(updates or {}))


class Clock(Protocol):
    """Every time a run reads: durations (monotonic), waits (sleep), records (now, UTC)."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def now(self) -> datetime: ...


@dataclass
class StageEnv:
    """The outside world a stage may use; passed in, never patched."""

    workflow: Workflow
    workspace: Path
    run_dir: Path  # the run's folder (its store keeps stage files and artifacts there)
    agent: AgentBackend
    renderer: Renderer
    interviewer: Interviewer
    clock: Clock
    folders: Mapping[str, Path]
    stage_dir: Callable[[str, int], Path]
    write_stage_file: Callable[[str, int, str, StageText], None]  # text or its parts
    fidelity_preamble: Callable[[Node], str]
    # The folders' forge side: their repositories on the forge, the run's branch, and the
    # clone cache that worktrees hang on (outside the workspace).
    forge: Forge | None = None
    repos: Mapping[str, str] = field(default_factory=dict)
    branch: str = ""
    git_cache: Path | None = None
    # folder -> its base branch, read from the forge once per run (a GitHub request each)
    base_branches: dict[str, str] = field(default_factory=dict)
    gates: GateMode = GateMode.DENY  # what an unanswered human gate does (SPEC §9.1)
    # backends, sessions, fidelity and model settings of agent stages (None: the default
    # backend, a fresh session per stage, compact preambles)
    agent_runtime: AgentRuntime | None = None
    # the run's path so far, ending with the stage being run (wait stages count their
    # consecutive visits from it)
    path: Callable[[], Sequence[str]] = field(default=lambda: ())
    # masks secrets in text a stage writes itself (script output, facts): SPEC §14
    redact: Callable[[str], str] = field(default=lambda text: text)
    # whether a file's text holds a known secret value or a credential shape (SPEC §14 "No
    # secret in a change": publish refuses such a folder); the runner's redactor decides
    holds_secret: Callable[[str], bool] = field(default=has_token_shape)
    # event mode (`--state`): wait stages pause the run instead of sleeping, and time their
    # timeout by the wall clock (a resume runs on another machine, with another monotonic)
    event_mode: bool = False
    wall_clock: Callable[[], float] = field(default=time.time)
    # runs a manager loop's child pipeline through the engine (set by the runner, which
    # handlers cannot import: it imports them); None where no child can run
    run_child: ChildRunner | None = None
    # the budget used so far as the sticky comment shows it, and whether its 80% warning
    # was given (delivery.engine.budget); the runner sets it
    budget_used: Callable[[], tuple[str, bool]] = field(default=lambda: ("", False))
    # how many folders a foreach stage or a folder stage works on at once when neither the
    # node nor the graph says `max_parallel` (`--max-parallel`; SPEC §8.1)
    max_parallel: int = 8
    # the folder a foreach stage's run works for (SPEC §8.1; "": the stage is run-wide)
    folder: str = ""
    # where a change set past 10 folders keeps its dashboard when the ticket is no GitHub
    # issue (`--state git:O/N`'s repository; "": the first folder's), and the page of the
    # run a cut table points at (the Actions run; "": none)
    state_repository: str = ""
    run_page: str = ""
    # how long the run's path was when this process resumed it (-1: not a resume): a wait
    # that is the first stage after a resume does not sleep again (SPEC §7.1 `wait`)
    resumed_at: int = -1
    # a progress line about the running stage (what a wait waits for); the runner sets it
    announce: Callable[[Node, str], None] = field(default=lambda node, line: None)


class Handler(Protocol):
    def __call__(self, node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
        ...
