"""SPEC §14 "An agent changes the run only through its outputs and its worktree": an agent
(here a `command:` agent, tests/engine/run_dir_tamperer.py, whose process edits the run
directory inside its workspace) that rewrites what decides what runs next fails the run,
naming the file, before any later stage runs — through `delivery run` and `delivery
resume`, and with the state kept on a git ref (`--state`, the Action's store)."""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from engine_helpers import cli

TAMPERER = Path(__file__).with_name("run_dir_tamperer.py")

FLOW = """
digraph D {
  graph [goal="Ship it"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  implement [type=prompt, prompt="Implement it"]
  approve [shape=hexagon, label="Deploy to production?"]
  deploy [type=script, script="touch deployed"]
  start -> implement -> approve
  approve -> deploy [label="[Y] Yes"]
  approve -> exit [label="[N] No"]
  deploy -> exit
}
"""


def agent(what: str) -> str:
    return f"command:{shlex.quote(sys.executable)} {shlex.quote(str(TAMPERER))} {what}"


def start(tmp_path: Path, what: str, *extra: str | Path) -> tuple[int, dict[str, object]]:
    flow = tmp_path / "flow.dot"
    flow.write_text(FLOW, encoding="utf-8")
    code, out, _ = cli("run", flow, "--workspace", tmp_path, "--agent", agent(what),
                       "--gates", "pause", "--json", *extra, cwd=tmp_path)
    return code, json.loads(out)


def run_dir(tmp_path: Path) -> Path:
    [found] = (tmp_path / ".delivery" / "runs").iterdir()
    return found


@pytest.mark.parametrize(("what", "file"), [
    ("workflow", "workflow.dot"),
    ("answer", "run.json"),
    ("checkpoint", "checkpoint.json"),
    ("log", "events.jsonl"),
])
def test_an_agent_that_edits_the_run_directory_fails_the_run_naming_the_file(
        tmp_path: Path, what: str, file: str) -> None:
    code, report = start(tmp_path, what)
    assert (code, report["status"]) == (1, "failed")
    reason = str(report["failure_reason"])
    assert f"{file} (" in reason and "changed while stage 'implement' ran" in reason
    assert report["path"] == ["start", "implement"]  # the gate never ran
    resumed = cli("resume", "--last", cwd=tmp_path)
    assert resumed.code != 0 and "Traceback" not in resumed.err
    assert not (tmp_path / "deployed").exists()


def test_the_failure_is_a_stopped_run_not_a_routed_failure(tmp_path: Path) -> None:
    # A failure edge out of the agent's stage would run more stages: the run stops instead.
    flow = FLOW.replace("start -> implement -> approve",
                        "start -> implement\n  implement -> approve "
                        "[condition=\"outcome=succeeded\"]\n"
                        "  implement -> deploy [condition=\"outcome=failed\"]")
    (tmp_path / "flow.dot").write_text(flow, encoding="utf-8")
    code, out, _ = cli("run", tmp_path / "flow.dot", "--workspace", tmp_path, "--agent",
                       agent("answer"), "--gates", "pause", "--json", cwd=tmp_path)
    assert code == 1 and json.loads(out)["path"] == ["start", "implement"]
    assert not (tmp_path / "deployed").exists()


def test_an_untouched_run_pauses_at_the_gate_and_resumes_past_it(tmp_path: Path) -> None:
    code, report = start(tmp_path, "nothing")
    assert (code, report["status"]) == (3, "paused")
    resumed = cli("resume", "--last", "--answer", "approve=Y", cwd=tmp_path)
    assert resumed.code == 0, resumed.err
    assert (tmp_path / "deployed").exists()


def test_resume_refuses_a_workflow_copy_rewritten_with_run_json_s_digest(
        tmp_path: Path) -> None:
    # What a process left behind by the agent could do between two jobs: the copy and
    # run.json's digest rewritten together, the model cache removed.
    code, _ = start(tmp_path, "nothing")
    assert code == 3
    run = run_dir(tmp_path)
    copy = run / "workflow.dot"
    source = copy.read_text().replace("shape=hexagon", "shape=diamond")
    copy.write_text(source)
    info = json.loads((run / "run.json").read_text())
    info["workflow_sha256"] = hashlib.sha256(source.encode()).hexdigest()
    (run / "run.json").write_text(json.dumps(info))
    (run / "workflow.model.json").unlink()
    resumed = cli("resume", "--last", cwd=tmp_path)
    assert resumed.code == 2, resumed.out
    assert "workflow.dot" in resumed.err and "Traceback" not in resumed.err
    assert len(resumed.err.strip().splitlines()) == 1
    assert not (tmp_path / "deployed").exists()


