"""Hypothesis over the run-file readers (SPEC §14): a finished run's `checkpoint.json`,
`events.jsonl`, `run.json` or model cache (`workflow.model.json`) damaged any way — random
bytes, cut short, bytes inserted, deep nesting, a member set to any JSON — and `delivery
inspect`, `inspect --json`, `verify` and `resume` read it. Each answers with an exit status
and at most one line on stderr (exactly one when it refuses, exit 2), never a traceback, in
bounded time and memory: the readers run in a child process under a 1.5 GB address-space
limit and a timeout.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.testing import flow
from delivery.testing.cli import invoke

pytestmark = pytest.mark.slow  # fuzzes the readers in bounded child processes (minutes)

MEMORY_LIMIT = 1536 * 1024 * 1024
TIMEOUT = 60

FLOW = flow("""
plan  [type=prompt, prompt="Plan", outputs="plan:text"]
build [type=script, facts="built", script="echo built=yes >> \\"$DELIVERY_FACTS\\""]
ship  [type=prompt, prompt="Ship {{ plan }}", outputs="tag:text"]
start -> plan -> build -> ship -> exit
""", goal="Read what is left", name="Fuzz")
REPLIES = {"plan": ['ok\n{"context_updates": {"plan": "p"}}'] * 3,
           "ship": ['ok\n{"context_updates": {"tag": "v1"}}'] * 3}

# Runs the readers in-process and reports what each printed; an exception escaping the
# command line is reported with its traceback (what a user would have seen).
READERS = r"""
import io, json, sys, traceback
from delivery.cli.main import main

report = {}
for argv in (["inspect", sys.argv[1]], ["inspect", sys.argv[1], "--json"],
             ["verify", sys.argv[1]], ["resume", sys.argv[1], "--json"]):
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(argv, out, err)
    except BaseException:
        code, err = -1, io.StringIO("Traceback\n" + traceback.format_exc())
    report[" ".join(argv[:1] + argv[2:])] = [code, err.getvalue()]
print(json.dumps(report))
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workspace = tmp_path_factory.mktemp("fuzz")
    (workspace / "flow.dot").write_text(FLOW, encoding="utf-8")
    (workspace / "replies.json").write_text(json.dumps(REPLIES), encoding="utf-8")
    done = invoke("run", "flow.dot", "--agent", "replay:replies.json", "--run-dir",
                  workspace / "finished", cwd=workspace)
    assert done.code == 0, done.err
    return workspace / "finished"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)


@st.composite
def damage(draw: st.DrawFn) -> tuple[str, str, Any]:
    name = draw(st.sampled_from(["checkpoint.json", "events.jsonl", "run.json",
                                 "workflow.model.json"]))
    kind = draw(st.sampled_from(["random", "cut", "insert", "deep", "member", "line"]))
    if kind == "random":
        return name, kind, draw(st.binary(max_size=2000))
    if kind in ("cut", "insert"):
        return name, kind, (draw(st.floats(0, 1)), draw(st.binary(min_size=1, max_size=200)))
    if kind == "deep":
        return name, kind, draw(st.sampled_from(["[", "{\"a\":", "[{\"context\":"]))
    if kind == "member":
        key = draw(st.sampled_from(["context", "path", "status", "next_node", "events",
                                    "agent_state", "outcomes", "attempts", "run_id",
                                    "answers", "workspace", "gates", "steps"]))
        return name, kind, (key, draw(json_values))
    return name, kind, (draw(st.floats(0, 1)), draw(json_values))


def spoil(run: Path, name: str, kind: str, how: Any) -> None:
    path = run / name
    data = path.read_bytes()
    if kind == "random":
        path.write_bytes(how)
    elif kind == "cut":
        path.write_bytes(data[: int(len(data) * how[0])])
    elif kind == "insert":
        at = int(len(data) * how[0])
        path.write_bytes(data[:at] + how[1] + data[at:])
    elif kind == "deep":
        path.write_bytes(how.encode() * 200_000)
    elif kind == "member":
        if name == "events.jsonl":
            lines = data.splitlines(keepends=True)
            event = json.loads(lines[-1])
            event[how[0]] = how[1]
            lines[-1] = json.dumps(event).encode() + b"\n"
            path.write_bytes(b"".join(lines))
        else:
            value = json.loads(data)
            value[how[0]] = how[1]
            value.pop("checksum", None)
            path.write_text(json.dumps(value), encoding="utf-8")
    else:  # a line of the log replaced by any JSON
        lines = data.splitlines(keepends=True)
        lines[int((len(lines) - 1) * how[0])] = json.dumps(how[1]).encode() + b"\n"
        path.write_bytes(b"".join(lines))


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "30")), deadline=None,
          derandomize=not os.environ.get("FUZZ_EXAMPLES"),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damaged=damage())
def test_every_run_file_reader_answers_damage_with_at_most_one_line(
        finished: Path, tmp_path: Path, damaged: tuple[str, str, Any]) -> None:
    run = tmp_path / "run"
    if run.exists():
        shutil.rmtree(run)
    shutil.copytree(finished, run)
    spoil(run, *damaged)
    done = subprocess.run([sys.executable, "-c", READERS, str(run)], cwd=finished.parent,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False,
                          preexec_fn=_limit_memory)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    for command, (code, err) in json.loads(done.stdout).items():
        assert "Traceback" not in err, (command, damaged, err)
        assert code in (0, 1, 2, 3), (command, damaged, code, err)
        assert err.count("\n") <= 1, (command, damaged, err)
        if code == 2:
            assert err.count("\n") == 1 and err.startswith(f"delivery {command.split()[0]}:"), \
                (command, err)
