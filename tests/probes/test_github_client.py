"""probes.github_client: every kind of answer GitHub gives, classified into one error tree
and retried by one policy — reads within the budget, writes never blindly. GitHub's answers
come from an httpx transport (that is GitHub mocked, not our code)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from github import GithubException

from probes.github_client import GitHubClient
from probes.github_errors import (
    ConnectionFailed,
    Forbidden,
    GitHubError,
    Invalid,
    NotFound,
    QueryTimedOut,
    RateLimited,
    Rejected,
    ServerError,
    TokenRefused,
    classify_answer,
)
from probes.retry import RetryBudget

NOW = 1_000_000.0
TOKEN = "ghs_secret-token-value"
OK = {"data": {"viewer": {"login": "bot"}}}
SECONDARY = {"message": "You have exceeded a secondary rate limit. Please wait a few "
                        "minutes before you try again."}
SOMETHING_WENT_WRONG = ("Something went wrong while executing your query. This may be the "
                        "result of a timeout, or it could be a GitHub bug.")
Answer = httpx.Response | Callable[[httpx.Request], httpx.Response]


def answer(status: int, body: Any = None, headers: dict[str, str] | None = None,
           text: str = "") -> httpx.Response:
    if text:
        return httpx.Response(status, headers=headers, text=text)
    return httpx.Response(status, headers=headers,
                          content=b"" if body is None else json.dumps(body).encode())


def dropped(kind: type[httpx.TransportError]) -> Callable[[httpx.Request], httpx.Response]:
    def fail(request: httpx.Request) -> httpx.Response:
        raise kind("the connection went away", request=request)
    return fail


@dataclass
class GitHubAnswers:
    """Answers requests in order (the last one again when they run out), recording each."""

    answers: list[Answer]
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        next_ = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return next_(request) if callable(next_) else next_


@dataclass
class World:
    github: GitHubAnswers
    client: GitHubClient
    sleeps: list[float]


def world(*answers: Answer, budget: RetryBudget | None = None) -> World:
    github = GitHubAnswers(list(answers))
    sleeps: list[float] = []
    client = GitHubClient(TOKEN, api_url="https://ghe.example/api/v3",
                          transport=httpx.MockTransport(github), budget=budget,
                          sleep=sleeps.append, clock=lambda: NOW)
    return World(github, client, sleeps)


@dataclass(frozen=True)
class Row:
    """One kind of answer: the error it is (None: it stands) and, for a transient one, the
    wait before the read is asked again."""

    kind: str
    answer: Answer
    error: type[GitHubError] | None
    wait: float | None = None
    partial: bool = False


TABLE = [
    Row("primary rate limit: remaining 0, wait until the reset",
        answer(403, {"message": "API rate limit exceeded for installation ID 1."},
               {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 42)}),
        RateLimited, 43.0),
    Row("primary rate limit answered 429",
        answer(429, {"message": "API rate limit exceeded"},
               {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 9)}),
        RateLimited, 10.0),
    Row("secondary rate limit with Retry-After", answer(403, SECONDARY, {"retry-after": "17"}),
        RateLimited, 17.0),
    Row("secondary rate limit without Retry-After: a minute", answer(403, SECONDARY),
        RateLimited, 60.0),
    Row("429 that names nothing is still a rate limit", answer(429), RateLimited, 60.0),
    Row("502", answer(502, text="<html>Bad Gateway</html>"), ServerError, 1.0),
    Row("503 with a JSON message", answer(503, {"message": "Service Unavailable"}),
        ServerError, 1.0),
    Row("200 that is not JSON", answer(200, text="<html>unicorn</html>"), ServerError, 1.0),
    Row("dropped connection", dropped(httpx.RemoteProtocolError), ConnectionFailed, 1.0),
    Row("timeout", dropped(httpx.ReadTimeout), ConnectionFailed, 1.0),
    Row("GraphQL RATE_LIMITED",
        answer(200, {"data": None, "errors": [{"type": "RATE_LIMITED",
                                               "message": "API rate limit exceeded"}]}),
        RateLimited, 60.0),
    Row("GraphQL error without a type: Something went wrong (a timeout)",
        answer(200, {"data": None, "errors": [{"message": SOMETHING_WENT_WRONG}]}),
        QueryTimedOut, 1.0),
    Row("GraphQL NOT_FOUND beside data, read whole", answer(200, {
        "data": {"r0": None, "r1": {"id": "R_1"}},
        "errors": [{"type": "NOT_FOUND", "path": ["r0"], "message": "Could not resolve"}]}),
        None, partial=True),
    Row("GraphQL FORBIDDEN beside data, read whole", answer(200, {
        "data": {"r0": None}, "errors": [{"type": "FORBIDDEN", "path": ["r0"],
                                          "message": "Resource not accessible"}]}),
        None, partial=True),
    Row("GraphQL NOT_FOUND when the whole answer is asked for", answer(200, {
        "data": {"node": None}, "errors": [{"type": "NOT_FOUND", "path": ["node"],
                                            "message": "Could not resolve to a node"}]}),
        NotFound),
    Row("GraphQL FORBIDDEN without data", answer(200, {
        "data": None, "errors": [{"type": "FORBIDDEN", "message": "not accessible"}]}),
        Forbidden),
    Row("GraphQL error about the query itself", answer(200, {
        "errors": [{"message": "Field 'x' doesn't exist on type 'Query'",
                    "extensions": {"code": "undefinedField"}}]}), Rejected, partial=True),
    Row("401: the token refused", answer(401, {"message": "Bad credentials"}), TokenRefused),
    Row("403 that is no rate limit",
        answer(403, {"message": "Resource not accessible by integration"}), Forbidden),
    Row("404", answer(404, {"message": "Not Found"}), NotFound),
    Row("422 validation", answer(422, {"message": "Validation Failed", "errors": [
        {"resource": "PullRequest", "code": "custom",
         "message": "A pull request already exists for octo:delivery/T-1."}]}), Invalid),
    Row("400", answer(400, {"message": "Problems parsing JSON"}), Rejected),
    Row("200 with data", answer(200, OK), None),
]


@pytest.mark.parametrize("row", TABLE, ids=[row.kind for row in TABLE])
def test_each_kind_of_answer_is_one_error_and_one_retry_decision(row: Row) -> None:
    w = world(row.answer, answer(200, OK))
    if row.error is None:
        assert w.client.graphql("query { viewer { login } }", partial=row.partial)
        assert (len(w.github.requests), w.sleeps) == (1, [])
    elif row.wait is not None:  # transient: asked again after the wait GitHub asked for
        assert w.client.graphql("query { viewer { login } }", partial=row.partial) == OK
        assert (len(w.github.requests), w.sleeps) == (2, [row.wait])
    else:  # refused: final at once
        with pytest.raises(row.error) as refused:
            w.client.graphql("query { viewer { login } }", partial=row.partial)
        assert type(refused.value) is row.error
        assert (len(w.github.requests), w.sleeps) == (1, [])


HTTP_ROWS = [row for row in TABLE if isinstance(row.answer, httpx.Response)
             and row.answer.status_code != 200]


@pytest.mark.parametrize("row", HTTP_ROWS, ids=[row.kind for row in HTTP_ROWS])
def test_pygithub_errors_are_classified_by_the_same_rules(row: Row) -> None:
    assert isinstance(row.answer, httpx.Response)
    try:
        data = row.answer.json()
    except ValueError:
        data = row.answer.text
    error = GithubException(row.answer.status_code, data, dict(row.answer.headers))
    seen = classify_answer(error.status, error.headers or {}, error.data, now=NOW)
    assert type(seen) is row.error


def test_a_validation_failure_keeps_githubs_codes_and_words() -> None:
    w = world(answer(422, {"message": "Validation Failed", "errors": [
        {"resource": "PullRequest", "code": "custom",
         "message": "A pull request already exists for octo:delivery/T-1."},
        {"resource": "PullRequest", "field": "base", "code": "invalid"}]}))
    with pytest.raises(Invalid) as refused:
        w.client.rest("POST", "/repos/octo/web/pulls", json={"head": "delivery/T-1"})
    assert refused.value.codes == ("custom", "invalid")
    assert "A pull request already exists" in refused.value.reason


def test_a_read_is_retried_until_the_budget_is_spent() -> None:
    w = world(answer(502), budget=RetryBudget(attempts=3))
    with pytest.raises(ServerError, match="HTTP 502"):
        w.client.rest("GET", "/repos/octo/web")
    assert (len(w.github.requests), w.sleeps) == (3, [1.0, 2.0])


def test_a_wait_past_the_budget_is_not_slept() -> None:
    w = world(answer(403, SECONDARY, {"retry-after": "3600"}),
              budget=RetryBudget(wait_seconds=600))
    with pytest.raises(RateLimited):
        w.client.graphql("query { viewer { login } }")
    assert (len(w.github.requests), w.sleeps) == (1, [])


def test_a_rest_write_whose_answer_is_lost_is_not_sent_again() -> None:
    w = world(dropped(httpx.RemoteProtocolError), answer(201, {"number": 1}))
    with pytest.raises(ConnectionFailed):
        w.client.rest("POST", "/repos/octo/web/pulls", json={"head": "delivery/T-1"})
    assert len(w.github.requests) == 1


def test_a_mutation_whose_answer_is_lost_is_not_sent_again() -> None:
    w = world(answer(502), answer(200, {"data": {"resolveReviewThread": {}}}))
    with pytest.raises(ServerError):
        w.client.graphql("mutation { resolveReviewThread(input: {threadId: \"T\"}) "
                         "{ thread { id } } }")
    assert len(w.github.requests) == 1


def test_a_write_looks_for_its_effect_and_returns_it_instead_of_writing_again() -> None:
    w = world(dropped(httpx.RemoteProtocolError), answer(201, {"number": 2}))
    looked: list[str] = []

    def find() -> dict[str, int] | None:
        looked.append("look")
        return {"number": 1}  # the lost answer's PR is there

    found = w.client.write(lambda: w.client.rest_once("POST", "/repos/octo/web/pulls",
                                                      json={"head": "delivery/T-1"}),
                           find_effect=find)
    assert (found, looked, len(w.github.requests)) == ({"number": 1}, ["look"], 1)


def test_a_write_whose_effect_is_not_found_is_sent_again() -> None:
    w = world(answer(502), answer(201, {"number": 2}))
    created = w.client.write(lambda: w.client.rest_once("POST", "/repos/octo/web/pulls",
                                                        json={"head": "delivery/T-1"}),
                             find_effect=lambda: None)
    assert created == {"number": 2}
    assert [r.method for r in w.github.requests] == ["POST", "POST"]


def test_a_write_that_sets_a_value_is_repeated_as_a_read_is() -> None:
    w = world(answer(502), answer(201, {"state": "success"}))
    assert w.client.rest("POST", "/repos/octo/web/statuses/abc", json={"state": "success"},
                         idempotent=True) == {"state": "success"}
    assert len(w.github.requests) == 2


def test_the_token_travels_in_a_header_to_the_configured_api_only() -> None:
    w = world(answer(401, {"message": "Bad credentials"}))
    with pytest.raises(TokenRefused) as refused:
        w.client.rest("GET", "/user")
    sent = w.github.requests[0]
    assert sent.headers["authorization"] == f"bearer {TOKEN}"
    assert str(sent.url) == "https://ghe.example/api/v3/user"
    assert TOKEN not in str(refused.value) and TOKEN not in repr(w.client)
    with pytest.raises(ValueError, match="starts with '/'"):
        w.client.rest("GET", "https://elsewhere.example/steal")
    assert len(w.github.requests) == 1


def test_graphql_goes_to_the_enterprise_servers_graphql_url() -> None:
    w = world(answer(200, OK))
    w.client.graphql("query { viewer { login } }")
    assert str(w.github.requests[0].url) == "https://ghe.example/api/graphql"
