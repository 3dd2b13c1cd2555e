"""The built-in `claude` and `codex` presets and inline output formats, without the real
CLIs (those are tests/agents/test_real_clis.py): what a missing CLI says, what a profile
of the same name does, `command+json:`."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import real_cli_helpers
from engine_helpers import cli, reply, write_flow
from test_command_agent import ONE_STAGE, agent_command, calls, run, script

from delivery.agents.presets import PRESETS
from delivery.agents.registry import resolve_agents
from delivery.errors import RunRefused


@pytest.mark.parametrize(("preset", "package"), [("claude", "@anthropic-ai/claude-code"),
                                                 ("codex", "@openai/codex")])
def test_a_missing_cli_is_refused_before_the_run_naming_its_npm_package(
        tmp_path: Path, preset: str, package: str) -> None:
    with pytest.raises(RunRefused) as caught:
        resolve_agents([("work", "")], default_spec=preset, workspace=tmp_path,
                       environ={"PATH": str(tmp_path)})
    assert f"npm install -g {package}" in caught.value.fix
    assert "needed by node 'work'" in caught.value.problem


def test_the_command_line_exits_2_when_the_preset_cli_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flow = write_flow(tmp_path, ONE_STAGE % "")
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = cli("run", flow, "--agent", "codex", "--workspace", tmp_path,
                         "--run-dir", tmp_path / "run")
    assert code == 2, out + err
    assert "@openai/codex" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "work").exists()  # no stage ran


def test_a_profile_file_profile_named_like_a_preset_replaces_it(tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    (tmp_path / "delivery.toml").write_text(
        "[profiles.claude]\nbackend = \"command\"\n"
        f"command = {json.dumps(agent_command(state))}\noutput = \"claude\"\n",
        encoding="utf-8")
    script(state, {"reply": reply({"summary": "from my own claude"})})
    outcome = run(tmp_path, ONE_STAGE % "", agent="claude", PATH="/usr/bin:/bin")
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.context["summary"] == "from my own claude"
    assert len(calls(state)) == 1


def test_an_inline_command_can_say_its_output_is_json(tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    script(state, {"reply": reply({"summary": "read from JSON"})})
    outcome = run(tmp_path, ONE_STAGE % "", agent="command+json:" + agent_command(state))
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.context["summary"] == "read from JSON"
    assert len(calls(state)) == 1  # no correction turns: the reply was found at once


def test_an_unknown_inline_output_format_is_refused_naming_the_formats(
        tmp_path: Path) -> None:
    flow = write_flow(tmp_path, ONE_STAGE % "")
    code, _, err = cli("run", flow, "--agent", f"command+yaml:{shlex.quote(sys.executable)}",
                       "--workspace", tmp_path, "--run-dir", tmp_path / "run")
    assert code == 2
    assert "'+yaml'" in err and "json, jsonl, claude, codex" in err


def test_the_presets_keep_their_permissions_on_resumed_turns() -> None:
    claude, codex = PRESETS["claude"], PRESETS["codex"]
    assert claude.resume_command is not None and codex.resume_command is not None
    for flags in (["--permission-mode", "acceptEdits"], ["--allowedTools"]):
        for command in (claude.command, claude.resume_command):
            assert all(flag in command for flag in flags)
    for command in (codex.command, codex.resume_command):
        assert 'sandbox_mode="workspace-write"' in command
        assert 'approval_policy="never"' in command and "--skip-git-repo-check" in command


@pytest.mark.parametrize(("ci", "outcome"), [("", pytest.skip.Exception),
                                             ("true", pytest.fail.Exception)])
def test_real_cli_tests_skip_without_the_cli_but_fail_in_ci(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str,
        outcome: type[BaseException]) -> None:
    monkeypatch.setattr(real_cli_helpers, "NODE_BIN", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CI", ci)
    install = re.escape("npm install --prefix .ci/node @openai/codex@0.171.0")
    with pytest.raises(outcome, match=install):
        real_cli_helpers.find_cli("codex")
