"""A run request resolved into one `RunPlan`, step by step in pipeline order (issue 35).

The runner's entry points are these steps in sequence, and both end in the same `RunPlan`
and `RunState`, which `delivery.engine.runner` runs:

    start:  load_workflow → initial_context → check_workspace → check_request
            → prepare_agents → folder_setup → refuse_what_would_fail → create_run
    resume: open_run → check_copy → load_model → apply_answers_and_budget
            → prepare_agents → make_plan → lock_run → load_state → claim → record_resume

A start writes nothing before `create_run` (every refusal leaves no run directory, no
state ref, no push); a resume changes nothing before `lock_run` (a refused resume leaves
the run as it was). Each step's docstring says what it refuses or writes. This module
never imports the runner: what it needs of the run side is below it (run_setup,
preflight_gate, branch_check, child_runs, world).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from delivery.agents.registry import Agents, resolve_agents
from delivery.agents.replay import ReplayBackend
from delivery.engine import branch_check, preflight_gate
from delivery.engine.attractor_logs import check_logs_folder
from delivery.engine.budget import Limits, budget_option, limits_of, run_limits
from delivery.engine.child_runs import check_children
from delivery.engine.context import Context
from delivery.engine.handlers import default_handlers
from delivery.engine.handlers.base import Clock, Handler
from delivery.engine.handlers.human import refuse_unknown_answers
from delivery.engine.redacting import RedactingAgent
from delivery.engine.run_inputs import answer_lists, run_branch
from delivery.engine.run_request import RunRequest
from delivery.engine.run_setup import (
    FORGE_TYPES,
    FolderSetup,
    Spelling,
    gate_mode,
    max_parallel_option,
    max_runners_option,
    refuse_folder_problems,
)
from delivery.engine.world import SystemClock, World
from delivery.errors import RunRefused, RunStoreError
from delivery.forges.select import require_settings
from delivery.forges.steering import workflow_bots
from delivery.lang.diagnostics import Diagnostic, has_errors
from delivery.lang.model import LLM_TYPES, NodeType, Workflow
from delivery.redact import Redactor, secret_values
from delivery.store.base import Loaded, RunStore, StoreCapability
from delivery.store.eventlog import utc_stamp
from delivery.store.liveness import Runner
from delivery.store.model_cache import CachedWorkflow, load_checked, load_run_workflow, write_cache
from delivery.store.records import GateMode, RunInfo, RunState, RunStatus
from delivery.store.runstore import WORKFLOW_COPY, Started, new_run_id, started_with
from delivery.validation.loader import check_source

EVENT_VALUE_CHARS = 2000

log = logging.getLogger("delivery")


@dataclass(frozen=True)
class RunPlan:
    """What a run runs with, resolved and checked before its first stage: the same for a
    start and a resume."""

    workflow: Workflow
    info: RunInfo  # as run.json has it, secrets unmasked
    store: RunStore
    agents: Agents  # wrapped in the run's redaction (SPEC §14)
    redactor: Redactor
    handlers: Mapping[NodeType, Handler]
    limits: Limits  # the graph's budget with run.json's over it
    # the forge the run opens itself, its settings checked ("": the world's, or none used)
    own_forge: str
    # bots whose reviews, threads and labels steer the run besides writers (SPEC §14)
    trusted_bots: tuple[str, ...] = ()


# ---- the steps of a start ----------------------------------------------------------------

def load_workflow(request: RunRequest) -> tuple[Path, Workflow, Sequence[Diagnostic] | None]:
    """The request's workflow (its path resolved), read and validated unless the caller
    gave its model; WorkflowError for one that does not validate."""
    path = request.workflow.resolve()
    if request.model is not None:
        return path, request.model, request.diagnostics
    workflow, diagnostics = load_checked(path)
    return path, workflow, diagnostics


def check_workspace(request: RunRequest, spelling: Spelling) -> Path:
    """The workspace (default: the current directory), resolved; refused when it is not a
    directory."""
    workspace = (request.workspace or Path.cwd()).resolve()
    if not workspace.is_dir():
        where = spelling.option("--workspace", "workspace")
        raise RunRefused(where, f"{workspace} is not a directory",
                         f"create it or point {where} at an existing directory")
    return workspace


def check_request(workflow: Workflow, request: RunRequest, workspace: Path, world: World,
                  spelling: Spelling) -> tuple[Limits, GateMode]:
    """The request's budget and gate mode; refused, in this order: a stage type this version
    cannot run, a budget that does not parse, a manager loop's child pipeline that does not
    validate, a gate mode that is none of them, a `--max-parallel` below 1."""
    refuse_unsupported(workflow, handlers_for(world))
    budget = budget_option(request.budget, spelling.option("--budget", "budget"))
    check_children(workflow, workspace)
    gates = gate_mode(request.gates, spelling.option("--gates", "gates"))
    max_parallel_option(request.max_parallel, spelling.option("--max-parallel", "max_parallel"))
    max_runners_option(request.max_runners, spelling.option("--max-runners", "max_runners"))
    if request.cli:  # a child run is handed its parent's answers, for both workflows' gates
        refuse_unknown_answers(workflow, answer_lists(request.answers))
    return budget, gates


def refuse_what_would_fail(request: RunRequest, workflow: Workflow, setup: FolderSetup,
                           world: World, spelling: Spelling) -> None:
    """Refuses, before anything is written, what would fail a stage after the agent has
    worked: the folders' problems (SPEC §12), a forge without its settings (no token),
    what the token may not do (preflight, SPEC §7.1), a `--branch` that is a person's."""
    refuse_folder_problems(workflow, setup, world, spelling)
    if world.forge is None and setup.repos and workflow.nodes_of(*FORGE_TYPES):
        # the forge would fail its first stage
        require_settings(setup.forge, world.environ)
    if preflight_gate.wanted(workflow, setup, world.handlers):
        preflight_gate.refuse_before_start(workflow, setup, world)
    branch_check.refuse_invalid_branch(request.branch, spelling.option("--branch", "branch"))
    if branch_check.needs_check(request.branch, workflow, setup, world.handlers):
        branch_check.refuse_foreign_branch(request.branch, setup, world.forge, world.environ,
                                           spelling.option("--branch", "branch"))


