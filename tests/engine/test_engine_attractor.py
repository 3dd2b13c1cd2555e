"""Attractor semantics the engine honours (SPEC §1.3, §2, §3, §5, §8, issue 9): outcomes
beyond succeeded/failed, suggested_next_ids, failures into a conditional node, free-form
context updates, plain templates, parallel sections without a fan-in, no goal needed."""

from __future__ import annotations

from pathlib import Path

from engine_helpers import reply, run_flow

from delivery.testing import flow


def test_suggested_next_ids_pick_among_unconditional_edges(tmp_path: Path) -> None:
    dot = flow("""
    pick [prompt="Choose"]
    a [prompt="A"]
    b [prompt="B"]
    start -> pick
    pick -> a [weight=5]
    pick -> b
    a -> exit
    b -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, replies={"pick": [reply(suggested_next_ids=["b"])],
                                           "b": [reply()]})
    assert ran.outcome.path == ["start", "pick", "b", "exit"]


def test_a_failure_flows_into_a_diamond_gate_that_routes_on_it(tmp_path: Path) -> None:
    # the Attractor spec's own branch example: validate -> gate, gate routes on outcome
    dot = """
    digraph Branch {
      graph [goal="Implement and validate a feature"]
      start [shape=Mdiamond]
      exit [shape=Msquare]
      implement [prompt="Implement the plan"]
      validate [prompt="Run tests"]
      gate [shape=diamond, label="Tests passing?"]
      start -> implement -> validate -> gate
      gate -> exit [label="Yes", condition="outcome=success"]
      gate -> implement [label="No", condition="outcome!=success"]
    }
    """
    failed = reply(outcome="fail", failure_reason="2 tests fail")
    ran = run_flow(tmp_path, dot, replies={"implement": [reply(), reply()],
                                           "validate": [failed, reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.outcome.path == ["start", "implement", "validate", "gate", "implement",
                                "validate", "gate", "exit"]


def test_a_failure_does_not_take_an_unconditional_edge_into_an_agent(tmp_path: Path) -> None:
    dot = flow("""
    a [prompt="A"]
    start -> a -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, replies={"a": [reply(outcome="fail", failure_reason="no")]})
    assert ran.status == "failed" and ran.outcome.failure_reason == "no"


CUSTOM = flow("""
check [prompt="Is it done?", max_retries=1, allow_partial=ALLOW]
fix [prompt="Fix it"]
start -> check
check -> exit [condition="outcome=yes"]
check -> fix [condition="outcome=needs_dod"]
check -> exit
fix -> check
""", goal=None, name="DoD")


