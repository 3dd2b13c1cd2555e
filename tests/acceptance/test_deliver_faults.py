"""Bad input and faults of a delivery (fake GitHub and the local forge): each is a clear
stage failure with the reason in `failure_reason` — or a refusal before anything is
written — never a traceback; and nothing is left half done that a later run on the same
ticket cannot finish (it finds the pushed branch and the PR instead of duplicating them)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow
from git_helpers import git, make_remote

from delivery.agents.replay import ReplayBackend
from delivery.cli.demo import demo_agent, make_samples
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_inputs import ticket_slug
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.errors import RunRefused
from delivery.forges.github import GitHubForge
from delivery.lang.model import Node
from delivery.testing.github import FakeGitHub, faults, gitops
from delivery.testing.two_repos import request as deliver_request
from probes.github import RetryBudget

TICKET = "https://tracker.example/browse/T-5"
BRANCH = f"delivery/{ticket_slug(TICKET)}"  # the branch the ticket names
FLOW = """
digraph F {
  graph [goal="Say hello", inputs="ticket"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [type=script, script="printf 'hello\\\\n' > api/hello.txt"]
  ship [type=publish]
  look [type=probe, probe="pr"]
  land [type=merge]
  after [type=probe, probe="pr"]
  start -> add -> change -> ship -> look -> land -> after -> exit
}
"""


class After(Progress):
    """Acts as a person would after the named stage finished (the first time)."""

    def __init__(self, node_id: str, act: Callable[[], None]) -> None:
        self.node_id, self.act, self.done = node_id, act, False

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        if node.id == self.node_id and not self.done:
            self.done = True
            self.act()


def fast_forge(github: FakeGitHub) -> GitHubForge:
    return GitHubForge(github.token, api_url=github.api_url, graphql_url=github.graphql_url,
                       server_url=github.server_url, sleep=lambda _: None,
                       budget=RetryBudget(attempts=3, wait_seconds=5))


def run(tmp_path: Path, repos: dict[str, str], *, forge: GitHubForge | None = None,
        environ: dict[str, str] | None = None, progress: Progress | None = None,
        kind: str = "github") -> RunOutcome:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    request = RunRequest(workflow=write_flow(tmp_path, FLOW), inputs={"ticket": TICKET},
                         workspace=workspace, repos=repos, forge=kind)
    world = World(agent=ReplayBackend({}), clock=FakeClock(), forge=forge,
                  git_cache=tmp_path / "cache",
                  environ=environ if environ is not None else dict(os.environ))
    return start_run(request, world, observer=progress)


@pytest.fixture
def github() -> FakeGitHub:
    with FakeGitHub() as fake:
        fake.create_repo("octo/api", files={"app.txt": "api\n"})
        yield fake


def test_an_unknown_repository_is_refused_by_preflight_naming_it(
        tmp_path: Path, github: FakeGitHub) -> None:
    with pytest.raises(RunRefused, match=r"preflight: api: read: octo/nope cannot be read"):
        run(tmp_path, {"api": "octo/nope"}, forge=fast_forge(github))
    assert not (tmp_path / "ws" / ".delivery").exists()


def test_without_a_token_the_run_is_refused_before_anything_is_written(
        tmp_path: Path, github: FakeGitHub) -> None:
    environ = {k: v for k, v in {**os.environ, **github.env()}.items() if k != "GITHUB_TOKEN"}
    with pytest.raises(RunRefused, match="GITHUB_TOKEN"):
        run(tmp_path, {"api": "octo/api"}, environ=environ)
    assert not (tmp_path / "ws" / ".delivery").exists()


def protect(git_dir: Path, branch_prefix: str) -> Path:
    """A pre-receive hook refusing pushes to branches under `branch_prefix`."""
    hook = git_dir / "hooks" / "pre-receive"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\nwhile read old new ref; do case $ref in "
                    f"refs/heads/{branch_prefix}*) echo \"protected branch: $ref\" >&2; "
                    "exit 1;; esac; done\n")
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    return hook


def test_a_push_to_a_protected_branch_fails_publish_and_a_rerun_finishes(
        tmp_path: Path, github: FakeGitHub) -> None:
    hook = protect(github.repository("octo/api").path, "delivery/")
    ran = run(tmp_path, {"api": "octo/api"}, forge=fast_forge(github))
    assert ran.status == "failed" and ran.path[-1] == "ship"
    assert "folder 'api'" in ran.failure_reason and "protected branch" in ran.failure_reason
    assert not github.repository("octo/api").pulls
    hook.unlink()  # a person lifts the protection; a new run on the ticket goes on
    again = run(tmp_path, {"api": "octo/api"}, forge=fast_forge(github))
    assert again.status == "succeeded", again.failure_reason
    assert len(github.repository("octo/api").pulls) == 1
    assert github.pull("octo/api", 1).merged


def test_commits_someone_pushed_to_the_branch_are_kept_under_ours_before_the_push(
        tmp_path: Path, github: FakeGitHub) -> None:
    def suggest() -> None:  # a reviewer's suggested commit lands on the run's branch
        github.push_files("octo/api", BRANCH, {"suggested.txt": "thanks\n"}, "suggestion")

    ran = run(tmp_path, {"api": "octo/api"}, forge=fast_forge(github),
              progress=After("change", suggest))
    assert ran.status == "succeeded", ran.failure_reason
    main = github.repository("octo/api").path
    assert gitops.read_file(main, "main", "suggested.txt") == "thanks\n"
    assert gitops.read_file(main, "main", "hello.txt") == "hello\n"


def test_commits_that_conflict_with_ours_fail_publish_and_keep_our_commit(
        tmp_path: Path, github: FakeGitHub) -> None:
    def clash() -> None:
        github.push_files("octo/api", BRANCH, {"hello.txt": "bonjour\n"}, "theirs")

    ran = run(tmp_path, {"api": "octo/api"}, forge=fast_forge(github),
              progress=After("change", clash))
    assert ran.status == "failed" and ran.path[-1] == "ship"
    assert "conflict with the run's new work" in ran.failure_reason
    assert "hello.txt" in ran.failure_reason
    worktree = tmp_path / "ws" / "api"
    assert git(worktree, "show", "HEAD:hello.txt") == "hello"  # our commit is kept
    assert git(worktree, "status", "--porcelain") == ""  # the replay was undone


def test_a_refused_merge_fails_the_stage_with_githubs_reason(
        tmp_path: Path, github: FakeGitHub) -> None:
    github.inject(faults.server_error(405, method="PUT", path="/api/v3/repos/octo/api/pulls/"))
    ran = run(tmp_path, {"api": "octo/api"}, forge=fast_forge(github))
    assert ran.status == "failed" and ran.path[-1] == "land"
    assert "folder 'api'" in ran.failure_reason and "PR #1" in ran.failure_reason
    assert not github.pull("octo/api", 1).merged
    again = run(tmp_path, {"api": "octo/api"}, forge=fast_forge(github))
    assert again.status == "succeeded", again.failure_reason
    assert len(github.repository("octo/api").pulls) == 1 and github.pull("octo/api", 1).merged


def test_a_create_whose_answer_was_lost_opens_one_pr(tmp_path: Path,
                                                     github: FakeGitHub) -> None:
    github.inject(faults.drop_after_apply(method="POST", path="/api/v3/repos/octo/api/pulls"))
    ran = run(tmp_path, {"api": "octo/api"}, forge=fast_forge(github))
    assert ran.status == "succeeded", ran.failure_reason
    assert len(github.repository("octo/api").pulls) == 1


def test_network_errors_mid_publish_fail_the_stage_and_a_rerun_finishes(
        tmp_path: Path, github: FakeGitHub) -> None:
    # the push went through; every PR lookup then fails
    github.inject(faults.server_error(502, method="GET", path="/api/v3/repos/octo/api/pulls",
                                      times=10))
    ran = run(tmp_path, {"api": "octo/api"}, forge=fast_forge(github))
    assert ran.status == "failed" and ran.path[-1] == "ship"
    assert "folder 'api'" in ran.failure_reason and "502" in ran.failure_reason
    assert gitops.ref_sha(github.repository("octo/api").path, BRANCH)  # pushed
    github.faults.clear()
    again = run(tmp_path, {"api": "octo/api"}, forge=fast_forge(github))
    assert again.status == "succeeded", again.failure_reason
    assert len(github.repository("octo/api").pulls) == 1


# -- the local forge -----------------------------------------------------------------------
def test_a_push_rejected_by_the_local_remote_fails_publish_and_a_rerun_finishes(
        tmp_path: Path) -> None:
    root = tmp_path / "remotes"
    root.mkdir()
    remote = make_remote(root, "api", {"app.txt": "api\n"})
    hook = protect(remote, "delivery/")
    ran = run(tmp_path, {"api": str(remote)}, kind="local")
    assert ran.status == "failed" and ran.path[-1] == "ship"
    assert "protected branch" in ran.failure_reason
    hook.unlink()
    again = run(tmp_path, {"api": str(remote)}, kind="local")
    assert again.status == "succeeded", again.failure_reason
    pulls = json.loads((remote / "delivery" / "pulls.json").read_text())["pulls"]
    assert [p["state"] for p in pulls] == ["merged"]


def test_a_pr_closed_by_a_person_fails_the_delivery_and_names_it(tmp_path: Path) -> None:
    from delivery.forges.local import LocalForge

    remotes = make_samples(tmp_path)
    request = deliver_request(tmp_path, {k: str(v) for k, v in remotes.items()},
                              forge="local")

    def close_web() -> None:
        LocalForge().close_pull_request(str(remotes["web"]), 1)

    world = World(agent=demo_agent(), git_cache=tmp_path / "cache")
    ran = start_run(request, world, observer=After("publish", close_web))
    assert ran.status == "failed" and ran.path[-1] == "closed"
    assert "closed without being merged" in ran.failure_reason
    assert f"web CLOSED {remotes['web']}#1" in ran.failure_reason
