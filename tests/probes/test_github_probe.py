"""The GitHub PR probe against the fake GitHub: classification from GitHub's evidence,
one request per round, partial results, thread pages, the merge/close race."""

from __future__ import annotations

import json

from github_helpers import CI, ManualClock, open_pr, probe_for

from delivery.testing.github import CheckRule, FakeGitHub, faults
from delivery.testing.github.graphql_api import validate_query
from probes import github_query
from probes.evidence import ProbeFailure, PrQuery, PullRequestSnapshot
from probes.facts import pr_facts


def observe(fake: FakeGitHub, clock: ManualClock, *queries: PrQuery) -> dict[str, object]:
    return dict(probe_for(fake, clock).pull_requests(list(queries)))


def one(fake: FakeGitHub, clock: ManualClock, repo: str, number: int) -> PullRequestSnapshot:
    seen = observe(fake, clock, PrQuery("f", repo, number=number))["f"]
    assert isinstance(seen, PullRequestSnapshot), seen
    return seen


# -- classification ---------------------------------------------------------------------
def test_ready_pr_is_waiting_and_ready(fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", check_rules=(CI,))
    pr = one(fake, clock, "octo/web", open_pr(fake, "octo/web"))
    assert (pr.state.value, pr.ready, pr.evidence.checks) == ("WAITING", True, "SUCCESS")


def test_a_draft_pr_waits_until_marked_ready(fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", check_rules=(CI,))
    number = open_pr(fake, "octo/web")
    fake.set_draft("octo/web", number)
    pr = one(fake, clock, "octo/web", number)
    assert (pr.state.value, pr.ready, pr.evidence.draft) == ("WAITING", False, True)
    assert pr.raw()["draft"] is True and pr.extra["merge_state_status"] == "DRAFT"
    fake.set_draft("octo/web", number, False)
    assert one(fake, clock, "octo/web", number).ready


def test_merged_pr_is_merged(fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    fake.merge("octo/web", number)
    assert one(fake, clock, "octo/web", number).state.value == "MERGED"


def test_closed_pr_is_closed(fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    fake.close("octo/web", number)
    assert one(fake, clock, "octo/web", number).state.value == "CLOSED"


def test_conflicting_content_is_conflicts_with_evidence(fake: FakeGitHub,
                                                        clock: ManualClock) -> None:
    fake.create_repo("octo/web", files={"app.py": "v1\n"})
    number = open_pr(fake, "octo/web", files={"app.py": "mine\n"})
    fake.push_files("octo/web", "main", {"app.py": "theirs\n"})
    pr = one(fake, clock, "octo/web", number)
    assert pr.state.value == "CONFLICTS"
    assert "conflicts with main" in pr.raw()["conflict"]


def test_failing_check_run_is_ci_failed_with_name_link_and_summary(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", check_rules=(CI,))
    pr = one(fake, clock, "octo/web", open_pr(fake, "octo/web", files={"app.py": "BUG\n"}))
    assert pr.state.value == "CI_FAILED"
    [check] = pr.raw()["failing_checks"]
    assert check["name"] == "ci" and check["conclusion"] == "FAILURE"
    assert check["details_url"].startswith(fake.server_url + "/octo/web/runs/")
    assert "BUG found" in check["summary"]


def test_check_command_runs_on_the_head_tree(fake: FakeGitHub, clock: ManualClock) -> None:
    rule = CheckRule("tests", command=["sh", "-c", "grep -q ok app.py || { echo no ok; exit 1; }"])
    fake.create_repo("octo/web", check_rules=(rule,))
    good = open_pr(fake, "octo/web", "good", files={"app.py": "ok\n"})
    bad = open_pr(fake, "octo/web", "bad", files={"app.py": "nope\n"})
    assert one(fake, clock, "octo/web", good).state.value == "WAITING"
    failing = one(fake, clock, "octo/web", bad)
    assert failing.state.value == "CI_FAILED" and "no ok" in failing.failing_checks[0].summary


def test_failing_status_context_is_ci_failed(fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    sha = fake.state.head_sha(fake.repository("octo/web"), fake.pull("octo/web", number))
    fake.set_status("octo/web", sha, "ext/ci", "failure", "https://ci.test/1", "lint failed")
    pr = one(fake, clock, "octo/web", number)
    assert pr.state.value == "CI_FAILED"
    assert pr.failing_checks[0].details_url == "https://ci.test/1"


def test_pending_checks_are_waiting_not_ready(fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", check_rules=(CI,))
    fake.hold_checks("octo/web")
    pr = one(fake, clock, "octo/web", open_pr(fake, "octo/web"))
    assert (pr.state.value, pr.ready, pr.extra["pending_checks"]) == ("WAITING", False, ["ci"])


def test_changes_requested_review_is_changes_required_with_body(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", required_approvals=1)
    number = open_pr(fake, "octo/web")
    fake.add_review("octo/web", number, "alice", "CHANGES_REQUESTED", "rename the flag")
    pr = one(fake, clock, "octo/web", number)
    assert pr.state.value == "CHANGES_REQUIRED"
    review = fake.pull("octo/web", number).reviews[0]
    assert pr.raw()["reviews"] == [
        {"id": fake.review_node_id(review), "author": "alice", "state": "CHANGES_REQUESTED",
         "body": "rename the flag"}]


def test_change_request_blocks_when_no_review_is_required(
        fake: FakeGitHub, clock: ManualClock) -> None:
    # GitHub's reviewDecision is null without branch protection; the review still counts.
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    fake.add_review("octo/web", number, "alice", "CHANGES_REQUESTED", "no")
    assert one(fake, clock, "octo/web", number).state.value == "CHANGES_REQUIRED"


def test_required_review_missing_is_waiting_then_approval_makes_ready(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", required_approvals=1)
    number = open_pr(fake, "octo/web")
    pr = one(fake, clock, "octo/web", number)
    assert (pr.state.value, pr.ready, pr.evidence.review) == ("WAITING", False,
                                                              "REVIEW_REQUIRED")
    fake.add_review("octo/web", number, "alice", "APPROVED", "lgtm")
    assert one(fake, clock, "octo/web", number).ready


def test_a_required_review_says_how_many_approvals_are_given_of_how_many_required(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", required_approvals=2)
    number = open_pr(fake, "octo/web")
    fake.add_review("octo/web", number, "alice", "APPROVED", "lgtm")
    fake.clear_requests()
    raw = one(fake, clock, "octo/web", number).raw()
    assert (raw["review"], raw["approvals"], raw["approvals_required"]) == (
        "REVIEW_REQUIRED", 1, 2)
    assert fake.count("POST", "/api/graphql") == 1  # read by the probe's one request


def test_approvals_required_are_left_out_when_the_token_cannot_read_the_protection(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", required_approvals=2)
    fake.hide_branch_protection("octo/web")
    raw = one(fake, clock, "octo/web", open_pr(fake, "octo/web")).raw()
    assert raw["review"] == "REVIEW_REQUIRED" and "approvals_required" not in raw


def test_mergeability_unknown_is_waiting_never_conflicts(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web", files={"app.py": "v1\n"})
    fake.set_mergeability_delay("octo/web", 1)
    number = open_pr(fake, "octo/web", files={"app.py": "mine\n"})
    fake.push_files("octo/web", "main", {"app.py": "theirs\n"})
    first = one(fake, clock, "octo/web", number)
    assert (first.evidence.mergeable, first.state.value, first.ready) == (
        "UNKNOWN", "WAITING", False)
    assert one(fake, clock, "octo/web", number).state.value == "CONFLICTS"


def test_head_branch_without_pr_is_none(fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    seen = observe(fake, clock, PrQuery("web", "octo/web", head_branch="delivery/none"))
    assert seen == {"web": None}
    assert pr_facts(seen, ["web"]).facts["pr.state"] == "NONE"  # type: ignore[arg-type]


def test_head_branch_finds_the_open_pr_else_the_latest(fake: FakeGitHub,
                                                       clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    first = open_pr(fake, "octo/web", "feature")
    fake.close("octo/web", first)
    query = PrQuery("web", "octo/web", head_branch="feature")
    closed = observe(fake, clock, query)["web"]
    assert isinstance(closed, PullRequestSnapshot) and closed.state.value == "CLOSED"
    second = fake.open_pull("octo/web", "feature")
    reopened = observe(fake, clock, query)["web"]
    assert isinstance(reopened, PullRequestSnapshot)
    assert (reopened.number, reopened.state.value) == (second, "WAITING")


def test_rollup_over_folders_all_merged_vs_one_waiting(fake: FakeGitHub,
                                                       clock: ManualClock) -> None:
    for name in ("octo/web", "octo/api"):
        fake.create_repo(name)
    web, api = open_pr(fake, "octo/web"), open_pr(fake, "octo/api")
    queries = [PrQuery("web", "octo/web", number=web), PrQuery("api", "octo/api", number=api)]
    fake.merge("octo/web", web)
    facts = pr_facts(observe(fake, clock, *queries), ["web", "api"]).facts  # type: ignore[arg-type]
    assert (facts["pr.state"], facts["web.pr.state"]) == ("WAITING", "MERGED")
    fake.merge("octo/api", api)
    facts = pr_facts(observe(fake, clock, *queries), ["web", "api"]).facts  # type: ignore[arg-type]
    assert facts["pr.state"] == "MERGED"


# -- one request, partial answers, pages --------------------------------------------------
def test_fifty_folders_are_one_graphql_request(fake: FakeGitHub, clock: ManualClock) -> None:
    queries = []
    for i in range(5):
        fake.create_repo(f"octo/r{i}")
        number = open_pr(fake, f"octo/r{i}")
        for j in range(10):
            queries.append(PrQuery(f"f{i}_{j}", f"octo/r{i}", number=number)
                           if j % 2 else PrQuery(f"f{i}_{j}", f"octo/r{i}",
                                                 head_branch="delivery/T-1"))
    fake.clear_requests()
    seen = observe(fake, clock, *queries)
    assert all(isinstance(v, PullRequestSnapshot) for v in seen.values()) and len(seen) == 50
    assert fake.count("POST", "/api/graphql") == 1 and len(fake.requests) == 1


def test_missing_repository_or_pr_fails_only_that_folder(fake: FakeGitHub,
                                                         clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    seen = observe(fake, clock, PrQuery("web", "octo/web", number=number),
                   PrQuery("gone", "octo/gone", number=1),
                   PrQuery("nopr", "octo/web", number=999))
    assert isinstance(seen["web"], PullRequestSnapshot)
    assert isinstance(seen["gone"], ProbeFailure) and "octo/gone" in seen["gone"].reason
    assert isinstance(seen["nopr"], ProbeFailure) and "999" in seen["nopr"].reason
    assert fake.count("POST", "/api/graphql") == 1


def test_unresolved_threads_are_counted_across_all_pages(fake: FakeGitHub,
                                                         clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    fake.create_repo("octo/api")
    busy, quiet = open_pr(fake, "octo/web"), open_pr(fake, "octo/api")
    for i in range(250):
        fake.add_thread("octo/web", busy, body=f"thread {i}", resolved=i % 5 == 0)
    why = fake.add_thread("octo/api", quiet, path="api.py", line=3, body="why?")
    fake.clear_requests()
    seen = observe(fake, clock, PrQuery("web", "octo/web", number=busy),
                   PrQuery("api", "octo/api", number=quiet))
    web, api = seen["web"], seen["api"]
    assert isinstance(web, PullRequestSnapshot) and isinstance(api, PullRequestSnapshot)
    assert web.unresolved_threads == 200 and api.unresolved_threads == 1
    assert api.raw()["threads"] == [{"id": fake.thread_node_id(why), "path": "api.py",
                                     "line": 3, "author": "reviewer", "body": "why?"}]
    # every unresolved thread's id is reported, over every page, quoted or not
    unresolved = [t for t in fake.pull("octo/web", busy).threads if not t.resolved]
    assert web.thread_ids == tuple(fake.thread_node_id(t) for t in unresolved)
    assert len(web.raw()["threads"]) < len(web.thread_ids) == 200
    # One probe request, then two follow-ups for the one PR with more pages (250 = 3 pages),
    # and one look-up of whether the threads' author (not seen before) may write.
    assert fake.count("POST", "/api/graphql") == 4
    follow_ups = [json.loads(r.body)["query"] for r in fake.requests[1:]]
    pages = [q for q in follow_ups if "query Threads" in q]
    assert len(pages) == 2 and all("t0:" in q and "t1:" not in q for q in pages)


# -- the race ---------------------------------------------------------------------------
def test_pr_merged_while_read_is_observed_again_and_reported_merged(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    fake.inject(faults.race("octo/web", number, "merge", during=True))
    fake.clear_requests()
    pr = one(fake, clock, "octo/web", number)
    assert pr.state.value == "MERGED"
    assert fake.count("POST", "/api/graphql") == 2  # the probe, then one more look


def test_pr_closed_between_probe_and_thread_page_is_reported_closed(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    for _ in range(120):
        fake.add_thread("octo/web", number)
    fake.inject(faults.race("octo/web", number, "close", after=1))
    assert one(fake, clock, "octo/web", number).state.value == "CLOSED"


def _statuses(fake: FakeGitHub, repo: str, number: int, count: int, failing: set[int]) -> None:
    sha = fake.state.head_sha(fake.repository(repo), fake.pull(repo, number))
    for i in range(count):
        fake.set_status(repo, sha, f"lint-{i:03}", "failure" if i in failing else "success",
                        target_url=f"https://ci.invalid/{i}")


def test_failing_checks_are_named_past_the_first_hundred_contexts(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    fake.create_repo("octo/api")
    web, api = open_pr(fake, "octo/web"), open_pr(fake, "octo/api")
    _statuses(fake, "octo/web", web, 230, failing={5, 150, 229})
    _statuses(fake, "octo/api", api, 20, failing=set())
    fake.clear_requests()
    seen = observe(fake, clock, PrQuery("web", "octo/web", number=web),
                   PrQuery("api", "octo/api", number=api))
    pr = seen["web"]
    assert isinstance(pr, PullRequestSnapshot) and pr.state.value == "CI_FAILED"
    assert [c.name for c in pr.failing_checks] == ["lint-005", "lint-150", "lint-229"]
    assert pr.raw()["checks_truncated"] is False
    # one probe request, then one per further page (two) for the one PR that needs them
    assert fake.count("POST", "/api/graphql") == 3


def test_checks_past_the_page_bound_are_marked_truncated(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    _statuses(fake, "octo/web", number, 250, failing={249})
    seen = probe_for(fake, clock, check_pages=1).pull_requests(
        [PrQuery("web", "octo/web", number=number)])
    pr = seen["web"]
    assert isinstance(pr, PullRequestSnapshot)
    assert pr.state.value == "CI_FAILED"  # the roll-up state covers every context
    assert pr.failing_checks == () and pr.raw()["checks_truncated"] is True


def test_checks_of_a_head_that_moved_between_pages_are_marked_truncated(
        fake: FakeGitHub, clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    _statuses(fake, "octo/web", number, 150, failing={140})

    def push_with_checks() -> None:  # a new head with as many checks, all passing
        fake.push_files("octo/web", "delivery/T-1", {"app.py": "moved\n"})
        _statuses(fake, "octo/web", number, 150, failing=set())

    # the push lands right after the probe's first answer: the next page is of another commit
    fake.inject(faults.between(push_with_checks))
    pr = one(fake, clock, "octo/web", number)
    assert pr.state.value == "CI_FAILED" and pr.raw()["checks_truncated"] is True
    assert pr.failing_checks == ()  # lint-140 was on the page that could not be read


# -- the query text -----------------------------------------------------------------------
def test_every_query_the_probe_sends_validates_against_githubs_schema() -> None:
    mixed = [PrQuery(f"f{i}", f"o/r{i}", number=i + 1) if i % 3 else
             PrQuery(f"f{i}", f"o/r{i}", head_branch=f"b{i}") for i in range(50)]
    texts = [
        github_query.probe_query(mixed[:1])[0],
        github_query.probe_query([PrQuery("h", "o/r", head_branch="b")])[0],
        github_query.probe_query(mixed)[0],
        github_query.reobserve_query([("o/r", 1), ("o/s", 2)])[0],
        github_query.threads_query([("o/r", 1, "Y3Vyc29y"), ("o/s", 2, "Y3Vyc29y")])[0],
        github_query.contexts_query([("o/r", 1, "Y3Vyc29y"), ("o/s", 2, "Y3Vyc29y")])[0],
    ]
    for text in texts:
        assert validate_query(text) == []


def test_schema_validation_catches_a_query_github_would_reject() -> None:
    assert validate_query("query { repository(owner: \"o\", name: \"r\") { nope } }")
    assert validate_query("query { repository(owner: 1) { name } }")


def test_more_than_fifty_folders_take_one_request_per_fifty(fake: FakeGitHub,
                                                            clock: ManualClock) -> None:
    fake.create_repo("octo/web")
    number = open_pr(fake, "octo/web")
    fake.clear_requests()
    seen = observe(fake, clock, *[PrQuery(f"f{i}", "octo/web", number=number)
                                  for i in range(51)])
    assert len(seen) == 51 and all(isinstance(v, PullRequestSnapshot) for v in seen.values())
    assert fake.count("POST", "/api/graphql") == 2
