"""Routing after a stage (SPEC §1.3), failure routing, retries, goal gates and loop restarts
(SPEC §9), through whole runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import reply, run_flow

from delivery.testing import flow

FAIL = 'shape=parallelogram, script="echo broken >&2; exit 3"'
OK = 'shape=parallelogram, script="true"'


def test_the_holding_condition_with_the_highest_weight_wins(tmp_path: Path) -> None:
    dot = flow("""
    route [shape=parallelogram, script="true"]
    light [shape=parallelogram, script="true"]
    heavy [shape=parallelogram, script="true"]
    never [shape=parallelogram, script="true"]
    start -> route
    route -> light [condition="n > 1", weight=1]
    route -> heavy [condition="n > 2", weight=5]
    route -> never [condition="n > 100", weight=9]
    light -> exit
    heavy -> exit
    never -> exit
    """, graph='inputs="n"')
    ran = run_flow(tmp_path, dot, inputs={"n": "7"})
    assert ran.outcome.path == ["start", "route", "heavy", "exit"]


def test_equal_weight_conditions_tie_break_on_the_lexically_first_target(
        tmp_path: Path) -> None:
    dot = flow("""
    route [shape=parallelogram, script="true"]
    zebra [shape=parallelogram, script="true"]
    apple [shape=parallelogram, script="true"]
    start -> route
    route -> zebra [condition="outcome=succeeded"]
    route -> apple [condition="outcome=succeeded"]
    zebra -> exit
    apple -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.outcome.path == ["start", "route", "apple", "exit"]


