"""Shape of the graph: what is reachable, and which fan-in joins which parallel node.

Shared by the validator (availability across parallel sections) and the engine (where a
branch stops).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from delivery.lang.model import NodeType, Workflow


@dataclass
class Branch:
    head: str
    nodes: set[str] = field(default_factory=set)  # the branch's nodes, the fan-in excluded


@dataclass
class ParallelSection:
    parallel: str
    # The node that joins the branches (a fan-in, or where they meet); None: no join, or
    # the branches end at an exit
    fan_in: str | None
    branches: list[Branch]
    # Where the run goes on after the join: the join, or the exit every branch ends at;
    # None: the branches never meet (a validation error).
    end: str | None = None


def retry_targets(workflow: Workflow, node_id: str) -> list[str]:
    """Where a failure of `node_id` may jump when no failure edge matches (SPEC §1.3)."""
    node = workflow.nodes[node_id]
    found: list[str] = []
    for name in ("retry_target", "fallback_retry_target"):
        for source in (node.attr(name), workflow.attr(name)):
            if source and source in workflow.nodes and source not in found:
                found.append(source)
    return found


def successors(workflow: Workflow, node_id: str) -> list[str]:
    """Nodes a run may go to next: edge targets and retry targets."""
    targets = [edge.target for edge in workflow.outgoing.get(node_id, [])]
    return targets + [t for t in retry_targets(workflow, node_id) if t not in targets]


def retry_table(workflow: Workflow) -> dict[str, list[str]]:
    """`retry_targets` of every node, worked out once: the graph's targets are shared by
    every node that names none of its own (the lists are not to be changed)."""
    shared: list[str] | None = None
    table: dict[str, list[str]] = {}
    for node_id, node in workflow.nodes.items():
        attrs = node.attrs
        if "retry_target" in attrs or "fallback_retry_target" in attrs:
            table[node_id] = retry_targets(workflow, node_id)
        else:
            if shared is None:
                shared = []
                for name in ("retry_target", "fallback_retry_target"):
                    source = workflow.attr(name)
                    if source and source in workflow.nodes and source not in shared:
                        shared.append(source)
            table[node_id] = shared
    return table


def reachable(workflow: Workflow, start: str,
              retries: dict[str, list[str]] | None = None) -> set[str]:
    """Every node a run from `start` may visit (along edges, retry targets and, at an exit,
    the retry targets of goal gates). `retries`: the workflow's retry_table, if known."""
    outgoing = workflow.outgoing
    if retries is None:
        retries = retry_table(workflow)
    nodes = workflow.nodes
    gate_targets: list[str] | None = None  # the same for every exit: found at the first
    seen = {start}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        for edge in outgoing.get(current, ()):
            target = edge.target
            if target not in seen:
                seen.add(target)
                queue.append(target)
        for target in retries.get(current, ()):
            if target not in seen:
                seen.add(target)
                queue.append(target)
        if nodes[current].type is NodeType.EXIT:
            # a goal gate not met at an exit jumps to the retry targets
            if gate_targets is None:
                gate_targets = [target for gate in nodes.values() if gate.goal_gate
                                for target in retries[gate.id]]
            for target in gate_targets:
                if target not in seen:
                    seen.add(target)
                    queue.append(target)
    return seen


def parallel_sections(workflow: Workflow) -> dict[str, ParallelSection]:
    """Every parallel node with the node that joins all of its branches.

    A branch is walked from its head up to a fan-in or an exit; an inner parallel section is
    stepped over (its join continues the walk), so nested sections are matched correctly.
    The join is the fan-in every branch reaches, nearest to the parallel node. Without one
    (Attractor runs each branch to a fan-in or exit boundary, and its implementations join
    where the branches meet), it is the nearest node every branch reaches: an exit ends the
    run there, any other node runs once on the joined context.
    """
    sections: dict[str, ParallelSection] = {}
    in_progress: set[str] = set()

    def walk_branch(head: str, parallel_id: str) -> dict[str, int]:
        """Every node reached from a branch head, with its distance."""
        reached: dict[str, int] = {}
        queue = deque([(head, 0)])
        seen = {head, parallel_id}
        while queue:
            current, depth = queue.popleft()
            reached.setdefault(current, depth)
            node = workflow.nodes[current]
            if node.type in (NodeType.FAN_IN, NodeType.EXIT):
                continue
            nexts = successors(workflow, current)
            if node.type is NodeType.PARALLEL:
                inner = match(current)
                if inner is not None and inner.end is not None:
                    nexts = successors(workflow, inner.end)
            for target in nexts:
                if target not in seen:
                    seen.add(target)
                    queue.append((target, depth + 1))
        return reached

    def nearest(candidates: set[str], reached: list[dict[str, int]]) -> str:
        return min(candidates, key=lambda f: (max(r.get(f, 0) for r in reached), f))

    def match(parallel_id: str) -> ParallelSection | None:
        if parallel_id in sections:
            return sections[parallel_id]
        if parallel_id in in_progress:
            return None
        in_progress.add(parallel_id)
        heads = [edge.target for edge in workflow.outgoing.get(parallel_id, [])]
        reached = [walk_branch(head, parallel_id) for head in heads]
        common: set[str] = set(reached[0]) if reached else set()
        for nodes in reached[1:]:
            common &= set(nodes)
        fan_in = end = None
        joins = {f for f in common if workflow.nodes[f].type is NodeType.FAN_IN}
        any_fan_in = any(workflow.nodes[f].type is NodeType.FAN_IN for r in reached for f in r)
        if joins:
            fan_in = end = nearest(joins, reached)
        elif common and not any_fan_in:
            end = nearest(common, reached)
            if workflow.nodes[end].type is not NodeType.EXIT:
                fan_in = end
        branches = []
        for head in heads:
            branch = Branch(head)
            if head != end:
                branch.nodes = _nodes_before(workflow, head, end, parallel_id)
            branches.append(branch)
        section = ParallelSection(parallel_id, fan_in, branches, end)
        sections[parallel_id] = section
        in_progress.discard(parallel_id)
        return section

    for node in workflow.nodes_of(NodeType.PARALLEL):
        match(node.id)
    return sections


def _nodes_before(workflow: Workflow, head: str, fan_in: str | None, parallel_id: str) -> set[str]:
    seen = {head}
    queue = deque([head])
    while queue:
        current = queue.popleft()
        for target in successors(workflow, current):
            if target != fan_in and target != parallel_id and target not in seen:
                seen.add(target)
                queue.append(target)
    return seen
