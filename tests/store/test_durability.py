"""Crash tests (SPEC §11): a run killed with SIGKILL anywhere resumes to the same end.

The workflow (`durability_driver.FLOW`) has nine stages besides start and exit: prompt
and agent nodes on the replay backend (one reply needs a correction turn), scripts that
write facts (one over 100 KB, offloaded to the artifact store; one failing and routed on
its failure), a conditional and a review loop. It is run once without interruption; then
the same run is killed at one point at a time and resumed with `delivery resume --json`,
and the outcome (status, path, context) must be the uninterrupted one, every reply of
the replay file consumed exactly as often, and `delivery verify` must pass.

Kill points are hit exactly, without sleeps:
- from outside: a script stage (`stage.sh`) marks its visit and holds (bounded) so
  that the test, polling for the mark with a deadline, SIGKILLs the run (and the script's
  process group) while that stage runs;
- from inside: `durability_driver.py` runs the CLI and SIGKILLs its own process right
  after a given checkpoint, event or stage file, or in the middle of writing one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from durability_driver import REPLIES, write_workspace

from delivery.store.runstore import LocalRunStore
from delivery.testing import flow
from delivery.testing.cli import invoke as cli

pytestmark = pytest.mark.slow  # every test kills and resumes runs in child processes

TESTS = Path(__file__).resolve().parents[1]
DRIVER = TESTS / "durability_driver.py"
DELIVERY = Path(sys.executable).with_name("delivery")
DEADLINE = 30.0  # seconds; every wait below gives up (and fails) after this
RUN_ARGS = ("--agent", "replay:replies.json", "--input", "ticket=T-1", "--json", "--full")
# Keys whose values legitimately differ between two runs of the same workflow.
VOLATILE = frozenset({"internal.run_id"})


# -- helpers ----------------------------------------------------------------------------
def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DURABILITY_KILL", "DURABILITY_GATES", "DURABILITY_HOLD")}
    env.update(extra)
    return env


def delivery(*args: str | Path, cwd: Path, timeout: float = DEADLINE,
             **env: str) -> subprocess.CompletedProcess[str]:
    """The installed `delivery` command, in a subprocess."""
    return subprocess.run([str(DELIVERY), *map(str, args)], cwd=cwd, env=_env(**env),
                          capture_output=True, text=True, timeout=timeout, check=False)


def killed_by_driver(kill: str, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`delivery ARGS` in a subprocess that SIGKILLs itself at the kill point `kill`."""
    done = subprocess.run([sys.executable, str(DRIVER), *map(str, args)], cwd=cwd,
                          env=_env(DURABILITY_KILL=kill), capture_output=True, text=True,
                          timeout=DEADLINE, check=False)
    assert done.returncode == -signal.SIGKILL, (
        f"kill point {kill} was not reached (exit {done.returncode}): {done.stderr[-2000:]}")
    return done


