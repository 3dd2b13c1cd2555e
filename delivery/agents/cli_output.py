"""What the coding CLIs print, read (SPEC §5, built-in presets): Claude Code's
`--output-format json` / `stream-json` and Codex CLI's `exec --json` lines.

Each reader turns one turn's stdout into a `CliTurn`: the reply text, the session id, the
usage as the CLI reported it (and whether that is the session's running total), the cost,
and the problems the CLI reported — an API error, or a refused tool call. The reply text
comes from an untrusted program: it is returned, never interpreted here.

Observed behaviour of the pinned versions (Claude Code 2.1.332, Codex 0.171.0), which the
tests in tests/agents/test_real_clis.py check against the real programs:
* Claude's `usage.input_tokens` excludes cached input; `cache_read_input_tokens` and
  `cache_creation_input_tokens` are counted separately and are most of real traffic. Its
  usage covers the one invocation, but `total_cost_usd` on `--resume` is the session's
  running total. An API error is `"is_error": true, "result": "API Error: …"` (exit 1).
  A tool call the permission mode refused is listed in `permission_denials` (exit 0).
* Codex's `turn.completed.usage.input_tokens` already includes `cached_input_tokens`; on
  `exec resume` it is the session's running total. An `error` item about missing model
  metadata is printed for any custom model and is harmless; a `turn.failed` or top-level
  `error` event is a failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from delivery.agents.base import Usage

QUOTE_LIMIT = 300  # characters of one CLI message quoted in a failure reason


@dataclass
class CliTurn:
    reply: str | None = None
    session_id: str = ""
    usage: Usage | None = None
    usage_is_running_total: bool = False  # Codex: the session's total so far
    cost_is_running_total: bool = False  # Claude: total_cost_usd is per session
    error: str = ""  # the CLI's own error text
    refused: list[str] = field(default_factory=list)  # tool calls the CLI refused
    model: str = ""  # the model the CLI says it used, when it says
    unreadable: str = ""  # why the output is not what this CLI prints ("" when it is)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT - 3] + "..."


def _codex_message(message: Any) -> str:
    """Codex passes the server's error body on as the message: quote its own message."""
    text = str(message or "the turn failed")
    try:
        body = json.loads(text)
    except ValueError:
        return text
    error = body.get("error") if isinstance(body, dict) else None
    inner = error.get("message") if isinstance(error, dict) else None
    return inner if isinstance(inner, str) and inner.strip() else text


def _count(data: Any, key: str) -> int:
    value = data.get(key) if isinstance(data, dict) else None
    return value if type(value) is int and value >= 0 else 0


def read_claude(out: str) -> CliTurn:
    """Claude Code's `json` (one result object) or `stream-json` (lines, the last of type
    `result` holds the same fields)."""
    text = out.strip()
    if not text:
        return CliTurn(unreadable="Claude Code printed nothing")
    objects: list[Any]
    try:
        objects = [json.loads(text)]
    except ValueError:
        try:
            objects = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as err:
            return CliTurn(unreadable=f"not JSON nor JSON lines ({err})")
    results = [o for o in objects if isinstance(o, dict) and o.get("type") == "result"]
    if not results:
        if len(objects) == 1 and isinstance(objects[0], dict) and "result" in objects[0]:
            results = objects  # an older `json` format without "type"
        else:
            return CliTurn(unreadable="no object of type \"result\" (run it with "
                                      "--output-format json or stream-json --verbose)")
    result = results[-1]
    turn = CliTurn(cost_is_running_total=True)
    for obj in objects:  # stream-json: the init line has the session id and model
        if isinstance(obj, dict) and isinstance(obj.get("session_id"), str):
            turn.session_id = obj["session_id"] or turn.session_id
    usage = result.get("usage")
    cost = result.get("total_cost_usd")
    if isinstance(usage, dict) or isinstance(cost, (int, float)):
        turn.usage = Usage(
            _count(usage, "input_tokens") + _count(usage, "cache_read_input_tokens")
            + _count(usage, "cache_creation_input_tokens"),
            _count(usage, "output_tokens"),
            float(cost) if isinstance(cost, (int, float)) and cost >= 0 else 0.0)
    models = result.get("modelUsage")
    if isinstance(models, dict) and len(models) == 1:
        turn.model = str(next(iter(models)))
    reply = result.get("result")
    if result.get("is_error") is True or str(result.get("subtype", "success")) != "success":
        detail = reply if isinstance(reply, str) and reply.strip() else \
            str(result.get("subtype") or "an error")
        errors = result.get("errors")
        if isinstance(errors, list) and errors:
            detail += ": " + "; ".join(str(e) for e in errors)
        turn.error = _quote(detail)
    elif isinstance(reply, str):
        turn.reply = reply
    denials = result.get("permission_denials")
    if isinstance(denials, list):
        for denial in denials:
            if isinstance(denial, dict):
                name = str(denial.get("tool_name", "a tool"))
                given = denial.get("tool_input")
                detail = ""
                if isinstance(given, dict):
                    detail = str(given.get("command") or given.get("file_path") or "")
                turn.refused.append(_quote(f"{name}({detail})" if detail else name))
    return turn


def read_codex(out: str) -> CliTurn:
    """Codex CLI's `exec --json` lines. Its usage is the session's total so far (on the
    first turn that is the turn's own)."""
    turn = CliTurn(usage_is_running_total=True)
    messages: list[str] = []
    for number, line in enumerate(out.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            return CliTurn(unreadable=f"line {number} is not JSON (run codex exec with "
                                      "--json)")
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            turn.session_id = event["thread_id"]
        elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
            usage = event["usage"]
            turn.usage = Usage(_count(usage, "input_tokens"), _count(usage, "output_tokens"))
        elif kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            turn.error = _quote(_codex_message(message))
        elif kind == "error" and not turn.error:
            turn.error = _quote(_codex_message(event.get("message")))
        elif kind == "item.completed" and isinstance(event.get("item"), dict):
            item = event["item"]
            item_type = item.get("type")
            if item_type == "agent_message" and isinstance(item.get("text"), str):
                messages.append(item["text"])
            elif item_type == "command_execution" and _refused_command(item):
                turn.refused.append(_quote(f"{item.get('command', 'a command')}: "
                                           f"{_refusal_text(item)}"))
            elif item_type == "file_change" and item.get("status") not in (None, "completed"):
                paths = [str(c.get("path")) for c in item.get("changes") or []
                         if isinstance(c, dict)]
                turn.refused.append(_quote(f"edit of {', '.join(paths) or 'a file'}: "
                                           f"{item.get('status')}"))
            # an `error` item (e.g. "Model metadata for `x` not found") is a warning
    if messages:
        turn.reply = messages[-1]
    return turn


# What a command refused by Codex's sandbox prints (Linux Landlock, macOS Seatbelt).
_SANDBOX_TEXTS = ("Read-only file system", "Operation not permitted", "Permission denied")


def _refused_command(item: dict[str, Any]) -> bool:
    if item.get("status") == "declined":
        return True
    return item.get("exit_code") not in (0, None) and any(
        text in str(item.get("aggregated_output", "")) for text in _SANDBOX_TEXTS)


def _refusal_text(item: dict[str, Any]) -> str:
    if item.get("status") == "declined":
        return "declined"
    output = str(item.get("aggregated_output", ""))
    for line in output.splitlines():
        if any(text in line for text in _SANDBOX_TEXTS):
            return line.strip()
    return "refused"
