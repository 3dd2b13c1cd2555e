"""A parallel section run as one unit (SPEC §8): its branches walk forked contexts in
threads up to the join, and the join policy makes their outcomes one.

A branch is walked by the run loop, which passes its walk in (`BranchWalk`): this module
sits below the loop and never imports it. The branches are not saved stage by stage; an
interrupted section runs again from its fork.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageResult
from delivery.errors import RunStateChanged
from delivery.lang.model import Node, NodeType, Workflow
from delivery.lang.outcomes import NOT_SUCCEEDED, Outcome, StageOutcome
from delivery.lang.topology import ParallelSection


class BranchWalk(Protocol):
    """Walk one branch from `head` until a node of `stop_at`; its outcome and reason."""

    def __call__(self, head: str, context: Context, stop_at: frozenset[str],
                 path: list[str], cancel: threading.Event) -> tuple[Outcome, str]: ...


def run_section(node: Node, context: Context, path: list[str], *, workflow: Workflow,
                section: ParallelSection, attempt: int, walk: BranchWalk,
                event: Callable[..., None]) -> tuple[StageResult, str]:
    """Run every branch up to the join (the fan-in, or with none the exit the branches
    end at, as Attractor's handler runs each branch to a fan-in or exit boundary);
    returns the join's result and where the run goes on."""
    end_node = section.end
    assert end_node is not None  # the validator refuses a section that never joins
    stop = frozenset({end_node}) if section.fan_in is not None else frozenset(
        n.id for n in workflow.nodes_of(NodeType.EXIT))
    joined = workflow.nodes[end_node]
    event("stage_started", node=node.id, node_type="parallel", attempt=attempt)
    context.set("current_node", node.id)
    base = context.snapshot()
    edges = workflow.outgoing[node.id]
    policy = node.join_policy
    if "join_policy" not in node.attrs and "join" not in node.attrs:
        policy = joined.join_policy  # also accepted on the fan-in
    cancel = threading.Event()

    def run_branch(index: int) -> tuple[dict[str, Any], list[str]]:
        branch_context = context.fork()
        branch_path: list[str] = []
        head = edges[index].target
        try:
            outcome, reason = walk(head, branch_context, stop, branch_path, cancel)
        except RunStateChanged:
            cancel.set()  # the other branches start no further stage
            raise
        if policy == "first_success" and outcome not in NOT_SUCCEEDED:
            cancel.set()
        # values, not artifact pointers: the results list is offloaded as a whole if large
        written = {key: branch_context.get(key) for key in branch_context.changes_since(base)}
        entry = {"node": head, "outcome": str(outcome), "failure_reason": reason,
                 "context": written}
        return entry, branch_path

    with ThreadPoolExecutor(max_workers=node.max_parallel, thread_name_prefix="branch") as pool:
        finished = list(pool.map(run_branch, range(len(edges))))
    results = [entry for entry, _ in finished]
    for _, branch_path in finished:
        path.extend(node_id for node_id in branch_path if node_id not in stop)
    if joined.type is NodeType.FAN_IN:  # another join runs as the next stage
        path.append(end_node)
    failed = [r for r in results if r["outcome"] == StageOutcome.FAILED]
    succeeded = [r for r in results if r["outcome"] not in NOT_SUCCEEDED]
    if policy == "first_success":
        outcome = StageOutcome.SUCCEEDED if succeeded else StageOutcome.FAILED
    else:  # wait_all (SPEC §8): partial success when some branches failed
        outcome = (StageOutcome.SUCCEEDED if not failed else StageOutcome.FAILED
                   if not succeeded else StageOutcome.PARTIAL_SUCCESS)
    context.set("parallel.results", results)
    event("stage_finished", node=node.id, attempt=attempt, outcome=str(outcome),
          branches=len(results), failed=len(failed))
    if outcome != StageOutcome.FAILED:
        return StageResult(outcome), end_node
    failures = "; ".join(f"{r['node']}: {r['failure_reason']}" for r in failed)
    return StageResult.fail(f"join_policy={policy}: every branch failed — {failures}"), end_node
