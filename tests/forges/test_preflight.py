"""`delivery preflight` and the check before a run's first write (SPEC §7.1, issue 21 item
6), against the fake GitHub over real HTTP: a token that cannot push, a repository that
only allows squash merges and a state repository refusing `refs/delivery/*` are each named
in one line with a fix, and nothing is written — the fake records no write request and the
repositories' refs are unchanged."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from github_helpers import TWO_REPO_FLOW

from delivery.cli.main import main
from delivery.forges.github import GitHubForge
from delivery.forges.preflight import BATCH, github_query
from delivery.testing.github import FakeGitHub, graphql_api

REPOS = ["--repo", "web=octo/web", "--repo", "api=octo/api"]


@pytest.fixture
def github(fake_github_env: FakeGitHub, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("octo/web", "octo/api", "octo/state"):
        fake_github_env.create_repo(name, files={"app.py": "print(0)\n"})
    fake_github_env.clear_requests()
    return fake_github_env


def refs(fake: FakeGitHub) -> dict[str, str]:
    """Every ref of every repository on the fake: what a write would change."""
    found = {}
    for name in ("octo/web", "octo/api", "octo/state"):
        out = subprocess.run(["git", "for-each-ref", "--format=%(refname) %(objectname)"],
                             cwd=fake.repository(name).path, capture_output=True, text=True,
                             check=True).stdout
        found[name] = out
    return found


def preflight(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["preflight", *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_token_that_cannot_push_is_named_and_nothing_is_written(github: FakeGitHub) -> None:
    github.set_token_permission("octo/api", "read")
    before = refs(github)
    code, out, _ = preflight(*REPOS)
    assert code == 1
    blocked = [line for line in out.splitlines() if line.startswith("blocked:")]
    assert blocked == ["blocked: api: push: the token has read permission on octo/api: it "
                       "cannot push the run's branch or open pull requests; fix: give the "
                       "token write access (contents: write, pull-requests: write)"]
    assert github.write_requests() == [] and refs(github) == before


def test_squash_only_merges_are_named_against_the_workflows_merge_method(
        github: FakeGitHub) -> None:
    github.allow_merge_methods("octo/web", "squash")
    code, out, _ = preflight(*REPOS, "--json")
    report = json.loads(out)
    assert (code, report["blocked"]) == (1, True)
    assert report["problems"] == [
        "web: merge method: octo/web does not allow 'merge' merges (allowed: squash); fix: "
        "set method=squash on the workflow's merge node or allow merge merges in the "
        "repository's settings"]
    assert preflight(*REPOS, "--merge-method", "squash")[0] == 0
    assert github.write_requests() == []


def test_a_state_repository_that_refuses_the_push_is_named_and_nothing_is_written(
        github: FakeGitHub) -> None:
    github.set_token_permission("octo/state", "read")
    before = refs(github)
    code, out, _ = preflight(*REPOS, "--state", "git:octo/state")
    assert code == 1
    assert "state: push refs/delivery/*: the state repository git:octo/state refuses the push" \
        in out and "fix: give the token contents: write on the state repository" in out
    assert github.write_requests() == [] and refs(github) == before


def test_a_writable_state_repository_passes_without_any_ref_written(github: FakeGitHub) -> None:
    before = refs(github)
    code, out, _ = preflight(*REPOS, "--state", "git:octo/state")
    assert (code, out.splitlines()[-1]) == (0, "ok")
    assert "state git:octo/state: push refs/delivery/* yes" in out
    assert github.write_requests() == [] and refs(github) == before


def test_all_folders_cost_one_graphql_request(github: FakeGitHub) -> None:
    preflight(*REPOS)
    assert [(r.method, r.path) for r in github.requests] == [("POST", "/api/graphql")]


def test_branch_protection_and_the_default_branch_are_reported(github: FakeGitHub) -> None:
    github.protect("octo/web", required_contexts=("ci", "delivery/change-set"),
                   required_approvals=1)
    code, out, _ = preflight(*REPOS, "--json")
    web, api = json.loads(out)["folders"]
    assert code == 0
    assert (web["default_branch"], web["required_checks"], web["required_approvals"],
            web["requires_change_set"]) == ("main", ["ci", "delivery/change-set"], 1, True)
    assert (web["can_push"], web["can_open_prs"], web["merge_methods"]) == (
        True, True, ["merge", "squash", "rebase"])
    assert api["requires_change_set"] is False


def test_the_table_notes_a_set_whose_protection_lets_one_pr_merge_alone(
        github: FakeGitHub) -> None:
    _, out, _ = preflight(*REPOS)
    assert "note: branch protection of web, api does not require delivery/change-set" in out


def test_a_repository_the_token_cannot_see_is_named(github: FakeGitHub) -> None:
    code, out, _ = preflight("--repo", "web=octo/web", "--repo", "gone=octo/missing")
    assert code == 1
    assert "blocked: gone: read: octo/missing cannot be read" in out


def test_the_query_is_valid_against_githubs_schema() -> None:
    assert graphql_api.validate_query(github_query(BATCH)) == []


def test_more_than_fifty_folders_are_read_fifty_at_a_time(github: FakeGitHub) -> None:
    forge = GitHubForge.from_environment(github.env())
    from delivery.forges.preflight import github_folders

    checks, requests = github_folders(forge, {f"f{i}": "octo/web" for i in range(51)}, "merge")
    assert (len(checks), requests, github.count("POST", "/api/graphql")) == (51, 2, 2)
    assert all(check.can_push for check in checks)


def test_a_run_on_a_repository_it_cannot_push_is_refused_before_anything_is_written(
        github: FakeGitHub, tmp_path: Path) -> None:
    github.set_token_permission("octo/web", "read")
    flow = tmp_path / "flow.dot"
    flow.write_text(TWO_REPO_FLOW)
    before = refs(github)
    err = io.StringIO()
    code = main(["run", str(flow), "--input", "ticket=T-1", *REPOS, "--state",
                 "git:octo/state"], out=io.StringIO(), err=err)
    assert code == 2
    assert "refused: preflight: web: push: the token has read permission on octo/web" in \
        err.getvalue()
    assert github.write_requests() == [] and refs(github) == before
    assert not (tmp_path / ".delivery").exists()


def test_preflight_false_on_the_graph_skips_the_check(github: FakeGitHub,
                                                      tmp_path: Path) -> None:
    from delivery.engine.preflight_gate import wanted
    from delivery.engine.run_setup import FolderSetup
    from delivery.validation.loader import load_workflow

    flow = tmp_path / "flow.dot"
    flow.write_text(TWO_REPO_FLOW.replace('folders="web,api"', 'folders="web,api", '
                                          'preflight=false'))
    setup = FolderSetup(forge="github", repos={"web": "octo/web"}, folders={}, checks={})
    assert wanted(load_workflow(flow), setup, None) is False
    flow.write_text(TWO_REPO_FLOW)
    assert wanted(load_workflow(flow), setup, None) is True
    deliver = Path(__file__).resolve().parents[2] / "workflows" / "deliver.dot"
    assert wanted(load_workflow(deliver), setup, None) is True  # deliver.dot: by default


def test_the_local_forge_checks_what_it_can(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.chdir(tmp_path)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "trunk", "web.git"], check=True)
    code, out, _ = preflight("--repo", "web=web.git", "--json")
    (web,) = json.loads(out)["folders"]
    assert code == 0
    assert (web["readable"], web["can_push"], web["default_branch"], web["merge_methods"]) \
        == (True, True, "trunk", ["merge"])
    code, out, _ = preflight("--repo", "web=web.git", "--merge-method", "squash")
    assert code == 1 and "web: merge method: " in out


def test_a_run_merging_with_squash_passes_where_only_squash_is_allowed(
        github: FakeGitHub, tmp_path: Path) -> None:
    from delivery.engine.preflight_gate import merge_method
    from delivery.errors import RunRefused
    from delivery.validation.loader import load_workflow

    flow = tmp_path / "flow.dot"
    flow.write_text(TWO_REPO_FLOW.replace('order="api,web"', 'order="api,web", method=squash'))
    assert merge_method(load_workflow(flow)) == "squash"
    flow.write_text(TWO_REPO_FLOW.replace('order="api,web"', 'order="api,web", method=fast'))
    with pytest.raises(RunRefused, match="merge node 'land' method=fast: is not a merge method"):
        merge_method(load_workflow(flow))


def test_a_graphql_timeout_error_is_retried_not_taken_for_an_unreadable_repository(
        github: FakeGitHub) -> None:
    from delivery.testing.github import faults

    github.inject(faults.graphql_errors(faults.TRANSIENT_GRAPHQL_ERROR))
    code, out, _ = preflight(*REPOS)
    assert (code, out.splitlines()[-1]) == (0, "ok")
    assert github.count("POST", "/api/graphql") == 2