def test_a_custom_outcome_routes_on_its_condition_and_counts_as_success(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, CUSTOM.replace("ALLOW", "false"),
                   replies={"check": [reply(outcome="needs_dod"), reply(outcome="yes")],
                            "fix": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.outcome.path == ["start", "check", "fix", "check", "exit"]
    assert ran.context["outcome"] == "yes"


def test_retry_reruns_the_stage_then_fails_when_retries_are_spent(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, CUSTOM.replace("ALLOW", "false"),
                   replies={"check": [reply(outcome="retry"), reply(outcome="retry")]})
    assert ran.status == "failed"
    assert "max retries (1) exceeded" in ran.outcome.failure_reason
    assert len(ran.prompts_of("check")) == 2


def test_retry_with_allow_partial_becomes_partial_success(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, CUSTOM.replace("ALLOW", "true"),
                   replies={"check": [reply(outcome="retry"), reply(outcome="retry")]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["outcome"] == "partial_success"
    assert ran.outcome.path == ["start", "check", "exit"]


def test_a_skipped_stage_does_not_meet_a_goal_gate(tmp_path: Path) -> None:
    dot = flow("""
    a [prompt="A", goal_gate=true]
    start -> a -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, replies={"a": [reply(outcome="skipped")]})
    assert ran.status == "failed" and "goal gate 'a'" in ran.outcome.failure_reason


def test_a_node_without_outputs_sets_any_unreserved_key(tmp_path: Path) -> None:
    dot = flow("""
    assess [prompt="Assess"]
    again [prompt="Again"]
    start -> assess
    assess -> exit [condition="context.tests_passed=true"]
    assess -> again
    again -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, replies={"assess": [
        reply({"tests_passed": True, "context.notes": {"n": 1}})]})
    assert ran.outcome.path == ["start", "assess", "exit"]
    assert ran.context["tests_passed"] is True and ran.context["notes"] == {"n": 1}


def test_a_reserved_key_in_free_updates_is_corrected(tmp_path: Path) -> None:
    dot = flow("""
    a [prompt="A"]
    start -> a -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, replies={"a": [reply({"outcome": "x"}), reply({"ok": 1})]})
    assert ran.status == "succeeded"
    assert "'outcome' cannot be set" in ran.prompts_of("a")[1]
    assert ran.context["ok"] == 1


def test_a_plain_file_sends_braces_as_written_and_expands_goal(tmp_path: Path) -> None:
    dot = flow("""
    deploy [prompt="Set {{ .Values.image.tag }} and count ${#tags[@]} to $goal"]
    start -> deploy -> exit
    """, goal="ship v2", name="Helm")
    ran = run_flow(tmp_path, dot, goal=None, replies={"deploy": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert "Set {{ .Values.image.tag }} and count ${#tags[@]} to ship v2" in \
        ran.prompts_of("deploy")[0]


def test_parallel_without_a_fan_in_runs_each_branch_to_the_exit(tmp_path: Path) -> None:
    dot = flow("""
    split [shape=component]
    left [prompt="Left"]
    right [prompt="Right"]
    start -> split
    split -> left -> exit
    split -> right -> exit
    """, goal=None, name="Fan")
    ran = run_flow(tmp_path, dot, replies={"left": [reply()],
                                           "right": [reply(outcome="fail")]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.outcome.path == ["start", "split", "left", "right", "exit"]
    assert ran.context["outcome"] == "partial_success"
    assert [r["outcome"] for r in ran.context["parallel.results"]] == ["succeeded", "failed"]


def test_a_run_without_a_goal_has_an_empty_goal(tmp_path: Path) -> None:
    dot = flow("""
    a [prompt="Do the thing"]
    start -> a -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, goal=None, replies={"a": [reply()]})
    assert ran.status == "succeeded"
    assert ran.context["goal"] == ""


def test_default_max_retry_gives_retries(tmp_path: Path) -> None:
    dot = flow("""
    a [prompt="A"]
    start -> a -> exit
    """, goal=None, graph='default_max_retry=2')
    ran = run_flow(tmp_path, dot, replies={"a": [reply(outcome="fail"), reply(outcome="fail"),
                                                 reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert len(ran.prompts_of("a")) == 3


def test_parallel_without_a_fan_in_joins_where_the_branches_meet(tmp_path: Path) -> None:
    # as in Attractor implementations' fan-out tests: branches meet at a synthesis node
    dot = """
    digraph FanOutFanIn {
      Start -> FanOut
      FanOut -> Red
      FanOut -> Green
      Red -> Combine
      Green -> Combine
      Combine -> End
      FanOut [shape=component]
      Red [prompt="Red?"]
      Green [prompt="Green?"]
      Combine [prompt="Combine the colours"]
    }
    """
    ran = run_flow(tmp_path, dot, replies={"Red": [reply()], "Green": [reply()],
                                           "Combine": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.outcome.path == ["Start", "FanOut", "Red", "Green", "Combine", "End"]
    assert len(ran.prompts_of("Combine")) == 1
    assert [r["node"] for r in ran.context["parallel.results"]] == ["Red", "Green"]


def test_preferred_next_label_of_attractors_status_file_is_the_preferred_label(
        tmp_path: Path) -> None:
    dot = flow("""
    triage [prompt="Set preferred_next_label to Done or Fix"]
    fix [prompt="Fix"]
    start -> triage
    triage -> exit [label="Done"]
    triage -> fix [label="Fix"]
    fix -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, replies={"triage": [reply(preferred_next_label="Fix")],
                                           "fix": [reply()]})
    assert ran.outcome.path == ["start", "triage", "fix", "exit"]


def test_llm_prompt_of_strongdms_pipelines_is_the_prompt(tmp_path: Path) -> None:
    dot = """
    digraph F {
      graph [goal="port the change"]
      Start [shape=circle]
      Exit [shape=doublecircle]
      Fetch [llm_prompt="Our goal is: $goal. Use outcome=done when caught up."]
      Start -> Fetch
      Fetch -> Exit [condition="outcome=done"]
    }
    """
    ran = run_flow(tmp_path, dot, goal=None, replies={"Fetch": [reply(outcome="done")]})
    assert ran.outcome.path == ["Start", "Fetch", "Exit"]
    assert "Our goal is: port the change." in ran.prompts_of("Fetch")[0]


def test_a_join_without_fan_in_does_not_run_its_meeting_node_when_every_branch_failed(
        tmp_path: Path) -> None:
    dot = flow("""
    fan [shape=component]
    a [prompt="A"]
    b [prompt="B"]
    combine [prompt="Combine"]
    start -> fan
    fan -> a -> combine
    fan -> b -> combine
    combine -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, replies={"a": [reply(outcome="fail", failure_reason="no A")],
                                           "b": [reply(outcome="fail", failure_reason="no B")]})
    assert ran.status == "failed"
    assert "no A" in ran.outcome.failure_reason and "no B" in ran.outcome.failure_reason
    assert "combine" not in ran.outcome.path
