"""Progress on stderr (SPEC §12), whether or not it is a terminal: one line per stage as it
ends, and a line for every retry — a stage's, or a GitHub request's (`probes.retry`) —
saying what is tried again, which attempt of how many, and when, and what a wait waits
for as it begins (SPEC §7.1 `wait`). A CI log, the Action's
log or a file gets the same lines as a terminal, which also shows each stage as it starts.
`--quiet` makes none of it (errors are printed all the same)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from delivery.engine.handlers.base import StageResult
from delivery.engine.run_loop import Progress
from delivery.lang.model import Node, Workflow
from delivery.lang.outcomes import StageOutcome
from probes.retry import RetryNotice, announcing


class StderrProgress(Progress):
    def __init__(self, stream: TextIO, *, terminal: bool) -> None:
        self.stream = stream
        self.terminal = terminal
        self.default_retries = 0  # the graph's default_max_retries, once the run is open
        self._lock = threading.Lock()  # parallel branches end stages in their own threads
        self._ended = False

    def _print(self, line: str) -> None:
        with self._lock:
            if not self._ended:
                print(line, file=self.stream, flush=True)

    def end(self) -> None:
        """No line after this one: the command's last words (a Ctrl-C's how-to-resume, an
        error) stay last, whatever a parallel branch's thread still reports."""
        with self._lock:
            self._ended = True

    def run_opened(self, workflow: Workflow) -> None:
        self.default_retries = workflow.default_max_retries

    def stage_started(self, node: Node, attempt: int) -> None:
        if not self.terminal:
            return  # a log gets one line per stage, as it ends
        kind = node.type.value if node.type else "?"
        suffix = f" (attempt {attempt})" if attempt > 1 else ""
        self._print(f"▶ {node.id} [{kind}]{suffix}")

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        mark = "✗" if result.outcome == StageOutcome.FAILED else "✓"
        reason = f" — {result.failure_reason}" if result.failure_reason else ""
        self._print(f"  {mark} {node.id} {result.outcome} in {seconds:.1f}s{reason}")

    def folder_finished(self, node: Node, folder: str, result: StageResult,
                        seconds: float) -> None:
        # a foreach stage's folders as they end (SPEC §8.1): a long stage is never silent
        mark = "✗" if result.outcome == StageOutcome.FAILED else "✓"
        reason = f" — {result.failure_reason}" if result.failure_reason else ""
        self._print(f"    {mark} {node.id}@{folder} {result.outcome} in {seconds:.1f}s{reason}")

    def stage_retry(self, node: Node, attempt: int, delay: float) -> None:
        retries = node.max_retries if node.max_retries is not None else self.default_retries
        self._print(f"  ↻ {node.id}: retrying (attempt {attempt + 1} of {retries + 1}) "
                    f"in {delay:.1f}s")

    def stage_note(self, node: Node, line: str) -> None:
        # said as it happens, a log or a terminal: a wait's sleep may last hours
        self._print(f"  … {node.id}: {line}")

    def github_retry(self, notice: RetryNotice) -> None:
        self._print(f"  ↻ {notice.line()}")


@contextmanager
def speaking(progress: StderrProgress | None) -> Iterator[None]:
    """`progress` says GitHub's retries too while the block runs, and nothing after it
    (None: --quiet)."""
    if progress is None:
        yield
        return
    try:
        with announcing(progress.github_retry):
            yield
    finally:
        progress.end()
