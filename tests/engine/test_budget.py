"""The run's agent budget (SPEC §7.1): one warning at 80%, a pause before the agent stage
that would pass the limit (status paused, reason budget), `resume --budget` raising it —
locally and in event mode (`--state`). The agent is scripted but reports its usage the
way a real backend reports its counts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from budget_helpers import chain_flow, costly_agent, events
from state_helpers import bare, state_at

from delivery.action.main import Result
from delivery.action.report import summary_markdown
from delivery.agents.base import AgentBackend
from delivery.engine.runner import RunRequest, World, resume_run, start_run
from delivery.errors import RunRefused
from delivery.state.remote import StateRunStores
from delivery.store.runstore import verify_run
from delivery.testing import flow
from delivery.testing.cli import invoke
from delivery.testing.clock import FakeClock
from delivery.testing.runs import write_flow


def world(agent: AgentBackend) -> World:
    return World(agent=agent, clock=FakeClock())


def test_a_token_budget_warns_once_when_80_percent_is_used(tmp_path: Path) -> None:
    # 300 tokens a stage against 1000: 90% after the third stage, the only warning
    flow = chain_flow(tmp_path, "budget_tokens=1000")
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path), world(costly_agent(300)))
    [warning] = events(outcome.run_dir, "budget_warning")
    assert warning["node"] == "test" and warning["percent"] == 90
    assert warning["used"] == "900 of 1,000 tokens (90%)"
    assert outcome.budget["warned"] is True


def test_the_run_pauses_before_the_agent_stage_that_would_pass_the_budget(
        tmp_path: Path) -> None:
    flow = chain_flow(tmp_path, "budget_tokens=1000")
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path), world(costly_agent(300)))
    assert outcome.status == "paused" and outcome.pause_reason == "budget"
    assert outcome.path == ["start", "plan", "build", "test"]
    assert outcome.usage["total_tokens"] == 900  # never past the limit
    assert not (outcome.run_dir / "polish").exists()  # the stage did not start
    assert "'polish'" in outcome.failure_reason and "--budget" in outcome.failure_reason
    [paused] = events(outcome.run_dir, "run_paused")
    assert paused["reason"] == "budget" and paused["next_node"] == "polish"
    assert verify_run(outcome.run_dir).ok


def test_resume_with_a_raised_budget_finishes_the_run(tmp_path: Path) -> None:
    flow = chain_flow(tmp_path, "budget_tokens=1000")
    agent = costly_agent(300)
    paused = start_run(RunRequest(workflow=flow, workspace=tmp_path), world(agent))
    outcome = resume_run(paused.run_dir, world(agent), budget="2k")
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.path == ["start", "plan", "build", "test", "polish", "exit"]
    assert outcome.usage["total_tokens"] == 1200
    assert outcome.budget["tokens"] == 2000
    assert events(outcome.run_dir, "budget_raised")[0]["limits"] == "2,000 tokens"


def test_resuming_without_raising_the_budget_pauses_again_before_the_same_stage(
        tmp_path: Path) -> None:
    flow = chain_flow(tmp_path, "budget_tokens=1000")
    agent = costly_agent(300)
    paused = start_run(RunRequest(workflow=flow, workspace=tmp_path), world(agent))
    again = resume_run(paused.run_dir, world(agent))
    assert again.status == "paused" and again.pause_reason == "budget"
    assert again.path == paused.path


def test_a_resume_given_the_budget_the_run_has_raises_nothing_and_records_nothing(
        tmp_path: Path) -> None:
    # the Action passes its `budget` input to every job of a run: the same limit again,
    # whether the graph or the start's option set it, is no raise
    flow = chain_flow(tmp_path, "budget_tokens=1000")
    agent = costly_agent(300)
    paused = start_run(RunRequest(workflow=flow, workspace=tmp_path), world(agent))
    again = resume_run(paused.run_dir, world(agent), budget="1000")
    assert again.status == "paused" and again.pause_reason == "budget"
    assert events(again.run_dir, "budget_raised") == []
    other = tmp_path / "other"
    other.mkdir()
    by_option = start_run(RunRequest(workflow=chain_flow(other), workspace=other,
                                     budget="1k"), world(costly_agent(300)))
    assert by_option.pause_reason == "budget"
    assert resume_run(by_option.run_dir, world(costly_agent(300)),
                      budget="1000").pause_reason == "budget"
    assert events(by_option.run_dir, "budget_raised") == []


def test_a_raised_budget_warns_again_at_80_percent_of_the_new_limit(tmp_path: Path) -> None:
    flow = chain_flow(tmp_path, "budget_tokens=1000", stages=("a", "b", "c", "d", "e", "f"))
    agent = costly_agent(300, stages=("a", "b", "c", "d", "e", "f"))
    paused = start_run(RunRequest(workflow=flow, workspace=tmp_path), world(agent))
    outcome = resume_run(paused.run_dir, world(agent), budget="2000")
    # 1,200 tokens after d, 1,500 after e: 75%; 1,800 after f: 90% of 2,000
    assert outcome.status == "succeeded"
    warnings = events(outcome.run_dir, "budget_warning")
    assert [(w["node"], w["limit"]) for w in warnings] == [("c", "1,000 tokens"),
                                                           ("f", "2,000 tokens")]


def test_a_dollar_budget_pauses_on_the_cost_the_agent_reported(tmp_path: Path) -> None:
    flow = chain_flow(tmp_path, "budget_usd=1.00")
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path),
                        world(costly_agent(10, cost_usd=0.45)))
    assert outcome.status == "paused" and outcome.pause_reason == "budget"
    assert outcome.path == ["start", "plan", "build"]  # $0.90; a third stage would pass $1
    assert "$0.90 of $1.00 used" in outcome.failure_reason


def test_the_budget_option_replaces_the_graphs_limit(tmp_path: Path) -> None:
    flow = chain_flow(tmp_path, "budget_tokens=1000")
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path, budget="700"),
                        world(costly_agent(300)))
    assert outcome.path == ["start", "plan", "build"]
    assert outcome.budget["tokens"] == 700


def test_a_run_without_a_budget_never_pauses_on_usage(tmp_path: Path) -> None:
    flow = chain_flow(tmp_path)
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path),
                        world(costly_agent(10_000_000)))
    assert outcome.status == "succeeded" and outcome.budget == {}
    assert events(outcome.run_dir, "budget_warning") == []


@pytest.mark.parametrize("given", ["0", "-5", "lots", "$0", "$", "1.5"])
def test_a_budget_option_that_is_not_tokens_or_dollars_is_refused_naming_both_forms(
        tmp_path: Path, given: str) -> None:
    flow = chain_flow(tmp_path)
    code, _, err = invoke("run", flow, "--workspace", tmp_path, "--budget", given)
    assert code == 2
    [line] = err.strip().splitlines()
    assert f"--budget {given!r}" in line and "200k" in line and "'$5'" in line
    assert not (tmp_path / ".delivery").exists()


def test_a_bad_budget_on_resume_is_refused_before_the_run_changes(tmp_path: Path) -> None:
    flow = chain_flow(tmp_path, "budget_tokens=1000")
    paused = start_run(RunRequest(workflow=flow, workspace=tmp_path), world(costly_agent(300)))
    before = (paused.run_dir / "events.jsonl").read_bytes()
    with pytest.raises(RunRefused, match="--budget"):
        resume_run(paused.run_dir, world(costly_agent(300)), budget="nope")
    assert (paused.run_dir / "events.jsonl").read_bytes() == before


@pytest.mark.parametrize(("attribute", "message"), [
    ("budget_tokens=0", "budget_tokens=0 must be 1 or more"),
    ("budget_tokens=2.5", "budget_tokens='2.5' is not a whole number"),
    ('budget_usd="free"', "budget_usd='free' is not a positive amount of dollars"),
    ("budget_usd=-1", "budget_usd='-1' is not a positive amount of dollars"),
])
def test_a_bad_graph_budget_is_an_error_at_its_value(tmp_path: Path, attribute: str,
                                                     message: str) -> None:
    flow = chain_flow(tmp_path, attribute)
    code, out, _ = invoke("validate", flow)
    assert code == 1
    line = next(line for line in out.splitlines() if "error[" in line)
    assert line.startswith(f"{flow}:3:") and message in line


# -- event mode -------------------------------------------------------------------------
def test_in_event_mode_a_spent_budget_is_a_normal_paused_run_on_the_state_ref(
        tmp_path: Path) -> None:
    state_repo = bare(tmp_path / "state.git")
    starter = tmp_path / "starter"
    starter.mkdir()
    flow = chain_flow(starter, "budget_tokens=1000")
    agent = costly_agent(300)
    stores = StateRunStores(state_at(state_repo, starter).session("", "starter"))
    paused = start_run(RunRequest(workflow=flow, workspace=starter),
                       World(agent=agent, clock=FakeClock(), stores=stores))
    assert paused.status == "paused" and paused.pause_reason == "budget"
    subject = subprocess.run(["git", "log", "-1", "--format=%s",
                              f"refs/delivery/runs/{paused.run_id}"], cwd=state_repo,
                             capture_output=True, text=True, check=True).stdout
    assert subject.startswith("paused")  # saved, claim dropped: any job may resume it
    other = tmp_path / "second"
    other.mkdir()
    stores = StateRunStores(state_at(state_repo, other).session(paused.run_id, "second"),
                            workspace=other)
    outcome = resume_run(other / ".delivery" / "runs" / paused.run_id,
                         World(agent=agent, clock=FakeClock(), stores=stores), budget="2000")
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.path[-2:] == ["polish", "exit"] and outcome.usage["total_tokens"] == 1200


def test_the_action_job_summary_shows_the_budget_used_and_its_warning(tmp_path: Path) -> None:
    flow = chain_flow(tmp_path, "budget_tokens=1000")
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path), world(costly_agent(300)))
    summary = summary_markdown([Result(outcome.run_id, outcome.status, outcome.failure_reason,
                                       outcome, flow)])
    assert "**Budget used:** 900 of 1,000 tokens (90%)" in summary
    assert "> **Warning:** the run has used 80% or more of its budget" in summary


def test_an_agent_stage_inside_a_parallel_section_pauses_the_whole_section(
        tmp_path: Path) -> None:
    workflow = write_flow(tmp_path, flow("""
    a [shape=box, prompt="a"]
    fan [shape=component]
    b1 [shape=box, prompt="b1"]
    b2 [shape=box, prompt="b2"]
    join [shape=tripleoctagon]
    start -> a -> fan
    fan -> b1 -> join
    fan -> b2 -> join
    join -> exit
    """, graph="budget_tokens=1000"))
    agent = costly_agent(600, stages=("a", "b1", "b2"))
    paused = start_run(RunRequest(workflow=workflow, workspace=tmp_path), world(agent))
    assert paused.status == "paused" and paused.path == ["start", "a"]
    assert events(paused.run_dir, "run_paused")[0]["next_node"] == "fan"  # runs again whole
    outcome = resume_run(paused.run_dir, world(agent), budget="5000")
    assert outcome.status == "succeeded" and outcome.usage["total_tokens"] == 1800
