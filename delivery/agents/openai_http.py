"""The `openai:` backend: OpenAI-compatible chat completions over HTTP (httpx).

Works with api.openai.com and local servers (Ollama, vLLM, llama.cpp) that speak
`POST {base_url}/chat/completions`. The conversation is kept in-process: a session is its
list of messages, and a correction turn sends all of it again. Token usage from the
response goes to the TurnSink.

Retries (tenacity): connection errors, 429 and 5xx are retried up to `max_retries` times,
waiting what `Retry-After` asks for (else 1, 2, 4 … s, at most 30 s), and never past the
turn's time budget (the node's `timeout=`, else the profile's): a retry that would end
after the budget is not made. The sleep and the clock are injectable, so tests never wait.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception

from delivery.agents.base import AgentError, SessionRequest, TurnSink, Usage
from delivery.agents.command import usage_of
from delivery.agents.profiles import OpenAIProfile

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_BACKOFF = 30.0
MAX_RESPONSE = 16 * 1024 * 1024  # bytes of one response body
ERROR_BODY_CHARS = 300
_NO_SINK = TurnSink()


class _Retryable(Exception):
    """A response or failure worth another try; `wait` is what the server asked for."""

    def __init__(self, problem: str, wait: float | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.wait = wait


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a `Retry-After` header asks for (a number or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


class OpenAISession:
    def __init__(self, backend: OpenAIBackend, request: SessionRequest) -> None:
        self.backend = backend
        self.request = request
        self.messages: list[dict[str, str]] = []

    def send(self, message: str, sink: TurnSink | None = None) -> str:
        sink = sink or _NO_SINK
        if sink.request is not None:
            self.request = sink.request  # the stage speaking (a thread serves several)
        self.messages.append({"role": "user", "content": message})
        try:
            data = self.backend.complete(self._body(), self.request, sink)
        except AgentError:
            self.messages.pop()  # the turn did not happen
            raise
        reply, usage = self._reply(data, sink.node_id or self.request.node_id)
        if usage is not None:
            sink.usage(usage)
        self.messages.append({"role": "assistant", "content": reply})
        return reply

    def _body(self) -> dict[str, Any]:
        profile = self.backend.profile
        body: dict[str, Any] = {"model": self.request.model or profile.model,
                                "messages": list(self.messages)}
        effort = self.request.reasoning_effort or profile.reasoning_effort
        if effort:
            body["reasoning_effort"] = effort
        if profile.temperature is not None:
            body["temperature"] = profile.temperature
        return body

    def _reply(self, data: Any, node: str) -> tuple[str, Usage | None]:
        name = self.backend.label
        content = None
        if isinstance(data, dict):
            choices = data.get("choices")
            if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                msg = choices[0].get("message")
                if isinstance(msg, dict):
                    content = msg.get("content")
        if not isinstance(content, str):
            raise AgentError(f"{name}: the response for node '{node}' has no "
                             "choices[0].message.content text; is the server OpenAI-"
                             "compatible?")
        usage = usage_of(data.get("usage")) if isinstance(data, dict) else None
        return content, usage


class OpenAIBackend:
    name = "openai"

    def __init__(self, profile: OpenAIProfile, *, environ: Mapping[str, str], label: str = "",
                 transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.profile = profile
        self.label = label or f"openai:{profile.model}"
        self.base_url = (profile.base_url or environ.get("OPENAI_BASE_URL")
                         or DEFAULT_BASE_URL).rstrip("/")
        self.api_key = environ.get(profile.api_key_env, "")
        self.sleep = sleep
        self.clock = clock
        self.client = httpx.Client(transport=transport)

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def missing_key(self) -> str | None:
        """The variable to set when the public API is used without a key, else None."""
        if not self.api_key and self.base_url == DEFAULT_BASE_URL:
            return self.profile.api_key_env
        return None

    def unreachable(self) -> str | None:
        """Why the server cannot be reached (checked before a run starts), else None.

        Any HTTP answer counts as reachable: a server that says 401 or 404 is there."""
        try:
            self.client.get(f"{self.base_url}/models", headers=self.headers(), timeout=10.0)
        except httpx.HTTPError as err:
            return f"{self.base_url} cannot be reached: {type(err).__name__}: {err}"
        return None

    def open_session(self, node_id: str, *, workspace: Path,
                     request: SessionRequest | None = None) -> OpenAISession:
        return OpenAISession(self, request or SessionRequest(node_id, workspace))

    def save_state(self) -> dict[str, Any]:
        return {}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        pass

    # -- HTTP -------------------------------------------------------------------------
    def complete(self, body: dict[str, Any], request: SessionRequest, sink: TurnSink) -> Any:
        """POST the chat completion with retries; the decoded JSON body or AgentError."""
        node = sink.node_id or request.node_id
        budget = request.timeout or self.profile.timeout
        deadline = self.clock() + budget
        attempts: list[str] = []

        def wait(state: RetryCallState) -> float:
            problem = state.outcome.exception() if state.outcome else None
            asked = problem.wait if isinstance(problem, _Retryable) else None
            backoff = min(MAX_BACKOFF, 2.0 ** (state.attempt_number - 1))
            return backoff if asked is None else asked

        def stop(state: RetryCallState) -> bool:
            if state.attempt_number > self.profile.max_retries:
                return True
            return self.clock() + wait(state) >= deadline

        def attempt() -> Any:
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise AgentError(f"{self.label}: no time left for node '{node}' "
                                 f"({budget:g}s budget)")
            try:
                with self.client.stream("POST", f"{self.base_url}/chat/completions",
                                        headers=self.headers(), json=body,
                                        timeout=remaining) as response:
                    raw = _read_bounded(response, MAX_RESPONSE)
            except httpx.TimeoutException as err:
                attempts.append(f"attempt {len(attempts) + 1}: timed out ({err})")
                raise _Retryable(f"timed out after {remaining:.0f}s", None) from None
            except httpx.TransportError as err:
                attempts.append(f"attempt {len(attempts) + 1}: {type(err).__name__}: {err}")
                raise _Retryable(f"connection failed: {type(err).__name__}: {err}",
                                 None) from None
            code = response.status_code
            asked = retry_after(response.headers.get("Retry-After"), time.time())
            attempts.append(f"attempt {len(attempts) + 1}: HTTP {code}"
                            + (f" (Retry-After {asked:g}s)" if asked is not None else ""))
            if raw is None:
                raise AgentError(f"{self.label}: the response for node '{node}' is larger "
                                 f"than {MAX_RESPONSE} bytes")
            if code == 429 or code >= 500:
                raise _Retryable(f"HTTP {code}: {_error_text(raw)}", asked)
            if code >= 400:
                raise AgentError(f"{self.label}: the server refused the request for node "
                                 f"'{node}': HTTP {code}: {_error_text(raw)}")
            try:
                return json.loads(raw)
            except ValueError:
                shown = raw[:ERROR_BODY_CHARS].decode("utf-8", errors="replace")
                raise AgentError(f"{self.label}: the response for node '{node}' is not "
                                 f"JSON: {shown!r}") from None

        retrying = Retrying(retry=retry_if_exception(lambda e: isinstance(e, _Retryable)),
                            wait=wait, stop=stop, sleep=self.sleep, reraise=True)
        try:
            return retrying(attempt)
        except _Retryable as last:
            raise AgentError(f"{self.label}: no answer for node '{node}' after "
                             f"{len(attempts)} attempt(s); last: {last.problem}") from None
        finally:
            sink.file("stderr.txt", "\n".join(attempts) + "\n")


def _read_bounded(response: httpx.Response, limit: int) -> bytes | None:
    """The body, or None when it is longer than `limit` bytes (reading stops there)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _error_text(raw: bytes) -> str:
    try:
        data = json.loads(raw)
    except ValueError:
        return raw[:ERROR_BODY_CHARS].decode("utf-8", errors="replace") or "(empty body)"
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        message = data["error"].get("message")
        if isinstance(message, str):
            return message[:ERROR_BODY_CHARS]
    return json.dumps(data)[:ERROR_BODY_CHARS]
