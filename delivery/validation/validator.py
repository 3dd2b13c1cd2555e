"""`validate(workflow)`: every check of SPEC §10, each diagnostic with a stable rule id.

Rule ids (see docs/rules.md for the catalogue): Attractor's `start_node`,
`terminal_node`, `reachability`, `edge_target_exists`, `start_no_incoming`,
`exit_no_outgoing`, `condition_syntax`, `type_known`, `fidelity_valid`,
`retry_target_exists`, `goal_gate_has_retry`, `prompt_on_llm_nodes`; and ours for
declarations, choices, literals, templates, parallel sections and availability.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from delivery.lang.attr_values import value_position
from delivery.lang.conditions import OUTCOME_ALIASES, Compare, Truthy
from delivery.lang.declarations import OutputKind, reserved_reason
from delivery.lang.diagnostics import Diagnostic, Severity
from delivery.lang.model import LLM_TYPES, Attribute, Edge, Node, NodeType, Workflow
from delivery.lang.outcomes import StageOutcome
from delivery.lang.template_reads import (
    DOLLAR_GOAL,
    TemplateProblem,
    TemplateRead,
    template_reads,
)
from delivery.lang.topology import ParallelSection, parallel_sections, reachable, retry_table
from delivery.validation import security
from delivery.validation.availability import Availability, Read, failure_can_take
from delivery.validation.foreach_rules import (
    check_foreach_nodes,
    only_reads,
    per_folder_problem,
    per_folder_writers,
    sort_folder_reads,
)
from delivery.validation.writes import (
    ALWAYS_AVAILABLE,
    ALWAYS_AVAILABLE_PREFIXES,
    stage_writes,
)
from probes.pr_state import PR_STATES

OUTCOMES = (*StageOutcome, *OUTCOME_ALIASES)
BOOLEANS = ("true", "false")
_CONNECTIVES = frozenset({"and", "or", "not", "AND", "OR", "NOT"})
# whether a text holds one of them at all (a word of it can be one only then)
_HAS_CONNECTIVE = re.compile("|".join(sorted(_CONNECTIVES))).search
# a context key as `threads=` names it: dotted words (`threads`, `review.answers`)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


class _Checker:
    def __init__(self, workflow: Workflow) -> None:
        self.w = workflow
        self.out: list[Diagnostic] = []
        self.sections = parallel_sections(workflow)  # shared by the structure and availability
        self.retries = retry_table(workflow)  # shared by reachability and availability
        # a read of `<f>.X` made from `folder.X` in a foreach stage → `folder.X`
        self.folder_origins: dict[Read, str] = {}
        self.reported_origins: set[tuple[str, int, int]] = set()
        self._per_folder: dict[str, list[str]] | None = None
        # every condition's atoms, walked out of its tree once: several rules read them
        self.edge_atoms: list[tuple[Edge, list[Compare | Truthy]]] = []
        append = self.edge_atoms.append
        for edge in workflow.edges:
            condition = edge.condition
            if condition is None:
                continue
            root = condition.root
            # a single clause is its own only atom: no walk of the tree (most conditions)
            if isinstance(root, (Compare, Truthy)):
                append((edge, [root]))
            else:
                append((edge, list(condition.atoms())))

    def add(self, rule: str, message: str, line: int, column: int, *, fix: str = "",
            node: str | None = None, edge: str | None = None,
            severity: Severity = "error") -> None:
        self.out.append(Diagnostic(rule, severity, message, self.w.file, line, column, node, edge,
                                   fix))

    def at_node(self, rule: str, node: Node, message: str, fix: str,
                severity: Severity = "error") -> None:
        self.add(rule, message, node.line, node.column, fix=fix, node=node.id, severity=severity)

    def at_attr(self, rule: str, attr: Attribute, message: str, fix: str, *,
                node: str | None = None, edge: str | None = None, offset: int = 0,
                severity: Severity = "error") -> None:
        line, column = value_position(attr.value, offset)
        self.add(rule, message, line, column, fix=fix, node=node, edge=edge, severity=severity)

    # -- structure --------------------------------------------------------------------
    def structure(self) -> str | None:
        w = self.w
        starts = w.start_nodes
        if not starts:
            self.add("start_node", "the workflow has no start node", w.line, w.column,
                     fix="add start [shape=Mdiamond] and an edge from it")
        for extra in starts[1:]:
            self.at_node("start_node", extra, f"a second start node '{extra.id}' (first: "
                         f"'{starts[0].id}')", "keep exactly one start node")
        if not w.nodes_of(NodeType.EXIT):
            self.add("terminal_node", "the workflow has no exit node", w.line, w.column,
                     fix="add exit [shape=Msquare] and an edge to it")
        for node in starts:
            # its edges in file order, as w.incoming lists them (a table of every node's
            # edges, built for this one lookup, cost more than the scan)
            for edge in [e for e in w.edges if e.target == node.id]:
                self.add("start_no_incoming", f"edge into the start node '{node.id}'", edge.line,
                         edge.column, edge=edge.name, fix="the start node has no incoming edges; "
                         "route back to the first real stage instead")
        for node in w.nodes_of(NodeType.EXIT):
            for edge in w.outgoing[node.id]:
                self.add("exit_no_outgoing", f"edge out of the exit node '{node.id}'", edge.line,
                         edge.column, edge=edge.name, fix="an exit ends the run; remove the edge")
        for node in w.nodes.values():
            if not node.declared:
                kind = node.type.value if node.type else "unknown"
                self.at_node("edge_target_exists", node, f"node '{node.id}' is only named by an "
                             f"edge; it is created with the default attributes (as {kind})",
                             f"declare it: {node.id} [label=\"...\", prompt=\"...\"]",
                             severity="warning")
        self.retry_targets()
        start = starts[0].id if len(starts) == 1 else None
        if start is not None:
            seen = reachable(w, start, self.retries)
            # the nodes' keys are their ids: one test in C when every node is reached
            for node in () if seen.issuperset(w.nodes) else w.nodes.values():
                if node.id not in seen:
                    self.at_node("reachability", node, f"node '{node.id}' cannot be reached from "
                                 f"the start node '{start}'", "add an edge to it or remove it")
        return start

    def retry_targets(self) -> None:
        w = self.w
        owners: list[tuple[Node | None, dict[str, Attribute]]] = [(None, w.attrs)]
        # only the nodes that name a target (most name none)
        owners += [(n, n.attrs) for n in w.nodes.values()
                   if "retry_target" in n.attrs or "fallback_retry_target" in n.attrs]
        for owner, attrs in owners:
            for name in ("retry_target", "fallback_retry_target"):
                attr = attrs.get(name)
                if attr is not None and attr.text and attr.text not in w.nodes:
                    self.at_attr("retry_target_exists", attr, f"{name} '{attr.text}' names no "
                                 "node", f"set {name} to one of the workflow's node ids",
                                 node=owner.id if owner else None)
        has_graph_retry = bool(w.attr("retry_target") or w.attr("fallback_retry_target"))
        for node in w.nodes.values():
            if node.goal_gate and not (has_graph_retry or node.attr("retry_target")
                                       or node.attr("fallback_retry_target")):
                self.at_node("goal_gate_has_retry", node, f"goal gate '{node.id}' has no retry "
                             "target: an unmet gate fails the run at the exit",
                             "set retry_target on the node or the graph", severity="warning")

    # -- per node ---------------------------------------------------------------------
    def nodes(self) -> None:
        w = self.w
        for node in w.nodes.values():
            kind = node.type
            if kind in LLM_TYPES and not node.prompt:
                self.at_node("prompt_on_llm_nodes", node, f"{kind.value} node '{node.id}' has no "
                             "prompt; its label is sent instead", "add prompt=\"...\"",
                             severity="warning")
            if kind is NodeType.SCRIPT and not node.script.strip():
                self.at_node("script_required", node, f"script node '{node.id}' has no script",
                             "add script=\"...\" (or Attractor's tool_command=)")
            attrs = node.attrs
            # node.script_attr, looked for only where it is a problem (not on script nodes)
            script_attr = node.script_attr if kind is not NodeType.SCRIPT and (
                "script" in attrs or "tool_command" in attrs) else None
            if script_attr is not None:
                runs_as = kind.value if kind else "unknown"
                self.at_attr("script_on_non_script_node", script_attr, f"'{node.id}' has "
                             f"{script_attr.name}= but runs as {runs_as}, not as a script, so "
                             "the script never runs",
                             "add type=script (or shape=parallelogram)", node=node.id,
                             severity="warning")
            if kind is NodeType.RESPOND or "threads" in attrs:  # nothing to check otherwise
                self.respond_threads(node)
            if kind is NodeType.HUMAN and not w.outgoing[node.id]:
                self.at_node("human_choices", node, f"human gate '{node.id}' offers no choice",
                             "add outgoing edges; their labels are the choices")
            if kind is NodeType.CONDITIONAL and not w.outgoing[node.id]:
                self.at_node("conditional_edges", node, f"conditional '{node.id}' has no "
                             "outgoing edge", "add edges with conditions")
            if node.outputs and kind not in LLM_TYPES:
                self.at_attr("outputs_on_llm_nodes", node.attrs["outputs"], "outputs= is only "
                             f"for agent and prompt nodes, not {kind.value if kind else 'this'}",
                             "use facts= on a script node", node=node.id)
            if node.facts and kind is not NodeType.SCRIPT:
                self.at_attr("facts_on_script_nodes", node.attrs["facts"], "facts= is only for "
                             "script nodes", "use outputs= on an agent node", node=node.id)
            folder_attr = node.attrs.get("folder")
            if folder_attr is not None and w.folders and folder_attr.text not in w.folders:
                self.at_attr("folder_known", folder_attr, f"folder '{folder_attr.text}' is not "
                             "in the graph's folders", f"use one of {', '.join(w.folders)}",
                             node=node.id)
            if node.outputs or node.facts:
                self.declared_names(node)

    def respond_threads(self, node: Node) -> None:
        """A respond node names its answers (a json value); `threads=` elsewhere does
        nothing."""
        attr = node.attrs.get("threads")
        if node.type is NodeType.RESPOND and (attr is None or not node.threads_key):
            self.at_node("respond_threads", node, f"respond node '{node.id}' does not say "
                         "which context value holds its answers",
                         "add threads=\"threads\" naming a json output of the repair, e.g. "
                         "outputs=\"summary:text,threads:json\"")
            return
        if attr is None:
            return
        if node.type is not NodeType.RESPOND:
            self.at_attr("threads_on_non_respond_node", attr, f"'{node.id}' has threads= "
                         f"but runs as {node.type.value if node.type else 'unknown'}, so no "
                         "thread is answered", "add type=respond", node=node.id,
                         severity="warning")
            return
        if not _KEY.match(node.threads_key):
            self.at_attr("respond_threads", attr, f"threads={node.threads_key!r} is not a "
                         "context key", "name one key, e.g. threads=\"threads\"",
                         node=node.id)
            return
        for other in self.w.nodes.values():
            for out in other.outputs:
                if out.name == node.threads_key and out.kind is not OutputKind.JSON:
                    self.at_attr("respond_threads", attr, f"threads={out.name} is declared "
                                 f"{out.kind.value} by '{other.id}', not json (a map of "
                                 "thread ids to {reply, resolve})",
                                 f"declare it as {out.name}:json on '{other.id}'",
                                 node=node.id)

    def declared_names(self, node: Node) -> None:
        w = self.w
        node_ids = w.nodes
        for out in node.outputs:
            reason = reserved_reason(out.name, w.folders)
            if reason:
                self.at_attr("reserved_namespace", node.attrs["outputs"], f"output "
                             f"'{out.name}': {reason}", "rename the output", node=node.id,
                             offset=out.offset)
        for fact in node.facts:
            reason = reserved_reason(fact.name, w.folders)
            head, _, tail = fact.name.rpartition(".")
            if reason is None and tail == "failed" and head in node_ids:
                reason = f"'{fact.name}' is the engine's failure flag of node '{head}'"
            if reason:
                self.at_attr("reserved_namespace", node.attrs["facts"], f"fact '{fact.name}': "
                             f"{reason}", "rename the fact", node=node.id, offset=fact.offset)

    def graph_declarations(self) -> None:
        w = self.w
        inputs_attr = w.attrs.get("inputs")
        for decl in w.inputs:
            reason = reserved_reason(decl.name, w.folders)
            if reason and inputs_attr is not None:
                self.at_attr("reserved_namespace", inputs_attr, f"input '{decl.name}': {reason}",
                             "rename the input", offset=decl.offset)
        defaults_attr = w.attrs.get("defaults")
        declared = {d.name for d in w.inputs}
        for default in w.defaults:
            if default.name != "goal" and default.name not in declared and defaults_attr:
                self.at_attr("defaults_name", defaults_attr, f"default for '{default.name}', "
                             "which is neither goal nor a declared input",
                             f"declare it in inputs= or remove it; inputs: "
                             f"{', '.join(sorted(declared)) or '(none)'}", offset=default.offset)

    # -- conditions, choices and literals -----------------------------------------------
    def compares(self) -> Iterator[tuple[Edge, Compare]]:
        for edge, atoms in self.edge_atoms:
            for atom in atoms:
                if isinstance(atom, Compare):
                    yield edge, atom

    def spaced_literals(self) -> None:
        """A bare literal runs over spaces (as Attractor reads a clause), so `x=a and y=b`
        written with words instead of `&&` would compare x with 'a and y'... : say so."""
        for edge, atoms in self.edge_atoms:
            for atom in atoms:
                # a connective word is in the literal's text: most literals are not split
                if not isinstance(atom, Compare) or atom.literal_kind != "word" or \
                        not _HAS_CONNECTIVE(atom.literal):
                    continue
                words = atom.literal.split()
                if len(words) > 1 and _CONNECTIVES.intersection(words):
                    self.at_attr("condition_words", edge.attrs["condition"], f"{atom.key} "
                                 f"is compared with the whole text {atom.literal!r}: 'and'/"
                                 "'or' words do not join clauses", "join clauses with && and "
                                 "||; quote a literal that holds such words", edge=edge.name,
                                 offset=atom.literal_offset, severity="warning")

    def choices(self) -> None:
        w = self.w
        domains: dict[str, set[str]] = {}
        open_keys: set[str] = {d.name for d in w.inputs}
        atoms_of = {id(edge): atoms for edge, atoms in self.edge_atoms}
        for node in w.nodes.values():
            for out in node.outputs:
                if out.kind is not OutputKind.CHOICE:
                    open_keys.add(out.name)
                    continue
                literals = {
                    atom.literal
                    for edge in w.outgoing[node.id]
                    for atom in atoms_of.get(id(edge), ())
                    if isinstance(atom, Compare) and atom.key == out.name and atom.op in ("=", "!=")
                }
                if not literals:
                    self.at_attr("choice_no_literal", node.attrs["outputs"], f"choice output "
                                 f"'{out.name}' has no literal on the outgoing edges of "
                                 f"'{node.id}'", f"add edges like {node.id} -> next "
                                 f"[condition=\"{out.name}=pass\"]", node=node.id,
                                 offset=out.offset)
                domains.setdefault(out.name, set()).update(literals)
            open_keys.update(f.name for f in node.facts)
        for key in open_keys:
            domains.pop(key, None)
        # what a key may be compared with, worked out once per key (a choice is compared on
        # several edges)
        domain_of: dict[str, tuple[bool, tuple[str, ...] | None, str]] = {}
        for edge, atom in self.compares():
            op = atom.op
            if op != "=" and op != "!=":
                continue
            key = atom.key
            known = domain_of.get(key)
            if known is None:
                known = domain_of[key] = _literal_domain(key, domains)
            is_outcome, allowed, what = known
            if is_outcome:
                if atom.literal not in OUTCOMES:
                    # an agent may report a custom outcome (SPEC §2): warn, do not refuse
                    self.at_attr("custom_outcome", edge.attrs["condition"], f"'{atom.literal}' "
                                 "is not a standard outcome; only an agent reporting it as a "
                                 "custom outcome makes this comparison hold",
                                 f"compare {key} with one of {', '.join(OUTCOMES)}, or keep "
                                 "it if an agent reports this outcome", edge=edge.name,
                                 offset=atom.literal_offset, severity="warning")
                continue
            if allowed is not None and atom.literal not in allowed:
                self.at_attr("impossible_literal", edge.attrs["condition"], f"{what} is never "
                             f"'{atom.literal}' (it is one of {', '.join(allowed)})",
                             f"compare {key} with one of {', '.join(allowed)}", edge=edge.name,
                             offset=atom.literal_offset)

    # -- templates and availability ------------------------------------------------------
    def reads(self) -> list[Read]:
        reads: list[Read] = []
        append = reads.append
        # tuple.__new__ builds a Read in C (a NamedTuple's own __new__ is Python code), and
        # is_always_available is inlined: this runs once per template name and clause
        new, read_type = tuple.__new__, Read
        always, always_prefixes = ALWAYS_AVAILABLE, ALWAYS_AVAILABLE_PREFIXES
        for node in self.w.nodes.values():
            attrs = node.attrs
            prompt = node.prompt_attr if node.type in LLM_TYPES else None
            for name, attr in (("prompt", prompt), ("script", attrs.get("script")),
                               ("tool_command", attrs.get("tool_command"))):
                if attr is None:
                    continue
                try:
                    # node_template_reads, whose common case is template_reads
                    found = template_reads(attr.value.text) if node.template != "plain" else \
                        node_template_reads(node, name, attr.value.text)
                except TemplateProblem as problem:
                    line = attr.value.line + problem.lineno - 1
                    self.add("template_syntax", f"{name} template: {problem.message}", line,
                             attr.value.column if problem.lineno == 1 else 1, node=node.id,
                             fix="fix the Jinja2 syntax ({{ name }}, {% if %} ... {% endif %})")
                    continue
                first_line, first_column = attr.value.line, attr.value.column
                for read in found:
                    key = read.key
                    if key in always or key.startswith(always_prefixes):
                        continue
                    lineno = read.lineno
                    append(new(read_type, (key, node.id, None, first_line + lineno - 1,
                                           first_column if lineno == 1 else 1)))
        for node in self.w.nodes_of(NodeType.RESPOND):
            attr = node.attrs.get("threads")
            if attr is not None and _KEY.match(node.threads_key):
                reads.append(Read(node.threads_key, node.id, None, attr.value.line,
                                  attr.value.column))
        for edge, atoms in self.edge_atoms:
            value = edge.attrs["condition"].value
            # value_position, inlined for a value written on one line without escapes (one
            # character of text per character written): the common case
            raw = value.raw
            quoted = value.kind == "string"
            simple = not quoted or ("\\" not in raw and "\n" not in raw)
            line, first = value.line, value.column + 1 if quoted else value.column
            width = len(raw) - 2  # a quoted value's text: an offset past it is its end
            source = edge.source
            for atom in atoms:
                key = atom.key
                if key in always or key.startswith(always_prefixes):
                    continue
                if simple:
                    offset = atom.offset
                    if quoted and offset > width:
                        offset = width
                    append(new(read_type, (key, source, edge, line, first + offset)))
                    continue
                at_line, column = value_position(value, atom.offset)
                append(new(read_type, (key, source, edge, at_line, column)))
        reads += only_reads(self.w)
        reads, problems, self.folder_origins = sort_folder_reads(self.w, reads)
        self.out += problems
        return reads

    def availability(self, start: str) -> None:
        reads = self.reads()
        if not reads:
            return
        analysis = Availability(self.w, start, reads, self.sections, self.retries)
        writers: dict[str, list[str]] | None = None  # only needed to explain a problem
        sections = analysis.sections
        for read in analysis.unavailable(reads):
            if writers is None:
                writers = self.writers()
            free = analysis.after_free_writer(read) and \
                reserved_reason(read.key, self.w.folders) is None
            self.explain(read, analysis, writers, sections, free)

    def unproven(self, read: Read) -> None:
        where = f"condition of {read.edge.name}" if read.edge else f"template of '{read.node}'"
        self.add("availability_unproven", f"'{read.key}' is read in the {where}; no declared "
                 "output or fact writes it on every path, but an agent without outputs= "
                 "before it may set it (availability unproven)", read.line, read.column,
                 fix=f"declare it on the agent that sets it (outputs=\"{read.key}:text\"), or "
                 "guard a template read with | default('')", severity="warning",
                 node=None if read.edge else read.node,
                 edge=read.edge.name if read.edge else None)

    def per_folder(self) -> dict[str, list[str]]:
        if self._per_folder is None:
            self._per_folder = per_folder_writers(self.w)
        return self._per_folder

    def writers(self) -> dict[str, list[str]]:
        table: dict[str, list[str]] = {}
        for node in self.w.nodes.values():
            writes = stage_writes(node, self.w.folders)
            for key in writes.always + writes.on_success:
                table.setdefault(key, []).append(node.id)
        return table

    def explain(self, read: Read, analysis: Availability, writers: dict[str, list[str]],
                sections: Mapping[str, ParallelSection], free: bool) -> None:
        key = read.key
        where = f"condition of {read.edge.name}" if read.edge else f"template of '{read.node}'"
        parts = key.split(".")
        origin = self.folder_origins.get(read)
        names = [".".join(parts[:cut]) for cut in range(1, len(parts) + 1)]
        if origin is not None or parts[0] == "folder":  # `folder.X`: written as `*.X` too
            names += ["*." + ".".join(parts[1:cut]) for cut in range(2, len(parts) + 1)]
        written_by = sorted({n for name in names for n in writers.get(name, ())})
        branch_info = self.branch_relation(read, written_by, sections)
        subject = f"'{key}'"
        if origin is not None:  # one diagnostic for folder.X, naming a folder it misses
            if (origin, read.line, read.column) in self.reported_origins:
                return
            self.reported_origins.add((origin, read.line, read.column))
            subject = f"'{origin}' (for folder '{parts[0]}': '{key}')"
        if branch_info is None and not written_by and origin is None:
            branch_info = per_folder_problem(read, where, self.w, self.per_folder())
        if branch_info is None and free and not written_by:
            # only an Attractor agent before it may set it: unproven, a warning (SPEC §10);
            # a key some declaration writes is held to that declaration
            self.unproven(read)
            return
        if branch_info is not None:
            rule, message, fix = branch_info
        elif key.startswith("parallel.results."):
            rule, message, fix = self.results_problem(read, sections)
        elif not written_by:
            rule = "availability"
            message = f"{subject} is read in the {where} but nothing writes it"
            fix = (f"declare '{key}' in inputs=, as an output of an agent (outputs=\"{key}:text\") "
                   "or as a fact of a script")
        else:
            path = analysis.witness(read)
            via = f" (for example along {path[0]})" if path else ""
            rule = "availability"
            message = (f"{subject} is read in the {where} but is not written on every path from "
                       f"the start{via}; written by {', '.join(written_by)}")
            fix = ("write it on every path before this read (a failure edge does not carry a "
                   "stage's outputs), or guard a template read with | default('')")
        if read.edge is not None and failure_can_take(read.edge, self.w) and written_by and \
                rule == "availability":
            message += "; this edge is taken after a failure, which writes no outputs"
        self.add(rule, message, read.line, read.column, fix=fix,
                 node=None if read.edge else read.node,
                 edge=read.edge.name if read.edge else None)

    def branch_relation(self, read: Read, written_by: list[str],
                        sections: Mapping[str, ParallelSection]) -> tuple[str, str, str] | None:
        if not written_by:
            return None
        for section in sections.values():
            indexes = {i for i, b in enumerate(section.branches) if read.node in b.nodes}
            writer_branches = {i for i, b in enumerate(section.branches)
                               for n in written_by if n in b.nodes}
            if not writer_branches:
                continue
            if indexes and writer_branches - indexes:
                return ("sibling_read", f"'{read.key}' is written only by a sibling branch of "
                        f"parallel '{section.parallel}'; branches run on separate copies of the "
                        "context", "read it after the join through "
                        f"parallel.results.<i>.context.{read.key}")
            if not indexes:
                index = min(writer_branches)
                return ("branch_key_after_join", f"'{read.key}' is written only inside "
                        f"branches of parallel '{section.parallel}' and is not in the context "
                        "after the join", f"read parallel.results.{index}.context.{read.key} "
                        f"(in templates: parallel.results['{index}'].context.{read.key})")
        return None

    def results_problem(self, read: Read,
                        sections: Mapping[str, ParallelSection]) -> tuple[str, str, str]:
        parts = read.key.split(".")
        if not sections:
            return ("availability", f"'{read.key}' is read but the workflow has no parallel "
                    "node", "add a parallel node and its fan-in before this read")
        widest = max(len(s.branches) for s in sections.values())
        if len(parts) > 2 and parts[2].isdigit() and int(parts[2]) >= widest:
            return ("parallel_result_index", f"'{read.key}': branch {parts[2]} does not exist "
                    f"(the widest parallel node has {widest} branches, numbered from 0)",
                    f"use an index from 0 to {widest - 1}")
        return ("availability", f"'{read.key}' is not set on every path: the join must come "
                "before this read and the branch must write the key on every path",
                "write the key in that branch on every path to the fan-in")

    def parallel_structure(self) -> None:
        for section in self.sections.values():
            node = self.w.nodes[section.parallel]
            if not section.branches:
                self.at_node("parallel_branches", node, f"parallel '{node.id}' has no "
                             "outgoing edge", "add one edge per branch")
            elif section.end is None:
                self.at_node("parallel_fan_in", node, f"the branches of parallel '{node.id}' "
                             "never join: no fan-in, and no exit, is reached by every branch",
                             "add a fan_in node [shape=tripleoctagon] that every branch reaches")

    def run(self) -> list[Diagnostic]:
        start = self.structure()
        self.nodes()
        self.graph_declarations()
        self.choices()
        self.spaced_literals()
        self.parallel_structure()
        if start is not None:
            self.availability(start)
        return self.out


def _literal_domain(key: str, domains: Mapping[str, set[str]]
                    ) -> tuple[bool, tuple[str, ...] | None, str]:
    """(whether `key` is an outcome, the literals it can equal or None for any, what it is)."""
    if key == "outcome" or key.endswith(".outcome"):
        return True, None, ""
    if key == "pr.state" or key.endswith(".pr.state"):
        return False, PR_STATES, "a PR state"
    if key in ("pr.ready", "worktree.clean") or key.endswith(
            (".pr.ready", ".diff.empty", ".worktree.exists", ".worktree.dirty", ".failed")):
        return False, BOOLEANS, "a boolean"
    if domains.get(key):
        return False, tuple(sorted(domains[key])), f"the choice '{key}'"
    return False, None, ""


def node_template_reads(node: Node, name: str, text: str) -> list[TemplateRead]:
    """What a node's prompt or script reads: a Jinja template's names, or with
    `template=plain` only `$goal` in a prompt (a plain script is run as written)."""
    if node.template == "plain":
        if name != "prompt":
            return []
        return [TemplateRead("goal", text.count("\n", 0, m.start()) + 1)
                for m in DOLLAR_GOAL.finditer(text)]
    return template_reads(text)


def reads_goal(workflow: Workflow) -> bool:
    """Whether anything reads the goal (SPEC §3: only then must a run have one)."""
    for node in workflow.nodes.values():
        for name in ("prompt", "script", "tool_command"):
            attr = node.prompt_attr if name == "prompt" else node.attrs.get(name)
            if attr is None or (name == "prompt" and node.type not in LLM_TYPES):
                continue
            try:
                found = node_template_reads(node, name, attr.text)
            except TemplateProblem:
                continue
            if any(read.key in ("goal", "graph.goal") for read in found):
                return True
    return any(atom.key in ("goal", "graph.goal") for edge in workflow.edges
               if edge.condition is not None for atom in edge.condition.atoms())


def validate(workflow: Workflow) -> list[Diagnostic]:
    """The validator's diagnostics for a built workflow (load diagnostics not included)."""
    return _Checker(workflow).run() + security.check(workflow) + check_foreach_nodes(workflow)
