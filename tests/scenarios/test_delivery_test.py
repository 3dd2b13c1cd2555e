"""`delivery test`: route scenarios run through the real engine, with scripted agents,
gates, scripts, probes and effects; errors in the scenario file name their line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from engine_helpers import cli

from delivery.testing import flow

ROOT = Path(__file__).resolve().parents[2]

FLOW = flow("""
implement [prompt="Do {{ ticket }}", outputs="summary:text"]
checks  [type=script, script="pytest -q", facts="tests.passed"]
observe [type=probe, probe="pr,threads"]
route   [shape=diamond]
repair  [prompt="Repair", outputs="summary:text"]
land    [type=merge]
ask     [shape=hexagon, label="Merge now?"]
start -> implement -> checks
checks -> observe [condition="outcome=succeeded"]
checks -> repair  [condition="outcome=failed"]
observe -> route
route -> ask      [condition="pr.state=WAITING && pr.ready=true"]
route -> repair   [condition="pr.state=CI_FAILED"]
route -> observe  [condition="pr.state=WAITING"]
route -> exit     [condition="pr.state=MERGED"]
ask -> land       [label="[Y] Yes"]
ask -> exit       [label="[N] No"]
repair -> checks
land -> observe
""", goal="Ship", graph='inputs="ticket"')

DONE = '{"context_updates": {"summary": "done"}}'


def scenario_file(tmp_path: Path, body: str) -> Path:
    (tmp_path / "flow.dot").write_text(FLOW, encoding="utf-8")
    path = tmp_path / "flow.test.toml"
    path.write_text('workflow = "flow.dot"\n' + textwrap.dedent(body), encoding="utf-8")
    return path


HAPPY = """
[[scenario]]
name = "checks fail once, then the PRs merge"
inputs = { ticket = "T-1" }
folders = ["api", "web"]
replies = { implement = ['DONE'], repair = ['DONE'] }
scripts = { checks = [ { exit = 1, facts = { "tests.passed" = false } }, { exit = 0 } ] }
probes = { observe = [
    { "api.pr.state" = "WAITING", "api.pr.ready" = true, "web.pr.state" = "WAITING", "web.pr.ready" = true },
    { "api.pr.state" = "MERGED", "web.pr.state" = "MERGED" },
] }
answers = { ask = ["Y"] }
expect = { status = "succeeded", path = ["start", "implement", "checks", "repair", "checks", "...", "land", "observe", "route", "exit"], visits = { repair = 1 }, context = { "pr.state" = "MERGED", "tests.passed" = false } }
""".replace("DONE", DONE)


def run(path: Path, *extra: str) -> tuple[int, str, str]:
    return cli("test", path, *extra)


def test_a_scenario_that_holds_exits_0(tmp_path: Path) -> None:
    code, out, err = run(scenario_file(tmp_path, HAPPY))
    assert code == 0, out + err
    assert "ok    checks fail once, then the PRs merge" in out
    assert "1 of 1 scenario(s) hold" in out


def test_json_prints_one_object_per_scenario(tmp_path: Path) -> None:
    code, out, _ = run(scenario_file(tmp_path, HAPPY + HAPPY.replace("checks fail once",
                                                                     "again")), "--json")
    assert code == 0
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["passed"] for r in results] == [True, True]
    assert results[1]["name"] == "again, then the PRs merge"
    assert results[0]["path"][-1] == "exit"


def test_divergence_names_step_expected_taken_and_the_condition(tmp_path: Path) -> None:
    body = HAPPY.replace('"checks", "repair", "checks", "...",', '"checks", "observe", "...",')
    code, out, _ = run(scenario_file(tmp_path, body))
    assert code == 1
    assert ("path diverges at step 4: expected observe, took repair (chosen by condition "
            "'outcome=failed' on outcome=failed)") in out


def test_each_expectation_kind_reports_what_differs(tmp_path: Path) -> None:
    body = HAPPY.replace('status = "succeeded"', 'status = "failed"') \
        .replace("visits = { repair = 1 }", "visits = { repair = 3 }") \
        .replace('"pr.state" = "MERGED", "tests.passed"', '"pr.state" = "CLOSED", "tests.passed"') \
        .replace("expect = {", 'expect = { failure_reason = "nope",')
    code, out, _ = run(scenario_file(tmp_path, body))
    assert code == 1
    assert "status: expected failed, got succeeded" in out
    assert "visits of repair: expected 3, got 1" in out
    assert "context pr.state: expected 'CLOSED', got 'MERGED'" in out
    assert "failure_reason: expected it to contain 'nope', got ''" in out


def test_probe_roll_ups_come_from_the_probe_library(tmp_path: Path) -> None:
    body = HAPPY.replace(
        '{ "api.pr.state" = "WAITING", "api.pr.ready" = true, "web.pr.state" = "WAITING", '
        '"web.pr.ready" = true },',
        '{ "api.pr.state" = "CI_FAILED", "web.pr.state" = "WAITING", '
        '"web.threads.unresolved" = 2 },\n'
        '{ "api.pr.state" = "WAITING", "api.pr.ready" = true, "web.pr.state" = "WAITING", '
        '"web.pr.ready" = true },').replace(f"repair = ['{DONE}']",
                                            f"repair = ['{DONE}', '{DONE}']") \
        .replace("{ exit = 0 } ]", "{ exit = 0 }, { exit = 0 } ]")
    body = body.replace('expect = {', 'expect = { status = "succeeded" }\n#', 1)
    code, out, _ = run(scenario_file(tmp_path, body), "--json")
    result = json.loads(out)
    assert code == 0, result
    # the worst state (CI_FAILED) routed to repair; the neutral web.pr.ready stayed false
    assert result["path"][:9] == ["start", "implement", "checks", "repair", "checks",
                                  "observe", "route", "repair", "checks"]


def test_a_scripted_stage_failure_follows_failure_routing(tmp_path: Path) -> None:
    body = HAPPY.replace("answers = {",
                         'stages = { land = [ { outcome = "failed", failure_reason = '
                         '"merge refused: head moved" } ] }\nanswers = {')
    code, out, _ = run(scenario_file(tmp_path, body), "--json")
    result = json.loads(out)
    assert code == 1  # the scenario expected success
    assert result["status"] == "failed"
    assert result["path"][-1] == "land"
    assert "head moved" in result["failure_reason"]


@pytest.mark.parametrize(("old", "new", "node"), [
    (f"repair = ['{DONE}']", "repair = []", "repair"),
    ("{ exit = 0 } ]", "]", "checks"),
    ('    { "api.pr.state" = "MERGED", "web.pr.state" = "MERGED" },\n', "", "observe"),
    ('answers = { ask = ["Y"] }', 'answers = { ask = ["Y"] }\nstages = { land = [] }', "land"),
])
def test_running_out_of_scripted_visits_fails_the_scenario_naming_the_node(
        tmp_path: Path, old: str, new: str, node: str) -> None:
    body = HAPPY.replace(old, new)
    assert body != HAPPY
    code, out, _ = run(scenario_file(tmp_path, body))
    assert code == 1
    assert f"node '{node}' ran out of scripted visits" in out


def test_a_gate_answered_more_often_than_scripted_runs_out(tmp_path: Path) -> None:
    body = HAPPY.replace('{ "api.pr.state" = "MERGED", "web.pr.state" = "MERGED" },',
                         '{ "api.pr.state" = "WAITING", "api.pr.ready" = true, '
                         '"web.pr.state" = "WAITING", "web.pr.ready" = true },')
    code, out, _ = run(scenario_file(tmp_path, body))
    assert code == 1
    assert "node 'ask' ran out of scripted visits (visit 2" in out


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("repair = ['", "repare = ['", 7, "replies names node 'repare', which the workflow does "
     "not have"),
    ('"web.pr.state" = "MERGED"', '"docs.pr.state" = "MERGED"', 11,
     "names folder 'docs' (docs.pr.state), which is not in the scenario's folders"),
    ('"web.pr.ready" = true', '"web.pr.happy" = true', 10, "names fact 'pr.happy'"),
    ('facts = { "tests.passed" = false }', 'facts = { "tests.failed" = 1 }', 8,
     "writes fact 'tests.failed', which the node does not declare"),
    ('"api.pr.state" = "MERGED"', '"api.pr.state" = "DONE"', 11, "is not a PR state"),
    ("scripts = { checks", "scripts = { observe", 8, "a probe node, not a script node"),
    ('answers = { ask = ["Y"] }', 'answers = { ask = "Y" }', 13, "scenario.0.answers.ask"),
])
def test_scenario_file_errors_name_their_line(tmp_path: Path, old: str, new: str, line: int,
                                              message: str) -> None:
    body = HAPPY.replace(old, new, 1)
    assert body != HAPPY
    path = scenario_file(tmp_path, body)
    code, out, err = run(path)
    assert code == 1
    assert out == ""
    assert err.startswith(f"delivery test: {path}:{line}: ")
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_a_file_that_is_not_toml_names_its_line(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, "[[scenario]]\nname = \n")
    code, _, err = run(path)
    assert code == 1
    assert f"{path}:3" in err and "not valid TOML" in err


def test_a_missing_scenario_file_is_a_usage_error(tmp_path: Path) -> None:
    assert run(tmp_path / "absent.toml")[0] == 2


@pytest.mark.parametrize("workflow", sorted((ROOT / "workflows").glob("*.dot")),
                         ids=lambda p: p.name)
def test_every_bundled_workflow_has_scenarios_that_hold(workflow: Path) -> None:
    scenarios = workflow.with_suffix(".test.toml")
    assert scenarios.is_file(), f"add route scenarios for {workflow.name} in {scenarios.name}"
    code, out, err = run(scenarios)
    assert code == 0, out + err
