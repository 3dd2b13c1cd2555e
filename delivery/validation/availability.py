"""Availability (SPEC §10): every key a condition or template reads must be written on
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
from typing import NamedTuple

from delivery.lang.conditions import Condition
from delivery.lang.model import Edge, NodeType, Workflow
from delivery.lang.outcomes import StageOutcome
from delivery.lang.topology import ParallelSection, parallel_sections, retry_table
from delivery.validation.writes import initial_writes, stage_writes

WITNESS_LIMIT = 50
_LOW_64 = (1 << 64) - 1
_BEYOND_64 = 1 << 64  # a mask below it is kept as it is (see _Masks)
_SHARE_CANDIDATES = 8
FREE = "\x00free"  # a pseudo key: "an agent without outputs= ran", on every path
_RESULT = re.compile(r"parallel\.results\.([0-9]+)(?:\.(.*))?\Z")


class Read(NamedTuple):
    """One read of a context key (a tuple: a large workflow has one per template name and
    condition clause, and a tuple is built in C)."""

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
        # written keys nothing reads: `last_response`, `tool.output` ... are written by
        # thousands of stages (the other masks are not kept: each is as wide as its bit)
        self.unread: set[str] = set()
        # the first segments of the read keys: a written key (other than `*.`) covers a read
        # only when they share it, so `response.<node>`, `<node>.failed` ... (one per stage)
        # are told apart from the reads without the tables
        self.roots = {key.partition(".")[0] for key in self.index}

    def bit(self, key: str) -> int:
        """The mask of one read key (0 when nothing reads it)."""
        i = self.index.get(key)
        return 0 if i is None else 1 << i

    def mask(self, written: str) -> int:
        if written.partition(".")[0] not in self.roots and not written.startswith("*."):
            return 0
        if written in self.unread:
            return 0
        mask = self._mask(written)
        if not mask:
            self.unread.add(written)
        return mask

    def _mask(self, written: str) -> int:
        if "." not in written:  # no namespace above it, nothing below but what it prefixes
            mask = 0
            for i in self.under.get(written, ()):
                mask |= 1 << i
            return mask
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


class _Masks:
    """A mask of read keys per node, kept as narrow as its bits: a stage writes a few keys,
    whose bits sit together but may be high (a Python int is as wide as its highest bit, and
    20,000 stages' masks were ~6 MB); a high mask is kept shifted down to its lowest bit."""

    __slots__ = ("table",)

    def __init__(self) -> None:
        self.table: dict[str, int | tuple[int, int]] = {}

    def __setitem__(self, node_id: str, mask: int) -> None:
        low = (mask & -mask).bit_length() - 1
        self.table[node_id] = (mask >> low, low) if low >= 64 else mask

    def __getitem__(self, node_id: str) -> int:
        mask = self.table[node_id]
        if isinstance(mask, int):
            return mask
        return mask[0] << mask[1]


def failure_can_take(edge: Edge, workflow: Workflow | None = None) -> bool:
    """True when this edge can be chosen after its source failed (SPEC §1.3): a condition
    on `outcome` that may hold for `failed`, or (given the workflow) an unconditional edge
    into a conditional node, which keeps the failure and routes on it."""
    condition: Condition | None = edge.condition
    if condition is None:
        return workflow is not None and \
            workflow.nodes[edge.target].type is NodeType.CONDITIONAL
    return condition.tests_outcome() and condition.may_hold({"outcome": StageOutcome.FAILED})


class Availability:
    """Runs the analysis once; `available(read)` then answers for every read."""

    def __init__(self, workflow: Workflow, start: str, reads: list[Read],
                 sections: Mapping[str, ParallelSection] | None = None,
                 retries: dict[str, list[str]] | None = None) -> None:
        self.workflow = workflow
        self.retries = retries if retries is not None else retry_table(workflow)
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
        self.always = _Masks()
        self.success = _Masks()
        free = self.cover.bit(FREE)
        cover, folders = self.cover, workflow.folders
        # _Cover.masks and _Masks.__setitem__, inlined (twice per node): a written key whose
        # first segment no read shares covers nothing, and a mask below 2**64 is kept as it is
        mask_of, roots = cover.mask, cover.roots
        always_table, success_table = self.always.table, self.success.table
        set_always, set_success = self.always.__setitem__, self.success.__setitem__
        freely = (NodeType.AGENT, NodeType.PROMPT)
        for node in workflow.nodes.values():
            writes = stage_writes(node, folders)
            node_id = node.id
            always = 0
            for key in writes.always:
                if key.partition(".")[0] in roots or key.startswith("*."):
                    always |= mask_of(key)
            success = always
            for key in writes.on_success:
                if key.partition(".")[0] in roots or key.startswith("*."):
                    success |= mask_of(key)
            # writes_freely, inlined: an Attractor agent may set any key when it succeeds
            if node.type in freely and not node.outputs:
                success |= free
            if always < _BEYOND_64:
                always_table[node_id] = always
            else:
                set_always(node_id, always)
            if success < _BEYOND_64:
                success_table[node_id] = success
            else:
                set_success(node_id, success)
        self.section_of_fan_in = {
            s.fan_in: s for s in self.sections.values() if s.fan_in is not None
        }
        self.result_bits = self._result_bits(keys)
        # A conditional node entered after a failure routes only on edges that can be taken
        # after a failure; its other edges see only what the success paths into it carry.
        self.conditional = {n.id for n in workflow.nodes_of(NodeType.CONDITIONAL)}
        self.into_conditional = {e.index for e in workflow.edges
                                 if e.condition is None and e.target in self.conditional}
        # edges a failure can take (failure_can_take with the workflow), and those out of a
        # conditional node that its failure can take (without it: only by the condition),
        # each edge's condition asked once
        self.failure_edges: set[int] = set()
        self.conditional_failure: set[int] = set()
        nodes, conditional = workflow.nodes, self.conditional
        for edge in workflow.edges:
            condition = edge.condition
            if condition is None:
                if nodes[edge.target].type is NodeType.CONDITIONAL:
                    self.failure_edges.add(edge.index)
            # a clause on `outcome` has the word in its text: most conditions are skipped
            # without walking their tree
            elif "outcome" in condition.text and condition.tests_outcome() and \
                    condition.may_hold({"outcome": StageOutcome.FAILED}):
                self.failure_edges.add(edge.index)
                if edge.source in conditional:
                    self.conditional_failure.add(edge.index)
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
            if not read.key.startswith("parallel.results."):
                continue  # _RESULT cannot match: most reads are skipped without it
            m = _RESULT.match(read.key)
            if m and m.group(2) and m.group(2).startswith("context."):
                extra.add(m.group(2)[len("context.") :])
        return extra

    def _result_bits(self, keys: list[str]) -> list[tuple[int, int, str | None]]:
        """(bit, branch index, key inside the branch context or None) per results read."""
        found: list[tuple[int, int, str | None]] = []
        for key in keys:
            if not key.startswith("parallel.results."):
                continue  # _RESULT cannot match: most keys are skipped without it
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
        retries = self.retries
        for node_id, targets in retries.items():
            if node_id == self.start:
                continue  # the start node does no work and cannot fail
            for target in targets:
                flows[target].append((node_id, None))
        gates = [n.id for n in self.workflow.nodes.values() if n.goal_gate]
        for exit_node in self.workflow.nodes_of(NodeType.EXIT):
            for gate in gates:
                for target in retries[gate]:
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
        entry = self.entry
        # the masks' tables, read without _Masks.__getitem__ (a call per edge and visit): a
        # tuple is a high mask kept shifted down (see _Masks)
        always, succeeded = self.always.table, self.success.table
        success_entry, all_bits, initial = self.success_entry, self.all_bits, self.initial
        conditional, conditional_failure = self.conditional, self.conditional_failure
        failure_edges, into_conditional = self.failure_edges, self.into_conditional
        section_of_fan_in, start = self.section_of_fan_in, self.start
        # Equal sets share one int: along a chain most stages write nothing that is read,
        # so their entries are equal, and each is as wide as the keys read so far (a
        # 20,000-node workflow's entries were 17 MB, 6 MB of them distinct). Found by width
        # and lowest 64 bits, each O(1), then compared (from the highest digit: unequal ints
        # differ early); hashing the int itself reads all of it. Dropped after.
        shared: dict[tuple[int, int], list[int]] = {}

        def share(mask: int) -> int:
            same = shared.setdefault((mask.bit_length(), mask & _LOW_64), [])
            for candidate in same:
                if candidate == mask:
                    return candidate
            if len(same) < _SHARE_CANDIDATES:  # bounded: never a scan growing with the graph
                same.append(mask)
            return mask
        while queue:
            node_id = queue.popleft()
            queued.discard(node_id)
            success = all_bits
            if node_id == start:
                value = success = initial
            else:
                value = all_bits
                # edge_flow and _source_entry, inlined: this loop runs once per edge and visit
                for source, edge in incoming[node_id]:
                    source_entry = entry.get(source)
                    if source_entry is None:
                        continue  # not reached yet: the top of the lattice
                    if edge is None:
                        wrote = always[source]
                        if isinstance(wrote, tuple):
                            wrote = wrote[0] << wrote[1]
                        flow = source_entry | wrote
                        value &= flow
                        success &= flow
                        continue
                    index = edge.index
                    if source in conditional and index not in conditional_failure:
                        source_entry = success_entry.get(source, all_bits)
                    wrote = succeeded[source]
                    if isinstance(wrote, tuple):
                        wrote = wrote[0] << wrote[1]
                    if edge.loop_restart:
                        flow = initial
                    elif index in failure_edges:
                        failed = always[source]
                        if isinstance(failed, tuple):
                            failed = failed[0] << failed[1]
                        flow = source_entry | failed
                    else:
                        flow = source_entry | wrote
                    value &= flow
                    if index in into_conditional:
                        success &= source_entry | wrote
                    else:
                        success &= flow
                joined = section_of_fan_in.get(node_id)
                if joined is not None and joined.parallel in entry:
                    value &= self._join_flow(joined)
                    success &= self._join_flow(joined)
            old = entry.get(node_id)
            changed = old is None or old != value
            if node_id in conditional and success_entry.get(node_id) != success:
                success_entry[node_id] = share(success)
                changed = True
            if changed:
                # share(value), inlined (one call per visit)
                same = shared.setdefault((value.bit_length(), value & _LOW_64), [])
                for candidate in same:
                    if candidate == value:
                        value = candidate
                        break
                else:
                    if len(same) < _SHARE_CANDIDATES:
                        same.append(value)
                entry[node_id] = value
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

    def unavailable(self, reads: Iterable[Read]) -> list[Read]:
        """The reads `available` answers False for, in order (one loop for all of them)."""
        entry, index, found = self.entry, self.cover.index, []
        # condition_flow, inlined; a condition's reads come one after another, so its flow
        # is worked out once for all of them
        always, succeeded = self.always.table, self.success.table
        conditional, conditional_failure = self.conditional, self.conditional_failure
        failure_edges, success_entry, all_bits = self.failure_edges, self.success_entry, \
            self.all_bits
        last_edge: Edge | None = None
        flow = 0
        for read in reads:
            value = entry.get(read.node)
            if value is None:
                continue  # unreachable: reported by the reachability rule instead
            bit = index.get(read.key)
            edge = read.edge
            if edge is not None:
                if edge is not last_edge:
                    last_edge, source, edge_index = edge, edge.source, edge.index
                    if source in conditional and edge_index not in conditional_failure:
                        flow = success_entry.get(source, all_bits)
                    else:
                        flow = entry.get(source, all_bits)
                    wrote = (always if edge_index in failure_edges else succeeded)[source]
                    if isinstance(wrote, tuple):
                        wrote = wrote[0] << wrote[1]
                    flow |= wrote
                value = flow
            if bit is None or not (value >> bit) & 1:
                found.append(read)
        return found

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