def wait_for(path: Path, proc: subprocess.Popen[str]) -> str:
    """The content of `path` once it exists; fails at the deadline or if `proc` ends first."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text(encoding="utf-8")
        if proc.poll() is not None:
            pytest.fail(f"the run ended (exit {proc.returncode}) before {path.name} appeared")
        time.sleep(0.02)
    pytest.fail(f"{path} did not appear within {DEADLINE}s")


def kill_during_script(workspace: Path, run_dir: Path, hold: str,
                       *args: str | Path) -> None:
    """Start `delivery ARGS`, SIGKILL it while the gated stage visit `hold` runs."""
    gates = run_dir.parent / f"gates-{run_dir.name}-{hold}"
    gates.mkdir()
    proc = subprocess.Popen([str(DELIVERY), *map(str, args)], cwd=workspace,
                            env=_env(DURABILITY_GATES=str(gates), DURABILITY_HOLD=hold),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        script_group = os.getpgid(int(wait_for(gates / hold, proc).strip()))
        os.kill(proc.pid, signal.SIGKILL)
        # The script runs in its own session; a crash of the machine takes it down too.
        assert script_group not in (os.getpgrp(), proc.pid)
        os.killpg(script_group, signal.SIGKILL)
    finally:
        (gates / "release").touch()
        proc.kill()
        _, stderr = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == -signal.SIGKILL, stderr


def outcome(report: Mapping[str, Any]) -> dict[str, Any]:
    context = {k: v for k, v in report["context"].items() if k not in VOLATILE}
    return {"status": report["status"], "failure_reason": report["failure_reason"],
            "path": report["path"], "context": context}


def checkpoint(run_dir: Path) -> dict[str, Any]:
    """The state a resume would start from (the snapshot and the records after it)."""
    loaded = LocalRunStore.open_dir(run_dir).load()
    assert loaded is not None, f"{run_dir} has no saved state"
    return loaded.state.to_json()


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]




def verify(run_dir: Path) -> tuple[int, str]:
    code, out, err = cli("verify", run_dir)
    return code, out + err


def resume(workspace: Path, run_dir: Path) -> tuple[int, dict[str, Any]]:
    done = delivery("resume", run_dir, "--json", "--full", cwd=workspace)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip(), f"resume printed no report (exit {done.returncode}): " \
        f"{done.stderr[-2000:]}"
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def assert_same_outcome(got: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    mine, theirs = outcome(got), outcome(expected)
    # Compare the 100 KB value on its own so that a failure does not print it whole.
    blob, blob_expected = mine["context"].pop("build.blob"), theirs["context"].pop("build.blob")
    assert mine == theirs
    assert len(blob) == len(blob_expected) > 100 * 1024
    assert blob == blob_expected


# -- the uninterrupted run --------------------------------------------------------------
@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_workspace(tmp_path_factory.mktemp("durability"))


@pytest.fixture(scope="module")
def baseline(workspace: Path) -> dict[str, Any]:
    run_dir = workspace / "runs" / "baseline"
    done = delivery("run", "flow.dot", *RUN_ARGS, "--run-dir", run_dir, cwd=workspace)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    report["cursors"] = checkpoint(run_dir)["agent_state"]["cursors"]
    return report


@pytest.fixture
def run_dir(workspace: Path, request: pytest.FixtureRequest) -> Path:
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)
    return workspace / "runs" / name


def test_the_uninterrupted_run_is_non_trivial(baseline: dict[str, Any], workspace: Path) -> None:
    assert baseline["status"] == "succeeded"
    assert baseline["path"] == ["start", "plan", "build", "check", "implement", "test", "review",
                                "fix", "test", "review", "audit", "ship", "exit"]
    context = baseline["context"]
    assert context["summary"] == "second, better cut"
    assert context["tests.count"] == "18"  # the second visit of `test` saw fix's summary
    assert context["audit.failed"] is True and context["audit.issues"] == "2"
    assert context["shipped.tag"] == "v1-3"
    assert context["internal.run_id"] == baseline["run_id"]
    # every scripted reply was used, the malformed one through a correction turn
    assert baseline["cursors"] == {node: len(replies) for node, replies in REPLIES.items()}
    stored = checkpoint(Path(baseline["run_dir"]))["context"]["build.blob"]
    assert stored.startswith("file://"), "the 100 KB fact should be offloaded"
    assert verify(Path(baseline["run_dir"]))[0] == 0


def assert_resumes_to_baseline(workspace: Path, run_dir: Path,
                               baseline: Mapping[str, Any]) -> dict[str, Any]:
    code, report = resume(workspace, run_dir)
    assert code == 0
    assert report["run_dir"] == str(run_dir.resolve())
    assert_same_outcome(report, baseline)
    assert checkpoint(run_dir)["agent_state"]["cursors"] == baseline["cursors"]
    status, message = verify(run_dir)
    assert status == 0, message
    # the log tells the story: it was resumed, and finished exactly once after that
    log = events(run_dir)
    resumed_at = max(i for i, e in enumerate(log) if e["type"] == "run_resumed")
    assert [e["type"] for e in log[resumed_at:]].count("run_finished") == 1
    # the run's last words: run_finished, then the final stage record saying so
    assert log[-2]["type"] == "run_finished" and log[-2]["status"] == "succeeded"
    assert log[-1]["type"] == "state" and log[-1]["status"] == "succeeded"
    return report


# -- one kill, then resume ---------------------------------------------------------------
# (kill point, next_node in the state the killed run left behind)
SELF_KILLS: Sequence[tuple[str, str]] = (
    # right after the stage record that hands over to the agent stage
    ("saved:implement", "implement"),
    # inside the agent stage, its prompt written, the agent not yet asked
    ("stage-file:implement:prompt.md", "implement"),
    # inside the agent stage after the agent replied twice (one correction turn) — the
    # replay cursor advanced in memory but not in the checkpoint
    ("stage-file:implement:response.md", "implement"),
    # a script stage finished and logged it, its result not yet checkpointed
    ("event:stage_finished:build", "build"),
    # right after the record that starts the second turn of the loop
    ("saved:test:2", "test"),
    # in the middle of writing the next stage record: half a line, cut on resume
    ("record-torn:fix", "review"),
    # right after the run's first snapshot (checkpoint.json) was written
    ("snapshot:1", "start"),
    # after run_finished was logged, before the final record
    ("event:run_finished", "exit"),
)


@pytest.mark.parametrize(("kill", "next_node"), SELF_KILLS, ids=[k for k, _ in SELF_KILLS])
def test_a_run_killed_at_a_precise_point_resumes_to_the_same_end(
        kill: str, next_node: str, workspace: Path, run_dir: Path,
        baseline: dict[str, Any]) -> None:
    killed_by_driver(kill, "run", "flow.dot", *RUN_ARGS, "--run-dir", run_dir, cwd=workspace)
    left = checkpoint(run_dir)
    assert (left["status"], left["next_node"]) == ("running", next_node)
    if kill.startswith("record-torn"):  # the half-written record is not taken for one
        assert not (run_dir / "events.jsonl").read_bytes().endswith(b"\n")
        assert "incomplete" in verify(run_dir)[1]
    else:
        assert verify(run_dir)[0] == 0  # a kill between lines leaves an intact chain

    assert_resumes_to_baseline(workspace, run_dir, baseline)


@pytest.mark.parametrize("hold", ["build.1", "test.2"])
def test_a_run_killed_while_a_script_runs_resumes_to_the_same_end(
        hold: str, workspace: Path, run_dir: Path, baseline: dict[str, Any]) -> None:
    kill_during_script(workspace, run_dir, hold, "run", "flow.dot", *RUN_ARGS,
                       "--run-dir", run_dir)
    stage, visit = hold.split(".")
    left = checkpoint(run_dir)
    assert (left["status"], left["next_node"]) == ("running", stage)
    started = [e for e in events(run_dir) if e["type"] == "stage_started"]
    assert started[-1]["node"] == stage  # it died inside the stage: no stage_finished
    assert [e["node"] for e in started].count(stage) == int(visit)
    assert not any(e["type"] == "stage_finished" and e["node"] == stage
                   and e["attempt"] == int(visit) for e in events(run_dir))

    assert_resumes_to_baseline(workspace, run_dir, baseline)
    assert (run_dir / stage / visit / "status.json").is_file()


def test_a_torn_event_line_is_reported_by_verify_and_repaired_by_resume(
        workspace: Path, run_dir: Path, baseline: dict[str, Any]) -> None:
    killed_by_driver("event-torn:stage_started:review:2", "run", "flow.dot", *RUN_ARGS,
                     "--run-dir", run_dir, cwd=workspace)
    lines = (run_dir / "events.jsonl").read_bytes().split(b"\n")
    torn_line = len(lines)
    assert lines[-1].startswith(b'{"seq":') and not lines[-1].endswith(b"}")  # half a line
    status, message = verify(run_dir)
    assert status == 1
    assert f"line {torn_line}: incomplete" in message

    assert_resumes_to_baseline(workspace, run_dir, baseline)
    repaired = [e for e in events(run_dir) if e["type"] == "log_repaired"]
    assert len(repaired) == 1 and repaired[0]["dropped_bytes"] == len(lines[-1])


def test_several_kills_and_resumes_in_a_row_reach_the_same_end(
        workspace: Path, run_dir: Path, baseline: dict[str, Any]) -> None:
    kill_during_script(workspace, run_dir, "build.1", "run", "flow.dot", *RUN_ARGS,
                       "--run-dir", run_dir)
    # each resume is killed further on, including a resume killed in the stage it re-runs
    for kill, next_node in (("stage-file:build:status.json", "build"),
                            ("stage-file:fix:response.md", "fix"),
                            ("event-torn:stage_started:ship", "ship"),
                            ("record-torn:exit", "ship")):
        killed_by_driver(kill, "resume", run_dir, "--json", cwd=workspace)
        assert checkpoint(run_dir)["next_node"] == next_node, kill
    assert_resumes_to_baseline(workspace, run_dir, baseline)
    log = events(run_dir)
    assert [e["type"] for e in log].count("run_resumed") == 5
    assert [e["type"] for e in log].count("log_repaired") == 2
    assert [e["type"] for e in log].count("run_started") == 1


def test_resume_is_refused_while_the_run_is_still_going(
        workspace: Path, run_dir: Path, baseline: dict[str, Any]) -> None:
    gates = run_dir.parent / f"gates-{run_dir.name}"
    gates.mkdir()
    proc = subprocess.Popen([str(DELIVERY), "run", "flow.dot", *RUN_ARGS, "--run-dir",
                             str(run_dir)], cwd=workspace,
                            env=_env(DURABILITY_GATES=str(gates), DURABILITY_HOLD="test.1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(gates / "test.1", proc)
        before = (run_dir / "events.jsonl").read_bytes()
        second = delivery("resume", run_dir, "--json", cwd=workspace)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "another process" in second.stderr and "Traceback" not in second.stderr
        assert second.stdout == ""
        assert (run_dir / "events.jsonl").read_bytes() == before
    finally:
        (gates / "release").touch()
        stdout, stderr = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0, stderr
    assert_same_outcome(json.loads(stdout), baseline)
    assert verify(run_dir)[0] == 0


def test_a_killed_run_moved_to_another_directory_resumes_there(
        workspace: Path, run_dir: Path, baseline: dict[str, Any]) -> None:
    killed_by_driver("saved:test:2", "run", "flow.dot", *RUN_ARGS, "--run-dir", run_dir,
                     cwd=workspace)
    assert checkpoint(run_dir)["context"]["build.blob"].startswith(f"file://{run_dir}")
    moved = run_dir.with_name(run_dir.name + "-moved")
    run_dir.rename(moved)  # e.g. restored elsewhere by the next CI job
    assert_resumes_to_baseline(workspace, moved, baseline)
    assert checkpoint(moved)["context"]["build.blob"].startswith(f"file://{moved}/")


# -- parallel sections, loop restarts and retries ------------------------------------------
# `flaky` fails its first attempt (it reads its attempt number off $DELIVERY_FACTS's path)
# and is retried after a backoff; `summary` sends the run round again with a loop restart.
SECTIONS = flow(r"""
split [shape=component, max_parallel=2]
sec   [prompt="Assess security", outputs="assessment:text"]
perf  [type=script, facts="bench.ms", script="echo bench.ms=42 >> \"$DELIVERY_FACTS\""]
join  [shape=tripleoctagon]
summary [prompt="Security: {{ parallel.results['0'].context.assessment }}",
         outputs="verdict:choice"]
