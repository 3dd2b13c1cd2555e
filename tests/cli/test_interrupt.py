"""Ctrl-C and SIGTERM on a real `delivery run` (SPEC §12): no traceback, one line saying how
to resume, the stage's process group ended (checked through /proc), and `resume` finishes.

The stage under the signal is a `command:` agent or a script that starts a background child
and sleeps; each writes its process group id (its own pid: both run in a new session) to a
file, which tells the test the stage is running and which group must be gone afterwards.
The second visit (after the resume) finishes at once.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from signal_helpers import group_members, start_delivery, wait_until

from delivery.testing import flow

pytestmark = pytest.mark.slow  # signals real child processes and waits for their groups to end

AGENT = """#!/bin/sh
cat >/dev/null
if [ -e "$1/agent.pid" ]; then
    echo 'Done. {"context_updates": {"summary": "done"}}'
    exit 0
fi
sleep 300 &
echo $$ > "$1/agent.pid.tmp" && mv "$1/agent.pid.tmp" "$1/agent.pid"
sleep 300
"""

AGENT_FLOW = flow("""
work  [prompt="Fix it", outputs="summary:text"]
start -> work -> exit
""", goal="Fix the bug")

SCRIPT_FLOW = flow("""
check [shape=parallelogram, script="sh %s/check.sh %s"]
start -> check -> exit
""", goal="Check")

SCRIPT = """if [ -e "$1/script.pid" ]; then exit 0; fi
sleep 300 &
echo $$ > "$1/script.pid.tmp" && mv "$1/script.pid.tmp" "$1/script.pid"
sleep 300
"""

STOPPED = re.compile(r"delivery run: stopped by (Ctrl-C \(SIGINT\)|SIGTERM); run (\S+) is "
                     r"resumable: delivery resume (\S+)")


def _wait_for(path: Path, process: subprocess.Popen[str]) -> int:
    wait_until(path.exists, process, f"the stage wrote {path.name}")
    return int(path.read_text())


def said_lines(err: str) -> list[str]:
    """stderr's lines but the progress (one line per stage as it ended, SPEC §12)."""
    return [line for line in err.splitlines() if line.strip() and not line.startswith("  ")]


def _setup(tmp_path: Path, stage: str) -> tuple[Path, list[str], Path]:
    """The workflow, the extra `run` options and the pid file of `stage` (agent|script)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    flow = tmp_path / "flow.dot"
    if stage == "agent":
        (tmp_path / "agent.sh").write_text(AGENT)
        flow.write_text(AGENT_FLOW)
        return flow, ["--agent", f"command:sh {tmp_path / 'agent.sh'} {marks}"], \
            marks / "agent.pid"
    (tmp_path / "check.sh").write_text(SCRIPT)
    flow.write_text(SCRIPT_FLOW % (tmp_path, marks))
    return flow, [], marks / "script.pid"


@pytest.mark.parametrize("stage", ["agent", "script"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_stage_ends_its_group_and_the_run_resumes(
        tmp_path: Path, stage: str, signum: signal.Signals) -> None:
    flow, options, pid_file = _setup(tmp_path, stage)
    run_dir = tmp_path / "run"
    process = start_delivery("run", flow, "--run-dir", run_dir, *options, cwd=tmp_path)
    pgid = _wait_for(pid_file, process)
    assert group_members(pgid)  # the stage's processes are there before the signal
    os.kill(process.pid, signum)
    out, err = process.communicate(timeout=60)

    assert process.returncode == (130 if signum == signal.SIGINT else 143)
    assert "Traceback" not in err and out == ""
    lines = said_lines(err)
    assert len(lines) == 1, err
    said = STOPPED.fullmatch(lines[0])
    assert said is not None, lines[0]
    assert said.group(1) == ("SIGTERM" if signum == signal.SIGTERM else "Ctrl-C (SIGINT)")
    assert Path(said.group(3)) == run_dir.resolve()
    assert group_members(pgid) == []  # the agent or script, and its background child

    resumed = start_delivery("resume", said.group(3), cwd=tmp_path)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert f"run {said.group(2)}: succeeded" in out


def test_a_second_ctrl_c_while_stopping_ends_at_once_without_a_traceback(
        tmp_path: Path) -> None:
    flow, options, pid_file = _setup(tmp_path, "agent")
    process = start_delivery("run", flow, "--run-dir", tmp_path / "run", *options, cwd=tmp_path)
    pgid = _wait_for(pid_file, process)
    os.kill(process.pid, signal.SIGINT)
    os.kill(process.pid, signal.SIGINT)  # whether it lands while stopping or after, the same
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in err
    assert len(said_lines(err)) == 1, err
    assert group_members(pgid) == []


PARALLEL_FLOW = flow("""
split [shape=component]
left  [shape=parallelogram, script="sh %(dir)s/check.sh %(marks)s/left"]
right [shape=parallelogram, script="sh %(dir)s/check.sh %(marks)s/right"]
join  [shape=tripleoctagon]
start -> split
split -> left
split -> right
left -> join
right -> join
join -> exit
""", goal="Check")


def test_ctrl_c_ends_the_stages_of_parallel_branches_too(tmp_path: Path) -> None:
    """Branch stages run in threads the interrupt does not reach: without ending their
    groups the process would wait for them (here 300 s) before it could stop."""
    marks = tmp_path / "marks"
    for branch in ("left", "right"):
        (marks / branch).mkdir(parents=True)
    (tmp_path / "check.sh").write_text(SCRIPT)
    flow = tmp_path / "flow.dot"
    flow.write_text(PARALLEL_FLOW % {"dir": tmp_path, "marks": marks})
    process = start_delivery("run", flow, "--run-dir", tmp_path / "run", cwd=tmp_path)
    groups = [_wait_for(marks / branch / "script.pid", process) for branch in ("left",
                                                                              "right")]
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert STOPPED.fullmatch(err.strip().splitlines()[-1])
    assert [group_members(pgid) for pgid in groups] == [[], []]


FOREACH_FLOW = flow("""
check [type=script, foreach="folders", max_parallel=3, max_retries=2,
       script="echo started >> %(marks)s/starts.log; sh %(dir)s/check.sh $(pwd)"]
start -> check -> exit
""", goal="Check")


def test_ctrl_c_ends_every_folder_of_a_foreach_stage_and_starts_no_retry(
        tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    repos = []
    for name in ("web", "api", "cli"):
        (tmp_path / name).mkdir()
        repos += ["--repo", f"{name}={tmp_path / name}"]
    (tmp_path / "check.sh").write_text(SCRIPT)
    flow_file = tmp_path / "flow.dot"
    flow_file.write_text(FOREACH_FLOW % {"dir": tmp_path, "marks": marks})
    process = start_delivery("run", flow_file, *repos, "--run-dir", tmp_path / "run",
                             cwd=tmp_path)
    groups = [_wait_for(tmp_path / name / "script.pid", process)
              for name in ("web", "api", "cli")]
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert STOPPED.fullmatch(err.strip().splitlines()[-1])
    assert [group_members(pgid) for pgid in groups] == [[], [], []]
    assert (marks / "starts.log").read_text().split() == ["started"] * 3  # no retry began
