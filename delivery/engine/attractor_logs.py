"""The Attractor view of a run (`delivery run --logs DIR`): the logs layout of the Attractor
spec (§5.6, §5.3, Appendix C) written into DIR as the run goes, so that tools and
conformance runners written for Attractor read delivery runs.

    DIR/manifest.json          name, goal, start_time (+ run_id, workflow, run_dir, events)
    DIR/checkpoint.json        timestamp, current_node, completed_nodes, node_retries,
                               context, logs — rewritten after every stage the run saves
    DIR/<node>/status.json     outcome (success|fail|partial_success|retry|skipped),
                               preferred_next_label, suggested_next_ids, context_updates,
                               notes (+ failure_reason on a failure) — the node's last attempt
    DIR/<node>/prompt.md       the rendered prompt (agent stages; a script stage's script)
    DIR/<node>/response.md     the agent's reply

It is an observer, made only when asked: without `--logs` nothing of it runs. Delivery's own
run directory stays the record a resume reads; this view is rewritten from the engine's
state, never read back (except the retry counters, on a resume). Per stage it writes the
stage's own files and the checkpoint; the checkpoint holds what the spec puts there: the
whole context and the list of completed nodes — so its size grows with the context and
with the number of stages run (the spec's own format), nothing else does.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from delivery.engine.context import Context
from delivery.engine.handlers.base import Clock, StageResult
from delivery.engine.run_loop import Progress
from delivery.errors import RunRefused, RunStoreError
from delivery.lang.model import Node, NodeType, Workflow
from delivery.lang.outcomes import Outcome, StageOutcome
from delivery.store.files import make_dir, read_file, write_file
from delivery.store.records import RunState

STAGE_TEXTS = ("prompt.md", "response.md")


def attractor_outcome(outcome: Outcome) -> str:
    """delivery's outcome as the spec names it (Appendix C); a custom outcome routes as a
    success."""
    standard = outcome if isinstance(outcome, StageOutcome) else StageOutcome.SUCCEEDED
    return standard.attractor_name


class AttractorLogs(Progress):
    """Writes the view; wraps the run's own observer (every call is passed on to it)."""

    def __init__(self, root: Path, workflow: Workflow, run_dir: Path, clock: Clock,
                 redact: Callable[[Any], Any], inner: Progress | None = None) -> None:
        self.root = root
        self.workflow = workflow
        self.run_dir = run_dir
        self.clock = clock
        self.redact = redact
        self.inner = inner or Progress()
        self._lock = threading.Lock()
        self._retrying: set[str] = set()
        self.node_retries: dict[str, int] = {}
        self._attempts: dict[str, int] = {}
        self._made: set[str] = set()
        self._exits = frozenset(n.id for n in workflow.nodes_of(NodeType.EXIT))
        self._completed: list[str] = []  # state.path without exits, kept up to date
        self._seen = 0  # how much of state.path `_completed` covers
        root.mkdir(parents=True, exist_ok=True)
        if root.is_symlink():
            raise RunStoreError(f"{root}: the --logs folder is a symlink; give a real folder")

    # -- the run starts or resumes ------------------------------------------------------
    def start(self, run_id: str, goal: str, workflow_file: str, started: str) -> None:
        """manifest.json, once: a resume keeps the first one and its retry counters."""
        manifest = self.root / "manifest.json"
        if read_file(manifest, "manifest.json") is None:
            self._write(manifest, {
                "name": self.workflow.name, "goal": goal, "start_time": started,
                "run_id": run_id, "workflow": workflow_file, "run_dir": str(self.run_dir),
                "events": str(self.run_dir / "events.jsonl"), "engine": "delivery"})
        previous = read_file(self.root / "checkpoint.json", "checkpoint.json")
        if previous is not None:
            try:
                retries = json.loads(previous).get("node_retries", {})
            except (ValueError, AttributeError):
                retries = {}  # a view is rebuilt, never trusted: start the counters again
            if isinstance(retries, dict):
                self.node_retries = {str(k): int(v) for k, v in retries.items()
                                     if isinstance(v, int)}

    # -- Progress --------------------------------------------------------------------------
    def stage_started(self, node: Node, attempt: int) -> None:
        with self._lock:
            if node.id not in self._retrying:
                self.node_retries[node.id] = 0  # a new execution of the node
            self._retrying.discard(node.id)
            self._attempts[node.id] = attempt
        self.inner.stage_started(node, attempt)

    def stage_retry(self, node: Node, attempt: int, delay: float) -> None:
        with self._lock:
            self._retrying.add(node.id)
            self.node_retries[node.id] = self.node_retries.get(node.id, 0) + 1
        self.inner.stage_retry(node, attempt, delay)

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        status: dict[str, Any] = {
            "outcome": attractor_outcome(result.outcome),
            "preferred_next_label": result.preferred_label,
            "suggested_next_ids": list(result.suggested_next_ids),
            "context_updates": self.redact(dict(result.updates)),
            "notes": _notes(node, result),
        }
        if result.outcome == StageOutcome.FAILED:
            status["failure_reason"] = result.failure_reason
        with self._lock:
            attempt = self._attempts.get(node.id, 1)
            folder = self._node_dir(node.id)
        self._write(folder / "status.json", status)
        stage = self.run_dir / node.id / str(attempt)
        for name in STAGE_TEXTS:
            source = stage / name
            if source.is_file() and not source.is_symlink():
                _copy(source, folder / name)
        self.inner.stage_finished(node, result, seconds)

    # -- after every save of the run -------------------------------------------------------
    def saved(self, state: RunState, context: Context) -> None:
        path = state.path
        if len(path) < self._seen:  # a pause cut the path back: count again
            self._completed, self._seen = [], 0
        self._completed += [n for n in path[self._seen:] if n not in self._exits]
        self._seen = len(path)
        completed = self._completed
        with self._lock:
            retries = dict(self.node_retries)
        self._write(self.root / "checkpoint.json", {
            "timestamp": self.clock.now().isoformat(timespec="microseconds")
            .replace("+00:00", "Z"),
            "current_node": completed[-1] if completed else "",
            "completed_nodes": completed,
            "node_retries": retries,
            "context": dict(context.stored()),
            # delivery's run log is its event log (manifest.json's `events`), not copied
            "logs": [],
        }, atomic=True)

    # -- files -----------------------------------------------------------------------------
    def _node_dir(self, node_id: str) -> Path:
        folder = self.root / node_id
        if node_id not in self._made:
            make_dir(str(folder), "the --logs stage folder")
            self._made.add(node_id)
        return folder

    @staticmethod
    def _write(path: Path, data: Mapping[str, Any], *, atomic: bool = False) -> None:
        # Compact JSON: json's C encoder (indent= would run the pure-Python one, which costs
        # more than the write). No fsync: the view is rebuilt from the run, the durable
        # record. `atomic`: through a temporary file and a rename, so that a reader never
        # sees half of a file rewritten while it reads (the checkpoint)
        text = (json.dumps(data, default=str, ensure_ascii=False) + "\n").encode()
        if not atomic:
            write_file(path, text)
            return
        tmp = path.with_name(f".{path.name}.tmp")
        write_file(tmp, text)
        os.replace(tmp, path)


def check_logs_folder(logs: Path, run_path: Path) -> None:
    """`--logs DIR` must be a folder of its own (RunRefused otherwise)."""
    if logs.is_symlink() or (logs.exists() and not logs.is_dir()):
        raise RunRefused(f"--logs {logs}", "is not a folder (or is a symlink)",
                         "give a folder for the Attractor view (it is created if missing)")
    if logs.resolve() == run_path:
        raise RunRefused(f"--logs {logs}", "is the run's own directory, whose checkpoint.json "
                         "the view would overwrite",
                         "give another folder; --run-dir may be inside it (--logs out "
                         "--run-dir out/run)")


def _notes(node: Node, result: StageResult) -> str:
    if result.outcome == StageOutcome.FAILED:
        return result.failure_reason
    if not isinstance(result.outcome, StageOutcome):
        return f"custom outcome '{result.outcome}' (routes as a success)"
    return f"{node.type.value if node.type else 'stage'} '{node.id}': {result.outcome}"


def _copy(source: Path, target: Path) -> None:
    data = read_file(source, source.name)
    if data is not None:
        write_file(target, data)  # never through a symlink (O_NOFOLLOW)
