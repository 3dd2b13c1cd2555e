"""Agent and prompt stages through whole runs (SPEC §5): output contracts, correction turns,
work scopes and `current_work`, reported failures and a replay that runs out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import FakeClock, reply, run_flow, stage_file

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import World, resume_run
from delivery.testing import flow

REVIEW = flow("""
review [type=prompt, prompt="Review it", outputs="verdict:choice, findings:json"]
ship [shape=parallelogram, script="true"]
fix [shape=parallelogram, script="true"]
park [shape=parallelogram, script="true"]
start -> review
review -> ship [condition="verdict=pass"]
review -> fix [condition="verdict=rework"]
review -> park [condition="verdict=\\"needs discussion\\""]
review -> exit [condition="outcome=failed"]
ship -> exit
fix -> exit
park -> exit
""")


@pytest.mark.parametrize(("verdict", "target"), [
    ("pass", "ship"),
    ("rework", "fix"),
    ("needs discussion", "park"),
])
def test_a_choice_routes_to_the_edge_comparing_it(tmp_path: Path, verdict: str,
                                                  target: str) -> None:
    ran = run_flow(tmp_path, REVIEW, replies={
        "review": [reply({"verdict": verdict, "findings": [{"line": 3}]})]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.outcome.path == ["start", "review", target, "exit"]
    assert ran.context["verdict"] == verdict
    assert json.loads(ran.context["findings"]) == [{"line": 3}]


def test_the_prompt_carries_the_contract_with_the_choice_literals(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, REVIEW, replies={
        "review": [reply({"verdict": "pass", "findings": {}})]})
    prompt = ran.prompts_of("review")[0]
    assert "Review it" in prompt
    assert "## Output contract" in prompt
    assert '"needs discussion", "pass", "rework"' in prompt
    assert (ran.outcome.run_dir / "review" / "1" / "prompt.md").read_text() == prompt


def test_a_malformed_reply_gets_a_correction_turn_and_the_fix_is_accepted(
        tmp_path: Path) -> None:
    ran = run_flow(tmp_path, REVIEW, replies={"review": [
        reply({"verdict": "maybe", "findings": {}}),
        reply({"verdict": "rework", "findings": {"n": 1}}, prose="Corrected."),
    ]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.outcome.path == ["start", "review", "fix", "exit"]
    prompts = ran.prompts_of("review")
    assert len(prompts) == 2
    correction = prompts[1]
    assert "did not satisfy the output contract" in correction
    assert "'verdict'" in correction and '"maybe"' in correction
    assert "## Output contract" in correction  # the contract again
    assert ran.context["verdict"] == "rework"
    assert ran.context["response.review"].startswith("Corrected.")
    transcript = stage_file(ran.outcome, "review", "response.md").read_text()
    assert "maybe" in transcript and "Corrected." in transcript


def test_three_malformed_replies_fail_the_stage_without_touching_the_context(
        tmp_path: Path) -> None:
    bad = [
        "No JSON at all.",
        reply({"verdict": "pass"}),  # findings missing
        reply({"verdict": "pass", "findings": {}, "extra": "x"}),  # undeclared key
    ]
    ran = run_flow(tmp_path, REVIEW, replies={"review": bad})
    assert ran.outcome.path == ["start", "review", "exit"]
    assert ran.status == "failed"
    reason = ran.outcome.failure_reason
    assert "3 times" in reason and "'extra'" in reason
    assert len(ran.prompts_of("review")) == 3
    for key in ("verdict", "findings", "extra", "response.review", "last_response"):
        assert key not in ran.context


def test_a_json_output_rejects_a_scalar(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, REVIEW, replies={"review": [
        reply({"verdict": "pass", "findings": 42}),
        reply({"verdict": "pass", "findings": "a string"}),
        reply({"verdict": "pass", "findings": None}),
    ]})
    assert ran.outcome.path == ["start", "review", "exit"]
    assert "'findings' (json)" in ran.outcome.failure_reason
    assert "scalar" in ran.prompts_of("review")[1]
    assert "findings" not in ran.context


WORK = flow("""
scope [type=prompt, prompt="Find the work", outputs="scope:work"]
act [type=prompt, prompt="Now do: {{ current_work }}"]
start -> scope
scope -> act [condition="outcome=succeeded"]
scope -> exit [condition="outcome=failed"]
act -> exit [condition="outcome=succeeded"]
act -> exit [condition="outcome=failed"]
""")


def test_a_leaf_scope_whose_parent_is_itself_is_rejected(tmp_path: Path) -> None:
    own = {"type": "leaf", "ticket": "https://t.example/1", "parent": "https://t.example/1"}
    ran = run_flow(tmp_path, WORK, replies={"scope": [reply({"scope": own})] * 3})
    assert ran.outcome.path == ["start", "scope", "exit"]
    assert "parent must differ from ticket" in ran.outcome.failure_reason
    assert "parent must differ from ticket" in ran.prompts_of("scope")[1]
    assert "current_work" not in ran.context


def test_a_work_output_sets_current_work_which_a_later_prompt_renders(tmp_path: Path) -> None:
    leaf = {"type": "leaf", "ticket": "https://t.example/7", "parent": "https://t.example/1"}
    ran = run_flow(tmp_path, WORK, replies={"scope": [reply({"scope": leaf})],
                                            "act": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["scope"] == leaf
    assert ran.context["current_work"] == leaf
    act_prompt = ran.prompts_of("act")[0]
    assert "https://t.example/7" in act_prompt
    assert "https://t.example/1" in act_prompt
    assert "{'type'" not in act_prompt  # readable text, not a Python repr


def test_rendering_current_work_with_no_saved_scope_fails_the_stage(tmp_path: Path) -> None:
    # The validator proves statically that a work output precedes every read of
    # current_work, so a run only meets an unsaved scope through its checkpoint: resume a
    # run whose checkpoint has lost it, at the stage that renders it.
    leaf = {"type": "goal", "goal": "the scope"}
    first = run_flow(tmp_path, WORK, replies={"scope": [reply({"scope": leaf})]})
    assert first.outcome.path == ["start", "scope", "act", "exit"]  # act ran out of replies
    checkpoint_path = first.outcome.run_dir / "checkpoint.json"
    checkpoint = json.loads(checkpoint_path.read_text())
    del checkpoint["checksum"]  # an edit on purpose (a stale checksum marks a torn save)
    del checkpoint["context"]["current_work"]
    checkpoint.update(status="running", next_node="act", failure_reason="")
    checkpoint["path"] = ["start", "scope"]
    checkpoint_path.write_text(json.dumps(checkpoint))
    backend = ReplayBackend({"act": [reply()]})
    outcome = resume_run(first.outcome.run_dir, World(agent=backend, clock=FakeClock()))
    assert outcome.path == ["start", "scope", "act", "exit"]
    assert outcome.status == "failed"
    assert "current_work" in outcome.failure_reason
    assert "no work scope was saved" in outcome.failure_reason
    assert backend.prompts == []  # the agent was never asked


def test_a_reply_reporting_failed_fails_the_stage_without_corrections(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, REVIEW, replies={"review": [
        reply({}, outcome="failed", failure_reason="cannot reach the repository"),
        reply({"verdict": "pass", "findings": {}}),
    ]})
    assert ran.outcome.path == ["start", "review", "exit"]
    assert ran.status == "failed"
    assert ran.outcome.failure_reason == "cannot reach the repository"
    assert len(ran.prompts_of("review")) == 1
    assert "verdict" not in ran.context


def test_attractor_fail_alias_in_a_reply_fails_the_stage(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, REVIEW, replies={"review": [reply({}, outcome="fail")]})
    assert ran.outcome.path == ["start", "review", "exit"]
    assert len(ran.prompts_of("review")) == 1


def test_a_replay_that_runs_out_is_a_clear_stage_failure(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, REVIEW, replies={"review": []})
    assert ran.outcome.path == ["start", "review", "exit"]
    reason = ran.outcome.failure_reason
    assert "no reply left for node 'review'" in reason


def test_a_replay_exhausted_mid_correction_fails_the_stage(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, REVIEW, replies={"review": ["not json"]})
    assert ran.outcome.path == ["start", "review", "exit"]
    assert "no reply left" in ran.outcome.failure_reason


def test_replies_are_consumed_in_order_across_visits(tmp_path: Path) -> None:
    dot = flow("""
    ask [type=prompt, prompt="Again?", outputs="more:choice"]
    start -> ask
    ask -> ask [condition="more=yes"]
    ask -> exit [condition="more=no"]
    """)
    ran = run_flow(tmp_path, dot, replies={"ask": [
        reply({"more": "yes"}), reply({"more": "yes"}), reply({"more": "no"})]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.outcome.path == ["start", "ask", "ask", "ask", "exit"]
    assert stage_file(ran.outcome, "ask", "status.json", 3).is_file()
