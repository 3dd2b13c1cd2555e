"""The command: backend against a fake CLI agent (tests/agents/fake_cli_agent.py), through
whole runs: profiles from delivery.toml, stage files, exit status, timeout, sessions."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import FakeClock, reply, stage_file, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.errors import RunRefused
from delivery.testing import flow

FAKE = Path(__file__).with_name("fake_cli_agent.py")

ONE_STAGE = flow("""
work  [prompt="Fix it", outputs="summary:text" %s]
start -> work -> exit
""", goal="Fix the bug")


def agent_command(state: Path) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} --state {state}"


def write_profiles(workspace: Path, *, resume: bool = True, timeout: str = "30s",
                   extra: str = "") -> Path:
    state = workspace / "agent-state"
    state.mkdir(exist_ok=True)
    command = agent_command(state)
    lines = ['default = "fake"', "", "[profiles.fake]", 'backend = "command"',
             f"command = {json.dumps(command)}", 'output = "json"',
             'model_args = ["--model", "{model}"]', f'timeout = "{timeout}"']
    if resume:
        lines.append(f"resume_command = {json.dumps(command + ' --resume {session_id}')}")
    (workspace / "delivery.toml").write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return state


def script(state: Path, *actions: dict[str, Any]) -> None:
    (state / "script.json").write_text(json.dumps(list(actions)), encoding="utf-8")


def calls(state: Path) -> list[dict[str, Any]]:
    path = state / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def run(workspace: Path, dot: str, agent: str = "", **environ: str) -> RunOutcome:
    flow = write_flow(workspace, dot)
    world = World(clock=FakeClock(), environ={"PATH": "/usr/bin:/bin", **environ})
    return start_run(RunRequest(workflow=flow, workspace=workspace, agent=agent), world)


def events(outcome: RunOutcome) -> list[dict[str, Any]]:
    lines = (outcome.run_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_reply_on_stdout_is_accepted_and_the_turn_is_recorded(tmp_path: Path) -> None:
    state = write_profiles(tmp_path)
    script(state, {"reply": reply({"summary": "fixed"})})
    outcome = run(tmp_path, ONE_STAGE % "")
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.context["summary"] == "fixed"
    [call] = calls(state)
    assert call["cwd"] == str(tmp_path) and "Fix it" in call["stdin"]
    assert "--model" not in call["argv"]  # no model chosen: the profile's default
    assert "exit status 0" in stage_file(outcome, "work", "stderr.txt").read_text()
    assert '"result"' in stage_file(outcome, "work", "stdout.txt").read_text()
    assert "$ " in stage_file(outcome, "work", "stderr.txt").read_text()  # the command line


def test_token_usage_is_recorded_per_stage_and_per_run(tmp_path: Path) -> None:
    state = write_profiles(tmp_path)
    script(state, {"reply": reply({"summary": "fixed"})})
    outcome = run(tmp_path, ONE_STAGE % "")
    [finished] = [e for e in events(outcome) if e["type"] == "stage_finished"
                  and e["node"] == "work"]
    assert finished["usage"]["output_tokens"] == 7 and finished["usage"]["input_tokens"] > 0
    assert outcome.usage == finished["usage"]
    status = json.loads(stage_file(outcome, "work", "status.json").read_text())
    assert status["usage"] == finished["usage"]
    [done] = [e for e in events(outcome) if e["type"] == "run_finished"]
    assert done["usage"] == finished["usage"]


def test_a_non_zero_exit_fails_the_stage_with_the_status_and_stderr(tmp_path: Path) -> None:
    state = write_profiles(tmp_path)
    script(state, {"exit": 3, "stderr": "rate limited by the vendor"})
    outcome = run(tmp_path, ONE_STAGE % "")
    assert outcome.status == "failed"
    assert "exited with status 3: rate limited by the vendor" in outcome.failure_reason
    assert "exit status 3" in stage_file(outcome, "work", "stderr.txt").read_text()


def test_an_agent_that_overruns_the_node_timeout_is_stopped(tmp_path: Path) -> None:
    state = write_profiles(tmp_path)
    script(state, {"sleep": 60, "reply": "late"})
    outcome = run(tmp_path, ONE_STAGE % ', timeout="1s"')
    assert outcome.status == "failed"
    assert "did not finish within 1s" in outcome.failure_reason
    assert "(timed out)" in stage_file(outcome, "work", "stderr.txt").read_text()


def test_a_malformed_reply_is_corrected_in_the_same_session(tmp_path: Path) -> None:
    state = write_profiles(tmp_path)
    script(state, {"reply": "Done, no JSON."}, {"reply": reply({"summary": "fixed"})})
    outcome = run(tmp_path, ONE_STAGE % "")
    assert outcome.status == "succeeded", outcome.failure_reason
    first, second = calls(state)
    assert second["argv"][-2:] == ["--resume", first["session"]]
    assert second["session"] == first["session"] and second["history"] == 2
    assert "context_updates" in second["stdin"] and "Fix it" not in second["stdin"]


def test_without_a_resume_command_the_transcript_is_replayed(tmp_path: Path) -> None:
    state = write_profiles(tmp_path, resume=False)
    script(state, {"reply": "Done, no JSON."}, {"reply": reply({"summary": "fixed"})})
    outcome = run(tmp_path, ONE_STAGE % "")
    assert outcome.status == "succeeded", outcome.failure_reason
    _, second = calls(state)
    assert "--resume" not in second["argv"]
    assert "Fix it" in second["stdin"] and "Done, no JSON." in second["stdin"]


def test_the_stylesheet_model_reaches_the_command(tmp_path: Path) -> None:
    state = write_profiles(tmp_path)
    script(state, {"reply": reply({"summary": "fixed"})})
    dot = (ONE_STAGE % ', class="code"').replace(
        'graph [goal="Fix the bug"]',
        'graph [goal="Fix the bug", model_stylesheet=".code { llm_model: big-model; }"]')
    assert run(tmp_path, dot).status == "succeeded"
    assert calls(state)[0]["argv"][-2:] == ["--model", "big-model"]


THREAD = flow("""
plan  [prompt="Plan it", fidelity="full", thread_id="impl"]
check [prompt="Check it", agent="other"]
build [prompt="Build it", fidelity="full", thread_id="impl", llm_model="builder"]
start -> plan -> check -> build -> exit
""", goal="Plan then build")


def test_full_fidelity_stages_of_one_thread_continue_one_session(tmp_path: Path) -> None:
    state = write_profiles(tmp_path, extra=(
        '[profiles.other]\nbackend = "replay"\nfile = "other.json"\n'))
    (tmp_path / "other.json").write_text(json.dumps({"check": [reply()]}), encoding="utf-8")
    script(state, {"reply": reply()}, {"reply": reply()})
    outcome = run(tmp_path, THREAD)
    assert outcome.status == "succeeded", outcome.failure_reason
    plan, build = calls(state)
    assert build["argv"][-4:] == ["--resume", plan["session"], "--model", "builder"]
    assert build["history"] == 2 and "--model" not in plan["argv"]
    assert build["stdin"].startswith("Build it")  # no preamble: the session has it all
    assert (stage_file(outcome, "check", "prompt.md").read_text()
            .startswith("Goal: Plan then build"))


def test_an_unknown_profile_is_refused_naming_the_node(tmp_path: Path) -> None:
    write_profiles(tmp_path)
    with pytest.raises(RunRefused) as caught:
        run(tmp_path, ONE_STAGE % ', agent="claud"')
    assert "agent profile 'claud'" in str(caught.value)
    assert "node 'work'" in str(caught.value) and "fake" in caught.value.fix
    assert not (tmp_path / ".delivery").exists()  # nothing started


def test_a_profile_whose_program_is_missing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunRefused) as caught:
        run(tmp_path, ONE_STAGE % "", agent="command:no-such-agent-cli -p")
    assert "'no-such-agent-cli', which cannot be found" in str(caught.value)
    assert "node 'work'" in str(caught.value)


def test_a_malformed_profile_file_is_refused_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "delivery.toml").write_text('[profiles.x]\nbackend = "command"\n')
    with pytest.raises(RunRefused) as caught:
        run(tmp_path, ONE_STAGE % "", agent="x")
    assert "profiles.x.command.command: Field required" in str(caught.value)


def test_profiles_may_live_in_pyproject(tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    script(state, {"reply": reply({"summary": "fixed"})})
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.delivery.profiles.fake]\nbackend = "command"\n'
        f'command = {json.dumps(agent_command(state))}\noutput = "json"\n', encoding="utf-8")
    assert run(tmp_path, ONE_STAGE % ', agent="fake"').status == "succeeded"


def test_a_codex_like_jsonl_agent_resumes_by_thread_id(tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    command = agent_command(state) + " --jsonl"
    (tmp_path / "delivery.toml").write_text(
        '[profiles.codex]\nbackend = "command"\n'
        f"command = {json.dumps(command + ' -')}\n"
        f"resume_command = {json.dumps(command + ' resume {session_id} -')}\n"
        'output = "jsonl"\nsession_key = "thread_id"\nreply_key = "item.text"\n'
        'reply_match = { "item.type" = "agent_message" }\n', encoding="utf-8")
    script(state, {"reply": "no contract"}, {"reply": reply({"summary": "fixed"})})
    outcome = run(tmp_path, ONE_STAGE % "", agent="codex")
    assert outcome.status == "succeeded", outcome.failure_reason
    first, second = calls(state)
    assert second["argv"][-3:] == ["resume", first["session"], "-"]
    assert outcome.usage["output_tokens"] == 6


def test_a_plain_text_agent_with_its_own_environment(tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    (tmp_path / "delivery.toml").write_text(
        '[profiles.plain]\nbackend = "command"\n'
        f"command = {json.dumps(agent_command(state))}\n"
        'env = { SUMMARY = "from the profile env" }\n', encoding="utf-8")
    script(state, {"raw": 'All done. {"context_updates": {"summary": "{env:SUMMARY}"}}'})
    outcome = run(tmp_path, ONE_STAGE % "", agent="plain")
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.context["summary"] == "from the profile env"


PAUSED_THREAD = flow("""
plan  [prompt="Plan it", fidelity="full", thread_id="impl"]
ask   [shape=hexagon, label="Go on?"]
build [prompt="Build it", fidelity="full", thread_id="impl"]
start -> plan -> ask
ask -> build [label="go"]
build -> exit
""", goal="Plan, ask, build")


def test_after_a_resume_a_resumable_agent_continues_its_thread(tmp_path: Path) -> None:
    state = write_profiles(tmp_path)
    script(state, {"reply": reply()}, {"reply": reply()})
    flow = write_flow(tmp_path, PAUSED_THREAD)
    world = World(clock=FakeClock(), environ={"PATH": "/usr/bin:/bin"})
    paused = start_run(RunRequest(workflow=flow, workspace=tmp_path, gates="pause"), world)
    assert paused.status == "paused", paused.failure_reason
    outcome = resume_run(paused.run_dir, World(clock=FakeClock(),
                                               environ={"PATH": "/usr/bin:/bin"}),
                         answers={"ask": "go"})
    assert outcome.status == "succeeded", outcome.failure_reason
    plan, build = calls(state)
    assert build["argv"][-2:] == ["--resume", plan["session"]] and build["history"] == 2
    assert build["stdin"].startswith("Build it")  # still `full`: no summary needed


def test_after_a_resume_a_transcript_agent_gets_a_summary_once(tmp_path: Path) -> None:
    state = write_profiles(tmp_path, resume=False)
    script(state, {"reply": reply()}, {"reply": reply()})
    flow = write_flow(tmp_path, PAUSED_THREAD)
    world = World(clock=FakeClock(), environ={"PATH": "/usr/bin:/bin"})
    paused = start_run(RunRequest(workflow=flow, workspace=tmp_path, gates="pause"), world)
    outcome = resume_run(paused.run_dir, world, answers={"ask": "go"})
    assert outcome.status == "succeeded", outcome.failure_reason
    _, build = calls(state)
    assert build["stdin"].startswith("Goal: Plan, ask, build\n\n## Completed stages\n")
    assert "- **plan**: succeeded" in build["stdin"]


def test_a_caller_may_supply_a_backend_for_a_profile_name(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, ONE_STAGE % ', agent="mine"')
    mine = ReplayBackend({"work": [reply({"summary": "from the library"})]})
    world = World(clock=FakeClock(), agents={"mine": mine})
    outcome = start_run(RunRequest(workflow=flow, workspace=tmp_path), world)
    assert outcome.context["summary"] == "from the library"


def test_an_agent_that_prints_too_much_fails_its_stage_without_holding_it(
        tmp_path: Path) -> None:
    state = write_profiles(tmp_path, extra="max_output = 1000\n")
    script(state, {"reply": "x" * 5000})
    outcome = run(tmp_path, ONE_STAGE % "")
    assert outcome.status == "failed"
    assert "more than the 1000 a reply may have" in outcome.failure_reason
    assert len(stage_file(outcome, "work", "stdout.txt").read_text()) < 1200


def test_the_agent_gets_its_model_key_but_not_the_forges_token(tmp_path: Path) -> None:
    # a prompt-injected agent holding the run's GitHub token could push to any branch or
    # approve its own PR: the token is delivery's, for its pushes and API calls (SPEC §14)
    state = write_profiles(tmp_path)
    script(state, {"reply": reply({"summary": "fixed"})})
    outcome = run(tmp_path, ONE_STAGE % "", GITHUB_TOKEN="ghs_" + "a" * 36,
                  GH_TOKEN="ghp_" + "b" * 36, **{"INPUT_GITHUB-TOKEN": "ghs_" + "c" * 36},
                  ACTIONS_RUNTIME_TOKEN="runtime-token", ACTIONS_ID_TOKEN_REQUEST_TOKEN="id",
                  OPENAI_API_KEY="sk-" + "d" * 40, MY_TOOL_TOKEN="tool-token")
    assert outcome.status == "succeeded", outcome.failure_reason
    [call] = calls(state)
    assert not {"GITHUB_TOKEN", "GH_TOKEN", "INPUT_GITHUB-TOKEN", "ACTIONS_RUNTIME_TOKEN",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN"} & set(call["env"])
    assert {"OPENAI_API_KEY", "MY_TOOL_TOKEN", "PATH"} <= set(call["env"])


def test_a_profile_may_hand_its_agent_a_token_of_its_own(tmp_path: Path) -> None:
    state = write_profiles(tmp_path, extra='env = { GH_TOKEN = "a-read-only-token" }\n')
    script(state, {"reply": reply({"summary": "{env:GH_TOKEN}"})})
    outcome = run(tmp_path, ONE_STAGE % "", GITHUB_TOKEN="ghs_" + "a" * 36)
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.context["summary"] == "a-read-only-token"
