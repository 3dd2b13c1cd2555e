"""The GitHub probe under faults: 5xx, secondary and primary rate limits, GraphQL errors,
slow answers and dropped connections are retried within a budget; the token is a header."""

from __future__ import annotations

import logging

import pytest
from github_helpers import ManualClock, open_pr, probe_for

from delivery.testing.github import FakeGitHub, faults
from probes.evidence import ProbeFailure, PrQuery, PullRequestSnapshot
from probes.github import (
    GitHubPullRequestSource,
    ProbeRateLimited,
    RetryBudget,
    graphql_url_from_environment,
)


@pytest.fixture
def number(fake: FakeGitHub) -> int:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    fake.clear_requests()
    return number


def probe_once(fake: FakeGitHub, clock: ManualClock, number: int,
               **options: object) -> object:
    return probe_for(fake, clock, **options).pull_requests(
        [PrQuery("web", "octo/web", number=number)])["web"]


def test_server_errors_are_retried_with_backoff(fake: FakeGitHub, clock: ManualClock,
                                                number: int) -> None:
    fake.inject(faults.server_error(502, times=2))
    assert isinstance(probe_once(fake, clock, number), PullRequestSnapshot)
    assert fake.count("POST", "/api/graphql") == 3
    assert clock.sleeps == [1.0, 2.0]


def test_secondary_rate_limit_honours_retry_after(fake: FakeGitHub, clock: ManualClock,
                                                  number: int) -> None:
    fake.inject(faults.secondary_rate_limit(retry_after=17))
    assert isinstance(probe_once(fake, clock, number), PullRequestSnapshot)
    assert clock.sleeps == [17.0]


def test_secondary_rate_limit_without_retry_after_waits_a_minute(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    fake.inject(faults.secondary_rate_limit())
    assert isinstance(probe_once(fake, clock, number), PullRequestSnapshot)
    assert clock.sleeps == [60.0]


def test_primary_rate_limit_waits_until_the_reset(fake: FakeGitHub, clock: ManualClock,
                                                  number: int) -> None:
    fake.inject(faults.primary_rate_limit(reset_in=42))
    assert isinstance(probe_once(fake, clock, number), PullRequestSnapshot)
    assert clock.sleeps == [43.0]  # until x-ratelimit-reset, plus a second


def test_graphql_rate_limited_error_is_retried(fake: FakeGitHub, clock: ManualClock,
                                               number: int) -> None:
    fake.inject(faults.graphql_errors([{"type": "RATE_LIMITED",
                                        "message": "API rate limit exceeded"}]))
    assert isinstance(probe_once(fake, clock, number), PullRequestSnapshot)
    assert fake.count("POST", "/api/graphql") == 2


def test_graphql_error_without_data_fails_every_folder_with_the_message(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    fake.inject(faults.graphql_errors([{"message": "Field 'x' doesn't exist"}]))
    seen = probe_once(fake, clock, number)
    assert isinstance(seen, ProbeFailure) and "Field 'x' doesn't exist" in seen.reason
    assert fake.count("POST", "/api/graphql") == 1  # a rejected query is not retried


def test_slow_answer_past_the_timeout_is_retried(fake: FakeGitHub, clock: ManualClock,
                                                 number: int) -> None:
    fake.inject(faults.slow(1.0))
    assert isinstance(probe_once(fake, clock, number, timeout=0.3), PullRequestSnapshot)
    assert fake.count("POST", "/api/graphql") == 2


def test_dropped_connection_is_retried_since_a_query_only_reads(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    fake.inject(faults.drop_after_apply(path="/api/graphql"))
    assert isinstance(probe_once(fake, clock, number), PullRequestSnapshot)
    assert fake.count("POST", "/api/graphql") == 2


def test_retries_stop_at_the_budget_and_fail_the_folders(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    fake.inject(faults.server_error(503, times=10))
    seen = probe_once(fake, clock, number, budget=RetryBudget(attempts=3))
    assert isinstance(seen, ProbeFailure) and "HTTP 503" in seen.reason
    assert fake.count("POST", "/api/graphql") == 3


def test_a_wait_longer_than_the_budget_is_not_slept_and_fails_no_folder(
        fake: FakeGitHub, clock: ManualClock, number: int) -> None:
    # the limit is the run's to wait out (a pause, SPEC §7.1), not a folder's failure
    fake.inject(faults.primary_rate_limit(reset_in=3600))
    with pytest.raises(ProbeRateLimited) as limited:
        probe_once(fake, clock, number, budget=RetryBudget(wait_seconds=600))
    assert "rate limited" in limited.value.reason
    assert limited.value.wait == pytest.approx(3601, abs=1)
    assert clock.sleeps == []


def test_the_token_travels_as_a_header_and_is_never_shown(fake: FakeGitHub, clock: ManualClock,
                                                          number: int) -> None:
    source = probe_for(fake, clock)
    assert isinstance(source.pull_requests([PrQuery("w", "octo/web", number=number)])["w"],
                      PullRequestSnapshot)
    assert fake.requests[-1].authorized
    assert fake.token not in repr(source)
    wrong = GitHubPullRequestSource("not-the-token", graphql_url=fake.graphql_url,
                                    sleep=clock.sleep, clock=clock)
    seen = wrong.pull_requests([PrQuery("w", "octo/web", number=number)])["w"]
    assert isinstance(seen, ProbeFailure) and "401" in seen.reason
    assert "not-the-token" not in seen.reason


def test_graphql_url_comes_from_the_actions_environment() -> None:
    assert graphql_url_from_environment({}) == "https://api.github.com/graphql"
    assert graphql_url_from_environment(
        {"GITHUB_API_URL": "https://ghe.test/api/v3"}) == "https://ghe.test/api/graphql"
    assert graphql_url_from_environment(
        {"GITHUB_GRAPHQL_URL": "http://127.0.0.1:1/api/graphql",
         "GITHUB_API_URL": "https://x"}) == "http://127.0.0.1:1/api/graphql"


def test_the_token_never_reaches_the_logs(fake: FakeGitHub, clock: ManualClock, number: int,
                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake.inject(faults.server_error(502))
    assert isinstance(probe_once(fake, clock, number), PullRequestSnapshot)
    assert caplog.records and fake.token not in caplog.text
