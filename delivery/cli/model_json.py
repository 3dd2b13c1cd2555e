"""`delivery parse` and `delivery handlers` (SPEC §12): the model and the node types as
plain JSON, for tools, editors and Attractor conformance runners."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from delivery.lang.attributes import AGENT_NODE, EDGE, GRAPH
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.drawing import DRAWN_AS
from delivery.lang.model import SHAPES, TYPE_ALIASES, Attributes, NodeType, Workflow

# The attributes every node takes, then those each type adds (SPEC §1.2, §5 to §9).
COMMON_NODE = ("label", "shape", "type", "max_retries", "retry_target",
               "fallback_retry_target", "goal_gate", "timeout", "allow_partial",
               "auto_status", "class")
BY_TYPE: dict[NodeType, tuple[str, ...]] = {
    NodeType.AGENT: ("prompt", "outputs", "template", *sorted(AGENT_NODE - {"class",
                                                                           "timeout"})),
    NodeType.PROMPT: ("prompt", "outputs", "template", *sorted(AGENT_NODE - {"class",
                                                                            "timeout"})),
    NodeType.SCRIPT: ("script", "tool_command", "facts", "folder", "template", "forge_token"),
    NodeType.PROBE: ("probe", "folder"),
    NodeType.MERGE: ("order", "policy", "rollback", "method"),
    NodeType.PUBLISH: ("title", "draft"),
    NodeType.RESPOND: ("threads", "folder"),
    NodeType.WAIT: ("interval", "backoff", "max_interval"),
    NodeType.HUMAN: ("prompt", "delegatable"),
    NodeType.PARALLEL: ("join_policy", "max_parallel"),
    NodeType.FAN_IN: ("join_policy",),
    NodeType.MANAGER_LOOP: ("manager.poll_interval", "manager.max_cycles",
                            "manager.stop_condition", "manager.actions",
                            "stack.child_dotfile", "stack.child_workdir",
                            "stack.child_autostart"),
}


def _attributes(attrs: Attributes) -> dict[str, dict[str, Any]]:
    return {name: {"value": attr.text, "line": attr.line, "column": attr.column,
                   "inherited": attr.inherited} for name, attr in attrs.items()}


def workflow_json(workflow: Workflow | None,
                  diagnostics: Iterable[Diagnostic]) -> dict[str, Any]:
    """The model: graph attributes, nodes (resolved type, typed fields, attributes,
    position) and edges, with the load and validation diagnostics."""
    found = [asdict(d) for d in diagnostics]
    if workflow is None:
        return {"graph": None, "nodes": [], "edges": [], "diagnostics": found}
    graph = {
        "name": workflow.name, "file": workflow.file, "line": workflow.line,
        "column": workflow.column, "goal": workflow.goal,
        "default_max_retries": workflow.default_max_retries, "template": workflow.template,
        "inputs": [{"name": d.name, "optional": d.optional} for d in workflow.inputs],
        "folders": list(workflow.folders),
        "attributes": _attributes(workflow.attrs),
    }
    nodes = [{
        "id": node.id, "type": node.type.value if node.type else None,
        "line": node.line, "column": node.column, "declared": node.declared,
        "subgraph": node.subgraph, "label": node.label,
        "max_retries": node.max_retries, "timeout": node.timeout, "goal_gate": node.goal_gate,
        "allow_partial": node.allow_partial, "auto_status": node.auto_status,
        "join_policy": node.join_policy, "max_parallel": node.max_parallel,
        "template": node.template,
        "threads": node.threads_key or None,
        "outputs": [{"name": o.name, "kind": o.kind.value} for o in node.outputs],
        "facts": [f.name for f in node.facts],
        "attributes": _attributes(node.attrs),
    } for node in workflow.nodes.values()]
    edges = [{
        "source": edge.source, "target": edge.target, "line": edge.line,
        "column": edge.column, "label": edge.label, "weight": edge.weight,
        "loop_restart": edge.loop_restart,
        "condition": edge.condition.text if edge.condition else None,
        "attributes": _attributes(edge.attrs),
    } for edge in workflow.edges]
    return {"graph": graph, "nodes": nodes, "edges": edges, "diagnostics": found}


def workflow_text(workflow: Workflow) -> str:
    lines = [f"digraph {workflow.name} ({workflow.file}), templates: {workflow.template}"]
    for node in workflow.nodes.values():
        kind = node.type.value if node.type else "unknown"
        lines.append(f"  {node.line}:{node.column} node {node.id}: {kind}")
    for edge in workflow.edges:
        extra = f" [{edge.condition.text}]" if edge.condition else ""
        lines.append(f"  {edge.line}:{edge.column} edge {edge.name}{extra}")
    return "\n".join(lines)


def handlers_json(runnable: Iterable[NodeType]) -> dict[str, Any]:
    """The node types this version runs, each with its attributes, shape and the Attractor
    handler types that select it."""
    shapes = {kind: shape for shape, kind in SHAPES.items()}
    types = []
    for kind in sorted(set(runnable), key=lambda k: list(NodeType).index(k)):
        types.append({
            "type": kind.value,
            "attractor_shape": shapes.get(kind),
            "drawn_as": DRAWN_AS[kind],
            "aliases": sorted(a for a, k in TYPE_ALIASES.items() if k is kind),
            "attributes": list(COMMON_NODE) + [a for a in BY_TYPE.get(kind, ())
                                               if a not in COMMON_NODE],
        })
    return {"types": types, "graph_attributes": sorted(GRAPH),
            "edge_attributes": sorted(EDGE)}
