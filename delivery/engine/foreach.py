"""One stage per folder (SPEC §8.1): `foreach="folders"` on an agent, prompt or script node.

The engine runs a foreach node as one stage (one node attempt, one stage_finished) whose
handler is `ForeachStage`: it runs the node's own handler once per selected folder, up to
`max_parallel` at once (`delivery.engine.folder_pool`), each in the folder's worktree, with
the folder's view of the context (`folder_context`), its own agent session and its own
retries. Each folder's result lands in the run's context as it finishes — every key the
handler wrote as `<f>.<key>`, with `<f>.outcome` and `<f>.failure_reason` (an agent's whole
reply stays in its stage files: `response.<node>` and `last_response` of 200 folders would
fill the checkpoint and every later preamble) — and, on the run's
main walk, is saved at once with a marker saying the folder is done, so a run killed or
paused mid-stage runs again only the folders not done. The node's outcome: succeeded when
every selected folder did, partial_success when some failed (`<node>.failed_folders`), failed
when all did. A budget reached mid-stage starts no new folder; the running ones finish.

Threads: the workers only run handlers on their own folder's context copy and write stage
files and events (under the engine's lock); the caller's thread applies results and saves.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Final, Protocol

from delivery.engine.context import Context
from delivery.engine.folder_pool import parallelism
from delivery.engine.handlers.base import Handler, StageEnv, StageResult
from delivery.engine.retries import with_retries
from delivery.engine.stage_status import status_text
from delivery.errors import PauseReason, PauseRequested, RunError, RunStoreError
from delivery.lang.model import Node, NodeType
from delivery.lang.outcomes import StageOutcome
from delivery.store.records import RunInfo

FOLDER: Final = "folder"  # the namespace a folder's run reads its own keys under
# markers of an unfinished foreach stage: which folders it selected, which are done
PROGRESS_PREFIX: Final = "internal.foreach."
SHOWN_REASONS: Final = 3  # folders named in a failed stage's reason; the rest counted


def stage_key(node_id: str, folder: str) -> str:
    """What a folder's run of `node_id` is called: its stage directory, its agent session,
    its attempts (`implement@web`)."""
    return f"{node_id}@{folder}"


def partition(stored: Mapping[str, Any], folders: Sequence[str]
              ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(run-wide keys, {folder: its `<f>.*` keys}) of a stored context map, in one pass."""
    names = set(folders)
    wide: dict[str, Any] = {}
    own: dict[str, dict[str, Any]] = {name: {} for name in folders}
    for key, value in stored.items():
        head = key.split(".", 1)[0]
        if head in names and head != key:
            own[head][key] = value
        elif head != FOLDER:
            wide[key] = value
    return wide, own


def folder_context(context: Context, folder: str, wide: Mapping[str, Any],
                   own: Mapping[str, Any]) -> Context:
    """What a folder's run reads: the run-wide keys, its own `<f>.X` keys and the same as
    `folder.X`, and `folder.name` — never another folder's keys (SPEC §8.1: the preamble
    and templates of one folder's run tell nothing of the others). Stored values are
    shared, not copied: a stored value is replaced, never changed in place."""
    values = dict(wide)
    values.update(own)
    cut = len(folder) + 1
    for key, value in own.items():
        values[f"{FOLDER}.{key[cut:]}"] = value
    values[f"{FOLDER}.name"] = folder
    return Context.restore(values, context.artifacts, redactor=context.redactor)


@dataclass
class FolderResult:
    folder: str
    result: StageResult
    seconds: float


class FanOut(Protocol):
    """Event mode's fan-out of a stage across worker jobs (SPEC §13,
    `delivery.engine.fan_out_chunks`), asked on the run's main walk only."""

    def plan(self, node: Node, todo: list[str], limit: int, context: Context,
             env: StageEnv) -> list[str]:
        """The folders this job runs now (results saved elsewhere applied to `context`
        first); PauseRequested when the stage is fanned out instead."""
        ...

    def recorded(self, node: Node, folder: str, context: Context) -> None:
        """A folder's result is in `context`: keep it where the other jobs see it."""
        ...

    def finished(self, node: Node, context: Context) -> None:
        """This job's folders ended: PauseRequested when the stage cannot end here."""
        ...


