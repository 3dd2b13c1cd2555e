"""Progress on a terminal (SPEC §12): stage names, elapsed time and retries on stderr.

The CLI runs in a subprocess whose stderr is the slave end of a real pseudo-terminal; the
test reads the master end (bounded by a deadline). A terminal also shows each stage as it
starts; with stderr not a terminal see test_progress_in_logs.py. With --quiet the CLI
prints nothing but its report (stdout) and diagnostics (stderr).
"""

from __future__ import annotations

import errno
import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delivery.testing import flow

TESTS = Path(__file__).resolve().parents[1]
DELIVERY = Path(sys.executable).with_name("delivery")
DEADLINE = 30.0

# `flaky` fails its first attempt (it leaves a mark in the workspace) and is retried once.
FLOW = flow("""
plan  [type=prompt, prompt="Plan $goal", outputs="plan:text"]
flaky [type=script, max_retries=1,
       script="if [ -e tried ]; then echo ok; else touch tried; exit 1; fi"]
build [type=script, facts="build.ok",
       script="echo build.ok=yes >> \\"$DELIVERY_FACTS\\""]
start -> plan -> flaky -> build -> exit
""", goal="Show progress", name="Progress")
REPLIES = {"plan": ['Planned.\n{"context_updates": {"plan": "do it"}}']}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "flow.dot").write_text(FLOW, encoding="utf-8")
    (tmp_path / "replies.json").write_text(json.dumps(REPLIES), encoding="utf-8")
    return tmp_path


def run_args(workspace: Path, *extra: str, run: str = "run") -> list[str]:
    return [str(DELIVERY), "run", "flow.dot", "--agent", "replay:replies.json",
            "--run-dir", str(workspace / run), *extra]


def on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run `args` with stderr on a pty; (exit status, stdout, what the terminal showed)."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=slave)
    finally:
        os.close(slave)  # the child holds its own copy; EOF comes when it exits
    shown = bytearray()
    deadline = time.monotonic() + DEADLINE
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                if proc.poll() is not None and not select.select([master], [], [], 0)[0]:
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError as err:  # EIO: every slave end is closed
                if err.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            shown += chunk
        else:
            pytest.fail(f"the run did not finish within {DEADLINE}s; it showed {shown!r}")
        stdout, _ = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        os.close(master)
    return proc.returncode, stdout.decode(), shown.decode("utf-8", "replace")


@pytest.mark.slow
def test_a_terminal_shows_stages_elapsed_time_and_retries(workspace: Path) -> None:
    code, stdout, shown = on_a_terminal(run_args(workspace, "--json"), workspace)
    assert code == 0, shown
    report = json.loads(stdout)  # the report stays clean: progress is not in it
    assert report["status"] == "succeeded"
    assert report["path"] == ["start", "plan", "flaky", "build", "exit"]
    text = shown.replace("\r\n", "\n")
    for node, kind in (("plan", "prompt"), ("flaky", "script"), ("build", "script")):
        assert f"{node} [{kind}]" in text, text
        assert re.search(rf"{node} succeeded in \d+\.\ds", text), text
    assert re.search(r"flaky failed in \d+\.\ds — script exited with code 1", text), text
    assert re.search(r"flaky: retrying \(attempt 2 of 2\) in \d+\.\ds", text), text
    assert "flaky [script] (attempt 2)" in text, text
    # in the order they ran
    order = [text.index(marker) for marker in
             ("plan [prompt]", "flaky [script]", "retrying", "(attempt 2)", "build [script]")]
    assert order == sorted(order), text


@pytest.mark.slow
def test_a_resume_on_a_terminal_shows_the_stages_it_runs(workspace: Path) -> None:
    killed = subprocess.run(
        [sys.executable, str(TESTS / "durability_driver.py"), *run_args(workspace)[1:]],
        cwd=workspace, env={**os.environ, "DURABILITY_KILL": "saved:flaky"},
        capture_output=True, timeout=DEADLINE, check=False)
    assert killed.returncode < 0, killed.stderr
    code, stdout, shown = on_a_terminal(
        [str(DELIVERY), "resume", str(workspace / "run")], workspace)
    assert code == 0, shown
    assert "succeeded" in stdout.splitlines()[0]
    assert "flaky [script]" in shown and "build [script]" in shown
    assert "plan [prompt]" not in shown  # done before the kill; not run again


@pytest.mark.slow
def test_quiet_prints_only_the_report(workspace: Path) -> None:
    done = subprocess.run(run_args(workspace, "--json", "--quiet"), cwd=workspace,
                          capture_output=True,
                          text=True, timeout=DEADLINE, check=False)
    assert done.returncode == 0
    assert done.stderr == ""
    assert json.loads(done.stdout)["status"] == "succeeded"  # nothing but one JSON object

    text = subprocess.run(run_args(workspace, "--quiet", run="run2"), cwd=workspace,
                          capture_output=True,
                          text=True, timeout=DEADLINE, check=False)
    assert text.returncode == 0 and text.stderr == ""
    lines = text.stdout.splitlines()
    assert re.fullmatch(r"run \S+: succeeded", lines[0])
    assert lines[1:] == ["  path: start -> plan -> flaky -> build -> exit",
                         f"  run directory: {(workspace / 'run2').resolve()}"]


def test_without_a_terminal_a_refusal_is_one_diagnostic_on_stderr(workspace: Path) -> None:
    done = subprocess.run(run_args(workspace, "--json", "--input", "nope=1"), cwd=workspace,
                          capture_output=True, text=True, timeout=DEADLINE, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "input 'nope'" in done.stderr
