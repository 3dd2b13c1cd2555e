"""Starting and resuming runs: the library entry points behind `delivery run` / `resume`.

    outcome = start_run(RunRequest(workflow=Path("flow.dot"), goal="...", agent="replay:r.json"))

Each entry point is a short sequence of the named steps of delivery.engine.run_plan, which
resolve the request into one `RunPlan` (refused before anything is written), then runs
it: `_Run` wires the plan and the world into an Engine (delivery.engine.run_loop).

Everything outside the engine is passed in (agent backend, interviewer, clock), so tests
and embedders replace the world instead of patching it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from delivery.engine.agent_runtime import AgentRuntime
from delivery.engine.attractor_logs import AttractorLogs
from delivery.engine.budget import CONTEXT_KEY as BUDGET_KEY
from delivery.engine.budget import Budget, budget_option
from delivery.engine.child_runs import run_child
from delivery.engine.context import Context
from delivery.engine.fan_out_chunks import RunFanOut, chunk_numbers
from delivery.engine.folder_pool import DEFAULT_FOLDER_PARALLELISM
from delivery.engine.handlers.base import StageEnv
from delivery.engine.handlers.change_set import actions_run_page, state_repository
from delivery.engine.handlers.human import refuse_unknown_answers
from delivery.engine.interviewer import (
    ConsoleInterviewer,
    Interviewer,
    ScriptedInterviewer,
)
from delivery.engine.outcome import RunOutcome as RunOutcome
from delivery.engine.run_inputs import answer_lists
from delivery.engine.run_loop import Engine, EngineOptions, Progress, RunState
from delivery.engine.run_plan import (
    RunPlan,
    apply_answers_and_budget,
    check_copy,
    check_request,
    check_workspace,
    claim,
    create_run,
    load_model,
    load_state,
    load_workflow,
    lock_run,
    make_plan,
    open_run,
    prepare_agents,
    record_resume,
    refuse_what_would_fail,
)
from delivery.engine.run_request import RunRequest as RunRequest
from delivery.engine.run_setup import Spelling, folder_setup, folder_values, initial_context
from delivery.engine.stop_switch import StopSwitch
from delivery.engine.templating import Renderer
from delivery.engine.worktree_restore import folders_to_recreate, recreate
from delivery.engine.world import SystemClock as SystemClock
from delivery.engine.world import World as World
from delivery.errors import ResumeStopped, RunInterrupted, Terminated
from delivery.forges.base import Forge
from delivery.forges.pacing import Pacer, carry_writes
from delivery.forges.select import open_forge
from delivery.forges.steering import trust_workflow_bots
from delivery.forges.write_budget import CONTEXT_KEY as WRITES_KEY
from delivery.git import cache_root
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.outcomes import StageOutcome
from delivery.store.artifacts import ArtifactStore
from delivery.store.base import StoreCapability
from delivery.store.files import StageText
from delivery.store.records import GateMode, RunInfo, RunStatus


def start_run(request: RunRequest, world: World | None = None, *,
              options: EngineOptions | None = None,
              observer: Progress | None = None) -> RunOutcome:
    """Validate, refuse or start a run; returns when it ends (or pauses)."""
    world = world or World()
    spelling = Spelling(request.cli)
    path, workflow, diagnostics = load_workflow(request)
    values = initial_context(workflow, request.goal, request.inputs, spelling)
    workspace = check_workspace(request, spelling)
    budget, gates = check_request(workflow, request, workspace, world, spelling)
    agents = prepare_agents(workflow, request.agent, workspace, world, gates)
    setup = folder_setup(request, workflow, workspace)
    refuse_what_would_fail(request, workflow, setup, world, spelling)
    values.update(folder_values(setup))
    plan, state = create_run(request, world, path, workflow, diagnostics, values=values,
                             workspace=workspace, setup=setup, budget=budget, gates=gates,
                             agents=agents)
    return _Run(plan, world, options, observer).execute(state)


def resume_run(run_path: Path, world: World | None = None,
               answers: Mapping[str, str | Sequence[str]] | None = None, *,
               options: EngineOptions | None = None,
               observer: Progress | None = None, answered_by: str = "",
               budget: str = "",
               warnings: Callable[[Sequence[Diagnostic]], None] | None = None,
               check_answers: bool = False) -> RunOutcome:
    """Continue a run from its saved state; the interrupted stage runs again. `budget`
    (`--budget`) replaces the limit of its kind: how a run paused on its budget goes on
    (the limits the run has already change nothing and are not recorded again).
    `warnings` is given the workflow's warnings (what a fresh load of its copy finds)
    before anything runs. `check_answers` (`resume --answer`) refuses an answer that is
    none of its gate's choices before anything is written."""
    world = world or World()
    raised = budget_option(budget)  # refused before the run is opened
    store, info = open_run(run_path, world)
    copy = check_copy(store, info, run_path)
    loaded = load_model(store, copy, world, warnings)
    if check_answers and answers:
        refuse_unknown_answers(loaded.workflow, answer_lists(answers))
    change = apply_answers_and_budget(info, loaded.workflow, answers, raised)
    agents = prepare_agents(loaded.workflow, info.agent, Path(info.workspace), world,
                            info.gates)
    plan = make_plan(store, info, loaded.workflow, agents, world)
    lock_run(plan, world)  # against a second resume; repairs a torn last line
    saved = load_state(plan, run_path)
    claim(plan)
    state = record_resume(plan, saved, change, answered_by, world.clock)
    return _Run(plan, world, options, observer).execute(state)


