"""The scripted model servers of delivery.testing.model_servers over real HTTP (the real
CLIs against them are tests/agents/test_real_clis.py): the wire format each API streams,
the script, what was served."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from delivery.testing.model_servers import (
    AnthropicServer,
    ResponsesServer,
    Tokens,
    api_error,
    say,
    tool,
)

TOOLS = [{"name": "Bash"}]
CLAUDE_PROMPT = {"model": "m", "tools": TOOLS, "stream": True, "messages": [
    {"role": "user", "content": " - Primary working directory: /work/here\n"}]}


def events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for block in response.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((lines["event"], json.loads(lines["data"])))
    return found


@pytest.fixture
def anthropic() -> Iterator[AnthropicServer]:
    with AnthropicServer() as server:
        yield server


def test_a_tool_call_streams_as_a_tool_use_block_with_the_stated_cwd_filled_in(
        anthropic: AnthropicServer) -> None:
    anthropic.script(tool("Write", file_path="{cwd}/a.txt", content="x"))
    response = httpx.post(anthropic.url + "/v1/messages?beta=true", json=CLAUDE_PROMPT)
    streamed = events(response)
    [start] = [d for e, d in streamed if e == "content_block_start"]
    assert start["content_block"]["type"] == "tool_use"
    [delta] = [d for e, d in streamed if e == "content_block_delta"]
    assert json.loads(delta["delta"]["partial_json"]) == {"file_path": "/work/here/a.txt",
                                                          "content": "x"}
    [ending] = [d for e, d in streamed if e == "message_delta"]
    assert ending["delta"]["stop_reason"] == "tool_use"


def test_served_usage_counts_cached_input_and_side_requests_take_no_step(
        anthropic: AnthropicServer) -> None:
    anthropic.script(say("one", Tokens(10, 5, cache_read=100, cache_write=7)))
    side = httpx.post(anthropic.url + "/v1/messages", json={"model": "m", "messages": []})
    assert side.status_code == 200 and anthropic.remaining == 1
    httpx.post(anthropic.url + "/v1/messages", json=CLAUDE_PROMPT)
    assert anthropic.served == Tokens(10, 5, 100, 7)
    assert anthropic.served.total_input == 117 and anthropic.models == ["m"]


def test_an_error_that_ends_the_script_answers_every_retry(
        anthropic: AnthropicServer) -> None:
    anthropic.script(api_error("scripted outage"))
    for _ in range(3):
        response = httpx.post(anthropic.url + "/v1/messages", json=CLAUDE_PROMPT)
        assert response.status_code == 400
        assert response.json()["error"]["message"] == "scripted outage"


def test_an_empty_script_answers_with_an_error_that_says_so(
        anthropic: AnthropicServer) -> None:
    response = httpx.post(anthropic.url + "/v1/messages", json=CLAUDE_PROMPT)
    assert response.status_code == 400 and "no more steps" in response.text


def test_the_responses_server_streams_items_and_usage_with_cached_tokens_inside() -> None:
    with ResponsesServer() as server:
        server.script(tool("exec_command", cmd="ls"), say("done", Tokens(10, 2, 30)))
        body = {"model": "m", "tools": [{"type": "function", "name": "exec_command"}],
                "input": []}
        first = events(httpx.post(server.url + "/v1/responses", json=body))
        [added] = [d for e, d in first if e == "response.output_item.added"]
        assert added["item"]["type"] == "function_call"
        assert json.loads(added["item"]["arguments"]) == {"cmd": "ls"}
        second = events(httpx.post(server.url + "/v1/responses", json=body))
        usage = second[-1][1]["response"]["usage"]
        assert usage["input_tokens"] == 40 and usage["input_tokens_details"] == {
            "cached_tokens": 30}


def test_codex_config_points_a_model_provider_at_the_server(tmp_path: Any) -> None:
    with ResponsesServer() as server:
        text = server.codex_config(tmp_path / "codex").read_text()
        assert f'base_url = "{server.url}/v1"' in text and 'model_provider = "scripted"' in text