def create_run(request: RunRequest, world: World, workflow_path: Path, workflow: Workflow,
               diagnostics: Sequence[Diagnostic] | None, *, values: dict[str, Any],
               workspace: Path, setup: FolderSetup, budget: Limits, gates: GateMode,
               agents: Agents) -> tuple[RunPlan, RunState]:
    """The run's first writes: its directory (or state ref), run.json, the workflow's copy
    and model cache, the large inputs' artifacts, then (the log locked) the `run_started`
    event and the first save. Refused before them: a `--logs` folder inside the run
    directory, a workflow that cannot be read or no longer validates with its secrets
    masked."""
    redactor = run_redactor(world)
    run_id = new_run_id(world.clock.now())
    run_path = (request.run_dir or workspace / ".delivery" / "runs" / run_id).resolve()
    if request.logs is not None:
        check_logs_folder(request.logs, run_path)
    # The run's copy holds no secret (SPEC §14); this run and its resumes run the copy.
    source, workflow, diagnostics = _run_copy(workflow_path, workflow, diagnostics, redactor)
    store = world.stores.create(run_path)
    values["internal.run_id"] = run_id
    runner = Runner.this_process()
    info = RunInfo(
        run_id=run_id, workflow=str(workflow_path),
        workflow_sha256=hashlib.sha256(source.encode()).hexdigest(), agent=request.agent,
        workspace=str(workspace), forge=setup.forge, repos=setup.repos,
        folders=setup.folders, checks=setup.checks,
        required_approvals=setup.required_approvals,
        branch=request.branch or run_branch(values, run_id),
        git_cache=str(world.git_cache or ""), answers=answer_lists(request.answers),
        gates=gates, started=world.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        logs=str(request.logs.resolve()) if request.logs is not None else "",
        budget_tokens=budget.tokens or 0, budget_usd=budget.usd or 0.0,
        max_parallel=max_parallel_option(request.max_parallel, "max_parallel") or 0,
        max_runners=max_runners_option(request.max_runners, "max_runners") or 0,
        pid=runner.pid, host=runner.host, pid_started=runner.started)
    store.create_run(redacted_info(info, redactor), source.encode())
    cache_sha256 = ""
    if diagnostics is not None:  # what resumes load instead of the copy (issue 23)
        cache_sha256 = write_cache(store.path, workflow, diagnostics, source.encode(),
                                   str(store.path / WORKFLOW_COPY))
    start = workflow.start
    assert start is not None  # validated
    # large inputs go to the artifact store before the first save, also in `initial`
    stored = Context(values, store.artifacts, redactor=redactor).snapshot()
    plan = make_plan(store, info, workflow, agents, world, redactor)
    lock_run(plan, world)
    state = RunState(run_id=run_id, next_node=start.id, context=dict(stored),
                     initial=dict(stored), agent_state=plan.agents.for_profile("").save_state(),
                     agent_states=plan.agents.save_state())
    # The event records what was asked, not bulk data: long inputs are cut (the state
    # holds them whole, large ones through the artifact store).
    shown_inputs = {name: value if len(value) <= EVENT_VALUE_CHARS else
                    value[:EVENT_VALUE_CHARS] + f"... ({len(value)} characters)"
                    for name, value in request.inputs.items()}
    # the digests a resume checks the copy and the cache against (SPEC §14): in the
    # chained log, not only in run.json, which a stage's process can rewrite with them
    store.append_event("run_started", run_id=run_id, workflow=str(workflow_path),
                       goal=values["goal"], inputs=shown_inputs,
                       workflow_sha256=info.workflow_sha256, model_sha256=cache_sha256)
    store.save_whole(state)
    return plan, state