class FanOutSource(Protocol):
    """Makes a run's `FanOut` once the run is open (`World.fan_out`)."""

    def open(self, info: RunInfo) -> FanOut: ...


class ForeachHost(Protocol):
    """What a foreach stage needs of the engine running it."""

    fan_out: FanOut | None  # event mode (SPEC §13); None: every folder runs in this job

    def folder_attempt(self, key: str) -> int:
        """The next attempt number of a folder's run (saved with the run's attempts)."""
        ...

    def event(self, event_type: str, **fields: Any) -> None: ...

    def account(self, node: Node, result: StageResult) -> None:
        """Add a folder's agent usage to the run's (and its budget's)."""
        ...

    def check_budget(self, node: Node) -> None:
        """Raise PauseRequested when the budget allows no further agent run."""
        ...

    def save_mid_stage(self, context: Context) -> None:
        """Save the context now, the stage still running (only on the run's main walk)."""
        ...

    def retry_settings(self) -> tuple[float, float]:
        """(backoff_initial, backoff_max)."""
        ...

    def folder_finished(self, node: Node, folder: str, result: StageResult,
                        seconds: float) -> None:
        """Progress: one folder's run ended."""
        ...


class ForeachStage:
    """The handler the engine calls for a foreach node (see the module docstring)."""

    def __init__(self, handlers: Mapping[NodeType, Handler], host: ForeachHost, *,
                 durable: Callable[[], bool]) -> None:
        self.handlers = handlers
        self.host = host
        self.durable = durable  # whether this call runs on the run's main walk (saved)
        self.stopping = threading.Event()  # Ctrl-C: no folder starts another attempt

    def __call__(self, node: Node, attempt: int, context: Context,
                 env: StageEnv) -> StageResult:
        assert node.type is not None
        handler = self.handlers[node.type]
        folders = list(env.folders)
        durable = self.durable()
        markers = Markers(node.id)
        wide, own = partition(context.stored(), folders)
        selected = markers.selected(context)
        if selected is None:
            selected = [f for f in folders if node.only is None or node.only.evaluate(
                folder_context(context, f, wide, own[f]).lookup)]
            markers.start(context, selected)
        done = markers.done(context, selected)
        todo = [f for f in selected if f not in done]
        limit = parallelism(node, env.workflow, env.max_parallel)
        fan_out = self.host.fan_out if durable else None
        if fan_out is not None:  # may pause the run for worker jobs, or apply their results
            todo = fan_out.plan(node, todo, limit, context, env)

        def one(folder: str) -> FolderResult:
            view = folder_context(context, folder, wide, own[folder])
            return self._folder(node, folder, view, folder_env(env, folder), handler)

        pause = self._run(node, todo, limit, one, context, markers, durable, fan_out)
        if pause is not None:
            raise pause
        if fan_out is not None:
            fan_out.finished(node, context)
        return self._node_result(node, selected, context, markers)

    def _run(self, node: Node, todo: list[str], limit: int,
             one: Callable[[str], FolderResult], context: Context, markers: Markers,
             durable: bool, fan_out: FanOut | None = None) -> PauseRequested | None:
        """Run `todo`'s folders, `limit` at once, recording each as it ends; a pause asked
        for before a folder starts lets the running ones end and starts no other."""
        pause: PauseRequested | None = None
        failure: BaseException | None = None
        running: dict[Future[FolderResult], str] = {}
        pending = list(todo)
        with ThreadPoolExecutor(max_workers=max(1, min(limit, len(todo))),
                                thread_name_prefix=f"foreach-{node.id}") as pool:

            def start_more() -> None:
                nonlocal pause
                while pending and len(running) < limit and pause is None \
                        and failure is None:
                    try:
                        self.host.check_budget(node)  # the ended folders' usage is counted
                    except PauseRequested as asked:
                        pause = asked
                        return
                    folder = pending.pop(0)
                    running[pool.submit(one, folder)] = folder

            try:
                while pending or running:
                    start_more()
                    if not running:
                        break
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    ended: list[FolderResult] = []
                    for future in finished:
                        running.pop(future)
                        try:
                            ended.append(future.result())
                        except BaseException as err:  # the store failed: raised below
                            failure = failure or err
                    # the next folders start before the ended ones are saved: a save may
                    # push (a worker's chunk ref), and no folder should wait for it
                    start_more()
                    for result in ended:
                        self._record(node, result, context, markers, durable, fan_out)
            except BaseException:
                self.stopping.set()  # Ctrl-C: the processes were ended; start nothing
                raise
        if failure is not None:
            raise failure
        return pause

    def _folder(self, node: Node, folder: str, context: Context, env: StageEnv,
                handler: Handler) -> FolderResult:
        """One folder's run of the node, with its retries (on a worker thread)."""
        key = stage_key(node.id, folder)
        started = env.clock.monotonic()
        initial, most = self.host.retry_settings()

        def attempt() -> StageResult:
            number = self.host.folder_attempt(key)
            if self.stopping.is_set():
                return StageResult.fail("the run was stopped before this folder's attempt")
            self.host.event("folder_started", node=node.id, folder=folder, attempt=number)
            began = env.clock.monotonic()
            result = _call(handler, node, number, context, env)
            self.host.account(node, result)
            usage: dict[str, Any] = {"usage": result.usage} if result.usage else {}
            env.write_stage_file(node.id, number, "status.json", status_text({
                "node": node.id, "folder": folder, "attempt": number,
                "outcome": str(result.outcome), "failure_reason": result.failure_reason,
                "seconds": round(env.clock.monotonic() - began, 6),
                "updates": sorted(result.updates), **usage}))
            self.host.event("folder_finished", node=node.id, folder=folder, attempt=number,
                            outcome=str(result.outcome), failure_reason=result.failure_reason,
                            **usage)
            return result

        def on_retry(number: int, delay: float, failed: StageResult) -> None:
            self.host.event("folder_retry", node=node.id, folder=folder, attempt=number,
                            delay=delay, failure_reason=failed.failure_reason)

        retries = node.max_retries if node.max_retries is not None else \
            env.workflow.default_max_retries
        result = with_retries(node, retries, attempt, backoff_initial=initial,
                              backoff_max=most, sleep=env.clock.sleep, on_retry=on_retry)
        return FolderResult(folder, result, env.clock.monotonic() - started)

    def _record(self, node: Node, ended: FolderResult, context: Context, markers: Markers,
                durable: bool, fan_out: FanOut | None) -> None:
        """A folder's result into the run's context (and saved, on the main walk)."""
        folder, result = ended.folder, ended.result
        failed = result.outcome == StageOutcome.FAILED
        for key, value in result.updates.items():
            if key != "last_response" and not key.startswith("response."):
                context.set(f"{folder}.{key}", value)
        context.set(f"{folder}.outcome", str(result.outcome))
        context.set(f"{folder}.failure_reason", result.failure_reason if failed else "")
        markers.finish(context, folder)
        self.host.folder_finished(node, folder, result, ended.seconds)
        if fan_out is not None:
            fan_out.recorded(node, folder, context)
        if durable:
            self.host.save_mid_stage(context)

    def _node_result(self, node: Node, selected: list[str], context: Context,
                     markers: Markers) -> StageResult:
        """The node's own outcome, from its folders' saved outcomes (also those of a run
        killed after its last folder, before the stage's end)."""
        failed = [f for f in selected
                  if context.get(f"{f}.outcome") == StageOutcome.FAILED]
        markers.clear(context, selected)
        updates: dict[str, Any] = {f"{node.id}.failed_folders": json.dumps(failed)}
        if node.type is NodeType.SCRIPT:
            updates[f"{node.id}.failed"] = bool(failed)
        if not failed:
            return StageResult(StageOutcome.SUCCEEDED, updates=updates)
        reasons = [f"{f}: {context.get(f'{f}.failure_reason') or 'failed'}"
                   for f in failed[:SHOWN_REASONS]]
        more = len(failed) - len(reasons)
        told = "; ".join(reasons) + (f"; and {more} more" if more > 0 else "")
        if len(failed) == len(selected):
            return StageResult(StageOutcome.FAILED, f"every folder failed: {told}", updates)
        return StageResult(StageOutcome.PARTIAL_SUCCESS,
                           f"{len(failed)} of {len(selected)} folders failed: {told}", updates)


