"""The Attractor view of a run (`delivery run --logs DIR`, docs/attractor.md): after a
finished, a failed and a resumed run, every file of DIR is checked against the Attractor
spec's field lists (§5.6 layout, §5.3 checkpoint, Appendix C status file)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import pytest
from engine_helpers import FakeClock, cli, reply
from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr

from delivery.agents.replay import ReplayBackend
from delivery.engine.interviewer import ScriptedInterviewer
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.errors import RunRefused

HERE = Path(__file__).parent


class Manifest(BaseModel):
    """§5.6: pipeline metadata (name, goal, start time); delivery adds where its run is."""

    model_config = ConfigDict(extra="allow", strict=True)
    name: StrictStr
    goal: StrictStr
    start_time: StrictStr


class Checkpoint(BaseModel):
    """§5.3: the fields Checkpoint.save writes."""

    model_config = ConfigDict(extra="forbid", strict=True)
    timestamp: StrictStr
    current_node: StrictStr
    completed_nodes: list[StrictStr]
    node_retries: dict[StrictStr, StrictInt]
    context: dict[StrictStr, Any]
    logs: list[StrictStr]


class Status(BaseModel):
    """Appendix C: the status file contract (failure_reason is §5.2's Outcome field)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    outcome: Literal["success", "retry", "fail", "partial_success", "skipped"]
    preferred_next_label: StrictStr = ""
    suggested_next_ids: list[StrictStr] = []
    context_updates: dict[StrictStr, Any] = {}
    notes: StrictStr = ""
    failure_reason: StrictStr = ""


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _checked_view(logs: Path, outcome: RunOutcome) -> tuple[Manifest, Checkpoint,
                                                            dict[str, Status]]:
    """Every file of the view parsed by its spec model; the layout is §5.6's."""
    manifest = Manifest.model_validate(_read(logs / "manifest.json"))
    checkpoint = Checkpoint.model_validate(_read(logs / "checkpoint.json"))
    datetime.fromisoformat(checkpoint.timestamp)
    statuses = {}
    for node_dir in sorted(p for p in logs.iterdir() if p.is_dir() and p != outcome.run_dir):
        statuses[node_dir.name] = Status.model_validate(_read(node_dir / "status.json"))
        extra = {p.name for p in node_dir.iterdir()} - {"status.json", "prompt.md",
                                                          "response.md"}
        assert extra == set(), node_dir
    assert checkpoint.completed_nodes == [n for n in outcome.path if n not in ("exit", "done")]
    assert checkpoint.current_node == checkpoint.completed_nodes[-1]
    assert set(statuses) == set(checkpoint.completed_nodes)
    assert checkpoint.context["outcome"] == outcome.context["outcome"]
    return manifest, checkpoint, statuses


def _run(tmp_path: Path, dot: str, replies: dict[str, list[str]],
         answers: dict[str, list[str]] | None = None, gates: str = "deny") -> RunOutcome:
    world = World(agent=ReplayBackend(replies), clock=FakeClock(),
                  interviewer=ScriptedInterviewer(answers or {}) if gates == "deny" else None)
    return start_run(RunRequest(workflow=HERE / dot, workspace=tmp_path, gates=gates,
                                run_dir=tmp_path / "logs" / "run", logs=tmp_path / "logs"),
                     world)


def test_a_finished_run_has_the_attractor_layout(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "spec_branching.dot", {
        "plan": [reply()], "implement": [reply(), reply()],
        "validate": [reply(outcome="fail", failure_reason="2 tests fail"), reply()]})
    assert outcome.status == "succeeded", outcome.failure_reason
    logs = tmp_path / "logs"
    manifest, checkpoint, statuses = _checked_view(logs, outcome)
    assert manifest.name == "Branch" and manifest.goal
    assert statuses["validate"].outcome == "success"  # the last attempt's status
    assert statuses["plan"].outcome == "success"
    assert checkpoint.completed_nodes.count("validate") == 2
    prompt = (logs / "plan" / "prompt.md").read_text(encoding="utf-8")
    assert prompt == (outcome.run_dir / "plan" / "1" / "prompt.md").read_text(encoding="utf-8")
    assert "Done." in (logs / "plan" / "response.md").read_text(encoding="utf-8")


def test_a_failed_run_records_the_failed_stage_in_the_spec_names(tmp_path: Path) -> None:
    outcome = _run(tmp_path, "goal_gate_unmet.dot", {
        "implement": [reply()],
        "verify": [reply(outcome="fail", failure_reason="3 tests fail")]})
    assert outcome.status == "failed"
    _, checkpoint, statuses = _checked_view(tmp_path / "logs", outcome)
    verify = statuses["verify"]
    assert (verify.outcome, verify.failure_reason, verify.notes) == (
        "fail", "3 tests fail", "3 tests fail")
    assert checkpoint.current_node == "verify"
    assert checkpoint.context["failure_class"] == "deterministic"


def test_retries_are_counted_per_node(tmp_path: Path) -> None:
    dot = tmp_path / "retry.dot"
    dot.write_text('digraph R { start [shape=Mdiamond]  exit [shape=Msquare]\n'
                   '  work [prompt="w", max_retries=2]\n  start -> work -> exit }\n',
                   encoding="utf-8")
    outcome = _run(tmp_path, str(dot), {"work": [reply(outcome="retry"), reply()]})
    assert outcome.status == "succeeded", outcome.failure_reason
    _, checkpoint, statuses = _checked_view(tmp_path / "logs", outcome)
    assert checkpoint.node_retries == {"start": 0, "work": 1}
    assert statuses["work"].outcome == "success"


def test_a_resumed_run_keeps_writing_the_view(tmp_path: Path) -> None:
    paused = _run(tmp_path, "spec_human_gate.dot", {"ship_it": [reply()]}, gates="pause")
    assert paused.status == "paused"
    logs = tmp_path / "logs"
    first = Manifest.model_validate(_read(logs / "manifest.json"))
    before = Checkpoint.model_validate(_read(logs / "checkpoint.json"))
    assert before.completed_nodes == ["start"]
    world = World(agent=ReplayBackend({"ship_it": [reply()]}), clock=FakeClock())
    resumed = resume_run(paused.run_dir, world, {"review_gate": "[A] Approve"})
    assert resumed.status == "succeeded", resumed.failure_reason
    manifest, checkpoint, statuses = _checked_view(logs, resumed)
    assert manifest == first  # written once, when the run started
    assert checkpoint.completed_nodes == ["start", "review_gate", "ship_it"]
    assert statuses["review_gate"].preferred_next_label == "[A] Approve"
    assert checkpoint.context["human.gate.label"] == "[A] Approve"


def test_without_logs_no_view_is_written(tmp_path: Path) -> None:
    world = World(agent=ReplayBackend({"run_tests": [reply()], "report": [reply()]}),
                  clock=FakeClock())
    outcome = start_run(RunRequest(workflow=HERE / "spec_simple_linear.dot",
                                   workspace=tmp_path, run_dir=tmp_path / "run"), world)
    assert outcome.status == "succeeded"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert "logs" not in _read(outcome.run_dir / "run.json")
    assert not (outcome.run_dir / "manifest.json").exists()


def test_logs_that_are_the_run_directory_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RunRefused, match="own directory, whose checkpoint"):
        start_run(RunRequest(workflow=HERE / "spec_simple_linear.dot", workspace=tmp_path,
                             run_dir=tmp_path / "same", logs=tmp_path / "same"),
                  World(agent=ReplayBackend({}), clock=FakeClock()))


def test_the_cli_writes_the_view_with_logs(tmp_path: Path) -> None:
    flow = tmp_path / "tool.dot"
    flow.write_text('digraph T { start [shape=Mdiamond]  exit [shape=Msquare]\n'
                    '  check [shape=parallelogram, tool_command="echo fine"]\n'
                    '  start -> check -> exit }\n', encoding="utf-8")
    code, _, err = cli("run", str(flow), "--workspace", str(tmp_path), "--logs",
                       str(tmp_path / "view"), "--run-dir", str(tmp_path / "view" / "run"))
    assert code == 0, err
    status = Status.model_validate(_read(tmp_path / "view" / "check" / "status.json"))
    assert status.context_updates["tool.output"] == "fine"
    checkpoint = Checkpoint.model_validate(_read(tmp_path / "view" / "checkpoint.json"))
    assert checkpoint.completed_nodes == ["start", "check"]
