"""Starting and resuming runs: the library entry points behind `delivery run` / `resume`.

    outcome = start_run(RunRequest(workflow=Path("flow.dot"), goal="...", agent="replay:r.json"))

Everything outside the engine is passed in (agent backend, interviewer, clock), so tests
and embedders replace the world instead of patching it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delivery.agents.base import AgentBackend
from delivery.agents.registry import make_backend
from delivery.agents.replay import ReplayBackend
from delivery.engine.context import POINTER_PREFIX, ArtifactStore, Context
from delivery.engine.handlers import default_handlers
from delivery.engine.handlers.base import Clock, Handler, StageEnv
from delivery.engine.interviewer import (
    ConsoleInterviewer,
    Interviewer,
    ScriptedInterviewer,
)
from delivery.engine.preamble import recent_stages, render_preamble
from delivery.engine.run_loop import Engine, EngineOptions, Progress, RunState
from delivery.engine.templating import Renderer
from delivery.errors import RunRefused
from delivery.lang.model import LLM_TYPES, Node, NodeType, Workflow
from delivery.redact import Redactor
from delivery.store.runstore import EventLog, RunDirectory, new_run_id, verify_run
from delivery.validation.loader import load_workflow
from delivery.validation.validator import reads_goal

WORKFLOW_COPY = "workflow.dot"
EVENT_VALUE_CHARS = 2000

log = logging.getLogger("delivery")


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass
class RunRequest:
    workflow: Path
    goal: str | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)
    agent: str = ""
    workspace: Path | None = None
    run_dir: Path | None = None
    # gate id -> its answers, one per visit in order (a single string answers one visit)
    answers: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    repos: Mapping[str, str] = field(default_factory=dict)
    # An unanswered human gate (no --answer, no terminal): "deny" fails the gate's stage,
    # "pause" stops the run as paused so that `resume --answer` can continue it,
    # "managed" lets the node's agent answer a delegatable gate (else it is denied).
    gates: str = "deny"


@dataclass
class RunOutcome:
    run_id: str
    status: str
    failure_reason: str
    path: list[str]
    context: dict[str, Any]
    run_dir: Path

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status,
                "failure_reason": self.failure_reason, "path": self.path,
                "context": self.context, "run_dir": str(self.run_dir)}


@dataclass
class World:
    """The outside world of a run; every part may be replaced by the caller."""

    agent: AgentBackend | None = None
    interviewer: Interviewer | None = None
    # Ask unanswered human gates on the console (the CLI sets this on a terminal).
    interactive: bool = False
    clock: Clock = field(default_factory=SystemClock)
    progress: Progress | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    options: EngineOptions = field(default_factory=EngineOptions)
    # Stage handlers that stand in for the real ones (route scenarios play scripted probes,
    # scripts and effects instead of touching the world), by node type.
    handlers: Mapping[NodeType, Handler] | None = None


def initial_context(workflow: Workflow, goal: str | None,
                    inputs: Mapping[str, str]) -> dict[str, Any]:
    """The context a run starts with, or RunRefused naming the input that is wrong."""
    declared = {decl.name: decl for decl in workflow.inputs}
    for name in inputs:
        if name not in declared:
            listed = ", ".join(declared) or "none"
            raise RunRefused(f"input '{name}'", "is not declared by the workflow",
                             f"declared inputs: {listed}; declare it in inputs= or drop it")
    defaults = {d.name: d.value for d in workflow.defaults}
    resolved_goal = goal if goal else defaults.get("goal") or workflow.goal
    if not resolved_goal and reads_goal(workflow):  # otherwise empty, as in Attractor
        raise RunRefused("goal", "the run has no goal, and the workflow reads it",
                         "pass --goal TEXT, or set goal= or defaults=\"goal='...'\" in the graph")
    values: dict[str, Any] = {"goal": resolved_goal}
    for name, attr in workflow.attrs.items():
        values[f"graph.{name}"] = attr.text
    values["graph.goal"] = workflow.goal or resolved_goal
    for name, decl in declared.items():
        if name in inputs:
            value = inputs[name]
        elif name in defaults:
            value = defaults[name]
        elif decl.optional:
            value = ""
        else:
            raise RunRefused(f"input '{name}'", "is required and was not given",
                             f"pass --input {name}=VALUE or give it a default")
        values[f"inputs.{name}"] = value
        values[name] = value
    return values


def refuse_unsupported(workflow: Workflow, handlers: Mapping[NodeType, object]) -> None:
    for node in workflow.nodes.values():
        if node.type in (NodeType.PARALLEL, NodeType.FAN_IN):
            continue
        if node.type not in handlers:
            kind = node.type.value if node.type else "unknown"
            raise RunRefused(f"node '{node.id}'", f"has type {kind}, which this version of "
                             "delivery cannot run yet",
                             "run workflows made of agent, prompt, script, human, conditional, "
                             "wait and parallel stages")


def _interviewer(info: Mapping[str, Any], world: World,
                 used: dict[str, int]) -> Interviewer:
    """Scripted answers first; then the console on a terminal, else deny or pause."""
    scripted = ScriptedInterviewer(info.get("answers", {}), used)
    if world.interactive:
        return ConsoleInterviewer(scripted)
    return scripted


def _fidelity_preamble(state: RunState, workflow: Workflow,
                       context: Context) -> Callable[[Node], str]:
    """The preamble function for agent stages; reads the live state the engine advances."""

    def preamble(node: Node) -> str:
        fidelity = node.attr("fidelity") or workflow.attr("default_fidelity") or "compact"
        if state.resumed:
            # A resume lost the agent sessions: the first agent stage after it gets a
            # summary even at `full` fidelity, once (SPEC §5).
            state.resumed = False
            if fidelity == "full":
                fidelity = "summary:high"
        stages = recent_stages(workflow, state.path, state.outcomes)
        return render_preamble(fidelity, str(context.get("goal") or ""), stages)

    return preamble


class _Run:
    """Wires a run directory, a workflow and the world into an Engine."""

    def __init__(self, workflow: Workflow, run_dir: RunDirectory, info: Mapping[str, Any],
                 world: World, agent: AgentBackend,
                 recorded_events: Mapping[str, Any] | None = None) -> None:
        self.workflow = workflow
        self.run_dir = run_dir
        self.info = info
        self.world = world
        self.agent = agent
        self.redactor = Redactor.from_environment(world.environ)
        # a resumed run first writes back event lines a power failure took (EventLog)
        self.events = EventLog(run_dir.events_path, redactor=self.redactor, sync_each=False,
                               restore=recorded_events)
        self.handlers = {**default_handlers(), **(world.handlers or {})}

    def execute(self, state: RunState) -> RunOutcome:
        workspace = Path(self.info["workspace"])
        folders = {name: Path(loc) for name, loc in self.info.get("folders", {}).items()}
        context = Context(state.context, ArtifactStore(self.run_dir.artifacts_dir))
        interviewer = self.world.interviewer or _interviewer(self.info, self.world,
                                                             state.answers_used)

        def write_stage_file(node_id: str, attempt: int, name: str, text: str) -> None:
            self.run_dir.write_stage_file(node_id, attempt, name, text, redactor=self.redactor)

        env = StageEnv(
            workflow=self.workflow, workspace=workspace, run_dir=self.run_dir, agent=self.agent,
            renderer=Renderer(), interviewer=interviewer, clock=self.world.clock,
            folders=folders, stage_dir=self.run_dir.stage_dir,
            write_stage_file=write_stage_file,
            fidelity_preamble=_fidelity_preamble(state, self.workflow, context),
            gates=str(self.info.get("gates") or "deny"),
        )
        engine = Engine(self.workflow, self.handlers, env, self.run_dir, self.events,
                        save_extra=lambda: {"agent_state": self.agent.save_state()},
                        progress=self.world.progress, options=self.world.options)
        try:
            final = engine.run(state, context)
        finally:
            self.events.close()
        return RunOutcome(final.run_id, final.status, final.failure_reason, list(final.path),
                          context.resolved_snapshot(), self.run_dir.path)


def start_run(request: RunRequest, world: World | None = None) -> RunOutcome:
    """Validate, refuse or start a run; returns when it ends (or pauses)."""
    world = world or World()
    workflow_path = request.workflow.resolve()
    workflow = load_workflow(workflow_path)
    values = initial_context(workflow, request.goal, request.inputs)
    workspace = (request.workspace or Path.cwd()).resolve()
    if not workspace.is_dir():
        raise RunRefused("--workspace", f"{workspace} is not a directory",
                         "create it or point --workspace at an existing directory")
    agent = world.agent or _agent_from_profile(request.agent, workspace, workflow)
    refuse_unsupported(workflow, {**default_handlers(), **(world.handlers or {})})
    run_id = new_run_id()
    run_path = (request.run_dir or workspace / ".delivery" / "runs" / run_id).resolve()
    run_dir = RunDirectory.create(run_path)
    source = workflow_path.read_text(encoding="utf-8")
    (run_path / WORKFLOW_COPY).write_bytes(source.encode())  # resume checks its SHA-256
    folders = {name: str(_folder_path(loc, workspace, name))
               for name, loc in request.repos.items()}
    values["internal.run_id"] = run_id
    info = {
        "run_id": run_id, "workflow": str(workflow_path),
        "workflow_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "agent": request.agent, "workspace": str(workspace), "folders": folders,
        "answers": _answer_lists(request.answers), "gates": request.gates,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    run_dir.write_run_info(info)
    start = workflow.start
    assert start is not None  # validated
    # large inputs go to the artifact store before the first checkpoint, also in `initial`
    stored = Context(values, ArtifactStore(run_dir.artifacts_dir)).snapshot()
    state = RunState(run_id=run_id, next_node=start.id, context=dict(stored),
                     initial=dict(stored))
    run = _Run(workflow, run_dir, info, world, agent)
    # The event records what was asked, not bulk data: long inputs are cut (the checkpoint
    # holds them whole, large ones through the artifact store).
    shown_inputs = {name: value if len(value) <= EVENT_VALUE_CHARS else
                    value[:EVENT_VALUE_CHARS] + f"... ({len(value)} characters)"
                    for name, value in request.inputs.items()}
    run.events.append("run_started", run_id=run_id, workflow=str(workflow_path),
                      goal=values["goal"], inputs=shown_inputs)
    run_dir.save_checkpoint({**state.to_json(), "agent_state": agent.save_state(),
                             "events": run.events.record()})
    return run.execute(state)


def resume_run(run_path: Path, world: World | None = None,
               answers: Mapping[str, str | Sequence[str]] | None = None) -> RunOutcome:
    """Continue a run from its checkpoint; the interrupted stage runs again."""
    world = world or World()
    run_dir = RunDirectory.open(run_path.resolve())
    info = dict(run_dir.read_run_info())
    if answers:  # appended: they answer the gate's next visits
        merged = _answer_lists(info.get("answers", {}))
        for node_id, given in _answer_lists(answers).items():
            merged[node_id] = merged.get(node_id, []) + given
        info["answers"] = merged
    checkpoint = run_dir.load_checkpoint()
    if checkpoint is None:
        raise RunRefused(f"run {run_path}", "has no checkpoint (it never started)",
                         "start a new run with delivery run")
    copy = run_dir.path / WORKFLOW_COPY
    try:
        digest = hashlib.sha256(copy.read_bytes()).hexdigest()
    except OSError as err:
        raise RunRefused(f"run {run_path}", f"its workflow copy cannot be read: {err}",
                         "restore it from the workflow the run was started with") from None
    if digest != info.get("workflow_sha256"):
        raise RunRefused(f"run {run_path}", f"its workflow copy {copy} was changed after the "
                         "run started (its SHA-256 differs from run.json's)",
                         "restore the copy, or start a new run with the changed workflow")
    workflow = load_workflow(copy)
    refuse_unsupported(workflow, {**default_handlers(), **(world.handlers or {})})
    state = _checkpointed_state(checkpoint, workflow, run_dir)
    store = ArtifactStore(run_dir.artifacts_dir)
    state.context = relocate_artifacts(state.context, store)
    state.initial = relocate_artifacts(state.initial, store)
    agent = world.agent or _agent_from_profile(info.get("agent", ""), Path(info["workspace"]),
                                               workflow)
    if "agent_state" in checkpoint:
        agent.restore_state(checkpoint["agent_state"])
    state.resumed = True
    if state.status == "paused":  # waiting at a human gate: try it again
        state.status, state.failure_reason = "running", ""
    recorded = checkpoint.get("events")
    # opening the log locks the run against a second resume
    run = _Run(workflow, run_dir, info, world, agent,
               recorded if isinstance(recorded, dict) else None)
    recovered = run_dir.recover_checkpoint()
    if state.status == "running":
        # Appending to a log that was cut or edited would make it verify again.
        chain = verify_run(run_dir.path)
        if not chain.ok:
            run.events.close()
            raise RunRefused(f"run {run_path}", f"has a broken event log: {chain.problem}",
                             "a run whose log was edited or cut short cannot be resumed; "
                             "start a new run")
    if recovered:
        log.warning("resume: %s", recovered)
        run.events.append("checkpoint_recovered", problem=recovered)
    if answers:
        run_dir.write_run_info(info)
    if state.status == "running":
        run.events.append("run_resumed", next_node=state.next_node or "")
    return run.execute(state)


def relocate_artifacts(value: Any, store: ArtifactStore) -> Any:
    """`value` with pointers into a moved or copied run's artifact store re-pointed at `store`.

    A checkpoint holds absolute `file://` pointers; when the run directory was moved (or
    restored elsewhere between CI jobs) they name the old place. Artifact file names are
    content-addressed, so the file of the same name in `store` holds the same value.
    """
    if isinstance(value, str):
        if not ArtifactStore.is_pointer(value):
            return value
        here = store.values_dir / re.split(r"[\\/]", value)[-1]
        return POINTER_PREFIX + str(here) if here.is_file() else value
    if isinstance(value, dict):
        return {key: relocate_artifacts(item, store) for key, item in value.items()}
    if isinstance(value, list):
        return [relocate_artifacts(item, store) for item in value]
    return value


def _checkpointed_state(checkpoint: Mapping[str, Any], workflow: Workflow,
                        run_dir: RunDirectory) -> RunState:
    """The RunState a checkpoint holds, or RunRefused when it cannot be resumed from."""
    def refuse(problem: str) -> RunRefused:
        return RunRefused(f"checkpoint {run_dir.checkpoint_path}", f"is malformed: {problem}",
                          "restore it, or start a new run")

    shapes = {"context": dict, "initial": dict, "path": list, "attempts": dict,
              "outcomes": dict, "answers_used": dict, "steps": int}
    wrong = [name for name, kind in shapes.items()
             if name in checkpoint and not isinstance(checkpoint[name], kind)]
    if wrong:
        raise refuse(f"{', '.join(wrong)} has the wrong type")
    try:
        state = RunState.from_json(checkpoint)
    except TypeError as err:
        raise refuse(str(err)) from None
    if state.status == "running" and (not isinstance(state.next_node, str)
                                      or state.next_node not in workflow.nodes):
        raise refuse(f"its next node {state.next_node!r} is not in the workflow")
    return state


def _agent_from_profile(profile: str, workspace: Path, workflow: Workflow) -> AgentBackend:
    if not profile:
        if not workflow.nodes_of(*LLM_TYPES):
            # Nothing will ask an agent: an empty replay script stands in for one.
            return ReplayBackend({}, source="<no agent: the workflow has no agent stage>")
        raise RunRefused("--agent", "no agent backend was chosen",
                         "pass --agent replay:FILE.json (command: and openai: come later)")
    return make_backend(profile, base_dir=workspace)


def _folder_path(location: str, workspace: Path, name: str) -> Path:
    candidate = Path(location)
    if not candidate.is_absolute():
        candidate = (workspace / candidate)
    if candidate.is_dir():
        return candidate.resolve()
    raise RunRefused(f"--repo {name}={location}", "is not a local directory",
                     "give a path to a git worktree (GitHub repositories come with the "
                     "forge issue)")


def _answer_lists(answers: Mapping[str, str | Sequence[str]]) -> dict[str, list[str]]:
    return {node: [given] if isinstance(given, str) else list(given)
            for node, given in answers.items()}


def parse_answers(items: Sequence[str]) -> dict[str, list[str]]:
    """Repeated `--answer NODE=LABEL`: a gate's answers in the order given."""
    answers: dict[str, list[str]] = {}
    for item in items:
        for node_id, label in parse_assignments([item], "--answer").items():
            answers.setdefault(node_id, []).append(label)
    return answers


def parse_assignments(items: Sequence[str], option: str) -> dict[str, str]:
    """`K=V` items of a repeated option; RunRefused names the bad one."""
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise RunRefused(f"{option} {item!r}", "is not NAME=VALUE",
                             f"write {option} name=value")
        values[name.strip()] = value
    return values
