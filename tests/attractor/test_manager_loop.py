"""The manager loop beyond the corpus runs: resumable like any stage (the process killed
while the child runs, `delivery resume` resumes that child and never starts a second one —
manager_loop_resumable.dot, manager_child_killed.dot); an invalid child refuses the run; the
child's workdir and inputs; a missing child file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from engine_helpers import run_flow

HERE = Path(__file__).parent
DELIVERY = str(Path(sys.executable).parent / "delivery")


def _delivery(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DELIVERY, *args], cwd=workspace, capture_output=True, text=True,
                          timeout=120, check=False)


def _event_types(run_dir: Path) -> list[str]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["type"] for line in lines if line.strip()]


def test_a_killed_manager_resumes_its_child_and_never_starts_a_second(tmp_path: Path) -> None:
    shutil.copyfile(HERE / "manager_child_killed.dot", tmp_path / "manager_child_killed.dot")
    run_dir = tmp_path / "run"
    killed = _delivery(tmp_path, "run", str(HERE / "manager_loop_resumable.dot"),
                       "--run-dir", str(run_dir))
    assert killed.returncode == -9, killed.stderr  # the child's stage killed the process
    assert (tmp_path / "trace").read_text(encoding="utf-8") == "one\n"

    resumed = _delivery(tmp_path, "resume", str(run_dir), "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "succeeded" and result["path"] == ["start", "supervise", "exit"]
    assert result["context"]["stack.child.status"] == "completed"
    # the interrupted child stage ran again; the finished one did not
    assert (tmp_path / "trace").read_text(encoding="utf-8") == "one\ntwo\n"
    children = sorted(p.parent.relative_to(run_dir) for p in run_dir.rglob("run.json")
                      if p.parent != run_dir)
    assert children == [Path("supervise/1/child")]
    child_events = _event_types(run_dir / "supervise" / "1" / "child")
    assert child_events.count("run_started") == 1 and child_events.count("run_resumed") == 1
    assert result["context"]["stack.child.run_dir"] == str(run_dir / "supervise/1/child")


def test_a_child_pipeline_that_does_not_validate_refuses_the_run(tmp_path: Path) -> None:
    (tmp_path / "manager_child_killed.dot").write_text(
        "digraph Broken { start [shape=Mdiamond]  start -> nowhere }\n", encoding="utf-8")
    refused = _delivery(tmp_path, "run", str(HERE / "manager_loop_resumable.dot"),
                        "--run-dir", str(tmp_path / "run"))
    assert refused.returncode == 2, refused.stderr
    assert "manager loop 'supervise'" in refused.stderr and "does not validate" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "run").exists()


MANAGER = """
digraph M {
  graph [goal="g", stack.child_dotfile="CHILD", stack.child_workdir="WORKDIR"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  boss [shape=house, manager.actions="observe"]
  start -> boss -> exit
}
"""
CHILD = """digraph C {
  graph [inputs="ticket"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  note [shape=parallelogram, script="pwd > where; echo {{ ticket }} >> where"]
  start -> note -> exit
}
"""


def test_the_child_runs_in_its_workdir_with_the_inputs_it_declares(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "child.dot").write_text(CHILD, encoding="utf-8")
    dot = MANAGER.replace("CHILD", "child.dot").replace("WORKDIR", "sub") \
        .replace('goal="g"', 'goal="g", inputs="ticket"')
    ran = run_flow(tmp_path, dot, inputs={"ticket": "T-7"})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    where = (tmp_path / "sub" / "where").read_text(encoding="utf-8").split()
    assert where == [str((tmp_path / "sub").resolve()), "T-7"]
    # without `wait`, every child stage boundary is an observation: start and note
    assert ran.context["stack.child.cycles"] == 2


def test_a_missing_child_pipeline_fails_the_stage_naming_the_path(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, MANAGER.replace("CHILD", "later.dot").replace("WORKDIR", "."))
    assert ran.status == "failed"
    assert "later.dot does not exist" in ran.outcome.failure_reason
    assert ran.context["failure_class"] == "deterministic"


def test_a_pipeline_that_supervises_itself_fails_instead_of_nesting_without_end(
        tmp_path: Path) -> None:
    dot = MANAGER.replace("CHILD", "flow.dot").replace("WORKDIR", ".")
    ran = run_flow(tmp_path, dot)  # run_flow writes the workflow as flow.dot
    assert ran.status == "failed"
    reason = ran.outcome.failure_reason
    assert "supervises itself" in reason and "flow.dot" in reason, reason
    # the first child was refused: no run directory below the parent's
    assert [p.parent for p in ran.outcome.run_dir.rglob("run.json")] == [ran.outcome.run_dir]


def test_a_child_that_supervises_its_own_manager_fails_at_the_first_repeat(
        tmp_path: Path) -> None:
    (tmp_path / "child.dot").write_text(
        MANAGER.replace("CHILD", "flow.dot").replace("WORKDIR", "."), encoding="utf-8")
    ran = run_flow(tmp_path, MANAGER.replace("CHILD", "child.dot").replace("WORKDIR", "."))
    assert ran.status == "failed"
    assert "supervises itself" in ran.outcome.failure_reason
    children = [p.parent.relative_to(ran.outcome.run_dir)
                for p in ran.outcome.run_dir.rglob("run.json")
                if p.parent != ran.outcome.run_dir]
    assert children == [Path("boss/1/child")]
