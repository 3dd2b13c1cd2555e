"""The permissions an App's installation token was minted with, as the fake GitHub enforces
them: a write needing a permission the token lacks, or has only `read`, is refused as GitHub
refuses an integration (REST 403, git 403, GraphQL FORBIDDEN); a token minted without
`permissions` has all the installation's. The shipped workflows asked for `statuses: read`
while a run writes commit statuses, and nothing saw it."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import httpx
import jwt
from app_helpers import AppWorld
from app_helpers import app_world as app_world  # the fixture, for every test here

REFUSED = "Resource not accessible by integration"


def mint(world: AppWorld, body: dict[str, Any]) -> httpx.Response:
    now = int(world.clock())
    signed = jwt.encode({"iat": now - 60, "exp": now + 540, "iss": str(world.app.id)},
                        world.app.private_key_pem, algorithm="RS256")
    installation = world.app.installation_of("octo/web")
    assert installation is not None
    return httpx.post(
        f"{world.github.api_url}/app/installations/{installation.id}/access_tokens",
        headers={"Authorization": f"Bearer {signed}"}, json=body)


def token_with(world: AppWorld, **permissions: str) -> str:
    minted = mint(world, {"permissions": permissions} if permissions else {})
    assert minted.status_code == 201, minted.text
    return str(minted.json()["token"])


def api(world: AppWorld, token: str, method: str, path: str,
        body: dict[str, Any] | None = None) -> httpx.Response:
    return httpx.request(method, f"{world.github.api_url}{path}", json=body,
                         headers={"Authorization": f"token {token}"})


def set_status(world: AppWorld, token: str) -> httpx.Response:
    sha = world.github.push_files("octo/web", "main", {"app.py": "print(1)\n"})
    return api(world, token, "POST", f"/repos/octo/web/statuses/{sha}",
               {"state": "success", "context": "delivery/change-set"})


def test_a_token_that_only_reads_statuses_is_refused_a_commit_status(
        app_world: AppWorld) -> None:
    token = token_with(app_world, contents="write", pull_requests="write", statuses="read")
    answer = set_status(app_world, token)
    assert (answer.status_code, answer.json()["message"]) == (403, REFUSED)


def test_a_token_that_writes_statuses_sets_a_commit_status(app_world: AppWorld) -> None:
    token = token_with(app_world, contents="write", pull_requests="write", statuses="write")
    assert set_status(app_world, token).status_code == 201


def test_a_token_minted_without_permissions_has_the_installations(
        app_world: AppWorld) -> None:
    assert set_status(app_world, token_with(app_world)).status_code == 201


def test_a_token_without_issues_write_is_refused_a_comment_on_an_issue(
        app_world: AppWorld) -> None:
    number = app_world.github.create_issue("octo/web", "Greet people")
    token = token_with(app_world, pull_requests="write", issues="read")
    answer = api(app_world, token, "POST", f"/repos/octo/web/issues/{number}/comments",
                 {"body": "hello"})
    assert (answer.status_code, answer.json()["message"]) == (403, REFUSED)
    assert app_world.github.repository("octo/web").comments == {}


def test_pull_requests_write_may_comment_on_a_pr_without_issues_write(
        app_world: AppWorld) -> None:
    app_world.github.push_files("octo/web", "feature", {"app.py": "print(2)\n"})
    number = app_world.github.open_pull("octo/web", "feature")
    token = token_with(app_world, pull_requests="write", issues="read")
    answer = api(app_world, token, "POST", f"/repos/octo/web/issues/{number}/comments",
                 {"body": "hello"})
    assert answer.status_code == 201, answer.text


def test_a_merge_needs_contents_write_beside_pull_requests(app_world: AppWorld) -> None:
    app_world.github.push_files("octo/web", "feature", {"app.py": "print(2)\n"})
    number = app_world.github.open_pull("octo/web", "feature")
    token = token_with(app_world, pull_requests="write", contents="read")
    answer = api(app_world, token, "PUT", f"/repos/octo/web/pulls/{number}/merge", {})
    assert (answer.status_code, answer.json()["message"]) == (403, REFUSED)
    assert not app_world.github.pull("octo/web", number).merged


def test_a_token_that_only_reads_contents_is_refused_a_push(app_world: AppWorld,
                                                          tmp_path: Path) -> None:
    token = token_with(app_world, contents="read")
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    git = ["git", "-c", f"http.extraHeader=Authorization: Basic {basic}"]
    clone = tmp_path / "web"
    subprocess.run([*git, "clone", "-q", f"{app_world.github.server_url}/octo/web.git",
                    str(clone)], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    pushed = subprocess.run([*git, "-C", str(clone), "push", "-q", "origin", "HEAD:main"],
                            capture_output=True, text=True)
    assert pushed.returncode != 0 and "403" in pushed.stderr, pushed.stderr


def test_a_token_that_only_reads_pull_requests_may_not_resolve_a_thread(
        app_world: AppWorld) -> None:
    app_world.github.push_files("octo/web", "feature", {"app.py": "print(2)\n"})
    number = app_world.github.open_pull("octo/web", "feature")
    thread = app_world.github.add_thread("octo/web", number)
    token = token_with(app_world, pull_requests="read", contents="write")
    answer = httpx.post(app_world.github.graphql_url, headers={
        "Authorization": f"bearer {token}"}, json={
        "query": "mutation($id: ID!) { resolveReviewThread(input: {threadId: $id}) "
                 "{ thread { isResolved } } }",
        "variables": {"id": app_world.github.thread_node_id(thread)}})
    [error] = answer.json()["errors"]
    assert (error["type"], error["message"]) == ("FORBIDDEN", REFUSED)
    assert not thread.resolved


def test_asking_more_than_the_installation_grants_is_answered_422(
        app_world: AppWorld) -> None:
    answer = mint(app_world, {"permissions": {"administration": "write"}})
    assert answer.status_code == 422
    assert answer.json()["message"] == ("The permissions requested are not granted to "
                                        "this installation.")
