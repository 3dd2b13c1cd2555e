"""Shared helpers for the engine behaviour tests (`tests/test_engine_*.py`).

Workflows are written inline as DOT text to a temp dir and run through the public API
(`start_run` with a `World`) or the CLI (`delivery.cli.main.main`). Nothing of delivery's own
is mocked: the agent is the replay backend, the clock is a recording fake so that retry
backoff never really sleeps.
"""

from __future__ import annotations

import io
import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delivery.agents.replay import ReplayBackend
from delivery.cli.main import main
from delivery.engine.interviewer import ScriptedInterviewer
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run


@dataclass
class FakeClock:
    """A clock whose sleeps are recorded and return at once."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def write_flow(tmp_path: Path, dot: str, name: str = "flow.dot") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(dot), encoding="utf-8")
    return path


def reply(updates: Mapping[str, Any] | None = None, prose: str = "Done.", **extra: Any) -> str:
    """An agent reply: some prose, then the closing `{"context_updates": ...}` object."""
    obj: dict[str, Any] = {"context_updates": dict(updates or {}), **extra}
    return f"{prose}\n\n```json\n{json.dumps(obj)}\n```\n"


@dataclass
class Ran:
    outcome: RunOutcome
    backend: ReplayBackend
    clock: FakeClock

    @property
    def context(self) -> dict[str, Any]:
        return self.outcome.context

    @property
    def status(self) -> str:
        return self.outcome.status

    def prompts_of(self, node: str) -> list[str]:
        return [message for node_id, message in self.backend.prompts if node_id == node]


def run_flow(
    tmp_path: Path,
    dot: str,
    *,
    replies: Mapping[str, Sequence[str]] | None = None,
    goal: str | None = "Ship the feature",
    inputs: Mapping[str, str] | None = None,
    answers: Mapping[str, str] | None = None,
    repos: Mapping[str, str] | None = None,
) -> Ran:
    """Write `dot`, start a run in `tmp_path` with replayed replies and a fake clock."""
    workflow = write_flow(tmp_path, dot)
    backend = ReplayBackend(dict(replies or {}))
    clock = FakeClock()
    world = World(agent=backend, interviewer=ScriptedInterviewer(dict(answers or {})),
                  clock=clock)
    request = RunRequest(workflow=workflow, goal=goal, inputs=dict(inputs or {}),
                         workspace=tmp_path, repos=dict(repos or {}))
    return Ran(start_run(request, world), backend, clock)


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(arg) for arg in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def stage_file(outcome: RunOutcome, node: str, name: str, attempt: int = 1) -> Path:
    return outcome.run_dir / node / str(attempt) / name
