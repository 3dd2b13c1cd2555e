"""A foreach stage fanned out across worker jobs (SPEC §13 "Fan-out across runners").

In event mode, a foreach stage whose unfinished folders are more than it runs at once, with
`--max-runners` above 1, is not run by the job that reaches it: its folders are split into
chunks (balanced, in folder order, at most `max_runners` ≤ 256), the split is kept in the
context (`internal.foreach.<node>.chunks`, saved with the run) and the run pauses, reason
`fan_out`. Each worker (`delivery work --chunk K`, `delivery.engine.chunk_work`) runs one
chunk and keeps each folder's result on its chunk's ref (`delivery.state.chunks`); the job
that continues the run applies every chunk's results here (`RunFanOut.plan`) and runs
itself only the folders no chunk has a result for.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from delivery.engine.context import Context
from delivery.engine.foreach import PROGRESS_PREFIX, FanOut, Markers
from delivery.engine.handlers.base import StageEnv
from delivery.engine.run_setup import MAX_CHUNKS
from delivery.engine.worktree_restore import recreate
from delivery.errors import PAUSED_KEY, PauseReason, PauseRequested, StageProblem, Superseded
from delivery.git.restore import SavedWorktree, snapshot_files
from delivery.lang.model import Node
from delivery.redact import Redactor
from delivery.state.chunks import ChunkSession, chunk_sessions
from delivery.state.remote import RemoteState, stage_timeout_limit
from delivery.store.records import RunInfo
from probes.worktree import worktree_state

CHUNKS: Final = "chunks"
FAN_OUTS: Final = "internal.fan_outs"  # how many fan-outs the run has made (never cleared)


def chunks_key(node_id: str) -> str:
    return f"{PROGRESS_PREFIX}{node_id}.{CHUNKS}"


def fan_out_key(node_id: str) -> str:
    return f"{PROGRESS_PREFIX}{node_id}.fan_out"


def saved_fan_out(context: Context, node_id: str) -> str:
    """Which of the run's fan-outs the stage's chunks belong to (`<n>-<node>`, naming their
    refs): a later fan-out, of this stage again or of the next, gets refs of its own."""
    value = context.get(fan_out_key(node_id))
    return str(value) if isinstance(value, str) and value else f"0-{node_id}"


def start_fan_out(context: Context, node_id: str, chunks: list[list[str]]) -> None:
    """The split kept with the run, under a fan-out number the run never gives again."""
    number = context.get(FAN_OUTS)
    number = (number if isinstance(number, int) else 0) + 1
    context.set(FAN_OUTS, number)
    context.set(fan_out_key(node_id), f"{number}-{node_id}")
    context.set(chunks_key(node_id), chunks)


def split(folders: Sequence[str], count: int) -> list[list[str]]:
    """`folders` in `count` chunks (fewer when there are fewer folders), in order, sizes
    differing by one at most: the same folders always make the same chunks."""
    count = max(1, min(count, MAX_CHUNKS, len(folders)))
    size, extra = divmod(len(folders), count)
    chunks, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        chunks.append(list(folders[start:end]))
        start = end
    return chunks


def saved_chunks(context: Context, node_id: str) -> list[list[str]] | None:
    """The chunks a stage was split into, as the run saved them; None: not fanned out."""
    value = context.get(chunks_key(node_id))
    if not isinstance(value, list) or not all(isinstance(c, list) for c in value):
        return None
    return [[str(folder) for folder in chunk] for chunk in value]


def chunk_numbers(stored: Mapping[str, Any]) -> list[int]:
    """The chunks a run paused for a fan-out waits on (from its pause record)."""
    paused = stored.get(PAUSED_KEY)
    if not isinstance(paused, Mapping) or paused.get("reason") != PauseReason.FAN_OUT:
        return []
    listed = str(paused.get(CHUNKS) or "")
    return [int(part) for part in listed.split(",") if part.isdigit()]


class FanOutPause(PauseRequested):
    """The run stops for worker jobs: one per chunk number in `chunks`."""

    reason = PauseReason.FAN_OUT

    def __init__(self, node_id: str, chunks: Sequence[int]) -> None:
        listed = ",".join(str(number) for number in chunks)
        super().__init__(node_id, message=f"stage '{node_id}' is fanned out to "
                         f"{len(chunks)} worker jobs (chunks {listed}): each runs delivery "
                         "work --state … RUN_ID --chunk K, and the last one continues the run",
                         event_fields={CHUNKS: listed})


class RunFanOut:
    """The job running the run itself (a start or a resume, event mode): splits a stage
    that has more folders than it runs at once and pauses for the workers; once it was
    split, applies the chunks' saved results and runs the folders left of the chunks no
    live job holds (keeping their results on the chunks' refs too, as a worker would)."""

    def __init__(self, max_runners: int,
                 chunks: Callable[[str, int], ChunkSession] | None = None,
                 *, take_over: bool = False) -> None:
        self.max_runners = max_runners
        self.chunks = chunks
        self.take_over = take_over
        self.held: dict[str, ChunkSession] = {}  # folder -> the chunk this job holds
        self.pending: list[int] = []  # chunks a live worker holds
        self.env: StageEnv | None = None

    def plan(self, node: Node, todo: list[str], limit: int, context: Context,
             env: StageEnv) -> list[str]:
        chunks = saved_chunks(context, node.id)
        if chunks is None:
            if self.max_runners <= 1 or len(todo) <= limit:
                return todo
            chunks = split(todo, self.max_runners)
            start_fan_out(context, node.id, chunks)
            raise FanOutPause(node.id, range(1, len(chunks) + 1))
        if self.chunks is None:
            return todo  # no state remote to read the workers' results from
        self.env = env
        markers, mine = Markers(node.id), set()
        fan_out = saved_fan_out(context, node.id)
        for number, folders in enumerate(chunks, 1):
            session = self.chunks(fan_out, number).fetch()
            gather(node, session, folders, context, env)
            left = [f for f in folders if f not in markers.done(context, folders)]
            if not left:
                continue
            try:
                session.claim(stale_after=stage_timeout_limit(env.run_dir),
                              take_over=self.take_over)
            except Superseded:
                self.pending.append(number)
                continue
            self.held.update({folder: session for folder in left})
            mine.update(left)
        return [f for f in todo if f in mine and f not in markers.done(context, todo)]

    def recorded(self, node: Node, folder: str, context: Context) -> None:
        session = self.held.get(folder)
        if session is not None:
            session.record(folder, folder_keys(context, folder),
                           worktree_files(self.env, folder))

    def finished(self, node: Node, context: Context) -> None:
        if self.pending:  # a live worker still runs these: its results come later
            raise FanOutPause(node.id, self.pending)


def folder_keys(context: Context, folder: str) -> dict[str, Any]:
    """The keys a folder's run wrote (`<f>.*`), resolved: a chunk's ref keeps values,
    never a pointer into one job's artifact store."""
    prefix = f"{folder}."
    return {key: context.get(key) for key in context.stored() if key.startswith(prefix)}


def gather(node: Node, session: ChunkSession, folders: list[str], context: Context,
           env: StageEnv, *, worktrees: bool = True) -> list[str]:
    """The results saved on a chunk's ref into the run (keys, done markers, worktrees) for
    its folders not done in the run yet; the folders applied. A folder is applied once:
    a done marker is never applied again."""
    markers = Markers(node.id)
    done = markers.done(context, folders)
    results = session.results()
    applied = [f for f in folders if f in results and f not in done]
    saved = session.worktrees(applied)
    for folder in applied:
        context.update({key: value for key, value in results[folder].items()
                        if key.startswith(f"{folder}.")})
        markers.finish(context, folder)
        if worktrees and folder in saved:
            replace_worktree(env, folder, saved[folder])
    return applied


def replace_worktree(env: StageEnv, folder: str, saved: SavedWorktree) -> None:
    """The folder's worktree as the worker that ran it left it. A worktree this machine has
    (the run's own: a linked worktree in the workspace) is removed and re-created; a
    folder that is not one (a person's directory) is never touched."""
    path = env.folders[folder]
    if path.exists():
        if not (path / ".git").is_file():
            return
        on = worktree_state(path).branch
        if on != env.branch:  # another run's (a self-hosted runner's leftover): never deleted
            raise StageProblem(
                f"folder {folder}: {path} is another run's worktree (on "
                f"{on or 'a detached HEAD'}), not this run's on {env.branch}, so the chunk's "
                f"result cannot be put there; check nothing is left uncommitted (git -C "
                f"{path} status), free the folder with git -C {path} worktree remove {path}, "
                "then resume the run")
        shutil.rmtree(path)  # the run's own, as an earlier job left it: the chunk's is newer
    _, problem = recreate(env, [folder], {folder: saved})
    if problem:
        raise StageProblem(f"the worktree of {folder} cannot be re-created from its "
                           f"chunk's saved result: {problem}")


def worktree_files(env: StageEnv | None, folder: str) -> dict[str, bytes]:
    """The folder's worktree snapshot (unpublished changes, secrets masked) for a chunk's
    ref; nothing for a folder that is not the run's worktree."""
    path = env.folders.get(folder) if env is not None else None
    if path is None or not (path / ".git").is_file():
        return {}
    return snapshot_files({folder: path}, Redactor.from_environment(os.environ))


@dataclass
class StateFanOut:
    """`World.fan_out` of a run kept on a state remote (`--state`)."""

    state: RemoteState
    job: str
    take_over: bool = False

    def open(self, info: RunInfo) -> FanOut:
        return RunFanOut(info.max_runners or 1, chunk_sessions(self.state, info.run_id,
                                                                self.job),
                         take_over=self.take_over)
