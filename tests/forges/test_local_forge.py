"""The local forge (SPEC §7.1): PR records beside bare repositories, checks from a command,
conflicts from git merge-tree, reviews and threads, real merges; classified and rolled up
exactly as every forge (probes.facts)."""

from __future__ import annotations

import itertools
import multiprocessing
import sys
from pathlib import Path

import pytest
from git_helpers import commit_to, git, make_remote

from delivery.errors import ForgeError
from delivery.forges.local import LocalForge
from probes.evidence import ProbeFailure, PrQuery, PullRequestSnapshot
from probes.facts import pr_facts

# Every folder's check fails when the PR adds broken.txt.
CHECK = "test ! -f broken.txt"


def open_pr(forge: LocalForge, remote: Path, branch: str,
            files: dict[str, str | None]) -> int:
    commit_to(remote, branch, files)
    return forge.find_or_create_pull_request(str(remote), head=branch, base="main",
                                             title=f"Change {branch}", body="body").number


def observe(forge: LocalForge, remote: Path, folder: str = "web",
            branch: str = "feature") -> PullRequestSnapshot:
    seen = forge.pull_requests([PrQuery(folder, str(remote), head_branch=branch)])[folder]
    assert isinstance(seen, PullRequestSnapshot), seen
    return seen


@pytest.fixture
def forge() -> LocalForge:
    return LocalForge({"web": CHECK, "api": CHECK})


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return make_remote(tmp_path, "web", {"app.txt": "one\ntwo\n"})


def test_a_folder_without_a_pr_is_none(forge: LocalForge, remote: Path) -> None:
    seen = forge.pull_requests([PrQuery("web", str(remote), head_branch="feature")])
    assert seen == {"web": None}
    facts = pr_facts(seen, ["web"]).facts
    assert facts["web.pr.state"] == "NONE" and facts["pr.state"] == "NONE"
    assert facts["pr.ready"] is False


def test_an_open_pr_with_passing_checks_is_waiting_and_ready(forge: LocalForge,
                                                             remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"app.txt": "one\ntwo\nthree\n"})
    pr = observe(forge, remote)
    assert (pr.number, pr.state.value, pr.ready) == (number, "WAITING", True)
    assert pr.evidence.checks == "SUCCESS" and pr.evidence.mergeable == "MERGEABLE"
    assert pr.url == f"{remote.resolve()}#{number}"
    assert pr.head_sha == git(remote, "rev-parse", "feature")


def test_a_failing_check_is_ci_failed_with_its_output_as_evidence(forge: LocalForge,
                                                                  remote: Path) -> None:
    forge.checks["web"] = "echo 'assertion failed in test_app'; test ! -f broken.txt"
    open_pr(forge, remote, "feature", {"broken.txt": "x"})
    pr = observe(forge, remote)
    assert (pr.state.value, pr.ready) == ("CI_FAILED", False)
    raw = pr.raw()
    assert raw["failing_checks"][0]["conclusion"] == "FAILURE"
    assert "assertion failed in test_app" in raw["failing_checks"][0]["summary"]
    assert Path(raw["failing_checks"][0]["details_url"]).is_file()


def test_requested_changes_are_changes_required_until_that_reviewer_approves(
        forge: LocalForge, remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"app.txt": "changed\n"})
    forge.review(str(remote), number, "CHANGES_REQUESTED", "rename the thing", author="ann")
    forge.review(str(remote), number, "APPROVED", author="bob")
    pr = observe(forge, remote)
    assert pr.state.value == "CHANGES_REQUIRED"
    assert ("ann", "CHANGES_REQUESTED", "rename the thing") in [
        (r.author, r.state, r.body) for r in pr.reviews]
    forge.review(str(remote), number, "APPROVED", author="ann")
    assert observe(forge, remote).state.value == "WAITING"
    assert observe(forge, remote).evidence.review == "APPROVED"


def test_with_required_approvals_a_pr_waits_for_them(remote: Path) -> None:
    forge = LocalForge(required_approvals=1)
    number = open_pr(forge, remote, "feature", {"app.txt": "changed\n"})
    forge.review(str(remote), number, "COMMENTED", "looks fine so far", author="ann")
    pr = observe(forge, remote)
    assert (pr.state.value, pr.ready, pr.evidence.review) == ("WAITING", False,
                                                              "REVIEW_REQUIRED")
    forge.review(str(remote), number, "APPROVED", author="ann")
    assert observe(forge, remote).ready


