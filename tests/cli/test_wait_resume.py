"""A run stopped during a wait's sleep (SPEC §7.1 `wait`, §11): resumed, it goes on to the
next stage at once — the sleep is not repeated — and the wait's clock for `timeout` is kept.
Through the real `delivery` process: Ctrl-C lands while the wait sleeps its hour."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from signal_helpers import start_delivery, wait_until

from delivery.testing import flow

pytestmark = pytest.mark.slow  # real processes and a real signal

FLOW = flow("""
mark    [type=script, script="true"]
pause   [type=wait, interval="1h", timeout="2h"]
after   [type=script, script="true"]
start -> mark -> pause -> after -> exit
""", goal="Watch")


def _in_the_wait(events: Path) -> bool:
    if not events.exists():
        return False
    return any(json.loads(line).get("type") == "stage_started"
               and json.loads(line).get("node") == "pause"
               for line in events.read_text(encoding="utf-8").splitlines() if line)


def test_a_run_stopped_during_a_wait_resumes_at_the_next_stage_without_sleeping_again(
        tmp_path: Path) -> None:
    (tmp_path / "flow.dot").write_text(FLOW, encoding="utf-8")
    run_dir = tmp_path / "run"
    process = start_delivery("run", tmp_path / "flow.dot", "--run-dir", run_dir,
                             cwd=tmp_path)
    wait_until(lambda: _in_the_wait(run_dir / "events.jsonl"), process, "the wait began")
    os.kill(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err

    resumed = start_delivery("resume", run_dir, cwd=tmp_path)
    try:
        out, err = resumed.communicate(timeout=60)  # the hour's sleep again would not end
    except subprocess.TimeoutExpired:
        resumed.kill()
        resumed.communicate()
        pytest.fail("the resumed run slept through the wait's interval again")
    assert resumed.returncode == 0, err
    assert ": succeeded" in out
    assert "went on without sleeping" in err  # the progress line says why it did not wait
