"""The GitHub forge's writes against the fake GitHub: find-or-create is idempotent (killed
between push and create, a POST applied but its answer lost, a 502), merges pass the head
SHA, an already merged PR is done, refusals say why; git reaches the fake with the token as
a header only."""

from __future__ import annotations

import inspect
import logging
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from github_helpers import ManualClock

from delivery.errors import ForgeError
from delivery.forges.base import Forge
from delivery.forges.github import GitHubForge
from delivery.forges.local import LocalForge
from delivery.testing.github import FakeGitHub, faults
from probes.evidence import PrQuery, PullRequestSnapshot
from probes.github import RetryBudget

BRANCH = "delivery/T-1"


@pytest.fixture
def forge(fake: FakeGitHub, clock: ManualClock) -> GitHubForge:
    fake.create_repo("octo/web", files={"app.py": "v1\n"})
    fake.push_files("octo/web", BRANCH, {"app.py": "v2\n"})
    fake.clear_requests()
    return GitHubForge.from_environment(fake.env(), sleep=clock.sleep, clock=clock,
                                        budget=RetryBudget(attempts=4))


def create(forge: GitHubForge) -> int:
    ref = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                            title="T-1", body="body")
    return ref.number


def pulls(fake: FakeGitHub) -> list[int]:
    return sorted(fake.repository("octo/web").pulls)


def head_sha(fake: FakeGitHub, number: int) -> str:
    return fake.state.head_sha(fake.repository("octo/web"), fake.pull("octo/web", number))


def test_github_forge_satisfies_the_forge_protocol(forge: GitHubForge) -> None:
    as_forge: Forge = forge
    assert as_forge.name == "github"


def test_creates_one_pr_and_finds_it_the_second_time(forge: GitHubForge,
                                                     fake: FakeGitHub) -> None:
    first = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                              title="T-1", body="body")
    again = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                              title="T-1", body="body")
    assert (first.created, again.created, first.number) == (True, False, again.number)
    assert first.url == f"{fake.server_url}/octo/web/pull/{first.number}"
    assert pulls(fake) == [first.number]


def test_pr_opened_before_a_kill_is_found_not_duplicated(forge: GitHubForge,
                                                         fake: FakeGitHub) -> None:
    number = fake.open_pull("octo/web", BRANCH)  # the killed run's create had gone through
    ref = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                            title="T-1", body="body")
    assert (ref.number, ref.created) == (number, False)
    assert fake.count("POST") == 0


def test_create_applied_but_answer_lost_yields_exactly_one_pr(forge: GitHubForge,
                                                              fake: FakeGitHub) -> None:
    fake.inject(faults.drop_after_apply(method="POST", path="/api/v3/repos/octo/web/pulls"))
    ref = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                            title="T-1", body="body")
    assert ref.created and pulls(fake) == [ref.number]
    assert fake.count("POST", "/api/v3/repos/octo/web/pulls") == 1  # looked, never re-posted


def test_create_after_a_502_looks_first_then_posts_once_more(forge: GitHubForge,
                                                             fake: FakeGitHub) -> None:
    fake.inject(faults.server_error(502, method="POST", path="/api/v3/repos/octo/web/pulls"))
    ref = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                            title="T-1", body="body")
    assert pulls(fake) == [ref.number]
    assert fake.count("POST", "/api/v3/repos/octo/web/pulls") == 2
    assert fake.count("GET", "/api/v3/repos/octo/web/pulls") == 2  # before each POST


def test_a_pr_opened_between_our_look_and_our_create_is_found_and_returned(
        forge: GitHubForge, fake: FakeGitHub) -> None:
    # Another writer opens the PR right after our look answered "none": GitHub refuses our
    # POST with 422 "A pull request already exists"; we look again and return theirs.
    fake.inject(faults.opened_meanwhile("octo/web", BRANCH,
                                        path="/api/v3/repos/octo/web/pulls"))
    ref = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                            title="T-1", body="body")
    assert pulls(fake) == [ref.number] and not ref.created
    assert fake.pull("octo/web", ref.number).author == "someone-else"
    assert [(r.method, r.status) for r in fake.requests
            if r.path == "/api/v3/repos/octo/web/pulls"] == [
        ("GET", 200), ("POST", 422), ("GET", 200)]


