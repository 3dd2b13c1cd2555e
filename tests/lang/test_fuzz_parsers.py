"""Property tests: no input makes the parsers or the validator fail other than as documented.

`check_source` never raises; when the text does not parse it returns exactly one `syntax`
diagnostic with a position inside the file. `parse_dot` raises only WorkflowSyntaxError,
`parse_condition` only ConditionSyntaxError, the declaration parsers only DeclarationError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.errors import ConditionSyntaxError, DeclarationError, WorkflowSyntaxError
from delivery.lang.conditions import _parse_full, parse_condition
from delivery.lang.declarations import (
    parse_defaults,
    parse_facts,
    parse_folder_list,
    parse_inputs,
    parse_outputs,
    parse_probe_kinds,
)
from delivery.lang.jinja_reads import jinja_reads
from delivery.lang.parser import parse_dot
from delivery.lang.template_reads import (
    TemplateProblem,
    _simple_reads,
    template_reads,
)
from delivery.validation.loader import check_source

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "workflows").glob("*/*.dot"))
SOURCES = [p.read_text(encoding="utf-8") for p in EXAMPLES]
FUZZ = settings(max_examples=250, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Characters that matter to the DOT tokenizer, and to conditions, mixed with anything.
DOT_ALPHABET = st.sampled_from([*'{}[]=;,->"\\/*#\n\t <>.:?\'abcxyz_019', "->", "--", "//",
                                "/*", "*/"])
CONDITION_ALPHABET = st.sampled_from([*'=!<>&|()"\\ .-_abcxyz019', "&&", "||", "!=", "<=", ">=",
                                      "contains ", "outcome", "context.", "true", "success"])


def check_never_raises(source: str) -> None:
    workflow, diagnostics = check_source(source, "fuzz.dot")
    try:
        parse_dot(source, "fuzz.dot")
    except WorkflowSyntaxError as err:
        assert workflow is None
        (diag,) = diagnostics
        assert diag.rule == "syntax" and diag.severity == "error"
        assert (diag.line, diag.column) == (err.position.line, err.position.column)
        lines = source.split("\n")
        assert 1 <= diag.line <= len(lines)
        assert 1 <= diag.column <= len(lines[diag.line - 1]) + 1
        assert diag.message.startswith("expected ")
        return
    assert workflow is not None
    for diag in diagnostics:
        assert diag.rule != "syntax"
        assert diag.line >= 1 and diag.column >= 1


@FUZZ
@given(st.text(max_size=300))
def test_random_text_never_breaks_check_source(source: str) -> None:
    check_never_raises(source)


@FUZZ
@given(st.lists(DOT_ALPHABET, max_size=80).map("".join))
def test_dot_like_text_never_breaks_check_source(body: str) -> None:
    check_never_raises(body)
    check_never_raises("digraph g {" + body + "}")


@st.composite
def mutated_example(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SOURCES))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        position = draw(st.integers(min_value=0, max_value=len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.one_of(DOT_ALPHABET, st.text(min_size=1, max_size=3)))
        if action == "insert":
            text = text[:position] + piece + text[position:]
        elif action == "delete":
            text = text[:position] + text[position + len(piece):]
        else:
            text = text[:position] + piece + text[position + len(piece):]
    return text


@FUZZ
@given(mutated_example())
def test_mutated_examples_never_break_check_source(source: str) -> None:
    check_never_raises(source)


def parse_condition_or_documented_error(text: str) -> None:
    try:
        condition = parse_condition(text)
    except ConditionSyntaxError as err:
        assert 0 <= err.offset <= len(text)
        assert err.expected
        return
    assert condition.text == text
    # a parsed condition evaluates on any context without raising
    assert condition.evaluate({}) in (True, False)
    keys = condition.keys()
    assert condition.evaluate(dict.fromkeys(keys, "1")) in (True, False)


@FUZZ
@given(st.text(max_size=60))
def test_random_conditions_parse_or_fail_as_documented(text: str) -> None:
    parse_condition_or_documented_error(text)


@FUZZ
@given(st.lists(CONDITION_ALPHABET, max_size=20).map("".join))
def test_condition_like_text_parses_or_fails_as_documented(text: str) -> None:
    parse_condition_or_documented_error(text)


@FUZZ
@given(st.text(max_size=30), st.one_of(st.text(max_size=10), st.integers(), st.none(),
                                        st.booleans(), st.lists(st.text(max_size=5))))
def test_parsed_conditions_evaluate_on_any_values(text: str, value: Any) -> None:
    try:
        condition = parse_condition(text)
    except ConditionSyntaxError:
        return
    keys = condition.keys()
    assert condition.evaluate(dict.fromkeys(keys, value)) in (True, False)


DECLARATION_PARSERS: list[Callable[[str], object]] = [
    parse_inputs, parse_defaults, parse_outputs, parse_facts, parse_probe_kinds,
    parse_folder_list]


@pytest.mark.slow
@FUZZ
@given(st.sampled_from(DECLARATION_PARSERS),
       st.lists(st.sampled_from([*"abz_.:,'?= 9", "text", "choice", "pr"]),
                max_size=20).map("".join))
def test_declaration_parsers_fail_only_with_declaration_errors(
        parse: Callable[[str], object], text: str) -> None:
    try:
        parse(text)
    except DeclarationError as err:
        assert 0 <= err.offset <= len(text)
        assert err.problem and err.fix


TEMPLATE_ALPHABET = st.sampled_from([
    "{{", "}}", "{{ ", " }}", "{%", "%}", "{#", "#}", "{", "}", ".", "[", "]", "'0'", "|", " ",
    "\n", "\r", "-", "a", "b", "x1", "_", "0", "context", "true", "not", "if", "default",
    "text ", "$goal"])


@FUZZ
@given(st.lists(TEMPLATE_ALPHABET, max_size=25).map("".join))
def test_template_fast_path_agrees_with_jinja(source: str) -> None:
    """Plain `{{ a.b }}` templates skip Jinja2; the answer must be what Jinja2 would give."""
    simple = _simple_reads(source)
    try:
        full = jinja_reads(source)
    except TemplateProblem:
        assert simple is None
        return
    if simple is not None:
        assert simple == full
    # the public function answers the same either way
    assert template_reads(source)[: len(full)] == full


CLAUSE_ALPHABET = st.sampled_from([
    "a", "b.c", "context.x", "outcome", "_k1", "=", "!=", "<=", ">=", "<", ">", "==",
    " contains ", "contains", " ", "\t", "\n", "\u00a0", "&&", "||", "&", "|", "!", "(", ")",
    '"', "left", "more words", "1.5", "-2", "true", "false", "x.", ".y"])


def _parse_or_error(parse: Callable[[str], object], text: str) -> object:
    try:
        return parse(text)
    except ConditionSyntaxError as err:
        return ("error", err.offset, err.expected, err.found)


@FUZZ
@given(st.one_of(st.lists(CLAUSE_ALPHABET, max_size=12).map("".join),
                 st.lists(CONDITION_ALPHABET, max_size=20).map("".join)))
def test_condition_fast_path_gives_the_full_parsers_tree(text: str) -> None:
    """Bare `key op literal` clauses take a regex path; tree, offsets and errors must be
    exactly what the character-level parser gives."""
    assert _parse_or_error(parse_condition, text) == _parse_or_error(_parse_full, text)
