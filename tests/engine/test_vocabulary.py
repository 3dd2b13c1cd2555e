"""The run's vocabulary is typed (issue 35, item 3): what a run returns and records holds
enum members — a status, a pause's declared reason, the gate mode — while its JSON and
text stay the words they always were; an agent's outcome is a standard outcome (Attractor's
`fail` included) or a custom one, kept apart by type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from budget_helpers import events

from delivery.engine.budget import BudgetPause
from delivery.engine.child import ChildStopped
from delivery.engine.contracts import parse_reply
from delivery.engine.handlers.base import StageResult
from delivery.engine.runner import RunRequest, World, start_run
from delivery.errors import PauseReason, PauseRequested, RunRefused
from delivery.lang.outcomes import StageOutcome
from delivery.store.records import RunStatus
from delivery.testing.clock import FakeClock
from delivery.testing.runs import run_dot, write_flow

SCRIPT_FLOW = """
digraph g {
  start [shape=Mdiamond]; exit [shape=Msquare]
  work [type=script, script="echo working"]
  start -> work -> exit
}
"""

GATE_FLOW = """
digraph g {
  start [shape=Mdiamond]; exit [shape=Msquare]
  gate [shape=hexagon, label="Ship it?"]
  start -> gate
  gate -> exit [label="[A] Approve"]
}
"""


def test_a_finished_run_reports_its_status_as_the_enum_and_its_json_as_the_word(
        tmp_path: Path) -> None:
    ran = run_dot(tmp_path, SCRIPT_FLOW)
    assert ran.outcome.status is RunStatus.SUCCEEDED
    report = ran.outcome.to_json()
    assert type(report["status"]) is str and json.dumps(report["status"]) == '"succeeded"'


def test_a_run_paused_at_a_gate_carries_the_gate_reason(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, GATE_FLOW)
    paused = start_run(RunRequest(workflow=flow, workspace=tmp_path, gates="pause"),
                       World(clock=FakeClock()))
    assert paused.status is RunStatus.PAUSED
    assert paused.pause_reason is PauseReason.GATE
    assert paused.to_json()["reason"] == "gate"
    [event] = events(paused.run_dir, "run_paused")
    assert event["reason"] == "gate"


def test_a_gate_mode_outside_the_vocabulary_is_refused_before_the_run_starts(
        tmp_path: Path) -> None:
    flow = write_flow(tmp_path, SCRIPT_FLOW)
    with pytest.raises(RunRefused) as refused:
        start_run(RunRequest(workflow=flow, workspace=tmp_path, gates="ask"),
                  World(clock=FakeClock()))
    assert refused.value.subject == "RunRequest.gates"
    assert "deny, pause, managed" in refused.value.fix
    assert not (tmp_path / ".delivery" / "runs").exists()  # nothing was written


def test_each_pause_declares_its_reason_as_an_attribute() -> None:
    assert PauseRequested("gate", ["Approve"]).reason is PauseReason.GATE
    assert BudgetPause("polish", "over budget").reason is PauseReason.BUDGET
    stopped = ChildStopped("build", "stop condition held")
    assert stopped.reason is PauseReason.GATE and stopped.event_fields == {}
    assert "stopped by its manager before 'build'" in str(stopped)


def test_an_agents_attractor_spelling_of_failure_is_the_standard_failed_outcome() -> None:
    accepted = parse_reply('{"outcome": "fail", "failure_reason": "no tests"}', [], {})
    assert accepted.outcome is StageOutcome.FAILED
    assert accepted.failure_reason == "no tests"


def test_an_agents_custom_outcome_is_kept_apart_from_the_standard_ones() -> None:
    accepted = parse_reply('{"outcome": "needs_review", "context_updates": {}}', [], {})
    assert accepted.outcome == "needs_review"
    assert not isinstance(accepted.outcome, StageOutcome)


def test_a_stage_result_given_an_outcome_as_text_holds_what_it_names() -> None:
    assert StageResult("failed").outcome is StageOutcome.FAILED  # type: ignore[arg-type]
    custom = StageResult("yes").outcome  # type: ignore[arg-type]
    assert custom == "yes" and not isinstance(custom, StageOutcome)
