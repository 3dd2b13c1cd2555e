"""The condition language of SPEC §2: parsing, errors with offsets, evaluation."""

from __future__ import annotations

from typing import Any

import pytest

from delivery.errors import ConditionSyntaxError
from delivery.lang.conditions import And, Compare, Not, Or, Truthy, parse_condition

CONTEXT: dict[str, Any] = {
    "outcome": "succeeded",
    "pr.state": "MERGED",
    "count": "5",
    "ratio": 0.5,
    "score": 42,
    "flag": True,
    "off": False,
    "nothing": None,
    "labels": ["bug", "ui"],
    "text": "hello world",
    "issues": [{"title": "A"}, {"title": "B"}],
    "findings": '[{"severity": "high"}]',
    "zero": 0,
}


def holds(condition: str, context: dict[str, Any] | None = None) -> bool:
    return parse_condition(condition).evaluate(CONTEXT if context is None else context)


def error(condition: str) -> ConditionSyntaxError:
    with pytest.raises(ConditionSyntaxError) as info:
        parse_condition(condition)
    return info.value


# -- operators ------------------------------------------------------------------------


def test_equals_compares_string_forms() -> None:
    assert holds("pr.state=MERGED")
    assert not holds("pr.state=CLOSED")


def test_equals_is_case_sensitive() -> None:
    assert not holds("pr.state=merged")


def test_not_equals() -> None:
    assert holds("pr.state!=CLOSED")
    assert not holds("pr.state!=MERGED")


@pytest.mark.parametrize(("condition", "expected"), [
    ("count<6", True), ("count<5", False), ("count<=5", True), ("count<=4", False),
    ("count>4", True), ("count>5", False), ("count>=5", True), ("count>=6", False),
    ("ratio<1", True), ("score>41.5", True), ("count>-1", True),
])
def test_ordering_operators_compare_numbers(condition: str, expected: bool) -> None:
    assert holds(condition) is expected


@pytest.mark.parametrize("condition", ["text>1", "text<1", "flag>0", "missing>=0",
                                       "count<abc", "nothing<1"])
def test_numeric_compare_with_a_non_number_is_false(condition: str) -> None:
    assert holds(condition) is False


def test_contains_on_a_list_matches_whole_items() -> None:
    assert holds("labels contains bug")
    assert not holds("labels contains bu")


def test_contains_on_a_string_matches_a_substring() -> None:
    assert holds('text contains "lo wo"')
    assert not holds("text contains planet")


def test_quoted_literal_may_hold_spaces_and_operators() -> None:
    assert holds('text="hello world"')
    assert holds('a="x && y"', {"a": "x && y"})


def test_quoted_literal_escapes() -> None:
    assert holds(r'a="say \"hi\""', {"a": 'say "hi"'})


# -- keys ---------------------------------------------------------------------------


def test_context_prefix_is_optional() -> None:
    assert holds("context.pr.state=MERGED")
    cond = parse_condition("context.pr.state=MERGED")
    assert cond.keys() == {"pr.state"}


def test_missing_key_compares_as_the_empty_string() -> None:
    assert holds('missing=""')
    assert holds("missing!=x")
    assert not holds("missing=x")


def test_null_compares_as_the_empty_string() -> None:
    assert holds('nothing=""')


def test_json_spelling_of_values() -> None:
    assert holds("flag=true")
    assert holds("off=false")
    assert holds("score=42")
    assert holds("ratio=0.5")
    assert not holds("flag=True")


def test_list_index_reads_an_item() -> None:
    assert holds("issues.0.title=A")
    assert holds("issues.1.title=B")
    assert holds('issues.2.title=""')


def test_length_counts_list_items_and_string_characters() -> None:
    assert holds("issues.length=2")
    assert holds("issues.length > 0")
    assert holds("text.length=11")


def test_json_text_values_are_walked() -> None:
    assert holds("findings.0.severity=high")
    assert holds("findings.length=1")


def test_bare_key_is_true_when_non_empty_and_not_false_or_zero() -> None:
    assert holds("flag") and holds("text") and holds("count")
    assert not holds("off") and not holds("zero") and not holds("missing")
    assert not holds("nothing")


# -- outcome aliases ----------------------------------------------------------------


