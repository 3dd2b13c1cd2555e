"""Acceptance (issue 21, item 3): the merge stage reads each PR again right before merging
it; a PR that changed is not merged and the stage says what changed. With `rollback=revert`
the PRs of the set merged before it get a revert PR each (found again, never doubled, when
the stage runs again); without it the stage names the PRs that stay merged."""

from __future__ import annotations

from pathlib import Path

from change_set_helpers import (
    BRANCH,
    REPOS,
    land_flow,
    protected_repos,
    publish_flow,
    run_on,
    sticky_comments,
)

from delivery.forges.github import REVERT_MUTATION
from delivery.testing.github import FakeGitHub, faults
from delivery.testing.github.graphql_api import validate_query

# GraphQL requests before the merge stage's re-read of web: preflight's (before the run's
# first write), look, the stop switch's read of the delivery:stop label before land, land's
# read, api's re-read
WEB_RECHECK = 5


def _published(github: FakeGitHub, root: Path) -> None:
    protected_repos(github)
    done = run_on(github, root, publish_flow(), "publish")
    assert done.status == "succeeded", done.failure_reason


def _person_pushes_to_web(github: FakeGitHub) -> faults.Fault:
    """A person pushes to web's branch after the stage read it, before its re-read."""
    return faults.between(lambda: github.push_files("octo/web", BRANCH, {"notes.md": "x\n"}),
                          after=WEB_RECHECK)


def test_a_pr_whose_head_moved_before_its_merge_is_not_merged_and_the_stage_says_so(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        _published(github, tmp_path)
        github.inject(_person_pushes_to_web(github))
        landed = run_on(github, tmp_path, land_flow(), "land")
        assert landed.status == "failed"
        assert "folder 'web': PR #1 was not merged: its head moved from" in \
            landed.failure_reason
        assert github.pull("octo/api", 1).merged and not github.pull("octo/web", 1).merged
        # without rollback=revert the stage names what stays merged, and reverts nothing
        assert "api #1 stay merged" in landed.failure_reason
        assert len(github.repository("octo/api").pulls) == 1


def test_a_pr_that_gained_an_unresolved_thread_is_not_merged(tmp_path: Path) -> None:
    with FakeGitHub() as github:
        _published(github, tmp_path)
        github.inject(faults.between(lambda: github.add_thread("octo/web", 1),
                                     after=WEB_RECHECK))
        landed = run_on(github, tmp_path, land_flow(), "land")
        assert landed.status == "failed"
        assert "web': PR #1 was not merged: it has 1 unresolved review thread(s)" in \
            landed.failure_reason


def test_rollback_revert_opens_one_revert_pr_per_merged_pr_also_when_run_again(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        _published(github, tmp_path)
        github.inject(_person_pushes_to_web(github))
        flow = land_flow(', rollback="revert"')
        landed = run_on(github, tmp_path, flow, "land")
        assert landed.status == "failed"
        api = github.repository("octo/api")
        assert sorted(api.pulls) == [1, 2]
        revert = api.pulls[2]
        assert revert.head == f"revert-1-{BRANCH}" and revert.state == "open"
        assert f"api #1 reverted by {github.server_url}/octo/api/pull/2" in \
            landed.failure_reason
        # the revert undoes the merge: its head holds main's content from before the merge
        from delivery.testing.github import gitops
        assert gitops.read_file(api.path, revert.head, "app.py") == "print(0)\n"
        for repository in REPOS.values():  # the sticky comments link the revert
            [comment] = sticky_comments(github, repository)
            assert f"api #1 is reverted by {github.server_url}/octo/api/pull/2" in comment

        # web is still not mergeable as the run saw it: the stage, run again, finds the
        # revert it opened instead of opening another
        github.add_thread("octo/web", 1)
        again = run_on(github, tmp_path, flow, "land-again")
        assert again.status == "failed"
        assert sorted(api.pulls) == [1, 2]
        assert "api #1 reverted by" in again.failure_reason


def test_the_revert_mutation_is_valid_against_githubs_schema() -> None:
    assert validate_query(REVERT_MUTATION) == []


def test_with_policy_each_a_pr_whose_head_moved_is_skipped_and_the_rest_merge(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        _published(github, tmp_path)
        github.inject(_person_pushes_to_web(github))
        landed = run_on(github, tmp_path, land_flow(', policy="each"'), "land")
        # web changed under the stage: not merged, left for the next probe, not a failure
        assert landed.status == "succeeded", landed.failure_reason
        assert github.pull("octo/api", 1).merged and not github.pull("octo/web", 1).merged
        skipped = [line for line in (landed.run_dir / "events.jsonl").read_text().splitlines()
                   if '"merge_skipped"' in line]
        assert len(skipped) == 1 and "its head moved from" in skipped[0]
