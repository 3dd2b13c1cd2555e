"""GitHub's limits on the probe's reads pause the run, they do not fail the probe (SPEC
§7.1 "GitHub's limits are a budget, not an error"; issue 37 item 2): the probe's GraphQL
request answered with the primary limit spent (GraphQL's `RATE_LIMITED` with
`x-ratelimit-reset`), a secondary limit's long `Retry-After`, or `RATE_LIMITED` answered
past the retry budget raises RateLimitPause with the time the run may go on (the merge's
re-read of a PR is the same read), and nothing is retried past the patience."""

from __future__ import annotations

import pytest
from github_helpers import ManualClock, open_pr

from delivery.errors import PauseReason
from delivery.forges.github import GitHubForge
from delivery.forges.pacing import Pacer
from delivery.forges.write_budget import RateLimitPause
from delivery.testing.github import FakeGitHub, faults
from probes.evidence import PrQuery, PullRequestSnapshot
from probes.github import RetryBudget

RATE_LIMITED = [{"type": "RATE_LIMITED", "message": "API rate limit exceeded for user ID 1."}]


def forge_on(fake: FakeGitHub, clock: ManualClock) -> GitHubForge:
    return GitHubForge.from_environment(
        fake.env(), sleep=clock.sleep, clock=clock,
        budget=RetryBudget(attempts=4, wait_seconds=300),
        pacer=Pacer(clock=clock, sleep=clock.sleep, write_spacing=0))


@pytest.fixture
def queries(fake: FakeGitHub) -> list[PrQuery]:
    fake.create_repo("octo/web")
    fake.create_repo("octo/api")
    return [PrQuery("web", "octo/web", number=open_pr(fake, "octo/web")),
            PrQuery("api", "octo/api", number=open_pr(fake, "octo/api"))]


def test_the_spent_primary_limit_pauses_the_probe_until_the_reset(
        fake: FakeGitHub, clock: ManualClock, queries: list[PrQuery]) -> None:
    limits = fake.enforce_primary_limits(graphql_per_hour=0)
    opened = clock()
    with pytest.raises(RateLimitPause) as paused:
        forge_on(fake, clock).pull_requests(queries)
    assert paused.value.reason is PauseReason.RATE_LIMIT
    assert paused.value.until == pytest.approx(opened + 3600, abs=2)
    assert "while reading the PRs" in str(paused.value)
    assert limits.refused == 1 and clock.sleeps == []  # no retry past the patience


def test_a_long_retry_after_on_the_probe_pauses_it(
        fake: FakeGitHub, clock: ManualClock, queries: list[PrQuery]) -> None:
    fake.inject(faults.secondary_rate_limit(900, path="/api/graphql"))
    asked = clock()
    with pytest.raises(RateLimitPause) as paused:
        forge_on(fake, clock).pull_requests(queries)
    assert paused.value.until == pytest.approx(asked + 900)
    assert "secondary rate limit" in str(paused.value)


def test_rate_limited_answered_past_the_retry_budget_pauses_instead_of_failing_folders(
        fake: FakeGitHub, clock: ManualClock, queries: list[PrQuery]) -> None:
    fake.inject(faults.graphql_errors(RATE_LIMITED, times=10))
    with pytest.raises(RateLimitPause) as paused:
        forge_on(fake, clock).pull_requests(queries)
    assert "RATE_LIMITED" in str(paused.value)
    assert fake.count("POST", "/api/graphql") == 4  # the budget's attempts, then the pause


def test_a_short_limit_is_waited_out_and_the_probe_answers(
        fake: FakeGitHub, clock: ManualClock, queries: list[PrQuery]) -> None:
    fake.inject(faults.secondary_rate_limit(30, path="/api/graphql"))
    seen = forge_on(fake, clock).pull_requests(queries)
    assert all(isinstance(seen[q.folder], PullRequestSnapshot) for q in queries)
    assert clock.sleeps == [30]


def test_the_probe_that_also_reads_the_ticket_pauses_on_the_limit_too(
        fake: FakeGitHub, clock: ManualClock, queries: list[PrQuery]) -> None:
    forge = forge_on(fake, clock)
    fake.enforce_primary_limits(graphql_per_hour=1)
    forge.pull_requests(queries[:1])  # the hour's one query
    with pytest.raises(RateLimitPause):
        forge.observe(queries, ("octo/web", 9))
