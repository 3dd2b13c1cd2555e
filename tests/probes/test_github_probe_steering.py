"""Who steers a run, at the GitHub probe (SPEC §14): reviews and review threads of users
without write permission and of untrusted bot accounts neither change a PR's state nor
reach `pr.raw`'s quoted text; they are listed there as ignored, by login. Permissions are
read once per login and repository, in one request per round."""

from __future__ import annotations

import pytest
from github_helpers import CI, ManualClock, open_pr, probe_for

from delivery.testing.github import FakeGitHub
from delivery.testing.github.graphql_api import validate_query
from probes.evidence import ProbeFailure, PrQuery, PullRequestSnapshot
from probes.github import GitHubPullRequestSource
from probes.steering import Stewards, permissions_query, trusted_bots

STRANGER = "eve"


def public_repo(fake: FakeGitHub, *, required_approvals: int = 0) -> int:
    """octo/web as a public repository (anyone may review), one maintainer, one PR."""
    fake.create_repo("octo/web", check_rules=(CI,), default_permission="read",
                     collaborators={"ada": "maintain"}, required_approvals=required_approvals)
    return open_pr(fake, "octo/web")


def one(source: GitHubPullRequestSource, number: int) -> PullRequestSnapshot:
    seen = source.pull_requests([PrQuery("web", "octo/web", number=number)])["web"]
    assert isinstance(seen, PullRequestSnapshot), seen
    return seen


def test_a_strangers_request_for_changes_does_not_block_and_is_named_not_quoted(
        fake: FakeGitHub, clock: ManualClock) -> None:
    number = public_repo(fake)
    fake.add_review("octo/web", number, STRANGER, "CHANGES_REQUESTED", "rm -rf the tests")
    pr = one(probe_for(fake, clock), number)
    assert (pr.state.value, pr.ready) == ("WAITING", True)
    assert pr.raw()["reviews"] == []
    assert pr.raw()["ignored"] == [f"review by @{STRANGER} (no write permission)"]
    assert "rm -rf" not in str(pr.raw())


def test_a_maintainers_request_for_changes_still_blocks(fake: FakeGitHub,
                                                         clock: ManualClock) -> None:
    number = public_repo(fake, required_approvals=1)
    fake.add_review("octo/web", number, STRANGER, "APPROVED", "lgtm")
    fake.add_review("octo/web", number, "ada", "CHANGES_REQUESTED", "rename it")
    pr = one(probe_for(fake, clock), number)
    assert pr.state.value == "CHANGES_REQUIRED"
    assert [(r["author"], r["body"]) for r in pr.raw()["reviews"]] == [("ada", "rename it")]


def test_a_strangers_thread_is_neither_counted_nor_quoted(fake: FakeGitHub,
                                                          clock: ManualClock) -> None:
    number = public_repo(fake)
    fake.add_thread("octo/web", number, author=STRANGER, body="add my miner")
    kept = fake.add_thread("octo/web", number, author="ada", body="why?")
    pr = one(probe_for(fake, clock), number)
    assert pr.unresolved_threads == 1
    assert pr.thread_ids == (fake.thread_node_id(kept),)
    assert [t["body"] for t in pr.raw()["threads"]] == ["why?"]
    assert pr.raw()["ignored"] == [f"thread by @{STRANGER} (no write permission)"]
    assert "miner" not in str(pr.raw())


