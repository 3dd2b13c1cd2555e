"""The openai: backend against respx: replies, usage, retries (Retry-After, 5xx, budget),
malformed answers, corrections that resend the conversation, and whole runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from engine_helpers import FakeClock, cli, reply, write_flow

from delivery.agents.base import AgentError, SessionRequest, TurnSink, Usage
from delivery.agents.openai_http import OpenAIBackend, retry_after
from delivery.agents.profiles import OpenAIProfile
from delivery.engine.runner import RunRequest, World, start_run
from delivery.errors import RunRefused
from delivery.testing import flow

BASE = "http://llm.test/v1"
URL = f"{BASE}/chat/completions"
KEY = "sk-test-0123456789abcdefghijklmnop"


def completion(text: str, prompt_tokens: int = 11, completion_tokens: int = 5) -> httpx.Response:
    return httpx.Response(200, json={
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })


def backend(clock: FakeClock, **profile: Any) -> OpenAIBackend:
    settings = {"model": "gpt-test", "base_url": BASE, **profile}
    return OpenAIBackend(OpenAIProfile(**settings), environ={"OPENAI_API_KEY": KEY},
                         sleep=clock.sleep, clock=clock.monotonic)


def send(agent: OpenAIBackend, message: str = "hello",
         timeout: float | None = None) -> tuple[str, list[Usage]]:
    used: list[Usage] = []
    session = agent.open_session("n", workspace=Path("."),
                                 request=SessionRequest("n", Path("."), timeout=timeout))
    return session.send(message, TurnSink(usage=used.append)), used


@respx.mock
def test_a_completion_returns_the_text_and_its_usage() -> None:
    route = respx.post(URL).mock(return_value=completion("hi there"))
    text, used = send(backend(FakeClock()))
    assert text == "hi there" and used == [Usage(11, 5)]
    request = route.calls.last.request
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    body = json.loads(request.content)
    assert body["model"] == "gpt-test" and body["messages"] == [
        {"role": "user", "content": "hello"}]


@respx.mock
def test_a_429_waits_what_retry_after_asks_then_succeeds() -> None:
    respx.post(URL).mock(side_effect=[
        httpx.Response(429, headers={"Retry-After": "7"}, json={"error": {"message": "slow"}}),
        completion("ok")])
    clock = FakeClock()
    assert send(backend(clock))[0] == "ok"
    assert clock.sleeps == [7.0]


@respx.mock
def test_a_500_is_retried_with_backoff() -> None:
    respx.post(URL).mock(side_effect=[httpx.Response(500, text="oops"),
                                      httpx.Response(503, text="busy"), completion("ok")])
    clock = FakeClock()
    assert send(backend(clock))[0] == "ok"
    assert clock.sleeps == [1.0, 2.0]


@respx.mock
def test_connection_errors_are_retried() -> None:
    respx.post(URL).mock(side_effect=[httpx.ConnectError("refused"), completion("ok")])
    clock = FakeClock()
    assert send(backend(clock))[0] == "ok"
    assert clock.sleeps == [1.0]


@respx.mock
def test_no_retry_is_made_past_the_time_budget() -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(
        429, headers={"Retry-After": "120"}, json={"error": {"message": "quota"}}))
    clock = FakeClock()
    with pytest.raises(AgentError) as caught:
        send(backend(clock), timeout=60)
    assert route.call_count == 1 and clock.sleeps == []
    assert "after 1 attempt(s); last: HTTP 429: quota" in str(caught.value)


@respx.mock
def test_retries_stop_after_max_retries() -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(502, text="bad gateway"))
    with pytest.raises(AgentError) as caught:
        send(backend(FakeClock(), max_retries=2))
    assert route.call_count == 3 and "HTTP 502" in str(caught.value)


@respx.mock
def test_a_client_error_is_not_retried() -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(
        400, json={"error": {"message": "model not found"}}))
    with pytest.raises(AgentError) as caught:
        send(backend(FakeClock()))
    assert route.call_count == 1 and "HTTP 400: model not found" in str(caught.value)


@respx.mock
@pytest.mark.parametrize("response", [
    httpx.Response(200, text="<html>not json</html>"),
    httpx.Response(200, json={"choices": []}),
    httpx.Response(200, json={"choices": [{"message": {"content": None}}]}),
])
def test_a_malformed_answer_is_a_clear_agent_error(response: httpx.Response) -> None:
    respx.post(URL).mock(return_value=response)
    with pytest.raises(AgentError) as caught:
        send(backend(FakeClock()))
    assert "node 'n'" in str(caught.value)
    assert "not JSON" in str(caught.value) or "choices[0].message.content" in str(caught.value)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after("3", 0.0) == 3.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470.0) == 10.0
    assert retry_after("soon", 0.0) is None and retry_after(None, 0.0) is None


# -- whole runs ------------------------------------------------------------------------
FLOW = flow("""
review [prompt="Review it", outputs="verdict:choice", reasoning_effort="low"]
start -> review
review -> exit [condition="verdict=pass"]
review -> exit [condition="verdict=fail"]
""", goal="Review the change")


def run(tmp_path: Path, agent: str = "openai:gpt-test") -> Any:
    flow = write_flow(tmp_path, FLOW)
    world = World(clock=FakeClock(), environ={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": BASE})
    return start_run(RunRequest(workflow=flow, workspace=tmp_path, agent=agent), world)


@respx.mock
def test_a_correction_turn_sends_the_whole_conversation(tmp_path: Path) -> None:
    respx.get(f"{BASE}/models").mock(return_value=httpx.Response(200, json={"data": []}))
    route = respx.post(URL).mock(side_effect=[completion("I think it passes."),
                                              completion(reply({"verdict": "pass"}))])
    outcome = run(tmp_path)
    assert outcome.status == "succeeded", outcome.failure_reason
    first, second = (json.loads(call.request.content) for call in route.calls)
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][:2] == [first["messages"][0],
                                      {"role": "assistant", "content": "I think it passes."}]
    assert first["reasoning_effort"] == "low"
    assert outcome.usage == {"input_tokens": 22, "output_tokens": 10, "total_tokens": 32}


@respx.mock
def test_inspect_shows_tokens_per_stage_and_run(tmp_path: Path) -> None:
    respx.get(f"{BASE}/models").mock(return_value=httpx.Response(200, json={"data": []}))
    respx.post(URL).mock(return_value=completion(reply({"verdict": "pass"}), 100, 20))
    outcome = run(tmp_path)
    code, out, _ = cli("inspect", outcome.run_dir, "--json")
    report = json.loads(out)
    assert code == 0 and report["usage"]["total_tokens"] == 120
    [stage] = [s for s in report["stages"] if s["node"] == "review"]
    assert stage["usage"] == {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    code, text, _ = cli("inspect", outcome.run_dir)
    assert "review#1: succeeded (100 tokens in / 20 out)" in text
    assert "tokens: 100 tokens in / 20 out (total 120)" in text


@respx.mock
def test_an_unreachable_server_is_refused_before_the_run(tmp_path: Path) -> None:
    respx.get(f"{BASE}/models").mock(side_effect=httpx.ConnectError("connection refused"))
    with pytest.raises(RunRefused) as caught:
        run(tmp_path)
    assert "agent profile 'openai:gpt-test'" in str(caught.value)
    assert "cannot be reached" in str(caught.value) and "node 'review'" in str(caught.value)
    assert not (tmp_path / ".delivery").exists()


def test_the_public_api_without_a_key_is_refused_before_the_run(tmp_path: Path) -> None:
    flow = write_flow(tmp_path, FLOW)
    with pytest.raises(RunRefused) as caught:
        start_run(RunRequest(workflow=flow, workspace=tmp_path, agent="openai:gpt-test"),
                  World(clock=FakeClock(), environ={}))
    assert "OPENAI_API_KEY is not set (needed by node 'review')" in str(caught.value)


@respx.mock
def test_summary_high_tells_the_next_stage_what_each_model_spent(tmp_path: Path) -> None:
    respx.get(f"{BASE}/models").mock(return_value=httpx.Response(200, json={"data": []}))
    route = respx.post(URL).mock(side_effect=[completion(reply({"verdict": "pass"})),
                                              completion(reply())])
    flow = FLOW.replace('review -> exit [condition="verdict=pass"]',
                        'review -> report [condition="verdict=pass"]\n'
                        'report [prompt="Report", fidelity="summary:high"]\n'
                        'report -> exit')
    world = World(clock=FakeClock(), environ={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": BASE})
    outcome = start_run(RunRequest(workflow=write_flow(tmp_path, flow), workspace=tmp_path,
                                   agent="openai:gpt-test"), world)
    assert outcome.status == "succeeded", outcome.failure_reason
    sent = json.loads(route.calls.last.request.content)["messages"][0]["content"]
    assert "  - Model: openai:gpt-test, 11 tokens in / 5 out" in sent
