"""Drawing a workflow: Graphviz DOT (for `dot -Tsvg`) and Mermaid, with a run's path marked.

Each node is drawn by its resolved type (SPEC §1.2's "drawn as" column), so a `type=probe`
node looks like a probe whatever shape the file gave it. The nodes and edges a run took are
highlighted; an edge counts as taken when its two ends follow each other in the path.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

from delivery.lang.model import Edge, Node, NodeType, Workflow

DRAWN_AS: dict[NodeType, str] = {
    NodeType.START: "Mdiamond",
    NodeType.EXIT: "Msquare",
    NodeType.AGENT: "box",
    NodeType.PROMPT: "tab",
    NodeType.SCRIPT: "parallelogram",
    NodeType.PROBE: "cds",
    NodeType.PUBLISH: "folder",
    NodeType.MERGE: "doubleoctagon",
    NodeType.RESPOND: "note",
    NodeType.WAIT: "insulator",
    NodeType.WORKTREE_ADD: "rect",
    NodeType.WORKTREE_REMOVE: "invhouse",
    NodeType.HUMAN: "hexagon",
    NodeType.CONDITIONAL: "diamond",
    NodeType.PARALLEL: "component",
    NodeType.FAN_IN: "tripleoctagon",
    NodeType.MANAGER_LOOP: "house",
}

# Mermaid has fewer shapes: (opening, closing) per type.
_MERMAID_SHAPES: dict[NodeType, tuple[str, str]] = {
    NodeType.START: ("([", "])"),
    NodeType.EXIT: ("[[", "]]"),
    NodeType.PROMPT: ("[", "]"),
    NodeType.SCRIPT: ("[/", "/]"),
    NodeType.PROBE: ("[(", ")]"),
    NodeType.PUBLISH: ("[\\", "\\]"),
    NodeType.MERGE: ("((", "))"),
    NodeType.RESPOND: (">", "]"),
    NodeType.WAIT: ("(", ")"),
    NodeType.WORKTREE_ADD: ("[/", "\\]"),
    NodeType.WORKTREE_REMOVE: ("[\\", "/]"),
    NodeType.HUMAN: ("{{", "}}"),
    NodeType.CONDITIONAL: ("{", "}"),
    NodeType.PARALLEL: ("[[", "]]"),
    NodeType.FAN_IN: ("[[", "]]"),
    NodeType.MANAGER_LOOP: ("[/", "\\]"),
}

VISITED_FILL = "#d9f2d9"
VISITED_STROKE = "#2e7d32"


def taken_edges(workflow: Workflow, path: Sequence[str]) -> set[int]:
    """Indexes (into `workflow.edges`) of the edges between consecutive path entries."""
    steps = set(itertools.pairwise(path))
    return {i for i, edge in enumerate(workflow.edges) if (edge.source, edge.target) in steps}


def _dot_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def to_dot(workflow: Workflow, path: Sequence[str] = ()) -> str:
    """A plain DOT graph for Graphviz: shapes by resolved type, labels, the path marked."""
    visited = set(path)
    taken = taken_edges(workflow, path)
    lines = [f"digraph {_dot_quote(workflow.name or 'workflow')} {{",
             '    graph [rankdir=TB, fontname="Helvetica"];',
             '    node [fontname="Helvetica", fontsize=11];',
             '    edge [fontname="Helvetica", fontsize=9];']
    for node in workflow.nodes.values():
        style = [f"shape={DRAWN_AS.get(node.type, 'box') if node.type else 'box'}",
                 f"label={_dot_quote(node.label)}"]
        if node.id in visited:
            style += ["style=filled", f'fillcolor="{VISITED_FILL}"',
                      f'color="{VISITED_STROKE}"', "penwidth=2"]
        lines.append(f"    {_dot_quote(node.id)} [{', '.join(style)}];")
    for index, edge in enumerate(workflow.edges):
        style = []
        text = _edge_text(edge)
        if text:
            style.append(f"label={_dot_quote(text)}")
        if index in taken:
            style += [f'color="{VISITED_STROKE}"', "penwidth=2.5"]
        suffix = f" [{', '.join(style)}]" if style else ""
        lines.append(f"    {_dot_quote(edge.source)} -> {_dot_quote(edge.target)}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(workflow: Workflow, path: Sequence[str] = ()) -> str:
    """A Mermaid flowchart (GitHub renders it in Markdown); the path's nodes and edges in
    green."""
    ids = {node_id: f"n{i}" for i, node_id in enumerate(workflow.nodes)}
    visited = [ids[node_id] for node_id in dict.fromkeys(path) if node_id in ids]
    lines = ["flowchart TD"]
    for node in workflow.nodes.values():
        opening, closing = _MERMAID_SHAPES.get(node.type, ("[", "]")) if node.type else ("[", "]")
        lines.append(f"    {ids[node.id]}{opening}\"{_mermaid_text(node_text(node))}\"{closing}")
    for edge in workflow.edges:
        text = _edge_text(edge)
        arrow = f"-->|\"{_mermaid_text(text)}\"|" if text else "-->"
        lines.append(f"    {ids[edge.source]} {arrow} {ids[edge.target]}")
    if visited:
        lines.append(f"    classDef visited fill:{VISITED_FILL},stroke:{VISITED_STROKE},"
                     "stroke-width:2px")
        lines.append(f"    class {','.join(visited)} visited")
    for index in sorted(taken_edges(workflow, path)):
        lines.append(f"    linkStyle {index} stroke:{VISITED_STROKE},stroke-width:3px")
    return "\n".join(lines) + "\n"


def node_text(node: Node) -> str:
    return node.label if node.label == node.id else f"{node.label} ({node.id})"


def _edge_text(edge: Edge) -> str:
    condition = edge.attr("condition")
    label = edge.label if edge.attr("label") else ""
    return " / ".join(part for part in (label, condition) if part)


def _mermaid_text(text: str) -> str:
    # Mermaid reads entity codes inside quoted labels; quotes, brackets and pipes would end
    # the label or the edge text early.
    replacements = {"&": "#amp;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "|": "#124;",
                    "\n": " "}
    return "".join(replacements.get(ch, ch) for ch in text)
