"""Scripted model servers on 127.0.0.1: the real Claude Code and Codex CLIs, offline.

    with AnthropicServer() as model:             # Claude Code: ANTHROPIC_BASE_URL
        model.script(tool("Bash", command="pytest -q"),
                     tool("Write", file_path="{cwd}/fix.py", content="..."),
                     say('{"context_updates": {"summary": "fixed"}}'))
        env = {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-test"}

    with ResponsesServer() as model:             # Codex: a model provider with base_url
        model.script(tool("exec_command", cmd="pytest -q"), say("..."))
        model.codex_config(codex_home)           # writes CODEX_HOME/config.toml

Each request to the model endpoint (`POST /v1/messages`, `POST /v1/responses`) is answered
with the next scripted step, streamed the way the real API streams it (server-sent
events): a text reply, tool calls (the CLI runs them and sends the results in its next
request), or an API error. A step is a `Step` or a function of the request's JSON body
returning one. `{cwd}` in a tool's input is replaced by the working directory the CLI
states in its prompt, so a scripted `Write` can name an absolute path without knowing it.

Requests that offer no tools (a CLI's side requests: titles, summaries) get a short text
and do not consume the script. What was served is recorded: every request (`requests`),
the model each asked for, and the token usage served (`served`), so tests can compare
what a run recorded with what it was given. When the script runs out, the server answers
with an API error that says so (never a hang).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["AnthropicServer", "ResponsesServer", "Step", "Tokens", "ToolUse", "api_error",
           "say", "tool"]


@dataclass(frozen=True)
class Tokens:
    """Token usage of one model response. `input` is uncached input; `cache_read` and
    `cache_write` are the cached parts (the Anthropic API reports them separately; the
    OpenAI API counts `cache_read` inside input_tokens as `cached_tokens`)."""

    input: int = 100
    output: int = 20
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total_input(self) -> int:
        return self.input + self.cache_read + self.cache_write

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.input + other.input, self.output + other.output,
                      self.cache_read + other.cache_read, self.cache_write + other.cache_write)


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Step:
    """One model response: text, tool calls, or an error (HTTP status and message)."""

    text: str = ""
    tools: tuple[ToolUse, ...] = ()
    usage: Tokens = Tokens()
    error: tuple[int, str] | None = None


StepSource = Step | Callable[[dict[str, Any]], Step]


def say(text: str, usage: Tokens | None = None) -> Step:
    return Step(text=text, usage=usage or Tokens())


def tool(name: str, usage: Tokens | None = None, **arguments: Any) -> Step:
    return Step(tools=(ToolUse(name, arguments),), usage=usage or Tokens())


def api_error(message: str, status: int = 400) -> Step:
    """An error answer. 400 by default: the CLIs retry 429 and 5xx longer, which a test
    that wants the error reported does not want to wait for. An error that is the last
    step of the script answers every later request as well (the CLIs retry)."""
    return Step(error=(status, message))


@dataclass
class Served:
    path: str
    body: dict[str, Any]
    model: str
    step: Step | None  # None: a side request answered outside the script


_CWD_PATTERNS = (re.compile(r"Primary working directory: (\S+)"),
                 re.compile(r"<cwd>([^<]+)</cwd>"))


def stated_cwd(body: dict[str, Any]) -> str:
    """The working directory a CLI states in its request (Claude Code's environment
    section, Codex's <environment_context>), or ""."""
    text = json.dumps(body)
    for pattern in _CWD_PATTERNS:
        found = pattern.search(text.replace("\\n", "\n"))
        if found:
            return found.group(1).replace("\\\\", "\\")
    return ""


def _fill_cwd(value: Any, cwd: str) -> Any:
    if isinstance(value, str):
        return value.replace("{cwd}", cwd)
    if isinstance(value, dict):
        return {k: _fill_cwd(v, cwd) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_cwd(v, cwd) for v in value]
    return value


class _ModelServer:
    endpoint = ""

    def __init__(self) -> None:
        self._steps: list[StepSource] = []
        self._lock = threading.Lock()
        self.requests: list[Served] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # -- the script ------------------------------------------------------------------
    def script(self, *steps: StepSource) -> None:
        """Add steps to the end of the script."""
        with self._lock:
            self._steps.extend(steps)

    def reset(self) -> None:
        """Forget the script and what was served (a session-scoped server between tests)."""
        with self._lock:
            self._steps.clear()
            self.requests.clear()

    @property
    def remaining(self) -> int:
        return len(self._steps)

    @property
    def served(self) -> Tokens:
        """The usage of every scripted response served so far."""
        total = Tokens(0, 0)
        for request in self.requests:
            if request.step is not None and request.step.error is None:
                total = total + request.step.usage
        return total

    @property
    def models(self) -> list[str]:
        return [r.model for r in self.requests if r.step is not None]

    def _next(self, body: dict[str, Any]) -> Step:
        with self._lock:
            source = self._steps[0] if self._steps else None
            # an error that ends the script answers every later request too: the CLIs
            # retry an error, and each retry must see the same one
            last_error = len(self._steps) == 1 and isinstance(source, Step) \
                and source.error is not None
            if self._steps and not last_error:
                self._steps.pop(0)
        if source is None:
            return api_error("the scripted model server has no more steps")
        step = source(body) if callable(source) else source
        cwd = stated_cwd(body)
        if cwd:
            step = Step(step.text, tuple(ToolUse(t.name, _fill_cwd(t.input, cwd))
                                         for t in step.tools), step.usage, step.error)
        return step

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}_{self._counter:04d}"

    # -- HTTP ------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._httpd is not None, "the server is not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms ACK wait

            def log_message(self, format: str, *args: Any) -> None:
                pass  # tests read `requests`, not the console

            def do_HEAD(self) -> None:
                self._plain(200, b"")

            def do_GET(self) -> None:
                self._plain(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._plain(400, b'{"error": {"message": "the body is not JSON"}}')
                    return
                if not isinstance(body, dict) or not self.path.split("?")[0].endswith(
                        server.endpoint):
                    self._plain(404, b'{"error": {"message": "not found"}}')
                    return
                side = not body.get("tools")
                step = say("ok", Tokens(0, 0)) if side else server._next(body)
                with server._lock:
                    server.requests.append(Served(self.path, body, str(body.get("model", "")),
                                                  None if side else step))
                if step.error is not None:
                    status, message = step.error
                    self._plain(status, json.dumps(server.error_body(message)).encode())
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                for event, data in server.events(step, str(body.get("model", ""))):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

            def _plain(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> _ModelServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the wire format (per API) ---------------------------------------------------
    def error_body(self, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def events(self, step: Step, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
        raise NotImplementedError


class AnthropicServer(_ModelServer):
    """The Anthropic Messages API (`POST /v1/messages`, streaming), as Claude Code uses it.
    Point Claude Code at it with ANTHROPIC_BASE_URL=server.url and any ANTHROPIC_API_KEY."""

    endpoint = "/v1/messages"

    def __enter__(self) -> AnthropicServer:
        self.start()
        return self

    def error_body(self, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}

    def events(self, step: Step, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
        usage = step.usage
        yield "message_start", {"type": "message_start", "message": {
            "id": self._new_id("msg"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage.input, "output_tokens": 1,
                      "cache_read_input_tokens": usage.cache_read,
                      "cache_creation_input_tokens": usage.cache_write}}}
        index = 0
        if step.text:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "text_delta", "text": step.text}}
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
            index += 1
        for call in step.tools:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "tool_use",
                                                            "id": self._new_id("toolu"),
                                                            "name": call.name, "input": {}}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "input_json_delta",
                                                    "partial_json": json.dumps(call.input)}}
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
            index += 1
        yield "message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": "tool_use" if step.tools else "end_turn",
                                          "stop_sequence": None},
                                "usage": {"output_tokens": usage.output}}
        yield "message_stop", {"type": "message_stop"}


