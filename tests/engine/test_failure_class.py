"""Attractor's failure_class and failure_signature (SPEC §3): written with every failed
stage, emptied by a success, readable by conditions on failure paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_helpers import reply, run_flow

from delivery.engine.failures import (
    BUDGET_EXHAUSTED,
    CANCELED,
    DETERMINISTIC,
    TRANSIENT_INFRA,
    failure_class,
    failure_signature,
)
from delivery.testing import flow
from delivery.validation.loader import check_source

ONE_CHECK = flow("""
check [shape=parallelogram, tool_command="echo 'SCRIPT' >&2; exit 1"]
after [shape=parallelogram, tool_command="echo {{ failure_class }}"]
start -> check
check -> after [condition="outcome=fail"]
after -> exit
""", goal=None)


@pytest.mark.parametrize(("reason", "expected"), [
    ("script exited with code 1: curl: (7) Connection refused", TRANSIENT_INFRA),
    ("the agent command timed out after 30s and was stopped", TRANSIENT_INFRA),
    ("HTTP 503 from the model API", TRANSIENT_INFRA),
    ("rate limit reached", TRANSIENT_INFRA),
    ("script exited with code 1: FAIL test_parser", DETERMINISTIC),
    ("", DETERMINISTIC),
    ("the stage asked to be retried; max retries (2) exceeded", BUDGET_EXHAUSTED),
    ("branch cancelled: another branch succeeded first", CANCELED),
])
def test_a_failure_reason_gets_its_attractor_class(reason: str, expected: str) -> None:
    assert failure_class(reason) == expected


def test_the_signature_matches_the_same_failure_with_other_numbers() -> None:
    first = failure_signature("check", DETERMINISTIC, "3 tests fail")
    assert first == failure_signature("check", DETERMINISTIC, "4 tests  fail")
    assert first != failure_signature("check", DETERMINISTIC, "the build broke")
    assert first != failure_signature("other", DETERMINISTIC, "3 tests fail")
    assert len(first) == 24 and int(first, 16) >= 0


def test_the_next_stage_reads_the_class_and_a_success_empties_it(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, ONE_CHECK.replace("SCRIPT", "network is unreachable"))
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["tool.output"] == TRANSIENT_INFRA  # what `after` read
    # `after` succeeded last: the keys are empty again, as failure_reason is
    assert ran.context["failure_class"] == "" and ran.context["failure_signature"] == ""


def test_a_run_ending_on_a_failure_keeps_the_class_in_its_context(tmp_path: Path) -> None:
    dot = flow("""
    work [prompt="work"]
    start -> work -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, replies={"work": [reply(outcome="fail",
                                                          failure_reason="FAIL test_parser")]})
    assert ran.status == "failed"
    assert ran.context["failure_class"] == DETERMINISTIC
    assert ran.context["failure_signature"] == failure_signature(
        "work", DETERMINISTIC, "FAIL test_parser")


def test_a_condition_on_failure_class_after_a_failure_validates(tmp_path: Path) -> None:
    dot = flow("""
    check [shape=parallelogram, tool_command="true"]
    fix [prompt="fix"]
    start -> check
    check -> exit [condition="outcome=success"]
    check -> check [condition="outcome=fail && context.failure_class=transient_infra"]
    check -> fix [condition="outcome=fail && context.failure_class!=transient_infra"]
    fix -> check
    """, goal=None)
    _, diagnostics = check_source(dot, "flow.dot")
    assert [d for d in diagnostics if d.severity == "error"] == []