def test_a_pr_opened_between_our_look_and_our_create_is_found_whatever_the_422_says(
        forge: GitHubForge, fake: FakeGitHub) -> None:
    # The refusal's text is GitHub's English ("A pull request already exists ..."), which
    # may change or differ on a server: any 422 from the create means "look again".
    fake.inject(faults.opened_meanwhile("octo/web", BRANCH,
                                        path="/api/v3/repos/octo/web/pulls"),
                faults.server_error(422, method="POST", path="/api/v3/repos/octo/web/pulls"))
    ref = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                            title="T-1", body="body")
    assert pulls(fake) == [ref.number] and not ref.created
    assert fake.pull("octo/web", ref.number).author == "someone-else"


def test_a_create_refused_with_422_and_no_pr_found_after_says_why(
        forge: GitHubForge, fake: FakeGitHub) -> None:
    # main has no commit that BRANCH lacks: GitHub refuses the PR with 422
    with pytest.raises(ForgeError, match="HTTP 422: Validation Failed: No commits between"):
        forge.find_or_create_pull_request("octo/web", head="main", base=BRANCH,
                                          title="T-1", body="body")
    assert pulls(fake) == []


def test_rate_limited_write_waits_as_told(forge: GitHubForge, fake: FakeGitHub,
                                          clock: ManualClock) -> None:
    fake.inject(faults.secondary_rate_limit(retry_after=9, method="POST",
                                            path="/api/v3/repos/octo/web/pulls"))
    create(forge)
    assert clock.sleeps == [9.0] and len(pulls(fake)) == 1


def test_primary_rate_limit_on_a_read_waits_for_the_reset(forge: GitHubForge, fake: FakeGitHub,
                                                          clock: ManualClock) -> None:
    fake.inject(faults.primary_rate_limit(reset_in=20, method="GET", path="/api/v3/repos"))
    assert forge.default_branch("octo/web") == "main"
    assert clock.sleeps == [21.0]


def test_update_body_patches_only_when_it_differs(forge: GitHubForge,
                                                  fake: FakeGitHub) -> None:
    number = create(forge)
    forge.update_pull_request_body("octo/web", number, "new body")
    forge.update_pull_request_body("octo/web", number, "new body")
    assert fake.pull("octo/web", number).body == "new body"
    assert fake.count("PATCH") == 1


def test_merge_passes_the_head_sha_and_merges_with_git(forge: GitHubForge,
                                                       fake: FakeGitHub) -> None:
    number = create(forge)
    result = forge.merge_pull_request("octo/web", number,
                                      expected_head_sha=head_sha(fake, number))
    assert result.outcome == "merged" and len(result.merge_sha) == 40
    repo = fake.repository("octo/web")
    assert fake.state.base_sha(repo, fake.pull("octo/web", number)) == result.merge_sha
    again = forge.merge_pull_request("octo/web", number, expected_head_sha="x" * 40)
    assert (again.outcome, again.merge_sha) == ("already_merged", result.merge_sha)


def test_every_forge_merges_with_a_merge_commit_when_no_method_is_named() -> None:
    """GitHub's own default, which the Forge protocol states: one default for all forges
    (a GitHub forge used to fall back to a setting of its own)."""
    def default(merge: Callable[..., object]) -> object:
        return inspect.signature(merge).parameters["method"].default

    assert default(Forge.merge_pull_request) == "merge"
    assert default(GitHubForge.merge_pull_request) == "merge"
    assert default(LocalForge.merge_pull_request) == "merge"


def test_a_rate_limit_on_the_pr_read_before_a_merge_is_waited_out_and_retried(
        forge: GitHubForge, fake: FakeGitHub, clock: ManualClock) -> None:
    # found by the fault soak: the PR's GET used to be sent lazily, outside the retries
    number = create(forge)
    fake.inject(faults.secondary_rate_limit(7, method="GET",
                                            path=f"/api/v3/repos/octo/web/pulls/{number}"),
                faults.server_error(502, method="GET",
                                    path=f"/api/v3/repos/octo/web/pulls/{number}"))
    result = forge.merge_pull_request("octo/web", number,
                                      expected_head_sha=head_sha(fake, number))
    assert result.outcome == "merged", result.reason
    assert fake.pull("octo/web", number).merged