def test_a_holding_condition_beats_a_heavier_unconditional_edge(tmp_path: Path) -> None:
    dot = flow("""
    route [shape=parallelogram, script="true"]
    plain [shape=parallelogram, script="true"]
    cond [shape=parallelogram, script="true"]
    start -> route
    route -> plain [weight=100]
    route -> cond [condition="outcome=succeeded"]
    plain -> exit
    cond -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.outcome.path == ["start", "route", "cond", "exit"]


PREFERRED = flow("""
ask [type=prompt, prompt="Decide"]
yes [shape=parallelogram, script="true"]
no [shape=parallelogram, script="true"]
start -> ask
ask -> yes [label="[Y] Yes"]
ask -> no [label="[N] No", weight=10]
yes -> exit
no -> exit
""")


@pytest.mark.parametrize("label", ["Yes", "yes", "[Y] Yes", "  YES "])
def test_an_agent_preferred_label_picks_the_matching_unconditional_edge(
        tmp_path: Path, label: str) -> None:
    ran = run_flow(tmp_path, PREFERRED,
                   replies={"ask": [reply(preferred_label=label)]})
    assert ran.outcome.path == ["start", "ask", "yes", "exit"]
    status = json.loads((ran.outcome.run_dir / "ask" / "1" / "status.json").read_text())
    assert status["preferred_label"] == label.strip()


def test_without_a_preferred_label_the_heaviest_unconditional_edge_is_taken(
        tmp_path: Path) -> None:
    ran = run_flow(tmp_path, PREFERRED, replies={"ask": [reply()]})
    assert ran.outcome.path == ["start", "ask", "no", "exit"]


def test_after_a_failure_only_outcome_conditions_are_eligible(tmp_path: Path) -> None:
    dot = flow(f"""
    work [{FAIL}]
    plain [{OK}]
    other [{OK}]
    recover [{OK}]
    start -> work
    work -> plain [weight=50]
    work -> other [condition="goal", weight=50]
    work -> recover [condition="outcome=failed"]
    plain -> exit
    other -> exit
    recover -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.outcome.path == ["start", "work", "recover", "exit"]
    assert ran.status == "succeeded"


def test_after_a_failure_with_no_eligible_edge_the_retry_target_is_taken(
        tmp_path: Path) -> None:
    dot = flow(f"""
    work [{FAIL}, retry_target="fix"]
    fix [{OK}]
    fallback [{OK}]
    start -> work
    work -> exit
    fix -> exit
    fallback -> exit
    """, graph='fallback_retry_target="fallback"')
    ran = run_flow(tmp_path, dot)
    assert ran.outcome.path == ["start", "work", "fix", "exit"]
    assert ran.status == "succeeded"


def test_without_a_retry_target_the_fallback_retry_target_is_taken(tmp_path: Path) -> None:
    dot = flow(f"""
    work [{FAIL}, fallback_retry_target="fallback"]
    fallback [{OK}]
    start -> work
    work -> exit
    fallback -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.outcome.path == ["start", "work", "fallback", "exit"]
    assert ran.status == "succeeded"


def test_with_no_edge_and_no_retry_target_the_run_fails_with_the_stage_reason(
        tmp_path: Path) -> None:
    dot = flow(f"""
    work [{FAIL}]
    start -> work
    work -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.status == "failed"
    assert ran.outcome.path == ["start", "work"]
    assert "script exited with code 3" in ran.outcome.failure_reason
    assert ran.context["failure_reason"] == ran.outcome.failure_reason


def test_an_exit_reached_through_a_failure_edge_is_a_failed_run(tmp_path: Path) -> None:
    dot = flow(f"""
    work [{FAIL}]
    start -> work
    work -> exit [condition="outcome=failed"]
    work -> exit [condition="outcome=succeeded"]
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.outcome.path == ["start", "work", "exit"]
    assert ran.status == "failed"
    assert "code 3" in ran.outcome.failure_reason


def test_a_conditional_node_keeps_the_failed_outcome_so_its_exit_fails_the_run(
        tmp_path: Path) -> None:
    dot = flow(f"""
    work [{FAIL}]
    check [shape=diamond]
    start -> work
    work -> check [condition="outcome=failed"]
    work -> check [condition="outcome=succeeded"]
    check -> exit [condition="outcome=failed"]
    check -> exit [condition="outcome=succeeded"]
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.outcome.path == ["start", "work", "check", "exit"]
    assert ran.status == "failed"


def test_a_succeeded_stage_with_no_matching_edge_fails_the_run_clearly(tmp_path: Path) -> None:
    dot = flow("""
    work [shape=parallelogram, script="true"]
    start -> work
    work -> exit [condition="n=1"]
    """, graph='inputs="n"')
    ran = run_flow(tmp_path, dot, inputs={"n": "2"})
    assert ran.status == "failed"
    assert ran.outcome.path == ["start", "work"]
    reason = ran.outcome.failure_reason
    assert "work" in reason and "no outgoing edge" in reason


# -- retries ----------------------------------------------------------------------------

FLAKY = ('shape=parallelogram, '
         'script="n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; '
         'test $n -gt 2"')


def test_max_retries_reruns_a_failing_script_with_growing_backoff(tmp_path: Path) -> None:
    dot = flow(f"""
    flaky [{FLAKY}, max_retries=2]
    start -> flaky -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert (tmp_path / "count").read_text().strip() == "3"
    assert len(ran.clock.sleeps) == 2
    first, second = ran.clock.sleeps
    assert 0 < first < second
    # every attempt has its own stage folder
    for attempt in (1, 2, 3):
        assert (ran.outcome.run_dir / "flaky" / str(attempt) / "status.json").is_file()


def test_retries_stop_at_max_retries_and_the_stage_fails(tmp_path: Path) -> None:
    dot = flow("""
    flaky [shape=parallelogram, script="echo x >> tries; exit 1", max_retries=1]
    start -> flaky -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.status == "failed"
    assert (tmp_path / "tries").read_text().count("x") == 2
    assert len(ran.clock.sleeps) == 1


def test_default_max_retries_of_the_graph_applies_to_every_stage(tmp_path: Path) -> None:
    dot = flow(f"""
    flaky [{FLAKY}]
    start -> flaky -> exit
    """, graph='default_max_retries=2')
    ran = run_flow(tmp_path, dot)
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert (tmp_path / "count").read_text().strip() == "3"
    assert len(ran.clock.sleeps) == 2


def test_a_stage_without_retries_never_sleeps(tmp_path: Path) -> None:
    dot = flow(f"""
    flaky [{FLAKY}]
    start -> flaky -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.status == "failed"
    assert ran.clock.sleeps == []


# -- goal gates -------------------------------------------------------------------------


def test_an_unmet_goal_gate_at_the_exit_jumps_to_its_retry_target(tmp_path: Path) -> None:
    dot = flow("""
    gate [shape=parallelogram, goal_gate=true, retry_target="repair",
          script="test -f fixed"]
    repair [shape=parallelogram, script="touch fixed"]
    start -> gate
    gate -> exit [condition="outcome=failed"]
    gate -> exit [condition="outcome=succeeded"]
    repair -> gate
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.outcome.path == ["start", "gate", "exit", "repair", "gate", "exit"]
    assert ran.status == "succeeded", ran.outcome.failure_reason


def test_an_unmet_goal_gate_without_retry_target_fails_the_run_naming_it(
        tmp_path: Path) -> None:
    dot = flow("""
    gate [shape=parallelogram, goal_gate=true, script="exit 1"]
    after [shape=parallelogram, script="true"]
    start -> gate
    gate -> after [condition="outcome=failed"]
    gate -> after [condition="outcome=succeeded"]
    after -> exit
    """)
    ran = run_flow(tmp_path, dot)
    assert ran.status == "failed"
    assert "goal gate 'gate'" in ran.outcome.failure_reason


# -- loop restart ------------------------------------------------------------------------


def test_a_loop_restart_restores_inputs_and_clears_outputs_and_current_work(
        tmp_path: Path) -> None:
    dot = flow("""
    plan [type=prompt, prompt="Plan {{ ticket }}",
          outputs="scope:work, note:text"]
    mutate [shape=parallelogram, facts="ticket",
            script="echo ticket=mutated >> \\"$DELIVERY_FACTS\\"; echo run >> runs"]
    again [shape=parallelogram, script="test $(wc -l < runs) -ge 2"]
    start -> plan -> mutate -> again
    again -> plan [condition="outcome=failed", loop_restart=true]
    again -> exit [condition="outcome=succeeded"]
    """, graph='inputs="ticket"')
    scope = {"type": "goal", "goal": "first pass"}
    second = {"type": "goal", "goal": "second pass"}
    ran = run_flow(tmp_path, dot, inputs={"ticket": "T-9"}, replies={
        "plan": [reply({"scope": scope, "note": "n1"}),
                 reply({"scope": second, "note": "n2"})],
    })
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.outcome.path == ["start", "plan", "mutate", "again", "plan", "mutate",
                                "again", "exit"]
    restarted_prompt = ran.prompts_of("plan")[1]
    # the original input again, not the value the fact overwrote it with
    assert "Plan T-9" in restarted_prompt
    # the completed-stages summary still lists what ran, but no stage output leaked in
    assert "n1" not in restarted_prompt
    assert "first pass" not in restarted_prompt
    assert ran.context["current_work"]["goal"] == "second pass"


def test_the_stage_after_a_loop_restart_sees_no_outputs_and_no_current_work(
        tmp_path: Path) -> None:
    dot = flow("""
    plan [type=prompt, prompt="Plan", outputs="scope:work"]
    mark [shape=parallelogram, facts="marker",
          script="echo marker=set >> \\"$DELIVERY_FACTS\\"; echo run >> runs"]
    decide [shape=parallelogram, script="test $(wc -l < runs) -ge 2"]
    fresh [type=prompt, prompt="FRESH"]
    start -> plan -> mark -> decide
    decide -> fresh [condition="outcome=failed", loop_restart=true]
    decide -> exit [condition="outcome=succeeded"]
    fresh -> plan
    """, graph='inputs="ticket"').replace(
        "FRESH", "ticket=<{{ ticket }}> marker=<{{ marker | default('cleared') }}> "
                 "work=<{{ current_work | default('none') }}>")
    scope = {"type": "goal", "goal": "the first scope"}
    ran = run_flow(tmp_path, dot, inputs={"ticket": "T-1"}, replies={
        "plan": [reply({"scope": scope}), reply({"scope": scope})],
        "fresh": [reply()],
    })
    assert ran.status == "succeeded", ran.outcome.failure_reason
    prompt = ran.prompts_of("fresh")[0]
    assert "ticket=<T-1> marker=<cleared> work=<none>" in prompt
    assert ran.context["marker"] == "set"  # written again after the restart