def test_resume_uses_no_model_cache_other_than_the_one_the_run_started_with(
        tmp_path: Path) -> None:
    # The model cache is keyed by the copy's digest only: a forged one with the right key
    # would change what runs. The one written at the start is the only one trusted.
    code, _ = start(tmp_path, "nothing")
    assert code == 3
    run = run_dir(tmp_path)
    cache = run / "workflow.model.json"
    forged = cache.read_bytes().replace(b'"human",', b'"conditional",')  # no gate
    assert forged != cache.read_bytes()
    body = forged[:forged.rindex(b',"checksum":"')] + b"}"
    cache.write_bytes(body[:-1] + b',"checksum":"' +
                      hashlib.sha256(body).hexdigest().encode() + b'"}\n')
    resumed = cli("resume", "--last", "--json", cwd=tmp_path)
    assert resumed.code == 3, resumed.out
    assert json.loads(resumed.out)["status"] == "paused"
    assert not (tmp_path / "deployed").exists()


def test_with_the_state_on_a_git_ref_the_tampered_run_is_saved_as_failed(
        tmp_path: Path) -> None:
    state = tmp_path / "state.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(state)], check=True)
    code, report = start(tmp_path, "answer", "--state", state)
    assert (code, report["status"]) == (1, "failed")
    reason = str(report["failure_reason"])
    assert "run.json (" in reason and "changed while stage 'implement' ran" in reason
    # the next job, on another machine, finds the run ended: nothing runs
    other = tmp_path / "other"
    other.mkdir()
    resumed = cli("resume", str(report["run_id"]), "--state", state, "--workspace", other,
                  "--json", cwd=other)
    assert json.loads(resumed.out)["status"] == "failed", resumed.err
    assert not (other / "deployed").exists() and not (tmp_path / "deployed").exists()


def test_resume_refuses_a_log_whose_first_line_was_rewritten_with_the_copy(
        tmp_path: Path) -> None:
    # The digest of the start rewritten too (same length, so every offset holds): line 2
    # was chained to the line as the run wrote it.
    code, _ = start(tmp_path, "nothing")
    assert code == 3
    run = run_dir(tmp_path)
    copy = run / "workflow.dot"
    old = hashlib.sha256(copy.read_bytes()).hexdigest()
    source = copy.read_text().replace("shape=hexagon", "shape=diamond")
    copy.write_text(source)
    new = hashlib.sha256(source.encode()).hexdigest()
    for name in ("run.json", "events.jsonl"):
        path = run / name
        path.write_text(path.read_text().replace(old, new, 1))
    (run / "workflow.model.json").unlink()
    resumed = cli("resume", "--last", cwd=tmp_path)
    assert resumed.code == 2, resumed.out
    assert "events.jsonl: line 1" in resumed.err and "Traceback" not in resumed.err
    assert not (tmp_path / "deployed").exists()


def test_delivery_verify_reports_a_copy_that_is_not_the_one_the_run_started_with(
        tmp_path: Path) -> None:
    code, _ = start(tmp_path, "nothing")
    assert code == 3
    run = run_dir(tmp_path)
    assert cli("verify", run).code == 0
    copy = run / "workflow.dot"
    copy.write_text(copy.read_text().replace("shape=hexagon", "shape=diamond"))
    verified = cli("verify", run)
    assert verified.code != 0
    assert "workflow.dot: not the workflow the run started with" in verified.out + verified.err


PARALLEL = """
digraph P {
  graph [goal="Ship it"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  split [shape=component, max_parallel=1]
  first [type=script, script="%s"]
  second [type=script, script="touch second-ran"]
  join [shape=tripleoctagon]
  start -> split
  split -> first
  split -> second
  first -> join
  second -> join
  join -> exit
}
"""


def test_a_branch_that_edits_the_run_directory_stops_the_branches_not_started(
        tmp_path: Path) -> None:
    edit = "echo ' ' >> .delivery/runs/*/run.json"
    (tmp_path / "flow.dot").write_text(PARALLEL % edit, encoding="utf-8")
    code, out, _ = cli("run", tmp_path / "flow.dot", "--workspace", tmp_path, "--json",
                       cwd=tmp_path)
    report = json.loads(out)
    assert (code, report["status"]) == (1, "failed")
    assert "run.json (" in report["failure_reason"]
    assert "changed while stage 'first' ran" in report["failure_reason"]
    assert not (tmp_path / "second-ran").exists()


def test_lines_planted_in_the_log_s_tail_file_fail_the_run(tmp_path: Path) -> None:
    # what a resume would write back into the log, as if a power failure had taken them
    plant = "printf '%s' '{\\\"seq\\\":99}' >> .delivery/runs/*/events.tail"
    flow = FLOW.replace("implement [type=prompt, prompt=\"Implement it\"]",
                        f"implement [type=script, script=\"{plant}\"]")
    (tmp_path / "flow.dot").write_text(flow, encoding="utf-8")
    code, out, _ = cli("run", tmp_path / "flow.dot", "--workspace", tmp_path, "--gates",
                       "pause", "--json", cwd=tmp_path)
    assert code == 1
    assert "events.tail (" in json.loads(out)["failure_reason"]
