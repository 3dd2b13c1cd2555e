"""The model of a workflow as the run's model cache stores it (`delivery.store.model_cache`):
plain JSON in columns, read back with `json.loads` and the model's own constructors.

A resume of a long run reads one model of thousands of nodes; read through pydantic, a dict
per node and a list per attribute were validated one by one (~0.1 s for 5,000 nodes). Here
each kind of thing is a handful of lists — the nodes' ids, lines, ..., every attribute of
every node in nine columns, a field off its default as (indices, values) — so that
decoding is a few passes of `map` over lists rather than a Python loop per field, and
checking the shape is a pass per column (`set(map(type, column))`).

The format (`encode_model`; `decode_model` reads it):

- attributes: `[names, lines, columns, inherited, kinds, texts, vlines, vcolumns, raws]`,
  the attributes of every owner one after the other, and beside them how many each owner
  has (`attr_counts`);
- nodes: `id`, `line`, `column` (one per node), `attrs`, `attr_counts`, and `fields`: for
  each other field of Node with a node off its default, `[indices, values]`;
- edges: one column per field, conditions as their text (parsed again on load by the
  builder's `parse_condition`: the same text gives the same condition).

Anything that is not in that shape raises `_Malformed` (a ValueError): the cache is then a
miss, never an exception to the caller.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any, Final

from delivery.lang.conditions import Condition, parse_condition
from delivery.lang.declarations import DefaultValue, FactDecl, InputDecl, OutputDecl, OutputKind
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import (
    JOIN_POLICIES,
    TEMPLATE_MODES,
    Attributes,
    Edge,
    JoinPolicy,
    ManagerSettings,
    Node,
    NodeType,
    TemplateMode,
    Workflow,
    make_attribute,
)
from delivery.lang.syntax import make_value


class _Malformed(ValueError):
    """The stored model is not in the shape `encode_model` writes."""


_NONE: Final = type(None)
_NODE_TYPES: Final = {kind.value: kind for kind in NodeType}
_OUTPUT_KINDS: Final = {kind.value: kind for kind in OutputKind}
# a literal's values by their text: a KeyError (a miss) for any other
_JOIN_POLICIES: Final[dict[str, JoinPolicy]] = {policy: policy for policy in JOIN_POLICIES}
_TEMPLATE_MODES: Final[dict[str, TemplateMode]] = {mode: mode for mode in TEMPLATE_MODES}
_VALUE_KINDS: Final = frozenset({"string", "int", "float", "duration", "bool", "word"})
_SEVERITIES: Final = frozenset({"error", "warning"})
_NODE_DEFAULTS: Final = {f.name: f.default for f in dataclasses.fields(Node)
                         if f.default is not dataclasses.MISSING}
# the fields every node is stored with (the rest: only where off their default)
NODE_COLUMNS: Final = ("id", "line", "column", "attrs")
EDGE_COLUMNS: Final = ("source", "target", "line", "column", "index", "condition", "weight",
                       "loop_restart")
MODEL_KEYS: Final = frozenset({
    "name", "file", "line", "column", "attrs", "nodes", "edges", "inputs", "defaults",
    "folders", "subgraphs", "default_max_retries", "template", "extra_attributes",
    "budget_tokens", "budget_usd"})
_DIAGNOSTIC_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Diagnostic))
_DIAGNOSTIC_KEYS: Final = frozenset(_DIAGNOSTIC_FIELDS)
assert _DIAGNOSTIC_FIELDS == ("rule", "severity", "message", "file", "line", "column", "node",
                              "edge", "fix")  # the order decode_diagnostics unpacks


# -- writing ---------------------------------------------------------------------------------
def _attr_columns(owners: Iterable[Attributes]) -> tuple[list[list[Any]], list[int]]:
    columns: list[list[Any]] = [[] for _ in range(9)]
    names, lines, cols, inherited, kinds, texts, vlines, vcols, raws = columns
    counts = []
    for attrs in owners:
        counts.append(len(attrs))
        for name, attr in attrs.items():
            if name != attr.name:  # never made by the builder: a model we cannot store
                raise ValueError(f"attribute {name!r} holds one named {attr.name!r}")
            value = attr.value
            names.append(name)
            lines.append(attr.line)
            cols.append(attr.column)
            inherited.append(attr.inherited)
            kinds.append(value.kind)
            texts.append(value.text)
            vlines.append(value.line)
            vcols.append(value.column)
            raws.append(value.raw)
    return columns, counts


def _manager_json(manager: ManagerSettings) -> dict[str, Any]:
    stop = manager.stop_condition
    return {"child_dotfile": manager.child_dotfile, "child_workdir": manager.child_workdir,
            "poll_interval": manager.poll_interval, "max_cycles": manager.max_cycles,
            "stop_condition": stop.text if stop is not None else None,
            "actions": list(manager.actions)}


def _field_json(name: str, value: Any) -> Any:
    if name == "type":
        return value.value if value is not None else None
    if name == "outputs":
        return [[d.name, d.kind.value, d.offset] for d in value]
    if name == "facts":
        return [[d.name, d.offset] for d in value]
    if name == "probe_kinds":
        return list(value)
    if name == "manager" and value is not None:
        return _manager_json(value)
    if name == "only":
        return value.text if value is not None else None
    return value


def _nodes_json(nodes: Sequence[Node]) -> dict[str, Any]:
    attrs, counts = _attr_columns(node.attrs for node in nodes)
    fields: dict[str, list[list[Any]]] = {}
    for name, default in _NODE_DEFAULTS.items():
        indices, values = [], []
        for index, node in enumerate(nodes):
            value = getattr(node, name)
            if value == default and type(value) is type(default):
                continue
            indices.append(index)
            values.append(_field_json(name, value))
        if indices:
            fields[name] = [indices, values]
    return {"id": [n.id for n in nodes], "line": [n.line for n in nodes],
            "column": [n.column for n in nodes], "attrs": attrs, "attr_counts": counts,
            "fields": fields}


def _edges_json(edges: Sequence[Edge]) -> dict[str, Any]:
    attrs, counts = _attr_columns(edge.attrs for edge in edges)
    return {"source": [e.source for e in edges], "target": [e.target for e in edges],
            "line": [e.line for e in edges], "column": [e.column for e in edges],
            "index": [e.index for e in edges],
            "condition": [e.condition.text if e.condition is not None else None
                          for e in edges],
            "weight": [e.weight for e in edges], "loop_restart": [e.loop_restart for e in edges],
            "attrs": attrs, "attr_counts": counts}


def encode_model(workflow: Workflow, file: str) -> dict[str, Any]:
    """`workflow` as the cache stores it, naming `file` (the run's copy)."""
    graph_attrs, _ = _attr_columns([workflow.attrs])
    names = list(workflow.subgraphs)
    sub_attrs, sub_counts = _attr_columns(workflow.subgraphs[name] for name in names)
    return {
        "name": workflow.name, "file": file, "line": workflow.line,
        "column": workflow.column, "attrs": graph_attrs,
        "nodes": _nodes_json(list(workflow.nodes.values())),
        "edges": _edges_json(workflow.edges),
        "inputs": [[d.name, d.optional, d.offset] for d in workflow.inputs],
        "defaults": [[d.name, d.value, d.offset] for d in workflow.defaults],
        "folders": list(workflow.folders),
        "subgraphs": [names, sub_attrs, sub_counts],
        "default_max_retries": workflow.default_max_retries, "template": workflow.template,
        "extra_attributes": sorted(workflow.extra_attributes),
        "budget_tokens": workflow.budget_tokens, "budget_usd": workflow.budget_usd,
    }


def encode_diagnostics(diagnostics: Iterable[Diagnostic], was: str,
                       file: str) -> list[dict[str, Any]]:
    """The diagnostics as stored, those of the file `was` naming `file` instead."""
    return [{**dataclasses.asdict(d), "file": file if d.file == was else d.file}
            for d in diagnostics]


# -- checking shapes ---------------------------------------------------------------------------
def _list(value: Any, length: int | None = None) -> list[Any]:
    if type(value) is not list or (length is not None and len(value) != length):
        raise _Malformed("not a list of the expected length")
    return value


def _of(column: Any, *kinds: type, length: int | None = None) -> list[Any]:
    """`column`, a list whose items are all of these exact types (bool is not an int)."""
    checked = _list(column, length)
    if not set(map(type, checked)) <= set(kinds):
        raise _Malformed(f"a column holds other than {', '.join(k.__name__ for k in kinds)}")
    return checked


def _one(value: Any, *kinds: type) -> Any:
    if type(value) not in kinds:
        raise _Malformed(f"a field holds other than {', '.join(k.__name__ for k in kinds)}")
    return value


def _dict(value: Any, keys: frozenset[str] | set[str]) -> dict[str, Any]:
    if type(value) is not dict or value.keys() != keys:
        raise _Malformed("an object with other keys than expected")
    return value


# -- reading ---------------------------------------------------------------------------------
def _attributes(columns: Any, counts: list[int]) -> list[Attributes]:
    """The attributes of each owner, `counts[i]` of them for the i-th."""
    _list(columns, 9)
    names = _of(columns[0], str)
    total = len(names)
    if sum(counts) != total:
        raise _Malformed("the attribute counts do not add up")
    lines, cols, vlines, vcols = (_of(columns[i], int, length=total) for i in (1, 2, 6, 7))
    inherited = _of(columns[3], bool, length=total)
    kinds = _of(columns[4], str, length=total)
    texts, raws = _of(columns[5], str, length=total), _of(columns[8], str, length=total)
    if not set(kinds) <= _VALUE_KINDS:
        raise _Malformed("an attribute value of an unknown kind")
    # two objects per attribute (20,000 for a 5,000-stage workflow), made by `map` with
    # the parser's slot constructors: no Python loop per attribute
    values = map(make_value, kinds, texts, vlines, vcols, raws)
    pairs = zip(names, map(make_attribute, names, values, lines, cols, inherited),
                strict=True)
    owners = [dict(islice(pairs, count)) if count else {} for count in counts]
    if sum(map(len, owners)) != total:
        raise _Malformed("an attribute named twice on one owner")
    return owners


def _conditions(texts: list[str | None]) -> list[Condition | None]:
    parsed: dict[str, Condition] = {}  # conditions are immutable: one per distinct text
    out: list[Condition | None] = []
    for text in texts:
        if text is None:
            out.append(None)
            continue
        condition = parsed.get(text)
        if condition is None:
            condition = parsed[text] = parse_condition(text)
        out.append(condition)
    return out


def _manager(value: Any) -> ManagerSettings | None:
    if value is None:
        return None
    fields = _dict(value, {"child_dotfile", "child_workdir", "poll_interval", "max_cycles",
                           "stop_condition", "actions"})
    stop = _one(fields["stop_condition"], str, _NONE)
    return ManagerSettings(
        _one(fields["child_dotfile"], str), _one(fields["child_workdir"], str),
        _one(fields["poll_interval"], float, int), _one(fields["max_cycles"], int),
        parse_condition(stop) if stop is not None else None,
        tuple(_of(fields["actions"], str)))


def _outputs(value: Any) -> tuple[OutputDecl, ...]:
    out = []
    for item in _list(value):
        name, kind, offset = _list(item, 3)
        out.append(OutputDecl(_one(name, str), _OUTPUT_KINDS[_one(kind, str)],
                              _one(offset, int)))
    return tuple(out)


def _facts(value: Any) -> tuple[FactDecl, ...]:
    out = []
    for item in _list(value):
        name, offset = _list(item, 2)
        out.append(FactDecl(_one(name, str), _one(offset, int)))
    return tuple(out)


def _types(values: list[Any]) -> list[NodeType | None]:
    return [None if v is None else _NODE_TYPES[_one(v, str)] for v in values]


def _probe_kinds(value: Any) -> tuple[str, ...]:
    return tuple(_of(value, str))


# How each field off its default is read back: a whole column at once, or item by item.
_COLUMN_READERS: Final[dict[str, Callable[[list[Any]], list[Any]]]] = {
    "type": _types,
    "subgraph": lambda c: _of(c, str, _NONE),
    "declared": lambda c: _of(c, bool),
    "max_retries": lambda c: _of(c, int, _NONE),
    "timeout": lambda c: _of(c, float, int, _NONE),
    "interval": lambda c: _of(c, float, int),
    "max_interval": lambda c: _of(c, float, int, _NONE),
    "backoff": lambda c: _of(c, float, int),
    "goal_gate": lambda c: _of(c, bool),
    "allow_partial": lambda c: _of(c, bool),
    "auto_status": lambda c: _of(c, bool),
    "delegatable": lambda c: _of(c, bool),
    "max_parallel": lambda c: _of(c, int),
    "threads_key": lambda c: _of(c, str),
    "foreach": lambda c: _of(c, bool),
    "only": lambda c: _conditions(_of(c, str, _NONE)),
}
_ITEM_READERS: Final[dict[str, Callable[[Any], Any]]] = {
    "outputs": _outputs, "facts": _facts, "probe_kinds": _probe_kinds, "manager": _manager,
    "join_policy": lambda v: _JOIN_POLICIES[_one(v, str)],
    "template": lambda v: _TEMPLATE_MODES[_one(v, str)],
}
assert _COLUMN_READERS.keys() | _ITEM_READERS.keys() == _NODE_DEFAULTS.keys()


def _nodes(value: Any) -> dict[str, Node]:
    columns = _dict(value, {*NODE_COLUMNS, "attr_counts", "fields"})
    ids = _of(columns["id"], str)
    count = len(ids)
    lines = _of(columns["line"], int, length=count)
    cols = _of(columns["column"], int, length=count)
    attrs = _attributes(columns["attrs"], _of(columns["attr_counts"], int, length=count))
    nodes = list(map(Node, ids, lines, cols, attrs))
    fields = columns["fields"]
    if type(fields) is not dict or not fields.keys() <= _NODE_DEFAULTS.keys():
        raise _Malformed("a node field the cache does not know")
    for name, pair in fields.items():
        indices, values = _list(pair, 2)
        _of(indices, int, length=len(_list(values)))
        reader = _COLUMN_READERS.get(name)
        decoded = reader(values) if reader is not None else list(map(_ITEM_READERS[name],
                                                                      values))
        if min(indices, default=0) < 0:
            raise _Malformed("a negative node index")
        # the slot's own setter, mapped over the nodes: no Python loop per node
        deque(map(getattr(Node, name).__set__, map(nodes.__getitem__, indices), decoded),
              maxlen=0)
    table = dict(zip(ids, nodes, strict=True))
    if len(table) != count:
        raise _Malformed("a node id given twice")
    return table


def _edges(value: Any) -> list[Edge]:
    columns = _dict(value, {*EDGE_COLUMNS, "attrs", "attr_counts"})
    sources = _of(columns["source"], str)
    count = len(sources)
    targets = _of(columns["target"], str, length=count)
    lines, cols, indices, weights = (_of(columns[name], int, length=count)
                                     for name in ("line", "column", "index", "weight"))
    conditions = _conditions(_of(columns["condition"], str, _NONE, length=count))
    restarts = _of(columns["loop_restart"], bool, length=count)
    attrs = _attributes(columns["attrs"], _of(columns["attr_counts"], int, length=count))
    return list(map(Edge, sources, targets, lines, cols, attrs, indices, conditions, weights,
                    restarts))


def decode_model(value: Any, file: str) -> Workflow:
    """The model `encode_model` stored, naming `file`; _Malformed (or the condition
    parser's WorkflowError) for anything else."""
    model = _dict(value, MODEL_KEYS)
    (graph_attrs,) = _attributes(model["attrs"], [len(_list(_list(model["attrs"], 9)[0]))])
    names, sub_columns, sub_counts = _list(model["subgraphs"], 3)
    _of(names, str)
    subgraphs = dict(zip(names, _attributes(sub_columns, _of(sub_counts, int,
                                                             length=len(names))),
                         strict=True))
    inputs = []
    for item in _list(model["inputs"]):
        name, optional, offset = _list(item, 3)
        inputs.append(InputDecl(_one(name, str), _one(optional, bool), _one(offset, int)))
    defaults = []
    for item in _list(model["defaults"]):
        name, text, offset = _list(item, 3)
        defaults.append(DefaultValue(_one(name, str), _one(text, str), _one(offset, int)))
    _one(model["file"], str)  # named `file` now: the run directory may have moved
    return Workflow(
        _one(model["name"], str), file, _one(model["line"], int), _one(model["column"], int),
        graph_attrs, _nodes(model["nodes"]), _edges(model["edges"]), inputs=tuple(inputs),
        defaults=tuple(defaults), folders=tuple(_of(model["folders"], str)),
        subgraphs=subgraphs, default_max_retries=_one(model["default_max_retries"], int),
        template=_TEMPLATE_MODES[_one(model["template"], str)],
        extra_attributes=frozenset(_of(model["extra_attributes"], str)),
        budget_tokens=_one(model["budget_tokens"], int, _NONE),
        budget_usd=_one(model["budget_usd"], float, int, _NONE))


def decode_diagnostics(value: Any, was: str, file: str) -> tuple[Diagnostic, ...]:
    """The stored diagnostics, those of the file `was` naming `file` instead."""
    out = []
    for item in _list(value):
        fields = _dict(item, _DIAGNOSTIC_KEYS)
        rule, severity, message, where, line, column, node, edge, fix = (
            fields[name] for name in _DIAGNOSTIC_FIELDS)
        if severity not in _SEVERITIES:
            raise _Malformed("a diagnostic of an unknown severity")
        for text in (rule, severity, message, where, fix):
            _one(text, str)
        for number in (line, column):
            _one(number, int)
        for name in (node, edge):
            _one(name, str, _NONE)
        out.append(Diagnostic(rule, severity, message, file if where == was else where,
                              line, column, node, edge, fix))
    return tuple(out)
