"""Validator behaviour beyond the one-file-per-rule examples: what counts as written, where
a diagnostic points, and which near misses are accepted."""

from __future__ import annotations

from delivery.lang.diagnostics import Diagnostic
from delivery.validation.loader import check_source


def check(body: str, graph: str = "") -> list[Diagnostic]:
    source = ("digraph g {\n" + (f"graph [{graph}]\n" if graph else "")
              + "start [shape=Mdiamond]\nexit [shape=Msquare]\n" + body + "\n}\n")
    workflow, diagnostics = check_source(source, "t.dot")
    assert workflow is not None
    return diagnostics


def rules(body: str, graph: str = "") -> list[str]:
    return [d.rule for d in check(body, graph) if d.severity == "error"]


def test_diagnostics_are_sorted_by_position() -> None:
    diagnostics = check('b [type=robot]\na [type=robot]\nstart -> a -> b -> exit')
    assert [(d.line, d.rule) for d in diagnostics] == [(4, "type_known"), (5, "type_known")]


def test_diagnostic_names_the_node_or_the_edge() -> None:
    (node_diag,) = [d for d in check('a [type=robot]\nstart -> a -> exit')]
    assert (node_diag.node, node_diag.edge) == ("a", None)
    (edge_diag,) = check('a [prompt="p"]\nstart -> a\na -> exit [condition="x=="]')
    assert (edge_diag.node, edge_diag.edge) == (None, "a -> exit")


def test_condition_syntax_points_at_the_bad_character() -> None:
    (diag,) = check('a [prompt="p"]\nstart -> a\na -> exit [condition="outcome=x &&"]')
    assert (diag.line, diag.column) == (6, 35)


# -- availability -----------------------------------------------------------------------


def test_output_written_on_every_path_is_available() -> None:
    assert rules('a [prompt="p", outputs="v:text"]\nb [prompt="{{ v }}"]\n'
                 "start -> a -> b -> exit") == []


def test_declared_inputs_and_engine_keys_are_always_available() -> None:
    assert rules('a [prompt="{{ ticket }} {{ inputs.ticket }} {{ goal }} {{ graph.goal }} '
                 '{{ outcome }} {{ last_stage }}"]\nstart -> a -> exit',
                 graph='inputs="ticket"') == []


def test_read_with_a_default_filter_is_not_checked() -> None:
    assert rules("a [prompt=\"{{ later | default('none') }}\"]\nstart -> a -> exit") == []


def test_read_inside_an_is_defined_guard_is_not_checked() -> None:
    body = 'a [prompt="{% if later is defined %}{{ later }}{% endif %}"]\nstart -> a -> exit'
    assert rules(body) == []


def test_read_outside_an_is_defined_guard_is_checked() -> None:
    body = ('a [prompt="{% if later is defined %}ok{% else %}{{ later }}{% endif %}"]\n'
            "start -> a -> exit")
    assert rules(body) == ["availability"]


def test_context_prefix_in_templates_reads_the_same_key() -> None:
    diagnostics = check('a [prompt="{{ context.nowhere }}"]\nstart -> a -> exit')
    assert [(d.rule, d.message.split("'")[1]) for d in diagnostics] == [
        ("availability", "nowhere")]


def test_failure_edge_does_not_carry_outputs() -> None:
    diagnostics = check('a [prompt="p", outputs="v:text"]\nb [prompt="{{ v }}"]\n'
                        'start -> a\na -> b [condition="outcome=failed"]\n'
                        'a -> exit [condition="outcome=succeeded"]\nb -> exit')
    (diag,) = diagnostics
    assert diag.rule == "availability" and "-(on failure)->" in diag.message


def test_script_failure_flag_is_written_even_on_failure() -> None:
    assert rules('s [type=script, script="make"]\nr [prompt="{{ s.failed }}"]\n'
                 'start -> s\ns -> r [condition="outcome=failed"]\n'
                 's -> exit [condition="outcome=succeeded"]\nr -> exit') == []


def test_retry_target_jump_carries_no_outputs() -> None:
    assert rules('a [prompt="p", outputs="v:text", retry_target=b]\nb [prompt="{{ v }}"]\n'
                 "start -> a -> b -> exit") == ["availability"]


def test_loop_must_write_before_the_first_read() -> None:
    assert rules('w [prompt="{{ notes }}"]\nr [prompt="p", outputs="notes:text"]\n'
                 'start -> w -> r\nr -> w [condition="notes=again"]\n'
                 'r -> exit [condition="notes!=again"]') == ["availability"]


def test_condition_on_a_loop_restart_edge_sees_the_source_writes() -> None:
    assert rules('w [prompt="p", outputs="v:choice"]\nstart -> w\n'
                 'w -> w [condition="v=again", loop_restart=true]\n'
                 'w -> exit [condition="v=done"]') == []


def test_loop_restart_keeps_only_the_inputs() -> None:
    body = ('a [prompt="p", outputs="plan:text"]\nb [prompt="{{ plan }} {{ ticket }}", '
            'outputs="v:choice"]\nstart -> a -> b\nb -> b [condition="v=again", '
            'loop_restart=true]\nb -> exit [condition="v=done"]')
    diagnostics = check(body, graph='inputs="ticket"')
    assert [(d.rule, d.message.split("'")[1]) for d in diagnostics] == [("availability", "plan")]


