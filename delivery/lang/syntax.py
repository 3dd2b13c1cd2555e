"""The syntax tree the parser produces: statements as written, no defaults applied yet."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ValueKind = Literal["string", "int", "float", "duration", "bool", "word"]


@dataclass(frozen=True, slots=True)
class Value:
    """An attribute value as written. `text` is its string form (strings unescaped)."""

    kind: ValueKind
    text: str
    line: int
    column: int
    raw: str  # exactly as in the source, quotes and escapes included

    @property
    def quoted(self) -> bool:
        return self.kind == "string"


@dataclass(frozen=True, slots=True)
class AttrAssign:
    key: str
    value: Value
    line: int
    column: int


@dataclass(slots=True)
class NodeStmt:
    node_id: str
    line: int
    column: int
    attrs: list[AttrAssign]


@dataclass(slots=True)
class EdgeStmt:
    # (node id, line, column) for every element of a chain a -> b -> c
    chain: list[tuple[str, int, int]]
    attrs: list[AttrAssign]
    line: int
    column: int


@dataclass(slots=True)
class DefaultsStmt:
    """`graph [...]`, `node [...]` or `edge [...]`."""

    target: Literal["graph", "node", "edge"]
    attrs: list[AttrAssign]
    line: int
    column: int


@dataclass(slots=True)
class GraphAttrStmt:
    """Top-level `key=value`."""

    attr: AttrAssign


@dataclass(slots=True)
class SubgraphStmt:
    name: str | None
    line: int
    column: int
    body: list[Statement] = field(default_factory=list)


Statement = NodeStmt | EdgeStmt | DefaultsStmt | GraphAttrStmt | SubgraphStmt


@dataclass(slots=True)
class DotGraph:
    name: str
    file: str
    line: int
    column: int
    body: list[Statement]
