"""Starting and resuming runs: the library entry points behind `delivery run` / `resume`.

    outcome = start_run(RunRequest(workflow=Path("flow.dot"), goal="...", agent="replay:r.json"))

Everything outside the engine is passed in (agent backend, interviewer, clock), so tests
and embedders replace the world instead of patching it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from delivery.agents.registry import Agents, resolve_agents
from delivery.agents.replay import ReplayBackend
from delivery.engine import branch_check, preflight_gate
from delivery.engine.agent_runtime import AgentRuntime
from delivery.engine.attractor_logs import AttractorLogs, check_logs_folder
from delivery.engine.budget import CONTEXT_KEY as BUDGET_KEY
from delivery.engine.budget import Budget, Limits, budget_option, limits_of, run_limits
from delivery.engine.child_runs import check_children, run_child
from delivery.engine.context import Context
from delivery.engine.handlers import default_handlers
from delivery.engine.handlers.base import Clock, StageEnv
from delivery.engine.interviewer import (
    ConsoleInterviewer,
    Interviewer,
    ScriptedInterviewer,
)
from delivery.engine.outcome import RunOutcome as RunOutcome
from delivery.engine.redacting import RedactingAgent
from delivery.engine.run_inputs import answer_lists, run_branch
from delivery.engine.run_loop import Engine, EngineOptions, Progress, RunState
from delivery.engine.run_request import RunRequest as RunRequest
from delivery.engine.run_setup import (
    FORGE_TYPES,
    FolderSetup,
    Spelling,
    folder_setup,
    gate_mode,
    initial_context,
    refuse_folder_problems,
)
from delivery.engine.stop_switch import StopSwitch
from delivery.engine.templating import Renderer
from delivery.engine.worktree_restore import folders_to_recreate, recreate
from delivery.engine.world import SystemClock as SystemClock
from delivery.engine.world import World as World
from delivery.errors import (
    DeliveryError,
    ResumeStopped,
    RunInterrupted,
    RunRefused,
    RunStoreError,
    Terminated,
)
from delivery.forges.base import Forge
from delivery.forges.pacing import Pacer
from delivery.forges.select import (
    open_forge,
    require_settings,
)
from delivery.forges.steering import trust_workflow_bots, workflow_bots
from delivery.git import cache_root
from delivery.lang.diagnostics import Diagnostic, has_errors
from delivery.lang.model import LLM_TYPES, NodeType, Workflow
from delivery.lang.outcomes import StageOutcome
from delivery.redact import Redactor, secret_values
from delivery.store.artifacts import ArtifactStore
from delivery.store.base import RunStore, StoreCapability
from delivery.store.eventlog import utc_stamp
from delivery.store.files import StageText
from delivery.store.model_cache import load_checked, load_run_workflow, write_cache
from delivery.store.records import GateMode, RunInfo, RunStatus
from delivery.store.runstore import WORKFLOW_COPY, Started, new_run_id, started_with
from delivery.validation.loader import check_source

EVENT_VALUE_CHARS = 2000

log = logging.getLogger("delivery")


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


def _stamp(clock: Clock) -> Callable[[], str]:
    if type(clock) is SystemClock:
        return utc_stamp  # the same text, without a datetime per event
    def stamp() -> str:
        return clock.now().isoformat(timespec="microseconds").replace("+00:00", "Z")
    return stamp


def _interviewer(info: RunInfo, options: EngineOptions,
                 used: dict[str, int]) -> Interviewer:
    """Scripted answers first; then the console on a terminal, else deny or pause."""
    scripted = ScriptedInterviewer(info.answers, used)
    if options.interactive:
        return ConsoleInterviewer(scripted)
    return scripted


def _agents(workflow: Workflow, spec: str, workspace: Path, world: World,
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


class _Run:
    """Wires a run store, a workflow and the world into an Engine."""

    def __init__(self, workflow: Workflow, store: RunStore, info: RunInfo, world: World,
                 agents: Agents, options: EngineOptions | None, observer: Progress | None,
                 redactor: Redactor | None = None) -> None:
        self.workflow = workflow
        self.store = store
        self.info = info
        self.world = world
        self.options = options or EngineOptions()
        self.observer = observer
        self.redactor = redactor or _redactor(world)
        # what is sent to the agents and what comes back is redacted (SPEC §14)
        self.agents = agents.wrapped(lambda backend: RedactingAgent(backend, self.redactor))
        self.agent = self.agents.for_profile("")
        self.handlers = {**default_handlers(), **(world.handlers or {})}
        self.forge = world.forge
        # Stand-in handlers (route scenarios) never touch the forge: it is opened only for
        # the stages the real handlers run. Its settings are checked before the log locks
        # the run (a refusal, no token on a resume, leaves the run as it was); it is opened
        # by `execute`, which closes it on every way out (nothing to close on a refusal).
        real = [t for t in FORGE_TYPES if t not in (world.handlers or {})]
        self._own_forge = ""
        if self.forge is None and info.repos and workflow.nodes_of(*real):
            self._own_forge = info.forge or "local"
            require_settings(self._own_forge, world.environ)
        # whose reviews, threads and labels steer the run besides writers (SPEC §14),
        # read before the log locks the run (a bad list refuses it as it is)
        self._trusted_bots = workflow_bots(workflow.attr("trusted_bots"))
        # locks the run against a second writer; cuts a torn last event (last: nothing
        # above may fail with the log held)
        store.open_log(self.redactor, _stamp(world.clock))

    def execute(self, state: RunState) -> RunOutcome:
        opened: Forge | None = None
        if self._own_forge:
            world = self.world
            # writes are paced on the run's clock (a test's is fake)
            pacer = Pacer.from_environment(world.environ, clock=world.clock.monotonic,
                                           sleep=world.clock.sleep)
            self.forge = opened = open_forge(
                self._own_forge, checks=self.info.checks, environ=world.environ,
                required_approvals=self.info.required_approvals, redactor=self.redactor,
                pacer=pacer)
        trust_workflow_bots(self.forge, self._trusted_bots)
        try:
            return self._execute(state)
        finally:
            # its connections end with the run, not whenever the collector comes by (the
            # caller may hold an exception, and with it this run, for long)
            if opened is not None and hasattr(opened, "close"):
                opened.close()

    def _execute(self, state: RunState) -> RunOutcome:
        workspace = Path(self.info.workspace)
        folders = {name: Path(loc) for name, loc in self.info.folders.items()}
        # what the state holds is saved already (and stored values are what Context keeps)
        context = Context.restore(dict(state.context), self.store.artifacts,
                                  redactor=self.redactor)
        interviewer = self.world.interviewer or _interviewer(self.info, self.options,
                                                             state.answers_used)

        def write_stage_file(node_id: str, attempt: int, name: str, text: StageText) -> None:
            self.store.write_stage_text(node_id, attempt, name, text, redactor=self.redactor)

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

        budget = Budget(run_limits(self.workflow, self.info), context.get(BUDGET_KEY))

        def budget_used() -> tuple[str, bool]:
            used = state.usage.get("total_tokens", 0)
            return budget.used_text(used), bool(budget.summary(used)["warned"])

        env = StageEnv(
            workflow=self.workflow, workspace=workspace, run_dir=self.store.path,
            agent=self.agent, renderer=Renderer(), interviewer=interviewer,
            clock=self.world.clock, folders=folders, stage_dir=self.store.stage_dir,
            write_stage_file=write_stage_file,
            fidelity_preamble=lambda node: runtime.plan(node, context).preamble,
            gates=self.info.gates, agent_runtime=runtime,
            path=lambda: state.path,
            redact=self.redactor.text, holds_secret=self.redactor.holds_listed_secret,
            forge=self.forge, repos=dict(self.info.repos),
            branch=self.info.branch,
            git_cache=self.world.git_cache or (Path(self.info.git_cache)
                                               if self.info.git_cache
                                               else cache_root(self.world.environ)),
            run_child=lambda request: run_child(request, self.world, self.options,
                                                self.info, start_run, resume_run),
            budget_used=budget_used,
        )
        can = self.store.capabilities
        if StoreCapability.PAUSE_ON_WAIT in can:  # event mode (SPEC §13)
            env.event_mode = True
            if env.gates is GateMode.DENY:  # a gate nobody answers pauses in event mode
                env.gates = GateMode.PAUSE  # (§9.1)
        if StoreCapability.RECREATE_WORKTREES in can:
            self._recreate_worktrees(state, env)
        observer, on_saved = self.observer, None
        if self.info.logs:  # the Attractor view: an observer only when asked
            view = AttractorLogs(Path(self.info.logs), self.workflow, self.store.path,
                                 self.world.clock, self.redactor.value, self.observer)
            view.start(self.info.run_id, str(context.get("goal") or ""), self.info.workflow,
                       self.info.started)
            view.saved(state, context)  # the checkpoint a resume starts from, at once
            observer, on_saved = view, view.saved
        engine = Engine(self.workflow, self.handlers, env, self.store,
                        observer=observer, options=self.options,
                        agent_states=self.agents.save_state, on_saved=on_saved,
                        budget=budget)
        engine.stop_switch = StopSwitch.for_run(self.world.stop_labels or self.forge,
                                                env.repos, env.branch, context,
                                                self.store.append_event)
        # A run that ran gave its claim back with its last save, or keeps it because that
        # save failed: pushing again could fail the same way and hide the FAILED outcome.
        nothing_runs = state.status is not RunStatus.RUNNING or state.next_node is None
        try:
            final = engine.run(state, context)
            if StoreCapability.CLAIM in can and nothing_runs:  # it had ended: claim back
                self.store.release(final.status)
        except RunInterrupted:
            raise
        except KeyboardInterrupt as stop:
            # The stage's processes were ended where they ran; the last save stands, so the
            # run resumes at the interrupted stage. Said once, with how to resume.
            raise RunInterrupted(state.run_id, str(self.store.path),
                                 "SIGTERM" if isinstance(stop, Terminated)
                                 else "SIGINT") from None
        finally:
            self.store.close()
        return RunOutcome(final.run_id, final.status, final.failure_reason,
                          # resolved on first read (engine.outcome): most callers never do
                          list(final.path), context.resolved_later(), self.store.path,
                          usage=dict(final.usage), pause_reason=engine.pause_reason,
                          budget=budget.summary(final.usage.get("total_tokens", 0))
                          if budget.limits else {},
                          offloaded=offloaded(context.stored(), self.store.artifacts))


    def _recreate_worktrees(self, state: RunState, env: StageEnv) -> None:
        """A resume on a fresh machine: the folders' worktrees the run had made come back
        as they were saved (SPEC §13) before any stage needs them; if they cannot, the
        resume stops here (ResumeStopped, exit 1) and gives its claim back unchanged."""
        missing = folders_to_recreate(self.workflow, state, env.folders)
        if not missing:
            return
        done, problem = recreate(env, missing, self.store.saved_worktrees())
        self.store.append_event("worktrees_recreated", folders=missing, how=done,
                                outcome=(StageOutcome.FAILED if problem
                                         else StageOutcome.SUCCEEDED).value,
                                failure_reason=self.redactor.text(problem))
        if problem:
            self.store.close()
            self.store.release_unchanged(f"not resumed: {problem}")
            raise ResumeStopped(state.run_id, self.redactor.text(problem))


def start_run(request: RunRequest, world: World | None = None, *,
              options: EngineOptions | None = None,
              observer: Progress | None = None) -> RunOutcome:
    """Validate, refuse or start a run; returns when it ends (or pauses)."""
    world = world or World()
    redactor = _redactor(world)
    workflow_path = request.workflow.resolve()
    if request.model is not None:
        workflow, diagnostics = request.model, request.diagnostics
    else:
        workflow, diagnostics = load_checked(workflow_path)
    spelling = Spelling(request.cli)
    values = initial_context(workflow, request.goal, request.inputs, spelling)
    workspace = (request.workspace or Path.cwd()).resolve()
    if not workspace.is_dir():
        where = spelling.option("--workspace", "workspace")
        raise RunRefused(where, f"{workspace} is not a directory",
                         f"create it or point {where} at an existing directory")
    refuse_unsupported(workflow, {**default_handlers(), **(world.handlers or {})})
    budget = budget_option(request.budget, spelling.option("--budget", "budget"))
    check_children(workflow, workspace)
    gates = gate_mode(request.gates, spelling.option("--gates", "gates"))
    agents = _agents(workflow, request.agent, workspace, world, gates)
    setup = folder_setup(request, workflow, workspace)
    refuse_folder_problems(workflow, setup, world, spelling)
    if world.forge is None and setup.repos and workflow.nodes_of(*FORGE_TYPES):
        # refused before anything is written: the forge would fail its first stage
        require_settings(setup.forge, world.environ)
    if preflight_gate.wanted(workflow, setup, world.handlers):
        _preflight(workflow, setup, world)
    if branch_check.needs_check(request.branch, workflow, setup, world.handlers):
        branch_check.refuse_foreign_branch(request.branch, setup, world.forge, world.environ,
                                           spelling.option("--branch", "branch"))
    run_id = new_run_id(world.clock.now())
    run_path = (request.run_dir or workspace / ".delivery" / "runs" / run_id).resolve()
    if request.logs is not None:
        check_logs_folder(request.logs, run_path)
    # The run's copy holds no secret (SPEC §14); this run and its resumes run the copy.
    try:
        source = _workflow_source(workflow_path)
    except (OSError, UnicodeDecodeError) as err:
        raise RunRefused(f"workflow {workflow_path}", f"cannot be read: {err}",
                         "check the file") from None
    redacted = redactor.text(source)
    if redacted != source:
        workflow, diagnostics = _redacted_workflow(redacted, workflow_path)
        source = redacted
    store = world.stores.create(run_path)
    values["internal.run_id"] = run_id
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
        budget_tokens=budget.tokens or 0, budget_usd=budget.usd or 0.0)
    store.create_run(_redacted_info(info, redactor), source.encode())
    cache_sha256 = ""
    if diagnostics is not None:  # what resumes load instead of the copy (issue 23)
        cache_sha256 = write_cache(store.path, workflow, diagnostics, source.encode(),
                                   str(store.path / WORKFLOW_COPY))
    start = workflow.start
    assert start is not None  # validated
    # large inputs go to the artifact store before the first save, also in `initial`
    stored = Context(values, store.artifacts, redactor=redactor).snapshot()
    run = _Run(workflow, store, info, world, agents, options, observer, redactor=redactor)
    state = RunState(run_id=run_id, next_node=start.id, context=dict(stored),
                     initial=dict(stored), agent_state=run.agent.save_state(),
                     agent_states=run.agents.save_state())
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
    return run.execute(state)


def _preflight(workflow: Workflow, setup: FolderSetup, world: World) -> None:
    """What the token may do where, checked before the first write (SPEC §7.1)."""
    forge = world.forge or open_forge(setup.forge or "local", checks=setup.checks,
                                      environ=world.environ,
                                      required_approvals=setup.required_approvals)
    try:
        report = preflight_gate.preflight(
            forge, setup.repos, merge_method=preflight_gate.merge_method(workflow),
            state=world.stores.remote_target(), environ=world.environ,
            checks=setup.checks, required_approvals=setup.required_approvals)
    except RunRefused:
        raise
    except DeliveryError as err:  # GitHub unreachable, the token refused: nothing written
        raise RunRefused("preflight", f"the token's permissions could not be read: {err}",
                         "check GITHUB_TOKEN and the repositories, or set preflight=false "
                         "on the graph to skip the check") from None
    finally:
        if world.forge is None and hasattr(forge, "close"):
            forge.close()
    preflight_gate.refuse_blocked_run(report)


def _redacted_info(info: RunInfo, redactor: Redactor) -> RunInfo:
    """`info` with every secret masked (SPEC §14: run.json holds none)."""
    return RunInfo.from_json(redactor.value(info.to_json()))


def _redactor(world: World) -> Redactor:
    """The run's redactor: the secrets of the world's environment and of the process's
    (scripts run with the process's, so what they print of it must be masked too)."""
    return Redactor.from_environment(os.environ, extra=secret_values(world.environ))


def _workflow_source(path: Path) -> str:
    # a BOM at the start is accepted, as by the loader
    return path.read_text(encoding="utf-8").removeprefix("\ufeff")


def _redacted_workflow(source: str, path: Path) -> tuple[Workflow, list[Diagnostic]]:
    """The workflow with its secrets masked, and its diagnostics; refused when masking them
    broke it (a secret written as a bare word, say)."""
    workflow, diagnostics = check_source(source, str(path))
    if workflow is None or has_errors(diagnostics):
        first = next(d for d in diagnostics if d.severity == "error")
        raise RunRefused("workflow", f"holds a secret value, and with it masked as *** it no "
                         f"longer validates ({first.format_text().splitlines()[0]})",
                         "do not write secrets into a workflow: read them from the "
                         "environment in a script ($GITHUB_TOKEN)")
    return workflow, diagnostics


def resume_run(run_path: Path, world: World | None = None,
               answers: Mapping[str, str | Sequence[str]] | None = None, *,
               options: EngineOptions | None = None,
               observer: Progress | None = None, answered_by: str = "",
               budget: str = "",
               warnings: Callable[[Sequence[Diagnostic]], None] | None = None) -> RunOutcome:
    """Continue a run from its saved state; the interrupted stage runs again. `budget`
    (`--budget`) replaces the limit of its kind: how a run paused on its budget goes on
    (the limits the run has already change nothing and are not recorded again).
    `warnings` is given the workflow's warnings (what a fresh load of its copy finds)
    before anything runs."""
    world = world or World()
    raised = budget_option(budget)
    store = world.stores.open(run_path.resolve())
    info = store.read_run_info()
    if answers:  # appended: they answer the gate's next visits
        merged = {node: list(given) for node, given in info.answers.items()}
        for node_id, given in answer_lists(answers).items():
            merged[node_id] = merged.get(node_id, []) + given
        info.answers = merged
    held = (info.budget_tokens, info.budget_usd)
    if raised:
        info.budget_tokens = raised.tokens or info.budget_tokens
        info.budget_usd = raised.usd or info.budget_usd
    copy, source = store.read_workflow_copy()
    digest = hashlib.sha256(source).hexdigest()
    if digest != info.workflow_sha256:
        raise RunRefused(f"run {run_path}", f"its workflow copy {copy} was changed after the "
                         "run started (its SHA-256 differs from run.json's)",
                         "restore the copy, or start a new run with the changed workflow")
    started = _started_with(store.path, run_path)
    if started is not None and digest != started.workflow_sha256:
        raise RunRefused(f"run {run_path}", f"its workflow copy {copy} is not the workflow "
                         "the run started with (its SHA-256 differs from the one the event "
                         "log recorded at the start, though run.json was rewritten to match)",
                         "something wrote the run directory (a prompt-injected agent?): "
                         "start a new run")
    # the model the run started with, from the run's model cache (the copy is parsed and
    # validated again only when the cache is missing, stale, damaged or not the one the
    # run started with)
    loaded_workflow = load_run_workflow(store.path, copy, source,
                                        started.model_sha256 if started else None)
    workflow = loaded_workflow.workflow
    # a budget the run holds already (the Action's `budget` input, given to each job of
    # the run again) raises nothing and is not recorded
    limits = run_limits(workflow, info)
    raised = Limits() if limits == limits_of(workflow, *held) else raised
    if warnings is not None:
        warnings(loaded_workflow.diagnostics)
    refuse_unsupported(workflow, {**default_handlers(), **(world.handlers or {})})
    agents = _agents(workflow, info.agent, Path(info.workspace), world, info.gates)
    # opening the log locks the run against a second resume, and repairs a torn last line
    run = _Run(workflow, store, info, world, agents, options, observer)
    try:
        loaded = store.load()
        if loaded is None:
            raise RunRefused(f"run {run_path}", "has no checkpoint (it never started)",
                             "start a new run with delivery run")
        state = loaded.state
        if state.status is RunStatus.RUNNING and (state.next_node is None
                                                  or state.next_node not in workflow.nodes):
            raise RunRefused(f"run {run_path}", f"its saved next node {state.next_node!r} "
                             "is not in the workflow", "start a new run")
        state.context = store.artifacts.relocate(state.context)
        state.initial = store.artifacts.relocate(state.initial)
        run.agent.restore_state(state.agent_state)
        run.agents.restore_state(state.agent_states)
    except RunStoreError as error:
        store.close()
        raise RunRefused(f"run {run_path}", f"cannot be resumed: {error}",
                         "a run whose log or checkpoint was edited or cut short cannot be "
                         "resumed; start a new run") from None
    except BaseException:
        store.close()
        raise
    if StoreCapability.CLAIM in store.capabilities:  # now: the refusals above left no claim
        try:
            store.claim()
        except BaseException:
            store.close()
            raise
    state.resumed = True
    if state.status is RunStatus.PAUSED:  # waiting at a human gate: try it again
        state.status, state.failure_reason = RunStatus.RUNNING, ""
    if loaded.recovered:
        log.warning("resume: %s", loaded.recovered)
        store.append_event("checkpoint_recovered", problem=loaded.recovered)
        store.save_whole(state)
    if answers or (info.budget_tokens, info.budget_usd) != held:
        store.write_run_info(_redacted_info(info, run.redactor))
    if raised:
        store.append_event("budget_raised", limits=limits.describe())
    if state.status is RunStatus.RUNNING:
        store.append_event("run_resumed", next_node=state.next_node or "")
        if answers and answered_by:  # who answered a paused gate and when (§9.1)
            for node_id, given in answer_lists(answers).items():
                store.append_event("answer_received", node=node_id, labels=given,
                                   by=answered_by,
                                   at=world.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
    return run.execute(state)


def _started_with(run_dir: Path, run_path: Path) -> Started | None:
    try:
        return started_with(run_dir)
    except RunStoreError as error:
        raise RunRefused(f"run {run_path}", f"cannot be resumed: {error}",
                         "a run whose log was edited cannot be resumed; start a new run"
                         ) from None


def offloaded(values: Mapping[str, Any], store: ArtifactStore) -> dict[str, tuple[str, int]]:
    """The keys of `values` held in the artifact store: their pointer and size in bytes."""
    return {key: (value, store.size_of(value) or 0) for key, value in values.items()
            if ArtifactStore.is_pointer(value)}