def _run_copy(path: Path, workflow: Workflow, diagnostics: Sequence[Diagnostic] | None,
              redactor: Redactor) -> tuple[str, Workflow, Sequence[Diagnostic] | None]:
    """The workflow's source as the run keeps it, secrets masked, and the model of that
    source (the given one when there was nothing to mask)."""
    try:
        source = path.read_text(encoding="utf-8").removeprefix("\ufeff")  # as the loader
    except (OSError, UnicodeDecodeError) as err:
        raise RunRefused(f"workflow {path}", f"cannot be read: {err}",
                         "check the file") from None
    redacted = redactor.text(source)
    if redacted == source:
        return source, workflow, diagnostics
    masked, found = check_source(redacted, str(path))
    if masked is None or has_errors(found):
        first = next(d for d in found if d.severity == "error")
        raise RunRefused("workflow", f"holds a secret value, and with it masked as *** it no "
                         f"longer validates ({first.format_text().splitlines()[0]})",
                         "do not write secrets into a workflow: read them from the "
                         "environment in a script ($GITHUB_TOKEN, on a node with "
                         "forge_token=true)")
    return redacted, masked, found


# ---- the steps of a resume ---------------------------------------------------------------

@dataclass(frozen=True)
class RunCopy:
    """The run's copy of its workflow, its digests checked."""

    path: Path
    source: bytes
    started: Started | None  # what the log recorded at the start (None: an older run)


@dataclass(frozen=True)
class Resumption:
    """What a resume changes of the run: the answers it was given, a budget it raised."""

    answers: dict[str, list[str]]
    info_changed: bool  # run.json is written again
    raised: Limits  # empty: nothing raised (also when the run held that budget already)
    limits: Limits


def open_run(run_path: Path, world: World) -> tuple[RunStore, RunInfo]:
    """The run's store and run.json; the store refuses what is not a run."""
    store = world.stores.open(run_path.resolve())
    return store, store.read_run_info()


def check_copy(store: RunStore, info: RunInfo, run_path: Path) -> RunCopy:
    """The run's workflow copy; refused when its SHA-256 is not run.json's, or not the one
    the event log recorded at the start (run.json rewritten to match), or the log's start
    cannot be read."""
    copy, source = store.read_workflow_copy()
    digest = hashlib.sha256(source).hexdigest()
    if digest != info.workflow_sha256:
        raise RunRefused(f"run {run_path}", f"its workflow copy {copy} was changed after the "
                         "run started (its SHA-256 differs from run.json's)",
                         "restore the copy, or start a new run with the changed workflow")
    try:
        started = started_with(store.path)
    except RunStoreError as error:
        raise RunRefused(f"run {run_path}", f"cannot be resumed: {error}",
                         "a run whose log was edited cannot be resumed; start a new run"
                         ) from None
    if started is not None and digest != started.workflow_sha256:
        raise RunRefused(f"run {run_path}", f"its workflow copy {copy} is not the workflow "
                         "the run started with (its SHA-256 differs from the one the event "
                         "log recorded at the start, though run.json was rewritten to match)",
                         "something wrote the run directory (a prompt-injected agent?): "
                         "start a new run")
    return RunCopy(copy, source, started)


def load_model(store: RunStore, copy: RunCopy, world: World,
               warnings: Callable[[Sequence[Diagnostic]], None] | None) -> CachedWorkflow:
    """The model the run started with, from its model cache (the copy is parsed and
    validated again only when the cache is missing, stale, damaged or not the one the run
    started with); its warnings go to `warnings`; refused when it has a stage type this
    version cannot run."""
    loaded = load_run_workflow(store.path, copy.path, copy.source,
                               copy.started.model_sha256 if copy.started else None)
    if warnings is not None:
        warnings(loaded.diagnostics)
    refuse_unsupported(loaded.workflow, handlers_for(world))
    return loaded


