"""Pacing of one token's writes (delivery.forges.pacing) against the fake GitHub with its
secondary limits switched on: content-creating requests one at a time and at least a
second apart, rate-limit answers waited out and retried without a duplicate write, first
pushes of a large set spread out. Time is the fake's ManualClock: nothing waits."""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path

import httpx
import pytest
from github_helpers import ManualClock, open_pr

from delivery.errors import RunRefused
from delivery.forges.github import GitHubForge
from delivery.forges.pacing import Pacer
from delivery.testing.github import FakeGitHub, faults
from probes.github import RetryBudget

BRANCH = "delivery/T-1"


@pytest.fixture
def forge(fake: FakeGitHub, clock: ManualClock) -> GitHubForge:
    fake.create_repo("octo/web", files={"app.py": "v1\n"})
    fake.push_files("octo/web", BRANCH, {"app.py": "v2\n"})
    return GitHubForge.from_environment(fake.env(), sleep=clock.sleep, clock=clock,
                                        budget=RetryBudget(attempts=4, wait_seconds=600))


def opened(forge: GitHubForge) -> int:
    return forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                             title="T-1", body="body").number


def write_times(fake: FakeGitHub) -> list[float]:
    return [r.at for r in fake.write_requests()]


def test_content_creating_requests_are_at_least_a_second_apart(
        forge: GitHubForge, fake: FakeGitHub) -> None:
    number = opened(forge)
    sha = fake.state.head_sha(fake.repository("octo/web"), fake.pull("octo/web", number))
    for n in range(4):
        forge.upsert_comment("octo/web", number, "<!-- m -->", f"<!-- m --> {n}")
        forge.set_commit_status("octo/web", sha, context="ci", state="pending",
                                description=str(n))
    times = write_times(fake)
    assert len(times) == 9  # the PR, one comment created, 3 edits, 4 statuses
    assert min(b - a for a, b in pairwise(times)) >= 1.0


def test_reads_are_not_paced(forge: GitHubForge, fake: FakeGitHub,
                             clock: ManualClock) -> None:
    number = opened(forge)
    before = clock.now
    for _ in range(5):
        forge.pull_request_body("octo/web", number)
    assert clock.now == before


def test_secondary_limit_answers_are_waited_out_and_no_write_is_doubled(
        forge: GitHubForge, fake: FakeGitHub) -> None:
    limits = fake.enforce_secondary_limits(per_minute=3)
    number = opened(forge)
    for n in range(3):  # one create and two edits: the fourth write of the minute is refused
        forge.upsert_comment("octo/web", number, "<!-- m -->", f"<!-- m --> {n}")
    forge.upsert_comment("octo/web", 1, "<!-- other -->", "<!-- other --> new")
    comments = [c.body for c in fake.repository("octo/web").comments.values()]
    assert limits.refused >= 1
    assert sorted(comments) == ["<!-- m --> 2", "<!-- other --> new"]
    assert fake.write_requests()[-1].status == 201  # the refused create, made once more


def test_a_rate_limit_answer_spaces_the_following_writes_further(
        forge: GitHubForge, fake: FakeGitHub) -> None:
    number = opened(forge)
    fake.inject(faults.secondary_rate_limit(method="POST", path="/api/v3/repos/octo/web/issues",
                                            retry_after=5))
    forge.upsert_comment("octo/web", number, "<!-- m -->", "<!-- m --> 1")
    assert forge.pacer.write_spacing == 2.0
    forge.upsert_comment("octo/web", number, "<!-- m -->", "<!-- m --> 2")
    times = write_times(fake)
    assert times[-1] - times[-2] >= 2.0


def test_first_pushes_of_a_large_set_are_spread_after_a_burst() -> None:
    clock = ManualClock()
    pacer = Pacer(clock=clock, sleep=clock.sleep)
    starts = []
    for _ in range(8):
        pacer.first_push()
        starts.append(clock.now - 1_800_000_000.0)
    assert starts == [0, 0, 0, 0, 0, 2.0, 4.0, 6.0]


def test_the_fake_refuses_writes_past_its_secondary_limit_with_retry_after(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", files={"app.py": "v1\n"})
    number = open_pr(fake, "octo/web")
    fake.enforce_secondary_limits(per_minute=2)

    headers = {"Authorization": f"token {fake.token}"}
    url = f"{fake.api_url}/repos/octo/web/issues/{number}/comments"
    answers = [httpx.post(url, json={"body": "x"}, headers=headers) for _ in range(3)]
    assert [a.status_code for a in answers] == [201, 201, 403]
    assert "secondary rate limit" in answers[2].json()["message"]
    assert int(answers[2].headers["Retry-After"]) > 0
    clock.sleep(61)  # the minute has passed: admitted again
    assert httpx.post(url, json={"body": "x"}, headers=headers).status_code == 201


def test_a_runs_writes_are_paced_on_the_runs_clock(fake: FakeGitHub, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from change_set_helpers import REPOS, publish_flow
    from engine_helpers import FakeClock, write_flow

    from delivery.agents.replay import ReplayBackend
    from delivery.engine.runner import RunRequest, World, start_run

    monkeypatch.setenv("DELIVERY_WRITE_SPACING", "1")  # as in production
    for repository in REPOS.values():
        fake.create_repo(repository, files={"app.py": "print(0)\n"})
    run_clock = FakeClock()
    request = RunRequest(workflow=write_flow(tmp_path, publish_flow(), "flow.dot"),
                         inputs={"ticket": "T-7"}, workspace=tmp_path, repos=dict(REPOS))
    world = World(agent=ReplayBackend({}), clock=run_clock, git_cache=tmp_path / "cache",
                  environ={**os.environ, **fake.env()})
    assert start_run(request, world).status == "succeeded"
    api_writes = [r for r in fake.write_requests() if r.path.startswith("/api/")]
    # each write after the first waited its second on the run's (fake) clock
    assert len(api_writes) >= 4
    assert run_clock.sleeps.count(1.0) == len(api_writes) - 1


def test_the_spacing_variable_is_checked() -> None:
    assert Pacer.from_environment({"DELIVERY_WRITE_SPACING": "0"}).write_spacing == 0
    assert Pacer.from_environment({}).write_spacing == 1.0
    with pytest.raises(RunRefused, match="DELIVERY_WRITE_SPACING: is 'soon'"):
        Pacer.from_environment({"DELIVERY_WRITE_SPACING": "soon"})


def test_a_merge_with_a_method_the_repository_refuses_is_refused_with_githubs_reason(
        forge: GitHubForge, fake: FakeGitHub) -> None:
    number = opened(forge)
    fake.allow_merge_methods("octo/web", "squash")
    sha = fake.state.head_sha(fake.repository("octo/web"), fake.pull("octo/web", number))
    refused = forge.merge_pull_request("octo/web", number, expected_head_sha=sha)
    assert (refused.outcome, refused.reason) == (
        "refused", "HTTP 405: Merge commits are not allowed on this repository.")
    merged = forge.merge_pull_request("octo/web", number, expected_head_sha=sha,
                                      method="squash")
    assert merged.outcome == "merged" and fake.pull("octo/web", number).merged
