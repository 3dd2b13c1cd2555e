"""The DOT lexer and parser over a fixed corpus: each case's tokens (or the lexer's error)
and syntax tree (or the parser's error, at its position), and where a character of a
quoted value lies in the file (builder.value_position).

The corpus: the bundled workflows, and generated files from pools of pieces of DOT, right
and wrong, so that they hold every kind of token and a share of errors in every place
(these were the pools of the property tests that held the parser to its earlier version):
whole files, one-line node and edge statements (the parser's fast path) next to what may
continue or break them, one-line statements of any number of attributes, and a character
no token starts after an earlier parse error."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from enum import Enum
from typing import Any

from delivery.errors import WorkflowSyntaxError
from delivery.lang import lexer, parser
from delivery.lang.attr_values import value_position
from delivery.lang.syntax import Value

from .store import ROOT

AREA = "dot"
BUNDLED = ["workflows/deliver.dot", "workflows/campaign.dot", "workflows/review-prs.dot"]

PIECES = [
    "digraph g {", "}", "{", "\n", " ", "\t", ";", ",", "a", "b2", "x.y", "->", "--", "-",
    "=", "[", "]", '"s"', '"a\\"b"', '"two\nlines"', '"\\\n"', '"open', "42", "-3", "1.5",
    ".5", "250ms", "2h", "true", "node", "edge", "graph", "subgraph", "subgraph s {",
    "// note\n", "/* block */", "/* open", "# hash\n", "\n# hash", "<b>", "strict", "\ufeff",
    "label=", "prompt=\"{{ x }}\"", "a -> b [condition=\"x=1\"]", "n [shape=box, k=v]"]
IDS = ["a", "b", "start", "exit", "n_1", "Node"]
VALUES = ['"s"', '"a\\"b\\n"', '"x\ny"', "42", "-3", "1.5", "30s", "true", "box", '""']
FAST_PIECES = [
    "a", "b2", "start", "Node", "a.b", "a.", "node", "Graph", "x -> y", "x->y->z", "a -> b.c",
    "a -> node", " [", "[", "]", "][", "k=v", "k = v", "k=\"s\"", "k=\"a\\\"b\"",
    "k=\"two\nlines\"", "k=1", "k=-2", "k=1.5", "k=.5", "k=1.5.3", "k=12a", "k=a1.5", "k=30s",
    "k=2h", "k=1x", "k=true", "k=false", "k=a.b", "k=->", "k.v=1", ",", ";", ",,", " ", "\t",
    "\n", "\n[", "\n->", "\n-> c", "\n  # hash\n", "// c\n", "/* c */", "/* c\n */",
    "/* open", "=", "-", "--", "{", "}", "$", "\"q\"", "\r", "\f"]
ONE_ATTRIBUTE = (["k", "label", "k.v", "_x"], ["=", " = "],
                 ['"s"', '""', '"a b"', "42", "-3", "1.5", ".5", "30s", "2h", "true", "false",
                  "box", "a.b", "1x", '"a\\"b"'], ["", ",", ";", " ", " , ", ",,"])


def _attrs(rng: random.Random) -> str:
    items = [(rng.choice(["label", "shape", "prompt", "k.v"]), rng.choice(VALUES),
              rng.choice([",", ";", "", " ,"])) for _ in range(rng.randint(0, 3))]
    return "[" + " ".join(f"{k}={v}{sep}" for k, v, sep in items) + "]"


def _statement(rng: random.Random, depth: int = 0) -> str:
    kind = rng.randrange(6 if depth < 2 else 5)
    if kind == 0:
        return rng.choice(IDS) + " " + (_attrs(rng) if rng.random() < 0.5 else "")
    if kind == 1:
        chain = " -> ".join(rng.choice(IDS) for _ in range(rng.randint(2, 4)))
        return chain + " " + (_attrs(rng) if rng.random() < 0.5 else "")
    if kind == 2:
        return rng.choice(["node", "edge", "graph"]) + " " + _attrs(rng)
    if kind == 3:
        return rng.choice(["goal", "rankdir"]) + "=" + rng.choice(VALUES)
    if kind == 4:
        return rng.choice(PIECES)
    body = [_statement(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return "subgraph s {\n" + "\n".join(body) + "\n}"


def _file(rng: random.Random) -> str:
    shape = rng.randrange(3)
    if shape < 2:
        body = " ".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))
        return body if shape == 0 else "digraph g {\n" + body + "\n}\n"
    items = [_statement(rng) for _ in range(rng.randint(0, 8))]
    return "digraph g {\n" + "\n".join(
        f"  {item}" + (";" if i % 3 == 0 else "") for i, item in enumerate(items)) + "\n}\n"


def _fast_file(rng: random.Random) -> str:
    pieces = [rng.choice(FAST_PIECES) for _ in range(rng.randint(0, 25))]
    return "digraph g {\n" + "".join(pieces) + "\n}\n"


def _attributes_file(rng: random.Random) -> str:
    head = rng.choice(["a ", "a -> b ", "x->y->z"])
    attributes = ["".join(rng.choice(pool) for pool in ONE_ATTRIBUTE)
                  for _ in range(rng.randint(0, 9))]
    after = rng.choice(["", "\n", " // c\n", "\n[k=1]", "\n-> c", ";"])
    return "digraph g {\n" + head + "[" + "".join(attributes) + "]" + after + "\n}\n"


def _late_lex_error(rng: random.Random) -> str:
    statements = [rng.choice(["a [k=1]", "a -> b", "a =", "[", "}", "=", "\n"])
                  for _ in range(rng.randint(0, 8))]
    tail = rng.choice(["$", "<b>", '"open', "/* open", "--", "ok"])
    return "digraph g {\n" + "\n".join(statements) + "\n}\n" + tail


GENERATORS: dict[str, tuple[Callable[[random.Random], str], int]] = {
    "file": (_file, 120), "fast": (_fast_file, 120), "attributes": (_attributes_file, 60),
    "late-lex-error": (_late_lex_error, 40)}


def cases() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path in BUNDLED:
        found["bundled-" + path.rsplit("/", 1)[-1].removesuffix(".dot")] = {"file": path}
    for kind, (make, count) in GENERATORS.items():
        rng = random.Random(kind)  # a seed per pool: one pool's change leaves the others
        seen: set[str] = set()
        while len(seen) < count:
            source = make(rng)
            if source not in seen:
                seen.add(source)
                found[f"{kind}-{len(seen):03}"] = {"source": source}
    rng = random.Random("value-position")
    for number in range(1, 61):
        body = "".join(rng.choice('ab\\\n"t') for _ in range(rng.randint(0, 12)))
        found[f"value-position-{number:02}"] = {"value": body, "offset": rng.randint(0, 15)}
    return found


def output(case: dict[str, Any]) -> Any:
    if "value" in case:
        raw = '"' + case["value"].replace('"', '\\"') + '"'
        value = Value("string", lexer.unescape(raw[1:-1]), 3, 7, raw)
        return {"position": value_position(value, case["offset"])}
    if "file" in case:
        source = (ROOT / case["file"]).read_text(encoding="utf-8")
        return {"parse": _outcome(lambda: tree(parser.parse_dot(source, case["file"])))}
    source = case["source"]
    return {"tokens": _outcome(lambda: [_token(t) for t in lexer.tokenize(source, "f.dot")]),
            "parse": _outcome(lambda: tree(parser.parse_dot(source, "f.dot")))}


def _outcome(run: Callable[[], Any]) -> Any:
    try:
        return run()
    except WorkflowSyntaxError as err:
        return {"error": [err.position.line, err.position.column, err.expected, err.found,
                          err.fix]}


def _token(token: lexer.Token) -> list[Any]:
    return [token.kind.name, token.text, token.line, token.column, token.raw]


def tree(value: Any) -> Any:
    """A syntax tree as JSON: a statement is [its class, its fields...]; a Value or an
    Attribute is the list of its fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__,
                *(tree(getattr(value, f.name)) for f in dataclasses.fields(value))]
    if isinstance(value, (list, tuple)):
        return [tree(item) for item in value]
    if isinstance(value, Enum):
        return value.name
    return value