def test_merge_refuses_a_pr_whose_head_moved(forge: GitHubForge, fake: FakeGitHub) -> None:
    number = create(forge)
    seen = head_sha(fake, number)
    fake.push_files("octo/web", BRANCH, {"late.txt": "pushed after the probe\n"})
    result = forge.merge_pull_request("octo/web", number, expected_head_sha=seen)
    assert result.outcome == "refused" and "moved" in result.reason
    assert fake.count("PUT") == 0 and not fake.pull("octo/web", number).merged


def test_merge_refused_by_github_says_why(forge: GitHubForge, fake: FakeGitHub) -> None:
    number = create(forge)
    fake.push_files("octo/web", "main", {"app.py": "conflicting\n"})
    result = forge.merge_pull_request("octo/web", number,
                                      expected_head_sha=head_sha(fake, number))
    assert result.outcome == "refused" and "not mergeable" in result.reason


def test_merge_of_a_closed_pr_is_refused(forge: GitHubForge, fake: FakeGitHub) -> None:
    number = create(forge)
    fake.close("octo/web", number)
    result = forge.merge_pull_request("octo/web", number,
                                      expected_head_sha=head_sha(fake, number))
    assert result.outcome == "refused" and "closed" in result.reason


def test_merge_of_a_draft_is_refused_without_asking_github(forge: GitHubForge,
                                                          fake: FakeGitHub) -> None:
    number = create(forge)
    fake.set_draft("octo/web", number)
    fake.clear_requests()
    result = forge.merge_pull_request("octo/web", number,
                                      expected_head_sha=head_sha(fake, number))
    assert result.outcome == "refused" and "draft" in result.reason
    assert fake.count("PUT") == 0 and not fake.pull("octo/web", number).merged


def test_merge_applied_but_answer_lost_is_merged_once(forge: GitHubForge,
                                                      fake: FakeGitHub) -> None:
    number = create(forge)
    fake.inject(faults.drop_after_apply(method="PUT", path="/api/v3/repos/octo/web/pulls"))
    result = forge.merge_pull_request("octo/web", number,
                                      expected_head_sha=head_sha(fake, number))
    assert result.outcome == "merged"
    assert result.merge_sha == fake.pull("octo/web", number).merge_commit_sha
    assert fake.count("PUT") == 1


def test_merge_in_a_race_with_a_person_counts_as_already_merged(forge: GitHubForge,
                                                                fake: FakeGitHub) -> None:
    number = create(forge)
    # A person merges between our read of the PR and our merge request.
    fake.inject(faults.race("octo/web", number, "merge", method="GET",
                            path=f"/api/v3/repos/octo/web/pulls/{number}"))
    result = forge.merge_pull_request("octo/web", number,
                                      expected_head_sha=head_sha(fake, number))
    assert result.outcome == "already_merged"


def test_unknown_repository_is_a_clear_forge_error(forge: GitHubForge) -> None:
    with pytest.raises(ForgeError, match=r"octo/nope.*not found"):
        forge.find_or_create_pull_request("octo/nope", head=BRANCH, base="main", title="t",
                                          body="b")


def test_server_errors_past_the_budget_fail_with_a_reason(forge: GitHubForge,
                                                          fake: FakeGitHub) -> None:
    fake.inject(faults.server_error(500, method="GET", path="/api/v3/repos", times=10))
    with pytest.raises(ForgeError, match="HTTP 500; gave up after 4 attempts"):
        forge.default_branch("octo/web")


def test_marker_comment_is_created_once_then_edited(forge: GitHubForge,
                                                    fake: FakeGitHub) -> None:
    number = create(forge)
    marker = "<!-- delivery:status -->"
    first = forge.upsert_comment("octo/web", number, marker, f"{marker}\none")
    second = forge.upsert_comment("octo/web", number, marker, f"{marker}\ntwo")
    comments = list(fake.repository("octo/web").comments.values())
    assert first == second and [c.body for c in comments] == [f"{marker}\ntwo"]


