"""`delivery work --state … RUN_ID --chunk K` (SPEC §13 "Fan-out across runners"): one
worker job of a fanned-out foreach stage.

    outcome = work_chunk(state, run_id, 2, job="actions:o/c/7/1", workspace=Path("."),
                         world=World())

The worker fetches the run (claiming nothing of it), claims its chunk's ref, and runs the
stage in a scratch copy of the run for the chunk's folders whose result is not saved yet,
re-creating their worktrees first; each folder's result goes to the chunk's ref as it ends
(`delivery.state.chunks`), never to the run's. Then, when every chunk has all its results,
it resumes the run as `delivery resume --state` does (which applies them: `delivery.engine.
fan_out_chunks`); otherwise it ends `chunk_done` and leaves the run to the last worker.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from delivery.engine.context import Context
from delivery.engine.fan_out_chunks import (
    FanOutPause,
    StateFanOut,
    gather,
    saved_chunks,
    saved_fan_out,
    worktree_files,
)
from delivery.engine.fan_out_chunks import folder_keys as folder_keys
from delivery.engine.foreach import FanOut, Markers
from delivery.engine.handlers.base import StageEnv
from delivery.engine.outcome import RunOutcome
from delivery.engine.run_loop import EngineOptions, Progress
from delivery.engine.runner import resume_run
from delivery.engine.worktree_restore import recreate
from delivery.engine.world import World
from delivery.errors import RunRefused, StageProblem, Superseded
from delivery.git.restore import SavedWorktree, saved_worktrees
from delivery.lang.model import Node
from delivery.state.chunks import ChunkSession
from delivery.state.remote import RemoteState, StateRunStores, rebased, stage_timeout_limit
from delivery.store.records import RunInfo
from delivery.store.runstore import LocalRunStore

CHUNK_DONE = "chunk_done"
FOLDERS = ".folders"  # beside a worker's scratch run: the worktrees it re-creates


@dataclass
class ChunkDone:
    """A worker that saved its chunk and left the run to the others."""

    run_id: str
    chunk: int
    folders: list[str]

    def to_json(self) -> dict[str, object]:
        return {"run_id": self.run_id, "status": CHUNK_DONE, "failure_reason": "",
                "chunk": self.chunk, "folders": self.folders, "path": [], "context": {},
                "run_dir": ""}


class WorkerFanOut:
    """The stage as a worker runs it: only its chunk's folders not saved yet; each result
    onto the chunk's ref; then the worker's copy of the run stops (nothing of it saved)."""

    def __init__(self, session: ChunkSession, folders: list[str],
                 saved: Mapping[str, SavedWorktree]) -> None:
        self.session = session
        self.folders = folders
        self.saved = saved
        self.env: StageEnv | None = None

    def plan(self, node: Node, todo: list[str], limit: int, context: Context,
             env: StageEnv) -> list[str]:
        self.env = env
        # results a killed worker saved are applied, so those folders never run again
        gather(node, self.session, self.folders, context, env, worktrees=False)
        done = Markers(node.id).done(context, self.folders)
        mine = [f for f in self.folders if f not in done]
        missing = [f for f in mine if not env.folders[f].exists()]
        if missing:  # a fresh runner: the chunk's worktrees as the run saved them
            _, problem = recreate(env, missing, {f: self.saved[f] for f in missing
                                                 if f in self.saved})
            if problem:
                raise StageProblem(f"chunk {self.session.number}: {problem}")
        return mine

    def recorded(self, node: Node, folder: str, context: Context) -> None:
        self.session.record(folder, folder_keys(context, folder),
                            worktree_files(self.env, folder))

    def finished(self, node: Node, context: Context) -> None:
        raise FanOutPause(node.id, [self.session.number])  # this job's part is over


@dataclass
class _WorkerSource:
    fan_out: WorkerFanOut

    def open(self, info: RunInfo) -> FanOut:
        return self.fan_out


def own_worktrees(info: RunInfo, saved: Mapping[str, SavedWorktree], where: Path) -> RunInfo:
    """The run with the worktrees its worker re-creates moved to `where`, a directory of
    this worker's own, emptied first: on a self-hosted machine the workspace's folder paths
    may hold an earlier run's worktrees or a person's files, which the worker must neither
    run in nor touch. A folder the run keeps no worktree of stays where it is."""
    shutil.rmtree(where, ignore_errors=True)  # a killed attempt's: its results are saved
    folders = dict(info.folders)
    folders.update({name: str(where / name) for name in saved if name in folders})
    return dataclasses.replace(info, folders=folders)


def work_chunk(state: RemoteState, run_id: str, number: int, *, job: str, workspace: Path,
               world: World, take_over: bool = False, options: EngineOptions | None = None,
               observer: Progress | None = None) -> RunOutcome | ChunkDone:
    """Run chunk `number` of the run's fanned-out stage (see the module docstring).
    Superseded when another live job holds the chunk, or the run is not fanned out any
    more; RunRefused for a chunk the run does not have."""
    workspace = workspace.resolve()
    scratch = workspace / ".delivery" / "work" / f"{run_id}-{number}"
    shutil.rmtree(scratch, ignore_errors=True)
    run = state.session(run_id, job)
    run.fetch(scratch)
    loaded = LocalRunStore.open_dir(scratch).load()
    node = loaded.state.next_node if loaded is not None else None
    context = Context.restore(dict(loaded.state.context) if loaded is not None else {})
    chunks = saved_chunks(context, node) if node else None
    if run.ended or node is None or chunks is None:
        raise Superseded(run_id, "its stage is not fanned out (any more): the run went on")
    if not 1 <= number <= len(chunks):
        raise RunRefused(f"--chunk {number}", f"is not a chunk of run {run_id} (it has "
                         f"chunks 1 to {len(chunks)})", "pass one of the numbers the "
                         "fan-out printed in chunks")
    folders, fan_out = chunks[number - 1], saved_fan_out(context, node)
    chunk = ChunkSession(state, run_id, fan_out, number, job).fetch()
    if not set(folders) <= set(chunk.results()):
        chunk.claim(stale_after=stage_timeout_limit(scratch), take_over=take_over)
        saved = saved_worktrees(run.saved_files, folders)
        store = LocalRunStore.open_dir(scratch)
        store.write_run_info(own_worktrees(rebased(store.read_run_info(), workspace), saved,
                                           scratch.with_name(scratch.name + FOLDERS)))
        worker = WorkerFanOut(chunk, folders, saved)
        ran = resume_run(scratch, dataclasses.replace(world, fan_out=_WorkerSource(worker)),
                         options=options, observer=observer)
        if not set(folders) <= set(chunk.results()):
            return ran  # the chunk could not run (its worktrees): said as the run says it
    if not all(set(part) <= set(ChunkSession(state, run_id, fan_out, index, job).fetch()
                                          .results())
               for index, part in enumerate(chunks, 1) if index != number):
        return ChunkDone(run_id, number, folders)
    # every chunk has all its results: this job continues the run, as a resume does
    shutil.rmtree(scratch, ignore_errors=True)
    session = state.session(run_id, job)
    last = dataclasses.replace(world)
    last.stores = StateRunStores(session, take_over=take_over, workspace=workspace)
    last.fan_out = StateFanOut(state, job, take_over)
    return resume_run(workspace / ".delivery" / "runs" / run_id, last, options=options,
                      observer=observer)


def chunks_to_run(state: RemoteState, run_id: str, *, job: str, workspace: Path
                  ) -> tuple[str, list[int]]:
    """The run's status and — when it waits at a fan-out — its chunks that still miss a
    result and that no live job holds: what a next round of workers should run (after a
    round whose continuing worker reached another fan-out, or in which a worker died).
    Nothing is claimed or changed."""
    scratch = workspace.resolve() / ".delivery" / "join" / run_id
    shutil.rmtree(scratch, ignore_errors=True)
    run = state.session(run_id, job)
    try:
        run.fetch(scratch)
        loaded = LocalRunStore.open_dir(scratch).load()
        status = str(run.status.get("status") or "")
        node = loaded.state.next_node if loaded is not None else None
        context = Context.restore(dict(loaded.state.context) if loaded is not None else {})
        chunks = saved_chunks(context, node) if node else None
        if run.ended or node is None or chunks is None:
            return status, []
        fan_out, stale_after = saved_fan_out(context, node), stage_timeout_limit(scratch)
        left = []
        for number, folders in enumerate(chunks, 1):
            chunk = ChunkSession(state, run_id, fan_out, number, job).fetch()
            if not set(folders) <= set(chunk.results()) and \
                    not chunk.held_by_another(stale_after):
                left.append(number)
        return status, left
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