def _interviewer(info: RunInfo, options: EngineOptions,
                 used: dict[str, int]) -> Interviewer:
    """Scripted answers first; then the console on a terminal, else deny or pause."""
    scripted = ScriptedInterviewer(info.answers, used)
    if options.interactive:
        return ConsoleInterviewer(scripted)
    return scripted


class _Run:
    """Wires a run's plan and the world into an Engine, and runs it."""

    def __init__(self, plan: RunPlan, world: World, options: EngineOptions | None,
                 observer: Progress | None) -> None:
        self.workflow = plan.workflow
        self.store = plan.store
        self.info = plan.info
        self.world = world
        self.options = options or EngineOptions()
        self.observer = observer
        self.redactor = plan.redactor
        self.agents = plan.agents
        self.agent = self.agents.for_profile("")
        self.handlers = plan.handlers
        self.limits = plan.limits
        self.forge = world.forge
        self._own_forge = plan.own_forge
        self._trusted_bots = plan.trusted_bots

    def execute(self, state: RunState) -> RunOutcome:
        opened: Forge | None = None
        if self._own_forge:
            world = self.world
            # writes are paced on the run's clock (a test's is fake)
            pacer = Pacer.from_environment(world.environ, clock=world.clock.monotonic,
                                           sleep=world.clock.sleep,
                                           wall=lambda: world.clock.now().timestamp())
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

        budget = Budget(self.limits, context.get(BUDGET_KEY))

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
            max_parallel=self.info.max_parallel or DEFAULT_FOLDER_PARALLELISM,
            state_repository=state_repository(self.world.stores.remote_target()),
            run_page=actions_run_page(self.world.environ),
            resumed_at=len(state.path) if state.resumed else -1,
        )
        if self.observer is not None:
            env.announce = self.observer.stage_note
        can = self.store.capabilities
        if StoreCapability.PAUSE_ON_WAIT in can:  # event mode (SPEC §13)
            env.event_mode = True
            if env.gates is GateMode.DENY:  # a gate nobody answers pauses in event mode
                env.gates = GateMode.PAUSE  # (§9.1)
        if StoreCapability.RECREATE_WORKTREES in can:
            self._recreate_worktrees(state, env)
        observer, on_saved = self.observer, None
        if observer is not None:
            observer.run_opened(self.workflow)
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
        if self.world.fan_out is not None:  # event mode's worker jobs (SPEC §13)
            engine.fan_out = self.world.fan_out.open(self.info)
        elif env.event_mode:
            engine.fan_out = RunFanOut(self.info.max_runners or 1)
        # GitHub's write windows: restored from the run, saved with each stage
        engine.write_budget = carry_writes(self.forge, context.get(WRITES_KEY))
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
                          offloaded=offloaded(context.stored(), self.store.artifacts),
                          previews=engine.dry_run.previews if engine.dry_run else {},
                          chunks=chunk_numbers(context.stored()))


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


def offloaded(values: Mapping[str, Any], store: ArtifactStore) -> dict[str, tuple[str, int]]:
    """The keys of `values` held in the artifact store: their pointer and size in bytes."""
    return {key: (value, store.size_of(value) or 0) for key, value in values.items()
            if ArtifactStore.is_pointer(value)}
