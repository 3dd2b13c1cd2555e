"""The GitHub forge's GraphQL (preflight, the stop label, review threads, who the token is)
goes through the one GitHub client: a query GitHub rejects fails at once, a timeout or a
rate limit is asked again, errors naming one repository leave the others' answer."""

from __future__ import annotations

import pytest
from github_helpers import ManualClock

from delivery.errors import ForgeError
from delivery.forges.github import GitHubForge
from delivery.testing.github import FakeGitHub, faults
from delivery.testing.github.faults import TRANSIENT_GRAPHQL_ERROR
from probes.retry import RetryBudget

QUERY = "query { viewer { login } }"


@pytest.fixture
def forge(fake: FakeGitHub, clock: ManualClock) -> GitHubForge:
    fake.create_repo("octo/web")
    fake.clear_requests()
    return GitHubForge.from_environment(fake.env(), sleep=clock.sleep, clock=clock,
                                        budget=RetryBudget(attempts=4))


def test_a_query_github_rejects_fails_at_once_saying_why(forge: GitHubForge,
                                                         fake: FakeGitHub) -> None:
    fake.inject(faults.graphql_errors([{"message": "Field 'x' doesn't exist on type 'Query'"}]))
    with pytest.raises(ForgeError, match="Field 'x' doesn't exist") as refused:
        forge.graphql_read("check what the token may do", "octo/web", QUERY, {})
    assert "gave up" not in str(refused.value)
    assert refused.value.fix == "check that the token may read the repositories"
    assert fake.count("POST", "/api/graphql") == 1


def test_a_query_github_timed_out_is_asked_again(forge: GitHubForge, fake: FakeGitHub,
                                                 clock: ManualClock) -> None:
    fake.inject(faults.graphql_errors(TRANSIENT_GRAPHQL_ERROR))
    answer = forge.graphql_read("check what the token may do", "octo/web", QUERY, {})
    assert answer["data"]["viewer"]["login"]
    assert (fake.count("POST", "/api/graphql"), clock.sleeps) == (2, [1.0])


def test_a_missing_repository_leaves_the_others_answer(forge: GitHubForge) -> None:
    answer = forge.graphql_read(
        "check what the token may do", "octo/web, octo/gone",
        "query($o: String!, $n: String!, $g: String!) { a: repository(owner: $o, name: $n)"
        " { nameWithOwner } b: repository(owner: $o, name: $g) { nameWithOwner } }",
        {"o": "octo", "n": "web", "g": "gone"})
    assert answer["data"]["a"] == {"nameWithOwner": "octo/web"}
    assert answer["data"]["b"] is None
    assert [e.get("type") for e in answer["errors"]] == ["NOT_FOUND"]
