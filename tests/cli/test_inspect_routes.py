"""`delivery inspect RUN --routes`: each routing decision with its rule and the facts read."""

from __future__ import annotations

import json
from pathlib import Path

from engine_helpers import cli, reply, run_flow, write_flow

from delivery.testing import flow

FLOW = flow("""
plan  [prompt="Plan", outputs="verdict:choice"]
check [type=script, script="exit 1"]
gate  [shape=hexagon]
start -> plan
plan -> gate  [condition="verdict=ready"]
plan -> check [condition="verdict=test"]
gate -> exit  [label="[S] Ship"]
gate -> plan  [label="[A] Again"]
""", goal="Ship", graph='retry_target="plan"')


def routes(tmp_path: Path) -> tuple[list[dict[str, object]], str]:
    ran = run_flow(tmp_path, FLOW, replies={"plan": [reply({"verdict": "test"}),
                                                      reply({"verdict": "ready"})]},
                   answers={"gate": "S"})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    code, out, _ = cli("inspect", ran.outcome.run_dir, "--routes", "--json")
    assert code == 0
    _, text, _ = cli("inspect", ran.outcome.run_dir, "--routes")
    return json.loads(out)["routes"], text


def test_each_decision_names_the_rule_that_chose_it(tmp_path: Path) -> None:
    taken, _ = routes(tmp_path)
    assert [(r["source"], r["target"], r["rule"]) for r in taken] == [
        ("start", "plan", "weight"),
        ("plan", "check", "condition"),
        ("check", "plan", "retry_target"),
        ("plan", "gate", "condition"),
        ("gate", "exit", "preferred_label"),
    ]


def test_a_condition_step_lists_the_values_it_read(tmp_path: Path) -> None:
    taken, text = routes(tmp_path)
    assert taken[1]["facts"] == {"verdict": "test"}
    assert taken[1]["condition"] == "verdict=test"
    assert "read: verdict=test" in text
    assert "retry target" in text


def test_routes_name_a_failure_flowing_into_a_conditional_node(tmp_path: Path) -> None:
    dot = flow("""
    check [shape=parallelogram, tool_command="exit 3"]
    gate [shape=diamond]
    start -> check -> gate
    gate -> exit [condition="outcome=fail"]
    """, goal=None)
    workflow = write_flow(tmp_path, dot)
    code, _, _ = cli("run", workflow, "--workspace", tmp_path, "--run-dir", tmp_path / "run")
    assert code == 1
    _, out, _ = cli("inspect", tmp_path / "run", "--routes")
    assert "check -> gate: the stage failed: unconditional edge into a conditional node" in out
