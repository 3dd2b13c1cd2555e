"""Acceptance (SPEC §7.1 "GitHub's limits are a budget, not an error"; issue 37): the
bundled deliver.dot over many repositories against a fake GitHub that enforces GitHub's
secondary limits (content-creating requests per token a minute and an hour, 403 with
`Retry-After` past them) finishes with no failed run. The run paces its writes under the
limits, pauses (reason `rate_limit`, the time it may go on) when the hour's budget is spent,
and each resume — a new forge, as a new process or Actions job would open, its windows
restored from the run — goes on; the test fast-forwards the shared clock to that time.
Nothing is written twice: one PR and one merge per repository, no request refused.

Scaled down by default (12 folders, 20 a minute and 40 an hour); GitHub's own figures (200
folders, 80 and 500) with `--long`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.errors import PauseReason, paused_why
from delivery.forges.github import GitHubForge
from delivery.forges.pacing import Pacer
from delivery.forges.write_budget import WriteBudget
from delivery.testing.github import CheckRule, EngineClock, FakeGitHub, ManualClock, Tree
from delivery.testing.two_repos import bundled_workflow
from probes.github import RetryBudget

BRANCH = "delivery/limits-1"


def _ci(tree: Tree) -> bool:
    return "BUG" not in (tree.read("app.py") or "")


def _reply(summary: str, **more: object) -> str:
    return "Done. " + json.dumps({"context_updates": {"summary": summary, **more}})


def _agent(folders: list[str]) -> ScriptedAgent:
    """Every folder changed; the first one's change fails CI once and is repaired."""
    changed = {f"{f}/app.py": f"print({i + 1})\n" for i, f in enumerate(folders)}
    changed[f"{folders[0]}/app.py"] = "BUG\n"
    return ScriptedAgent({
        "scope": [ScriptedTurn(json.dumps({"context_updates": {"scope": {
            "type": "goal", "goal": "print a new number everywhere"}}}))],
        "plan": [ScriptedTurn(json.dumps({"context_updates": {"plan": "one line each"}}))],
        "implement": [ScriptedTurn(_reply("changed every folder"), files=changed)],
        "repair": [ScriptedTurn(_reply("no BUG", answers={}),
                                files={f"{folders[0]}/app.py": "print(0)\n"})],
    })


def _world(fake: FakeGitHub, clock: ManualClock, agent: ScriptedAgent, root: Path,
           per_minute: int, per_hour: int) -> World:
    """What a new process opens: a forge whose windows start empty (the run restores them)."""
    environ = {**os.environ, **fake.env()}
    forge = GitHubForge.from_environment(
        environ, sleep=clock.sleep, clock=clock,
        budget=RetryBudget(attempts=6, wait_seconds=300),
        pacer=Pacer(clock=clock, sleep=clock.sleep, write_spacing=0,
                    budget=WriteBudget(per_minute=per_minute, per_hour=per_hour)))
    return World(agent=agent, clock=EngineClock(clock), environ=environ, forge=forge,
                 git_cache=root / "cache")


def _campaign(root: Path, folders: int, per_minute: int, per_hour: int) -> None:
    clock = ManualClock()
    names = [f"f{i}" for i in range(folders)]
    with FakeGitHub(clock=clock) as fake:
        for name in names:
            fake.create_repo(f"octo/{name}", files={"app.py": "print(0)\n"},
                             check_rules=(CheckRule("ci", predicate=_ci),))
        limits = fake.enforce_secondary_limits(per_minute=per_minute, per_hour=per_hour)
        agent = _agent(names)
        workspace = root / "workspace"
        workspace.mkdir()
        request = RunRequest(workflow=bundled_workflow(), goal="New numbers",
                             inputs={"ticket": "T-LIMITS"}, workspace=workspace,
                             run_dir=root / "run",
                             repos={name: f"octo/{name}" for name in names}, branch=BRANCH)
        outcome: RunOutcome = start_run(
            request, _world(fake, clock, agent, root, per_minute, per_hour))
        pauses: list[str] = []
        while outcome.status == "paused":
            assert outcome.pause_reason is PauseReason.RATE_LIMIT, outcome.failure_reason
            reason, until = paused_why(outcome.context)
            assert reason == "rate_limit" and until in outcome.failure_reason
            pauses.append(until)
            clock.now = max(clock.now, datetime.fromisoformat(until).timestamp())
            outcome = resume_run(root / "run",
                                 _world(fake, clock, agent, root, per_minute, per_hour))
        assert outcome.status == "succeeded", outcome.failure_reason
        assert len(pauses) >= 2 and len(set(pauses)) == len(pauses)  # each resume went on
        assert limits.refused == 0  # paced under the limits: GitHub turned nothing away
        created = Counter(r.path for r in fake.requests if r.method == "POST"
                          and r.path.endswith("/pulls") and r.status == 201)
        merged = Counter(r.path for r in fake.requests if r.method == "PUT"
                         and r.path.endswith("/merge") and r.status == 200)
        assert sorted(created.values()) == [1] * folders  # no PR opened twice
        assert sorted(merged.values()) == [1] * folders  # no merge sent twice
        for name in names:
            assert [pr.merged for pr in fake.repository(f"octo/{name}").pulls.values()] \
                == [True], name


@pytest.mark.slow
def test_a_campaign_past_the_hours_write_limit_pauses_and_resumes_until_every_pr_merged(
        tmp_path: Path) -> None:
    _campaign(tmp_path, folders=12, per_minute=20, per_hour=40)  # ~100 writes: two hours and more


@pytest.mark.long
def test_a_200_folder_campaign_on_githubs_limits_finishes_with_no_failed_run(
        tmp_path: Path) -> None:
    _campaign(tmp_path, folders=200, per_minute=80, per_hour=500)
