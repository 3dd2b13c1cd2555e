"""The validated-model cache of a run (`<run>/workflow.model.json`): what resume reads
instead of parsing, building and validating the run's workflow copy again.

A resume used to re-load `workflow.dot` whole (0.3-0.5 s for a 5,000-stage workflow, the
largest part of its start-up). The run's copy never changes (resume refuses a copy whose
SHA-256 differs from run.json's), so the model built from it — and the warnings a fresh
load prints — are written once, when the run starts, and read back on every resume.

The file is JSON read through pydantic (never pickle: reading it runs no code), keyed by:

- the SHA-256 of the workflow copy's bytes,
- `SCHEMA` (this module's format) and a fingerprint of the code that builds and validates
  models (`delivery.lang`, `delivery.validation`): a model built by other code is stale.

and ends with a checksum of its content (`delivery.store.files.seal`). Anything else — no
file, a symlink in its place, bad JSON, a failed checksum, another schema, another key, a
field the schema does not know — is a miss: the copy is loaded as before and the cache
written again. A failure to write it is not an error (the next resume loads the copy).

Trust: the cache is as trusted as the copy and run.json beside it. Whoever can write the
run directory can change what a resume runs either way; the checksum catches accidents
(a torn write, a flipped byte), not a deliberate edit that recomputes it.

Only a workflow without errors is cached (a run never starts on one with errors). The
model is stored as its fields, compactly (an attribute is one row; a node's fields at their
default are left out); a condition is stored as its text and parsed again on load (the
builder's own `parse_condition`: the same text gives the same condition).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import json
import logging
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from delivery.errors import RunStoreError, WorkflowError, WorkflowInvalid
from delivery.lang.conditions import parse_condition
from delivery.lang.declarations import DefaultValue, FactDecl, InputDecl, OutputDecl, OutputKind
from delivery.lang.diagnostics import Diagnostic, Severity, has_errors
from delivery.lang.model import (
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
from delivery.lang.syntax import ValueKind, make_value
from delivery.store.files import NOFOLLOW, open_file, read_file, seal, seal_holds, write_all
from delivery.validation.loader import (
    MAX_WORKFLOW_BYTES,
    check_file,
    check_source,
    load_workflow,
)

CACHE_FILE: Final = "workflow.model.json"
# Bumped when the file's format changes (an older file is then a miss).
SCHEMA: Final = 1

log = logging.getLogger("delivery")

# name, line, column, inherited, then the value: kind, text, line, column, raw
AttrRow = tuple[str, int, int, bool, ValueKind, str, int, int, str]


@with_config(ConfigDict(extra="forbid"))
class _Manager(TypedDict):
    child_dotfile: str
    child_workdir: str
    poll_interval: float
    max_cycles: int
    stop_condition: str | None  # the condition's text
    actions: list[str]


@with_config(ConfigDict(extra="forbid"))
class _Node(TypedDict):
    """A node; every field but the first four is left out at its default."""

    id: str
    line: int
    column: int
    attrs: list[AttrRow]
    type: NotRequired[NodeType | None]
    subgraph: NotRequired[str | None]
    outputs: NotRequired[list[tuple[str, OutputKind, int]]]
    facts: NotRequired[list[tuple[str, int]]]
    probe_kinds: NotRequired[list[str]]
    declared: NotRequired[bool]
    max_retries: NotRequired[int | None]
    timeout: NotRequired[float | None]
    interval: NotRequired[float]
    max_interval: NotRequired[float | None]
    backoff: NotRequired[float]
    goal_gate: NotRequired[bool]
    allow_partial: NotRequired[bool]
    auto_status: NotRequired[bool]
    delegatable: NotRequired[bool]
    join_policy: NotRequired[JoinPolicy]
    max_parallel: NotRequired[int]
    template: NotRequired[TemplateMode]
    manager: NotRequired[_Manager | None]
    threads_key: NotRequired[str]


# source, target, line, column, attrs, index, condition text, weight, loop_restart
EdgeRow = tuple[str, str, int, int, list[AttrRow], int, str | None, int, bool]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    file: str
    line: int
    column: int
    attrs: list[AttrRow]
    nodes: list[_Node]
    edges: list[EdgeRow]
    inputs: list[tuple[str, bool, int]]
    defaults: list[tuple[str, str, int]]
    folders: list[str]
    subgraphs: dict[str, list[AttrRow]]
    default_max_retries: int
    template: TemplateMode
    extra_attributes: list[str]
    budget_tokens: int | None
    budget_usd: float | None


class _Diagnostic(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: str
    severity: Severity
    message: str
    file: str
    line: int
    column: int
    node: str | None
    edge: str | None
    fix: str


class _CacheFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    code: str  # the fingerprint of the code that built the model (`code_fingerprint`)
    workflow_sha256: str
    file: str
    diagnostics: list[_Diagnostic]
    model: _Model
    checksum: str  # seal()'s, checked on the bytes before the schema is


_FILE_ADAPTER: Final = TypeAdapter(_CacheFile)
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class CachedWorkflow:
    """A run's workflow as a fresh load gives it: the model and every diagnostic (only
    warnings: a workflow with errors never runs)."""

    workflow: Workflow
    diagnostics: tuple[Diagnostic, ...]
    from_cache: bool  # False: the copy was loaded (and the cache written)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Reading a model makes tens of thousands of small acyclic objects: the cyclic
    collector would scan them again and again and free nothing (as in the loader)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# -- the key ---------------------------------------------------------------------------
@cache
def code_fingerprint() -> str:
    """A SHA-256 of the sources of `delivery.lang` and `delivery.validation` (what builds
    and validates a model): another release, or a developer's edit to either, makes older
    caches stale without a version bump. Computed once per process (~1 ms)."""
    digest = hashlib.sha256()
    for package in ("lang", "validation"):
        folder = Path(__file__).resolve().parent.parent / package
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
        except OSError:
            return ""  # not readable as files (a zip import): no caching
        for name in names:
            try:
                data = (folder / name).read_bytes()
            except OSError:
                return ""
            digest.update(f"\0{package}/{name}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()


# -- writing -------------------------------------------------------------------------------
def _attr_rows(attrs: Attributes) -> list[AttrRow]:
    rows: list[AttrRow] = []
    for name, attr in attrs.items():
        if name != attr.name:  # never made by the builder; a model we cannot store as rows
            raise ValueError(f"attribute {name!r} holds one named {attr.name!r}")
        value = attr.value
        rows.append((attr.name, attr.line, attr.column, attr.inherited,
                     value.kind, value.text, value.line, value.column, value.raw))
    return rows


_NODE_DEFAULTS: Final = {f.name: f.default for f in dataclasses.fields(Node)
                         if f.default is not dataclasses.MISSING}


def _manager_json(manager: ManagerSettings) -> dict[str, Any]:
    stop = manager.stop_condition
    return {"child_dotfile": manager.child_dotfile, "child_workdir": manager.child_workdir,
            "poll_interval": manager.poll_interval, "max_cycles": manager.max_cycles,
            "stop_condition": stop.text if stop is not None else None,
            "actions": list(manager.actions)}


def _node_json(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {"id": node.id, "line": node.line, "column": node.column,
                           "attrs": _attr_rows(node.attrs)}
    for name, default in _NODE_DEFAULTS.items():
        value = getattr(node, name)
        if value == default and type(value) is type(default):
            continue
        if name == "outputs":
            value = [(d.name, d.kind.value, d.offset) for d in node.outputs]
        elif name == "facts":
            value = [(d.name, d.offset) for d in node.facts]
        elif name == "probe_kinds":
            value = list(value)
        elif name == "manager" and value is not None:
            value = _manager_json(value)
        out[name] = value
    return out


def _edge_row(edge: Edge) -> tuple[Any, ...]:
    condition = edge.condition.text if edge.condition is not None else None
    return (edge.source, edge.target, edge.line, edge.column, _attr_rows(edge.attrs),
            edge.index, condition, edge.weight, edge.loop_restart)


def _model_json(workflow: Workflow, file: str) -> dict[str, Any]:
    return {
        "name": workflow.name, "file": file, "line": workflow.line,
        "column": workflow.column, "attrs": _attr_rows(workflow.attrs),
        "nodes": [_node_json(node) for node in workflow.nodes.values()],
        "edges": [_edge_row(edge) for edge in workflow.edges],
        "inputs": [(d.name, d.optional, d.offset) for d in workflow.inputs],
        "defaults": [(d.name, d.value, d.offset) for d in workflow.defaults],
        "folders": list(workflow.folders),
        "subgraphs": {name: _attr_rows(attrs) for name, attrs in workflow.subgraphs.items()},
        "default_max_retries": workflow.default_max_retries, "template": workflow.template,
        "extra_attributes": sorted(workflow.extra_attributes),
        "budget_tokens": workflow.budget_tokens, "budget_usd": workflow.budget_usd,
    }


def cache_bytes(workflow: Workflow, diagnostics: Iterable[Diagnostic], source: bytes,
                file: str) -> bytes:
    """The cache file's bytes for `workflow` built from `source` as the file `file`
    (`workflow.file` and the diagnostics' file are replaced by it: the run loads its copy,
    not the file the run was started with)."""
    body = {
        "schema_version": SCHEMA, "code": code_fingerprint(),
        "workflow_sha256": hashlib.sha256(source).hexdigest(), "file": file,
        "diagnostics": [{**dataclasses.asdict(d), "file": file if d.file == workflow.file
                         else d.file} for d in diagnostics],
        "model": _model_json(workflow, file),
    }
    return seal(_ENCODER.encode(body).encode())


def write_cache(run_dir: Path, workflow: Workflow, diagnostics: Sequence[Diagnostic],
                source: bytes, file: str) -> bool:
    """Write the cache of `run_dir` (True) — or not, saying why in the debug log (False):
    it is only ever a shortcut. Not flushed: a torn file fails its checksum and is rebuilt.
    A workflow with errors is not cached, nor is one when the code cannot be fingerprinted."""
    if has_errors(diagnostics) or not code_fingerprint():
        return False
    try:
        data = cache_bytes(workflow, diagnostics, source, file)
    except (ValueError, TypeError) as error:  # a model the rows cannot hold: load as before
        log.debug("model cache not written: %s", error)
        return False
    target = run_dir / CACHE_FILE
    # a fresh name and a rename: a symlink planted at the cache's name is replaced, never
    # written through (as every file of the run store)
    tmp = run_dir / f"{CACHE_FILE}.{secrets.token_hex(8)}.tmp"
    try:
        fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except (OSError, RunStoreError) as error:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        log.debug("model cache not written: %s", error)
        return False
    return True


# -- reading -------------------------------------------------------------------------------
def _attributes(rows: list[AttrRow]) -> Attributes:
    # A resume builds two objects per attribute (20,000 for a 5,000-stage workflow): the
    # parser's slot constructors make the same objects at a third of __init__'s cost.
    return {row[0]: make_attribute(row[0], make_value(row[4], row[5], row[6], row[7], row[8]),
                                   row[1], row[2], row[3]) for row in rows}


def _node(fields: _Node) -> Node:
    # the TypedDict's keys are Node's fields (a test holds them equal); the dict is the
    # validator's own, so it is taken apart rather than copied
    extra: dict[str, Any] = fields  # type: ignore[assignment]
    node_id, line, column, attrs = (extra.pop("id"), extra.pop("line"), extra.pop("column"),
                                    extra.pop("attrs"))
    if "outputs" in extra:
        extra["outputs"] = tuple(OutputDecl(n, k, o) for n, k, o in extra["outputs"])
    if "facts" in extra:
        extra["facts"] = tuple(FactDecl(n, o) for n, o in extra["facts"])
    if "probe_kinds" in extra:
        extra["probe_kinds"] = tuple(extra["probe_kinds"])
    manager = extra.get("manager")
    if manager is not None:
        stop = manager["stop_condition"]
        extra["manager"] = ManagerSettings(
            manager["child_dotfile"], manager["child_workdir"], manager["poll_interval"],
            manager["max_cycles"], parse_condition(stop) if stop is not None else None,
            tuple(manager["actions"]))
    return Node(node_id, line, column, _attributes(attrs), **extra)


def _workflow(model: _Model) -> Workflow:
    nodes = {}
    for fields in model.nodes:
        node = _node(fields)
        nodes[node.id] = node
    edges = [Edge(source, target, line, column, _attributes(attrs), index,
                  parse_condition(condition) if condition is not None else None,
                  weight, loop_restart)
             for source, target, line, column, attrs, index, condition, weight, loop_restart
             in model.edges]
    return Workflow(
        model.name, model.file, model.line, model.column, _attributes(model.attrs), nodes,
        edges, inputs=tuple(InputDecl(*d) for d in model.inputs),
        defaults=tuple(DefaultValue(*d) for d in model.defaults),
        folders=tuple(model.folders),
        subgraphs={name: _attributes(rows) for name, rows in model.subgraphs.items()},
        default_max_retries=model.default_max_retries, template=model.template,
        extra_attributes=frozenset(model.extra_attributes),
        budget_tokens=model.budget_tokens, budget_usd=model.budget_usd)


def read_cache(run_dir: Path, source: bytes, file: str) -> CachedWorkflow | None:
    """The cached workflow of `run_dir` if the cache holds the one built from `source` by
    this code, naming `file`; None (and why, in the debug log) for anything else."""
    path = run_dir / CACHE_FILE
    try:
        data = read_file(path, "model cache")  # never through a symlink
    except RunStoreError as error:
        log.debug("model cache ignored: %s", error)
        return None
    if data is None:
        return None
    found = parse_cache(data, source, file, str(path))
    if found is None or has_errors(found.diagnostics):
        return None
    return found


def parse_cache(data: bytes, source: bytes, file: str,
                where: str = CACHE_FILE) -> CachedWorkflow | None:
    """The workflow a cache file's bytes hold, if they hold the one built from `source`
    by this code, named `file`; None (and why, in the debug log) otherwise."""
    if not seal_holds(data):
        log.debug("model cache ignored: %s: its checksum does not match", where)
        return None
    try:
        with _collector_paused():
            cached = _FILE_ADAPTER.validate_json(data)
    except ValidationError as error:
        log.debug("model cache ignored: %s: %s", where, str(error).splitlines()[0])
        return None
    if (cached.code, cached.workflow_sha256) != (code_fingerprint(),
                                                  hashlib.sha256(source).hexdigest()):
        log.debug("model cache ignored: %s: built from another workflow or by other code",
                  where)
        return None
    # The path is only a name in the model and its messages (nothing is read through it):
    # a run directory moved (or fetched elsewhere, SPEC §13) names where its copy is now.
    was = cached.file
    cached.model.file = file
    try:
        with _collector_paused():
            workflow = _workflow(cached.model)
    except (ValueError, TypeError, WorkflowError) as error:  # a condition that no longer parses
        log.debug("model cache ignored: %s: %s", where, error)
        return None
    diagnostics = tuple(Diagnostic(**{**d.model_dump(), "file": file if d.file == was
                                      else d.file}) for d in cached.diagnostics)
    return CachedWorkflow(workflow, diagnostics, from_cache=True)


def load_run_workflow(run_dir: Path, copy: Path, source: bytes) -> CachedWorkflow:
    """The run's workflow from its cache, or loaded from `source` (the bytes of `copy`)
    as `load_workflow(copy)` would (WorkflowSyntaxError / WorkflowInvalid) and cached."""
    file = str(copy)
    found = read_cache(run_dir, source, file)
    if found is not None:
        return found
    workflow: Workflow | None = None
    diagnostics: list[Diagnostic] = []
    if len(source) <= MAX_WORKFLOW_BYTES:
        with contextlib.suppress(UnicodeDecodeError):
            workflow, diagnostics = check_source(source.decode("utf-8"), file)
    if workflow is None:
        load_workflow(copy)  # raises what a fresh load raises (too large, not UTF-8, syntax)
    if workflow is None or has_errors(diagnostics):
        raise WorkflowInvalid(file, diagnostics)
    write_cache(run_dir, workflow, diagnostics, source, file)
    return CachedWorkflow(workflow, tuple(diagnostics), from_cache=False)


def load_checked(path: Path) -> tuple[Workflow, list[Diagnostic]]:
    """`load_workflow(path)` with the warnings it found (what the cache keeps): the same
    model, or the same WorkflowSyntaxError / WorkflowInvalid."""
    workflow: Workflow | None = None
    diagnostics: list[Diagnostic] = []
    with contextlib.suppress(UnicodeDecodeError):
        workflow, diagnostics = check_file(path)
    if workflow is None:
        load_workflow(path)  # raises what a fresh load raises (too large, not UTF-8, syntax)
    if workflow is None or has_errors(diagnostics):
        raise WorkflowInvalid(str(path), diagnostics)
    return workflow, diagnostics
