"""The run context through the engine (SPEC §3, §4): engine keys, inputs, goal, refusals,
offloading of large values, and what templates see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import cli, reply, run_flow, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, start_run
from delivery.errors import RunRefused, WorkflowInvalid
from delivery.testing import flow

TWO_STAGES = flow("""
a [type=prompt, prompt="First", outputs="summary:text"]
b [type=prompt, prompt="Second"]
start -> a -> b -> exit
""", goal="graph goal")


def test_engine_keys_are_written_after_every_stage(tmp_path: Path) -> None:
    long_prose = "p" * 450
    ran = run_flow(tmp_path, TWO_STAGES, replies={
        "a": [reply({"summary": "short"}, prose="alpha")],
        "b": [reply(prose=long_prose)],
    })
    assert ran.status == "succeeded"
    ctx = ran.context
    assert ctx["outcome"] == "succeeded"
    assert ctx["failure_reason"] == ""
    assert ctx["last_stage"] == "b"
    # response.<node> holds the full final reply of every agent/prompt stage
    assert ctx["response.a"].startswith("alpha")
    assert ctx["response.b"].startswith(long_prose)
    assert len(ctx["response.b"]) > 450
    # last_response is the first 200 characters of the last reply
    assert ctx["last_response"] == ctx["response.b"][:200]
    assert ctx["summary"] == "short"


def test_the_second_stage_sees_the_first_stage_engine_keys(tmp_path: Path) -> None:
    dot = flow("""
    a [type=prompt, prompt="First"]
    b [type=prompt, prompt="after {{ last_stage }} -> {{ outcome }} [{{ failure_reason }}]"]
    start -> a -> b -> exit
    """)
    ran = run_flow(tmp_path, dot, replies={"a": [reply()], "b": [reply()]})
    assert ran.status == "succeeded"
    assert "after a -> succeeded []" in ran.prompts_of("b")[0]


INPUTS_FLOW = flow("""
first [type=prompt, prompt="ticket={{ ticket }} notes=[{{ notes }}]"]
change [shape=parallelogram, script="echo ticket=rewritten >> \\"$DELIVERY_FACTS\\"",
        facts="ticket"]
