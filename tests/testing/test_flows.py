"""delivery.testing.flows: the workflow builder the tests share, read back by the real loader."""

from __future__ import annotations

from delivery.lang.model import Workflow
from delivery.testing import flow
from delivery.validation.loader import check_source

BODY = """
    a [type=prompt, prompt="Plan"]
    start -> a -> exit
"""


def load(dot: str) -> Workflow:
    workflow, diagnostics = check_source(dot)
    errors = [d for d in diagnostics if d.severity == "error"]
    assert workflow is not None and not errors, errors
    return workflow


def test_a_built_flow_is_a_valid_workflow_with_start_exit_and_the_body() -> None:
    workflow = load(flow(BODY))
    assert workflow.name == "F"
    assert set(workflow.nodes) == {"start", "exit", "a"}
    assert [(e.source, e.target) for e in workflow.edges] == [("start", "a"), ("a", "exit")]


def test_the_goal_is_the_graph_goal_and_none_leaves_it_out() -> None:
    assert load(flow(BODY, goal="Ship it")).goal == "Ship it"
    assert load(flow(BODY, goal=None)).goal == ""
    assert "graph [" not in flow(BODY, goal=None)


def test_mapped_graph_attributes_are_quoted_so_any_text_survives() -> None:
    tricky = 'say "hi" \\ then, go'
    workflow = load(flow(BODY, graph={"label": tricky, "inputs": "ticket, notes?"}))
    assert workflow.attr("label") == tricky
    assert [i.name for i in workflow.inputs] == ["ticket", "notes"]


def test_graph_attribute_text_is_written_as_is_after_the_goal() -> None:
    dot = flow(BODY, graph='inputs="n", default_max_retry=2')
    assert '  graph [goal="g", inputs="n", default_max_retry=2]\n' in dot
    assert load(dot).default_max_retries == 2


def test_the_body_may_be_written_at_any_indentation() -> None:
    flat = 'a [type=prompt, prompt="Plan"]\nstart -> a -> exit'
    assert flow(BODY) == flow(flat) == flow("\n\n        " + flat.replace("\n", "\n        "))


def test_the_name_is_the_digraph_name() -> None:
    assert load(flow(BODY, name="Release")).name == "Release"
