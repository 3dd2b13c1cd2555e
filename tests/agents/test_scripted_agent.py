"""The scripted editing agent: each turn writes its files in the workspace and replies;
turns are consumed per node across visits; the cursors survive a save and restore."""

from __future__ import annotations

from pathlib import Path

import pytest

from delivery.agents.base import AgentError
from delivery.testing import ScriptedAgent, ScriptedTurn


def agent() -> ScriptedAgent:
    return ScriptedAgent({"implement": [
        ScriptedTurn("first", files={"api/app.py": "print(1)\n", "web/old.txt": None}),
        ScriptedTurn("second", files={"api/app.py": "print(2)\n"}),
    ]})


def test_a_turn_writes_its_files_and_deletes_the_ones_set_to_none(tmp_path: Path) -> None:
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "old.txt").write_text("gone soon")
    reply = agent().open_session("implement", workspace=tmp_path).send("do it")
    assert reply == "first"
    assert (tmp_path / "api" / "app.py").read_text() == "print(1)\n"
    assert not (tmp_path / "web" / "old.txt").exists()


def test_turns_are_consumed_in_order_across_sessions_and_run_out_clearly(
        tmp_path: Path) -> None:
    scripted = agent()
    assert scripted.open_session("implement", workspace=tmp_path).send("a") == "first"
    assert scripted.open_session("implement", workspace=tmp_path).send("b") == "second"
    with pytest.raises(AgentError, match="no turn 3 for node 'implement'"):
        scripted.open_session("implement", workspace=tmp_path).send("c")
    assert scripted.prompts == [("implement", "a"), ("implement", "b")]


def test_a_restored_agent_goes_on_with_the_next_turn(tmp_path: Path) -> None:
    first = agent()
    first.open_session("implement", workspace=tmp_path).send("a")
    resumed = agent()
    resumed.restore_state(first.save_state())
    assert resumed.open_session("implement", workspace=tmp_path).send("b") == "second"


def test_a_path_outside_the_workspace_is_refused(tmp_path: Path) -> None:
    escaping = ScriptedAgent({"n": [ScriptedTurn("x", files={"../outside.txt": "no"})]})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with pytest.raises(AgentError, match="outside the workspace"):
        escaping.open_session("n", workspace=workspace).send("go")
    assert not (tmp_path / "outside.txt").exists()
