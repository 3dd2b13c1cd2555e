"""Node, edge and graph attributes are parsed and checked once, when the model is built:
typed fields on the model, a bad value an error at its position with a fix, an unknown
name a warning with a did-you-mean (SPEC §1.2, issue 9)."""

from __future__ import annotations

import pytest

from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import NodeType, Workflow
from delivery.validation.loader import check_source


def load(body: str, graph: str = "") -> tuple[Workflow, list[Diagnostic]]:
    source = ("digraph g {\n" + (f"graph [{graph}]\n" if graph else "")
              + "start [shape=Mdiamond]\nexit [shape=Msquare]\n" + body + "\n}\n")
    workflow, diagnostics = check_source(source, "t.dot")
    assert workflow is not None
    return workflow, diagnostics


def of_rule(diagnostics: list[Diagnostic], rule: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.rule == rule]


def test_typed_node_fields_hold_parsed_values() -> None:
    workflow, _ = load('a [prompt="p", max_retries=3, timeout="15m", goal_gate=true, '
                       'allow_partial=true, auto_status=true]\nstart -> a -> exit')
    node = workflow.nodes["a"]
    assert (node.max_retries, node.timeout, node.goal_gate) == (3, 900.0, True)
    assert node.allow_partial and node.auto_status


def test_typed_edge_fields_hold_parsed_values() -> None:
    workflow, _ = load('a [prompt="p"]\nstart -> a\na -> exit [weight=-2, loop_restart=false]')
    edge = workflow.outgoing["a"][0]
    assert (edge.weight, edge.loop_restart) == (-2, False)


def test_bad_values_are_errors_at_their_position_with_a_fix() -> None:
    _, diagnostics = load('a [prompt="p", max_retries="x", timeout="soon"]\n'
                          'start -> a\na -> exit [weight=1.5]')
    bad = sorted((d.line, d.column, d.message) for d in of_rule(diagnostics, "attribute_value"))
    assert bad == [(4, 28, "max_retries='x' is not an integer"),
                   (4, 41, "timeout='soon' is not a duration"),
                   (6, 19, "weight='1.5' is not a whole number")]
    assert all(d.severity == "error" and d.fix for d in of_rule(diagnostics, "attribute_value"))


def test_a_bad_value_leaves_the_default_rather_than_a_guess() -> None:
    workflow, _ = load('a [prompt="p", max_retries=-1]\nstart -> a -> exit')
    assert workflow.nodes["a"].max_retries is None


def test_default_max_retry_is_attractors_spelling_of_default_max_retries() -> None:
    workflow, diagnostics = load("start -> exit", graph="default_max_retry=2")
    assert workflow.default_max_retries == 2
    assert diagnostics == []


def test_join_policy_and_the_older_join_spelling() -> None:
    workflow, _ = load('p [shape=component, join_policy=first_success]\n'
                       'q [shape=component, join=any]\nr [shape=component]')
    assert [workflow.nodes[n].join_policy for n in "pqr"] == [
        "first_success", "first_success", "wait_all"]


def test_an_edge_condition_typo_is_an_error_with_did_you_mean() -> None:
    _, diagnostics = load('a [prompt="p"]\nstart -> a\na -> exit [conditon="outcome=success"]')
    (typo,) = of_rule(diagnostics, "attribute_typo")
    assert typo.severity == "error" and "'conditon'" in typo.message
    assert "did you mean condition=?" in typo.message and typo.edge == "a -> exit"


def test_a_node_prompt_typo_is_an_error_with_did_you_mean() -> None:
    _, diagnostics = load('a [promt="Plan it"]\nstart -> a -> exit')
    (typo,) = of_rule(diagnostics, "attribute_typo")
    assert typo.node == "a" and "did you mean prompt=?" in typo.fix


@pytest.mark.parametrize(("written", "meant"), [
    ("condtiion", "condition"), ("cnditon", "condition"), ("typ", "type"), ("shap", "shape"),
    ("outptus", "outputs"), ("fact", "facts"), ("goalgate", "goal_gate"),
    ("loop_restat", "loop_restart"), ("for_each", "foreach"), ("onyl", "only")])
def test_each_attribute_that_routes_or_asks_is_an_error_one_or_two_edits_away(
        written: str, meant: str) -> None:
    _, diagnostics = load(f'a [prompt="p", {written}="x"]\nstart -> a -> exit')
    (typo,) = of_rule(diagnostics, "attribute_typo")
    assert f"did you mean {meant}=?" in typo.message


def test_a_typo_of_an_attribute_that_does_not_route_stays_a_warning() -> None:
    _, diagnostics = load('p [type=publish, titel="Add health"]\nstart -> p -> exit')
    (typo,) = of_rule(diagnostics, "unknown_attribute")
    assert typo.severity == "warning" and "did you mean title=" in typo.fix
    assert of_rule(diagnostics, "attribute_typo") == []


def test_a_name_three_edits_from_condition_stays_a_warning() -> None:
    _, diagnostics = load('a [prompt="p"]\nstart -> a\na -> exit [cndton="outcome=success"]')
    assert [d.rule for d in diagnostics] == ["unknown_attribute"]


def test_a_routing_typo_listed_in_extra_attributes_is_quiet() -> None:
    _, diagnostics = load('a [prompt="p", phase="2"]\nstart -> a -> exit',
                          graph='extra_attributes="phase"')
    assert diagnostics == []