def test_probe_writes_roll_ups_and_per_folder_facts() -> None:
    assert rules('p [type=probe, probe="pr,threads"]\n'
                 'r [prompt="{{ pr.state }} {{ web.pr.state }} {{ threads.unresolved }}"]\n'
                 "start -> p -> r -> exit", graph='folders="web,api"') == []


def test_probe_writes_only_its_kinds() -> None:
    assert rules('p [type=probe, probe="pr"]\nr [prompt="{{ web.diff.files }}"]\n'
                 "start -> p -> r -> exit", graph='folders="web"') == ["availability"]


def test_human_gate_writes_its_selection() -> None:
    assert rules('h [type=human]\nb [prompt="{{ human.gate.selected }}"]\n'
                 'start -> h\nh -> b [label="[Y] Yes"]\nh -> exit [label="[N] No"]\n'
                 "b -> exit") == []


def test_work_output_makes_current_work_available() -> None:
    assert rules('a [prompt="p", outputs="scope:work"]\nb [prompt="{{ current_work }}"]\n'
                 "start -> a -> b -> exit") == []
    assert rules('b [prompt="{{ current_work }}"]\nstart -> b -> exit') == ["availability"]


def test_json_output_can_be_read_below_its_name() -> None:
    assert rules('a [prompt="p", outputs="findings:json"]\n'
                 'b [prompt="{{ findings.0.title }} {{ findings.length }}"]\n'
                 "start -> a -> b -> exit") == []


def test_unread_branch_write_after_join_is_reported_with_parallel_results_fix() -> None:
    body = ('split [shape=component]\nl [prompt="p", outputs="v:text"]\n'
            'r [prompt="p"]\njoin [shape=tripleoctagon]\nafter [prompt="{{ v }}"]\n'
            "start -> split\nsplit -> l -> join\nsplit -> r -> join\njoin -> after -> exit")
    (diag,) = check(body)
    assert diag.rule == "branch_key_after_join"
    assert "parallel.results.0.context.v" in diag.fix


def test_parallel_result_read_of_a_key_the_branch_does_not_write_is_reported() -> None:
    body = ('split [shape=component]\nl [prompt="p", outputs="v:text"]\n'
            'r [prompt="p"]\njoin [shape=tripleoctagon]\n'
            "after [prompt=\"{{ parallel.results['1'].context.v }}\"]\n"
            "start -> split\nsplit -> l -> join\nsplit -> r -> join\njoin -> after -> exit")
    assert rules(body) == ["availability"]


def test_parallel_result_read_of_a_written_key_is_available() -> None:
    body = ('split [shape=component]\nl [prompt="p", outputs="v:text"]\n'
            'r [prompt="p"]\njoin [shape=tripleoctagon]\n'
            'after [prompt="{{ parallel.results.0.context.v }} {{ parallel.results }}"]\n'
            "start -> split\nsplit -> l -> join\nsplit -> r -> join\njoin -> after -> exit")
    assert rules(body) == []


def test_parallel_results_without_a_parallel_node_is_reported() -> None:
    assert rules('a [prompt="{{ parallel.results.0.outcome }}"]\nstart -> a -> exit') == [
        "availability"]


def test_nested_parallel_sections_match_their_own_fan_in() -> None:
    body = ('outer [shape=component]\ninner [shape=component]\n'
            'a [prompt="p"]\nb [prompt="p"]\nc [prompt="p"]\n'
            'inner_join [shape=tripleoctagon]\nouter_join [shape=tripleoctagon]\n'
            "start -> outer\nouter -> inner\nouter -> c -> outer_join\n"
            "inner -> a -> inner_join\ninner -> b -> inner_join\n"
            "inner_join -> outer_join\nouter_join -> exit")
    assert rules(body) == []


# -- literals and choices ------------------------------------------------------------------


def test_outcome_aliases_are_possible_literals() -> None:
    assert rules('a [prompt="p"]\nstart -> a\na -> exit [condition="outcome=success"]\n'
                 'a -> exit [condition="outcome=fail"]') == []


def test_outcome_typo_is_a_custom_outcome_warning() -> None:
    (diag,) = check('a [prompt="p"]\nstart -> a\na -> exit [condition="outcome=sucess"]')
    assert diag.rule == "custom_outcome" and diag.severity == "warning"
    assert "succeeded" in diag.fix


def test_boolean_probe_fact_compared_with_a_non_boolean_is_impossible() -> None:
    assert rules('p [type=probe]\nstart -> p\np -> exit [condition="pr.ready=yes"]') == [
        "impossible_literal"]


def test_choice_literal_set_is_the_union_of_its_edges() -> None:
    body = ('r [prompt="p", outputs="v:choice"]\nlater [prompt="p"]\n'
            'start -> r\nr -> later [condition="v=a"]\nr -> exit [condition="v=b"]\n'
            'later -> exit [condition="v=b || v=a"]')
    assert rules(body) == []


