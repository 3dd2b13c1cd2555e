"""Pausing at an unanswered human gate (`--gates pause`, exit 3) and resuming with answers."""

from __future__ import annotations

import io
import json
from pathlib import Path

from budget_helpers import events

from delivery.agents.replay import ReplayBackend
from delivery.cli.main import main
from delivery.engine.runner import RunRequest, World, resume_run, start_run
from delivery.store.runstore import verify_run
from delivery.testing import flow
from delivery.testing.clock import FakeClock

FLOW = flow("""
work [type=script, script="echo working"]
gate [shape=hexagon, label="Ship it?"]
fix  [type=script, script="echo fixing"]
start -> work -> gate
gate -> exit [label="[A] Approve"]
gate -> fix  [label="[F] Fix"]
fix -> gate
""", goal="ship")


def delivery(*args: str | Path) -> tuple[int, dict[str, object]]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args] + ["--json", "--quiet"], out=out, err=err)
    assert err.getvalue() == ""
    return code, json.loads(out.getvalue())


def start(tmp_path: Path, *extra: str) -> tuple[int, dict[str, object], Path]:
    workflow = tmp_path / "flow.dot"
    workflow.write_text(FLOW)
    run_dir = tmp_path / "run"
    code, report = delivery("run", workflow, "--workspace", tmp_path, "--run-dir", run_dir,
                            *extra)
    return code, report, run_dir


def test_an_unanswered_gate_pauses_the_run_with_exit_3(tmp_path: Path) -> None:
    code, report, run_dir = start(tmp_path, "--gates", "pause")
    assert code == 3
    assert report["status"] == "paused"
    assert report["path"] == ["start", "work"]
    assert "--answer gate=LABEL" in str(report["failure_reason"])
    assert verify_run(run_dir).ok


def test_resuming_without_an_answer_pauses_again(tmp_path: Path) -> None:
    _, _, run_dir = start(tmp_path, "--gates", "pause")
    code, report = delivery("resume", run_dir)
    assert code == 3 and report["status"] == "paused"


def test_each_answer_given_on_resume_answers_one_visit(tmp_path: Path) -> None:
    _, _, run_dir = start(tmp_path, "--gates", "pause")
    code, report = delivery("resume", run_dir, "--answer", "gate=F")
    assert code == 3  # fix looped back to the gate, which waits again
    assert report["path"] == ["start", "work", "gate", "fix"]
    code, report = delivery("resume", run_dir, "--answer", "gate=A")
    assert code == 0 and report["status"] == "succeeded"
    assert report["path"] == ["start", "work", "gate", "fix", "gate", "exit"]
    assert verify_run(run_dir).ok


def test_answers_given_at_the_start_are_taken_in_order(tmp_path: Path) -> None:
    code, report, _ = start(tmp_path, "--answer", "gate=F", "--answer", "gate=A")
    assert code == 0
    assert report["path"] == ["start", "work", "gate", "fix", "gate", "exit"]


def test_by_default_a_gate_whose_answers_are_used_up_is_denied(tmp_path: Path) -> None:
    code, report, _ = start(tmp_path, "--answer", "gate=F")
    assert code == 1
    assert report["status"] == "failed"
    assert "got no answer" in str(report["failure_reason"])


PARALLEL_FLOW = flow("""
fork [shape=component]
join [shape=tripleoctagon]
a [type=script, script="echo a"]
gate [shape=hexagon, label="OK?"]
start -> fork
fork -> a -> join
fork -> gate
gate -> join [label="Yes"]
join -> exit
""")


def test_a_gate_inside_a_branch_pauses_before_the_parallel_section(tmp_path: Path) -> None:
    workflow = tmp_path / "flow.dot"
    workflow.write_text(PARALLEL_FLOW)
    run_dir = tmp_path / "run"
    code, report = delivery("run", workflow, "--workspace", tmp_path, "--run-dir", run_dir,
                            "--gates", "pause")
    assert code == 3 and report["path"] == ["start"]
    code, report = delivery("resume", run_dir, "--answer", "gate=Yes")
    assert code == 0
    assert report["path"] == ["start", "fork", "a", "gate", "join", "exit"]


def test_the_time_an_answer_was_received_is_read_from_the_runs_clock(tmp_path: Path) -> None:
    workflow = tmp_path / "flow.dot"
    workflow.write_text(FLOW)
    clock = FakeClock()
    world = World(agent=ReplayBackend({}), clock=clock)
    request = RunRequest(workflow=workflow, workspace=tmp_path, run_dir=tmp_path / "run",
                         gates="pause")
    assert start_run(request, world).status == "paused"
    clock.advance(3 * 3600 + 25)  # the clock the run is given, nowhere near today
    resumed = resume_run(tmp_path / "run", world, {"gate": "A"}, answered_by="github:alice")
    assert resumed.status == "succeeded", resumed.failure_reason
    [received] = events(tmp_path / "run", "answer_received")
    assert received["by"] == "github:alice"
    assert received["at"] == "2026-01-01T03:00:25Z"
