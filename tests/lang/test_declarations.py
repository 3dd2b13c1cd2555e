"""The mini-languages inside attributes: inputs, defaults, outputs, facts, probe, folders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delivery.errors import DeclarationError
from delivery.lang.declarations import (
    DefaultValue,
    FactDecl,
    InputDecl,
    OutputDecl,
    OutputKind,
    _reserved_reason,
    parse_defaults,
    parse_facts,
    parse_folder_list,
    parse_inputs,
    parse_outputs,
    parse_probe_kinds,
    reserved_reason,
)


def failure(parse: Callable[[str], Any], text: str) -> DeclarationError:
    with pytest.raises(DeclarationError) as info:
        parse(text)
    return info.value


# -- inputs -------------------------------------------------------------------------


def test_inputs_parse_names_optional_marks_and_offsets() -> None:
    assert parse_inputs("work, notes? ,depth") == [
        InputDecl("work", False, 0), InputDecl("notes", True, 6), InputDecl("depth", False, 14)]


def test_empty_inputs_declare_nothing() -> None:
    assert parse_inputs("") == []
    assert parse_inputs("   ") == []


@pytest.mark.parametrize(("text", "offset", "problem"), [
    ("work,,notes", 5, "empty input name"),
    ("work,?", 5, "empty input name"),
    ("work,2fast", 5, "input name '2fast' is not an identifier"),
    ("a.b", 0, "input name 'a.b' is not an identifier"),
    ("ticket,goal", 7, "'goal' is built in"),
    ("ticket,notes?,ticket", 14, "input 'ticket' is declared twice"),
])
def test_inputs_errors(text: str, offset: int, problem: str) -> None:
    err = failure(parse_inputs, text)
    assert (err.attribute, err.offset, err.problem) == ("inputs", offset, problem)
    assert err.fix


# -- defaults -----------------------------------------------------------------------


def test_defaults_parse_single_quoted_values() -> None:
    assert parse_defaults("goal='Review this project',notes='Owner''s notes'") == [
        DefaultValue("goal", "Review this project", 0),
        DefaultValue("notes", "Owner's notes", 27)]


def test_defaults_allow_spaces_empty_values_and_commas_inside_quotes() -> None:
    assert parse_defaults(" a = '' , b='x, y' ") == [DefaultValue("a", "", 1),
                                                     DefaultValue("b", "x, y", 10)]


def test_empty_defaults_declare_nothing() -> None:
    assert parse_defaults("") == []


@pytest.mark.parametrize(("text", "offset", "problem"), [
    ("a='x',", 6, "trailing ','"),
    ("'x'", 0, "expected a name"),
    ("a 'x'", 2, "expected '=' after 'a'"),
    ("a", 1, "expected '=' after 'a'"),
    ("a=x", 2, "the value of 'a' must be single-quoted"),
    ('a="x"', 2, "the value of 'a' must be single-quoted"),
    ("a='x", 4, "unterminated value for 'a'"),
    ("a='x',a='y'", 6, "'a' has two defaults"),
    ("a='x' b='y'", 6, "expected ',' between defaults"),
])
def test_defaults_errors(text: str, offset: int, problem: str) -> None:
    err = failure(parse_defaults, text)
    assert (err.attribute, err.offset, err.problem) == ("defaults", offset, problem)
    assert "single quotes" in err.fix


# -- outputs ------------------------------------------------------------------------


def test_outputs_parse_every_kind() -> None:
    assert parse_outputs("verdict:choice, findings:json,summary : text,scope:work") == [
        OutputDecl("verdict", OutputKind.CHOICE, 0), OutputDecl("findings", OutputKind.JSON, 16),
        OutputDecl("summary", OutputKind.TEXT, 30), OutputDecl("scope", OutputKind.WORK, 45)]


def test_output_names_may_be_dotted() -> None:
    assert parse_outputs("review.summary:text")[0].name == "review.summary"


@pytest.mark.parametrize(("text", "offset", "problem"), [
    ("summary", 0, "'summary' has no kind"),
    ("a:text,b", 7, "'b' has no kind"),
    ("two words:text", 0, "output name 'two words' is not a dotted identifier"),
    ("a.:text", 0, "output name 'a.' is not a dotted identifier"),
    ("summary:prose", 8, "unknown output kind 'prose'"),
    ("a:text, b:", 10, "unknown output kind ''"),
    ("a:text,a:json", 7, "output 'a' is declared twice"),
    ("a:work,b:work", 0, "more than one work output"),
])
def test_outputs_errors(text: str, offset: int, problem: str) -> None:
    err = failure(parse_outputs, text)
    assert (err.attribute, err.offset, err.problem) == ("outputs", offset, problem)


# -- facts --------------------------------------------------------------------------


def test_facts_parse_dotted_names_with_offsets() -> None:
    assert parse_facts("tests.passed, tests.count") == [FactDecl("tests.passed", 0),
                                                        FactDecl("tests.count", 14)]


@pytest.mark.parametrize(("text", "offset", "problem"), [
    ("tests passed", 0, "fact name 'tests passed' is not a dotted identifier"),
    ("a,,b", 2, "fact name '' is not a dotted identifier"),
    ("a,a", 2, "fact 'a' is declared twice"),
])
def test_facts_errors(text: str, offset: int, problem: str) -> None:
    err = failure(parse_facts, text)
    assert (err.attribute, err.offset, err.problem) == ("facts", offset, problem)


# -- probe kinds ----------------------------------------------------------------------


def test_probe_kinds_parse_and_deduplicate() -> None:
    assert parse_probe_kinds("pr, threads,pr,diff,worktree") == ("pr", "threads", "diff",
                                                                  "worktree")


@pytest.mark.parametrize(("text", "offset", "problem"), [
    ("pr,weather", 3, "unknown probe kind 'weather'"),
    ("", 0, "no probe kind"),
])
def test_probe_kind_errors(text: str, offset: int, problem: str) -> None:
    err = failure(parse_probe_kinds, text)
    assert (err.attribute, err.offset, err.problem) == ("probe", offset, problem)


# -- folders ----------------------------------------------------------------------------


def test_folder_list_parses_identifiers() -> None:
    assert parse_folder_list("web, api") == ("web", "api")


@pytest.mark.parametrize(("text", "offset", "problem"), [
    ("web,my-api", 4, "folder name 'my-api' is not an identifier"),
    ("web,pr", 4, "folder 'pr': 'pr.*' is written by probes"),
    ("goal", 0, "folder 'goal': 'goal' is an engine key"),
])
def test_folder_list_errors(text: str, offset: int, problem: str) -> None:
    err = failure(parse_folder_list, text)
    assert (err.attribute, err.offset, err.problem) == ("folders", offset, problem)


# -- reserved names -----------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "goal", "outcome", "failure_reason", "preferred_label", "last_stage", "last_response",
    "current_node", "current_work", "graph.goal", "inputs.x", "response.plan", "parallel.results",
    "internal.x", "human.gate.selected", "human.anything", "context.x", "pr.state",
    "threads.unresolved", "worktree.dirty", "diff.files", "web.pr.state", "x.worktree.head",
])
def test_reserved_names_are_refused_with_a_reason(name: str) -> None:
    assert reserved_reason(name) is not None


def test_folder_names_are_reserved_when_declared() -> None:
    assert reserved_reason("web.summary") is None
    assert reserved_reason("web.summary", folders=("web",)) is not None


@pytest.mark.parametrize("name", ["summary", "tests.passed", "review.verdict", "goals",
                                  "graphs.x", "prs"])
def test_ordinary_names_are_allowed(name: str) -> None:
    assert reserved_reason(name) is None


@given(st.one_of(
    st.sampled_from(["context", "human", "human.gate", "graph", "inputs", "response", "pr",
                     "threads", "diff", "worktree", "stack", "stack.child", "internal",
                     "parallel", "goal", "outcome", "web", "api", "summary"]),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}(\.[A-Za-z_][A-Za-z0-9_]{0,6}){0,2}",
                  fullmatch=True)),
       st.lists(st.sampled_from(["web", "api", "pr", "summary"]), max_size=2))
def test_reserved_reason_fast_path_agrees_with_the_full_walk(name: str,
                                                             folders: list[str]) -> None:
    """A plain name is let through without the walk only when the walk finds nothing."""
    assert reserved_reason(name, tuple(folders)) == _reserved_reason(name, tuple(folders))
