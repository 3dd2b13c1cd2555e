"""Syntax tree → typed Workflow model.

Applies `node`/`edge` defaults in scope (a default reaches the nodes and edges created
after it, inside its subgraph), expands edge chains, resolves node types (type= wins over
shape, then the start/exit id conventions), and parses every declaration and condition
once. Problems found here are returned as diagnostics, not raised, so that `validate`
can report all of them together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from delivery.errors import ConditionSyntaxError, DeclarationError
from delivery.lang.conditions import parse_condition
from delivery.lang.declarations import (
    parse_defaults,
    parse_facts,
    parse_folder_list,
    parse_inputs,
    parse_outputs,
    parse_probe_kinds,
)
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import (
    EXIT_IDS,
    FIDELITIES,
    SHAPES,
    START_IDS,
    TYPE_ALIASES,
    Attribute,
    Attributes,
    Edge,
    Node,
    NodeType,
    Workflow,
    parse_duration,
)
from delivery.lang.syntax import (
    AttrAssign,
    DefaultsStmt,
    DotGraph,
    EdgeStmt,
    GraphAttrStmt,
    NodeStmt,
    Statement,
    SubgraphStmt,
    Value,
)

INT_ATTRS = frozenset({"max_retries", "default_max_retries", "weight", "max_parallel"})
BOOL_ATTRS = frozenset({"goal_gate", "loop_restart", "delegatable"})
DURATION_ATTRS = frozenset({"timeout", "interval", "max_interval"})


def value_position(value: Value, offset: int) -> tuple[int, int]:
    """Line and column of character `offset` of a value's unescaped text."""
    if not value.quoted:
        return value.line, value.column + offset
    line, column = value.line, value.column + 1
    raw = value.raw[1:-1]
    i = 0
    produced = 0
    while i < len(raw) and produced < offset:
        step = 2 if raw[i] == "\\" and i + 1 < len(raw) else 1
        if raw[i] == "\n" or (step == 2 and raw[i + 1] == "\n"):
            line += 1
            column = 1
        else:
            column += step
        produced += 0 if (step == 2 and raw[i + 1] == "\n") else 1
        i += step
    return line, column


@dataclass
class _Scope:
    node_defaults: dict[str, Attribute] = field(default_factory=dict)
    edge_defaults: dict[str, Attribute] = field(default_factory=dict)
    subgraph: str | None = None

    def child(self, name: str | None) -> _Scope:
        return _Scope(dict(self.node_defaults), dict(self.edge_defaults), name or self.subgraph)


