"""Acceptance (issue 21, item 1): the `delivery/change-set` commit status on the fake GitHub
with branch protection requiring it. While one PR of a two-repository set fails its CI, a
person cannot merge the other; once both are ready, the run merges both in order. The probe
never waits on the run's own status, and a round where nothing changed writes no status."""

from __future__ import annotations

from pathlib import Path

import pytest
from change_set_helpers import (
    BRANCH,
    REPOS,
    land_flow,
    probe_flow,
    protected_repos,
    publish_flow,
    run_on,
    status,
    sticky_comments,
)

from delivery.testing.github import FakeGitHub
from delivery.testing.github.state import MergeRefused

PUBLISH = publish_flow(api="BUG")
WAITING = "waiting for the rest of the change set"  # the same whichever PR blocks


def test_a_person_cannot_merge_one_pr_while_the_other_fails_and_both_merge_once_ready(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        protected_repos(github)
        published = run_on(github, tmp_path, PUBLISH, "publish")
        assert published.status == "succeeded", published.failure_reason
        assert published.context["api.pr.state"] == "CI_FAILED"
        # web's own checks pass; the set's status waits (the sticky comment names api)
        assert published.context["web.pr.ready"] is True
        assert status(github, "octo/web") == ("PENDING", WAITING)
        assert status(github, "octo/api") == ("PENDING", WAITING)
        with pytest.raises(MergeRefused, match="delivery/change-set"):
            github.merge("octo/web", 1)  # a person merging web alone is refused
        assert not github.pull("octo/web", 1).merged

        # a person fixes api on the run's branch; the next probe finds the set ready
        # although its heads carry no success yet (readiness never waits on our status)
        github.push_files("octo/api", BRANCH, {"app.py": "print(1)\n"}, "fix")
        landed = run_on(github, tmp_path, land_flow(), "land")
        assert landed.status == "succeeded", landed.failure_reason
        api, web = github.pull("octo/api", 1), github.pull("octo/web", 1)
        assert api.merged and web.merged and (api.merged_at or "") <= (web.merged_at or "")
        assert status(github, "octo/web") == (
            "SUCCESS", "every pull request of the change set is ready")


def test_a_probe_round_where_nothing_changed_writes_no_status(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        protected_repos(github)
        published = run_on(github, tmp_path, PUBLISH, "publish")
        assert published.status == "succeeded", published.failure_reason
        writes = [r.path for r in github.requests if "/statuses/" in r.path]
        # written once per head by the publish; `look` and `again` saw nothing change
        assert sorted(writes) == sorted(
            f"/api/v3/repos/{repo}/statuses/{github.pull(repo, 1).last_head_sha}"
            for repo in REPOS.values())


def test_a_status_is_not_rewritten_when_another_pr_changed_and_the_set_still_waits(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        protected_repos(github)
        for repository in REPOS.values():
            github.hold_checks(repository)  # both CIs still running after the publish
        assert run_on(github, tmp_path, publish_flow(), "publish").status == "succeeded"
        github.hold_checks("octo/api", False)  # api's CI passes; web's still runs
        since = len(github.requests)
        looked = run_on(github, tmp_path, probe_flow(), "look")
        assert looked.status == "succeeded", looked.failure_reason
        assert looked.context["api.pr.ready"] is True
        assert looked.context["web.pr.ready"] is False
        assert [r.path for r in github.requests[since:] if "/statuses/" in r.path] == []
        assert status(github, "octo/web") == ("PENDING", WAITING)


def test_a_closed_pr_fails_the_status_of_the_others(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        protected_repos(github)
        assert run_on(github, tmp_path, PUBLISH, "publish").status == "succeeded"
        github.close("octo/api", 1)
        looked = run_on(github, tmp_path, land_flow(), "land")
        assert looked.status == "failed"  # the merge refuses: api was closed
        assert status(github, "octo/web") == (
            "FAILURE", "api #1 was closed without being merged")
        assert not github.pull("octo/web", 1).merged


def test_each_pr_carries_one_sticky_comment_with_the_sets_table_edited_in_place(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        protected_repos(github)
        assert run_on(github, tmp_path, PUBLISH, "publish").status == "succeeded"
        [api_first] = sticky_comments(github, "octo/api")
        assert "| api | [#1](" in api_first and "| CI_FAILED | FAILURE | 0 |" in api_first
        assert "pending: waiting for api #1: ci failed" in api_first
        edits = [r for r in github.requests if r.method == "PATCH" and "/comments/" in r.path]
        assert edits == []  # `look` and `again` saw the same table: nothing rewritten
        github.push_files("octo/api", BRANCH, {"app.py": "print(1)\n"}, "fix")
        assert run_on(github, tmp_path, land_flow(), "land").status == "succeeded"
        for repository in REPOS.values():
            [table] = sticky_comments(github, repository)
            assert table.count("| MERGED |") == 2, table