@pytest.mark.parametrize(("outcome", "condition"), [
    ("succeeded", "outcome=success"), ("succeeded", "outcome=succeeded"),
    ("success", "outcome=succeeded"), ("failed", "outcome=fail"), ("fail", "outcome=failed"),
    ("failed", "outcome!=success"),
])
def test_success_and_fail_are_aliases_of_the_outcomes(outcome: str, condition: str) -> None:
    assert holds(condition, {"outcome": outcome})


def test_aliases_apply_to_namespaced_outcomes_only() -> None:
    assert holds("parallel.results.0.outcome=success",
                 {"parallel.results": [{"outcome": "succeeded"}]})
    assert not holds("verdict=success", {"verdict": "succeeded"})


def test_tests_outcome_sees_only_the_outcome_key() -> None:
    assert parse_condition("outcome=failed && x").tests_outcome()
    assert not parse_condition("x.outcome=failed").tests_outcome()


# -- boolean structure ----------------------------------------------------------------


def test_not_negates() -> None:
    assert holds("!off")
    assert not holds("!flag")
    assert holds("!!flag")


def test_not_does_not_swallow_not_equals() -> None:
    cond = parse_condition("a!=b")
    assert isinstance(cond.root, Compare) and cond.root.op == "!="


def test_and_binds_tighter_than_or() -> None:
    # false && true || true  ==  (false && true) || true
    assert holds("off && flag || flag")
    # true || true && false  ==  true || (true && false)
    assert holds("flag || flag && off")
    root = parse_condition("a || b && c").root
    assert isinstance(root, Or) and isinstance(root.parts[1], And)


def test_parentheses_group() -> None:
    assert not holds("(flag || flag) && off")


def test_operators_need_no_spaces() -> None:
    assert holds("pr.state=MERGED&&count>4||off")


def test_atoms_lists_every_comparison_and_bare_key() -> None:
    cond = parse_condition("a=1 && !(b || c>2)")
    atoms = list(cond.atoms())
    assert [type(a) for a in atoms] == [Compare, Truthy, Compare]
    assert isinstance(cond.root, And) and isinstance(cond.root.parts[1], Not)


def test_evaluate_accepts_a_lookup_function() -> None:
    assert parse_condition("a=1").evaluate(lambda key: 1 if key == "a" else None)


def test_literal_kinds_are_recorded() -> None:
    kinds = [a.literal_kind for a in parse_condition('a=x && b="y" && c=3 && d=true').atoms()
             if isinstance(a, Compare)]
    assert kinds == ["word", "string", "number", "bool"]


def test_may_hold_is_three_valued() -> None:
    cond = parse_condition("outcome=failed && x=1")
    assert cond.may_hold({"outcome": "failed"})
    assert not cond.may_hold({"outcome": "succeeded"})
    assert parse_condition("outcome=failed || x=1").may_hold({"outcome": "succeeded"})


# -- parse errors ---------------------------------------------------------------------


@pytest.mark.parametrize(("text", "offset", "expected"), [
    ("", 0, "a context key"),
    ("outcome==succeeded", 7, "'=' (equality is a single '=')"),
    ("=x", 0, "a context key"),
    ("a &&", 4, "a context key"),
    ("a || ", 5, "a context key"),
    ("&& a", 0, "a context key"),
    ("(a", 2, "')'"),
    ("a)", 1, "'&&', '||' or the end"),
    ('a = "open', 4, "a closing '\"'"),
    ("a < ", 4, 'a literal (write "" to compare with the empty string)'),
    ("a=x y=z", 5, "'&&', '||' or the end"),
    ("9lives=1", 0, "a context key"),
])
def test_parse_error_names_offset_and_expectation(text: str, offset: int, expected: str) -> None:
    err = error(text)
    assert (err.offset, err.expected) == (offset, expected)
    assert err.text == text
    assert f"at character {offset + 1}" in str(err)


def test_a_bare_literal_runs_over_spaces_to_the_next_operator() -> None:
    # Attractor reads a clause's value up to `&&` (fabro's spec-dod.dot relies on it)
    condition = parse_condition("preferred_label=More fixes needed && outcome=success")
    assert [(a.key, a.literal) for a in condition.atoms()] == [
        ("preferred_label", "More fixes needed"), ("outcome", "success")]


def test_parse_error_says_what_was_found() -> None:
    assert error("a=x y=z").found == "'=z'"
    assert error("a &&").found == "the end"
