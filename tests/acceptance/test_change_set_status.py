"""Acceptance (issue 21, item 1): the `delivery/change-set` commit status on the fake GitHub
with branch protection requiring it. While one PR of a two-repository set fails its CI, a
person cannot merge the other; once both are ready, the run merges both in order. The probe
never waits on the run's own status, and a round where nothing changed writes no status."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow
from github_helpers import CI

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.forges.change_set import CHANGE_SET_CONTEXT
from delivery.testing.github import FakeGitHub
from delivery.testing.github.state import MergeRefused

BRANCH = "delivery/T-7"
REPOS = {"api": "octo/api", "web": "octo/web"}
PUBLISH = """
digraph D {
  graph [goal="Say hello", inputs="ticket", folders="api,web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram,
          script="printf 'BUG\\\\n' > api/app.py; printf 'print(2)\\\\n' > web/app.py"]
  ship [type=publish]
  look [type=probe, probe="pr,threads"]
  again [type=probe, probe="pr,threads"]
  start -> add -> change -> ship -> look -> again -> exit
}
"""
LAND = """
digraph D {
  graph [goal="Say hello", inputs="ticket", folders="api,web"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  look [type=probe, probe="pr,threads"]
  land [type=merge, order="api,web"]
  start -> look -> land -> exit
}
"""


def _run(github: FakeGitHub, root: Path, dot: str, name: str) -> RunOutcome:
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    request = RunRequest(workflow=write_flow(root, dot, f"{name}.dot"),
                         inputs={"ticket": "https://github.com/octo/web/issues/7"},
                         workspace=workspace, run_dir=root / name, repos=dict(REPOS),
                         branch=BRANCH)
    world = World(agent=ReplayBackend({}), clock=FakeClock(), git_cache=root / "cache",
                  environ={**os.environ, **github.env()})
    return start_run(request, world)


def _protected_repos(github: FakeGitHub) -> None:
    for repository in REPOS.values():
        github.create_repo(repository, files={"app.py": "print(0)\n"}, check_rules=(CI,))
        github.protect(repository, required_contexts=("ci", CHANGE_SET_CONTEXT))


def _status(github: FakeGitHub, repository: str) -> tuple[str, str] | None:
    pr = github.pull(repository, 1)
    return github.status_of(repository, pr.last_head_sha, CHANGE_SET_CONTEXT)


def test_a_person_cannot_merge_one_pr_while_the_other_fails_and_both_merge_once_ready(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        _protected_repos(github)
        published = _run(github, tmp_path, PUBLISH, "publish")
        assert published.status == "succeeded", published.failure_reason
        assert published.context["api.pr.state"] == "CI_FAILED"
        # web's own checks pass; the set's status names api as what it waits for
        assert published.context["web.pr.ready"] is True
        assert _status(github, "octo/web") == ("PENDING", "waiting for api #1: ci failed")
        assert _status(github, "octo/api") == ("PENDING", "waiting for api #1: ci failed")
        with pytest.raises(MergeRefused, match="delivery/change-set"):
            github.merge("octo/web", 1)  # a person merging web alone is refused
        assert not github.pull("octo/web", 1).merged

        # a person fixes api on the run's branch; the next probe finds the set ready
        # although its heads carry no success yet (readiness never waits on our status)
        github.push_files("octo/api", BRANCH, {"app.py": "print(1)\n"}, "fix")
        landed = _run(github, tmp_path, LAND, "land")
        assert landed.status == "succeeded", landed.failure_reason
        api, web = github.pull("octo/api", 1), github.pull("octo/web", 1)
        assert api.merged and web.merged and (api.merged_at or "") <= (web.merged_at or "")
        assert _status(github, "octo/web") == (
            "SUCCESS", "all 2 pull requests of the set are ready")


def test_a_probe_round_where_nothing_changed_writes_no_status(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        _protected_repos(github)
        published = _run(github, tmp_path, PUBLISH, "publish")
        assert published.status == "succeeded", published.failure_reason
        writes = [r.path for r in github.requests if "/statuses/" in r.path]
        # written once per head by the publish; `look` and `again` saw nothing change
        assert sorted(writes) == sorted(
            f"/api/v3/repos/{repo}/statuses/{github.pull(repo, 1).last_head_sha}"
            for repo in REPOS.values())


def test_a_closed_pr_fails_the_status_of_the_others(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        _protected_repos(github)
        assert _run(github, tmp_path, PUBLISH, "publish").status == "succeeded"
        github.close("octo/api", 1)
        looked = _run(github, tmp_path, LAND, "land")
        assert looked.status == "failed"  # the merge refuses: api was closed
        assert _status(github, "octo/web") == (
            "FAILURE", "api #1 was closed without being merged")
        assert not github.pull("octo/web", 1).merged
