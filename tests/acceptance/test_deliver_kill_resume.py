"""Acceptance: deliver.dot killed (SIGKILL, a real subprocess) at random points of its
publish and merge writes, then resumed, until it ends — on the local forge and on the
fake GitHub: exactly one PR per repository, exactly one merge each, no commit lost, the
worktrees removed. The seed is random per run (DELIVER_KILL_SEED replays one)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from delivery.cli.demo import make_samples
from delivery.cli.demo_files import API_FIXED, WEB_FIRST
from delivery.testing.github import FakeGitHub, gitops
from delivery.testing.two_repos import BRANCH, create_repos

DRIVER = Path(__file__).resolve().parent.parent / "deliver_driver.py"
POINTS = [f"{point}:{k}" for point in ("push", "create-before", "create-after",
                                        "body-after", "merge-before", "merge-after")
          for k in (1, 2)]
KILLS = 3


def seed() -> int:
    return int(os.environ.get("DELIVER_KILL_SEED") or random.SystemRandom().randrange(10**6))


def drive(root: Path, forge: str, env: dict[str, str], plan: list[str]) -> list[str]:
    """Start, then resume after every kill; the kill points used, then 'done'."""
    log: list[str] = []
    command = "start"
    for point in [*plan, ""]:
        done = subprocess.run([sys.executable, str(DRIVER), command, str(root), forge,
                               *([point] if point else [])], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        if done.returncode == -signal.SIGKILL:
            log.append(point)
            command = "resume"
            continue
        assert done.returncode == 0, (log, point, done.stdout, done.stderr)
        assert json.loads(done.stdout.splitlines()[-1])["status"] == "succeeded"
        log.append("done")
        return log
    raise AssertionError(f"the run never ended: {log}")


@pytest.fixture
def plan() -> Iterator[list[str]]:
    chosen = seed()
    picked = random.Random(chosen).sample(POINTS, KILLS)
    print(f"DELIVER_KILL_SEED={chosen}: kills at {picked}")  # shown when the test fails
    yield picked


def test_killed_and_resumed_on_the_local_forge(tmp_path: Path, plan: list[str]) -> None:
    remotes = make_samples(tmp_path)
    log = drive(tmp_path, "local", dict(os.environ), plan)
    assert log[0] == plan[0] and log[-1] == "done", log  # the first kill always happens
    for name, remote in remotes.items():
        pulls = json.loads((remote / "delivery" / "pulls.json").read_text())["pulls"]
        assert len(pulls) == 1 and pulls[0]["state"] == "merged", (plan, name, pulls)
        merges = gitops.git(remote, "rev-list", "--merges", "--count", "main")
        assert merges == "1", (plan, name)
        # every commit of the run's branch is on main: nothing was lost
        assert gitops.is_ancestor(remote, BRANCH, "main"), (plan, name)
    assert gitops.read_file(remotes["api"], "main", "greeting.py") == API_FIXED
    assert gitops.read_file(remotes["web"], "main", "page.py") == WEB_FIRST
    assert not (tmp_path / "workspace" / "api").exists(), plan


def test_killed_and_resumed_on_github(tmp_path: Path, plan: list[str]) -> None:
    with FakeGitHub() as github:
        create_repos(github)
        log = drive(tmp_path, "github", {**os.environ, **github.env()}, plan)
        assert log[0] == plan[0] and log[-1] == "done", log
        for name in ("api", "web"):
            repo = github.repository(f"octo/{name}")
            assert len(repo.pulls) == 1 and repo.pulls[1].merged, (plan, name)
            assert gitops.git(repo.path, "rev-list", "--merges", "--count", "main") == "1"
            assert gitops.is_ancestor(repo.path, BRANCH, "main"), (plan, name)
        api = github.repository("octo/api").path
        web = github.repository("octo/web").path
        assert gitops.read_file(api, "main", "greeting.py") == API_FIXED
        assert gitops.read_file(web, "main", "page.py") == WEB_FIRST
        successful = [r for r in github.requests if r.method == "PUT" and r.status == 200]
        assert len(successful) == 2, (plan, [(r.path, r.status) for r in successful])
