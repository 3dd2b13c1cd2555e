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

from collections.abc import Mapping, Sequence
from typing import Any, Final

from delivery.engine.context import Context
from delivery.engine.foreach import PROGRESS_PREFIX
from delivery.engine.handlers.base import StageEnv
from delivery.engine.run_setup import MAX_CHUNKS
from delivery.errors import PAUSED_KEY, PauseReason, PauseRequested
from delivery.lang.model import Node

CHUNKS: Final = "chunks"


def chunks_key(node_id: str) -> str:
    return f"{PROGRESS_PREFIX}{node_id}.{CHUNKS}"


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
    that has more folders than it runs at once, and pauses for the workers."""

    def __init__(self, max_runners: int) -> None:
        self.max_runners = max_runners

    def plan(self, node: Node, todo: list[str], limit: int, context: Context,
             env: StageEnv) -> list[str]:
        if saved_chunks(context, node.id) is not None:
            return todo  # fanned out before: the workers' results are applied (item 2)
        if self.max_runners <= 1 or len(todo) <= limit:
            return todo
        chunks = split(todo, self.max_runners)
        context.set(chunks_key(node.id), chunks)
        raise FanOutPause(node.id, range(1, len(chunks) + 1))

    def recorded(self, node: Node, folder: str, context: Context) -> None:
        pass

    def finished(self, node: Node, context: Context) -> None:
        pass
