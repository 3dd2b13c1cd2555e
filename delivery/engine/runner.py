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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delivery.agents.base import AgentBackend
from delivery.agents.registry import Agents, resolve_agents
from delivery.agents.replay import ReplayBackend
from delivery.engine.agent_runtime import AgentRuntime
from delivery.engine.context import POINTER_PREFIX, ArtifactStore, Context
from delivery.engine.handlers import default_handlers
from delivery.engine.handlers.base import Clock, Handler, StageEnv
from delivery.engine.interviewer import (
    ConsoleInterviewer,
    Interviewer,
    ScriptedInterviewer,
)
from delivery.engine.redacting import RedactingAgent
from delivery.engine.run_loop import Engine, EngineOptions, Progress, RunState
from delivery.engine.templating import Renderer
from delivery.errors import RunRefused
from delivery.forges.base import Forge
from delivery.forges.select import forge_kind, is_github_location, local_settings, open_forge
from delivery.git import cache_root
from delivery.lang.diagnostics import has_errors
from delivery.lang.model import LLM_TYPES, NodeType, Workflow
from delivery.redact import Redactor, secret_values
from delivery.store.runstore import EventLog, RunDirectory, new_run_id, verify_run
from delivery.validation.loader import check_source, load_workflow
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
    forge: str = ""  # "local" | "github"; empty: chosen from the repository locations
    checks: Mapping[str, str] = field(default_factory=dict)  # folder -> local check command
    branch: str = ""  # the run's branch; empty: delivery/<ticket slug or run id>


@dataclass
class RunOutcome:
    run_id: str
    status: str
    failure_reason: str
    path: list[str]
    context: dict[str, Any]
    run_dir: Path
    usage: dict[str, int] = field(default_factory=dict)  # agent tokens of the whole run

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status,
                "failure_reason": self.failure_reason, "path": self.path,
                "context": self.context, "run_dir": str(self.run_dir),
                "usage": self.usage}


@dataclass
class World:
    """The outside world of a run; every part may be replaced by the caller."""

    agent: AgentBackend | None = None
    # backends for profile names (a node's agent=, or --agent NAME), before delivery.toml's
    agents: Mapping[str, AgentBackend] = field(default_factory=dict)
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
    # Where the folders' repositories and PRs live; None: opened from the run's settings.
    forge: Forge | None = None
    # The clone cache worktrees hang on; None: $XDG_CACHE_HOME/delivery.
    git_cache: Path | None = None


# Stages that reach the forge or the folders' git repositories.
FORGE_TYPES = frozenset({NodeType.PROBE, NodeType.PUBLISH, NodeType.MERGE,
                         NodeType.WORKTREE_ADD, NodeType.WORKTREE_REMOVE})


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
            runnable = sorted({*(t.value for t in handlers), "parallel", "fan_in"})
            raise RunRefused(f"node '{node.id}'", f"has type {kind}, which this version of "
                             "delivery cannot run",
                             f"use stages of the types it runs: {', '.join(runnable)}")


def _interviewer(info: Mapping[str, Any], world: World,
                 used: dict[str, int]) -> Interviewer:
    """Scripted answers first; then the console on a terminal, else deny or pause."""
    scripted = ScriptedInterviewer(info.get("answers", {}), used)
    if world.interactive:
        return ConsoleInterviewer(scripted)
    return scripted


def _agents(workflow: Workflow, spec: str, workspace: Path, world: World,
            gates: str) -> Agents:
    """The run's agent backends, built and checked before the first stage (RunRefused
    names the profile and the node that needs it)."""
    needing = list(workflow.nodes_of(*LLM_TYPES))
    if gates == "managed":
        needing += [node for node in workflow.nodes_of(NodeType.HUMAN)
                    if node.attr("delegatable") == "true"]
    agents = resolve_agents([(node.id, node.attr("agent")) for node in needing],
                            default_spec=spec, workspace=workspace, environ=world.environ,
                            given=world.agent, given_named=world.agents,
                            sleep=world.clock.sleep,
                            clock=world.clock.monotonic)
    if agents.default is None:
        # Nothing asks the default agent: an empty replay script stands in for one.
        agents.default = ReplayBackend({}, source="<no agent: no stage needs the default>")
    return agents


