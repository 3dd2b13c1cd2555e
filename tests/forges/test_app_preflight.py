"""`delivery preflight` and `delivery run` with GitHub App credentials (SPEC §7.1, issue 37
item 3): which installation covers which repository, with its permissions; a repository
no installation covers refused by name before anything is written; bad credentials and a
refused mint said in one line with the fix, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_helpers import APP_ID, AppWorld
from app_helpers import app_world as app_world  # the fixture, for every test here
from github_helpers import TWO_REPO_FLOW

from delivery.testing.cli import CliResult, invoke

REPOS = ["--repo", "web=octo/web", "--repo", "api=octo/api"]


@pytest.fixture
def app_env(app_world: AppWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppWorld:
    """The App's credentials (and no GITHUB_TOKEN) in the environment, run from tmp_path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    for key, value in app_world.env().items():
        monkeypatch.setenv(key, value)
    return app_world


def one_line_error(result: CliResult) -> str:
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.err, result.err
    return lines[0]


def test_preflight_names_the_installation_and_its_permissions_per_repository(
        app_env: AppWorld) -> None:
    result = invoke("preflight", *REPOS, "--json")
    assert result.code == 0, result.out + result.err
    report = json.loads(result.out)
    installation = app_env.app.installation_of("octo/web")
    assert installation is not None
    assert [(f["folder"], f["installation"]) for f in report["folders"]] == [
        ("web", f"{installation.id} on octo"), ("api", f"{installation.id} on octo")]
    assert report["folders"][0]["app_permissions"]["contents"] == "write"
    assert report["auth"] == f"the GitHub App {APP_ID}"


def test_preflight_table_shows_the_installation(app_env: AppWorld) -> None:
    result = invoke("preflight", *REPOS)
    installation = app_env.app.installation_of("octo/api")
    assert installation is not None
    assert result.code == 0
    assert f"api: GitHub App {APP_ID} installation {installation.id} on octo (" in result.out


def test_a_repository_no_installation_covers_is_refused_naming_it(app_env: AppWorld) -> None:
    app_env.github.create_repo("acme/site", files={"a": "1"})
    result = invoke("preflight", *REPOS, "--repo", "site=acme/site")
    assert result.code == 1
    blocked = [line for line in result.out.splitlines() if line.startswith("blocked:")]
    assert blocked == [f"blocked: site: app installation: the GitHub App {APP_ID} is not "
                       "installed on acme/site; fix: install the App on acme (with access to "
                       "site)"]


def test_a_selected_repositories_installation_refuses_the_others(app_env: AppWorld) -> None:
    app_env.app.installations.clear()
    app_env.app.install("octo", repositories=("web",))
    result = invoke("preflight", *REPOS)
    assert result.code == 1
    assert f"blocked: api: app installation: the GitHub App {APP_ID} is not installed on " \
           "octo/api" in result.out


def test_missing_write_permissions_are_named(app_env: AppWorld) -> None:
    app_env.app.installations.clear()
    app_env.app.install("octo", permissions={"contents": "read", "metadata": "read",
                                             "pull_requests": "write"})
    result = invoke("preflight", *REPOS)
    assert result.code == 1
    assert "blocked: web: app permissions: the GitHub App's installation on octo has " \
           "contents: read" in result.out


def test_a_run_on_a_repository_no_installation_covers_writes_nothing(
        app_env: AppWorld, tmp_path: Path) -> None:
    app_env.github.create_repo("acme/site", files={"a": "1"})
    flow = tmp_path / "flow.dot"
    flow.write_text(TWO_REPO_FLOW)
    result = invoke("run", flow, "--input", "ticket=T-1", "--repo", "web=octo/web",
                    "--repo", "api=acme/site")
    assert result.code == 2
    assert f"api: app installation: the GitHub App {APP_ID} is not installed on acme/site" \
        in result.err
    # minting a token creates no content: nothing else may have been sent
    assert [r for r in app_env.github.write_requests()
            if not r.path.endswith("/access_tokens")] == []
    assert not (tmp_path / ".delivery").exists()


def test_an_app_id_without_a_key_is_refused_in_one_line(
        app_env: AppWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_APP_PRIVATE_KEY")
    line = one_line_error(invoke("preflight", *REPOS))
    assert "refused: GITHUB_APP_PRIVATE_KEY: is not set, and GITHUB_APP_ID is — set " \
           "GITHUB_APP_PRIVATE_KEY to the App's private key" in line


def test_a_key_that_is_not_pem_is_refused_in_one_line(
        app_env: AppWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY", "-----BEGIN RSA PRIVATE KEY-----\nnope\n"
                                                 "-----END RSA PRIVATE KEY-----\n")
    line = one_line_error(invoke("preflight", *REPOS))
    assert "refused: GITHUB_APP_PRIVATE_KEY: is not a PEM private key (" in line
    assert "— use the .pem file GitHub gave" in line


def test_a_key_path_that_names_no_file_is_refused_in_one_line(
        app_env: AppWorld, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY", str(tmp_path / "missing.pem"))
    line = one_line_error(invoke("preflight", *REPOS))
    # the variable's value is a secret (its name ends in KEY): the path is not repeated
    assert "GITHUB_APP_PRIVATE_KEY: is neither a PEM key nor a file that can be read " \
           "(No such file or directory)" in line


@pytest.mark.parametrize("variable", ["GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_PRIVATE_KEY_FILE"])
def test_the_key_may_be_a_path_to_the_pem_file(
        app_env: AppWorld, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        variable: str) -> None:
    key = tmp_path / "app.pem"
    key.write_text(app_env.app.private_key_pem)
    monkeypatch.delenv("GITHUB_APP_PRIVATE_KEY")
    monkeypatch.setenv(variable, str(key))
    result = invoke("preflight", *REPOS)
    assert result.code == 0, result.out + result.err


def test_a_key_of_another_app_is_refused_in_one_line(
        app_env: AppWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    other = app_env.github.register_app(7)
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY", other.private_key_pem)
    line = one_line_error(invoke("preflight", *REPOS))
    assert "GitHub refused the App's JWT" in line
    assert "check that GITHUB_APP_ID and the private key belong to the same App" in line


def test_a_refused_mint_is_said_in_one_line(app_env: AppWorld) -> None:
    app_env.app.refuse_tokens = "This installation has been suspended"
    line = one_line_error(invoke("preflight", *REPOS))
    assert "This installation has been suspended" in line and "octo" in line


def test_without_preflight_the_stage_needing_an_uncovered_token_fails_with_the_reason(
        app_env: AppWorld, tmp_path: Path) -> None:
    app_env.github.create_repo("acme/site", files={"a": "1"})
    flow = tmp_path / "flow.dot"
    flow.write_text(TWO_REPO_FLOW.replace('folders="web,api"',
                                          'folders="web,api", preflight=false'))
    result = invoke("run", flow, "--input", "ticket=T-1", "--repo", "web=octo/web",
                    "--repo", "api=acme/site", "--json")
    assert result.code == 1 and "Traceback" not in result.err
    outcome = json.loads(result.out)
    assert outcome["status"] == "failed" and outcome["path"][-1] == "add"
    assert f"the GitHub App {APP_ID} is not installed on acme/site" in \
        outcome["failure_reason"] and "install the App on acme" in outcome["failure_reason"]