def test_a_pr_waiting_for_approvals_says_how_many_are_given_of_those_required(
        remote: Path) -> None:
    forge = LocalForge(required_approvals=2)
    number = open_pr(forge, remote, "feature", {"app.txt": "changed\n"})
    forge.review(str(remote), number, "APPROVED", author="ann")
    raw = observe(forge, remote).raw()
    assert (raw["review"], raw["approvals"], raw["approvals_required"]) == (
        "REVIEW_REQUIRED", 1, 2)


def test_a_conflicting_base_change_is_conflicts_naming_the_file(forge: LocalForge,
                                                               remote: Path) -> None:
    open_pr(forge, remote, "feature", {"app.txt": "ONE\ntwo\n", "broken.txt": "x"})
    commit_to(remote, "main", {"app.txt": "uno\ntwo\n"})
    pr = observe(forge, remote)
    # CONFLICTS comes before CI_FAILED (first match wins)
    assert pr.state.value == "CONFLICTS" and pr.evidence.checks == "FAILURE"
    assert "app.txt" in pr.conflict


def test_review_threads_count_until_resolved(forge: LocalForge, remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"app.txt": "changed\n"})
    first = forge.comment(str(remote), number, "why?", path="app.txt", line=1)
    forge.comment(str(remote), number, "typo")
    assert observe(forge, remote).unresolved_threads == 2
    forge.resolve_thread(str(remote), number, first)
    pr = observe(forge, remote)
    assert pr.unresolved_threads == 1
    assert [t["body"] for t in pr.raw()["threads"]] == ["typo"]  # for the repair prompt
    assert pr_facts({"web": pr}, ["web"]).facts["threads.unresolved"] == 1


def test_a_pr_closed_while_it_is_read_is_observed_again_and_reported_closed(
        remote: Path) -> None:
    # the check runs during the probe: it closes the PR, as a person could meanwhile
    closer = (f"{sys.executable} -c \"from delivery.forges.local import LocalForge; "
              f"LocalForge().close_pull_request('{remote}', 1)\"")
    forge = LocalForge({"web": closer})
    open_pr(forge, remote, "feature", {"app.txt": "changed\n"})
    assert observe(forge, remote).state.value == "CLOSED"


def test_a_closed_pr_is_closed(forge: LocalForge, remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"app.txt": "changed\n"})
    forge.close_pull_request(str(remote), number)
    assert observe(forge, remote).state.value == "CLOSED"


def test_merge_is_a_real_merge_commit_in_the_remote(forge: LocalForge, remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"new.txt": "hello\n"})
    commit_to(remote, "main", {"other.txt": "meanwhile\n"})
    head = observe(forge, remote).head_sha
    result = forge.merge_pull_request(str(remote), number, expected_head_sha=head)
    assert result.outcome == "merged"
    assert git(remote, "rev-parse", "main") == result.merge_sha
    parents = git(remote, "rev-list", "--parents", "-n1", "main").split()[1:]
    assert parents[1] == head
    assert git(remote, "show", "main:new.txt") == "hello"
    assert git(remote, "show", "main:other.txt") == "meanwhile"
    pr = observe(forge, remote)
    assert (pr.state.value, pr.ready) == ("MERGED", False)


def test_merging_again_counts_as_done_and_never_merges_twice(forge: LocalForge,
                                                             remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"new.txt": "hello\n"})
    head = observe(forge, remote).head_sha
    first = forge.merge_pull_request(str(remote), number, expected_head_sha=head)
    again = forge.merge_pull_request(str(remote), number, expected_head_sha=head)
    assert again.outcome == "already_merged" and again.merge_sha == first.merge_sha
    assert git(remote, "rev-parse", "main") == first.merge_sha


