"""The fake GitHub's secondary limits (issue 37 item 2), switched on by a test: content-
creating requests past 80 a minute or 500 an hour per token are answered 403 (or 429) with
`Retry-After` and GitHub's message; reads are never counted; the windows slide on the
fake's clock, which the test fast-forwards."""

from __future__ import annotations

import httpx
import jwt
from app_helpers import APP_ID, AppWorld
from app_helpers import app_world as app_world  # the fixture
from github_helpers import open_pr

from delivery.testing.github import FakeGitHub, ManualClock

GITHUB_MESSAGE = ("You have exceeded a secondary rate limit and have been temporarily "
                  "blocked from content creation. Please retry your request again later.")


def comment(fake: FakeGitHub, number: int, token: str | None = None, *,
            client: httpx.Client | None = None) -> httpx.Response:
    post = client.post if client is not None else httpx.post  # a client keeps its connection
    return post(f"{fake.api_url}/repos/octo/web/issues/{number}/comments", json={"body": "x"},
                headers={"Authorization": f"token {token or fake.token}"})


def test_the_501st_write_of_an_hour_waits_for_the_oldest_to_leave_the_window(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", files={"app.py": "v1\n"})
    number = open_pr(fake, "octo/web")
    fake.enforce_secondary_limits()
    with httpx.Client() as client:
        for _ in range(500):  # 10 a minute: under the minute's limit all along
            assert comment(fake, number, client=client).status_code == 201
            clock.advance(6)
    refused = comment(fake, number)
    assert refused.status_code == 403
    assert refused.json()["message"] == GITHUB_MESSAGE
    # the first write was 3000 s ago: it leaves the hour's window in 600 s
    assert int(refused.headers["Retry-After"]) == 601
    clock.advance(601)
    assert comment(fake, number).status_code == 201


def test_the_limit_may_answer_429_as_github_also_does(fake: FakeGitHub) -> None:
    fake.create_repo("octo/web", files={"app.py": "v1\n"})
    number = open_pr(fake, "octo/web")
    fake.enforce_secondary_limits(per_minute=1, status=429)
    assert [comment(fake, number).status_code for _ in range(2)] == [201, 429]
    # reads are not content-creating: never refused
    read = httpx.get(f"{fake.api_url}/repos/octo/web/pulls/{number}",
                     headers={"Authorization": f"token {fake.token}"})
    assert read.status_code == 200


def installation_token(world: AppWorld) -> str:
    now = int(world.clock())
    signed = jwt.encode({"iat": now - 60, "exp": now + 540, "iss": str(APP_ID)},
                        world.app.private_key_pem, algorithm="RS256")
    installation = next(iter(world.app.installations.values()))
    minted = httpx.post(
        f"{world.github.api_url}/app/installations/{installation.id}/access_tokens",
        headers={"Authorization": f"Bearer {signed}"}, json={})
    return str(minted.json()["token"])


def test_each_token_has_its_own_window(app_world: AppWorld) -> None:
    github = app_world.github
    number = open_pr(github, "octo/web")
    limits = github.enforce_secondary_limits(per_minute=1)
    assert [comment(github, number).status_code for _ in range(2)] == [201, 403]
    # the App's installation token has spent nothing of the minute yet
    assert comment(github, number, installation_token(app_world)).status_code == 201
    assert limits.refused == 1
