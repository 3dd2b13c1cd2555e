"""What a manager loop (delivery.engine.handlers.manager) and the runner, which runs its
child pipeline, pass each other; apart so that the handlers need not import the runner."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from delivery.errors import PauseRequested
from delivery.lang.outcomes import Outcome
from delivery.store.records import RunStatus


class ChildStopped(PauseRequested):
    """Raised before a child stage to stop the child there, paused (not a human gate)."""

    def __init__(self, node_id: str, why: str) -> None:
        super().__init__(node_id, message=f"stopped by its manager before '{node_id}': {why}")


@dataclass(frozen=True)
class ChildRequest:
    """What the runner needs to start (or resume) a child run."""

    workflow: Path
    workspace: Path
    run_dir: Path
    goal: str
    # the parent's context: the child gets the values of the inputs it declares
    values: Mapping[str, Any]
    before_stage: Callable[[str], None]  # may raise ChildStopped
    after_stage: Callable[[str, Outcome], None]  # node id, outcome


@dataclass(frozen=True)
class ChildEnd:
    run_id: str
    status: RunStatus  # succeeded | failed | paused
    failure_reason: str
    path: list[str]
    resumed: bool  # an earlier execution's child was resumed, not a new one started


ChildRunner = Callable[[ChildRequest], ChildEnd]
