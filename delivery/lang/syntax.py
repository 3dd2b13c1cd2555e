"""The syntax tree the parser produces: statements as written, no defaults applied yet."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, TypeVar

_T = TypeVar("_T")


def slot_constructor(cls: type[_T]) -> Callable[..., _T]:
    """A constructor of the frozen, slotted dataclass `cls`, taking every field in order
    (no defaults), that stores them through the slots' own descriptors: about twice as fast
    as the class's __init__, which calls object.__setattr__ once per field (a frozen
    dataclass must go around its own __setattr__). The object is the same as __init__ would
    make (tests/lang/test_syntax_constructors.py). For the parser's and builder's loops,
    which build one or two per attribute of a file."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    namespace: dict[str, object] = {"_new": object.__new__, "_cls": cls}
    for name in names:
        namespace[f"_set_{name}"] = cls.__dict__[name].__set__
    body = "".join(f"    _set_{name}(obj, {name})\n" for name in names)
    exec(f"def make({', '.join(names)}):\n    obj = _new(_cls)\n{body}    return obj\n",
         namespace)
    make = namespace["make"]
    assert callable(make)
    return make


ValueKind = Literal["string", "int", "float", "duration", "bool", "word"]


class Value(NamedTuple):
    """An attribute value as written. `text` is its string form (strings unescaped).

    Value and Attribute are named tuples, not dataclasses: one is built per attribute of a
    file (two objects each), and `tuple.__new__` builds them in C, four times faster than
    a slotted dataclass's constructor; the fields read the same way and cannot be set."""

    kind: ValueKind
    text: str
    line: int
    column: int
    raw: str  # exactly as in the source, quotes and escapes included

    @property
    def quoted(self) -> bool:
        return self.kind == "string"


class Attribute(NamedTuple):
    """`key=value` as written, and the model's attribute too (delivery.lang.model re-exports
    it): the builder keeps the parser's object instead of copying each one (a 20,000-node
    file has ~56,000). `line`/`column` are where the key is written; for an inherited
    default, the default's."""

    name: str
    value: Value
    line: int
    column: int
    inherited: bool = False  # came from a `node [...]` / `edge [...]` default

    @property
    def text(self) -> str:
        return self.value.text

    @property
    def key(self) -> str:
        """The syntax tree's name for `name`."""
        return self.name


# The syntax tree's name for an attribute statement: the same class.
AttrAssign = Attribute


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


_new = tuple.__new__


def make_value(kind: ValueKind, text: str, line: int, column: int, raw: str) -> Value:
    """Value(...) built in C (a named tuple's own __new__ is Python code); the parser's
    loop calls tuple.__new__ itself."""
    return _new(Value, (kind, text, line, column, raw))


def make_attribute(name: str, value: Value, line: int, column: int,
                   inherited: bool) -> Attribute:
    """Attribute(...) built in C, every field given."""
    return _new(Attribute, (name, value, line, column, inherited))


make_attr_assign = make_attribute
