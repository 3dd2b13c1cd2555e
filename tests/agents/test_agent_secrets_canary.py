"""A planted canary secret never lands in a run's files (SPEC §14): not in prompts,
replies, stage files, events, the checkpoint, `inspect` or `--json` output; nor does a
line of a multi-line secret or a padded secret printed trimmed."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import respx
from engine_helpers import FakeClock, cli, reply, write_flow
from test_command_agent import calls, script, write_profiles

from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.testing import flow

CANARY_KEY = "canary-7f3a9c1e5b2d"  # an OPENAI_API_KEY value: masked by value
CANARY_TOKEN = "ghp_" + "C4n4ry" * 6  # shaped like a GitHub token: masked by pattern

FLOW = flow("""
leak  [prompt="Say everything", outputs="summary:text"]
echo  [prompt="You said: {{ summary }}"]
start -> leak -> echo -> exit
""", goal="Keep secrets")


def assert_no_canary(where: Path, *texts: str,
                     canaries: tuple[str, ...] = (CANARY_KEY, CANARY_TOKEN)) -> None:
    for path in sorted(p for p in where.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for canary in canaries:
            assert canary.encode() not in data, f"{canary} found in {path}"
    for text in texts:
        for canary in canaries:
            assert canary not in text


def inspect_outputs(outcome: RunOutcome) -> tuple[str, str]:
    return cli("inspect", outcome.run_dir, "--json")[1], cli("inspect", outcome.run_dir)[1]


def test_a_command_agent_that_leaks_the_key_and_a_token_leaves_no_trace(tmp_path: Path) -> None:
    state = write_profiles(tmp_path)
    leaky = f"key {{env:OPENAI_API_KEY}} and {CANARY_TOKEN}"
    script(state, {"reply": reply({"summary": leaky}, prose=leaky)},
           {"exit": 1, "stderr": f"auth failed for {CANARY_KEY} / {CANARY_TOKEN}"})
    world = World(clock=FakeClock(), environ={"PATH": "/usr/bin:/bin",
                                              "OPENAI_API_KEY": CANARY_KEY})
    outcome = start_run(RunRequest(workflow=write_flow(tmp_path, FLOW), workspace=tmp_path),
                        world)
    assert outcome.status == "failed" and "***" in outcome.failure_reason
    # the agent got the key from its environment and leaked it; the run kept a mask
    assert outcome.context["summary"] == "key *** and ***"
    assert "You said: key *** and ***" in calls(state)[1]["stdin"]
    assert_no_canary(outcome.run_dir, json.dumps(outcome.to_json()), *inspect_outputs(outcome))


@respx.mock
def test_an_openai_reply_and_error_holding_the_key_leave_no_trace(tmp_path: Path) -> None:
    base = "http://llm.test/v1"
    respx.get(f"{base}/models").mock(return_value=httpx.Response(200, json={"data": []}))
    leaky = f"the key is {CANARY_KEY}, the token {CANARY_TOKEN}"
    respx.post(f"{base}/chat/completions").mock(side_effect=[
        httpx.Response(200, json={"choices": [{"message": {
            "role": "assistant", "content": reply({"summary": leaky}, prose=leaky)}}]}),
        httpx.Response(401, json={"error": {"message": f"bad key {CANARY_KEY}"}}),
    ])
    world = World(clock=FakeClock(), environ={"OPENAI_API_KEY": CANARY_KEY,
                                              "OPENAI_BASE_URL": base})
    outcome = start_run(RunRequest(workflow=write_flow(tmp_path, FLOW), workspace=tmp_path,
                                   agent="openai:gpt-test"), world)
    assert outcome.status == "failed" and "bad key ***" in outcome.failure_reason
    second = json.loads(respx.calls[-1].request.content)
    assert CANARY_KEY not in json.dumps(second["messages"])  # never sent in a prompt
    assert_no_canary(outcome.run_dir, json.dumps(outcome.to_json()), *inspect_outputs(outcome))


# a deploy key given multi-line and an API key padded with whitespace, as a secrets store
# or a `.env` file hands them over
KEY_LINES = ("b3BlbnNzaC1rZXktdjEAAAAA", "QyNTUxOQAAACDkf8a7Hb2xy", "AAAEC1d2e3f4a5b6c7d8")
DEPLOY_KEY = "-----BEGIN KEY-----\n" + "\n".join(KEY_LINES) + "\n-----END KEY-----\n"


def test_an_agent_leaking_a_line_of_a_multi_line_key_or_a_trimmed_key_leaves_no_trace(
        tmp_path: Path) -> None:
    state = write_profiles(tmp_path)
    leaky = f"key {CANARY_KEY} and line {KEY_LINES[1]}"
    script(state, {"reply": reply({"summary": leaky}, prose=leaky)},
           {"exit": 1, "stderr": f"auth failed for {KEY_LINES[0]} / {KEY_LINES[2]}"})
    world = World(clock=FakeClock(), environ={"PATH": "/usr/bin:/bin",
                                              "OPENAI_API_KEY": f"  {CANARY_KEY} \n",
                                              "DEPLOY_KEY": DEPLOY_KEY})
    outcome = start_run(RunRequest(workflow=write_flow(tmp_path, FLOW), workspace=tmp_path),
                        world)
    assert outcome.status == "failed" and "auth failed for *** / ***" in outcome.failure_reason
    assert outcome.context["summary"] == "key *** and line ***"
    assert "You said: key *** and line ***" in calls(state)[1]["stdin"]
    assert_no_canary(outcome.run_dir, json.dumps(outcome.to_json()), *inspect_outputs(outcome),
                     canaries=(CANARY_KEY, *KEY_LINES))
