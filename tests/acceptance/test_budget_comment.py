"""Acceptance (issue 21, item 4) on the fake GitHub: the sticky comment's "budget used"
column, and the 80% warning under the table once the run has used that much."""

from __future__ import annotations

import os
from pathlib import Path

from change_set_helpers import (
    BRANCH,
    REPOS,
    protected_repos,
    shipping_flow,
    sticky_comments,
)
from engine_helpers import FakeClock, write_flow

from delivery.agents.base import Usage
from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.testing.github import FakeGitHub
from delivery.testing.runs import reply

FLOW = shipping_flow('shape=box, prompt="change both folders"', graph=", budget_tokens=1000")


def run_costing(github: FakeGitHub, root: Path, tokens: int) -> RunOutcome:
    turn = ScriptedTurn(reply({}), files={"api/app.py": "print(1)\n", "web/app.py": "print(2)\n"},
                        usage=Usage(tokens - 100, 100))
    workspace = root / "ws"
    workspace.mkdir()
    request = RunRequest(workflow=write_flow(root, FLOW), workspace=workspace,
                         inputs={"ticket": "https://github.com/octo/web/issues/7"},
                         repos=dict(REPOS), branch=BRANCH)
    world = World(agent=ScriptedAgent({"change": [turn]}), clock=FakeClock(),
                  git_cache=root / "cache", environ={**os.environ, **github.env()})
    return start_run(request, world)


def test_the_sticky_comment_shows_the_budget_used_in_its_table(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        protected_repos(github)
        assert run_costing(github, tmp_path, 400).status == "succeeded"
        for repository in REPOS.values():
            [table] = sticky_comments(github, repository)
            assert "| budget used |" in table
            assert table.count("| 400 of 1,000 tokens (40%) |") == 2, table
            assert "Warning" not in table


def test_the_sticky_comment_warns_once_80_percent_of_the_budget_is_used(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        protected_repos(github)
        assert run_costing(github, tmp_path, 850).status == "succeeded"
        for repository in REPOS.values():
            [table] = sticky_comments(github, repository)
            assert "| 850 of 1,000 tokens (85%) |" in table
            [warning] = [line for line in table.splitlines() if "Warning" in line]
            assert "80% or more of its budget" in warning
