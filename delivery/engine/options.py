"""A run's settings (EngineOptions) and the observer of its stages (Progress): what the
engine is given besides the outside world (`World`)."""

from __future__ import annotations

from dataclasses import dataclass

from delivery.engine.handlers.base import StageResult
from delivery.lang.model import Node, Workflow


class Progress:
    """Receives stage notifications; the default shows nothing."""

    def run_opened(self, workflow: Workflow) -> None:
        """Before the first stage of a start or a resume: the workflow that runs."""

    def stage_started(self, node: Node, attempt: int) -> None:
        pass

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        pass

    def stage_retry(self, node: Node, attempt: int, delay: float) -> None:
        pass

    def stage_note(self, node: Node, line: str) -> None:
        pass  # what a running stage says of itself (what a wait waits for)

    def folder_finished(self, node: Node, folder: str, result: StageResult,
                        seconds: float) -> None:
        pass  # one folder's run of a foreach stage ended (SPEC §8.1)


@dataclass
class EngineOptions:
    """Settings of a run (not the outside world: that is `World`)."""

    max_steps: int = 10_000  # a loop that never ends stops here instead of filling the disk
    # agent stages (implement, repairs) run at most this often in a run (0: no cap); the
    # Action caps repair iterations with it (SPEC §14)
    max_agent_runs: int = 0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    # Ask unanswered human gates on the console (the CLI sets this on a terminal).
    interactive: bool = False
    # `run --dry-run`: pause before the first stage that writes to a forge (a resume is
    # given options without it, and publishes)
    dry_run: bool = False