class _Run:
    """Wires a run directory, a workflow and the world into an Engine."""

    def __init__(self, workflow: Workflow, run_dir: RunDirectory, info: Mapping[str, Any],
                 world: World, agents: Agents,
                 recorded_events: Mapping[str, Any] | None = None,
                 redactor: Redactor | None = None) -> None:
        self.workflow = workflow
        self.run_dir = run_dir
        self.info = info
        self.world = world
        self.redactor = redactor or _redactor(world)
        # what is sent to the agents and what comes back is redacted (SPEC §14)
        self.agents = agents.wrapped(lambda backend: RedactingAgent(backend, self.redactor))
        self.agent = self.agents.for_profile("")
        # a resumed run first writes back event lines a power failure took (EventLog)
        self.events = EventLog(run_dir.events_path, redactor=self.redactor, sync_each=False,
                               restore=recorded_events)
        self.handlers = {**default_handlers(), **(world.handlers or {})}
        self.forge = world.forge
        # Stand-in handlers (route scenarios) never touch the forge: open it only for the
        # stages the real handlers run.
        real = [t for t in FORGE_TYPES if t not in (world.handlers or {})]
        if self.forge is None and info.get("repos") and workflow.nodes_of(*real):
            self.forge = open_forge(str(info.get("forge") or "local"),
                                    checks=info.get("checks") or {}, environ=world.environ,
                                    required_approvals=int(info.get("required_approvals")
                                                           or 0),
                                    redactor=self.redactor)

    def execute(self, state: RunState) -> RunOutcome:
        workspace = Path(self.info["workspace"])
        folders = {name: Path(loc) for name, loc in self.info.get("folders", {}).items()}
        context = Context(state.context, ArtifactStore(self.run_dir.artifacts_dir),
                          redactor=self.redactor)
        interviewer = self.world.interviewer or _interviewer(self.info, self.world,
                                                             state.answers_used)

        def write_stage_file(node_id: str, attempt: int, name: str, text: str) -> None:
            self.run_dir.write_stage_file(node_id, attempt, name, text, redactor=self.redactor)

        def take_resumed() -> bool:
            # A resume lost the agent sessions: the first agent stage after it gets a
            # summary even at `full` fidelity, once (SPEC §5).
            resumed, state.resumed = state.resumed, False
            return resumed

        runtime = AgentRuntime(
            self.workflow, self.agents, workspace, folders, state.run_id,
            path=lambda: state.path, outcomes=lambda: state.outcomes,
            redact=self.redactor.text, take_resumed=take_resumed,
        )

        env = StageEnv(
            workflow=self.workflow, workspace=workspace, run_dir=self.run_dir, agent=self.agent,
            renderer=Renderer(), interviewer=interviewer, clock=self.world.clock,
            folders=folders, stage_dir=self.run_dir.stage_dir,
            write_stage_file=write_stage_file,
            fidelity_preamble=lambda node: runtime.plan(node, context).preamble,
            gates=str(self.info.get("gates") or "deny"), agent_runtime=runtime,
            path=lambda: state.path,
            redact=self.redactor.text,
            forge=self.forge, repos=dict(self.info.get("repos") or {}),
            branch=str(self.info.get("branch") or ""),
            git_cache=self.world.git_cache or (Path(self.info["git_cache"])
                                               if self.info.get("git_cache")
                                               else cache_root(self.world.environ)),
        )
        engine = Engine(self.workflow, self.handlers, env, self.run_dir, self.events,
                        save_extra=lambda: {"agent_state": self.agent.save_state(),
                                            "agent_states": self.agents.save_state()},
                        progress=self.world.progress, options=self.world.options)
        try:
            final = engine.run(state, context)
        finally:
            self.events.close()
        return RunOutcome(final.run_id, final.status, final.failure_reason, list(final.path),
                          context.resolved_snapshot(), self.run_dir.path,
                          usage=dict(final.usage))


