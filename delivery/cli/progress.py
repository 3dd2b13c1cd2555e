"""Progress on a terminal: the current stage, its elapsed time and retries, on stderr."""

from __future__ import annotations

from typing import TextIO

from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.lang.model import Node
from delivery.lang.outcomes import StageOutcome


class TerminalProgress(Progress):
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def stage_started(self, node: Node, attempt: int) -> None:
        kind = node.type.value if node.type else "?"
        suffix = f" (attempt {attempt})" if attempt > 1 else ""
        print(f"▶ {node.id} [{kind}]{suffix}", file=self.stream, flush=True)

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        mark = "✗" if result.outcome == StageOutcome.FAILED else "✓"
        reason = f" — {result.failure_reason}" if result.failure_reason else ""
        print(f"  {mark} {node.id} {result.outcome} in {seconds:.1f}s{reason}",
              file=self.stream, flush=True)

    def stage_retry(self, node: Node, attempt: int, delay: float) -> None:
        print(f"  ↻ {node.id}: retrying in {delay:.1f}s", file=self.stream, flush=True)