def apply_answers_and_budget(info: RunInfo, workflow: Workflow,
                             answers: Mapping[str, str | Sequence[str]] | None,
                             raised: Limits) -> Resumption:
    """`info` with the answers appended (they answer the gates' next visits) and the raised
    budget over its own; nothing is written here (`record_resume` does). A budget the run
    holds already (the Action's `budget` input, given to each job of the run again) raises
    nothing and is not recorded."""
    given = answer_lists(answers) if answers else {}
    if given:
        merged = {node: list(listed) for node, listed in info.answers.items()}
        for node_id, listed in given.items():
            merged[node_id] = merged.get(node_id, []) + listed
        info.answers = merged
    held = (info.budget_tokens, info.budget_usd)
    if raised:
        info.budget_tokens = raised.tokens or info.budget_tokens
        info.budget_usd = raised.usd or info.budget_usd
    limits = run_limits(workflow, info)
    raised = Limits() if limits == limits_of(workflow, *held) else raised
    return Resumption(given, bool(given) or (info.budget_tokens, info.budget_usd) != held,
                      raised, limits)


def load_state(plan: RunPlan, run_path: Path) -> Loaded:
    """The run's last save, its artifacts relocated and the agents' sessions restored;
    refused (the store closed, the run as it was) when there is none, its next node is not
    in the workflow, or the log or checkpoint was edited or cut short."""
    store, workflow = plan.store, plan.workflow
    try:
        loaded = store.load()
        if loaded is None:
            raise RunRefused(f"run {run_path}", "has no checkpoint (it never started)",
                             "start a new run with delivery run")
        state = loaded.state
        if state.status is RunStatus.CANCELLED:
            raise RunRefused(f"run {run_path}", "was cancelled with delivery close (its "
                             "pull requests were closed)", "start a new run to deliver it")
        if state.status is RunStatus.RUNNING and (state.next_node is None
                                                  or state.next_node not in workflow.nodes):
            raise RunRefused(f"run {run_path}", f"its saved next node {state.next_node!r} "
                             "is not in the workflow", "start a new run")
        state.context = store.artifacts.relocate(state.context)
        state.initial = store.artifacts.relocate(state.initial)
        plan.agents.for_profile("").restore_state(state.agent_state)
        plan.agents.restore_state(state.agent_states)
    except RunStoreError as error:
        store.close()
        raise RunRefused(f"run {run_path}", f"cannot be resumed: {error}",
                         "a run whose log or checkpoint was edited or cut short cannot be "
                         "resumed; start a new run") from None
    except BaseException:
        store.close()
        raise
    return loaded


def claim(plan: RunPlan) -> None:
    """A store that claims its runs (a state ref) claims this one now: the refusals above
    left no claim. A claim refused (another job holds the run) closes the store."""
    store = plan.store
    if StoreCapability.CLAIM not in store.capabilities:
        return
    try:
        store.claim()
    except BaseException:
        store.close()
        raise


