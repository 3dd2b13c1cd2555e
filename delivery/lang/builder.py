"""Syntax tree → typed Workflow model.

Applies `node`/`edge` defaults in scope (a default reaches the nodes and edges created
after it, inside its subgraph), expands edge chains, resolves node types (type= wins over
shape, then the start/exit id conventions), and parses every declaration and condition
once. Problems found here are returned as diagnostics, not raised, so that `validate`
can report all of them together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import cast

from delivery.errors import ConditionSyntaxError, DeclarationError
from delivery.lang.attr_values import AttributeReader, value_position
from delivery.lang.attributes import (
    GRAPHVIZ_SHAPES,
    is_known,
    not_honoured,
    routing_typo,
    shape_suggestion,
    unknown_attribute_fix,
)
from delivery.lang.conditions import parse_condition
from delivery.lang.declarations import (
    OutputKind,
    parse_defaults,
    parse_facts,
    parse_folder_list,
    parse_inputs,
    parse_outputs,
    parse_probe_kinds,
)
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import (
    DEFAULT_MAX_PARALLEL,
    EXIT_IDS,
    FIDELITIES,
    JOIN_ALIASES,
    JOIN_POLICIES,
    MANAGER_ACTIONS,
    SHAPES,
    START_IDS,
    TEMPLATE_MODES,
    TYPE_ALIASES,
    Attribute,
    Attributes,
    Edge,
    JoinPolicy,
    ManagerSettings,
    Node,
    NodeType,
    TemplateMode,
    Workflow,
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
)
from delivery.lang.template_reads import is_jinja
from probes.steering import trusted_bots


@dataclass
class _Scope:
    node_defaults: dict[str, Attribute] = field(default_factory=dict)
    edge_defaults: dict[str, Attribute] = field(default_factory=dict)
    subgraph: str | None = None

    def child(self, name: str | None) -> _Scope:
        return _Scope(dict(self.node_defaults), dict(self.edge_defaults), name or self.subgraph)


class _Builder(AttributeReader):
    def __init__(self, dot: DotGraph) -> None:
        super().__init__(dot.file)
        self.dot = dot
        self.graph_attrs: Attributes = {}
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.subgraphs: dict[str, Attributes] = {}

    # -- statements ---------------------------------------------------------------
    def walk(self, body: list[Statement], scope: _Scope, attrs_sink: Attributes) -> None:
        nodes, edges, edge_defaults = self.nodes, self.edges, scope.edge_defaults
        node_defaults = scope.node_defaults  # (`node [...]` updates this very dict)
        declare, add_edges, edge_type, node_type = self.declare_node, self.add_edges, Edge, Node
        for stmt in body:
            if isinstance(stmt, EdgeStmt):
                chain = stmt.chain
                # add_edges, inlined for the common a -> b between declared nodes
                if len(chain) != 2 or chain[0][0] not in nodes or chain[1][0] not in nodes:
                    add_edges(stmt, scope)
                    continue
                if edge_defaults:  # the same dict as the scope's: `edge [...]` updates it
                    attrs = dict(edge_defaults)
                    for assign in stmt.attrs:
                        attrs[assign.name] = assign
                else:
                    attrs = {assign.name: assign for assign in stmt.attrs}
                (source, s_line, s_col), (target, _, _) = chain
                edges.append(edge_type(source, target, s_line, s_col, attrs, len(edges)))
            elif isinstance(stmt, NodeStmt):
                node_id = stmt.node_id
                if node_id in nodes:
                    declare(node_id, stmt.line, stmt.column, stmt.attrs, scope)
                    continue
                # declare_node, inlined for a node's first statement (the common case): the
                # scope's defaults, then the parser's attributes as they are
                table = dict(node_defaults)
                for assign in stmt.attrs:
                    table[assign.name] = assign
                nodes[node_id] = node_type(node_id, stmt.line, stmt.column, table, None,
                                           scope.subgraph)
            elif isinstance(stmt, DefaultsStmt):
                table = (
                    attrs_sink if stmt.target == "graph"
                    else scope.node_defaults if stmt.target == "node"
                    else scope.edge_defaults
                )
                for assign in stmt.attrs:
                    table[assign.name] = self.attribute(assign, inherited=stmt.target != "graph")
            elif isinstance(stmt, GraphAttrStmt):
                attrs_sink[stmt.attr.name] = self.attribute(stmt.attr)
            else:
                self.walk_subgraph(stmt, scope)

    def walk_subgraph(self, stmt: SubgraphStmt, scope: _Scope) -> None:
        own: Attributes = {}
        if stmt.name:
            self.subgraphs[stmt.name] = own
        self.walk(stmt.body, scope.child(stmt.name), own)

    @staticmethod
    def attribute(assign: AttrAssign, inherited: bool = False) -> Attribute:
        # the parser's attribute is the model's: only an inherited default is a new one
        if not inherited:
            return assign
        return Attribute(assign.name, assign.value, assign.line, assign.column, True)

    def declare_node(self, node_id: str, line: int, column: int, attrs: list[AttrAssign],
                     scope: _Scope) -> Node:
        node = self.nodes.get(node_id)
        if node is None:
            node = Node(node_id, line, column, dict(scope.node_defaults), subgraph=scope.subgraph)
            self.nodes[node_id] = node
        elif not node.declared and attrs is not None:
            node.line, node.column = line, column
        node.declared = True
        table = node.attrs
        for assign in attrs:  # the parser's attributes, kept as they are (none inherited)
            table[assign.name] = assign
        return node

    def add_edges(self, stmt: EdgeStmt, scope: _Scope) -> None:
        for node_id, line, column in stmt.chain:
            if node_id not in self.nodes:
                node = Node(node_id, line, column, dict(scope.node_defaults),
                            subgraph=scope.subgraph, declared=False)
                self.nodes[node_id] = node
        attrs = dict(scope.edge_defaults)
        for assign in stmt.attrs:
            attrs[assign.name] = assign
        chain, edges = stmt.chain, self.edges
        if len(chain) == 2:  # the common a -> b: no pairs to zip
            (source, s_line, s_col), (target, _, _) = chain
            edges.append(Edge(source, target, s_line, s_col, attrs, len(edges)))
            return
        for (source, s_line, s_col), (target, _, _) in pairwise(chain):
            edges.append(Edge(source, target, s_line, s_col, attrs, len(edges)))

    # -- meaning ------------------------------------------------------------------
    def resolve_type(self, node: Node, has_mdiamond: bool) -> None:
        type_attr = node.attrs.get("type")
        if type_attr is not None and type_attr.value.text:
            text = type_attr.value.text
            # a table, not NodeType(text): an Enum's call is Python code
            resolved = TYPE_ALIASES.get(text) or _NODE_TYPES.get(text)
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
        own_shape = shape if shape is not None and not shape.inherited else None
        shape_type = SHAPES.get(own_shape.text) if own_shape is not None else None
        if node.id in START_IDS and not has_mdiamond:
            # Attractor finds the start by shape, then by id, whatever the id's shape
            node.type = NodeType.START
        elif node.id in EXIT_IDS and shape_type in (None, NodeType.EXIT):
            node.type = NodeType.EXIT
        elif shape is not None:
            node.type = self.shape_type(node, shape)
        else:
            node.type = NodeType.AGENT

    def manager_values(self, node: Node, workflow: Workflow) -> None:
        """A manager loop's attributes (Attractor §4.11), typed once; each bad value is an
        error at its position."""
        attrs, nid = node.attrs, node.id
        dotfile = attrs.get("stack.child_dotfile") or workflow.attrs.get("stack.child_dotfile")
        if dotfile is None or not dotfile.text.strip():
            self.diag("manager_loop", f"manager loop '{nid}' has no child pipeline to "
                      "supervise", node.line, node.column, node=nid,
                      fix='set graph [stack.child_dotfile="child.dot"] (a path relative to the '
                      "run's workspace)")
        autostart = attrs.get("stack.child_autostart")
        if autostart is not None and self.bool_value(autostart, node=nid) is False:
            self.diag("manager_loop", f"manager loop '{nid}': stack.child_autostart=false "
                      "(observing a child started elsewhere) is not supported",
                      autostart.value.line, autostart.value.column, node=nid,
                      fix="remove stack.child_autostart=false: the manager starts its child")
        poll, cycles, stop = 45.0, 1000, None
        actions: tuple[str, ...] = ("observe", "wait")
        if "manager.poll_interval" in attrs:
            poll = self.duration_value(attrs["manager.poll_interval"], node=nid) or poll
        if "manager.max_cycles" in attrs:
            cycles = self.int_value(attrs["manager.max_cycles"], 1, node=nid) or cycles
        stop_attr = attrs.get("manager.stop_condition")
        if stop_attr is not None and stop_attr.text.strip():
            try:
                stop = parse_condition(stop_attr.text)
            except ConditionSyntaxError as err:
                line, column = value_position(stop_attr.value, err.offset)
                self.diag("condition_syntax", f"manager.stop_condition {stop_attr.text!r}: "
                          f"expected {err.expected}, found {err.found}", line, column,
                          node=nid, fix="write a condition such as "
                          "stack.child.status=completed")
        actions_attr = attrs.get("manager.actions")
        if actions_attr is not None:
            given = tuple(a.strip().lower() for a in actions_attr.text.split(",") if a.strip())
            unknown = [a for a in given if a not in MANAGER_ACTIONS]
            if unknown:
                self.value_error(actions_attr, f"manager.actions: unknown action "
                                 f"'{unknown[0]}'", f"use {', '.join(MANAGER_ACTIONS)}",
                                 node=nid)
            elif "steer" in given:
                self.diag("attribute_not_honoured", f"manager loop '{nid}': the steer action "
                          "is not run (delivery's child stages take no intervention "
                          "instructions); observe and wait are", actions_attr.value.line,
                          actions_attr.value.column, node=nid,
                          fix='write manager.actions="observe,wait"', severity="warning")
            actions = tuple(a for a in given if a in ("observe", "wait"))
        workdir = attrs.get("stack.child_workdir") or workflow.attrs.get("stack.child_workdir")
        node.manager = ManagerSettings(
            child_dotfile=dotfile.text.strip() if dotfile is not None else "",
            child_workdir=workdir.text.strip() if workdir is not None else "",
            poll_interval=poll, max_cycles=cycles, stop_condition=stop, actions=actions)

    def shape_type(self, node: Node, shape: Attribute) -> NodeType:
        resolved = SHAPES.get(shape.text)
        if resolved is not None:
            return resolved
        if shape.text not in GRAPHVIZ_SHAPES:
            guess = shape_suggestion(shape.text)
            hint = f"did you mean shape={guess}? " if guess else ""
            self.diag("unknown_shape", f"shape '{shape.text}' is not a Graphviz shape; the "
                      "node runs as an agent", shape.value.line, shape.value.column,
                      node=node.id, fix=f"{hint}Attractor's shapes are "
                      f"{', '.join(SHAPES)}; delivery's own types are chosen with type=",
                      severity="warning")
        return NodeType.AGENT

    def node_values(self, node: Node, graph_template: TemplateMode) -> None:
        """Parse every typed node attribute once; a bad value is an error at its position."""
        attrs, nid = node.attrs, node.id
        node.template = graph_template
        # (the keys are the names: most nodes have no typed attribute and skip the loop)
        for attr in () if _TYPED_NODE_ATTRS.isdisjoint(attrs) else attrs.values():
            name = attr.name
            if name not in _TYPED_NODE_ATTRS:
                continue  # most attributes (prompt, label, shape ...) have no typed field
            if name == "max_retries":
                node.max_retries = self.int_value(attr, 0, node=nid)
            elif name == "max_parallel":
                node.max_parallel = self.int_value(attr, 1, node=nid) or DEFAULT_MAX_PARALLEL
            elif name in ("goal_gate", "allow_partial", "auto_status", "delegatable"):
                value = self.bool_value(attr, node=nid)
                if value is not None:
                    setattr(node, name, value)
            elif name == "timeout":
                node.timeout = self.duration_value(attr, node=nid)
            elif name == "interval":
                node.interval = self.duration_value(attr, node=nid) or 0.0
            elif name == "max_interval":
                node.max_interval = self.duration_value(attr, node=nid)
            elif name == "backoff":
                node.backoff = self.factor_value(attr, node=nid)
            elif name == "join_policy":
                policy = self.choice_value(attr, JOIN_POLICIES, node=nid)
                if policy is not None:
                    node.join_policy = cast(JoinPolicy, policy)
            elif name == "template":
                mode = self.choice_value(attr, TEMPLATE_MODES, node=nid)
                if mode is not None:
                    node.template = cast(TemplateMode, mode)
            elif name == "fidelity" and attr.text not in FIDELITIES:
                self.value_error(attr, f"unknown fidelity '{attr.text}'",
                                 f"use one of {', '.join(FIDELITIES)}", node=nid)
        join = attrs.get("join")
        if join is not None and "join_policy" not in attrs:
            alias = self.choice_value(join, tuple(JOIN_ALIASES), node=nid)
            if alias is not None:
                node.join_policy = JOIN_ALIASES[alias]

    def edge_values(self, edge: Edge) -> None:
        for attr in edge.attrs.values():
            if attr.name == "weight":
                edge.weight = self.int_value(attr, None, edge=edge.name) or 0
            elif attr.name == "loop_restart":
                edge.loop_restart = bool(self.bool_value(attr, edge=edge.name))
            elif attr.name == "fidelity" and attr.text not in FIDELITIES:
                self.value_error(attr, f"unknown fidelity '{attr.text}'",
                                 f"use one of {', '.join(FIDELITIES)}", edge=edge.name)

    def graph_values(self, workflow: Workflow) -> None:
        attrs = workflow.attrs
        for name in ("default_max_retry", "default_max_retries"):  # ours wins when both
            if name in attrs:
                value = self.int_value(attrs[name], 0)
                if value is not None:
                    workflow.default_max_retries = value
        tokens = attrs.get("budget_tokens")
        if tokens is not None:
            workflow.budget_tokens = self.int_value(tokens, 1)
        usd = attrs.get("budget_usd")
        if usd is not None:
            workflow.budget_usd = self.money_value(usd)
        bots = attrs.get("trusted_bots")
        if bots is not None:
            try:
                trusted_bots(bots.text)
            except ValueError as error:
                self.value_error(bots, f"trusted_bots: {error}", 'name bot accounts by '
                                 'login, separated by commas: trusted_bots="renovate[bot],'
                                 'dependabot[bot]"')
        fidelity = attrs.get("default_fidelity")
        if fidelity is not None and fidelity.text not in FIDELITIES:
            self.value_error(fidelity, f"unknown fidelity '{fidelity.text}'",
                             f"use one of {', '.join(FIDELITIES)}")
        extra = attrs.get("extra_attributes")
        if extra is not None:
            workflow.extra_attributes = frozenset(
                part.strip() for part in extra.text.split(",") if part.strip())
        template = attrs.get("template")
        if template is not None:
            mode = self.choice_value(template, TEMPLATE_MODES)
            workflow.template = cast(TemplateMode, mode or "jinja")
        else:
            literal = _first_non_jinja(workflow)
            workflow.template = "jinja" if literal is None else "plain"
            if literal is not None:
                node_id, attr = literal
                self.diag("template_plain", f"{attr.name} of '{node_id}' is not a Jinja "
                          "template, so this file's prompts are sent as written (only $goal "
                          "is expanded) and its scripts run as written", attr.value.line,
                          attr.value.column, node=node_id, fix="set graph [template=plain] to "
                          "say so, or template=jinja and fix the template",
                          severity="warning")

    def unknown_attributes(self, workflow: Workflow) -> None:
        extra = workflow.extra_attributes
        # (kind, attributes, node id, edge): an edge's name is made only for a diagnostic
        owners: list[tuple[str, Attributes, str | None, Edge | None]] = [
            ("graph", workflow.attrs, None, None)]
        owners += [("graph", attrs, None, None) for attrs in self.subgraphs.values()]
        owners += [("node", n.attrs, n.id, None) for n in workflow.nodes.values()]
        owners += [("edge", e.attrs, None, e) for e in workflow.edges]
        seen: set[tuple[int, int, str]] = set()
        # per kind, the names already found known: most are
        known_of: dict[str, set[str]] = {"graph": set(), "node": set(), "edge": set()}
        for kind, attrs, node, owner_edge in owners:
            known = known_of[kind]
            if known.issuperset(attrs):  # every name already known (the keys are the names)
                continue
            edge = owner_edge.name if owner_edge is not None else None
            for attr in attrs.values():
                name = attr.name
                if name in known:
                    continue
                if attr.inherited:  # reported once, where the default block says it
                    key = (attr.line, attr.column, name)
                    if key in seen:
                        continue
                    seen.add(key)
                reason = not_honoured(name)
                if reason is not None and name not in extra:
                    self.diag("attribute_not_honoured", f"{kind} attribute '{name}' is "
                              f"Attractor's, but delivery does not act on it: {reason}",
                              attr.line, attr.column, node=node, edge=edge,
                              fix=f"remove {name}=, or list it in extra_attributes= to keep "
                              "it quiet", severity="warning")
                    continue
                if is_known(name, kind, extra):
                    known.add(name)
                    continue
                meant = routing_typo(name)
                if meant is not None:  # a run would drop a route or ask differently
                    self.diag("attribute_typo", f"unknown {kind} attribute '{name}': did you "
                              f"mean {meant}=? (without it a run routes or asks otherwise)",
                              attr.line, attr.column, node=node, edge=edge,
                              fix=f"did you mean {meant}=? Or, if another tool reads "
                              f"'{name}', list it in the graph's extra_attributes=")
                    continue
                self.diag("unknown_attribute", f"unknown {kind} attribute '{name}': it has no "
                          "effect", attr.line, attr.column, node=node, edge=edge,
                          fix=unknown_attribute_fix(name, kind), severity="warning")

    def build(self) -> tuple[Workflow, list[Diagnostic]]:
        self.walk(self.dot.body, _Scope(), self.graph_attrs)
        workflow = Workflow(self.dot.name, self.file, self.dot.line, self.dot.column,
                            self.graph_attrs, self.nodes, self.edges, subgraphs=self.subgraphs)
        self.graph_declarations(workflow)
        has_mdiamond = any(_is_mdiamond(node) for node in self.nodes.values())
        for node in self.nodes.values():
            self.resolve_type(node, has_mdiamond)
            self.node_declarations(node)
        self.graph_values(workflow)
        for node in self.nodes.values():
            self.node_values(node, workflow.template)
            if node.type is NodeType.MANAGER_LOOP:
                self.manager_values(node, workflow)
        for edge in self.edges:
            attrs = edge.attrs
            # edge_condition, inlined for a condition that parses (most edges have one)
            attr = attrs.get("condition")
            if attr is not None:
                text = attr.value.text
                if text.strip():
                    try:
                        edge.condition = parse_condition(text)
                    except ConditionSyntaxError:
                        self.edge_condition(edge)  # says what is wrong, where
            # edge_values, only for an edge with an attribute it types
            if "weight" in attrs or "loop_restart" in attrs or "fidelity" in attrs:
                self.edge_values(edge)
        self.unknown_attributes(workflow)
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
        if "outputs" in attrs and _names_files(attrs["outputs"].text):
            attr = attrs["outputs"]
            self.diag("outputs_files", f"outputs={attr.text!r} names files (a convention of "
                      "other Attractor engines), not delivery outputs (name:kind); they are not "
                      "checked and the node's reply may set any key", attr.value.line,
                      attr.value.column, node=node.id, fix="to declare what the agent returns, "
                      "write outputs=\"summary:text\"", severity="warning")
        elif "outputs" in attrs:
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
        if "threads" in attrs:
            node.threads_key = attrs["threads"].text.strip()
        if "foreach" in attrs or "only" in attrs:
            self.foreach_values(node)

    def foreach_values(self, node: Node) -> None:
        """`foreach="folders"` and its `only=` condition (SPEC §8.1)."""
        attrs = node.attrs
        foreach = attrs.get("foreach")
        if foreach is not None:
            if foreach.text.strip() == "folders":
                node.foreach = True
            else:
                self.value_error(foreach, f"foreach '{foreach.text}' is not known",
                                 'write foreach="folders" (one run of the stage per folder)',
                                 node=node.id)
        only = attrs.get("only")
        if only is None or not only.text.strip():
            return
        try:
            node.only = parse_condition(only.text)
        except ConditionSyntaxError as err:
            line, column = value_position(only.value, err.offset)
            self.diag("condition_syntax", f"only {only.text!r}: expected {err.expected}, "
                      f"found {err.found}", line, column, node=node.id,
                      fix='only= is a condition read per folder, such as '
                          'only="folder.pr.state=CI_FAILED"')

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


# the attributes node_values types (every name its loop tests)
_TYPED_NODE_ATTRS = frozenset({
    "max_retries", "max_parallel", "goal_gate", "allow_partial", "auto_status", "delegatable",
    "timeout", "interval", "max_interval", "backoff", "join_policy", "template", "fidelity"})
_NODE_TYPES = {kind.value: kind for kind in NodeType}
# Attractor's own type names; any other `type=` is delivery's spelling.
_ATTRACTOR_TYPES = frozenset({"start", "exit", "codergen", "tool", "wait.human", "conditional",
                              "parallel", "parallel.fan_in", "stack.manager_loop"})
_DELIVERY_GRAPH_ATTRS = ("inputs", "defaults", "folders")
_DELIVERY_NODE_ATTRS = ("outputs", "facts", "probe", "folder", "script", "order",
                        "delegatable", "interval", "threads", "rollback")


_FILE_ITEM = re.compile(r"[\w.~-]*[./][\w./~-]*\Z")


def _names_files(text: str) -> bool:
    """`outputs="review-report.md"`: file names (Kilroy's convention), not name:kind."""
    if ":" in text:  # name:kind (before the split: most declarations have it)
        return False
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        return False
    # `summary.text` is a typo of summary:text, not a file: the declaration reports it
    kinds = tuple(f".{kind.value}" for kind in OutputKind)
    return all(_FILE_ITEM.match(item) and not item.endswith(kinds) for item in items)


def _is_mdiamond(node: Node) -> bool:
    shape = node.attrs.get("shape")
    kind = node.attrs.get("type")
    return (shape is not None and shape.text == "Mdiamond") or (
        kind is not None and kind.text == "start")


def _has_delivery_declarations(workflow: Workflow) -> bool:
    """Whether the file uses anything of delivery's own (SPEC §4): then its prompts are
    Jinja templates; a plain Attractor file keeps its prompts as written (only `$goal`)."""
    if any(name in workflow.attrs for name in _DELIVERY_GRAPH_ATTRS):
        return True
    for node in workflow.nodes.values():
        if any(name in node.attrs for name in _DELIVERY_NODE_ATTRS if name != "outputs"):
            return True
        if "outputs" in node.attrs and not _names_files(node.attrs["outputs"].text):
            return True
        kind = node.attrs.get("type")
        if kind is not None and kind.text and kind.text not in _ATTRACTOR_TYPES:
            return True
    return False


def _first_non_jinja(workflow: Workflow) -> tuple[str, Attribute] | None:
    """In an Attractor file (nothing of delivery's own), the first prompt or script that is
    not valid Jinja — Helm's `{{ .Values.x }}`, bash's `${#a[@]}`: such a file keeps its
    prompts and scripts as written (SPEC §4). None: the file's templates are Jinja."""
    if _has_delivery_declarations(workflow):
        return None
    for node in workflow.nodes.values():
        for attr in (node.prompt_attr, node.attrs.get("tool_command")):
            if attr is not None and _TEMPLATE_MARK.search(attr.text) and \
                    not is_jinja(attr.text):
                return node.id, attr
    return None


_TEMPLATE_MARK = re.compile(r"\{[{%#]")


def build_workflow(dot: DotGraph) -> tuple[Workflow, list[Diagnostic]]:
    """The model of a parsed graph, with the problems found while building it."""
    return _Builder(dot).build()
