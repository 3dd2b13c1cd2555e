"""The typed workflow model: what a parsed .dot file means, before any check or run.

Built from the syntax tree by `delivery.lang.builder`; every element keeps its source position
so that validation and run-time messages can point at the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Literal

from delivery.lang.conditions import Condition
from delivery.lang.declarations import DefaultValue, FactDecl, InputDecl, OutputDecl

# the attribute class is the syntax tree's own (the builder keeps the parser's objects)
from delivery.lang.syntax import Attribute as Attribute
from delivery.lang.syntax import make_attribute as make_attribute


class NodeType(StrEnum):
    START = "start"
    EXIT = "exit"
    AGENT = "agent"
    PROMPT = "prompt"
    SCRIPT = "script"
    PROBE = "probe"
    PUBLISH = "publish"
    MERGE = "merge"
    RESPOND = "respond"
    WAIT = "wait"
    WORKTREE_ADD = "worktree_add"
    WORKTREE_REMOVE = "worktree_remove"
    HUMAN = "human"
    CONDITIONAL = "conditional"
    PARALLEL = "parallel"
    FAN_IN = "fan_in"
    MANAGER_LOOP = "manager_loop"


# Attractor's shape table (its §2.8) and nothing else: every other shape is an agent node.
# delivery's own types (prompt, probe, publish, ...) are chosen only with `type=`.
SHAPES: dict[str, NodeType] = {
    "Mdiamond": NodeType.START,
    "Msquare": NodeType.EXIT,
    "box": NodeType.AGENT,
    "hexagon": NodeType.HUMAN,
    "diamond": NodeType.CONDITIONAL,
    "parallelogram": NodeType.SCRIPT,
    "component": NodeType.PARALLEL,
    "tripleoctagon": NodeType.FAN_IN,
    "house": NodeType.MANAGER_LOOP,
}

# `type=` spellings beyond our own names: Attractor's handler types.
TYPE_ALIASES: dict[str, NodeType] = {
    "codergen": NodeType.AGENT,
    "tool": NodeType.SCRIPT,
    "wait.human": NodeType.HUMAN,
    "parallel.fan_in": NodeType.FAN_IN,
    "fan-in": NodeType.FAN_IN,
    "fanin": NodeType.FAN_IN,
    "stack.manager_loop": NodeType.MANAGER_LOOP,
}

LLM_TYPES = frozenset({NodeType.AGENT, NodeType.PROMPT})
START_IDS = frozenset({"start", "Start"})
EXIT_IDS = frozenset({"exit", "end", "done", "Exit", "End", "Done"})
FIDELITIES = ("full", "compact", "summary:low", "summary:medium", "summary:high", "truncate")

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*\Z")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str) -> float | None:
    """Seconds in `250ms`, `30s`, `15m`, `2h`, `1d` or a plain number of seconds; None if bad."""
    m = _DURATION.match(text)
    if m is None:
        return None
    return float(m.group(1)) * _UNIT_SECONDS[m.group(2)]


Attributes = dict[str, Attribute]


def _text(attrs: Attributes, name: str, default: str = "") -> str:
    attr = attrs.get(name)
    return attr.text if attr is not None else default


JoinPolicy = Literal["wait_all", "first_success"]
TemplateMode = Literal["jinja", "plain"]
TEMPLATE_MODES: tuple[TemplateMode, ...] = ("jinja", "plain")
JOIN_POLICIES: tuple[JoinPolicy, ...] = ("wait_all", "first_success")
# delivery's earlier spelling `join=all|any`
JOIN_ALIASES: dict[str, JoinPolicy] = {"all": "wait_all", "any": "first_success"}
DEFAULT_MAX_PARALLEL = 4
MANAGER_ACTIONS = ("observe", "wait", "steer")


@dataclass(frozen=True, slots=True)
class ManagerSettings:
    """A manager loop's typed attributes (Attractor §4.11), with the spec's defaults."""

    child_dotfile: str = ""  # the node's stack.child_dotfile, else the graph's
    child_workdir: str = ""  # empty: the run's workspace
    poll_interval: float = 45.0  # seconds
    max_cycles: int = 1000
    stop_condition: Condition | None = None
    actions: tuple[str, ...] = ("observe", "wait")


@dataclass(eq=False, slots=True)  # slots: a 20,000-node workflow's nodes are 2.6 MB smaller
class Node:
    """A stage. Typed fields are parsed once by the builder (a bad value is a validation
    error there, never a silent default at run time); `attrs` keeps every raw attribute."""

    id: str
    line: int
    column: int
    attrs: Attributes
    type: NodeType | None = None  # None: unknown type (a validation error)
    subgraph: str | None = None
    outputs: tuple[OutputDecl, ...] = ()
    facts: tuple[FactDecl, ...] = ()
    probe_kinds: tuple[str, ...] = ()
    declared: bool = True  # False: created only by being named in an edge
    max_retries: int | None = None  # None: the graph's default_max_retries
    timeout: float | None = None  # seconds
    interval: float = 0.0  # seconds (wait nodes)
    max_interval: float | None = None  # seconds (wait nodes)
    backoff: float = 1.0  # interval factor on consecutive visits (wait nodes)
    goal_gate: bool = False
    allow_partial: bool = False
    auto_status: bool = False
    delegatable: bool = False  # a human gate an agent may answer in managed mode (SPEC §9.1)
    join_policy: JoinPolicy = "wait_all"
    max_parallel: int = DEFAULT_MAX_PARALLEL
    template: TemplateMode = "jinja"  # how prompt/script are rendered (SPEC §4)
    manager: ManagerSettings | None = None  # manager loops only
    # respond nodes (SPEC §7.1): the json context key holding {thread id: {reply, resolve}}
    threads_key: str = ""
    # `foreach="folders"` (SPEC §8.1): the stage runs once per folder, in its worktree
    foreach: bool = False
    # `only="CONDITION"`: the folders a foreach stage runs for, evaluated per folder
    only: Condition | None = None

    def attr(self, name: str, default: str = "") -> str:
        return _text(self.attrs, name, default)

    @property
    def label(self) -> str:
        return self.attr("label", self.id)

    @property
    def prompt_attr(self) -> Attribute | None:
        """`prompt`, or `llm_prompt` (the spelling of StrongDM's published pipelines)."""
        return self.attrs.get("prompt") or self.attrs.get("llm_prompt")

    @property
    def prompt(self) -> str:
        attr = self.prompt_attr
        return attr.text if attr is not None else ""

    @property
    def script(self) -> str:
        return self.attr("script") or self.attr("tool_command")

    @property
    def script_attr(self) -> Attribute | None:
        return self.attrs.get("script") or self.attrs.get("tool_command")

    @property
    def folder(self) -> str:
        return self.attr("folder")


@dataclass(eq=False, slots=True)
class Edge:
    source: str
    target: str
    line: int
    column: int
    attrs: Attributes
    index: int  # declaration order in the file
    condition: Condition | None = None
    weight: int = 0
    loop_restart: bool = False

    def attr(self, name: str, default: str = "") -> str:
        return _text(self.attrs, name, default)

    @property
    def name(self) -> str:
        return f"{self.source} -> {self.target}"

    @property
    def label(self) -> str:
        return self.attr("label")


@dataclass(eq=False)
class Workflow:
    name: str
    file: str
    line: int
    column: int
    attrs: Attributes
    nodes: dict[str, Node]
    edges: list[Edge]
    inputs: tuple[InputDecl, ...] = ()
    defaults: tuple[DefaultValue, ...] = ()
    folders: tuple[str, ...] = ()
    subgraphs: dict[str, Attributes] = field(default_factory=dict)
    default_max_retries: int = 0  # `default_max_retry` is Attractor's spelling
    template: TemplateMode = "jinja"  # the graph's mode; each node carries its own
    extra_attributes: frozenset[str] = frozenset()  # attributes used on purpose
    # the run's agent budget (SPEC §7.1); None: unbounded (`--budget` may still set one)
    budget_tokens: int | None = None
    budget_usd: float | None = None

    def attr(self, name: str, default: str = "") -> str:
        return _text(self.attrs, name, default)

    @property
    def goal(self) -> str:
        return self.attr("goal")

    @cached_property
    def outgoing(self) -> dict[str, list[Edge]]:
        table: dict[str, list[Edge]] = {node_id: [] for node_id in self.nodes}
        for edge in self.edges:
            table.setdefault(edge.source, []).append(edge)
        return table

    @cached_property
    def incoming(self) -> dict[str, list[Edge]]:
        table: dict[str, list[Edge]] = {node_id: [] for node_id in self.nodes}
        for edge in self.edges:
            table.setdefault(edge.target, []).append(edge)
        return table

    def nodes_of(self, *types: NodeType) -> list[Node]:
        return [node for node in self.nodes.values() if node.type in types]

    @property
    def start_nodes(self) -> list[Node]:
        return self.nodes_of(NodeType.START)

    @property
    def start(self) -> Node | None:
        starts = self.start_nodes
        return starts[0] if len(starts) == 1 else None