class ResponsesServer(_ModelServer):
    """The OpenAI Responses API (`POST /v1/responses`, streaming), as Codex CLI uses it.
    A tool step becomes a `function_call` item (Codex's `exec_command`, …). Codex 0.171
    offers a custom model no `apply_patch` tool: its edits are commands."""

    endpoint = "/v1/responses"

    def __enter__(self) -> ResponsesServer:
        self.start()
        return self

    def codex_config(self, codex_home: Path, *, model: str = "scripted-model") -> Path:
        """Write CODEX_HOME/config.toml with this server as the model provider `scripted`
        (no key needed), and return its path."""
        codex_home.mkdir(parents=True, exist_ok=True)
        path = codex_home / "config.toml"
        path.write_text(
            f'model = "{model}"\nmodel_provider = "scripted"\n\n'
            "[model_providers.scripted]\n"
            'name = "scripted"\n'
            f'base_url = "{self.url}/v1"\n'
            'wire_api = "responses"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n", encoding="utf-8")
        return path

    def error_body(self, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                          "code": None}}

    def events(self, step: Step, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
        response_id = self._new_id("resp")
        base = {"id": response_id, "object": "response", "model": model, "output": []}
        yield "response.created", {"type": "response.created",
                                   "response": {**base, "status": "in_progress"}}
        items: list[dict[str, Any]] = []
        if step.text:
            items.append({"type": "message", "id": self._new_id("msg"), "role": "assistant",
                          "status": "completed",
                          "content": [{"type": "output_text", "text": step.text,
                                       "annotations": []}]})
        for call in step.tools:
            items.append({"type": "function_call", "id": self._new_id("fc"),
                          "call_id": self._new_id("call"), "name": call.name,
                          "arguments": json.dumps(call.input), "status": "completed"})
        for index, item in enumerate(items):
            yield "response.output_item.added", {"type": "response.output_item.added",
                                                 "output_index": index, "item": item}
            yield "response.output_item.done", {"type": "response.output_item.done",
                                                "output_index": index, "item": item}
        usage = step.usage
        yield "response.completed", {"type": "response.completed", "response": {
            **base, "status": "completed", "output": items,
            "usage": {"input_tokens": usage.input + usage.cache_read + usage.cache_write,
                      "input_tokens_details": {"cached_tokens": usage.cache_read},
                      "output_tokens": usage.output,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": usage.total_input + usage.output}}}