class Markers:
    """The markers of a foreach stage that has not ended, in the context (saved with it):
    the folders it selected (once) and one key per folder done — a key each, so a save
    after each folder writes one small key, not a list growing with the set."""

    def __init__(self, node_id: str) -> None:
        self.base = f"{PROGRESS_PREFIX}{node_id}"

    def selected(self, context: Context) -> list[str] | None:
        value = context.get(f"{self.base}.selected")
        return [str(f) for f in value] if isinstance(value, list) else None

    def start(self, context: Context, selected: list[str]) -> None:
        context.set(f"{self.base}.selected", selected)

    def done(self, context: Context, selected: Sequence[str]) -> set[str]:
        return {f for f in selected if context.get(f"{self.base}.done.{f}") is True}

    def finish(self, context: Context, folder: str) -> None:
        context.set(f"{self.base}.done.{folder}", True)

    def clear(self, context: Context, selected: Sequence[str]) -> None:
        context.delete(f"{self.base}.selected")
        context.delete(f"{self.base}.chunks")  # a fan-out's (delivery.engine.fan_out_chunks)
        context.delete(f"{self.base}.fan_out")
        for folder in selected:
            context.delete(f"{self.base}.done.{folder}")


def folder_env(env: StageEnv, folder: str) -> StageEnv:
    """The stage environment of one folder's run: its worktree as the working directory,
    its stage files under `<node>@<folder>/`, its agent sessions kept apart."""
    path = env.folders[folder]
    runtime = env.agent_runtime.for_folder(folder, path) if env.agent_runtime else None
    stage_dir, write = env.stage_dir, env.write_stage_file
    return dataclasses.replace(
        env, workspace=path, folder=folder, agent_runtime=runtime,
        stage_dir=lambda node_id, attempt: stage_dir(stage_key(node_id, folder), attempt),
        write_stage_file=lambda node_id, attempt, name, text: write(
            stage_key(node_id, folder), attempt, name, text))


def _call(handler: Handler, node: Node, attempt: int, context: Context,
          env: StageEnv) -> StageResult:
    """The handler's result; what it raises becomes the folder's failure, except a store
    that failed (the run stops) and Ctrl-C."""
    try:
        return handler(node, attempt, context, env)
    except RunStoreError:
        raise
    except PauseRequested as pause:
        if pause.reason is PauseReason.RATE_LIMIT:
            raise  # GitHub's limits hold the whole run, not one folder: the run pauses
        return StageResult.fail("a stage run per folder cannot pause on its own")
    except RunError as err:
        return StageResult.fail(str(err))
    except Exception as err:  # a handler bug must not kill the run without a record
        env.write_stage_file(node.id, attempt, "stderr.txt", traceback.format_exc())
        return StageResult.fail(f"internal error in the {node.type.value if node.type else ''}"
                                f" handler: {type(err).__name__}: {err}")