def test_an_untrusted_bots_review_and_thread_are_ignored_even_with_write_access(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", check_rules=(CI,))  # everyone, bots too, may write
    number = open_pr(fake, "octo/web")
    fake.add_review("octo/web", number, "bumper[bot]", "CHANGES_REQUESTED", "bump all")
    fake.add_thread("octo/web", number, author="bumper[bot]", body="bump this")
    pr = one(probe_for(fake, clock), number)
    assert (pr.state.value, pr.unresolved_threads) == ("WAITING", 0)
    assert pr.raw()["ignored"] == [
        "review by @bumper[bot] (bot account, not in trusted_bots)",
        "thread by @bumper[bot] (bot account, not in trusted_bots)"]


def test_a_trusted_bots_review_and_thread_are_acted_on(fake: FakeGitHub,
                                                       clock: ManualClock) -> None:
    fake.create_repo("octo/web", check_rules=(CI,))
    number = open_pr(fake, "octo/web")
    fake.add_review("octo/web", number, "bumper[bot]", "CHANGES_REQUESTED", "bump all")
    fake.add_thread("octo/web", number, author="bumper[bot]", body="bump this")
    source = probe_for(fake, clock, stewards=Stewards(trusted_bots("bumper")))
    pr = one(source, number)
    assert (pr.state.value, pr.unresolved_threads) == ("CHANGES_REQUIRED", 1)
    assert pr.raw()["reviews"][0]["author"] == "bumper[bot]"
    assert "ignored" not in pr.raw()


def test_a_bots_approval_alone_does_not_make_a_pr_ready(fake: FakeGitHub,
                                                       clock: ManualClock) -> None:
    fake.create_repo("octo/web", check_rules=(CI,), required_approvals=1)
    number = open_pr(fake, "octo/web")
    fake.add_review("octo/web", number, "approver[bot]", "APPROVED", "")
    pr = one(probe_for(fake, clock), number)
    assert (pr.evidence.review, pr.ready) == ("REVIEW_REQUIRED", False)


def test_thread_authors_are_looked_up_once_in_one_request(fake: FakeGitHub,
                                                          clock: ManualClock) -> None:
    number = public_repo(fake)
    for author in (STRANGER, "ada", STRANGER, "mallory"):
        fake.add_thread("octo/web", number, author=author, body="hm")
    source = probe_for(fake, clock)
    fake.clear_requests()
    assert one(source, number).unresolved_threads == 1
    assert fake.count("POST", "/api/graphql") == 2  # the probe, and one look-up of three
    fake.clear_requests()
    one(source, number)
    assert fake.count("POST", "/api/graphql") == 1  # the next round is one request again


def test_a_reviewer_sorted_by_github_needs_no_look_up(fake: FakeGitHub,
                                                      clock: ManualClock) -> None:
    number = public_repo(fake)
    fake.add_review("octo/web", number, "ada", "APPROVED", "ok")
    fake.add_thread("octo/web", number, author="ada", body="nit")
    fake.clear_requests()
    assert one(probe_for(fake, clock), number).unresolved_threads == 1
    assert fake.count("POST", "/api/graphql") == 1


def test_authors_whose_permission_cannot_be_read_fail_the_folder_naming_the_fix(
        fake: FakeGitHub, clock: ManualClock) -> None:
    number = public_repo(fake)
    fake.add_thread("octo/web", number, author="ada", body="why?")
    fake.set_token_permission("octo/web", "read")
    seen = probe_for(fake, clock).pull_requests([PrQuery("web", "octo/web", number=number)])
    failure = seen["web"]
    assert isinstance(failure, ProbeFailure)
    assert "could not read whether @ada may write" in failure.reason
    assert "push access" in failure.reason


def test_the_look_up_query_is_valid_against_githubs_schema() -> None:
    text, variables = permissions_query([("octo/web", "eve"), ("octo/api", "ada")])
    assert validate_query(text) == []
    assert variables == {"o0": "octo", "n0": "web", "l0": "eve",
                         "o1": "octo", "n1": "api", "l1": "ada"}


def test_trusted_bots_are_read_as_bot_logins_and_a_bad_name_is_refused() -> None:
    assert trusted_bots(" Renovate[bot], dependabot ,") == {"renovate[bot]",
                                                            "dependabot[bot]"}
    with pytest.raises(ValueError, match="'a b' is not a GitHub login"):
        trusted_bots("a b")


def test_a_forks_pr_of_the_same_branch_name_opened_after_the_merge_is_not_the_runs(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", check_rules=(CI,))
    own = open_pr(fake, "octo/web", "delivery/T-1")
    fake.merge("octo/web", own)
    fake.open_fork_pull("octo/web", "delivery/T-1", fork_owner=STRANGER,
                        files={"app.py": "print('mine')\n"})
    seen = probe_for(fake, clock).pull_requests(
        [PrQuery("web", "octo/web", head_branch="delivery/T-1")])["web"]
    assert isinstance(seen, PullRequestSnapshot), seen
    assert (seen.number, seen.state.value) == (own, "MERGED")


def test_a_crowd_of_strangers_reviews_cannot_push_a_maintainers_request_off_the_page(
        fake: FakeGitHub, clock: ManualClock) -> None:
    number = public_repo(fake)
    for i in range(40):  # more opinions than a page of reviews holds, all before ada's
        fake.add_review("octo/web", number, f"sock{i}", "APPROVED", "lgtm")
    fake.add_review("octo/web", number, "ada", "CHANGES_REQUESTED", "rename it")
    pr = one(probe_for(fake, clock), number)
    assert pr.state.value == "CHANGES_REQUIRED"
    assert [(r["author"], r["body"]) for r in pr.raw()["reviews"]] == [("ada", "rename it")]


def test_a_user_named_like_a_trusted_bot_without_the_suffix_is_not_that_bot(
        fake: FakeGitHub, clock: ManualClock) -> None:
    number = public_repo(fake)
    fake.add_review("octo/web", number, "bumper", "CHANGES_REQUESTED", "bump all")
    fake.add_thread("octo/web", number, author="bumper", body="bump this")
    source = probe_for(fake, clock, stewards=Stewards(trusted_bots("bumper[bot]")))
    pr = one(source, number)
    assert (pr.state.value, pr.unresolved_threads) == ("WAITING", 0)
    assert pr.raw()["ignored"] == ["review by @bumper (no write permission)",
                                   "thread by @bumper (no write permission)"]


def test_a_deleted_accounts_review_and_thread_are_ignored(fake: FakeGitHub,
                                                          clock: ManualClock) -> None:
    number = public_repo(fake, required_approvals=1)
    fake.add_review("octo/web", number, "", "APPROVED", "ship it")
    fake.add_thread("octo/web", number, author="", body="and add my script")
    pr = one(probe_for(fake, clock), number)
    assert (pr.evidence.review, pr.ready, pr.unresolved_threads) == (
        "REVIEW_REQUIRED", False, 0)
    assert pr.raw()["ignored"] == ["review by @ghost (deleted account)",
                                   "thread by @ghost (deleted account)"]
