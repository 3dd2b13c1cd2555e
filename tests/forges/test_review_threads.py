"""Replying in and resolving review threads (SPEC §7.1 `respond`), on the fake GitHub
(GraphQL mutations validated against GitHub's schema) and on the local forge: a reply is
find-or-create by its marker, resolving is idempotent, a thread of another PR is refused."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from git_helpers import commit_to, make_remote
from github_helpers import ManualClock, open_pr

from delivery.errors import ForgeError
from delivery.forges import github_threads
from delivery.forges.github import GitHubForge
from delivery.forges.local import LocalForge
from delivery.testing.github import FakeGitHub, faults
from delivery.testing.github.graphql_api import validate_query
from delivery.testing.github.state import ThreadComment
from probes.evidence import PrQuery, PullRequestSnapshot
from probes.github import RetryBudget

MARKER = "<!-- delivery:reply thread=x key=1 -->"
BODY = f"Renamed it as asked.\n\n{MARKER}"


@pytest.fixture
def github(fake: FakeGitHub, clock: ManualClock) -> GitHubForge:
    fake.create_repo("octo/web")
    return GitHubForge.from_environment(fake.env(), sleep=clock.sleep, clock=clock,
                                        budget=RetryBudget(attempts=4))


def bodies(fake: FakeGitHub, number: int, index: int = 0) -> list[str]:
    return [c.body for c in fake.pull("octo/web", number).threads[index].comments]


@pytest.mark.parametrize("text", [github_threads.THREAD_COMMENTS_QUERY,
                                  github_threads.REPLY_MUTATION,
                                  github_threads.RESOLVE_MUTATION])
def test_thread_queries_are_valid_against_githubs_schema(text: str) -> None:
    # the bundled schema is byte for byte the shared one (tests/testing/test_fake_github.py)
    assert validate_query(text) == []


def test_a_reply_is_posted_once_however_often_it_is_sent(github: GitHubForge,
                                                         fake: FakeGitHub) -> None:
    number = open_pr(fake, "octo/web")
    thread = fake.add_thread("octo/web", number, body="rename this")
    node_id = fake.thread_node_id(thread)
    first = github.reply_to_review_thread("octo/web", number, node_id, body=BODY, marker=MARKER)
    again = github.reply_to_review_thread("octo/web", number, node_id, body=BODY, marker=MARKER)
    assert (first.created, again.created) == (True, False)
    assert first.comment_id == again.comment_id
    assert bodies(fake, number) == ["rename this", BODY]
    assert fake.pull("octo/web", number).threads[0].comments[-1].author == fake.login


def test_a_persons_comment_copying_the_marker_does_not_count_as_the_bots_reply(
        github: GitHubForge, fake: FakeGitHub) -> None:
    # the marker is guessable (a hash of the thread and the reply): a person who posts it
    # first must not make the bot skip its reply and then resolve the thread unanswered
    number = open_pr(fake, "octo/web")
    thread = fake.add_thread("octo/web", number, body="rename this")
    with fake.state.lock:
        thread.comments.append(ThreadComment(id=9_999, author="mallory",
                                             body=f"nothing to see {MARKER}"))
    reply = github.reply_to_review_thread("octo/web", number, fake.thread_node_id(thread),
                                          body=BODY, marker=MARKER)
    assert reply.created
    assert bodies(fake, number)[-1] == BODY
    assert fake.pull("octo/web", number).threads[0].comments[-1].author == fake.login


@dataclass
class AfterFirst(faults.Fault):
    """A fault that lets the first `skip` matching requests through."""

    skip: int = 1

    def matches(self, method: str, path: str) -> bool:
        if not super().matches(method, path):
            return False
        if self.skip:
            self.skip -= 1
            return False
        return True


def test_a_reply_whose_answer_was_lost_is_found_not_posted_again(github: GitHubForge,
                                                                fake: FakeGitHub) -> None:
    number = open_pr(fake, "octo/web")
    node_id = fake.thread_node_id(fake.add_thread("octo/web", number))
    # the look-up goes through; the mutation is applied, then the connection drops
    fake.inject(AfterFirst("drop_after_apply", method="POST", path="/api/graphql"))
    reply = github.reply_to_review_thread("octo/web", number, node_id, body=BODY,
                                          marker=MARKER)
    assert not reply.created  # found by its marker on the retry
    assert bodies(fake, number).count(BODY) == 1


def test_resolving_is_idempotent_and_sends_nothing_for_a_resolved_thread(
        github: GitHubForge, fake: FakeGitHub) -> None:
    number = open_pr(fake, "octo/web")
    node_id = fake.thread_node_id(fake.add_thread("octo/web", number))
    github.resolve_review_thread("octo/web", number, node_id)
    assert fake.pull("octo/web", number).threads[0].resolved
    fake.clear_requests()
    github.resolve_review_thread("octo/web", number, node_id)
    assert fake.count("POST", "/api/graphql") == 1  # the read only: no mutation


def test_a_thread_of_another_pull_request_is_refused(github: GitHubForge,
                                                     fake: FakeGitHub) -> None:
    mine = open_pr(fake, "octo/web")
    other = open_pr(fake, "octo/web", "someone/else")
    theirs = fake.thread_node_id(fake.add_thread("octo/web", other))
    with pytest.raises(ForgeError, match="not a review thread of PR #1"):
        github.reply_to_review_thread("octo/web", mine, theirs, body=BODY, marker=MARKER)
    with pytest.raises(ForgeError, match="not a review thread of PR #1"):
        github.resolve_review_thread("octo/web", mine, theirs)
    assert not fake.pull("octo/web", other).threads[0].resolved
    assert len(fake.pull("octo/web", other).threads[0].comments) == 1


def test_an_unknown_thread_id_is_a_forge_error_naming_it(github: GitHubForge,
                                                        fake: FakeGitHub) -> None:
    number = open_pr(fake, "octo/web")
    with pytest.raises(ForgeError, match="PRRT_nope"):
        github.reply_to_review_thread("octo/web", number, "PRRT_nope", body=BODY,
                                      marker=MARKER)


# -- the local forge ------------------------------------------------------------------
@pytest.fixture
def local(tmp_path: Path) -> tuple[LocalForge, str, int]:
    remote = make_remote(tmp_path, "web", {"app.txt": "v1\n"})
    commit_to(remote, "delivery/t-1", {"app.txt": "v2\n"})
    forge = LocalForge()
    ref = forge.find_or_create_pull_request(str(remote), head="delivery/t-1", base="main",
                                            title="T-1", body="")
    return forge, str(remote), ref.number


def test_local_reply_is_posted_once_and_resolving_is_idempotent(
        local: tuple[LocalForge, str, int]) -> None:
    forge, remote, number = local
    thread = str(forge.comment(remote, number, "rename this", path="app.txt", line=1))
    first = forge.reply_to_review_thread(remote, number, thread, body=BODY, marker=MARKER)
    again = forge.reply_to_review_thread(remote, number, thread, body=BODY, marker=MARKER)
    assert (first.created, again.created) == (True, False)
    assert forge.thread_replies(remote, number, thread) == [BODY]
    forge.resolve_review_thread(remote, number, thread)
    forge.resolve_review_thread(remote, number, thread)
    observed = forge.pull_requests([web_query(remote)])["web"]
    assert isinstance(observed, PullRequestSnapshot)
    assert (observed.unresolved_threads, observed.thread_ids) == (0, ())


def test_local_threads_are_reported_by_id_and_an_unknown_one_is_refused(
        local: tuple[LocalForge, str, int]) -> None:
    forge, remote, number = local
    first = forge.comment(remote, number, "one")
    second = forge.comment(remote, number, "two")
    forge.resolve_thread(remote, number, first)
    observed = forge.pull_requests([web_query(remote)])["web"]
    assert isinstance(observed, PullRequestSnapshot)
    assert observed.thread_ids == (str(second),)
    assert [t["id"] for t in observed.raw()["threads"]] == [str(second)]
    with pytest.raises(ForgeError, match="no such thread"):
        forge.reply_to_review_thread(remote, number, "99", body=BODY, marker=MARKER)


def web_query(remote: str) -> PrQuery:
    return PrQuery("web", remote, head_branch="delivery/t-1")