flaky [type=script, max_retries=2,
       script="case \"$DELIVERY_FACTS\" in */flaky/1/*) exit 1 ;; esac"]
start -> split
split -> sec
split -> perf
sec -> join
perf -> join
join -> summary
summary -> split [condition="verdict=again", loop_restart=true]
summary -> flaky [condition="verdict=done"]
flaky -> exit
""", goal="Parallel and restarts", name="Sections")
SECTIONS_REPLIES = {
    "sec": ['one\n{"context_updates": {"assessment": "risky"}}',
            'two\n{"context_updates": {"assessment": "fine"}}'],
    "summary": ['{"context_updates": {"verdict": "again"}}',
                '{"context_updates": {"verdict": "done"}}'],
}
SECTIONS_ARGS = ("sections.dot", "--agent", "replay:sections.json", "--json")


@pytest.fixture(scope="module")
def sections(workspace: Path) -> dict[str, Any]:
    (workspace / "sections.dot").write_text(SECTIONS, encoding="utf-8")
    (workspace / "sections.json").write_text(json.dumps(SECTIONS_REPLIES), encoding="utf-8")
    done = delivery("run", *SECTIONS_ARGS, "--run-dir", workspace / "runs" / "sections",
                    cwd=workspace)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["path"] == ["start", "split", "sec", "perf", "join", "summary",
                              "split", "sec", "perf", "join", "summary", "flaky", "exit"]
    results = report["context"]["parallel.results"]
    assert results[0]["context"]["assessment"] == "fine"  # the second round's
    assert "response.summary" in report["context"] and "verdict" in report["context"]
    log = events(workspace / "runs" / "sections")
    assert [(e["type"], e.get("node")) for e in log if e["type"] in ("stage_retry",
            "loop_restart")] == [("loop_restart", None), ("stage_retry", "flaky")]
    return report


SECTION_KILLS: Sequence[tuple[str, str]] = (
    ("stage-file:sec:prompt.md:2", "split"),  # inside a branch of the second fan-out
    ("event:stage_finished:perf", "split"),  # one branch done, the other maybe not
    ("event:loop_restart", "summary"),  # the context was just cleared, not yet saved
    ("event:stage_retry:flaky", "flaky"),  # waiting out the backoff before attempt 2
)


@pytest.mark.parametrize(("kill", "next_node"), SECTION_KILLS, ids=[k for k, _ in SECTION_KILLS])
def test_kills_in_parallel_sections_restarts_and_retries_resume_to_the_same_end(
        kill: str, next_node: str, workspace: Path, run_dir: Path,
        sections: dict[str, Any]) -> None:
    killed_by_driver(kill, "run", *SECTIONS_ARGS, "--run-dir", run_dir, cwd=workspace)
    assert checkpoint(run_dir)["next_node"] == next_node
    code, report = resume(workspace, run_dir)
    assert code == 0
    assert outcome(report) == outcome(sections)
    assert verify(run_dir)[0] == 0


# -- kills before there is anything to resume --------------------------------------------
def test_a_run_killed_before_its_first_checkpoint_is_refused_clearly(
        workspace: Path, run_dir: Path, baseline: dict[str, Any]) -> None:
    killed_by_driver("event:run_started", "run", "flow.dot", *RUN_ARGS, "--run-dir", run_dir,
                     cwd=workspace)
    assert (run_dir / "run.json").is_file() and not (run_dir / "checkpoint.json").exists()
    done = delivery("resume", run_dir, "--json", cwd=workspace)
    assert done.returncode == 2
    assert "no checkpoint" in done.stderr and "delivery run" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert verify(run_dir)[0] == 0  # the one logged event is intact
    # nothing ran, so starting afresh is the way on
    code, out, err = cli("run", workspace / "flow.dot", *RUN_ARGS, "--workspace", workspace,
                         "--run-dir", run_dir.with_name(run_dir.name + "-again"))
    assert code == 0, err
    assert_same_outcome(json.loads(out), baseline)


def test_a_run_killed_before_run_json_is_no_run_and_its_directory_can_be_reused(
        workspace: Path, run_dir: Path, baseline: dict[str, Any]) -> None:
    killed_by_driver("run-info", "run", "flow.dot", *RUN_ARGS, "--run-dir", run_dir,
                     cwd=workspace)
    assert run_dir.is_dir() and not (run_dir / "run.json").exists()
    done = delivery("resume", run_dir, "--json", cwd=workspace)
    assert done.returncode == 2
    assert "neither a run directory nor a run id" in done.stderr
    assert "Traceback" not in done.stderr
    code, out, err = cli("run", workspace / "flow.dot", *RUN_ARGS, "--workspace", workspace,
                         "--run-dir", run_dir)
    assert code == 0, err
    assert_same_outcome(json.loads(out), baseline)


# -- what a resume tells the agent ---------------------------------------------------------
FULL_FIDELITY = flow("""
a [prompt="do a"]
b [prompt="do b"]
c [prompt="do c"]
start -> a -> b -> c -> exit
""", goal="Keep the thread", graph='default_fidelity="full"', name="Threads")


def test_after_a_resume_full_fidelity_degrades_to_a_summary_once(tmp_path: Path) -> None:
    (tmp_path / "threads.dot").write_text(FULL_FIDELITY, encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps({n: ["ok"] for n in "abc"}), encoding="utf-8")
    args = ("run", str(tmp_path / "threads.dot"), "--agent", "replay:r.json", "--run-dir")
    plain = cli(*args, tmp_path / "plain", "--workspace", tmp_path)
    assert plain[0] == 0, plain[2]
    killed_by_driver("saved:b", *args, tmp_path / "killed", cwd=tmp_path)
    resumed = delivery("resume", tmp_path / "killed", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr

    def prompt(run: str, node: str) -> str:
        return (tmp_path / run / node / "1" / "prompt.md").read_text(encoding="utf-8")

    for node in "abc":  # uninterrupted, a `full` stage continues its thread: no preamble
        assert prompt("plain", node).startswith(f"do {node}")
    assert prompt("killed", "a") == prompt("plain", "a")
    # the first stage after the resume lost its session: it is told what happened ...
    assert prompt("killed", "b").startswith("Goal: Keep the thread")
    assert "- **a**: succeeded" in prompt("killed", "b")
    # ... once: the stage after it continues the thread again
    assert prompt("killed", "c") == prompt("plain", "c")
