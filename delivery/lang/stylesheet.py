"""Attractor's `model_stylesheet` (Attractor spec §8) and a node's model settings.

    model_stylesheet="* { llm_model: sonnet; } .code { llm_model: opus; } #review { ... }"

A rule is a selector (`*`, a shape name such as `box`, `.class`, `#node_id`) and
declarations of `llm_model`, `llm_provider` and `reasoning_effort`. For each property a node
takes, in order: its own attribute (or a `node [...]` default), the matching rule of highest
specificity (`#id` > `.class` > shape > `*`, as SPEC §1.2 and the Attractor implementations
that accept shape selectors rank them; a later rule wins a tie), the graph's attribute of the
same name, else
nothing (the agent profile's default). A node's classes are its `class="a,b"` plus the
class derived from the label of its subgraph (lower-cased, spaces to hyphens, other
characters dropped).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache

from delivery.errors import StylesheetError as StylesheetError
from delivery.lang.attributes import GRAPHVIZ_SHAPES
from delivery.lang.model import Node, Workflow

PROPERTIES = ("llm_model", "llm_provider", "reasoning_effort")
REASONING_EFFORTS = ("low", "medium", "high")
# by the selector's first character; a shape selector starts with a letter
SPECIFICITY = {"*": 0, ".": 2, "#": 3}
SHAPE_SPECIFICITY = 1
DEFAULT_SHAPE = "box"  # Attractor §2.6: a node without `shape` is a box

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CLASS = re.compile(r"[a-z0-9-]+")
_PROPERTY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


@dataclass(frozen=True, slots=True)
class StyleRule:
    selector: str  # "*", "box", ".code", "#review"
    declarations: tuple[tuple[str, str], ...]
    order: int

    @property
    def specificity(self) -> int:
        return SPECIFICITY.get(self.selector[0], SHAPE_SPECIFICITY)

    def matches(self, node_id: str, classes: frozenset[str], shape: str = DEFAULT_SHAPE) -> bool:
        kind, name = self.selector[0], self.selector[1:]
        if kind == "*":
            return True
        if kind == "#":
            return name == node_id
        if kind == ".":
            return name in classes
        return self.selector == shape


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """What a node asks of its agent profile's model; empty means the profile's default."""

    model: str = ""
    provider: str = ""
    reasoning_effort: str = ""


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def skip_space(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def at_end(self) -> bool:
        self.skip_space()
        return self.i >= len(self.text)

    def found(self) -> str:
        if self.i >= len(self.text):
            return "the end of the stylesheet"
        return repr(self.text[self.i])

    def expect(self, char: str, what: str, fix: str) -> None:
        self.skip_space()
        if self.i >= len(self.text) or self.text[self.i] != char:
            raise StylesheetError(self.i, f"expected {what}, found {self.found()}", fix)
        self.i += 1

    def match(self, pattern: re.Pattern[str]) -> str | None:
        m = pattern.match(self.text, self.i)
        if m is None or not m.group(0):
            return None
        self.i = m.end()
        return m.group(0)


def parse_stylesheet(text: str) -> tuple[StyleRule, ...]:
    """The rules of a stylesheet, or StylesheetError naming the first problem."""
    reader = _Reader(text)
    rules: list[StyleRule] = []
    example = "write rules like * { llm_model: gpt-5.2; reasoning_effort: high; }"
    while not reader.at_end():
        start = reader.i
        selector = _selector(reader)
        reader.expect("{", "'{' after the selector", example)
        declarations = _declarations(reader, example)
        if not declarations:
            raise StylesheetError(start, f"the rule for '{selector}' sets nothing",
                                  "add a declaration such as llm_model: gpt-5.2; or remove it")
        rules.append(StyleRule(selector, tuple(declarations), len(rules)))
    if not rules:
        raise StylesheetError(0, "the stylesheet has no rule", example)
    return tuple(rules)


def _selector(reader: _Reader) -> str:
    reader.skip_space()
    start = reader.i
    char = reader.text[start]
    fix = ("a selector is *, a shape name (box, hexagon, ...), .class_name (lower-case "
           "letters, digits, '-') or #node_id")
    if char == "*":
        reader.i += 1
        return "*"
    if char in ".#":
        reader.i += 1
        name = reader.match(_CLASS if char == "." else _IDENT)
        if name is None:
            what = "a class name" if char == "." else "a node id"
            raise StylesheetError(reader.i, f"expected {what} after '{char}', found "
                                  f"{reader.found()}", fix)
        return char + name
    shape = reader.match(_IDENT)
    if shape is not None:
        if shape not in GRAPHVIZ_SHAPES:
            near = difflib.get_close_matches(shape, sorted(GRAPHVIZ_SHAPES), n=1)
            hint = f"did you mean '{near[0]}'?" if near else fix
            raise StylesheetError(start, f"'{shape}' is not a node shape", hint)
        return shape
    raise StylesheetError(start, f"expected a selector, found {reader.found()}", fix)


def _declarations(reader: _Reader, example: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    while True:
        reader.skip_space()
        if reader.i < len(reader.text) and reader.text[reader.i] == "}":
            reader.i += 1
            return found
        if reader.i >= len(reader.text):
            raise StylesheetError(reader.i, "expected '}' to close the rule, found the end "
                                  "of the stylesheet", "close every rule with '}'")
        start = reader.i
        name = reader.match(_PROPERTY)
        if name is None:
            raise StylesheetError(start, f"expected a property, found {reader.found()}",
                                  f"properties are {', '.join(PROPERTIES)}")
        if name not in PROPERTIES:
            raise StylesheetError(start, f"unknown property '{name}'",
                                  f"properties are {', '.join(PROPERTIES)}")
        reader.expect(":", f"':' after '{name}'", example)
        reader.skip_space()
        value_start = reader.i
        value = _value(reader)
        if not value:
            raise StylesheetError(value_start, f"'{name}' has no value", example)
        if name == "reasoning_effort" and value not in REASONING_EFFORTS:
            raise StylesheetError(value_start, f"reasoning_effort '{value}' is not one of "
                                  f"{', '.join(REASONING_EFFORTS)}", "write low, medium or high")
        found.append((name, value))
        reader.skip_space()
        if reader.i < len(reader.text) and reader.text[reader.i] == ";":
            reader.i += 1
        elif reader.i < len(reader.text) and reader.text[reader.i] != "}":
            raise StylesheetError(reader.i, f"expected ';' or '}}' after the value of '{name}', "
                                  f"found {reader.found()}", "separate declarations with ';'")


def _value(reader: _Reader) -> str:
    text = reader.text
    if reader.i < len(text) and text[reader.i] in "\"'":
        quote = text[reader.i]
        end = text.find(quote, reader.i + 1)
        if end < 0:
            raise StylesheetError(reader.i, "a quoted value is not closed",
                                  f"close it with {quote}")
        value = text[reader.i + 1:end]
        reader.i = end + 1
        return value.strip()
    start = reader.i
    while reader.i < len(text) and text[reader.i] not in ";}\n":
        reader.i += 1
    return text[start:reader.i].strip()


@lru_cache(maxsize=64)
def _cached_rules(text: str) -> tuple[StyleRule, ...]:
    try:
        return parse_stylesheet(text)
    except StylesheetError:
        return ()  # validation reports it; a run never starts with a broken stylesheet


def derived_class(label: str) -> str:
    """Attractor's class for a subgraph label: `Loop A` → `loop-a`."""
    return re.sub(r"[^a-z0-9-]", "", label.strip().lower().replace(" ", "-"))


