"""The fast DOT lexer and parser give exactly what the earlier ones (tests/lang/oracle_dot.py)
gave: the same tokens, the same syntax tree, the same error at the same position."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import oracle_dot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.errors import WorkflowSyntaxError
from delivery.lang import lexer, parser
from delivery.lang.builder import value_position
from delivery.lang.syntax import Value

AGREE = settings(max_examples=300, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ROOT = Path(__file__).resolve().parents[2]
BUNDLED = [ROOT / "workflows" / "deliver.dot", ROOT / "workflows" / "review-prs.dot"]

# Pieces of DOT, right and wrong, so that generated files are mostly valid statements with
# every kind of token and a share of errors in every place.
PIECES = st.sampled_from([
    "digraph g {", "}", "{", "\n", " ", "\t", ";", ",", "a", "b2", "x.y", "->", "--", "-",
    "=", "[", "]", '"s"', '"a\\"b"', '"two\nlines"', '"\\\n"', '"open', "42", "-3", "1.5",
    ".5", "250ms", "2h", "true", "node", "edge", "graph", "subgraph", "subgraph s {",
    "// note\n", "/* block */", "/* open", "# hash\n", "\n# hash", "<b>", "strict", "\ufeff",
    "label=", "prompt=\"{{ x }}\"", "a -> b [condition=\"x=1\"]", "n [shape=box, k=v]"])


IDS = st.sampled_from(["a", "b", "start", "exit", "n_1", "Node"])
VALUES = st.sampled_from(['"s"', '"a\\"b\\n"', '"x\ny"', "42", "-3", "1.5", "30s", "true",
                          "box", '""'])
ATTRS = st.lists(st.tuples(st.sampled_from(["label", "shape", "prompt", "k.v"]), VALUES,
                           st.sampled_from([",", ";", "", " ,"])), max_size=3).map(
    lambda items: "[" + " ".join(f"{k}={v}{sep}" for k, v, sep in items) + "]")


def _statements() -> st.SearchStrategy[str]:
    leaf = st.one_of(
        st.tuples(IDS, st.one_of(st.just(""), ATTRS)).map(" ".join),
        st.tuples(st.lists(IDS, min_size=2, max_size=4), st.one_of(st.just(""), ATTRS)).map(
            lambda p: " -> ".join(p[0]) + " " + p[1]),
        st.tuples(st.sampled_from(["node", "edge", "graph"]), ATTRS).map(" ".join),
        st.tuples(st.sampled_from(["goal", "rankdir"]), VALUES).map("=".join),
        PIECES)

    def nest(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.lists(inner, max_size=4).map(
            lambda body: "subgraph s {\n" + "\n".join(body) + "\n}")

    return st.recursive(leaf, nest, max_leaves=6)


def _files() -> st.SearchStrategy[str]:
    body = st.lists(PIECES, max_size=30).map(" ".join)
    statements = st.lists(_statements(), max_size=8).map(
        lambda items: "digraph g {\n" + st_join(items) + "\n}\n")
    return st.one_of(body, body.map(lambda b: "digraph g {\n" + b + "\n}\n"), statements,
                     statements)


# One-line node and edge statements (the parser's fast path) next to what may continue or
# break them: a following line starting with '[' or '->', a comment, a '#' line, a value that
# is two tokens, a dotted or keyword id, an escape or newline in a string.
FAST_PIECES = st.sampled_from([
    "a", "b2", "start", "Node", "a.b", "a.", "node", "Graph", "x -> y", "x->y->z", "a -> b.c",
    "a -> node", " [", "[", "]", "][", "k=v", "k = v", "k=\"s\"", "k=\"a\\\"b\"",
    "k=\"two\nlines\"", "k=1", "k=-2", "k=1.5", "k=.5", "k=1.5.3", "k=12a", "k=a1.5", "k=30s",
    "k=2h", "k=1x", "k=true", "k=false", "k=a.b", "k=->", "k.v=1", ",", ";", ",,", " ", "\t",
    "\n", "\n[", "\n->", "\n-> c", "\n  # hash\n", "// c\n", "/* c */", "/* c\n */",
    "/* open", "=", "-", "--", "{", "}", "$", "\"q\"", "\r", "\f"])


def _fast_files() -> st.SearchStrategy[str]:
    return st.lists(FAST_PIECES, max_size=25).map(
        lambda pieces: "digraph g {\n" + "".join(pieces) + "\n}\n")


def st_join(items: list[str]) -> str:
    return "\n".join(f"  {item}" + (";" if i % 3 == 0 else "") for i, item in enumerate(items))


def _outcome(parse: Callable[[str, str], object], source: str) -> object:
    try:
        return parse(source, "f.dot")
    except WorkflowSyntaxError as err:
        return ("error", err.position, err.expected, err.found, err.fix)


def _tokens(tokenize: Callable[[str, str], list[object]], source: str) -> object:
    try:
        return [(t.kind.name, t.text, t.line, t.column, t.raw)  # type: ignore[attr-defined]
                for t in tokenize(source, "f.dot")]
    except WorkflowSyntaxError as err:
        return ("error", err.position, err.expected, err.found, err.fix)


@AGREE
@given(_files())
def test_tokens_are_the_oracles(source: str) -> None:
    assert _tokens(lexer.tokenize, source) == _tokens(oracle_dot.tokenize, source)


@AGREE
@given(_files())
def test_syntax_tree_and_errors_are_the_oracles(source: str) -> None:
    assert _outcome(parser.parse_dot, source) == _outcome(oracle_dot.parse_dot, source)


@AGREE
@given(_fast_files())
def test_fast_statements_and_their_neighbours_parse_as_the_oracle_parses_them(
        source: str) -> None:
    assert _outcome(parser.parse_dot, source) == _outcome(oracle_dot.parse_dot, source)


# One attribute of a one-line statement, of every kind of value, with what may follow it;
# the fast path reads the first few from its match's own groups and the rest one by one.
ONE_ATTRIBUTE = st.tuples(
    st.sampled_from(["k", "label", "k.v", "_x"]), st.sampled_from(["=", " = "]),
    st.sampled_from(['"s"', '""', '"a b"', "42", "-3", "1.5", ".5", "30s", "2h", "true",
                     "false", "box", "a.b", "1x", '"a\\"b"']),
    st.sampled_from(["", ",", ";", " ", " , ", ",,"])).map("".join)


@AGREE
@given(st.sampled_from(["a ", "a -> b ", "x->y->z"]), st.lists(ONE_ATTRIBUTE, max_size=9),
       st.sampled_from(["", "\n", " // c\n", "\n[k=1]", "\n-> c", ";"]))
def test_fast_statements_of_any_number_of_attributes_parse_as_the_oracle_parses_them(
        head: str, attributes: list[str], after: str) -> None:
    source = "digraph g {\n" + head + "[" + "".join(attributes) + "]" + after + "\n}\n"
    assert _outcome(parser.parse_dot, source) == _outcome(oracle_dot.parse_dot, source)


@AGREE
@given(st.lists(st.sampled_from(["a [k=1]", "a -> b", "a =", "[", "}", "=", "\n"]),
                max_size=8), st.sampled_from(["$", "<b>", '"open', "/* open", "--", "ok"]))
def test_a_character_no_token_starts_is_reported_before_an_earlier_parse_error(
        statements: list[str], tail: str) -> None:
    """The oracle lexed the whole file before parsing; the parser lexes lazily and must
    still report the character that starts no token, wherever it is."""
    source = "digraph g {\n" + "\n".join(statements) + "\n}\n" + tail
    assert _outcome(parser.parse_dot, source) == _outcome(oracle_dot.parse_dot, source)


def test_bundled_workflows_parse_as_the_oracle_parses_them() -> None:
    for path in BUNDLED:
        source = path.read_text(encoding="utf-8")
        assert parser.parse_dot(source, str(path)) == oracle_dot.parse_dot(source, str(path))


@AGREE
@given(st.text(alphabet='ab\\\n"t', max_size=12), st.integers(min_value=0, max_value=15))
def test_value_positions_are_the_oracles(body: str, offset: int) -> None:
    """Where character `offset` of a quoted value is: the shortcut for values without
    escapes or newlines answers as the character walk does."""
    raw = '"' + body.replace('"', '\\"') + '"'
    value = Value("string", lexer.unescape(raw[1:-1]), 3, 7, raw)
    assert value_position(value, offset) == oracle_dot.value_position(value, offset)