def test_a_merge_written_before_its_record_counts_as_done(forge: LocalForge,
                                                         remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"new.txt": "hello\n"})
    head = observe(forge, remote).head_sha
    git(remote, "update-ref", "refs/heads/main", head)  # the ref moved, the record did not
    result = forge.merge_pull_request(str(remote), number, expected_head_sha=head)
    assert result.outcome == "already_merged"
    assert observe(forge, remote).state.value == "MERGED"


def test_a_pr_that_moved_is_not_merged(forge: LocalForge, remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"new.txt": "hello\n"})
    seen = observe(forge, remote).head_sha
    commit_to(remote, "feature", {"new.txt": "pushed later\n"})
    result = forge.merge_pull_request(str(remote), number, expected_head_sha=seen)
    assert result.outcome == "refused" and "moved" in result.reason
    assert "new.txt" not in git(remote, "ls-tree", "--name-only", "main")


def test_a_draft_pr_waits_and_is_not_merged(forge: LocalForge, remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"new.txt": "hello\n"})
    forge.set_draft(str(remote), number)
    pr = observe(forge, remote)
    assert (pr.state.value, pr.ready, pr.raw()["draft"]) == ("WAITING", False, True)
    result = forge.merge_pull_request(str(remote), number, expected_head_sha=pr.head_sha)
    assert result.outcome == "refused" and "draft" in result.reason
    forge.set_draft(str(remote), number, False)
    assert observe(forge, remote).ready


def test_a_conflicting_pr_is_not_merged(forge: LocalForge, remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"app.txt": "ONE\n"})
    commit_to(remote, "main", {"app.txt": "uno\n"})
    result = forge.merge_pull_request(str(remote), number,
                                      expected_head_sha=observe(forge, remote).head_sha)
    assert result.outcome == "refused" and "app.txt" in result.reason


def test_a_base_checked_out_in_a_working_tree_is_not_merged_into(forge: LocalForge,
                                                                 tmp_path: Path) -> None:
    work = tmp_path / "work"
    git(tmp_path, "init", "--quiet", "-b", "main", str(work))
    git(work, "commit", "--quiet", "--allow-empty", "-m", "initial")
    git(work, "branch", "feature")
    git(work, "commit", "--quiet", "--allow-empty", "-m", "on feature")  # main moves on
    number = forge.find_or_create_pull_request(str(work), head="feature", base="main",
                                               title="t", body="").number
    result = forge.merge_pull_request(str(work), number,
                                      expected_head_sha=git(work, "rev-parse", "feature"))
    assert result.outcome == "refused" and "bare repository" in result.reason


def test_find_or_create_finds_the_open_pr_of_a_branch(forge: LocalForge, remote: Path) -> None:
    commit_to(remote, "feature", {"a.txt": "a"})
    first = forge.find_or_create_pull_request(str(remote), head="feature", base="main",
                                              title="t", body="b")
    again = forge.find_or_create_pull_request(str(remote), head="feature", base="main",
                                              title="t", body="b2")
    assert (first.created, again.created, again.number) == (True, False, first.number)
    forge.update_pull_request_body(str(remote), first.number, "new body")


def test_a_pr_needs_its_branch_pushed_first(forge: LocalForge, remote: Path) -> None:
    with pytest.raises(ForgeError, match="push the branch"):
        forge.find_or_create_pull_request(str(remote), head="nowhere", base="main",
                                          title="t", body="b")


def test_an_unreadable_folder_fails_alone(forge: LocalForge, remote: Path,
                                          tmp_path: Path) -> None:
    open_pr(forge, remote, "feature", {"a.txt": "a"})
    seen = forge.pull_requests([PrQuery("web", str(remote), head_branch="feature"),
                                PrQuery("api", str(tmp_path / "missing.git"),
                                        head_branch="feature"),
                                PrQuery("doc", str(remote), number=99)])
    assert isinstance(seen["web"], PullRequestSnapshot)
    assert isinstance(seen["api"], ProbeFailure) and "not a git repository" in seen["api"].reason
    assert isinstance(seen["doc"], ProbeFailure) and "#99" in seen["doc"].reason


