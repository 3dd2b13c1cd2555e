"""Reading what Claude Code and Codex print, for the cases the scripted servers cannot
make the real CLIs print (tests/agents/test_real_clis.py covers the rest end to end)."""

from __future__ import annotations

import json

from delivery.agents.base import Usage
from delivery.agents.cli_output import read_claude, read_codex


def lines(*events: dict[str, object]) -> str:
    return "\n".join(json.dumps(event) for event in events)


def test_a_claude_turn_limit_is_an_error_that_names_it_and_still_counts_usage() -> None:
    turn = read_claude(json.dumps({
        "type": "result", "subtype": "error_max_turns", "is_error": True, "session_id": "s1",
        "usage": {"input_tokens": 3, "cache_read_input_tokens": 50, "output_tokens": 4},
        "total_cost_usd": 0.25}))
    assert "error_max_turns" in turn.error and turn.reply is None
    assert turn.usage == Usage(53, 4, 0.25) and turn.session_id == "s1"


def test_claude_output_without_a_result_object_is_refused_saying_how_to_run_it() -> None:
    turn = read_claude(lines({"type": "system", "subtype": "init", "session_id": "s"}))
    assert "--output-format json" in turn.unreadable and turn.reply is None


def test_a_codex_command_declined_is_a_refusal_and_the_metadata_warning_is_not() -> None:
    turn = read_codex(lines(
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "item.completed", "item": {"type": "error", "message": "Model metadata for "
                                            "`x` not found."}},
        {"type": "item.completed", "item": {"type": "command_execution", "command": "rm -rf x",
                                            "status": "declined", "exit_code": None}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "done"}}))
    assert turn.error == "" and turn.reply == "done"
    assert turn.refused == ["rm -rf x: declined"]


def test_a_failed_codex_turn_quotes_the_servers_own_message() -> None:
    body = json.dumps({"error": {"message": "Quota exceeded", "type": "insufficient_quota"}})
    turn = read_codex(lines({"type": "turn.failed", "error": {"message": body}}))
    assert turn.error == "Quota exceeded"