def test_a_choice_redeclared_as_text_is_open() -> None:
    body = ('r [prompt="p", outputs="v:choice"]\ns [prompt="p", outputs="v:text"]\n'
            'start -> r\nr -> s [condition="v=a"]\ns -> exit [condition="v=anything"]')
    assert rules(body) == []


# -- structure ------------------------------------------------------------------------------


def test_goal_gate_retry_target_on_the_graph_is_enough() -> None:
    diagnostics = check('t [prompt="p", goal_gate=true]\nstart -> t -> exit',
                        graph='retry_target="t"')
    assert [d.rule for d in diagnostics] == []


def test_node_reached_only_through_a_retry_target_is_reachable() -> None:
    assert rules('a [prompt="p", retry_target=fix]\nfix [prompt="p"]\n'
                 "start -> a -> exit\nfix -> a") == []


def test_negative_weight_is_allowed_but_negative_retries_are_not() -> None:
    assert rules('a [prompt="p", max_retries=-1]\nstart -> a\na -> exit [weight=-2]') == [
        "attribute_value"]


def test_bad_boolean_duration_and_join_values_are_reported() -> None:
    diagnostics = check('a [prompt="p", goal_gate=yes, timeout=soon, retry_target=a]\n'
                        "p [shape=component, join=some]\nj [shape=tripleoctagon]\n"
                        "start -> a -> p -> j -> exit")
    assert sorted(d.message for d in diagnostics if d.rule == "attribute_value") == [
        "goal_gate='yes' is not true or false", "join='some' is not one of all, any",
        "timeout='soon' is not a duration"]


def test_output_named_like_a_nodes_failure_flag_is_reserved() -> None:
    (diag,) = check('s [type=script, script="x", facts="s.failed"]\nstart -> s -> exit')
    assert diag.rule == "reserved_namespace" and "failure flag" in diag.message


def test_input_in_a_reserved_namespace_is_reported_at_its_offset() -> None:
    (diag,) = check("start -> exit", graph='inputs="ticket, outcome"')
    assert diag.rule == "reserved_namespace"
    assert (diag.line, diag.column) == (2, 24)


def test_script_prompt_is_not_a_template_but_its_script_is() -> None:
    assert rules('s [type=script, prompt="{{ nowhere }}", script="echo {{ goal }}"]\n'
                 "start -> s -> exit") == []
    assert rules('s [type=script, script="echo {{ nowhere }}"]\nstart -> s -> exit') == [
        "availability"]


def test_a_diamond_after_a_stage_routes_its_success_on_that_stages_writes() -> None:
    # observe -> route: a failure of observe flows into the diamond, but only edges that
    # test the outcome can be taken then, so the others read what a success wrote
    assert rules('o [prompt="p", outputs="verdict:text"]\nroute [shape=diamond]\n'
                 'start -> o -> route\nroute -> exit [condition="verdict=ok"]\n'
                 'route -> o [condition="verdict=again"]\n'
                 'route -> exit [condition="outcome=failed"]') == []


def test_a_failure_taking_edge_out_of_a_diamond_cannot_read_the_failed_stages_outputs(
        ) -> None:
    assert rules('o [prompt="p", outputs="verdict:text"]\nroute [shape=diamond]\n'
                 'start -> o -> route\n'
                 'route -> exit [condition="outcome=failed || verdict=ok"]\n'
                 'route -> o [condition="verdict=again"]') == ["availability"]


def test_a_key_only_agents_without_outputs_may_write_is_a_warning() -> None:
    diagnostics = check('a [prompt="p"]\nstart -> a\na -> exit [condition="tests_passed=true"]\n'
                        'a -> a [condition="tests_passed!=true"]')
    assert [(d.rule, d.severity) for d in diagnostics] == [
        ("availability_unproven", "warning"), ("availability_unproven", "warning")]


def test_a_key_nothing_could_write_before_the_read_stays_an_error() -> None:
    assert rules('a [prompt="{{ notes }}"]\nb [prompt="p"]\nstart -> a -> b -> exit') == [
        "availability"]


def test_publish_writes_the_pr_number_and_url_of_each_declared_folder() -> None:
    assert rules('s [type=publish]\nr [prompt="{{ web.pr.url }} {{ api.pr.number }}"]\n'
                 "start -> s -> r -> exit", graph='folders="web,api"') == []


def test_publish_writes_nothing_for_an_undeclared_folder() -> None:
    assert rules('s [type=publish]\nr [prompt="{{ docs.pr.url }}"]\n'
                 "start -> s -> r -> exit", graph='folders="web,api"') == ["availability"]


def test_publish_of_one_folder_writes_only_that_folder() -> None:
    assert rules('s [type=publish, folder="web"]\nr [prompt="{{ api.pr.url }}"]\n'
                 "start -> s -> r -> exit", graph='folders="web,api"') == ["availability"]


def test_publish_without_declared_folders_writes_for_any_folder_like_a_probe() -> None:
    assert rules('s [type=publish]\nr [prompt="{{ web.pr.number }}"]\n'
                 "start -> s -> r -> exit") == []
