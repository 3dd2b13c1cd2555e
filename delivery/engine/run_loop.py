"""The run loop: execute a stage, apply its result, save it, route — until an exit.

After every stage of the main path its changes (context keys written, path, outcome,
attempts, the agent's state) are handed to the run store as one record, durable before
the next stage starts (`delivery.store`). Resuming re-runs the stage that was interrupted,
so stages must be idempotent. A parallel section runs as one unit: its branches work on
forked contexts in threads and are not saved on their own; an interrupted section runs
again from its fork (`delivery.engine.fan_out`). Every time the engine reads comes from
the injected clock.
"""

from __future__ import annotations

import dataclasses
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any, cast

from delivery import processes
from delivery.agents.base import AgentBackend, IncrementalState
from delivery.engine.agent_runtime import ENTRY_EDGE, edge_matters
from delivery.engine.budget import CONTEXT_KEY as BUDGET_KEY
from delivery.engine.budget import Budget
from delivery.engine.context import Context
from delivery.engine.dry_run import DryRun
from delivery.engine.failures import failure_class, failure_signature
from delivery.engine.fan_out import run_section
from delivery.engine.foreach import FanOut, ForeachStage
from delivery.engine.handlers.base import (
    Clock,
    Handler,
    StageEnv,
    StageResult,
)
from delivery.engine.options import EngineOptions as EngineOptions
from delivery.engine.options import Progress as Progress
from delivery.engine.retries import with_retries
from delivery.engine.routing import facts_read, route_rule, select_edge
from delivery.engine.stage_status import status_text
from delivery.engine.stop_switch import StopSwitch
from delivery.errors import (
    PAUSED_KEY,
    ArtifactError,
    PauseReason,
    PauseRequested,
    RunError,
    RunStateChanged,
    RunStoreError,
)
from delivery.forges.write_budget import CONTEXT_KEY as WRITES_KEY
from delivery.lang.model import LLM_TYPES, Node, NodeType, Workflow
from delivery.lang.outcomes import (
    GATE_UNMET,
    NOT_SUCCEEDED,
    Outcome,
    StageOutcome,
    outcome_of,
)
from delivery.lang.topology import parallel_sections
from delivery.store.base import RunStore
from delivery.store.records import RunState as RunState
from delivery.store.records import RunStatus


class _End(Enum):
    """How a walk of the graph ended."""

    EXIT = auto()  # at an exit node
    STOP = auto()  # at a node it was to stop at (a parallel branch at its join)
    FAILED = auto()
    CANCELLED = auto()  # a parallel branch another branch's success cancelled
    PAUSE = auto()  # after a wait stage in event mode


@dataclass
class _Walk:
    """Where a walk of the graph ended."""

    kind: _End
    node: str
    failure_reason: str = ""


