"""Acceptance (SPEC §7.1 "Writes grow with the set, not with its square", issue 37 item 1)
on the fake GitHub: past 10 folders the set's table lives in one dashboard — the ticket's
sticky comment when the ticket is a GitHub issue, else one tracking issue the run opens —
and each PR's sticky comment holds its own row and the dashboard's link, so one folder's
change writes to that folder's PR and the dashboard, not to every PR of the set."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_helpers import (
    BRANCH,
    MARKER,
    After,
    api_writes,
    change_flow,
    folders,
    make_repos,
    probe_flow,
    run_on,
    sticky,
    written_objects,
)
from engine_helpers import cli, reply

from delivery.agents.base import Usage
from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.testing.github import FakeGitHub

pytestmark = pytest.mark.slow  # eleven repositories, pushed and probed
N = 11


def test_past_ten_folders_the_tickets_issue_holds_the_table_and_each_pr_only_its_row(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        repos = make_repos(github, N)
        github.create_repo("octo/tracker")
        ticket = github.create_issue("octo/tracker", "Change every folder")
        ran = run_on(github, tmp_path, change_flow(N, bug="f3"), "ship", repos,
                     ticket=f"octo/tracker#{ticket}")
        assert ran.status == "succeeded", ran.failure_reason
        [dashboard] = sticky(github, "octo/tracker", ticket)
        assert all(f"| {folder} | [#1](" in dashboard for folder in folders(N)), dashboard
        assert "waiting for f3 #1: ci failed" in dashboard
        link = f"{github.server_url}/octo/tracker/issues/{ticket}#issuecomment-"
        for folder, repository in repos.items():
            [own] = sticky(github, repository, 1)
            assert f"| {folder} | [#1](" in own and link in own, own
            assert not any(f"| {other} |" in own for other in folders(N) if other != folder)
            assert "waiting for" not in own  # no set-wide figure that others change


def test_without_a_github_ticket_one_tracking_issue_is_opened_and_found_again(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        repos = make_repos(github, N)
        assert run_on(github, tmp_path, change_flow(N), "ship", repos).status == "succeeded"
        # a second run on the branch never recorded the issue, as a run killed between
        # opening it and recording it: it finds the issue by its marker
        assert run_on(github, tmp_path, probe_flow(N), "look", repos).status == "succeeded"
        first = github.repository("octo/r0")  # the first folder's repository
        [tracking] = [issue for issue in first.issues.values() if MARKER in issue.body]
        assert all(f"| {folder} | [#1](" in tracking.body for folder in folders(N))
        link = f"{github.server_url}/octo/r0/issues/{tracking.number}"
        for repository in repos.values():
            [own] = sticky(github, repository, 1)
            assert link in own, own
        assert not any(MARKER in issue.body for repository in repos.values()
                       for issue in github.repository(repository).issues.values()
                       if repository != "octo/r0")


def test_one_folders_ci_result_writes_to_its_pr_and_the_dashboard_only(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        repos = make_repos(github, N, held=True)  # every CI still running after publish
        dot = change_flow(N).replace("look -> exit", "look -> again -> exit").replace(
            "  start ->", '  again [type=probe, probe="pr,threads"]\n  start ->')
        marks: dict[str, int] = {}

        def release_one() -> None:
            marks["before"] = len(github.requests)
            github.hold_checks("octo/r4", False)  # f4's CI finishes, the rest still run

        ran = run_on(github, tmp_path, dot, "ship", repos, progress=After("look", release_one))
        assert ran.status == "succeeded", ran.failure_reason
        touched = written_objects(github, api_writes(github, marks["before"]))
        assert "octo/r4#1" in touched
        assert len(touched) <= 3, sorted(touched)
        assert github.pull("octo/r4", 1).head == BRANCH


def test_with_a_state_repository_the_tracking_issue_is_opened_there(
        fake_github_env: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    github = fake_github_env
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repos = make_repos(github, N)
    github.create_repo("octo/state", files={"README.md": "runs\n"})
    flow = tmp_path / "flow.dot"
    flow.write_text(change_flow(N), encoding="utf-8")
    args = ["run", str(flow), "--input", "ticket=T-9", "--branch", BRANCH, "--state",
            "git:octo/state", *(part for folder, repository in repos.items()
                                for part in ("--repo", f"{folder}={repository}"))]
    code, _, err = cli(*args)
    assert code == 0, err
    [tracking] = [issue for issue in github.repository("octo/state").issues.values()
                  if MARKER in issue.body]
    assert all(f"| {folder} | [#1](" in tracking.body for folder in folders(N))
    assert not github.repository("octo/r0").issues


def test_past_ten_folders_the_budget_warning_is_on_the_dashboard(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        repos = make_repos(github, N)
        turn = ScriptedTurn(reply({}), files={f"{f}/app.py": "print(1)\n" for f in folders(N)},
                            usage=Usage(750, 100))
        dot = change_flow(N, graph=", budget_tokens=1000",
                          change='shape=box, prompt="change every folder"')
        ran = run_on(github, tmp_path, dot, "ship", repos,
                     agent=ScriptedAgent({"change": [turn]}))
        assert ran.status == "succeeded", ran.failure_reason
        [tracking] = [i for i in github.repository("octo/r0").issues.values()
                      if MARKER in i.body]
        [warning] = [line for line in tracking.body.splitlines() if "Warning" in line]
        assert "80% or more of its budget" in warning and "850 of 1,000" in warning
        for repository in repos.values():
            [own] = sticky(github, repository, 1)
            assert "Warning" not in own and "tokens" not in own


def test_a_ticket_the_token_may_not_comment_on_gets_no_dashboard_a_tracking_issue_does(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        repos = make_repos(github, N)
        github.create_repo("octo/tracker")
        ticket = github.create_issue("octo/tracker", "Change every folder")
        github.set_token_permission("octo/tracker", "read")
        ran = run_on(github, tmp_path, change_flow(N), "ship", repos,
                     ticket=f"octo/tracker#{ticket}")
        assert ran.status == "succeeded", ran.failure_reason
        assert sticky(github, "octo/tracker", ticket) == []
        [tracking] = [issue for issue in github.repository("octo/r0").issues.values()
                      if MARKER in issue.body]
        assert f"/octo/r0/issues/{tracking.number})" in sticky(github, "octo/r3", 1)[0]
