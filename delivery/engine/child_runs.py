"""Running a manager loop's child pipeline (delivery.engine.handlers.manager) as a run of
its own: started in its directory the first time, resumed from there after the parent was
interrupted; and the check of a child that is there before the parent's first stage."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Protocol

from delivery.engine.child import ChildEnd, ChildRequest
from delivery.engine.handlers.base import StageResult
from delivery.engine.outcome import RunOutcome
from delivery.engine.run_loop import EngineOptions, Progress
from delivery.engine.run_request import RunRequest
from delivery.engine.world import World
from delivery.errors import DeliveryError, RunRefused, WorkflowError
from delivery.lang.model import Node, NodeType, Workflow
from delivery.store.records import RunInfo
from delivery.store.runstore import LocalRunStore, LocalRunStores
from delivery.validation.loader import load_workflow


class StartRun(Protocol):
    """delivery.engine.runner.start_run, as a child run calls it."""

    def __call__(self, request: RunRequest, world: World | None = None, *,
                 options: EngineOptions | None = None,
                 observer: Progress | None = None) -> RunOutcome: ...


class ResumeRun(Protocol):
    """delivery.engine.runner.resume_run, as a child run calls it."""

    def __call__(self, run_path: Path, world: World | None = None, *,
                 options: EngineOptions | None = None,
                 observer: Progress | None = None) -> RunOutcome: ...


class ChildProgress(Progress):
    """Tells a manager loop about its child's stages (it may stop the child there)."""

    def __init__(self, request: ChildRequest) -> None:
        self.request = request

    def stage_started(self, node: Node, attempt: int) -> None:
        self.request.before_stage(node.id)

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        self.request.after_stage(node.id, result.outcome)


def run_child(request: ChildRequest, world: World, options: EngineOptions,
              info: RunInfo, start_run: StartRun, resume_run: ResumeRun) -> ChildEnd:
    """The child's run, with the parent's world (agents, clock, answers) and a local store
    inside the parent's run directory. The runner passes its own entry points in: it
    imports this module, which so never imports it back (no import cycle)."""
    child_world = dataclasses.replace(world, stores=LocalRunStores())
    observer = ChildProgress(request)
    resumed = (request.run_dir / "run.json").is_file()
    if not resumed:
        _refuse_recursion(request.workflow, request.run_dir, info)
    if resumed:
        outcome = resume_run(request.run_dir, child_world, options=options, observer=observer)
    else:
        child = load_workflow(request.workflow)
        inputs = {d.name: str(request.values[d.name]) for d in child.inputs
                  if d.name in request.values}
        outcome = start_run(RunRequest(
            workflow=request.workflow, goal=request.goal or None, inputs=inputs,
            agent=info.agent, workspace=request.workspace, run_dir=request.run_dir,
            answers=info.answers, model=child), child_world, options=options,
            observer=observer)
    return ChildEnd(outcome.run_id, outcome.status, outcome.failure_reason,
                    list(outcome.path), resumed)


def _refuse_recursion(workflow: Path, run_dir: Path, parent: RunInfo) -> None:
    """A child whose pipeline is one of its supervisors' would start itself again at every
    level, nesting run directories without end: refused before its first stage. The chain
    of supervisors is read from the run directories, as a child's is always
    `<supervisor's run>/<manager>/<attempt>/child` (durable, so a resume sees it too)."""
    ancestors = [Path(parent.workflow)]
    run = run_dir.parent.parent.parent  # the parent's run directory
    while run.name == "child" and (run.parent.parent.parent / "run.json").is_file():
        run = run.parent.parent.parent
        try:
            ancestors.append(Path(LocalRunStore.open_dir(run).read_run_info().workflow))
        except DeliveryError:
            break  # an unreadable supervisor: the chain above it is not ours to judge
    for ancestor in ancestors:
        if _same_file(ancestor, workflow):
            raise RunRefused(f"stack.child_dotfile {workflow}", "the pipeline supervises "
                             f"itself (it is its supervisor {ancestor}): the child would "
                             "start the same child again without end",
                             "point stack.child_dotfile at another pipeline")


def _same_file(one: Path, other: Path) -> bool:
    try:
        return one.samefile(other)
    except OSError:
        return one.resolve() == other.resolve()


def check_children(workflow: Workflow, workspace: Path) -> None:
    """A manager loop's child pipeline that is there before the run starts must validate
    (RunRefused naming the node and the first error); one an earlier stage writes is
    checked when the manager starts it."""
    for node in workflow.nodes_of(NodeType.MANAGER_LOOP):
        assert node.manager is not None  # typed by the builder
        child = Path(node.manager.child_dotfile).expanduser()
        child = child if child.is_absolute() else workspace / child
        if not child.is_file():
            continue
        try:
            load_workflow(child)
        except WorkflowError as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise RunRefused(f"manager loop '{node.id}'", f"its child pipeline {child} does "
                             f"not validate: {first}",
                             f"run delivery validate {child} and fix it") from None
