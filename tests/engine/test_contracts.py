"""Output contracts of agent and prompt stages (SPEC §5)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from delivery.engine.contracts import (
    MAX_CORRECTIONS,
    AcceptedReply,
    ContractViolation,
    choice_literals,
    contract_text,
    correction_prompt,
    parse_reply,
)
from delivery.engine.work import CandidateScope, GoalScope, HierarchyScope, LeafScope
from delivery.errors import RunError
from delivery.lang.declarations import OutputDecl, parse_outputs
from delivery.testing import flow
from delivery.validation.loader import check_source

REVIEW_WORKFLOW = flow("""
review [type=prompt, prompt="Review the change", outputs="verdict:choice, findings:json"]
fix    [prompt="Fix: {{ findings }}"]
ship   [prompt="Ship it"]
start -> review
review -> ship [condition="verdict=pass"]
review -> fix  [condition="verdict=rework || verdict!=\\"needs work\\""]
review -> exit [condition="outcome=fail"]
fix -> review
ship -> exit
""", goal="Review a change", name="Review")

CHOICES = {"verdict": ["needs work", "pass", "rework"]}


def outputs(text: str) -> list[OutputDecl]:
    return parse_outputs(text)


def reply_with(updates: dict[str, Any], prose: str = "Done.") -> str:
    return f"{prose}\n\n{json.dumps({'context_updates': updates})}\n"


def problems_of(
    reply: str, declared: str, choices: dict[str, list[str]] | None = None
) -> list[str]:
    with pytest.raises(ContractViolation) as caught:
        parse_reply(reply, outputs(declared), choices or {})
    return caught.value.problems


# -- choices -----------------------------------------------------------------------------


def test_choice_literals_come_from_the_outgoing_edge_conditions() -> None:
    workflow, diagnostics = check_source(REVIEW_WORKFLOW)
    assert workflow is not None, diagnostics
    literals = choice_literals(workflow, workflow.nodes["review"])
    assert literals == {"verdict": ["needs work", "pass", "rework"]}


def test_choice_equal_to_a_literal_is_accepted_and_routes() -> None:
    workflow, _ = check_source(REVIEW_WORKFLOW)
    assert workflow is not None
    review = workflow.nodes["review"]
    reply = reply_with({"verdict": "pass", "findings": []})
    accepted = parse_reply(reply, review.outputs, choice_literals(workflow, review))
    assert accepted.updates["verdict"] == "pass"
    to_ship = next(e for e in workflow.outgoing["review"] if e.target == "ship")
    assert to_ship.condition is not None and to_ship.condition.evaluate(accepted.updates)


def test_choice_not_among_the_literals_is_rejected() -> None:
    problems = problems_of(reply_with({"verdict": "approve"}), "verdict:choice", CHOICES)
    assert len(problems) == 1
    assert "'verdict'" in problems[0] and '"approve"' in problems[0] and '"pass"' in problems[0]


# -- json and text -----------------------------------------------------------------------


def test_json_scalar_is_rejected() -> None:
    problems = problems_of(reply_with({"findings": "none"}), "findings:json")
    assert len(problems) == 1
    assert "'findings'" in problems[0] and "scalar" in problems[0] and '"none"' in problems[0]


def test_json_object_is_stored_as_canonical_json_text() -> None:
    reply = (
        "Found two.\n"
        '{"context_updates": {"findings": {"z": [1, 2], "a": {"y": "é", "b": null}}}}'
    )
    accepted = parse_reply(reply, outputs("findings:json"), {})
    assert accepted.updates == {"findings": '{"a":{"b":null,"y":"é"},"z":[1,2]}'}


def test_empty_text_is_rejected() -> None:
    problems = problems_of(reply_with({"summary": "   "}), "summary:text")
    assert len(problems) == 1 and "'summary'" in problems[0] and "non-empty" in problems[0]


# -- work scopes -------------------------------------------------------------------------

TICKET = "https://tracker.example/T-1"
PARENT = "https://tracker.example/T-0"


@pytest.mark.parametrize(
    ("scope", "model"),
    [
        ({"type": "leaf", "ticket": TICKET, "parent": PARENT}, LeafScope),
        ({"type": "leaf", "ticket": TICKET, "parent": None}, LeafScope),
        ({"type": "hierarchy", "ticket": PARENT, "children": [TICKET]}, HierarchyScope),
        ({"type": "candidate", "description": "Flaky test", "evidence": ["CI log"]},
         CandidateScope),
        ({"type": "goal", "goal": "Make the build green"}, GoalScope),
    ],
)
def test_each_work_variant_is_accepted(scope: dict[str, Any], model: type) -> None:
    accepted = parse_reply(reply_with({"scope": scope}), outputs("scope:work"), {})
    assert isinstance(accepted.work, model)
    assert accepted.updates == {"scope": scope}


def test_leaf_that_is_its_own_parent_is_rejected() -> None:
    scope = {"type": "leaf", "ticket": TICKET, "parent": TICKET}
    problems = problems_of(reply_with({"scope": scope}), "scope:work")
    assert len(problems) == 1 and "'scope'" in problems[0] and "own parent" in problems[0]


def test_non_http_ticket_is_rejected() -> None:
    scope = {"type": "leaf", "ticket": "ftp://tracker.example/T-1", "parent": None}
    problems = problems_of(reply_with({"scope": scope}), "scope:work")
    assert len(problems) == 1
    assert '"ticket"' in problems[0] and "ftp://tracker.example/T-1" in problems[0]


def test_hierarchy_without_children_is_rejected() -> None:
    scope = {"type": "hierarchy", "ticket": TICKET, "children": []}
    problems = problems_of(reply_with({"scope": scope}), "scope:work")
    assert len(problems) == 1 and '"children"' in problems[0] and "at least one" in problems[0]


# -- declared keys -----------------------------------------------------------------------


def test_undeclared_key_is_rejected() -> None:
    problems = problems_of(reply_with({"summary": "ok", "mood": "happy"}), "summary:text")
    assert problems == ["'mood' is not a declared output (declared: summary)"]


def test_missing_declared_key_is_rejected() -> None:
    problems = problems_of(reply_with({"summary": "ok"}), "summary:text, findings:json")
    assert len(problems) == 1 and "'findings'" in problems[0] and "missing" in problems[0]


def test_every_problem_is_collected() -> None:
    reply = reply_with({"verdict": "maybe", "findings": 3, "extra": 1})
    problems = problems_of(reply, "verdict:choice, findings:json, summary:text", CHOICES)
    assert len(problems) == 4


def test_reply_without_json_object_is_rejected_when_outputs_are_declared() -> None:
    problems = problems_of("I reviewed it and all is fine.", "summary:text")
    assert len(problems) == 1 and "no JSON object" in problems[0]


def test_reply_without_json_object_is_accepted_when_nothing_is_declared() -> None:
    accepted = parse_reply("All done, nothing to report.", [], {})
    assert accepted == AcceptedReply({}, None, None, "", "")


def test_broken_json_object_is_reported_as_not_valid_json() -> None:
    problems = problems_of('Done. {"context_updates": {"summary": "ok",}}', "summary:text")
    assert "not valid JSON" in problems[0]


# -- finding the object ------------------------------------------------------------------


def test_last_json_object_wins() -> None:
    reply = (
        'First draft: {"context_updates": {"summary": "draft"}}\n'
        'Final answer: {"context_updates": {"summary": "final"}}'
    )
    assert parse_reply(reply, outputs("summary:text"), {}).updates == {"summary": "final"}


def test_fenced_json_object_is_found() -> None:
    reply = (
        "Here is my review.\n\n```json\n"
        '{\n  "context_updates": {\n    "verdict": "rework",\n'
        '    "findings": [{"line": 3}]\n  }\n}\n'
        "```\n"
    )
    accepted = parse_reply(reply, outputs("verdict:choice, findings:json"), CHOICES)
    assert accepted.updates == {"verdict": "rework", "findings": '[{"line":3}]'}


def test_braces_inside_strings_do_not_confuse_the_scanner() -> None:
    summary = 'use "}" and "{" freely, even \\"{\\" escaped'
    reply = 'Note {this} prose.\n' + json.dumps({"context_updates": {"summary": summary}})
    assert parse_reply(reply, outputs("summary:text"), {}).updates == {"summary": summary}


def test_objects_nested_in_the_chosen_object_are_not_candidates() -> None:
    reply = reply_with({"findings": {"outcome": "failed", "context_updates": {}}})
    accepted = parse_reply(reply, outputs("findings:json"), {})
    assert accepted.outcome is None
    assert accepted.updates == {"findings": '{"context_updates":{},"outcome":"failed"}'}


@pytest.mark.parametrize("pad", [0, 1, 2, 3, 5, 8])
def test_large_object_is_read_whole(pad: int) -> None:
    findings = [{"line": i, "score": 1234.5678 + i} for i in range(3000)]
    summary = "long text " * 2000
    reply = "x" * pad + "{ stray\n" + reply_with({"summary": summary, "findings": findings})
    accepted = parse_reply(reply, outputs("summary:text, findings:json"), {})
    assert accepted.updates["summary"] == summary
    assert json.loads(accepted.updates["findings"]) == findings


# -- outcome, failure_reason, preferred_label --------------------------------------------


def test_reported_failure_is_accepted_without_updates() -> None:
    reply = json.dumps({
        "outcome": "fail",
        "failure_reason": "the repository does not build",
        "context_updates": {"verdict": "not-a-literal", "undeclared": 1},
    })
    accepted = parse_reply(reply, outputs("verdict:choice, summary:text"), CHOICES)
    assert accepted == AcceptedReply({}, None, "failed", "the repository does not build", "")


def test_outcome_alias_success_is_normalised() -> None:
    reply = json.dumps({
        "outcome": "success",
        "preferred_label": "Ship",
        "context_updates": {"summary": "all good"},
    })
    accepted = parse_reply(reply, outputs("summary:text"), {})
    assert accepted.outcome == "succeeded" and accepted.preferred_label == "Ship"
    assert accepted.updates == {"summary": "all good"}


def test_unknown_outcome_and_non_string_reason_are_problems() -> None:
    reply = json.dumps({"outcome": "not a word", "failure_reason": 3, "context_updates": []})
    problems = problems_of(reply, "")
    assert len(problems) == 3
    assert '"outcome"' in problems[0] and '"failure_reason"' in problems[1]
    assert '"context_updates" must be an object' in problems[2]


# -- telling the agent -------------------------------------------------------------------


def test_correction_prompt_includes_every_problem_and_the_contract() -> None:
    declared = outputs("verdict:choice, findings:json")
    contract = contract_text(declared, CHOICES)
    with pytest.raises(ContractViolation) as caught:
        parse_reply(reply_with({"verdict": "maybe", "findings": 1}), declared, CHOICES)
    prompt = correction_prompt(caught.value, contract)
    assert len(caught.value.problems) == 2
    for problem in caught.value.problems:
        assert problem in prompt
    assert prompt.endswith(contract)
    assert isinstance(caught.value, RunError) and MAX_CORRECTIONS == 2


def test_contract_text_mentions_every_key_kind_and_literal() -> None:
    declared = outputs("verdict:choice, findings:json, summary:text, scope:work")
    text = contract_text(declared, CHOICES)
    for name, kind in (("verdict", "choice"), ("findings", "json"), ("summary", "text"),
                       ("scope", "work")):
        assert f'"{name}" ({kind})' in text
    for literal in CHOICES["verdict"]:
        assert f'"{literal}"' in text
    for tag in ("leaf", "hierarchy", "candidate", "goal"):
        assert f'"type": "{tag}"' in text
    for word in ("context_updates", "```json", "outcome", "failure_reason", "preferred_label"):
        assert word in text
    assert text == contract_text(declared, CHOICES)


def test_contract_text_without_outputs_says_the_object_is_optional() -> None:
    text = contract_text([], {})
    assert "optional" in text
    for word in ("outcome", "failure_reason", "preferred_label"):
        assert word in text
