"""The folder stages against the fake GitHub (real HTTP on 127.0.0.1, git smart HTTP):
the same worktree, publish, probe, merge and removal as on the local forge, with the token
sent to git only as a header."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from engine_helpers import FakeClock, cli, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.runner import RunRequest, World, start_run
from delivery.testing import flow
from delivery.testing.github import FakeGitHub

FLOW = flow("""
add [type=worktree_add]
change [shape=parallelogram, script="printf 'hello\\n' > web/hello.txt"]
ship [type=publish]
look [type=probe]
land [type=merge]
after [type=probe, probe="pr"]
remove [type=worktree_remove]
start -> add -> change -> ship -> look -> land -> after -> remove -> exit
""", goal="Say hello", graph='inputs="ticket", folders="web"', name="D")


@pytest.mark.slow
def test_a_delivery_on_github_publishes_merges_and_cleans_up(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        github.create_repo("octo/web", files={"README.md": "# web\n"})
        workspace = tmp_path / "ws"
        workspace.mkdir()
        request = RunRequest(workflow=write_flow(tmp_path, FLOW),
                             inputs={"ticket": "https://github.com/octo/web/issues/3"},
                             workspace=workspace, repos={"web": "octo/web"})
        world = World(agent=ReplayBackend({}), clock=FakeClock(),
                      git_cache=tmp_path / "cache", environ={**os.environ, **github.env()})
        ran = start_run(request, world)
        assert ran.status == "succeeded", ran.failure_reason
        ctx = ran.context
        assert ctx["web.pr.number"] == 1
        assert ctx["web.worktree.branch"].startswith("delivery/web-3-")
        assert ctx["web.diff.files"] == 1
        assert ctx["pr.state"] == "MERGED" and ctx["worktree.clean"] is True
        # preflight's one query, then one GraphQL request per PR read: the publish's look
        # for the change-set status, look, land (and its re-read right before the merge),
        # after; once who the token is (only its own sticky comments are edited); and the
        # stop switch's read of the delivery:stop label before ship (before land it uses
        # what the probe `look` read in its one request)
        assert github.count("POST", "/api/graphql") == 8
        # git (clone, fetch, push) went over HTTP, authenticated by the header
        git_requests = [r for r in github.requests if not r.path.startswith("/api/")]
        assert any(r.method == "POST" and r.path.endswith("git-receive-pack")
                   for r in git_requests)
        assert all(r.authorized for r in git_requests)
        pull = github.pull("octo/web", 1)
        assert "<!-- delivery:begin" in pull.body
        token = github.token
        for file in (tmp_path / "cache").rglob("*"):
            if file.is_file():
                assert token.encode() not in file.read_bytes(), file


KEEP = flow("""
add [type=worktree_add]
person [shape=parallelogram, script="printf 'TOKEN=mine\\n' > web/.env"]
remove [type=worktree_remove]
start -> add -> person -> remove -> exit
""", graph='folders="web"', name="K")


def test_worktree_remove_on_github_keeps_a_worktree_holding_an_ignored_env_file(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        github.create_repo("octo/web", files={"README.md": "# web\n", ".gitignore": ".env\n"})
        workspace = tmp_path / "ws"
        workspace.mkdir()
        request = RunRequest(workflow=write_flow(tmp_path, KEEP), workspace=workspace,
                             repos={"web": "octo/web"}, branch="delivery/keep")
        world = World(agent=ReplayBackend({}), clock=FakeClock(),
                      git_cache=tmp_path / "cache", environ={**os.environ, **github.env()})
        ran = start_run(request, world)
    assert ran.status == "succeeded", ran.failure_reason
    assert ran.context["worktree.clean"] is False
    assert ran.context["worktree.status"] == "web: kept: git-ignored files: .env"
    assert (workspace / "web" / ".env").read_text() == "TOKEN=mine\n"


def test_delivery_probe_reads_github_prs_by_number_and_branch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGitHub() as github:
        for name in ("web", "api"):
            github.create_repo(f"octo/{name}", files={"README.md": "# x\n"})
            github.push_files(f"octo/{name}", "feature", {"new.txt": name})
            github.open_pull(f"octo/{name}", "feature")
        github.add_review("octo/api", 1, "alice", "CHANGES_REQUESTED", "rename it")
        for key, value in github.env().items():
            monkeypatch.setenv(key, value)
        code, out, err = cli("probe", "--repo", "web=octo/web#1",
                             "--repo", "api=octo/api@feature", "--json")
        assert code == 0, err
        facts = json.loads(out)
        assert facts["web.pr.state"] == "WAITING" and facts["web.pr.number"] == 1
        assert facts["api.pr.state"] == "CHANGES_REQUIRED"
        assert facts["pr.state"] == "CHANGES_REQUIRED"
        assert github.token not in out + err