@pytest.mark.parametrize(("text", "problem"), [
    ("not json", "not JSON"),
    ('{"pulls": 3}', "wrong shape"),
    ('{"next": 2, "pulls": [{"number": "1"}]}', "record 1 has no valid number, head"),
])
def test_damaged_records_are_a_clear_probe_failure(forge: LocalForge, remote: Path,
                                                   text: str, problem: str) -> None:
    (remote / "delivery").mkdir()
    (remote / "delivery" / "pulls.json").write_text(text)
    seen = forge.pull_requests([PrQuery("web", str(remote), head_branch="feature")])["web"]
    assert isinstance(seen, ProbeFailure) and problem in seen.reason


# -- checks are cached by head commit ---------------------------------------------------
def test_a_check_runs_once_per_head_commit(tmp_path: Path, remote: Path) -> None:
    counter = tmp_path / "runs.log"
    forge = LocalForge({"web": f"echo run >> {counter}; test -f app.txt"})
    open_pr(forge, remote, "feature", {"app.txt": "a\n"})
    for _ in range(3):
        assert observe(forge, remote).evidence.checks == "SUCCESS"
    assert counter.read_text().count("run") == 1
    assert LocalForge(forge.checks).pull_requests(
        [PrQuery("web", str(remote), head_branch="feature")])  # another process: cached too
    assert counter.read_text().count("run") == 1
    for entry in (remote / "delivery" / "checks").glob("*.json"):
        entry.write_text("{damaged")
    assert observe(forge, remote).evidence.checks == "SUCCESS"  # a damaged entry: run again
    assert counter.read_text().count("run") == 2
    commit_to(remote, "feature", {"app.txt": None})
    assert observe(forge, remote).evidence.checks == "FAILURE"
    assert counter.read_text().count("run") == 3


def test_the_check_sees_the_pr_head_not_the_base(tmp_path: Path, remote: Path) -> None:
    forge = LocalForge({"web": "grep -q feature-line app.txt"})
    open_pr(forge, remote, "feature", {"app.txt": "feature-line\n"})
    assert observe(forge, remote).evidence.checks == "SUCCESS"


