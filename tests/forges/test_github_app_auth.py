"""GitHub App authentication in the GitHub forge (SPEC §7.1 "Long runs keep a valid
token", issue 37 item 3), against the fake GitHub's App endpoints over real HTTP: the
forge mints an installation token per owner with a JWT signed by the App's key, renews it
when less than five minutes are left, gives git the current one at each network call, and
tells the run's redactor every token it mints."""

from __future__ import annotations

import base64
import subprocess
import threading
from pathlib import Path

from app_helpers import APP_ID, AppWorld
from app_helpers import app_world as app_world  # the fixture, for every test here

from delivery.forges.github import GitHubForge
from delivery.forges.select import open_forge
from delivery.forges.stop_label import StopTarget
from delivery.git.network import fetch_into
from delivery.redact import Redactor
from probes.evidence import PrQuery


def forge_for(world: AppWorld) -> GitHubForge:
    return GitHubForge.from_environment(world.env(), clock=world.clock,
                                        sleep=world.clock.sleep)


def sent_token(remote_headers: tuple[str, ...]) -> str:
    (header,) = remote_headers
    return base64.b64decode(header.split()[-1]).decode().partition(":")[2]


def test_app_credentials_mint_an_installation_token_used_for_rest(app_world: AppWorld) -> None:
    forge = forge_for(app_world)
    assert forge.default_branch("octo/web") == "main"
    installation = app_world.github.requests[0]
    assert (installation.method, installation.path) == (
        "GET", "/api/v3/repos/octo/web/installation")
    read = app_world.github.requests[-1]
    assert read.path == "/api/v3/repos/octo/web" and read.token_expires_at is not None
    assert app_world.mints() == 1


def test_the_token_is_reused_until_less_than_five_minutes_are_left(
        app_world: AppWorld) -> None:
    forge = forge_for(app_world)
    forge.default_branch("octo/web")
    app_world.clock.now += 54 * 60  # six minutes left: still good
    forge.default_branch("octo/api")
    assert app_world.mints() == 1
    app_world.clock.now += 2 * 60  # four minutes left: renewed before the request
    forge.default_branch("octo/web")
    assert app_world.mints() == 2
    assert not any(r.expired for r in app_world.github.requests)


def test_each_owner_gets_its_own_installations_token(app_world: AppWorld) -> None:
    app_world.github.create_repo("acme/site", files={"a": "1"})
    app_world.app.install("acme")
    forge = forge_for(app_world)
    assert forge.default_branch("acme/site") == forge.default_branch("octo/web") == "main"
    tokens = {r.token_expires_at is not None for r in app_world.github.requests
              if r.path.startswith("/api/v3/repos/") and not r.path.endswith("/installation")}
    assert tokens == {True} and app_world.mints() == 2
    assert all(r.status == 200 for r in app_world.github.requests
               if r.method == "GET" and not r.path.endswith("/installation"))


def test_threads_asking_at_once_share_one_minted_token(app_world: AppWorld) -> None:
    forge = forge_for(app_world)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            forge.default_branch("octo/web")
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and app_world.mints() == 1


def test_git_is_given_the_current_token_at_each_call(app_world: AppWorld,
                                                     tmp_path: Path) -> None:
    forge = forge_for(app_world)
    remote = forge.git_remote("octo/web")  # asked once, used for hours
    clone = tmp_path / "clone.git"
    subprocess.run(["git", "init", "-q", "--bare", str(clone)], check=True)
    fetch_into(clone, remote)
    app_world.clock.now += 2 * 3600  # the first token is long expired
    fetch_into(clone, remote)
    git = [r for r in app_world.github.requests if ".git/" in r.path]
    assert git and all(r.authorized and not r.expired for r in git)
    assert app_world.mints() == 2


def test_every_minted_token_is_masked_by_the_runs_redactor(app_world: AppWorld) -> None:
    app_world.app.token_prefix = "inst-"  # no known token shape: masked by value only
    redactor = Redactor()
    forge = open_forge("github", environ=app_world.env(), redactor=redactor)
    token = sent_token(forge.git_remote("octo/web").current_headers())
    assert token.startswith("inst-")
    assert redactor.text(f"pushed with {token}") == "pushed with ***"


def test_the_app_wins_over_a_github_token_set_beside_it(app_world: AppWorld) -> None:
    env = app_world.env() | {"GITHUB_TOKEN": "a-token-the-fake-does-not-know"}
    forge = GitHubForge.from_environment(env, clock=app_world.clock)
    assert forge.default_branch("octo/web") == "main"
    assert forge.token_source.name == f"the GitHub App {APP_ID}"


def test_a_probe_across_two_owners_reads_each_with_its_owners_token(
        app_world: AppWorld) -> None:
    app_world.github.create_repo("acme/site", files={"a": "1"})
    app_world.app.install("acme")
    app_world.github.push_files("octo/web", "delivery/T-1", {"app.py": "print(1)\n"})
    app_world.github.push_files("acme/site", "delivery/T-1", {"a": "2"})
    web = app_world.github.open_pull("octo/web", "delivery/T-1")
    site = app_world.github.open_pull("acme/site", "delivery/T-1")
    app_world.github.clear_requests()
    seen = forge_for(app_world).pull_requests([
        PrQuery("web", "octo/web", number=web), PrQuery("site", "acme/site", number=site)])
    assert {folder: type(seen[folder]).__name__ for folder in seen} == {
        "web": "PullRequestSnapshot", "site": "PullRequestSnapshot"}
    assert app_world.github.count("POST", "/api/graphql") == 2  # one per owner


def test_the_stop_label_is_read_across_owners_with_each_owners_token(
        app_world: AppWorld) -> None:
    app_world.github.create_repo("acme/site", files={"a": "1"})
    app_world.app.install("acme")
    for repository in ("octo/web", "acme/site"):
        app_world.github.push_files(repository, "delivery/T-1", {"b": "2"})
        app_world.github.open_pull(repository, "delivery/T-1")
    app_world.github.add_label("acme/site", 1, "delivery:stop", actor="ada")
    stop = forge_for(app_world).stop_label([
        StopTarget("web", "octo/web", head_branch="delivery/T-1"),
        StopTarget("site", "acme/site", head_branch="delivery/T-1")])
    assert stop is not None and (stop.by, stop.where.split()[0]) == ("ada", "site")
