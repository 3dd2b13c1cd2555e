"""delivery/validation/availability.py as it was before issue 23's speed-ups, kept as the oracle
that tests/validation/test_validation_oracle.py compares the fast one with. Not used by delivery.

Availability (SPEC §10): every key a condition or template reads must be written on
*every* path from the start to the read.

A forward "must" dataflow over the graph, iterated to a fixpoint (loops included). The
universe is the set of keys that are read somewhere; each is one bit of a Python int, so
meeting two paths is one `&` and the whole analysis stays close to linear in graph size.

Edges carry what their source wrote: all of it on a success path, only what it writes
whatever the outcome on an edge its failure can take (a condition testing `outcome` that
may hold for `failed`, and the jumps to retry targets). A `loop_restart` edge carries only
the run's initial keys. A fan-in is entered from its parallel node (branches run on copies
of the context), with `parallel.results.<i>.context.<key>` set when branch `i` writes `key`
on every path to the join.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from oracle_topology import ParallelSection, parallel_sections, retry_targets

from delivery.lang.conditions import Condition
from delivery.lang.model import Edge, NodeType, Workflow
from delivery.validation.writes import initial_writes, stage_writes, writes_freely

WITNESS_LIMIT = 50
FREE = "\x00free"  # a pseudo key: "an agent without outputs= ran", on every path
_RESULT = re.compile(r"parallel\.results\.([0-9]+)(?:\.(.*))?\Z")


@dataclass(frozen=True, slots=True)
class Read:
    key: str
    node: str  # the reading node (for a condition: the edge's source)
    edge: Edge | None  # set when the read is in this edge's condition
    line: int
    column: int


class _Cover:
    """Maps a written key to the bitmask of the read keys it makes available.

    Bits are given in the order the keys are first read in the file: what is written
    before a reader then sits in the low bits, so the sets of a long workflow stay about
    half as wide as with an arbitrary order (a Python int is as wide as its highest bit).
    The tables hold bit numbers, not masks: one mask per key would be as wide as the whole
    universe (~1.5 KB each at 12,000 keys)."""

    def __init__(self, keys: list[str]) -> None:
        self.index = {key: i for i, key in enumerate(keys)}
        self.under: dict[str, list[int]] = {}  # prefix P -> reads equal to P or below P
        self.tail_under: dict[str, list[int]] = {}  # same, first segment cut off
        self.tail_exact: dict[str, list[int]] = {}
        for key, i in self.index.items():
            parts = key.split(".")
            for cut in range(1, len(parts) + 1):
                self.under.setdefault(".".join(parts[:cut]), []).append(i)
                if cut >= 2:
                    self.tail_under.setdefault(".".join(parts[1:cut]), []).append(i)
            if len(parts) >= 2:
                self.tail_exact.setdefault(".".join(parts[1:]), []).append(i)

    def bit(self, key: str) -> int:
        """The mask of one read key (0 when nothing reads it)."""
        i = self.index.get(key)
        return 0 if i is None else 1 << i

    def mask(self, written: str) -> int:
        if written.startswith("*."):
            table_under, table_exact, name = self.tail_under, self.tail_exact, written[2:]
            exact: dict[str, int] | None = None
        else:
            table_under, table_exact, name = self.under, self.tail_exact, written
            exact = self.index
        mask = 0
        for i in table_under.get(name, ()):
            mask |= 1 << i
        parts = name.split(".")
        for cut in range(1, len(parts)):  # reading a namespace above what is written
            above = ".".join(parts[:cut])
            if exact is None:
                for i in table_exact.get(above, ()):
                    mask |= 1 << i
            elif above in exact:
                mask |= 1 << exact[above]
        return mask

    def masks(self, written: Iterable[str]) -> int:
        mask = 0
        for key in written:
            mask |= self.mask(key)
        return mask


def failure_can_take(edge: Edge, workflow: Workflow | None = None) -> bool:
    """True when this edge can be chosen after its source failed (SPEC §1.3): a condition
    on `outcome` that may hold for `failed`, or (given the workflow) an unconditional edge
    into a conditional node, which keeps the failure and routes on it."""
    condition: Condition | None = edge.condition
    if condition is None:
        return workflow is not None and \
            workflow.nodes[edge.target].type is NodeType.CONDITIONAL
    return condition.tests_outcome() and condition.may_hold({"outcome": "failed"})


class Availability:
    """Runs the analysis once; `available(read)` then answers for every read."""

    def __init__(self, workflow: Workflow, start: str, reads: list[Read],
                 sections: Mapping[str, ParallelSection] | None = None) -> None:
        self.workflow = workflow
        self.start = start
        self.sections = sections if sections is not None else parallel_sections(workflow)
        first_read: dict[str, tuple[int, int]] = {FREE: (0, 0)}
        for read in reads:
            where = (read.line, read.column)
            if first_read.get(read.key, where) >= where:
                first_read[read.key] = where
        keys = sorted(first_read, key=lambda k: (first_read[k], k))
        keys += sorted(self._result_subkeys(reads) - first_read.keys())
        self.cover = _Cover(keys)
        self.all_bits = (1 << len(keys)) - 1
        self.initial = self.cover.masks(initial_writes(workflow))
        self.always: dict[str, int] = {}
        self.success: dict[str, int] = {}
        free = self.cover.bit(FREE)
        for node in workflow.nodes.values():
            writes = stage_writes(node, workflow.folders)
            always = self.always[node.id] = self.cover.masks(writes.always)
            success = always | self.cover.masks(writes.on_success)
            if writes_freely(node):  # an Attractor agent: may set any key when it succeeds
                success |= free
            self.success[node.id] = success
        self.section_of_fan_in = {
            s.fan_in: s for s in self.sections.values() if s.fan_in is not None
        }
        self.result_bits = self._result_bits(keys)
        self.failure_edges = {e.index for e in workflow.edges if failure_can_take(e, workflow)}
        # A conditional node entered after a failure routes only on edges that can be taken
        # after a failure; its other edges see only what the success paths into it carry.
        self.conditional = {n.id for n in workflow.nodes_of(NodeType.CONDITIONAL)}
        self.into_conditional = {e.index for e in workflow.edges
                                 if e.condition is None and e.target in self.conditional}
        # edges out of a conditional node that its failure can take, decided once (the
        # fixpoint asks again on every visit)
        self.conditional_failure = {e.index for e in workflow.edges
                                    if e.source in self.conditional and failure_can_take(e)}
        self.success_entry: dict[str, int] = {}
        self._forward_steps: dict[str, list[tuple[str, int, bool]]] | None = None
        self._witness_parents: dict[int, dict[str, tuple[str, bool] | None]] = {}
        self.entry: dict[str, int] = {}
        self._solve()

    # -- flows ----------------------------------------------------------------------
    @staticmethod
    def _result_subkeys(reads: list[Read]) -> set[str]:
        extra: set[str] = set()
        for read in reads:
            m = _RESULT.match(read.key)
            if m and m.group(2) and m.group(2).startswith("context."):
                extra.add(m.group(2)[len("context.") :])
        return extra

    def _result_bits(self, keys: list[str]) -> list[tuple[int, int, str | None]]:
        """(bit, branch index, key inside the branch context or None) per results read."""
        found: list[tuple[int, int, str | None]] = []
        for key in keys:
            m = _RESULT.match(key)
            if m is None:
                continue
            rest = m.group(2) or ""
            inner = rest[len("context.") :] if rest.startswith("context.") else None
            found.append((self.cover.bit(key), int(m.group(1)), inner))
        return found

    def _source_entry(self, edge: Edge) -> int:
        source = edge.source
        if source in self.conditional and edge.index not in self.conditional_failure:
            return self.success_entry.get(source, self.all_bits)
        return self.entry.get(source, self.all_bits)

    def edge_flow(self, edge: Edge) -> int:
        if edge.loop_restart:
            return self.initial
        source = edge.source
        entry = self._source_entry(edge)
        if edge.index in self.failure_edges:
            return entry | self.always[source]
        return entry | self.success[source]

    def condition_flow(self, edge: Edge) -> int:
        """What a condition on `edge` sees: the context after its source ran (a loop
        restart clears the context only once the edge is taken)."""
        source = edge.source
        entry = self._source_entry(edge)
        if edge.index in self.failure_edges:
            return entry | self.always[source]
        return entry | self.success[source]

    def _join_flow(self, section: ParallelSection) -> int:
        parallel = section.parallel
        base = self.entry.get(parallel, self.all_bits) | self.success[parallel]
        # the list itself and its length; an indexed read is set below, per branch
        base |= self.cover.bit("parallel.results")
        base |= self.cover.bit("parallel.results.length")
        fan_in = section.fan_in
        branch_ends: list[int] = []
        branch_writes: list[int] = []
        for branch in section.branches:
            end = self.all_bits
            wrote = 0
            reaches_join = branch.head == fan_in
            for node_id in branch.nodes:
                wrote |= self.success[node_id]
                for edge in self.workflow.outgoing.get(node_id, []):
                    if edge.target == fan_in:
                        end &= self.edge_flow(edge)
                        reaches_join = True
            branch_ends.append(end if reaches_join else 0)
            branch_writes.append(wrote)
        for bit, index, inner in self.result_bits:
            if index >= len(section.branches):
                continue
            if inner is None:
                base |= bit
                continue
            inner_bit = self.cover.bit(inner)
            if branch_ends[index] & inner_bit and branch_writes[index] & inner_bit:
                base |= bit
        return base

    def _incoming(self) -> dict[str, list[tuple[str, Edge | None]]]:
        """Flows into each node: (source, edge) — edge None for an implicit jump."""
        flows: dict[str, list[tuple[str, Edge | None]]] = {n: [] for n in self.workflow.nodes}
        branch_end_edges: set[int] = set()
        for section in self.sections.values():
            if section.fan_in is None:
                continue
            for branch in section.branches:
                for node_id in branch.nodes:
                    for edge in self.workflow.outgoing.get(node_id, []):
                        if edge.target == section.fan_in:
                            branch_end_edges.add(id(edge))
        for edge in self.workflow.edges:
            if id(edge) not in branch_end_edges:
                flows[edge.target].append((edge.source, edge))
        for node_id in self.workflow.nodes:
            if node_id == self.start:
                continue  # the start node does no work and cannot fail
            for target in retry_targets(self.workflow, node_id):
                flows[target].append((node_id, None))
        gates = [n.id for n in self.workflow.nodes.values() if n.goal_gate]
        for exit_node in self.workflow.nodes_of(NodeType.EXIT):
            for gate in gates:
                for target in retry_targets(self.workflow, gate):
                    flows[target].append((exit_node.id, None))
        return flows

    def _solve(self) -> None:
        workflow = self.workflow
        incoming = self._incoming()
        self.incoming = incoming
        # lists, not sets (a set is 216 bytes even when empty; 20,000 of them add up): a
        # repeated dependent is only checked against `queued` once more
        dependents: dict[str, list[str]] = {n: [] for n in workflow.nodes}
        for target, sources in incoming.items():
            for source, _ in sources:
                dependents[source].append(target)
        for fan_in, section in self.section_of_fan_in.items():
            dependents[section.parallel].append(fan_in)
            for branch in section.branches:
                for node_id in branch.nodes:
                    dependents[node_id].append(fan_in)
        self.entry = {}
        queue = deque([self.start])
        queued = {self.start}
        while queue:
            node_id = queue.popleft()
            queued.discard(node_id)
            success = self.all_bits
            if node_id == self.start:
                value = success = self.initial
            else:
                value = self.all_bits
                for source, edge in incoming[node_id]:
                    if source not in self.entry:
                        continue  # not reached yet: the top of the lattice
                    if edge is None:
                        flow = self.entry[source] | self.always[source]
                        value &= flow
                        success &= flow
                    else:
                        value &= self.edge_flow(edge)
                        if edge.index in self.into_conditional:
                            success &= self._source_entry(edge) | self.success[source]
                        else:
                            success &= self.edge_flow(edge)
                joined = self.section_of_fan_in.get(node_id)
                if joined is not None and joined.parallel in self.entry:
                    value &= self._join_flow(joined)
                    success &= self._join_flow(joined)
            changed = self.entry.get(node_id) != value or node_id not in self.entry
            if node_id in self.conditional and self.success_entry.get(node_id) != success:
                self.success_entry[node_id] = success
                changed = True
            if changed:
                self.entry[node_id] = value
                for dependent in dependents[node_id]:
                    if dependent not in queued:
                        queued.add(dependent)
                        queue.append(dependent)

    # -- answers --------------------------------------------------------------------
    def available(self, read: Read, key: str | None = None) -> bool:
        if read.node not in self.entry:
            return True  # unreachable: reported by the reachability rule instead
        bit = self.cover.bit(read.key if key is None else key)
        value = (self.condition_flow(read.edge) if read.edge is not None
                 else self.entry[read.node])
        return bool(value & bit)

    def after_free_writer(self, read: Read) -> bool:
        """Whether every path to the read passes an agent without outputs= (SPEC §10: the
        read's availability is then unproven, a warning, rather than an error)."""
        return self.available(read, FREE)

    def _search_without(self, bit: int) -> dict[str, tuple[str, bool] | None]:
        """BFS parents from the start along steps that do not carry the key `bit`."""
        forward = self._forward()
        parent: dict[str, tuple[str, bool] | None] = {self.start: None}
        queue = deque([self.start])
        while queue:
            current = queue.popleft()
            for target, carried, failure in forward.get(current, ()):
                if carried & bit or target in parent:
                    continue
                parent[target] = (current, failure)
                queue.append(target)
        return parent

    def _forward(self) -> dict[str, list[tuple[str, int, bool]]]:
        """Per node: (target, keys the step carries, taken on failure), built once."""
        if self._forward_steps is None:
            table: dict[str, list[tuple[str, int, bool]]] = {}
            for target, flows in self.incoming.items():
                for source, edge in flows:
                    failure = edge is None or edge.index in self.failure_edges
                    if failure:
                        carried = self.always[source]
                    elif edge is not None and edge.loop_restart:
                        carried = self.initial
                    else:
                        carried = self.success[source]
                    table.setdefault(source, []).append((target, carried, failure))
            self._forward_steps = table
        return self._forward_steps

    def witness(self, read: Read) -> list[str]:
        """A path from the start to the reader along which the key is never written.

        One breadth-first search per key, shared by all its readers; after WITNESS_LIMIT
        keys no more paths are searched (each search walks the whole graph)."""
        bit = self.cover.bit(read.key)
        if self.initial & bit:
            return []
        parent = self._witness_parents.get(bit)
        if parent is None:
            if len(self._witness_parents) >= WITNESS_LIMIT:
                return []
            parent = self._search_without(bit)
            self._witness_parents[bit] = parent
        if read.node not in parent:
            return []
        steps: list[str] = [read.node]
        cursor = parent[read.node]
        while cursor is not None:
            source, failure = cursor
            steps.append(" -(on failure)-> " if failure else " -> ")
            steps.append(source)
            cursor = parent[source]
        return ["".join(reversed(steps))]