class _Builder:
    def __init__(self, dot: DotGraph) -> None:
        self.dot = dot
        self.file = dot.file
        self.graph_attrs: Attributes = {}
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.subgraphs: dict[str, Attributes] = {}
        self.diagnostics: list[Diagnostic] = []

    def diag(self, rule: str, message: str, line: int, column: int, *, node: str | None = None,
             edge: str | None = None, fix: str = "", severity: str = "error") -> None:
        self.diagnostics.append(
            Diagnostic(rule, "error" if severity == "error" else "warning", message, self.file,
                       line, column, node, edge, fix)
        )

    # -- statements ---------------------------------------------------------------
    def walk(self, body: list[Statement], scope: _Scope, attrs_sink: Attributes) -> None:
        for stmt in body:
            if isinstance(stmt, NodeStmt):
                self.declare_node(stmt.node_id, stmt.line, stmt.column, stmt.attrs, scope)
            elif isinstance(stmt, EdgeStmt):
                self.add_edges(stmt, scope)
            elif isinstance(stmt, DefaultsStmt):
                table = (
                    attrs_sink if stmt.target == "graph"
                    else scope.node_defaults if stmt.target == "node"
                    else scope.edge_defaults
                )
                for assign in stmt.attrs:
                    table[assign.key] = self.attribute(assign, inherited=stmt.target != "graph")
            elif isinstance(stmt, GraphAttrStmt):
                attrs_sink[stmt.attr.key] = self.attribute(stmt.attr)
            else:
                self.walk_subgraph(stmt, scope)

    def walk_subgraph(self, stmt: SubgraphStmt, scope: _Scope) -> None:
        own: Attributes = {}
        if stmt.name:
            self.subgraphs[stmt.name] = own
        self.walk(stmt.body, scope.child(stmt.name), own)

    @staticmethod
    def attribute(assign: AttrAssign, inherited: bool = False) -> Attribute:
        return Attribute(assign.key, assign.value, assign.line, assign.column, inherited)

    def declare_node(self, node_id: str, line: int, column: int, attrs: list[AttrAssign],
                     scope: _Scope) -> Node:
        node = self.nodes.get(node_id)
        if node is None:
            node = Node(node_id, line, column, dict(scope.node_defaults), subgraph=scope.subgraph)
            self.nodes[node_id] = node
        elif not node.declared and attrs is not None:
            node.line, node.column = line, column
        node.declared = True
        for assign in attrs:
            node.attrs[assign.key] = self.attribute(assign)
        return node

    def add_edges(self, stmt: EdgeStmt, scope: _Scope) -> None:
        for node_id, line, column in stmt.chain:
            if node_id not in self.nodes:
                node = Node(node_id, line, column, dict(scope.node_defaults),
                            subgraph=scope.subgraph, declared=False)
                self.nodes[node_id] = node
        attrs = dict(scope.edge_defaults)
        for assign in stmt.attrs:
            attrs[assign.key] = self.attribute(assign)
        pairs = zip(stmt.chain, stmt.chain[1:], strict=False)
        for (source, s_line, s_col), (target, _, _) in pairs:
            self.edges.append(Edge(source, target, s_line, s_col, attrs, len(self.edges)))

    # -- meaning ------------------------------------------------------------------
    def resolve_type(self, node: Node) -> None:
        type_attr = node.attrs.get("type")
        if type_attr is not None and type_attr.text:
            text = type_attr.text
            resolved = TYPE_ALIASES.get(text)
            if resolved is None:
                try:
                    resolved = NodeType(text)
                except ValueError:
                    known = ", ".join(t.value for t in NodeType)
                    self.diag("type_known", f"unknown node type '{text}'", type_attr.value.line,
                              type_attr.value.column, node=node.id,
                              fix=f"use one of {known} (or Attractor's codergen, tool, wait.human)")
                    return
            node.type = resolved
            return
        shape = node.attrs.get("shape")
        if shape is not None and not shape.inherited:
            node.type = self.shape_type(node, shape)
        elif node.id in START_IDS:
            node.type = NodeType.START
        elif node.id in EXIT_IDS:
            node.type = NodeType.EXIT
        elif shape is not None:
            node.type = self.shape_type(node, shape)
        else:
            node.type = NodeType.AGENT

    def shape_type(self, node: Node, shape: Attribute) -> NodeType:
        resolved = SHAPES.get(shape.text)
        if resolved is None:
            self.diag("unknown_shape", f"shape '{shape.text}' maps to no node type; it runs as an "
                      "agent", shape.value.line, shape.value.column, node=node.id,
                      fix="use a shape from the SPEC's table or set type=", severity="warning")
            return NodeType.AGENT
        return resolved

    def declaration_error(self, err: DeclarationError, attr: Attribute, node: str | None) -> None:
        line, column = value_position(attr.value, err.offset)
        self.diag(f"{err.attribute}_syntax" if err.attribute in ("defaults", "probe") else
                  f"{err.attribute}_declaration", err.problem, line, column, node=node, fix=err.fix)

    def check_value(self, attr: Attribute, *, node: str | None = None,
                    edge: str | None = None) -> None:
        name, text = attr.name, attr.text
        problem = fix = ""
        if name in INT_ATTRS:
            try:
                number = int(text)
                if number < 0 and name != "weight":
                    problem, fix = f"{name} must not be negative", f"write {name}=0 or more"
            except ValueError:
                problem, fix = f"{name}={text!r} is not an integer", f"write {name}=3"
        elif name in BOOL_ATTRS and text not in ("true", "false"):
            problem, fix = f"{name}={text!r} is not true or false", f"write {name}=true"
        elif name in DURATION_ATTRS and parse_duration(text) is None:
            problem, fix = (f"{name}={text!r} is not a duration",
                            "write 250ms, 30s, 15m, 2h or 1d")
        elif name in ("fidelity", "default_fidelity") and text not in FIDELITIES:
            problem, fix = f"unknown fidelity '{text}'", f"use one of {', '.join(FIDELITIES)}"
        elif name == "join" and text not in ("all", "any"):
            problem, fix = f"join={text!r} is not all or any", "write join=all or join=any"
        if problem:
            rule = "fidelity_valid" if "fidelity" in name else "attribute_value"
            self.diag(rule, problem, attr.value.line, attr.value.column, node=node, edge=edge,
                      fix=fix)

    def build(self) -> tuple[Workflow, list[Diagnostic]]:
        self.walk(self.dot.body, _Scope(), self.graph_attrs)
        workflow = Workflow(self.dot.name, self.file, self.dot.line, self.dot.column,
                            self.graph_attrs, self.nodes, self.edges, subgraphs=self.subgraphs)
        self.graph_declarations(workflow)
        for node in self.nodes.values():
            self.resolve_type(node)
            self.node_declarations(node)
            for attr in node.attrs.values():
                self.check_value(attr, node=node.id)
        for edge in self.edges:
            self.edge_condition(edge)
            for attr in edge.attrs.values():
                self.check_value(attr, edge=edge.name)
        for attr in self.graph_attrs.values():
            self.check_value(attr)
        return workflow, self.diagnostics

    def graph_declarations(self, workflow: Workflow) -> None:
        attrs = self.graph_attrs
        if "folders" in attrs:
            try:
                workflow.folders = parse_folder_list(attrs["folders"].text)
            except DeclarationError as err:
                self.declaration_error(err, attrs["folders"], None)
        if "inputs" in attrs:
            try:
                workflow.inputs = tuple(parse_inputs(attrs["inputs"].text))
            except DeclarationError as err:
                self.declaration_error(err, attrs["inputs"], None)
        if "defaults" in attrs:
            try:
                workflow.defaults = tuple(parse_defaults(attrs["defaults"].text))
            except DeclarationError as err:
                self.declaration_error(err, attrs["defaults"], None)

    def node_declarations(self, node: Node) -> None:
        attrs = node.attrs
        if "outputs" in attrs:
            try:
                node.outputs = tuple(parse_outputs(attrs["outputs"].text))
            except DeclarationError as err:
                self.declaration_error(err, attrs["outputs"], node.id)
        if "facts" in attrs:
            try:
                node.facts = tuple(parse_facts(attrs["facts"].text))
            except DeclarationError as err:
                self.declaration_error(err, attrs["facts"], node.id)
        if node.type is NodeType.PROBE:
            if "probe" in attrs:
                try:
                    node.probe_kinds = parse_probe_kinds(attrs["probe"].text)
                except DeclarationError as err:
                    self.declaration_error(err, attrs["probe"], node.id)
            else:
                node.probe_kinds = ("pr", "threads", "diff", "worktree")

    def edge_condition(self, edge: Edge) -> None:
        attr = edge.attrs.get("condition")
        if attr is None or not attr.text.strip():
            return
        try:
            edge.condition = parse_condition(attr.text)
        except ConditionSyntaxError as err:
            line, column = value_position(attr.value, err.offset)
            shown = attr.text if len(attr.text) <= 80 else attr.text[:77] + "..."
            self.diag("condition_syntax", f"condition {shown!r}: expected {err.expected}, "
                      f"found {err.found}", line, column, edge=edge.name,
                      fix="conditions look like outcome=succeeded && pr.state!=MERGED")


def build_workflow(dot: DotGraph) -> tuple[Workflow, list[Diagnostic]]:
    """The model of a parsed graph, with the problems found while building it."""
    return _Builder(dot).build()
