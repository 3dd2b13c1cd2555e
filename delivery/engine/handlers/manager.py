"""Attractor's manager loop (`shape=house`, `type=stack.manager_loop`; Attractor §4.11): a
stage that supervises a child pipeline.

The child is the graph's `stack.child_dotfile` (a path relative to the run's workspace),
run in `stack.child_workdir` (default: the workspace) by delivery's own engine, in this
process, as a run of its own whose directory is `<stage folder>/child/` inside the parent's
run directory. That directory is durable: when the parent is killed and resumed, the
interrupted manager stage runs again with the same attempt, finds the child's run there
and resumes it — it never starts a second child.

Observation. A child's state changes only at its stage boundaries (that is where its
checkpoint is written), so the manager observes there: before a child stage starts, when
`manager.poll_interval` has passed on the run's clock since the last observation (at every
boundary when `wait` is not among `manager.actions`). Each observation is a cycle: it
ingests the child's telemetry as `stack.child.*` (with `observe`), then evaluates
`manager.stop_condition`. The condition holding ends the stage as a success; the
`manager.max_cycles`-th observation of a child still running ends it as a failure. Either
way the child is stopped before its next stage and left paused (resumable with
`delivery resume <child run dir>`). A child that ends decides the outcome: `completed` is a
success, `failed` a failure naming the child's reason. Cycles are counted per execution of
the stage: after a resume the count starts again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from delivery.engine.child import ChildEnd, ChildRequest, ChildStopped
from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.errors import DeliveryError
from delivery.lang.model import ManagerSettings, Node
from delivery.lang.outcomes import Outcome, StageOutcome
from delivery.store.records import RunStatus


class ChildStatus(StrEnum):
    """`stack.child.status` as Attractor names it (a run's own status where it has none)."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass
class _Supervisor:
    settings: ManagerSettings
    context: Context
    env: StageEnv
    cycles: int = 0
    due: float | None = None  # clock time of the next observation; None: the first boundary
    stopped: Literal["", "stop", "max"] = ""  # set once the manager stopped the child
    current: str = ""
    completed: int = 0
    observed: dict[str, Any] = field(default_factory=dict)

    def before_stage(self, node_id: str) -> None:
        self.current = node_id
        now = self.env.clock.monotonic()
        if "wait" in self.settings.actions and self.due is not None and now < self.due:
            return
        self.cycles += 1
        self.due = now + self.settings.poll_interval
        if "observe" in self.settings.actions:
            self.observed = self.telemetry(ChildStatus.RUNNING, None, "")
        stop = self.settings.stop_condition
        if stop is not None and stop.evaluate(self._lookup):
            self.stopped = "stop"
            raise ChildStopped(node_id, f"manager.stop_condition held at cycle {self.cycles}")
        if self.cycles >= self.settings.max_cycles:
            self.stopped = "max"
            raise ChildStopped(node_id, f"manager.max_cycles ({self.settings.max_cycles}) "
                               "reached")

    def after_stage(self, node_id: str, outcome: Outcome) -> None:
        self.completed += 1

    def _lookup(self, key: str) -> Any:
        name = key.removeprefix("context.")
        if name in self.observed:
            return self.observed[name]
        return self.context.lookup(key)

    def telemetry(self, status: ChildStatus | RunStatus, outcome: StageOutcome | None,
                  reason: str,
                  end: ChildEnd | None = None, run_dir: Path | None = None) -> dict[str, Any]:
        values: dict[str, Any] = {
            "stack.child.status": status.value,
            "stack.child.outcome": outcome.attractor_name if outcome is not None else "",
            "stack.child.current_node": self.current,
            "stack.child.completed_nodes": self.completed,
            "stack.child.failure_reason": reason, "stack.child.cycles": self.cycles,
            "stack.child.run_id": end.run_id if end is not None else "",
            "stack.child.run_dir": str(run_dir) if run_dir is not None else "",
        }
        return values


def _resolve(base: Path, text: str) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else base / path


def run_manager_loop(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    settings = node.manager
    assert settings is not None  # typed by the builder
    if env.run_child is None:
        return StageResult.fail(f"manager loop '{node.id}' cannot run its child here (no "
                                "child runner: the run was not started by delivery's runner)")
    if env.event_mode:
        return StageResult.fail(f"manager loop '{node.id}' cannot run in event mode (--state): "
                                "its child would run on this runner only; run the workflow "
                                "without --state")
    dotfile = _resolve(env.workspace, settings.child_dotfile)
    workdir = _resolve(env.workspace, settings.child_workdir) if settings.child_workdir \
        else env.workspace
    if not dotfile.is_file():
        return StageResult.fail(f"manager loop '{node.id}': the child pipeline {dotfile} "
                                "does not exist; stack.child_dotfile is relative to the run's "
                                "workspace — create it there or fix the path")
    if not workdir.is_dir():
        return StageResult.fail(f"manager loop '{node.id}': stack.child_workdir {workdir} is "
                                "not a directory; create it or fix the path")
    run_dir = env.stage_dir(node.id, attempt) / "child"
    watch = _Supervisor(settings, context, env)
    request = ChildRequest(workflow=dotfile, workspace=workdir, run_dir=run_dir,
                           goal=str(context.get("goal") or ""), values=context.snapshot(),
                           before_stage=watch.before_stage, after_stage=watch.after_stage)
    try:
        end = env.run_child(request)
    except DeliveryError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return StageResult.fail(f"manager loop '{node.id}': the child pipeline {dotfile} "
                                f"could not run: {first}")
    events = [("child_run", {"run_id": end.run_id, "run_dir": str(run_dir),
                             "status": end.status.value, "resumed": end.resumed,
                             "cycles": watch.cycles})]
    status: ChildStatus | RunStatus = end.status
    outcome: StageOutcome | None = None
    if watch.stopped:
        status = ChildStatus.RUNNING
    elif end.status is RunStatus.SUCCEEDED:
        status, outcome = ChildStatus.COMPLETED, StageOutcome.SUCCEEDED
    elif end.status is RunStatus.FAILED:
        status, outcome = ChildStatus.FAILED, StageOutcome.FAILED
    if end.path and not watch.stopped:
        watch.current = end.path[-1]
    updates = watch.telemetry(
        status, outcome, end.failure_reason if outcome is StageOutcome.FAILED else "", end,
        run_dir)
    if watch.stopped == "stop":
        return StageResult(StageOutcome.SUCCEEDED, updates=updates, events=events)
    if watch.stopped == "max":
        return _with_events(StageResult(
            StageOutcome.FAILED, f"manager loop '{node.id}': max cycles exceeded "
            f"({settings.max_cycles}); the child run {end.run_id} was stopped before "
            f"'{watch.current}' and is paused (delivery resume {run_dir})",
            updates, failure_class="budget_exhausted"), events)
    if outcome is StageOutcome.SUCCEEDED:
        return StageResult(StageOutcome.SUCCEEDED, updates=updates, events=events)
    if outcome is StageOutcome.FAILED:
        return _with_events(StageResult.fail(
            f"manager loop '{node.id}': the child pipeline failed: {end.failure_reason}",
            updates), events)
    return _with_events(StageResult.fail(
        f"manager loop '{node.id}': the child pipeline stopped as {end.status} "
        f"({end.failure_reason}); a child's human gates are answered with --answer on the "
        f"parent's run, or resume the child with delivery resume {run_dir}", updates), events)


def _with_events(result: StageResult, events: list[tuple[str, dict[str, Any]]]) -> StageResult:
    result.events = events
    return result


__all__ = ["run_manager_loop"]
