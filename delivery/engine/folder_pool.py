"""Work on many folders at once, bounded (SPEC §8.1): a foreach stage's runs and the folder
stages' per-folder git and forge work share these rules.

How many at once: the node's `max_parallel`, else the graph's, else the run's
(`--max-parallel`, StageEnv.max_parallel, default 8). The results come back in the order of
the folders given, whatever order they finished in; a worker's exception is raised in the
caller once every started worker has ended (none is abandoned mid-write).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TypeVar

from delivery.lang.model import Node, Workflow

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_FOLDER_PARALLELISM = 8


def parallelism(node: Node, workflow: Workflow, run_default: int) -> int:
    """How many folders `node` works on at once (at least 1)."""
    if "max_parallel" in node.attrs:
        return max(1, node.max_parallel)
    graph = workflow.attr("max_parallel").strip()
    if graph.isdigit() and int(graph) > 0:
        return int(graph)
    return max(1, run_default or DEFAULT_FOLDER_PARALLELISM)


def map_folders(work: Callable[[T], R], items: Sequence[T], limit: int, *,
                name: str = "folder") -> list[R]:
    """`[work(item) for item in items]`, up to `limit` at once; one item runs inline (no
    thread for the common one- or two-folder run's single item)."""
    if len(items) <= 1 or limit <= 1:
        return [work(item) for item in items]
    results: dict[int, R] = {}
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=min(limit, len(items)),
                            thread_name_prefix=name) as pool:
        futures: dict[Future[R], int] = {pool.submit(work, item): index
                                         for index, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                try:
                    results[futures[future]] = future.result()
                except BaseException as err:  # raised below, once every worker has ended
                    failure = failure or err
        except BaseException:
            # Ctrl-C or SIGTERM while waiting: the folders in flight finish (the pool's
            # exit waits for them), none not yet started is started
            for future in futures:
                future.cancel()
            raise
    if failure is not None:
        raise failure
    return [results[index] for index in range(len(items))]
