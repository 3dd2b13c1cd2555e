"""A token (an App installation's) that lacks one repository permission: the write GitHub
refuses with 403 names that permission and how to grant it (issue 38 item 5), through the
CLI, with the fake GitHub refusing it as GitHub refuses an integration."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from github_helpers import TWO_REPO_FLOW

from delivery.cli.main import main
from delivery.testing.github import FakeGitHub

REPOS = ("--repo", "web=octo/web", "--repo", "api=octo/api")


@pytest.fixture
def github(fake_github_env: FakeGitHub, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("octo/web", "octo/api"):
        fake_github_env.create_repo(name, files={"app.py": "print(0)\n"})
    return fake_github_env


def run_flow(tmp_path: Path) -> dict[str, object]:
    flow = tmp_path / "flow.dot"
    flow.write_text(TWO_REPO_FLOW)
    out = io.StringIO()
    code = main(["run", str(flow), "--input", "ticket=T-1", *REPOS, "--json", "--quiet"],
                out=out, err=io.StringIO())
    shown: dict[str, object] = json.loads(out.getvalue())
    assert code == 1, shown
    return shown


def test_a_pull_request_the_token_may_not_open_names_the_pull_requests_permission(
        github: FakeGitHub, tmp_path: Path) -> None:
    github.deny_token("octo/api", "pull_requests")
    reason = str(run_flow(tmp_path)["failure_reason"])
    assert "the token may not write pull requests of octo/api" in reason, reason
    assert "give the GitHub App 'Pull requests: read and write' on octo/api" in reason
    assert "permission-pull-requests: write" in reason
    assert "Traceback" not in reason


def test_a_merge_the_token_may_not_make_names_the_contents_permission(
        github: FakeGitHub, tmp_path: Path) -> None:
    github.deny_token("octo/api", "contents")
    reason = str(run_flow(tmp_path)["failure_reason"])
    assert "the token may not write contents of octo/api" in reason, reason
    assert "'Contents: read and write'" in reason