def record_resume(plan: RunPlan, loaded: Loaded, change: Resumption, answered_by: str,
                  clock: Clock) -> RunState:
    """The state to go on from (a gate the run paused at is tried again), and what the
    resume writes before its first stage: a checkpoint recovered on the way, run.json with
    the new answers or budget, `budget_raised`, `run_resumed` and who answered (§9.1)."""
    store, state = plan.store, loaded.state
    state.resumed = True
    if state.status is RunStatus.PAUSED:  # waiting at a human gate: try it again
        state.status, state.failure_reason = RunStatus.RUNNING, ""
    if loaded.recovered:
        log.warning("resume: %s", loaded.recovered)
        store.append_event("checkpoint_recovered", problem=loaded.recovered)
        store.save_whole(state)
    # run.json names the process that runs the run now (shown `interrupted` once it is gone)
    info, runner = plan.info, Runner.this_process()
    moved = state.status is RunStatus.RUNNING and \
        (info.pid, info.host, info.pid_started) != (runner.pid, runner.host, runner.started)
    if moved:
        info.pid, info.host, info.pid_started = runner.pid, runner.host, runner.started
    if change.info_changed or moved:
        store.write_run_info(redacted_info(plan.info, plan.redactor))
    if change.raised:
        store.append_event("budget_raised", limits=change.limits.describe())
    if state.status is RunStatus.RUNNING:
        store.append_event("run_resumed", next_node=state.next_node or "")
        if answered_by:  # who answered a paused gate and when (§9.1)
            for node_id, given in change.answers.items():
                store.append_event("answer_received", node=node_id, labels=given,
                                   by=answered_by,
                                   at=clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
    return state


# ---- shared by both ----------------------------------------------------------------------

def prepare_agents(workflow: Workflow, spec: str, workspace: Path, world: World,
                   gates: GateMode) -> Agents:
    """The run's agent backends, built and checked before the first stage (RunRefused
    names the profile and the node that needs it)."""
    needing = list(workflow.nodes_of(*LLM_TYPES))
    if gates is GateMode.MANAGED:
        needing += [node for node in workflow.nodes_of(NodeType.HUMAN)
                    if node.delegatable]
    agents = resolve_agents([(node.id, node.attr("agent")) for node in needing],
                            default_spec=spec, workspace=workspace, environ=world.environ,
                            given=world.agent, given_named=world.agents,
                            sleep=world.clock.sleep,
                            clock=world.clock.monotonic)
    if agents.default is None:
        # Nothing asks the default agent: an empty replay script stands in for one.
        agents.default = ReplayBackend({}, source="<no agent: no stage needs the default>")
    return agents


def make_plan(store: RunStore, info: RunInfo, workflow: Workflow, agents: Agents,
              world: World, redactor: Redactor | None = None) -> RunPlan:
    """The plan of a run whose store and run.json are there; refused (nothing changed: a
    resume without its token leaves the run as it was) when the forge the run opens
    itself lacks its settings."""
    redactor = redactor or run_redactor(world)
    handlers = handlers_for(world)
    # Stand-in handlers (route scenarios) never touch the forge: it is opened only for the
    # stages the real handlers run, by the runner, which closes it on every way out.
    real = [t for t in FORGE_TYPES if t not in (world.handlers or {})]
    own_forge = ""
    if world.forge is None and info.repos and workflow.nodes_of(*real):
        own_forge = info.forge or "local"
        require_settings(own_forge, world.environ)
    return RunPlan(workflow=workflow, info=info, store=store,
                   # what is sent to the agents and what comes back is redacted (SPEC §14)
                   agents=agents.wrapped(lambda backend: RedactingAgent(backend, redactor)),
                   redactor=redactor, handlers=handlers, limits=run_limits(workflow, info),
                   own_forge=own_forge,
                   # read before the log locks the run: a bad list refuses it as it is
                   trusted_bots=workflow_bots(workflow.attr("trusted_bots")))


def lock_run(plan: RunPlan, world: World) -> None:
    """Opens the run's log, which locks the run against a second writer and cuts a torn
    last event. The steps after it close the store when they fail; those before it need
    not (nothing is held yet)."""
    plan.store.open_log(plan.redactor, _stamp(world.clock))


def refuse_unsupported(workflow: Workflow, handlers: Mapping[NodeType, object]) -> None:
    """Refused: a node of a type none of the handlers runs."""
    for node in workflow.nodes.values():
        if node.type in (NodeType.PARALLEL, NodeType.FAN_IN):
            continue
        if node.type not in handlers:
            kind = node.type.value if node.type else "unknown"
            runnable = sorted({*(t.value for t in handlers), "parallel", "fan_in"})
            raise RunRefused(f"node '{node.id}'", f"has type {kind}, which this version of "
                             "delivery cannot run",
                             f"use stages of the types it runs: {', '.join(runnable)}")


def handlers_for(world: World) -> dict[NodeType, Handler]:
    """The stage handlers by node type: the world's stand-ins over the real ones."""
    return {**default_handlers(), **(world.handlers or {})}


def redacted_info(info: RunInfo, redactor: Redactor) -> RunInfo:
    """`info` with every secret masked (SPEC §14: run.json holds none)."""
    return RunInfo.from_json(redactor.value(info.to_json()))


def run_redactor(world: World) -> Redactor:
    """The run's redactor: the secrets of the world's environment and of the process's
    (scripts run with the process's, so what they print of it must be masked too)."""
    return Redactor.from_environment(os.environ, extra=secret_values(world.environ))


def _stamp(clock: Clock) -> Callable[[], str]:
    if type(clock) is SystemClock:
        return utc_stamp  # the same text, without a datetime per event
    def stamp() -> str:
        return clock.now().isoformat(timespec="microseconds").replace("+00:00", "Z")
    return stamp