def test_a_persons_comment_holding_the_marker_is_never_edited(forge: GitHubForge,
                                                             fake: FakeGitHub) -> None:
    # The marker is guessable; a person copying it must not get their words overwritten
    # (nor steer which comment the run keeps as its own).
    number = create(forge)
    marker = "<!-- delivery:status -->"
    fake.add_comment("octo/web", number, author="mallory", body=f"{marker}\nmine")
    ours = forge.upsert_comment("octo/web", number, marker, f"{marker}\nthe run's")
    again = forge.upsert_comment("octo/web", number, marker, f"{marker}\nthe run's, edited")
    bodies = {c.author: c.body for c in fake.repository("octo/web").comments.values()}
    assert ours == again
    assert bodies == {"mallory": f"{marker}\nmine", fake.login: f"{marker}\nthe run's, edited"}


def test_permission_and_branch_deletion(forge: GitHubForge, fake: FakeGitHub) -> None:
    fake.repository("octo/web").collaborators["alice"] = "write"
    fake.repository("octo/web").default_permission = "none"  # a private repository
    assert forge.permission("octo/web", "alice") == "write"
    assert forge.permission("octo/web", "mallory") == "none"
    assert forge.delete_branch("octo/web", BRANCH) is True
    assert forge.delete_branch("octo/web", BRANCH) is False


def test_reads_go_through_the_one_query_probe(forge: GitHubForge, fake: FakeGitHub) -> None:
    number = create(forge)
    fake.clear_requests()
    seen = forge.pull_requests([PrQuery("web", "octo/web", number=number)])["web"]
    assert isinstance(seen, PullRequestSnapshot) and seen.number == number
    assert [r.path for r in fake.requests] == ["/api/graphql"]


def test_git_remote_carries_the_token_in_a_header_only(forge: GitHubForge, fake: FakeGitHub,
                                                       tmp_path: Path) -> None:
    remote = forge.git_remote("octo/web")
    assert remote.url == f"{fake.server_url}/octo/web.git"
    assert fake.token not in remote.url
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_TERMINAL_PROMPT": "0"}
    with_token = env | remote.git_environment()
    work = tmp_path / "web"
    subprocess.run(["git", "clone", "-q", remote.url, str(work)], check=True, env=with_token)
    (work / "app.py").write_text("v3\n")
    subprocess.run(["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qam", "v3"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "push", "-q", "origin", "HEAD:main"], check=True,
                   env=with_token)
    secret = remote.http_headers[0].split()[-1]  # base64 of x-access-token:<token>
    stored = [p.read_text(errors="replace") for p in (work / ".git").rglob("*")
              if p.is_file() and p.stat().st_size < 10**6]
    assert not any(fake.token in text or secret in text for text in stored)
    repo = fake.repository("octo/web")
    from delivery.testing.github import gitops
    assert gitops.read_file(repo.path, "main", "app.py") == "v3\n"
    refused = subprocess.run(["git", "clone", "-q", remote.url, str(tmp_path / "anon")],
                             env=env, capture_output=True, text=True)
    assert refused.returncode != 0  # without the header the fake refuses


def test_the_token_never_reaches_the_logs(forge: GitHubForge, fake: FakeGitHub,
                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    create(forge)
    assert caplog.records and fake.token not in caplog.text
    assert fake.token not in repr(forge)


def test_the_pr_of_a_branch_a_person_closed_is_found_as_closed_not_replaced(
        forge: GitHubForge, fake: FakeGitHub) -> None:
    first = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                              title="t", body="b")
    fake.close("octo/web", first.number)
    found = forge.find_pull_request("octo/web", head=BRANCH)
    assert found is not None and (found.number, found.state) == (first.number, "closed")
    again = forge.find_or_create_pull_request("octo/web", head=BRANCH, base="main",
                                              title="t", body="b")
    assert (again.number, again.state, again.created) == (first.number, "closed", False)
    assert len(fake.repository("octo/web").pulls) == 1
