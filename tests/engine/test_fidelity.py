"""Fidelity (SPEC §5, Attractor §5.4): what each mode tells an agent stage (golden files),
edge > node > graph precedence, and threads.

Regenerate the golden files with `UPDATE_GOLDEN=1 pytest tests/engine/test_fidelity.py`
and read the diff: it is what agents will be told.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from engine_helpers import FakeClock, reply

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.testing import flow

GOLDEN = Path(__file__).with_name("golden")
MODES = ["truncate", "summary:low", "summary:medium", "compact", "summary:high", "full"]

FLOW = flow("""
plan   [prompt="Plan the change", outputs="steps:json"]
check  [shape=parallelogram, script="bash ../big.sh", facts="log"]
report [prompt="Write the report", fidelity="MODE"]
start -> plan -> check -> report -> exit
""", goal="Add a /health endpoint")

BIG_FACT = 'printf "log=%s\\n" "$(head -c 120000 /dev/zero | tr "\\0" x)" >> "$DELIVERY_FACTS"\n'
PLAN_REPLY = reply(
    {"steps": ["add route", "add test"]},
    prose="I will add the route in app.py.\nThen a test in test_app.py.\nNothing else changes.",
)


def git(where: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=where, check=True, capture_output=True)


def run_mode(tmp_path: Path, mode: str) -> RunOutcome:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    git(workspace, "init", "-q")
    (workspace / "app.py").write_text("print('hi')\n")
    git(workspace, "add", "app.py")
    git(workspace, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "init")
    (workspace / "app.py").write_text("print('health')\n")
    (workspace / "test_app.py").write_text("def test(): pass\n")
    (tmp_path / "big.sh").write_text(BIG_FACT, encoding="utf-8")
    flow = tmp_path / "flow.dot"
    flow.write_text(FLOW.replace("MODE", mode), encoding="utf-8")
    agent = ReplayBackend({"plan": [PLAN_REPLY], "report": [reply(prose="Reported.")]})
    world = World(agent=agent, clock=FakeClock())
    request = RunRequest(workflow=flow, workspace=workspace, run_dir=tmp_path / "run")
    outcome = start_run(request, world)
    assert outcome.status == "succeeded", outcome.failure_reason
    return outcome


def report_prompt(outcome: RunOutcome, tmp_path: Path) -> str:
    text = (outcome.run_dir / "report" / "1" / "prompt.md").read_text(encoding="utf-8")
    return text.replace(str(tmp_path), "<tmp>").replace(outcome.run_id, "<run_id>")


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_tells_the_agent_what_its_golden_file_shows(tmp_path: Path, mode: str) -> None:
    got = report_prompt(run_mode(tmp_path, mode), tmp_path)
    golden = GOLDEN / f"preamble_{mode.replace(':', '_')}.md"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(got, encoding="utf-8")
    assert got == golden.read_text(encoding="utf-8")


def test_the_modes_show_visibly_different_amounts() -> None:
    texts = [(GOLDEN / f"preamble_{mode.replace(':', '_')}.md").read_text(encoding="utf-8")
             for mode in MODES[:-1]]
    sizes = [len(text) for text in texts]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)


PRECEDENCE = flow("""
a [prompt="do a"]
b [prompt="do b"]
c [prompt="do c", fidelity="summary:low"]
d [prompt="do d", fidelity="summary:low"]
start -> a -> b -> c
c -> d [fidelity="full"]
d -> exit
""", goal="Ship", graph='default_fidelity="truncate"')


def test_edge_beats_node_beats_graph(tmp_path: Path) -> None:
    flow = tmp_path / "flow.dot"
    flow.write_text(textwrap.dedent(PRECEDENCE), encoding="utf-8")
    agent = ReplayBackend({node: [reply()] for node in "abcd"})
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path),
                        World(agent=agent, clock=FakeClock()))
    assert outcome.status == "succeeded", outcome.failure_reason
    prompts = {node: message for node, message in agent.prompts}
    assert prompts["b"].startswith("Goal: Ship\nRun: ")  # graph: truncate
    assert prompts["c"].startswith("Goal: Ship\n\n## Completed stages\n- **a**")  # node
    assert prompts["d"].startswith("do d")  # the edge's full: continues c's session
    assert "internal.entry_edge" not in outcome.context  # the edge out of d sets nothing
