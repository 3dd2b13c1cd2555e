"""Acceptance (SPEC §8.1, issue 36): deliver.dot runs its local checks in each folder's
worktree, not once at the workspace root. A newcomer's `python -m unittest` (the run's
`check_command`) that fails inside one repository sends the run to `fix` — one session,
told which folders failed and their output — and nothing broken is published; a check
that never passes fails the run with nothing published."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from git_helpers import git, make_remote

from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.testing.clock import FakeClock

ROOT = Path(__file__).resolve().parents[2]
BRANCH = "delivery/checks-1"
TEST = ("import unittest\n\nfrom lib import value\n\n\nclass ValueTest(unittest.TestCase):\n"
        "    def test_value(self):\n        self.assertEqual(value(), {})\n")
BASE = {"lib.py": "def value():\n    return 1\n", "test_lib.py": TEST.format(1)}
TWO = "def value():\n    return 2\n"


def _turn(summary: str, files: dict[str, str]) -> ScriptedTurn:
    return ScriptedTurn("Done. " + json.dumps({"context_updates": {"summary": summary}}), files)


def _agent(implement: dict[str, str], fixes: list[dict[str, str]]) -> ScriptedAgent:
    scope = {"type": "goal", "goal": "value() returns 2"}
    return ScriptedAgent({
        "scope": [ScriptedTurn(json.dumps({"context_updates": {"scope": scope}}))],
        "plan": [ScriptedTurn(json.dumps({"context_updates": {"plan": "both"}}))],
        "implement": [_turn("value() is 2", implement)],
        "fix": [_turn("fixed", files) for files in fixes],
    })


def _deliver(tmp_path: Path, agent: ScriptedAgent, **inputs: str
             ) -> tuple[RunOutcome, dict[str, Path]]:
    (tmp_path / "remotes").mkdir()
    remotes = {name: make_remote(tmp_path / "remotes", name, BASE) for name in ("api", "web")}
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    python = shlex.quote(sys.executable)
    request = RunRequest(
        workflow=ROOT / "workflows" / "deliver.dot",
        inputs={"ticket": "https://tracker.example/T-36",
                "check_command": f"{python} -m unittest -q", **inputs},
        workspace=workspace, run_dir=tmp_path / "run",
        repos={name: str(path) for name, path in remotes.items()}, forge="local",
        branch=BRANCH)
    outcome = start_run(request, World(agent=agent, clock=FakeClock(),
                                       git_cache=tmp_path / "cache"))
    return outcome, remotes


def test_a_test_failing_in_one_folder_is_fixed_before_anything_is_published(
        tmp_path: Path) -> None:
    agent = _agent({"api/lib.py": TWO, "api/test_lib.py": TEST.format(2),
                    "web/lib.py": TWO, "web/test_lib.py": TEST.format(3)},
                   [{"web/test_lib.py": TEST.format(2)}])
    outcome, remotes = _deliver(tmp_path, agent)
    assert outcome.status == "succeeded", outcome.failure_reason
    fix = [prompt for node, prompt in agent.prompts if node == "fix"]
    assert len(fix) == 1
    assert '["web"]' in fix[0] and "AssertionError: 2 != 3" in fix[0]
    for name, remote in remotes.items():
        assert git(remote, "show", "main:test_lib.py") == TEST.format(2).strip(), name
    # the broken test was never pushed: no commit of web's repository holds it
    assert "value(), 3)" not in git(remotes["web"], "log", "-p", "--all", "--", "test_lib.py")
    assert outcome.path.index("fix") < outcome.path.index("publish")


def test_a_test_that_never_passes_in_its_folder_fails_the_run_with_nothing_published(
        tmp_path: Path) -> None:
    broken = {"web/lib.py": TWO, "web/test_lib.py": TEST.format(3)}
    agent = _agent({"api/lib.py": TWO, "api/test_lib.py": TEST.format(2), **broken},
                   [broken])
    outcome, remotes = _deliver(tmp_path, agent, max_repairs="1")
    assert outcome.status == "failed"
    assert "repairs spent" in outcome.failure_reason
    assert "publish" not in outcome.path
    for remote in remotes.values():
        assert git(remote, "branch", "--list", BRANCH) == ""