after [type=prompt, prompt="now={{ ticket }} frozen={{ inputs.ticket }}"]
start -> first -> change -> after -> exit
""", graph='inputs="ticket, notes?"')


def test_inputs_are_written_twice_and_the_inputs_copy_stays_frozen(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, INPUTS_FLOW, inputs={"ticket": "T-1"},
                   replies={"first": [reply()], "after": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert "ticket=T-1" in ran.prompts_of("first")[0]
    assert ran.context["inputs.ticket"] == "T-1"
    assert ran.context["ticket"] == "rewritten"
    assert "now=rewritten frozen=T-1" in ran.prompts_of("after")[0]


def test_an_absent_optional_input_renders_as_the_empty_string(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, INPUTS_FLOW, inputs={"ticket": "T-1"},
                   replies={"first": [reply()], "after": [reply()]})
    assert "notes=[]" in ran.prompts_of("first")[0]
    assert ran.context["inputs.notes"] == ""
    assert ran.context["notes"] == ""


GOAL_FLOW = """
digraph F {
  graph [goal="graph goal", defaults="goal='default goal'"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  a [type=prompt, prompt="goal is <{{ goal }}>"]
  start -> a -> exit
}
"""


def test_goal_from_the_request_beats_defaults_and_the_graph(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, GOAL_FLOW, goal="cli goal", replies={"a": [reply()]})
    assert ran.context["goal"] == "cli goal"
    assert "goal is <cli goal>" in ran.prompts_of("a")[0]


def test_goal_from_defaults_beats_the_graph_goal(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, GOAL_FLOW, goal=None, replies={"a": [reply()]})
    assert ran.context["goal"] == "default goal"
    assert "goal is <default goal>" in ran.prompts_of("a")[0]


def test_goal_falls_back_to_the_graph_goal(tmp_path: Path) -> None:
    dot = GOAL_FLOW.replace(', defaults="goal=\'default goal\'"', "")
    ran = run_flow(tmp_path, dot, goal=None, replies={"a": [reply()]})
    assert ran.context["goal"] == "graph goal"
    assert ran.context["graph.goal"] == "graph goal"


# -- refusals ----------------------------------------------------------------------------

REFUSAL_FLOW = flow("""
a [type=prompt, prompt="Work on {{ ticket }}"]
start -> a -> exit
""", goal=None, graph='inputs="ticket"')


def _start(tmp_path: Path, dot: str, **request: object) -> None:
    workflow = write_flow(tmp_path, dot)
    start_run(RunRequest(workflow=workflow, workspace=tmp_path, **request),  # type: ignore[arg-type]
              World(agent=None))


def test_a_missing_required_input_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(RunRefused, match="ticket"):
        _start(tmp_path, REFUSAL_FLOW, goal="g", agent="replay:none.json")
    assert not (tmp_path / ".delivery").exists()


def test_an_undeclared_input_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(RunRefused, match="colour"):
        _start(tmp_path, REFUSAL_FLOW, goal="g", inputs={"ticket": "T", "colour": "red"},
               agent="replay:none.json")


def test_a_run_without_any_goal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunRefused, match="goal"):
        _start(tmp_path, REFUSAL_FLOW, inputs={"ticket": "T"}, agent="replay:none.json")


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ([], "ticket"),
        (["--input", "ticket=T", "--input", "colour=red"], "colour"),
    ],
    ids=["missing-required-input", "undeclared-input"],
)
def test_cli_refuses_bad_inputs_with_exit_2_and_no_traceback(
        tmp_path: Path, extra: list[str], named: str) -> None:
    workflow = write_flow(tmp_path, REFUSAL_FLOW)
    replies = tmp_path / "replies.json"
    replies.write_text("{}", encoding="utf-8")
    code, out, err = cli("run", workflow, "--goal", "g", "--agent", f"replay:{replies}",
                         "--workspace", tmp_path, *extra)
    assert code == 2
    assert named in err and "refused" in err
    assert "Traceback" not in err + out


def test_cli_refuses_a_run_with_no_goal_when_the_workflow_reads_it(tmp_path: Path) -> None:
    workflow = write_flow(tmp_path, REFUSAL_FLOW.replace("{{ ticket }}", "{{ ticket }}: $goal"))
    code, out, err = cli("run", workflow, "--input", "ticket=T", "--agent", "replay:x.json",
                         "--workspace", tmp_path)
    assert code == 2
    assert "goal" in err
    assert "Traceback" not in err + out


def test_a_run_without_a_goal_starts_when_nothing_reads_it(tmp_path: Path) -> None:
    ran = run_flow(tmp_path, REFUSAL_FLOW, goal=None, inputs={"ticket": "T"},
                   replies={"a": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert ran.context["goal"] == ""


INVALID_FLOW = flow("""
a [type=prompt, prompt="Use {{ never_written }}"]
start -> a -> exit
""")


def test_an_invalid_workflow_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(WorkflowInvalid):
        _start(tmp_path, INVALID_FLOW, goal="g", agent="replay:none.json")
    assert not (tmp_path / ".delivery").exists()


def test_cli_prints_diagnostics_of_an_invalid_workflow_and_exits_2(tmp_path: Path) -> None:
    workflow = write_flow(tmp_path, INVALID_FLOW)
    code, out, err = cli("run", workflow, "--agent", "replay:x.json", "--workspace", tmp_path)
    assert code == 2
    assert "availability" in err and "never_written" in err
    assert "validation errors" in err
    assert "Traceback" not in err + out
    assert not (tmp_path / ".delivery").exists()


# -- large values ----------------------------------------------------------------------

BIG = 150 * 1024


def _checkpoint(run_dir: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((run_dir / "checkpoint.json").read_text("utf-8"))
    return data


def test_a_large_script_fact_is_offloaded_but_reads_as_its_value(tmp_path: Path) -> None:
    (tmp_path / "blob.sh").write_text(
        f"printf 'blob=' >> \"$DELIVERY_FACTS\"\n"
        f"head -c {BIG} /dev/zero | tr '\\0' x >> \"$DELIVERY_FACTS\"\n"
        "echo >> \"$DELIVERY_FACTS\"\n", encoding="utf-8")
    dot = flow("""
    big [shape=parallelogram, facts="blob", script="bash blob.sh"]
    use [type=prompt, prompt="size={{ blob | length }} head={{ blob[:5] }}"]
    start -> big -> use -> exit
    """)
    ran = run_flow(tmp_path, dot, replies={"use": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    stored = _checkpoint(ran.outcome.run_dir)["context"]
    assert isinstance(stored, dict)
    assert isinstance(stored["blob"], str) and stored["blob"].startswith("file://")
    assert ran.context["blob"] == "x" * BIG
    assert f"size={BIG} head=xxxxx" in ran.prompts_of("use")[0]
    code, out, _ = cli("inspect", ran.outcome.run_dir, "--json", "--full")
    assert code == 0
    assert json.loads(out)["context"]["blob"] == "x" * BIG


def test_a_large_agent_text_output_is_offloaded_but_reads_as_its_value(tmp_path: Path) -> None:
    dot = flow("""
    write [type=prompt, prompt="Write a lot", outputs="essay:text"]
    read [type=prompt, prompt="ends with {{ essay[-3:] }} ({{ essay | length }})"]
    start -> write -> read -> exit
    """)
    essay = "y" * (BIG - 3) + "END"
    ran = run_flow(tmp_path, dot, replies={"write": [reply({"essay": essay})],
                                           "read": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    stored = _checkpoint(ran.outcome.run_dir)["context"]
    assert isinstance(stored, dict)
    assert str(stored["essay"]).startswith("file://")
    assert str(stored["response.write"]).startswith("file://")
    assert ran.context["essay"] == essay
    assert f"ends with END ({BIG})" in ran.prompts_of("read")[0]
    _, out, _ = cli("inspect", ran.outcome.run_dir, "--json", "--full")
    assert json.loads(out)["context"]["essay"] == essay


# -- templates through stages ---------------------------------------------------------


def test_context_prefix_and_top_level_name_render_the_same_value(tmp_path: Path) -> None:
    dot = flow("""
    a [type=prompt, prompt="[{{ context.x }}] [{{ x }}]"]
    start -> a -> exit
    """, graph='inputs="x"')
    ran = run_flow(tmp_path, dot, inputs={"x": "value-1"}, replies={"a": [reply()]})
    assert "[value-1] [value-1]" in ran.prompts_of("a")[0]


def test_dollar_goal_is_expanded_in_a_prompt(tmp_path: Path) -> None:
    dot = flow("""
    a [type=prompt, prompt="Deliver: $goal."]
    start -> a -> exit
    """, goal=None)
    ran = run_flow(tmp_path, dot, goal="make it fast", replies={"a": [reply()]})
    assert "Deliver: make it fast." in ran.prompts_of("a")[0]


def test_a_context_key_named_items_renders_as_its_value(tmp_path: Path) -> None:
    dot = flow("""
    list [type=prompt, prompt="List", outputs="items:text"]
    use [type=prompt, prompt="items=<{{ items }}> ctx=<{{ context.items }}>"]
    start -> list -> use -> exit
    """)
    ran = run_flow(tmp_path, dot, replies={"list": [reply({"items": "apples"})],
                                           "use": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert "items=<apples> ctx=<apples>" in ran.prompts_of("use")[0]


def test_a_guarded_read_of_a_missing_dotted_key_renders_the_default(tmp_path: Path) -> None:
    # The validator accepts `| default(...)` as a guard for a key not written on every
    # path; the renderer must honour it also when no key shares the dotted prefix.
    dot = flow("""
    a [type=prompt, prompt="PROMPT"]
    start -> a -> exit
    """).replace("PROMPT", "[{{ tests.passed | default('none') }}] "
                          "[{{ context.x.y | default('-') }}]")
    ran = run_flow(tmp_path, dot, replies={"a": [reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert "[none] [-]" in ran.prompts_of("a")[0]



def test_a_large_input_is_offloaded_from_the_start_and_survives_a_loop_restart(
        tmp_path: Path) -> None:
    dot = flow("""
    read [type=prompt, prompt="len={{ spec | length }} frozen={{ inputs.spec | length }}"]
    count [shape=parallelogram, script="echo run >> runs; test $(wc -l < runs) -ge 2"]
    start -> read -> count
    count -> read [condition="outcome=failed", loop_restart=true]
    count -> exit [condition="outcome=succeeded"]
    """, graph='inputs="spec"')
    spec = "s" * BIG
    ran = run_flow(tmp_path, dot, inputs={"spec": spec},
                   replies={"read": [reply(), reply()]})
    assert ran.status == "succeeded", ran.outcome.failure_reason
    assert [f"len={BIG} frozen={BIG}" in p for p in ran.prompts_of("read")] == [True, True]
    checkpoint_path = ran.outcome.run_dir / "checkpoint.json"
    assert checkpoint_path.stat().st_size < 50_000
    checkpoint = _checkpoint(ran.outcome.run_dir)
    for part in ("context", "initial"):
        stored = checkpoint[part]
        assert isinstance(stored, dict)
        assert str(stored["spec"]).startswith("file://")
        assert str(stored["inputs.spec"]).startswith("file://")
    assert ran.context["spec"] == spec


def test_a_long_input_is_cut_in_the_run_started_event_but_whole_in_the_context(
        tmp_path: Path) -> None:
    workflow = tmp_path / "flow.dot"
    workflow.write_text(
        'digraph f { graph [goal="g", inputs="notes"]\n'
        '  start [shape=Mdiamond]; exit [shape=Msquare]\n  start -> exit }\n')
    notes = "n" * 5000
    outcome = start_run(RunRequest(workflow=workflow, workspace=tmp_path,
                                   inputs={"notes": notes}), World(agent=ReplayBackend({})))
    assert outcome.context["notes"] == notes
    first = json.loads((outcome.run_dir / "events.jsonl").read_text().splitlines()[0])
    assert first["type"] == "run_started"
    assert len(first["inputs"]["notes"]) < 2100
    assert first["inputs"]["notes"].endswith("(5000 characters)")
