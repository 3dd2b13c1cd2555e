"""Shared helpers for the engine behaviour tests: the shipped harness `delivery.testing`
under the names these tests use. Nothing of delivery's own is mocked: the agent is the
replay backend, the clock a FakeClock so that retry backoff never really sleeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from delivery.engine.runner import RunOutcome
from delivery.testing.cli import invoke
from delivery.testing.clock import FakeClock as FakeClock
from delivery.testing.runs import Ran as Ran
from delivery.testing.runs import reply as reply
from delivery.testing.runs import run_dot
from delivery.testing.runs import write_flow as write_flow

cli = invoke  # `code, out, err = cli("validate", path)`


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
    return run_dot(tmp_path, dot, replies=replies, goal=goal, inputs=inputs, answers=answers,
                   repos=repos)


def stage_file(outcome: RunOutcome, node: str, name: str, attempt: int = 1) -> Path:
    return outcome.run_dir / node / str(attempt) / name