class Engine:
    def __init__(
        self,
        workflow: Workflow,
        handlers: Mapping[NodeType, Handler],
        env: StageEnv,
        store: RunStore,
        *,
        observer: Progress | None = None,
        options: EngineOptions | None = None,
        agent_states: Callable[[], dict[str, Any]] = dict,
        on_saved: Callable[[RunState, Context], None] | None = None,
        budget: Budget | None = None,
        stop_switch: StopSwitch | None = None,
    ) -> None:
        self.workflow = workflow
        self.handlers = handlers
        self.env = env
        self.store = store
        self.agent: AgentBackend = env.agent
        self.clock: Clock = env.clock
        # a wrapper (the redacting agent) keeps its backend's state: ask the backend
        self._state_source = getattr(env.agent, "backend", env.agent)
        self._incremental = isinstance(self._state_source, IncrementalState)
        self.progress = observer or Progress()
        self._agent_states = agent_states  # the named agents' states (a few, small)
        self._on_saved = on_saved  # an observer of every save (the --logs view), if asked
        self.options = options or EngineOptions()
        self.sections = parallel_sections(workflow)
        # an agent stage reads the edge it was entered by only when edges set fidelity or
        # thread_id; otherwise routing never writes it
        self._entry_edges = any(edge_matters(edge) for edge in workflow.edges)
        self._lock = threading.Lock()
        # the thread that walks the run and saves after each stage (see _ending_event)
        self._main_thread: int | None = None
        self.state: RunState | None = None
        self._path_length_before_step = 0  # where a paused run's path is cut back to
        self.budget = budget  # checked before each agent stage (delivery.engine.budget)
        self.stop_switch = stop_switch  # the delivery:stop label, read at stage boundaries
        # the forge's write windows when they changed (set by the runner), saved each stage
        self.write_budget: Callable[[], dict[str, Any] | None] | None = None
        self.dry_run = DryRun(env) if self.options.dry_run else None
        self.pause_reason: PauseReason | None = None  # why the run paused, once it has
        self.fan_out: FanOut | None = None  # event mode's worker jobs (set by the runner)
        # foreach nodes (SPEC §8.1) run through it; saved mid-stage on the main walk only
        self._foreach = ForeachStage(handlers, self, durable=lambda: threading.get_ident()
                                     == self._main_thread)

    # -- public -----------------------------------------------------------------------
    def run(self, state: RunState, context: Context) -> RunState:
        self.state = state
        self._main_thread = threading.get_ident()
        if state.status is not RunStatus.RUNNING or state.next_node is None:
            return state
        if context.get(PAUSED_KEY) is not None:
            context.delete(PAUSED_KEY)
        try:
            return self._run(state, context)
        except (RunStoreError, ArtifactError) as fault:
            # The store cannot be written or read (disk full, gone, a file removed): stop.
            # What is on disk is the last stage saved, so the run can be resumed from there
            # once the fault is fixed; nothing more is written, which could fail the same way.
            state.context = context.snapshot()
            state.status = RunStatus.FAILED
            state.failure_reason = (f"the run's store failed: {fault} — the run stopped "
                                    "after its last saved stage; fix the cause and resume it")
            return state

    def _run(self, state: RunState, context: Context) -> RunState:
        assert state.next_node is not None
        try:
            end = self._walk(state.next_node, context, stop_at=frozenset(), path=state.path,
                             main=True)
        except PauseRequested as pause:
            return self._pause(state, context, pause)
        except RunStateChanged as changed:  # not routed on: no later stage may run
            end = _Walk(_End.FAILED, state.next_node or "", str(changed))
        if end.kind is _End.PAUSE:  # a wait in event mode: saved, resumed by an event
            state.status = RunStatus.PAUSED
            state.failure_reason = f"waiting at '{end.failure_reason}' for an event"
            state.next_node = end.node
            self.pause_reason = PauseReason.WAIT
            self._event("run_paused", node=end.failure_reason, next_node=end.node,
                        reason=self.pause_reason.value)
            self._save(state, context)
            state.context = context.snapshot()
            return state
        if end.kind is _End.FAILED:
            state.status, state.failure_reason = RunStatus.FAILED, end.failure_reason
        elif context.get("outcome") == StageOutcome.FAILED:
            # An exit reached through a failure edge is not a success (SPEC §9).
            state.status = RunStatus.FAILED
            state.failure_reason = str(context.get("failure_reason") or "")
        else:
            state.status, state.failure_reason = RunStatus.SUCCEEDED, ""
        state.next_node = None
        self._event("run_finished", status=state.status.value,
                    failure_reason=state.failure_reason,
                    **({"usage": dict(state.usage)} if state.usage else {}))
        self._save(state, context)
        state.context = context.snapshot()
        return state

    def _pause(self, state: RunState, context: Context, pause: PauseRequested) -> RunState:
        """Stop before the stage that is waiting (a gate, or the parallel section holding
        it): it runs again, from its start, when the run is resumed."""
        waiting = state.next_node or pause.node_id
        state.cut_path(self._path_length_before_step)
        state.status, state.failure_reason = RunStatus.PAUSED, str(pause)
        state.next_node = waiting
        self.pause_reason = pause.reason
        # why, for `runs` and `inspect` (cleared when the run goes on)
        context.set(PAUSED_KEY, {"reason": pause.reason.value, **pause.event_fields})
        self._event("run_paused", node=pause.node_id, next_node=waiting,
                    reason=pause.reason.value, **pause.event_fields)
        self._save(state, context)
        state.context = context.snapshot()
        return state

    # -- the walk ---------------------------------------------------------------------
    def _walk(self, current: str, context: Context, *, stop_at: frozenset[str], path: list[str],
              main: bool, cancel: threading.Event | None = None) -> _Walk:
        """Run stages from `current` on until the walk ends; the main walk saves each."""
        while True:
            end = self._end_before(current, stop_at=stop_at, cancel=cancel)
            if end is not None:
                return end
            node = self.workflow.nodes[current]
            self._enter(node, path, main=main)
            step = self._step(node, context, path, main=main)
            if isinstance(step, _Walk):
                return step
            current = step
            if main:
                self._save_next(context, current)

    def _end_before(self, current: str, *, stop_at: frozenset[str],
                    cancel: threading.Event | None) -> _Walk | None:
        """How the walk ends before `current` (its stop, a cancel, a cap), or None: run it."""
        state = self._state()
        if current in stop_at:
            return _Walk(_End.STOP, current)
        if cancel is not None and cancel.is_set():
            return _Walk(_End.CANCELLED, current)
        with self._lock:
            state.steps += 1
            steps = state.steps
        if steps > self.options.max_steps:
            return _Walk(_End.FAILED, current, f"the run exceeded {self.options.max_steps} "
                         "steps; a loop does not end")
        cap = self.options.max_agent_runs
        if cap and self.workflow.nodes[current].type in LLM_TYPES \
                and state.attempts.get(current, 0) >= cap:
            return _Walk(_End.FAILED, current, f"agent stage '{current}' already ran {cap} "
                         "times, the cap on repair iterations; a person should look at "
                         "it (raise max-repairs to allow more)")
        return None

    def _enter(self, node: Node, path: list[str], *, main: bool) -> None:
        """Make `node` the stage running: a person's stop label and the budget are checked
        before it (PauseRequested), then it goes on the path."""
        state = self._state()
        if main:
            self._path_length_before_step = len(path)
            state.next_node = node.id
        if main and self.stop_switch is not None:
            self.stop_switch.check(node)  # a person's stop label: pause before it
        if main and self.dry_run is not None:
            self.dry_run.check(node)  # --dry-run: pause before the first forge write
        if self.budget is not None and node.type in LLM_TYPES:
            # before the stage, never inside it: a pause here re-runs nothing
            self.budget.check(node.id, state.usage.get("total_tokens", 0))
        path.append(node.id)

    def _step(self, node: Node, context: Context, path: list[str], *,
              main: bool) -> str | _Walk:
        """Run `node` and apply its result: the node to go on at, or how the walk ended."""
        if node.type is NodeType.EXIT:
            context.set("current_node", node.id)
            retry = self._unmet_goal_gate(context)
            return _Walk(_End.EXIT, node.id) if retry is None else retry
        if node.type is NodeType.PARALLEL:
            result, joined = self._run_parallel(node, context, path)
            if self.workflow.nodes[joined].type is not NodeType.FAN_IN:
                return self._after_unjoined(node, result, joined, context)
            node = self.workflow.nodes[joined]
        else:
            result = self._run_stage(node, context)
        self._apply(node, result, context)
        return self._next_after(node, result, context, main=main)

    def _after_unjoined(self, node: Node, result: StageResult, joined: str,
                        context: Context) -> str | _Walk:
        """After a parallel section without a fan-in (Attractor): the join's result is the
        parallel node's, and the node where the branches meet (or their exit) runs next —
        unless every branch failed: then the parallel node's retry target, or the end."""
        self._apply(node, result, context)
        if result.outcome != StageOutcome.FAILED \
                or self.workflow.nodes[joined].type is NodeType.EXIT:
            return joined
        target = self._retry_target(node)
        if target is None:
            return _Walk(_End.FAILED, node.id, result.failure_reason)
        self._event("failure_jump", source=node.id, target=target)
        return target

    def _next_after(self, node: Node, result: StageResult, context: Context, *,
                    main: bool) -> str | _Walk:
        """Route on from `node`; a wait in event mode pauses the main walk after it."""
        nxt = self._route(node, context, result.suggested_next_ids)
        if isinstance(nxt, _Walk) or not result.pause_after:
            return nxt
        if main:
            # saved once, as paused, by run(): a crash before it re-runs the wait
            return _Walk(_End.PAUSE, nxt, node.id)
        self.env.clock.sleep(result.pause_seconds)  # a branch cannot pause alone: it waits
        return nxt

    def _state(self) -> RunState:
        assert self.state is not None  # set by run()
        return self.state

    def _save_next(self, context: Context, next_node: str) -> None:
        state = self._state()
        state.next_node = next_node
        self._save(state, context)

    def _save(self, state: RunState, context: Context) -> None:
        """Hand the changes since the last save to the store (one record; durable)."""
        spent = self.budget.changes() if self.budget is not None else None
        if spent is not None:
            context.set(BUDGET_KEY, spent)
        writes = self.write_budget() if self.write_budget is not None else None
        if writes is not None:  # GitHub's windows travel with the run (forges.write_budget)
            context.set(WRITES_KEY, writes)
        changed, deleted = context.take_changes()
        if self._incremental:
            patch, whole = cast(IncrementalState, self._state_source).state_changes(), None
        else:
            patch, whole = None, self.agent.save_state()
        record = state.take_record(changed, deleted, patch, whole, self._agent_states())

        def full() -> RunState:
            return dataclasses.replace(state, context=dict(context.stored()),
                                       agent_state=self.agent.save_state())

        self.store.save_stage(record, full)
        if self._on_saved is not None:
            self._on_saved(state, context)

    def _event(self, event_type: str, **fields: Any) -> None:
        with self._lock:
            self.store.append_event(event_type, **fields)

    def _ending_event(self, event_type: str, **fields: Any) -> None:
        """An event that ends a stage (stage_finished, the route taken): on the main walk,
        which saves the record next with nothing to wait for, written in one go with it;
        a parallel branch (not saved stage by stage) writes it at once."""
        defer = threading.get_ident() == self._main_thread
        with self._lock:
            self.store.append_event(event_type, defer=defer, **fields)

    # -- one stage --------------------------------------------------------------------
    def _next_attempt(self, node_id: str) -> int:
        state = self._state()
        with self._lock:
            return state.next_attempt(node_id)

    def _max_retries(self, node: Node) -> int:
        return node.max_retries if node.max_retries is not None else \
            self.workflow.default_max_retries

    def _run_stage(self, node: Node, context: Context) -> StageResult:
        """Run a stage, re-running a failure up to max_retries times with exponential backoff."""

        def on_retry(attempt: int, delay: float, failed: StageResult) -> None:
            self._event("stage_retry", node=node.id, attempt=attempt, delay=delay,
                        failure_reason=failed.failure_reason)
            self.progress.stage_retry(node, attempt, delay)

        if node.foreach:  # one attempt of the node; the folders' runs retry on their own
            return self._attempt(node, self._next_attempt(node.id), context, self._foreach)
        return with_retries(node, self._max_retries(node),
                            lambda: self._attempt(node, self._next_attempt(node.id), context),
                            backoff_initial=self.options.backoff_initial,
                            backoff_max=self.options.backoff_max, sleep=self.env.clock.sleep,
                            on_retry=on_retry)

    def _attempt(self, node: Node, attempt: int, context: Context,
                 handler: Handler | None = None) -> StageResult:
        assert node.type is not None
        handler = handler or self.handlers[node.type]
        self._event("stage_started", node=node.id, node_type=node.type.value, attempt=attempt)
        self.progress.stage_started(node, attempt)
        context.set("current_node", node.id)
        started = self.clock.monotonic()
        processes_before = processes.started()
        try:
            result = handler(node, attempt, context, self.env)
        except PauseRequested as pause:
            pause.node_id = pause.node_id or node.id  # a pause from the forge names none
            self._check_untouched(node, processes_before)
            self._event("stage_paused", node=node.id, attempt=attempt)
            raise
        except RunStoreError:
            raise  # the store failed, not the stage: the run stops (see run())
        except RunError as err:
            result = StageResult.fail(str(err))
        except Exception as err:  # a handler bug must not kill the run without a record
            self.env.write_stage_file(node.id, attempt, "stderr.txt", traceback.format_exc())
            result = StageResult.fail(f"internal error in the {node.type.value} handler: "
                                      f"{type(err).__name__}: {err}")
        self._check_untouched(node, processes_before)
        seconds = self.clock.monotonic() - started
        status: dict[str, Any] = {
            "node": node.id, "type": node.type.value, "attempt": attempt,
            "outcome": str(result.outcome), "failure_reason": result.failure_reason,
            "preferred_label": result.preferred_label, "seconds": round(seconds, 6),
            "updates": sorted(result.updates)}
        usage: dict[str, Any] = {"usage": result.usage} if result.usage else {}
        if result.cost_usd:
            usage["cost_usd"] = result.cost_usd
        if usage:
            status.update(usage)
        self.account(node, result)
        self.env.write_stage_file(node.id, attempt, "status.json", status_text(status))
        self._ending_event("stage_finished", node=node.id, attempt=attempt,
                           outcome=str(result.outcome), failure_reason=result.failure_reason,
                           seconds=round(seconds, 6), **usage)
        for event_type, fields in result.events:
            self._ending_event(event_type, node=node.id,
                               **{k: v for k, v in fields.items() if k != "node"})
        self.progress.stage_finished(node, result, seconds)
        return result

    def _check_untouched(self, node: Node, processes_before: int) -> None:
        """SPEC §14: the stage's processes left the run's state alone (RunStateChanged).
        Only after a stage during which a process (an agent CLI, a script) was started,
        here or in a parallel branch: nothing else runs code that is not the engine's."""
        if processes.started() == processes_before:
            return
        with self._lock:  # not while a parallel branch appends to the log
            self.store.check_untouched(node.id)

    def account(self, node: Node, result: StageResult) -> None:
        """Add a stage's (or a folder's run's) agent usage to the run's and its budget's."""
        if result.usage:
            self._add_usage(result.usage)
        if self.budget is not None and (result.usage or result.cost_usd):
            with self._lock:
                warning = self.budget.add(self._state().usage.get("total_tokens", 0),
                                          int((result.usage or {}).get("total_tokens", 0)),
                                          result.cost_usd or 0.0)
            if warning is not None:
                self._event("budget_warning", node=node.id, **warning)

    # -- what a foreach stage asks of the engine (delivery.engine.foreach.ForeachHost) ----
    def folder_attempt(self, key: str) -> int:
        return self._next_attempt(key)

    def event(self, event_type: str, **fields: Any) -> None:
        self._event(event_type, **fields)

    def check_budget(self, node: Node) -> None:
        if self.budget is not None and node.type in LLM_TYPES:
            self.budget.check(node.id, self._state().usage.get("total_tokens", 0))

    def save_mid_stage(self, context: Context) -> None:
        """Save what the stage's folders finished, the stage still to be re-entered on a
        resume: the record's path stops before it, as a pause's does."""
        state = self._state()
        with self._lock:  # not while a folder's run appends to the log
            state.cut_path(self._path_length_before_step)
            self._save(state, context)
            state.path.append(str(state.next_node))

    def retry_settings(self) -> tuple[float, float]:
        return self.options.backoff_initial, self.options.backoff_max

    def folder_finished(self, node: Node, folder: str, result: StageResult,
                        seconds: float) -> None:
        self.progress.folder_finished(node, folder, result, seconds)

    def _add_usage(self, usage: Mapping[str, int]) -> None:
        state = self._state()
        with self._lock:
            for name in ("input_tokens", "output_tokens", "total_tokens"):
                state.usage[name] = state.usage.get(name, 0) + int(usage.get(name, 0))

    def _apply(self, node: Node, result: StageResult, context: Context) -> None:
        state = self._state()
        if result.keep_outcome:
            return
        context.update(result.updates)
        context.set("outcome", str(result.outcome))  # (the context holds plain JSON)
        failed = result.outcome == StageOutcome.FAILED
        context.set("failure_reason", result.failure_reason if failed else "")
        # Attractor's keys for routing on the kind of failure; empty again after a success,
        # as failure_reason is, so a stale class never routes a later stage
        klass = (result.failure_class or failure_class(result.failure_reason)) if failed else ""
        context.set("failure_class", klass)
        context.set("failure_signature",
                    failure_signature(node.id, klass, result.failure_reason) if failed else "")
        context.set("last_stage", node.id)
        context.set("preferred_label", result.preferred_label)
        with self._lock:
            state.set_outcome(node.id, result.outcome)

    # -- routing ----------------------------------------------------------------------
    def _route(self, node: Node, context: Context,
               suggested: Sequence[str] = ()) -> str | _Walk:
        failed = context.get("outcome") == StageOutcome.FAILED
        preferred = str(context.get("preferred_label") or "")
        outgoing = self.workflow.outgoing[node.id]
        nodes = self.workflow.nodes
        edge = select_edge(outgoing, context.lookup, failed=failed, preferred_label=preferred,
                           suggested_next_ids=suggested,
                           into_conditional=lambda e: nodes[e.target].type
                           is NodeType.CONDITIONAL)
        if edge is not None:
            # what routing read and which rule chose the edge: `inspect --routes` shows it
            read = facts_read(outgoing, context.lookup)
            self._ending_event("edge_taken", source=edge.source, target=edge.target,
                               label=edge.label,
                               condition=edge.condition.text if edge.condition else "",
                               rule=route_rule(edge, preferred_label=preferred, failed=failed,
                                               suggested_next_ids=suggested),
                               **({"facts": read} if read else {}))
            if edge.loop_restart:
                self._restart(context)
            if self._entry_edges:
                if edge_matters(edge):
                    context.set(ENTRY_EDGE, edge.index)
                else:
                    context.delete(ENTRY_EDGE)
            return edge.target
        if failed:
            target = self._retry_target(node)
            if target is not None:
                self._event("failure_jump", source=node.id, target=target)
                return target
            reason = str(context.get("failure_reason") or f"stage '{node.id}' failed")
            if node.goal_gate:
                # Attractor would follow the unconditional edge to the exit and stop there on
                # the unmet gate: the message says so, not only what the stage reported
                reason = (f"goal gate '{node.id}' did not succeed and there is no retry "
                          f"target: {reason}")
            return _Walk(_End.FAILED, node.id, reason)
        return _Walk(_End.FAILED, node.id, f"no outgoing edge of '{node.id}' matched after it "
                     "succeeded; add an unconditional edge or cover every case")

    def _retry_target(self, node: Node) -> str | None:
        for source in (node.attr("retry_target"), node.attr("fallback_retry_target"),
                       self.workflow.attr("retry_target"),
                       self.workflow.attr("fallback_retry_target")):
            if source and source in self.workflow.nodes:
                return source
        return None

    def _restart(self, context: Context) -> None:
        state = self._state()
        for key in context.snapshot():
            context.delete(key)
        context.update(state.initial)
        self._event("loop_restart")

    def _unmet_goal_gate(self, context: Context) -> str | _Walk | None:
        state = self._state()
        for node_id, outcome in state.outcomes.items():
            node = self.workflow.nodes[node_id]
            if node.goal_gate and outcome in GATE_UNMET:
                target = self._retry_target(node)
                self._event("goal_gate_unmet", node=node_id, target=target or "")
                if target is None:
                    return _Walk(_End.FAILED, node_id, f"goal gate '{node_id}' did not succeed "
                                 "and there is no retry target")
                return target
        return None

    # -- parallel ---------------------------------------------------------------------
    def _run_parallel(self, node: Node, context: Context,
                      path: list[str]) -> tuple[StageResult, str]:
        """The section `node` opens, run as one unit (`delivery.engine.fan_out`): the join's
        result and where the run goes on."""
        return run_section(node, context, path, workflow=self.workflow,
                           section=self.sections[node.id],
                           attempt=self._next_attempt(node.id), walk=self._walk_branch,
                           event=self._event)

    def _walk_branch(self, head: str, context: Context, stop_at: frozenset[str],
                     path: list[str], cancel: threading.Event) -> tuple[Outcome, str]:
        """Walk one parallel branch to the join: its outcome and failure reason."""
        end = self._walk(head, context, stop_at=stop_at, path=path, main=False, cancel=cancel)
        if end.kind is _End.STOP:
            outcome = outcome_of(str(context.get("outcome") or StageOutcome.SUCCEEDED))
            reason = str(context.get("failure_reason") or "")
        elif end.kind is _End.CANCELLED:
            outcome, reason = StageOutcome.SKIPPED, "cancelled: another branch succeeded first"
        elif end.kind is _End.FAILED:
            outcome, reason = StageOutcome.FAILED, end.failure_reason
        else:
            outcome = StageOutcome.FAILED
            reason = f"branch reached exit '{end.node}' before the join"
        return outcome, "" if outcome not in NOT_SUCCEEDED else reason

