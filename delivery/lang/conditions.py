"""Edge conditions (SPEC §2): parsed once into an AST at load time, evaluated per step.

    expr    := or
    or      := and ( '||' and )*
    and     := unary ( '&&' unary )*
    unary   := '!' unary | '(' expr ')' | atom
    atom    := key op literal | key
    op      := '=' | '!=' | '<' | '<=' | '>' | '>=' | 'contains'

Parentheses are an extension of the SPEC grammar. `success`/`fail` are read as
`succeeded`/`failed` wherever an `outcome` is compared.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, cast

from delivery.errors import ConditionSyntaxError
from delivery.lang.outcomes import OUTCOME_ALIASES as OUTCOME_ALIASES
from delivery.lang.paths import CONTEXT_PREFIX, MISSING, normalize_key, resolve, string_form
from delivery.lang.syntax import slot_constructor

Op = Literal["=", "!=", "<", "<=", ">", ">=", "contains"]
LiteralKind = Literal["word", "string", "number", "bool"]

# How deeply '!' and '(' may nest: far beyond any real condition, well within the
# interpreter's recursion limit (the parser and the evaluators recurse).
MAX_CONDITION_DEPTH = 100


def canonical_outcome(text: str) -> str:
    return OUTCOME_ALIASES.get(text, text)


def is_outcome_key(key: str) -> bool:
    return key == "outcome" or key.endswith(".outcome")


class Compare(NamedTuple):
    """A clause `key op literal`. Compare and Truthy are named tuples (one per clause of
    every condition of a file, built in C by the fast path); the tree is told apart by
    isinstance only."""

    key: str  # normalised: no 'context.' prefix
    op: Op
    literal: str
    literal_kind: LiteralKind
    offset: int  # where the key starts in the condition text
    literal_offset: int


class Truthy(NamedTuple):
    key: str
    offset: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr


@dataclass(frozen=True, slots=True)
class And:
    parts: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or:
    parts: tuple[Expr, ...]


Expr = Compare | Truthy | Not | And | Or
Lookup = Callable[[str], Any]


@dataclass(frozen=True, slots=True)
class Condition:
    text: str
    root: Expr

    def atoms(self) -> Iterator[Compare | Truthy]:
        stack: list[Expr] = [self.root]
        while stack:
            node = stack.pop()
            if isinstance(node, (Compare, Truthy)):
                yield node
            elif isinstance(node, Not):
                stack.append(node.operand)
            else:
                stack.extend(reversed(node.parts))

    def keys(self) -> set[str]:
        return {atom.key for atom in self.atoms()}

    def tests_outcome(self) -> bool:
        return any(atom.key == "outcome" for atom in self.atoms())

    def evaluate(self, context: Mapping[str, Any] | Lookup) -> bool:
        lookup: Lookup
        if callable(context):
            lookup = context
        else:
            flat = context

            def lookup(key: str) -> Any:
                return resolve(flat, key)

        return _eval(self.root, lookup)

    def may_hold(self, known: Mapping[str, str]) -> bool:
        """False only when the condition is certainly false given `known` key values
        (string forms); every other key is treated as unknown (three-valued logic)."""
        return _eval3(self.root, known) is not False


def _compare(value: Any, op: Op, literal: str, key: str) -> bool:
    if op in ("=", "!="):
        left = string_form(value)
        right = literal
        if is_outcome_key(key):
            left, right = canonical_outcome(left), canonical_outcome(right)
        return (left == right) == (op == "=")
    if op == "contains":
        if isinstance(value, list):
            return any(string_form(item) == literal for item in value)
        return literal in string_form(value)
    try:
        left_n = float(value) if not isinstance(value, bool) else None
        right_n = float(literal)
    except (TypeError, ValueError):
        return False
    if left_n is None:
        return False
    if op == "<":
        return left_n < right_n
    if op == "<=":
        return left_n <= right_n
    if op == ">":
        return left_n > right_n
    return left_n >= right_n


def truthy(value: Any) -> bool:
    text = string_form(value)
    return text not in ("", "false", "0")


def _eval(node: Expr, lookup: Lookup) -> bool:
    if isinstance(node, Compare):
        return _compare(lookup(node.key), node.op, node.literal, node.key)
    if isinstance(node, Truthy):
        return truthy(lookup(node.key))
    if isinstance(node, Not):
        return not _eval(node.operand, lookup)
    if isinstance(node, And):
        return all(_eval(part, lookup) for part in node.parts)
    return any(_eval(part, lookup) for part in node.parts)


def _eval3(node: Expr, known: Mapping[str, str]) -> bool | None:
    if isinstance(node, Compare):
        if node.key not in known:
            return None
        return _compare(known[node.key], node.op, node.literal, node.key)
    if isinstance(node, Truthy):
        return truthy(known[node.key]) if node.key in known else None
    if isinstance(node, Not):
        inner = _eval3(node.operand, known)
        return None if inner is None else not inner
    results = [_eval3(part, known) for part in node.parts]
    if isinstance(node, And):
        if False in results:
            return False
        return None if None in results else True
    if True in results:
        return True
    return None if None in results else False


# -- parsing -----------------------------------------------------------------------

# Condition without its __init__ (see slot_constructor), and tuple.__new__ for Compare and
# Truthy: the fast path below builds one per clause of every condition of a file
_new = tuple.__new__
_make_condition: Callable[[str, Expr], Condition] = slot_constructor(Condition)
_make_and: Callable[[tuple[Expr, ...]], And] = slot_constructor(And)
_make_or: Callable[[tuple[Expr, ...]], Or] = slot_constructor(Or)

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")
_OP = re.compile(r"!=|<=|>=|==|=|<|>|contains(?=[\s\"])")
_BARE = re.compile(r"[^\s&|()!<>=\"]+")
_BARE_MORE = re.compile(r"[ \t]+[^\s&|()!<>=\"]+")
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?\Z")
_NUMBER_START = frozenset("-0123456789")


# The common condition, bare clauses `key op literal` (or a bare `key`) joined by && and ||,
# read by one compiled regex per clause instead of the character-level parser below (a
# 20,000-node workflow spent ~0.6 s there). Anything else — quotes, '!', parentheses, '==',
# a stray character — goes to the full parser, which alone reports errors;
# tests/lang/test_fuzz_parsers.py::test_condition_fast_path_gives_the_full_parsers_tree
# checks that both give the same tree.
_FAST_CLAUSE = re.compile(
    r"\s*+([A-Za-z_][A-Za-z0-9_]*+(?:\.[A-Za-z0-9_]++)*+)\s*+"
    r"(?:(!=|<=|>=|=|<|>|contains(?=\s))\s*+"
    r"([^\s&|()!<>=\"]++(?:[ \t]++[^\s&|()!<>=\"]++)*+))?"
    r"\s*+(&&|\|\||\Z)")


def _parse_simple(text: str) -> Condition | None:
    if '"' in text or "(" in text or ")" in text:
        return None
    # the lists are made at the first joiner: most conditions are a single clause
    ors: list[Expr] | None = None
    ands: list[Expr] = []
    pos, end = 0, len(text)
    match = _FAST_CLAUSE.match
    number = _NUMBER.match
    while True:
        m = match(text, pos)
        if m is None:
            return None
        key, op, literal, joiner = m.groups()
        if key.startswith(CONTEXT_PREFIX):  # normalize_key, inlined
            key = key[len(CONTEXT_PREFIX):]
        if op is None:
            atom: Expr = _new(Truthy, (key, m.start(1)))
        else:
            # a number starts with a digit or '-': most literals are words, told apart
            # without a match
            kind = "bool" if literal in ("true", "false") else \
                "number" if literal[0] in _NUMBER_START and number(literal) else "word"
            atom = _new(Compare, (key, op, literal, kind, m.start(1), m.start(3)))
        if ors is None:
            if not joiner and not ands:
                return _make_condition(text, atom)  # a single clause: the common condition
            ors = []
        ands.append(atom)
        if joiner != "&&":
            ors.append(ands[0] if len(ands) == 1 else _make_and(tuple(ands)))
            ands = []
        pos = m.end()
        if not joiner:
            break
        if pos >= end:
            return None  # a trailing && or ||: the full parser reports it
    return _make_condition(text, ors[0] if len(ors) == 1 else _make_or(tuple(ors)))


def parse_condition(text: str) -> Condition:
    """Parse a condition or raise ConditionSyntaxError with the offset of the problem."""
    simple = _parse_simple(text)
    if simple is not None:
        return simple
    return _parse_full(text)


def _parse_full(text: str) -> Condition:
    parser = _ConditionParser(text)
    root = parser.parse_or()
    parser.skip_ws()
    if parser.pos < len(text):
        found = text[parser.pos :]
        if text.startswith(")", parser.pos):
            raise ConditionSyntaxError(text, parser.pos, "'&&', '||' or the end", "')'")
        raise ConditionSyntaxError(text, parser.pos, "'&&', '||' or the end", repr(found[:20]))
    return Condition(text, root)


class _ConditionParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def skip_ws(self) -> None:
        text = self.text
        while self.pos < len(text) and text[self.pos].isspace():
            self.pos += 1

    def found(self) -> str:
        return repr(self.text[self.pos : self.pos + 20]) if self.pos < len(self.text) else "the end"

    def accept(self, token: str) -> bool:
        self.skip_ws()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def parse_or(self) -> Expr:
        parts = [self.parse_and()]
        while self.accept("||"):
            parts.append(self.parse_and())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def parse_and(self) -> Expr:
        parts = [self.parse_unary()]
        while self.accept("&&"):
            parts.append(self.parse_unary())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def parse_unary(self) -> Expr:
        self.skip_ws()
        negate = self.text.startswith("!", self.pos) and not self.text.startswith("!=", self.pos)
        if not negate and not self.text.startswith("(", self.pos):
            return self.parse_atom()
        if self.depth >= MAX_CONDITION_DEPTH:
            raise ConditionSyntaxError(self.text, self.pos, f"at most {MAX_CONDITION_DEPTH} "
                                       "nested '!' or '('", "deeper nesting")
        self.depth += 1
        self.pos += 1
        if negate:
            result: Expr = Not(self.parse_unary())
        else:
            result = self.parse_or()
            if not self.accept(")"):
                raise ConditionSyntaxError(self.text, self.pos, "')'", self.found())
        self.depth -= 1
        return result

    def parse_atom(self) -> Expr:
        self.skip_ws()
        start = self.pos
        m = _KEY.match(self.text, self.pos)
        if m is None:
            raise ConditionSyntaxError(self.text, self.pos, "a context key", self.found())
        key = normalize_key(m.group())
        self.pos = m.end()
        self.skip_ws()
        op_match = _OP.match(self.text, self.pos)
        if op_match is None:
            return Truthy(key, start)
        op = op_match.group()
        if op == "==":
            raise ConditionSyntaxError(
                self.text, self.pos, "'=' (equality is a single '=')", "'=='"
            )
        self.pos = op_match.end()
        self.skip_ws()
        literal_offset = self.pos
        literal, kind = self.parse_literal()
        return Compare(key, cast(Op, op), literal, kind, start, literal_offset)

    def parse_literal(self) -> tuple[str, LiteralKind]:
        text = self.text
        if text.startswith('"', self.pos):
            out: list[str] = []
            i = self.pos + 1
            while i < len(text):
                ch = text[i]
                if ch == "\\" and i + 1 < len(text):
                    out.append(text[i + 1])
                    i += 2
                    continue
                if ch == '"':
                    self.pos = i + 1
                    return "".join(out), "string"
                out.append(ch)
                i += 1
            raise ConditionSyntaxError(text, self.pos, "a closing '\"'", "the end")
        m = _BARE.match(text, self.pos)
        if m is None:
            raise ConditionSyntaxError(
                text,
                self.pos,
                'a literal (write "" to compare with the empty string)',
                self.found(),
            )
        end = m.end()
        # Attractor reads a clause's value up to `&&` (`preferred_label=More fixes needed`):
        # a bare literal runs on over spaces to the next operator, `)` or the end
        while (more := _BARE_MORE.match(text, end)) is not None:
            end = more.end()
        self.pos = end
        word = text[m.start():end]
        if word in ("true", "false"):
            return word, "bool"
        if _NUMBER.match(word):
            return word, "number"
        return word, "word"


__all__ = [
    "MISSING",
    "And",
    "Compare",
    "Condition",
    "Expr",
    "Not",
    "Or",
    "Truthy",
    "canonical_outcome",
    "parse_condition",
    "truthy",
]
