"""The fake GitHub's App endpoints (issue 37 item 3): a JWT signed with the App's key gets
the installation and an installation token; a JWT signed with another key, or expired, is
refused as GitHub refuses it; an installation token expires on the fake's clock and a
request sent with it afterwards is answered 401 and recorded as expired."""

from __future__ import annotations

import httpx
import jwt
from app_helpers import APP_ID, AppWorld
from app_helpers import app_world as app_world  # the fixture, for every test here


def app_jwt(world: AppWorld, key: str | None = None, *, lifetime: int = 540,
            app_id: int = APP_ID) -> str:
    now = int(world.clock())
    return jwt.encode({"iat": now - 60, "exp": now + lifetime, "iss": str(app_id)},
                      key or world.app.private_key_pem, algorithm="RS256")


def installation_of(world: AppWorld, token: str, repository: str) -> httpx.Response:
    return httpx.get(f"{world.github.api_url}/repos/{repository}/installation",
                     headers={"Authorization": f"Bearer {token}"})


def mint(world: AppWorld, installation: int) -> httpx.Response:
    return httpx.post(f"{world.github.api_url}/app/installations/{installation}/access_tokens",
                      headers={"Authorization": f"Bearer {app_jwt(world)}"}, json={})


def test_a_jwt_of_the_apps_key_finds_the_installation_and_mints_a_token(
        app_world: AppWorld) -> None:
    found = installation_of(app_world, app_jwt(app_world), "octo/web")
    assert found.status_code == 200
    assert found.json()["account"]["login"] == "octo"
    minted = mint(app_world, found.json()["id"])
    assert minted.status_code == 201 and minted.json()["token"].startswith("ghs_")
    read = httpx.get(f"{app_world.github.api_url}/repos/octo/web",
                     headers={"Authorization": f"token {minted.json()['token']}"})
    assert read.status_code == 200


def test_a_jwt_signed_with_another_key_is_refused(app_world: AppWorld) -> None:
    other = app_world.github.register_app(99).private_key_pem
    answer = installation_of(app_world, app_jwt(app_world, other), "octo/web")
    assert (answer.status_code, answer.json()["message"]) == (
        401, "A JSON web token could not be decoded")


def test_an_expired_jwt_is_refused(app_world: AppWorld) -> None:
    token = app_jwt(app_world)
    app_world.clock.now += 600
    answer = installation_of(app_world, token, "octo/web")
    assert answer.status_code == 401 and "'exp'" in answer.json()["message"]


def test_a_repository_the_app_is_not_installed_on_answers_404(app_world: AppWorld) -> None:
    app_world.github.create_repo("acme/site")
    assert installation_of(app_world, app_jwt(app_world), "acme/site").status_code == 404


def test_an_expired_installation_token_is_answered_401_and_recorded(
        app_world: AppWorld) -> None:
    installation = app_world.app.installation_of("octo/web")
    assert installation is not None
    token = mint(app_world, installation.id).json()["token"]
    app_world.clock.now += 3600
    answer = httpx.get(f"{app_world.github.api_url}/repos/octo/web",
                       headers={"Authorization": f"token {token}"})
    assert (answer.status_code, answer.json()["message"]) == (401, "Bad credentials")
    assert app_world.github.requests[-1].expired


def test_a_token_used_outside_its_installation_is_answered_403(app_world: AppWorld) -> None:
    app_world.github.create_repo("acme/site")
    installation = app_world.app.installation_of("octo/web")
    assert installation is not None
    token = mint(app_world, installation.id).json()["token"]
    answer = httpx.get(f"{app_world.github.api_url}/repos/acme/site",
                       headers={"Authorization": f"token {token}"})
    assert answer.status_code == 403