def test_a_secret_printed_by_a_check_is_masked_in_its_stored_log(
        tmp_path: Path, remote: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = "canary-7f3a9c2e41d8b6"
    shaped = "ghp_" + "Z9y8X7w6V5" * 3 + "u4T3s2"
    monkeypatch.setenv("DELIVERY_CANARY_TOKEN", canary)  # a secret by its name (SPEC §14)
    forge = LocalForge({"web": f'echo "key=$DELIVERY_CANARY_TOKEN {shaped}"; exit 1'})
    open_pr(forge, remote, "feature", {"app.txt": "a\n"})
    failing = observe(forge, remote).failing_checks[0]
    assert "key=***" in failing.summary
    log = Path(failing.details_url)
    assert log.is_file() and "key=*** ***" in log.read_text()
    for path in remote.rglob("*"):  # the log, the cached result, the records
        if path.is_file():
            data = path.read_bytes()
            assert canary.encode() not in data and shaped.encode() not in data, path


# -- records are locked against concurrent runs -----------------------------------------
def _create(remote: str, head: str) -> int:
    return LocalForge().find_or_create_pull_request(remote, head=head, base="main",
                                                    title=head, body="").number


def test_concurrent_writers_never_lose_or_duplicate_a_pr(remote: Path) -> None:
    heads = [f"b{i}" for i in range(6)]
    for head in heads:
        commit_to(remote, head, {f"{head}.txt": head})
    jobs = [(str(remote), head) for head in heads] + [(str(remote), "b0")] * 5
    with multiprocessing.get_context("fork").Pool(6) as pool:
        numbers = pool.starmap(_create, jobs)
    assert sorted(set(numbers)) == list(range(1, 7))
    assert len({n for (_, head), n in zip(jobs, numbers, strict=True) if head == "b0"}) == 1


# -- classification and roll-ups through the local forge --------------------------------
STATES = ("MERGED", "CLOSED", "CONFLICTS", "CI_FAILED", "CHANGES_REQUIRED", "WAITING")
WORST_FIRST = ("CLOSED", "CONFLICTS", "CI_FAILED", "CHANGES_REQUIRED", "WAITING", "MERGED")


@pytest.fixture(scope="module")
def by_state(tmp_path_factory: pytest.TempPathFactory) -> tuple[LocalForge, dict[str, Path]]:
    """One repository per state, each with one PR on `feature` in that state."""
    root = tmp_path_factory.mktemp("states")
    forge = LocalForge({state: CHECK for state in STATES})
    remotes: dict[str, Path] = {}
    for state in STATES:
        remote = make_remote(root, state.lower(), {"app.txt": "one\n"})
        remotes[state] = remote
        broken = {"broken.txt": "x"} if state == "CI_FAILED" else {}
        number = open_pr(forge, remote, "feature", {"app.txt": "ONE\n", **broken})
        if state == "CONFLICTS":
            commit_to(remote, "main", {"app.txt": "uno\n"})
        elif state == "CHANGES_REQUIRED":
            forge.review(str(remote), number, "CHANGES_REQUESTED", "no", author="r")
        elif state == "CLOSED":
            forge.close_pull_request(str(remote), number)
        elif state == "MERGED":
            head = git(remote, "rev-parse", "feature")
            forge.merge_pull_request(str(remote), number, expected_head_sha=head)
    return forge, remotes


def _facts(forge: LocalForge, remotes: dict[str, Path],
           folders: list[str]) -> dict[str, object]:
    queries = [PrQuery(folder, str(remotes[folder]), head_branch="feature")
               for folder in folders]
    return pr_facts(forge.pull_requests(queries), folders).facts


@pytest.mark.parametrize("state", STATES)
def test_each_state_is_classified(by_state: tuple[LocalForge, dict[str, Path]],
                                  state: str) -> None:
    facts = _facts(*by_state, [state])
    assert facts[f"{state}.pr.state"] == state and facts["pr.state"] == state
    assert facts["pr.ready"] is (state == "WAITING")


@pytest.mark.parametrize(("first", "second"), list(itertools.combinations(WORST_FIRST, 2)))
def test_the_roll_up_is_the_worst_state(by_state: tuple[LocalForge, dict[str, Path]],
                                        first: str, second: str) -> None:
    # WORST_FIRST lists the worse state first: it wins whatever the folder order
    assert _facts(*by_state, [second, first])["pr.state"] == first


def test_all_merged_rolls_up_merged_one_waiting_rolls_up_waiting(
        by_state: tuple[LocalForge, dict[str, Path]], tmp_path: Path) -> None:
    forge, remotes = by_state
    other = make_remote(tmp_path, "other", {"app.txt": "one\n"})
    number = open_pr(forge, other, "feature", {"b.txt": "b"})
    both = {"MERGED": remotes["MERGED"], "other": other}
    assert _facts(forge, both, ["MERGED", "other"])["pr.state"] == "WAITING"
    forge.merge_pull_request(str(other), number,
                             expected_head_sha=git(other, "rev-parse", "feature"))
    facts = _facts(forge, both, ["MERGED", "other"])
    assert facts["pr.state"] == "MERGED" and facts["pr.ready"] is False


def test_folders_without_a_pr_are_left_out_of_the_roll_up(
        by_state: tuple[LocalForge, dict[str, Path]], tmp_path: Path) -> None:
    forge, remotes = by_state
    empty = make_remote(tmp_path, "empty")
    facts = _facts(forge, {"WAITING": remotes["WAITING"], "empty": empty}, ["WAITING", "empty"])
    assert facts["empty.pr.state"] == "NONE"
    assert (facts["pr.state"], facts["pr.ready"]) == ("WAITING", True)


def test_the_pr_of_a_branch_a_person_closed_is_found_not_replaced(forge: LocalForge,
                                                                    remote: Path) -> None:
    number = open_pr(forge, remote, "feature", {"app.txt": "changed\n"})
    forge.close_pull_request(str(remote), number)
    again = forge.find_or_create_pull_request(str(remote), head="feature", base="main",
                                              title="again", body="")
    assert (again.number, again.state, again.created) == (number, "closed", False)
    found = forge.find_pull_request(str(remote), head="feature")
    assert found is not None and (found.number, found.state) == (number, "closed")
    forge.reopen_pull_request(str(remote), number)
    reopened = forge.find_pull_request(str(remote), head="feature")
    assert reopened is not None and reopened.state == "open"
