"""The fake GitHub itself: authentication by header, GraphQL validated against GitHub's
schema, REST shapes PyGithub accepts, content-derived mergeability, the request record."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx
import pytest
from github import Auth, Github
from github_helpers import open_pr

from delivery.testing.github import FakeGitHub, faults

SHARED_SCHEMA = Path(__file__).resolve().parents[2].parent / "shared/github/schema.graphql"


def post_graphql(fake: FakeGitHub, query: str, token: str | None = None) -> httpx.Response:
    return httpx.post(fake.graphql_url, json={"query": query},
                      headers={"Authorization": f"bearer {token or fake.token}"})


def test_requests_without_the_token_header_are_refused(fake: FakeGitHub) -> None:
    fake.create_repo("octo/web")
    assert httpx.get(f"{fake.api_url}/repos/octo/web").status_code == 401
    assert httpx.get(f"{fake.api_url}/repos/octo/web",
                     headers={"Authorization": "token wrong"}).status_code == 401
    assert httpx.get(f"{fake.api_url}/repos/octo/web",
                     headers={"Authorization": f"token {fake.token}"}).status_code == 200
    assert [r.authorized for r in fake.requests] == [False, False, True]


def test_graphql_rejects_what_github_would_reject(fake: FakeGitHub) -> None:
    fake.create_repo("octo/web")
    unknown = post_graphql(fake, '{ repository(owner: "octo", name: "web") { nope } }').json()
    assert "data" not in unknown and "nope" in unknown["errors"][0]["message"]
    unpaged = post_graphql(
        fake, '{ repository(owner: "octo", name: "web") { pullRequests { totalCount } } }'
    ).json()
    assert "first" in unpaged["errors"][0]["message"]
    too_big = post_graphql(
        fake, '{ repository(owner: "octo", name: "web") '
              '{ pullRequests(first: 101) { totalCount } } }').json()
    assert "exceeds the `first` limit of 100" in too_big["errors"][0]["message"]


def test_missing_repository_is_null_with_a_not_found_error(fake: FakeGitHub) -> None:
    fake.create_repo("octo/web")
    body = post_graphql(fake, '{ a: repository(owner: "octo", name: "web") { name } '
                              'b: repository(owner: "octo", name: "nope") { name } }').json()
    assert body["data"] == {"a": {"name": "web"}, "b": None}
    assert body["errors"][0]["type"] == "NOT_FOUND" and body["errors"][0]["path"] == ["b"]


def test_pygithub_works_against_the_fake(fake: FakeGitHub) -> None:
    fake.create_repo("octo/web")
    fake.push_files("octo/web", "feature", {"a.txt": "a\n"})
    github = Github(base_url=fake.api_url, auth=Auth.Token(fake.token), retry=None,
                    seconds_between_requests=None, seconds_between_writes=None)
    repo = github.get_repo("octo/web")
    pr = repo.create_pull(base=repo.default_branch, head="feature", title="t", body="b")
    listed = list(repo.get_pulls(state="all", head="octo:feature"))
    assert [p.number for p in listed] == [pr.number]
    assert pr.merge(sha=pr.head.sha).merged
    assert repo.get_pull(pr.number).merged


def test_mergeability_comes_from_the_pushed_content(fake: FakeGitHub) -> None:
    fake.create_repo("octo/web", files={"a.txt": "1\n", "b.txt": "1\n"})
    number = open_pr(fake, "octo/web", files={"a.txt": "2\n"})
    repo, pr = fake.repository("octo/web"), fake.pull("octo/web", number)
    fake.push_files("octo/web", "main", {"b.txt": "other file\n"})
    assert fake.state.mergeable(repo, pr) == "MERGEABLE"
    fake.push_files("octo/web", "main", {"a.txt": "3\n"})
    assert fake.state.mergeable(repo, pr) == "CONFLICTING"
    assert fake.state.conflicts(repo, pr) == ["a.txt"]


def test_merge_with_a_stale_sha_is_refused_409(fake: FakeGitHub) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    answer = httpx.put(f"{fake.api_url}/repos/octo/web/pulls/{number}/merge",
                       json={"sha": "0" * 40},
                       headers={"Authorization": f"token {fake.token}"})
    assert answer.status_code == 409 and "modified" in answer.json()["message"]


def test_one_alias_per_request_is_recorded_and_counted(fake: FakeGitHub) -> None:
    fake.create_repo("octo/web")
    post_graphql(fake, "{ viewer { login } }")
    post_graphql(fake, "{ viewer { login } }")
    assert fake.count("POST", "/api/graphql") == 2 and fake.count("GET") == 0


def test_injected_fault_answers_once_then_the_real_answer(fake: FakeGitHub) -> None:
    fake.inject(faults.server_error(503))
    assert post_graphql(fake, "{ viewer { login } }").status_code == 503
    assert post_graphql(fake, "{ viewer { login } }").json()["data"]["viewer"]["login"]


@pytest.mark.skipif(not SHARED_SCHEMA.exists(), reason="the shared schema is not beside the "
                                                       "repository")
def test_bundled_schema_is_the_shared_one() -> None:
    from importlib import resources
    bundled = resources.files("delivery.testing.github").joinpath("schema.graphql.gz")
    assert gzip.decompress(bundled.read_bytes()) == SHARED_SCHEMA.read_bytes()


def test_rest_review_with_comments_is_seen_by_the_probe(fake: FakeGitHub) -> None:
    from probes.evidence import PrQuery, PullRequestSnapshot
    from probes.github import GitHubPullRequestSource
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    answer = httpx.post(f"{fake.api_url}/repos/octo/web/pulls/{number}/reviews",
                        headers={"Authorization": f"token {fake.token}"},
                        json={"event": "REQUEST_CHANGES", "body": "see inline",
                              "comments": [{"path": "app.py", "line": 1, "body": "typo"}]})
    assert answer.status_code == 200 and answer.json()["state"] == "CHANGES_REQUESTED"
    seen = GitHubPullRequestSource(fake.token, graphql_url=fake.graphql_url).pull_requests(
        [PrQuery("web", "octo/web", number=number)])["web"]
    assert isinstance(seen, PullRequestSnapshot)
    assert (seen.state.value, seen.unresolved_threads) == ("CHANGES_REQUIRED", 1)
    assert seen.threads[0].body == "typo" and seen.reviews[0].body == "see inline"
