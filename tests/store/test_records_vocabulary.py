"""The run files' vocabulary read back typed: a status, a gate mode and the outcomes as
enum members (a workflow's own outcome apart, as a custom one), from files whose values are
the plain words earlier versions wrote; a word outside the vocabulary is refused with the
field named."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest

from delivery.errors import RunStoreError
from delivery.lang.outcomes import StageOutcome
from delivery.store.records import GateMode, RunInfo, RunState, RunStatus, StageRecord

# a checkpoint as an earlier version wrote it: every word a plain string
OLD_CHECKPOINT: dict[str, Any] = {
    "run_id": "r1", "next_node": "review", "context": {"goal": "ship"}, "initial": {},
    "path": ["start", "plan", "review"], "outcomes": {"plan": "succeeded",
                                                      "review": "needs_changes"},
    "attempts": {"plan": 1, "review": 1}, "answers_used": {}, "steps": 3,
    "status": "paused", "failure_reason": "waiting", "agent_state": {}, "usage": {},
    "agent_states": {}}
OLD_RUN_INFO: dict[str, Any] = {
    "run_id": "r1", "workflow": "flow.dot", "workflow_sha256": "0" * 64, "workspace": "/w",
    "started": "2026-01-01T00:00:00Z", "gates": "pause"}
RECORD: dict[str, Any] = {"next_node": "exit", "steps": 4, "status": "running",
                          "path_from": 3, "path_add": ["review"],
                          "outcomes": {"review": "needs_changes", "plan": "failed"}}


def test_an_earlier_checkpoint_reads_back_typed_and_writes_back_the_same_json() -> None:
    state = RunState.from_json(json.loads(json.dumps(OLD_CHECKPOINT)))
    assert state.status is RunStatus.PAUSED
    assert state.outcomes["plan"] is StageOutcome.SUCCEEDED
    assert json.dumps(state.to_json(), sort_keys=True) == json.dumps(OLD_CHECKPOINT,
                                                                     sort_keys=True)


@pytest.mark.parametrize("fields", [dict(RECORD), MappingProxyType(RECORD)],
                         ids=["one pass", "checking reader"])
def test_a_stage_records_custom_outcome_is_read_apart_from_the_standard_ones(
        fields: Any) -> None:
    record = StageRecord.from_fields(fields, "record 4")
    assert record.outcomes["plan"] is StageOutcome.FAILED
    assert record.outcomes["review"] == "needs_changes"
    assert not isinstance(record.outcomes["review"], StageOutcome)


def test_run_json_gates_read_back_as_a_gate_mode_and_write_back_as_the_word() -> None:
    info = RunInfo.from_json(dict(OLD_RUN_INFO))
    assert info.gates is GateMode.PAUSE
    assert json.loads(json.dumps(info.to_json()))["gates"] == "pause"


def test_a_gates_word_outside_the_vocabulary_is_refused_naming_the_field() -> None:
    with pytest.raises(RunStoreError) as refused:
        RunInfo.from_json({**OLD_RUN_INFO, "gates": "ask"})
    assert str(refused.value) == ("run.json: 'gates' should be one of deny, pause, managed, "
                                  "found 'ask'")
