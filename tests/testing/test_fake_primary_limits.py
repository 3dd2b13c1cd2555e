"""The fake GitHub's primary limit (issue 37 item 2: "primary limits read from the
responses"), switched on by a test: every API answer says what is left of the token's
hour (`x-ratelimit-*`); past it a REST read is answered 403 and a GraphQL query HTTP 200
with a `RATE_LIMITED` error, both saying when the pool resets; REST and GraphQL are
separate pools, and the window resets an hour after it opened (the fake's clock)."""

from __future__ import annotations

import httpx
from github_helpers import open_pr

from delivery.testing.github import FakeGitHub, ManualClock

QUERY = {"query": "query { viewer { login } }"}


def rest_read(fake: FakeGitHub) -> httpx.Response:
    return httpx.get(f"{fake.api_url}/repos/octo/web",
                     headers={"Authorization": f"token {fake.token}"})


def graphql_read(fake: FakeGitHub) -> httpx.Response:
    return httpx.post(fake.graphql_url, json=QUERY,
                      headers={"Authorization": f"bearer {fake.token}"})


def test_every_answer_says_what_is_left_of_the_hour(fake: FakeGitHub,
                                                    clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    fake.enforce_primary_limits(per_hour=10)
    opened = int(clock())
    first, second = rest_read(fake), rest_read(fake)
    assert [first.headers["x-ratelimit-remaining"], second.headers["x-ratelimit-remaining"]] \
        == ["9", "8"]
    assert second.headers["x-ratelimit-reset"] == str(opened + 3600)
    assert second.headers["x-ratelimit-resource"] == "core"


def test_a_rest_read_past_the_limit_is_refused_403_until_the_reset(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    limits = fake.enforce_primary_limits(per_hour=2)
    opened = int(clock())
    assert [rest_read(fake).status_code for _ in range(3)] == [200, 200, 403]
    refused = rest_read(fake)
    assert refused.status_code == 403 and "API rate limit exceeded" in refused.json()["message"]
    assert (refused.headers["x-ratelimit-remaining"], refused.headers["x-ratelimit-reset"]) \
        == ("0", str(opened + 3600))
    assert limits.refused == 2
    clock.advance(3600)
    assert rest_read(fake).status_code == 200


def test_a_graphql_query_past_the_limit_gets_githubs_rate_limited_error_with_http_200(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    open_pr(fake, "octo/web")
    fake.enforce_primary_limits(per_hour=1, graphql_per_hour=1)
    assert graphql_read(fake).json()["data"]["viewer"]["login"]
    refused = graphql_read(fake)
    assert refused.status_code == 200
    assert [e["type"] for e in refused.json()["errors"]] == ["RATE_LIMITED"]
    assert refused.headers["x-ratelimit-remaining"] == "0"
    assert refused.headers["x-ratelimit-resource"] == "graphql"
    assert rest_read(fake).status_code == 200  # the REST pool is another one