def test_extra_attributes_quiet_attributes_used_on_purpose() -> None:
    _, diagnostics = load('a [prompt="p", team="infra", owner="ada"]\nstart -> a -> exit',
                          graph='extra_attributes="team,owner"')
    assert of_rule(diagnostics, "unknown_attribute") == []


def test_agent_profile_and_graphviz_attributes_are_known() -> None:
    _, diagnostics = load(
        'a [prompt="p", llm_model="m", llm_provider="x", reasoning_effort=high, '
        'thread_id=t, fidelity=full, agent=fast, class="code", color=red, timeout="1m"]\n'
        'start -> a\na -> exit [fidelity=compact, thread_id=t, color=blue]',
        graph='model_stylesheet="* { llm_model: m; }", default_fidelity=compact, rankdir=LR')
    assert [d for d in diagnostics if d.rule in ("unknown_attribute",
                                                 "attribute_not_honoured")] == []


def test_an_attractor_attribute_delivery_does_not_act_on_is_named() -> None:
    _, diagnostics = load("start -> exit", graph='tool_hooks.pre="./audit.sh"')
    (hook,) = of_rule(diagnostics, "attribute_not_honoured")
    assert "tool_hooks.pre" in hook.message and hook.severity == "warning"


def test_house_is_a_manager_loop_that_needs_a_child_pipeline() -> None:
    workflow, diagnostics = load('m [shape=house]\nstart -> m -> exit')
    (error,) = of_rule(diagnostics, "manager_loop")
    assert error.severity == "error" and "no child pipeline" in error.message
    assert workflow is not None and workflow.nodes["m"].type is NodeType.MANAGER_LOOP


def test_type_stack_manager_loop_takes_the_spec_defaults() -> None:
    workflow, diagnostics = load('m [type="stack.manager_loop"]\nstart -> m -> exit',
                                 graph='stack.child_dotfile="child.dot"')
    assert [d.rule for d in diagnostics if d.severity == "error"] == []
    assert workflow is not None
    settings = workflow.nodes["m"].manager
    assert settings is not None
    assert (settings.child_dotfile, settings.poll_interval, settings.max_cycles,
            settings.actions, settings.stop_condition) == ("child.dot", 45.0, 1000,
                                                           ("observe", "wait"), None)


def test_a_shape_graphviz_does_not_know_is_a_warning_with_did_you_mean() -> None:
    workflow, diagnostics = load('a [shape=bx, prompt="p"]\nstart -> a -> exit')
    (odd,) = of_rule(diagnostics, "unknown_shape")
    assert "shape=box" in odd.fix
    assert workflow.nodes["a"].type is NodeType.AGENT


def test_a_graphviz_shape_outside_attractors_table_is_a_quiet_agent() -> None:
    workflow, diagnostics = load('a [shape=rect, prompt="p"]\nstart -> a -> exit')
    assert workflow.nodes["a"].type is NodeType.AGENT
    assert diagnostics == []


def test_a_file_without_delivery_declarations_and_helm_braces_is_plain() -> None:
    workflow, diagnostics = load('a [prompt="Set {{ .Values.tag }} for $goal"]\n'
                                 'start -> a -> exit')
    assert workflow.template == "plain" and workflow.nodes["a"].template == "plain"
    assert [d.rule for d in diagnostics] == ["template_plain"]


def test_a_file_with_delivery_declarations_is_jinja() -> None:
    workflow, diagnostics = load('a [prompt="Set {{ .Values.tag }}", outputs="x:text"]\n'
                                 'start -> a -> exit')
    assert workflow.template == "jinja"
    assert "template_syntax" in [d.rule for d in diagnostics]


def test_template_plain_per_node_keeps_braces_literal() -> None:
    workflow, diagnostics = load('a [prompt="echo ${#a[@]} {{ x }}", template=plain, '
                                 'outputs="y:text"]\nstart -> a -> exit')
    assert workflow.nodes["a"].template == "plain"
    assert [d for d in diagnostics if d.severity == "error"] == []


def test_wait_attributes_are_typed_and_a_bad_backoff_is_an_error() -> None:
    workflow, diagnostics = load('w [type=wait, interval="30s", backoff=2, max_interval="5m"]\n'
                                 'v [type=wait, backoff=x]\nstart -> w -> v -> exit')
    node = workflow.nodes["w"]
    assert (node.interval, node.backoff, node.max_interval) == (30.0, 2.0, 300.0)
    (bad,) = of_rule(diagnostics, "attribute_value")
    assert bad.node == "v" and "backoff='x'" in bad.message


def test_outputs_naming_files_is_a_warning_not_a_declaration() -> None:
    workflow, diagnostics = load('a [prompt="p", outputs="out/report.md, notes.txt"]\n'
                                 'start -> a -> exit')
    assert workflow.nodes["a"].outputs == ()
    assert [(d.rule, d.severity) for d in diagnostics] == [("outputs_files", "warning")]


def test_an_outputs_typo_with_a_kind_after_a_dot_stays_an_error() -> None:
    _, diagnostics = load('a [prompt="p", outputs="summary.text"]\nstart -> a -> exit')
    assert [d.rule for d in diagnostics if d.severity == "error"] == ["outputs_declaration"]


def test_publish_title_is_a_known_attribute() -> None:
    _, diagnostics = load('p [type=publish, title="Add health"]\nstart -> p -> exit')
    assert of_rule(diagnostics, "unknown_attribute") == []
