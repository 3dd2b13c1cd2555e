"""Scenario expectations: path patterns with "...", and the first divergence."""

from __future__ import annotations

from delivery.scenarios.expect import PathDivergence, check_expectation, first_divergence
from delivery.scenarios.model import Expectation


def test_exact_path_matches() -> None:
    assert first_divergence(["start", "a", "exit"], ["start", "a", "exit"]) is None


def test_ellipsis_matches_any_run_of_nodes_including_none() -> None:
    assert first_divergence(["start", "...", "exit"], ["start", "exit"]) is None
    assert first_divergence(["start", "...", "exit"], ["start", "a", "b", "a", "exit"]) is None
    assert first_divergence(["...", "b", "..."], ["a", "b", "c"]) is None


def test_divergence_names_step_expected_and_taken() -> None:
    assert first_divergence(["start", "a", "exit"], ["start", "b", "exit"]) == \
        PathDivergence(1, ("a",), "b")


def test_divergence_when_the_run_ends_early() -> None:
    assert first_divergence(["start", "a", "exit"], ["start", "a"]) == \
        PathDivergence(2, ("exit",), None)


def test_divergence_when_the_run_goes_on_past_the_pattern() -> None:
    assert first_divergence(["start", "exit"], ["start", "exit", "x"]) == \
        PathDivergence(2, (), "x")


def test_divergence_after_ellipsis_lists_what_could_follow() -> None:
    # after "...", the run may take any node; it only diverges when it ends without "merge"
    assert first_divergence(["start", "...", "merge", "exit"], ["start", "a", "exit"]) == \
        PathDivergence(3, ("merge",), None)


def test_context_values_compare_in_their_string_form() -> None:
    expect = Expectation(context={"tests.passed": True, "count": 3, "name": "x"})
    found = check_expectation(expect, status="succeeded", path=[],
                              context={"tests.passed": "true", "count": "3", "name": "y"},
                              failure_reason="")
    assert [m.message for m in found] == ["context name: expected 'x', got 'y'"]


def test_every_expectation_kind_reports_its_mismatch() -> None:
    expect = Expectation(status="succeeded", path=["start", "exit"], visits={"a": 2},
                         context={"k": "v"}, failure_reason="timed out")
    found = check_expectation(expect, status="failed", path=["start", "a", "exit"],
                              context={}, failure_reason="closed by a person")
    assert [m.what for m in found] == ["path", "status", "visits", "context", "failure_reason"]
    assert found[0].message == "path diverges at step 2: expected exit, took a"
    assert found[1].message == "status: expected succeeded, got failed (closed by a person)"
    assert found[2].message == "visits of a: expected 2, got 1"
    assert "never wrote it" in found[3].message
    assert "'timed out'" in found[4].message
