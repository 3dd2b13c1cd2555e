"""Run a workflow given as DOT text, with scripted agent replies and a fake clock.

    ran = run_dot(tmp_path, 'digraph { start [shape=Mdiamond] ... }',
                  replies={"plan": [reply({"plan": "..."})]})
    assert ran.status == "succeeded"
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from delivery.agents.replay import ReplayBackend
from delivery.engine.interviewer import ScriptedInterviewer
from delivery.engine.run_loop import EngineOptions
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.testing.clock import FakeClock


def write_flow(folder: Path, dot: str, name: str = "flow.dot") -> Path:
    """Write `dot` (dedented) to `folder/name` and return its path."""
    path = folder / name
    path.write_text(textwrap.dedent(dot), encoding="utf-8")
    return path


def reply(updates: Mapping[str, Any] | None = None, prose: str = "Done.", **extra: Any) -> str:
    """An agent reply: some prose, then the closing `{"context_updates": ...}` object."""
    obj: dict[str, Any] = {"context_updates": dict(updates or {}), **extra}
    return f"{prose}\n\n```json\n{json.dumps(obj)}\n```\n"


@dataclass
class Ran:
    """A finished (or paused) run, with the replay backend and clock it used."""

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

    def stage_file(self, node: str, name: str, attempt: int = 1) -> Path:
        return self.outcome.run_dir / node / str(attempt) / name


def run_dot(
    folder: Path,
    dot: str,
    *,
    replies: Mapping[str, Sequence[str]] | None = None,
    goal: str | None = "Ship the feature",
    inputs: Mapping[str, str] | None = None,
    answers: Mapping[str, str | Sequence[str]] | None = None,
    repos: Mapping[str, str] | None = None,
    options: EngineOptions | None = None,
    environ: Mapping[str, str] | None = None,
) -> Ran:
    """Write `dot` into `folder` and run it there (the folder is the workspace) with the
    replay backend answering from `replies`, scripted gate `answers` and a FakeClock."""
    workflow = write_flow(folder, dot)
    backend = ReplayBackend(dict(replies or {}))
    clock = FakeClock()
    world = World(agent=backend, interviewer=ScriptedInterviewer(dict(answers or {})),
                  clock=clock)
    if environ is not None:
        world.environ = dict(environ)
    request = RunRequest(workflow=workflow, goal=goal, inputs=dict(inputs or {}),
                         workspace=folder, repos=dict(repos or {}))
    return Ran(start_run(request, world, options=options), backend, clock)
