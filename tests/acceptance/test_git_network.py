"""git's network calls during a delivery (SPEC §14): they go to the folder's repository as
delivery knows it whatever git configuration the agent wrote into its worktree, carry the
token to that host only, and end within the stage's timeout when the server stalls."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow

from delivery.agents.replay import ReplayBackend
from delivery.engine.handlers.base import StageResult
from delivery.engine.run_inputs import run_branch
from delivery.engine.run_loop import Progress
from delivery.engine.runner import RunOutcome, RunRequest, World, start_run
from delivery.forges.github import GitHubForge
from delivery.lang.model import Node
from delivery.testing.github import FakeGitHub, gitops
from delivery.testing.github.faults import Fault
from probes.github import RetryBudget

TICKET = "https://tracker.example/browse/T-8"
BRANCH = run_branch({"ticket": TICKET}, "unused")


def flow(agent_script: str, publish: str = "") -> str:
    """worktree_add, a script standing for the agent (run in the folder), publish."""
    script = agent_script.replace("\\", "\\\\").replace('"', '\\"')
    return f"""
digraph F {{
  graph [goal="Say hello", inputs="ticket"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  agent [type=script, folder="api", script="{script}"]
  ship [type=publish{publish}]
  start -> add -> agent -> ship -> exit
}}
"""


def forge_of(github: FakeGitHub) -> GitHubForge:
    return GitHubForge(github.token, api_url=github.api_url, graphql_url=github.graphql_url,
                       server_url=github.server_url, sleep=lambda _: None,
                       budget=RetryBudget(attempts=2, wait_seconds=1))


class After(Progress):
    """Acts as a person would once the named stage finished."""

    def __init__(self, node_id: str, act: Callable[[], None]) -> None:
        self.node_id, self.act = node_id, act

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        if node.id == self.node_id:
            self.act()


class Timed(Progress):
    """The wall-clock seconds each stage took (the run's own clock is a fake one)."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.took: dict[str, float] = {}

    def stage_started(self, node: Node, attempt: int) -> None:
        self.started[node.id] = time.monotonic()

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        self.took[node.id] = time.monotonic() - self.started[node.id]


def run(tmp_path: Path, github: FakeGitHub, dot: str,
        observer: Progress | None = None) -> RunOutcome:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    request = RunRequest(workflow=write_flow(tmp_path, dot), inputs={"ticket": TICKET},
                         workspace=workspace, repos={"api": "octo/api"}, forge="github")
    world = World(agent=ReplayBackend({}), clock=FakeClock(), forge=forge_of(github),
                  git_cache=tmp_path / "cache", environ=dict(os.environ))
    return start_run(request, world, observer=observer)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub() as fake:
        fake.create_repo("octo/api", files={"app.txt": "api\n"})
        yield fake


@pytest.fixture
def elsewhere(github: FakeGitHub) -> Iterator[FakeGitHub]:
    """Another host that would accept the run's token (the worst case: a look-alike)."""
    with FakeGitHub(token=github.token) as fake:
        fake.create_repo("octo/api", files={"app.txt": "api\n"})
        yield fake


def assert_pushed_home_only(github: FakeGitHub, elsewhere: FakeGitHub) -> None:
    assert gitops.ref_sha(github.repository("octo/api").path, BRANCH)
    assert gitops.ref_sha(elsewhere.repository("octo/api").path, BRANCH) is None
    assert not any(request.authorized for request in elsewhere.requests), \
        "the token reached another host"


def test_a_remote_url_the_agent_set_does_not_redirect_the_push(
        tmp_path: Path, github: FakeGitHub, elsewhere: FakeGitHub) -> None:
    ran = run(tmp_path, github, flow(
        f"echo hi > hello.txt && git remote set-url origin {elsewhere.server_url}/octo/api.git"))
    assert ran.status == "succeeded", ran.failure_reason
    assert_pushed_home_only(github, elsewhere)


def test_a_pushurl_the_agent_set_does_not_redirect_the_push(
        tmp_path: Path, github: FakeGitHub, elsewhere: FakeGitHub) -> None:
    ran = run(tmp_path, github, flow(
        f"echo hi > hello.txt && git config remote.origin.pushurl "
        f"{elsewhere.server_url}/octo/api.git"))
    assert ran.status == "succeeded", ran.failure_reason
    assert_pushed_home_only(github, elsewhere)


def test_an_insteadof_the_agent_set_does_not_redirect_fetch_or_push(
        tmp_path: Path, github: FakeGitHub, elsewhere: FakeGitHub) -> None:
    ran = run(tmp_path, github, flow(
        f"echo hi > hello.txt && git config url.{elsewhere.server_url}/.insteadOf "
        f"{github.server_url}/ && git config url.{elsewhere.server_url}/.pushInsteadOf "
        f"{github.server_url}/"))
    assert ran.status == "succeeded", ran.failure_reason
    assert_pushed_home_only(github, elsewhere)


def test_a_stalled_push_fails_publish_within_the_stages_timeout(
        tmp_path: Path, github: FakeGitHub) -> None:
    # the server takes the push and then says nothing for far longer than the timeout
    github.inject(Fault("slow", method="POST", path="/octo/api.git/git-receive-pack",
                        seconds=4))
    timed = Timed()
    ran = run(tmp_path, github, flow("echo hi > hello.txt", publish=', timeout="1s"'), timed)
    took = timed.took["ship"]
    assert ran.status == "failed" and ran.path[-1] == "ship"
    assert "stalled" in ran.failure_reason and "1 s" in ran.failure_reason, \
        ran.failure_reason
    assert f"{github.server_url}/octo/api.git" in ran.failure_reason
    assert took < 4, f"the publish took {took:.1f} s"


def test_a_push_that_stops_moving_bytes_fails_publish_after_the_low_speed_time(
        tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    # no stage timeout: the low-speed limit alone ends the call (shortened from 60 s)
    monkeypatch.setenv("GIT_HTTP_LOW_SPEED_TIME", "1")
    github.inject(Fault("slow", method="POST", path="/octo/api.git/git-receive-pack",
                        seconds=4))
    timed = Timed()
    ran = run(tmp_path, github, flow("echo hi > hello.txt"), timed)
    assert ran.status == "failed" and ran.path[-1] == "ship"
    assert f"git push to {github.server_url}/octo/api.git stalled: no progress for 1 s" \
        in ran.failure_reason, ran.failure_reason
    assert timed.took["ship"] < 4, f"the publish took {timed.took['ship']:.1f} s"


def test_a_stale_index_lock_fails_publish_naming_the_whole_path_and_the_fix(
        tmp_path: Path, github: FakeGitHub) -> None:
    # a git process that crashed in the worktree (the agent's) left its lock behind
    ran = run(tmp_path, github, flow(
        'echo hi > hello.txt && touch "$(git rev-parse --git-dir)/index.lock"'))
    [lock] = (tmp_path / "cache").glob("repos/*/worktrees/*/index.lock")
    assert ran.status == "failed" and ran.path[-1] == "ship"
    assert f"({lock} exists)" in ran.failure_reason, ran.failure_reason
    assert f"remove {lock}, then resume" in ran.failure_reason
    assert "\n" not in ran.failure_reason


def test_a_revoked_token_fails_publish_naming_the_token(
        tmp_path: Path, github: FakeGitHub) -> None:
    def revoke() -> None:
        github.token = "a-token-issued-after-the-revocation"

    ran = run(tmp_path, github, flow("echo hi > hello.txt"), After("agent", revoke))
    assert ran.status == "failed" and ran.path[-1] == "ship"
    assert f"{github.server_url} refused the token (GITHUB_TOKEN): it may be revoked or " \
        "expired" in ran.failure_reason, ran.failure_reason
    assert "Username" not in ran.failure_reason