def start_run(request: RunRequest, world: World | None = None) -> RunOutcome:
    """Validate, refuse or start a run; returns when it ends (or pauses)."""
    world = world or World()
    redactor = _redactor(world)
    workflow_path = request.workflow.resolve()
    workflow = load_workflow(workflow_path)
    values = initial_context(workflow, request.goal, request.inputs)
    workspace = (request.workspace or Path.cwd()).resolve()
    if not workspace.is_dir():
        raise RunRefused("--workspace", f"{workspace} is not a directory",
                         "create it or point --workspace at an existing directory")
    refuse_unsupported(workflow, {**default_handlers(), **(world.handlers or {})})
    agents = _agents(workflow, request.agent, workspace, world, request.gates)
    setup = folder_setup(request, workflow, workspace)
    run_id = new_run_id()
    run_path = (request.run_dir or workspace / ".delivery" / "runs" / run_id).resolve()
    # The run's copy holds no secret (SPEC §14); this run and its resumes run the copy.
    source = _workflow_source(workflow_path)
    redacted = redactor.text(source)
    if redacted != source:
        workflow = _redacted_workflow(redacted, workflow_path)
        source = redacted
    run_dir = RunDirectory.create(run_path)
    (run_path / WORKFLOW_COPY).write_bytes(source.encode())  # resume checks its SHA-256
    values["internal.run_id"] = run_id
    info = {
        "run_id": run_id, "workflow": str(workflow_path),
        "workflow_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "agent": request.agent, "workspace": str(workspace), **setup,
        "branch": request.branch or run_branch(values, run_id),
        "git_cache": str(world.git_cache or ""),
        "answers": _answer_lists(request.answers), "gates": request.gates,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    run_dir.write_run_info(redactor.value(info))
    start = workflow.start
    assert start is not None  # validated
    # large inputs go to the artifact store before the first checkpoint, also in `initial`
    stored = Context(values, ArtifactStore(run_dir.artifacts_dir), redactor=redactor).snapshot()
    state = RunState(run_id=run_id, next_node=start.id, context=dict(stored),
                     initial=dict(stored))
    run = _Run(workflow, run_dir, info, world, agents, redactor=redactor)
    # The event records what was asked, not bulk data: long inputs are cut (the checkpoint
    # holds them whole, large ones through the artifact store).
    shown_inputs = {name: value if len(value) <= EVENT_VALUE_CHARS else
                    value[:EVENT_VALUE_CHARS] + f"... ({len(value)} characters)"
                    for name, value in request.inputs.items()}
    run.events.append("run_started", run_id=run_id, workflow=str(workflow_path),
                      goal=values["goal"], inputs=shown_inputs)
    run_dir.save_checkpoint({**state.to_json(), "agent_state": run.agent.save_state(),
                             "events": run.events.record()})
    return run.execute(state)


def _redactor(world: World) -> Redactor:
    """The run's redactor: the secrets of the world's environment and of the process's
    (scripts run with the process's, so what they print of it must be masked too)."""
    return Redactor.from_environment(os.environ, extra=secret_values(world.environ))


def _workflow_source(path: Path) -> str:
    # a BOM at the start is accepted, as by the loader
    return path.read_text(encoding="utf-8").removeprefix("\ufeff")


def _redacted_workflow(source: str, path: Path) -> Workflow:
    """The workflow with its secrets masked; refused when masking them broke it (a secret
    written as a bare word, say)."""
    workflow, diagnostics = check_source(source, str(path))
    if workflow is None or has_errors(diagnostics):
        first = next(d for d in diagnostics if d.severity == "error")
        raise RunRefused("workflow", f"holds a secret value, and with it masked as *** it no "
                         f"longer validates ({first.format_text().splitlines()[0]})",
                         "do not write secrets into a workflow: read them from the "
                         "environment in a script ($GITHUB_TOKEN)")
    return workflow


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
    agents = _agents(workflow, str(info.get("agent", "")), Path(info["workspace"]), world,
                     str(info.get("gates") or "deny"))
    if "agent_state" in checkpoint:
        agents.for_profile("").restore_state(checkpoint["agent_state"])
    if isinstance(checkpoint.get("agent_states"), Mapping):
        agents.restore_state(checkpoint["agent_states"])
    state.resumed = True
    if state.status == "paused":  # waiting at a human gate: try it again
        state.status, state.failure_reason = "running", ""
    recorded = checkpoint.get("events")
    # opening the log locks the run against a second resume
    run = _Run(workflow, run_dir, info, world, agents,
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
        run_dir.write_run_info(run.redactor.value(info))
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
              "outcomes": dict, "answers_used": dict, "steps": int, "usage": dict}
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


def folder_setup(request: RunRequest, workflow: Workflow, workspace: Path) -> dict[str, Any]:
    """What run.json records about the folders: their repositories on the forge (`repos`),
    their working directories (`folders`), the forge and the local check commands.

    A folder works in `<workspace>/<name>` (where `worktree_add` puts it); a workflow that
    creates no worktrees works in a local LOCATION itself (a folder given as a path)."""
    kind = forge_kind(request.repos.values(), request.forge or None, workspace)
    creates_worktrees = bool(workflow.nodes_of(NodeType.WORKTREE_ADD))
    repos: dict[str, str] = {}
    folders: dict[str, str] = {}
    for name, location in request.repos.items():
        if kind == "github":
            if not is_github_location(location, workspace):
                raise RunRefused(f"--repo {name}={location}", "is not owner/name on GitHub, "
                                 "and a run uses one forge for all its folders",
                                 "give every folder as owner/name, or use --forge local "
                                 "with local paths")
            repos[name] = location
            folders[name] = str(workspace / name)
            continue
        path = Path(location).expanduser()
        path = (path if path.is_absolute() else workspace / path).resolve()
        if not path.is_dir():
            raise RunRefused(f"--repo {name}={location}", "is not a local directory, "
                             "which the local forge needs",
                             "give the path of a git repository, or owner/name for every "
                             "folder with --forge github")
        repos[name] = str(path)
        folders[name] = str(workspace / name if creates_worktrees else path)
    configured, approvals = local_settings(workspace)
    checks = {**configured, **request.checks}
    unknown = sorted(set(checks) - set(repos))
    if unknown and request.repos:
        raise RunRefused(f"check for folder '{unknown[0]}'", "names no folder of the run",
                         f"the folders are: {', '.join(repos)}")
    return {"forge": kind, "repos": repos, "folders": folders, "checks": checks,
            "required_approvals": approvals}


def run_branch(values: Mapping[str, Any], run_id: str) -> str:
    """`delivery/<ticket slug>` when the run has a `ticket` input, else `delivery/<run id>`."""
    slug = ticket_slug(str(values.get("ticket") or ""))
    return f"delivery/{slug or run_id}"


def ticket_slug(ticket: str) -> str:
    """`https://github.com/o/web/issues/12` -> `web-12`; `https://x/browse/T-1` -> `t-1`."""
    parts = [part for part in re.split(r"[/?#]", ticket.split("://", 1)[-1]) if part][1:]
    if not parts:
        return ""
    words = parts[-1:]
    if parts[-1].isdigit() and len(parts) >= 3:
        words = [parts[-3], parts[-1]]  # owner/name/issues/12: the name and the number
    slug = re.sub(r"[^a-z0-9._-]+", "-", "-".join(words).lower()).strip("-.")
    return slug[:40].rstrip("-.")


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
    """`K=V` items of a repeated option; RunRefused names the bad one, or the name given
    twice (the second value would silently win)."""
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise RunRefused(f"{option} {item!r}", "is not NAME=VALUE",
                             f"write {option} name=value")
        name = name.strip()
        if name in values:
            raise RunRefused(f"{option} {name}=", "is given twice",
                             f"give {option} {name}=VALUE once")
        values[name] = value
    return values
