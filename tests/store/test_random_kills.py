"""A 2,000-stage run SIGKILLed at random moments, resumed each time, ends as if never killed.

The kills come from outside (`SIGKILL` once the run has made a random number of further
stage records, seeded, watched by polling its log), so they land anywhere: inside a stage,
while an event or a stage record is half written, between a record and a snapshot. Counting
progress instead of seconds keeps the test independent of the machine's speed: the run
cannot finish before it has been killed often enough. After the last kill a resume
finishes; the end (status, path, context, the replay backend's cursors) must equal an
uninterrupted run's, and the event chain must verify.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from delivery.store.runstore import LocalRunStore
from delivery.testing import flow
from delivery.testing.cli import invoke

pytestmark = pytest.mark.slow  # a 2,001-stage run killed and resumed at random

DELIVERY = Path(sys.executable).with_name("delivery")
ROUNDS = 667  # a, b and check per round: 2,001 stages
KILLS = 6
SEED = 20261201

# `a` and `b` are agent stages answered by the replay backend; `check` loops until `b` has
# reported the last round. Every stage changes the context (outputs, outcome, last_stage...).
FLOW = flow(f"""
a [type=prompt, prompt="next round", outputs="note:text"]
b [type=prompt, prompt="after {{{{ note }}}}", outputs="round:text"]
check [shape=diamond]
start -> a -> b -> check
check -> a    [condition="round < {ROUNDS}"]
check -> exit [condition="round >= {ROUNDS}"]
""", goal="A long run", name="Long")


def _reply(updates: dict[str, Any]) -> str:
    return "ok\n" + json.dumps({"context_updates": updates})


REPLIES = {
    "a": [_reply({"note": f"note {n}"}) for n in range(1, ROUNDS + 1)],
    "b": [_reply({"round": str(n)}) for n in range(1, ROUNDS + 1)],
}


def _end(run: Path, report: dict[str, Any]) -> dict[str, Any]:
    loaded = LocalRunStore.open_dir(run).load()
    assert loaded is not None
    context = {k: v for k, v in report["context"].items() if k != "internal.run_id"}
    return {"status": report["status"], "failure_reason": report["failure_reason"],
            "path": report["path"], "context": context,
            "cursors": loaded.state.agent_state["cursors"]}


def _records(log: Path) -> int:
    try:
        return log.read_bytes().count(b'"type":"state"')
    except FileNotFoundError:
        return 0


def _killed_after(args: list[str], cwd: Path, run: Path, further: int) -> int | None:
    """Start `delivery ARGS` and SIGKILL it once the run's log holds `further` more stage
    records than when it started; its exit status if it ended first."""
    log = run / "events.jsonl"
    target = _records(log) + further
    proc = subprocess.Popen([str(DELIVERY), *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return proc.returncode
            if _records(log) >= target:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=60)
                return None
            time.sleep(0.005)
        pytest.fail(f"no progress to {target} stage records within 120 s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_2000_stage_run_killed_at_random_moments_resumes_to_the_same_end(
        tmp_path: Path) -> None:
    (tmp_path / "long.dot").write_text(FLOW, encoding="utf-8")
    (tmp_path / "replies.json").write_text(json.dumps(REPLIES), encoding="utf-8")
    args = ["run", "long.dot", "--agent", "replay:replies.json", "--json"]

    baseline_run = tmp_path / "baseline"
    done = invoke(*args, "--run-dir", baseline_run, cwd=tmp_path)
    assert done.code == 0, done.err
    expected = _end(baseline_run, json.loads(done.out))
    assert len(expected["path"]) == 3 * ROUNDS + 2 and expected["context"]["round"] == "667"

    chance = random.Random(SEED)
    run = tmp_path / "killed"
    # at most 6 x 300 records of 2,003: every kill lands before the run could end
    outcome = _killed_after([*args, "--run-dir", str(run)], tmp_path, run,
                            chance.randint(20, 300))
    kills = 0 if outcome is not None else 1
    while outcome is None and kills < KILLS:
        outcome = _killed_after(["resume", str(run), "--json"], tmp_path, run,
                                chance.randint(20, 300))
        kills += outcome is None
    assert kills == KILLS
    final = invoke("resume", run, "--json", cwd=tmp_path)
    assert final.code == 0, final.err
    assert _end(run, json.loads(final.out)) == expected
    verified = invoke("verify", run)
    assert verified.code == 0, verified.out
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    # some resumes were killed before they got going; at least two carried the run on
    assert sum(e["type"] == "run_resumed" for e in events) >= 2
    assert sum(e["type"] == "run_finished" for e in events) == 1
