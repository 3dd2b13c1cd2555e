"""Acceptance (SPEC §8.1, issue 36): the bundled campaign.dot end to end on four local
repositories with the local forge, a scripted agent editing each worktree in its own
session. Each folder's unittest is its local check and its CI (`--check F=CMD`).

- `c`'s first change breaks its own test: the local checks, run in c's worktree, fail,
  `fix` runs for c alone, told c's output; nothing is published before they pass.
- `d`'s change imports a git-ignored file: its local checks pass, its CI (a clean clone of
  the PR head) fails once; `repair` runs for d alone, its prompt carrying d's evidence only.
- Every PR merges (`merge policy=each`), and the run succeeds.
- A folder whose test never passes is given up: its change is never published (it is kept
  at a ref), the others merge, and the run fails naming it.
"""

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
BRANCH = "delivery/campaign-1"
FOLDERS = ("a", "b", "c", "d")
TEST = ("import unittest\n\nfrom lib import value\n\n\nclass ValueTest(unittest.TestCase):\n"
        "    def test_value(self):\n        self.assertEqual(value(), {})\n")
BASE = {"lib.py": "def value():\n    return 1\n", "test_lib.py": TEST.format(1),
        ".gitignore": "generated.py\n"}
TWO = "def value():\n    return 2\n"


def _reply(summary: str, **more: object) -> str:
    return "Done. " + json.dumps({"context_updates": {"summary": summary, **more}})


def _scope() -> ScriptedTurn:
    return ScriptedTurn(json.dumps({"context_updates": {"scope": {
        "type": "goal", "goal": "value() returns 2 in every repository"}}}))


def _run(tmp_path: Path, agent: ScriptedAgent, **inputs: str) -> tuple[RunOutcome, dict[str, Path]]:
    (tmp_path / "remotes").mkdir()
    remotes = {name: make_remote(tmp_path / "remotes", name, BASE) for name in FOLDERS}
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    python = shlex.quote(sys.executable)
    request = RunRequest(
        workflow=ROOT / "workflows" / "campaign.dot",
        inputs={"ticket": "https://tracker.example/C-42", **inputs},
        workspace=workspace, run_dir=tmp_path / "run",
        repos={name: str(path) for name, path in remotes.items()}, forge="local",
        checks={name: f"{python} -m unittest -q" for name in FOLDERS}, branch=BRANCH)
    outcome = start_run(request, World(agent=agent, clock=FakeClock(),
                                       git_cache=tmp_path / "cache"))
    return outcome, remotes


def _prompts(agent: ScriptedAgent, node: str) -> dict[str, str]:
    return {who: prompt for who, prompt in agent.prompts if who.startswith(f"{node}@")}


def _merged_value(remote: Path) -> str:
    return git(remote, "show", "main:lib.py")


def test_a_campaign_fixes_and_repairs_each_folder_alone_and_merges_every_pr(
        tmp_path: Path) -> None:
    agent = ScriptedAgent({
        "scope": [_scope()],
        "implement@a": [ScriptedTurn(_reply("a"), {"lib.py": TWO, "test_lib.py": TEST.format(2)})],
        "implement@b": [ScriptedTurn(_reply("b"), {"lib.py": TWO, "test_lib.py": TEST.format(2)})],
        "implement@c": [ScriptedTurn(_reply("c"), {"lib.py": TWO, "test_lib.py": TEST.format(3)})],
        "implement@d": [ScriptedTurn(_reply("d"), {
            "lib.py": "from generated import TWO\n\n\ndef value():\n    return TWO\n",
            "generated.py": "TWO = 2\n", "test_lib.py": TEST.format(2)})],
        "fix@c": [ScriptedTurn(_reply("c's test expects 2"), {"test_lib.py": TEST.format(2)})],
        "repair@d": [ScriptedTurn(_reply("no ignored import", answers={}), {"lib.py": TWO})],
    })
    outcome, remotes = _run(tmp_path, agent)
    assert outcome.status == "succeeded", outcome.failure_reason
    for name, remote in remotes.items():
        assert _merged_value(remote) == TWO.strip(), name
        assert outcome.context[f"{name}.pr.state"] == "MERGED"
    assert sorted(_prompts(agent, "fix")) == ["fix@c"]
    assert "AssertionError: 2 != 3" in _prompts(agent, "fix")["fix@c"]
    assert sorted(_prompts(agent, "repair")) == ["repair@d"]
    repair = _prompts(agent, "repair")["repair@d"]
    assert "CI_FAILED" in repair and "generated" in repair  # d's own failing check
    assert not any(str(remotes[other]) in repair for other in ("a", "b", "c"))
    path = outcome.path
    assert path.index("checks") < path.index("fix") < path.index("publish")
    assert path.count("publish") == 1 and path.count("repair") == 1
    assert outcome.context["d.repairs"] == "1" and outcome.context["a.repairs"] == "0"


def test_a_folder_whose_own_test_never_passes_is_given_up_unpublished_while_the_rest_merge(
        tmp_path: Path) -> None:
    broken = {"lib.py": TWO, "test_lib.py": TEST.format(3)}
    agent = ScriptedAgent({
        "scope": [_scope()],
        "implement": [ScriptedTurn(_reply("done"), {"lib.py": TWO, "test_lib.py": TEST.format(2)})],
        "implement@c": [ScriptedTurn(_reply("c"), broken)],
        "fix@c": [ScriptedTurn(_reply("tried"), broken)],
    })
    outcome, remotes = _run(tmp_path, agent, max_repairs="1")
    assert outcome.status == "failed"
    assert "not merged (1): c given up: its local checks still failed after 1 fix(es)" \
        in outcome.failure_reason
    for name in ("a", "b", "d"):
        assert _merged_value(remotes[name]) == TWO.strip(), name
    assert _merged_value(remotes["c"]) == BASE["lib.py"].strip()
    assert outcome.context["c.pr.state"] == "NONE"  # no PR: nothing broken was published
    assert git(remotes["c"], "branch", "--list", BRANCH) == ""
    kept = f"refs/delivery/set-aside/{BRANCH}"
    assert kept in outcome.context["c.given_up"]
    holder = Path(outcome.context["c.given_up"].rsplit(" in ", 1)[1])
    assert git(holder, "show", f"{kept}:test_lib.py") == TEST.format(3).strip()