def node_classes(workflow: Workflow, node: Node) -> frozenset[str]:
    classes = {c.strip() for c in node.attr("class").split(",") if c.strip()}
    if node.subgraph is not None:
        label_attr = workflow.subgraphs.get(node.subgraph, {}).get("label")
        label = label_attr.text if label_attr is not None else ""
        derived = derived_class(label) if label else ""
        if derived:
            classes.add(derived)
    return frozenset(classes)


def model_settings(workflow: Workflow, node: Node) -> ModelSettings:
    """The model, provider and reasoning effort `node` asks for (see the module doc)."""
    rules = _cached_rules(workflow.attr("model_stylesheet"))
    from_sheet: dict[str, str] = {}
    if rules:
        classes = node_classes(workflow, node)
        best: dict[str, tuple[int, int]] = {}
        for rule in rules:
            if not rule.matches(node.id, classes, node.attr("shape", DEFAULT_SHAPE)):
                continue
            rank = (rule.specificity, rule.order)
            for name, value in rule.declarations:
                if name not in best or rank >= best[name]:
                    best[name] = rank
                    from_sheet[name] = value
    values = {}
    for name in PROPERTIES:
        # a `node [...]` default counts as the node's own, as in Attractor (applied at parse)
        own = node.attr(name)
        values[name] = own or from_sheet.get(name) or workflow.attr(name)
    return ModelSettings(values["llm_model"], values["llm_provider"],
                         values["reasoning_effort"])
