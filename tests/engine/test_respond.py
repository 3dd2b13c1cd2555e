"""`respond` stages in whole runs (SPEC §7.1), on the local forge and the fake GitHub: the
repair's answers are posted in their threads and the threads resolved; a stage killed
between the reply and the resolve, resumed, never posts twice; only the run's own open
threads are answered; nothing is resolved while the fix is not pushed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from engine_helpers import FakeClock, write_flow
from git_helpers import commit_to, make_remote

from delivery.agents.replay import ReplayBackend
from delivery.engine.run_inputs import ticket_slug
from delivery.engine.runner import RunOutcome, RunRequest, World, resume_run, start_run
from delivery.forges.base import ThreadReply
from delivery.forges.github import GitHubForge
from delivery.forges.local import LocalForge
from delivery.testing import flow
from delivery.testing.github import FakeGitHub
from probes.evidence import PrQuery, PullRequestSnapshot

TICKET = "https://tracker.example/browse/T-4"
BRANCH = f"delivery/{ticket_slug(TICKET)}"  # the branch the ticket names


def respond_flow(touch: str, after_fix: str) -> str:
    return flow(f"""
    add [type=worktree_add]
    look [type=probe, probe="pr,threads"]
    fix [type=prompt, prompt="{{{{ web.pr.raw }}}}", outputs="answers:json"]
    {touch}
    answer [type=respond, threads="answers"]
    start -> add -> look -> fix -> {after_fix}answer -> exit
    """, goal="Answer the review", graph='inputs="ticket", folders="web"', name="R")


REPLY = "Renamed to `greeting`, as asked."
TOKEN = "ghp_" + "A1b2" * 9  # token-shaped: masked wherever it would be written


def written_flow(tmp_path: Path, *, dirty: bool = False) -> Path:
    touch = ('touch [shape=parallelogram, script="printf x > web/new.txt"]' if dirty else "")
    return write_flow(tmp_path, respond_flow(touch, "touch -> " if dirty else ""))


def answers(thread: str, **extra: dict[str, object]) -> dict[str, list[str]]:
    given = {thread: {"reply": f"{REPLY}<!-- only the agent sees this -->", "resolve": True},
             **extra}
    return {"fix": [json.dumps({"context_updates": {"answers": given}})]}


def request(tmp_path: Path, repos: dict[str, str], workflow: Path, forge: str) -> RunRequest:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return RunRequest(workflow=workflow, inputs={"ticket": TICKET}, workspace=workspace,
                      run_dir=tmp_path / "run", repos=repos, forge=forge)


class KilledAfterReply(LocalForge):
    """The local forge; the process 'dies' right after the first reply was posted (before
    any thread is resolved): KeyboardInterrupt is not caught by the engine, like a kill."""

    def reply_to_review_thread(self, repository: str, number: int, thread_id: str, *,
                               body: str, marker: str) -> ThreadReply:
        reply = super().reply_to_review_thread(repository, number, thread_id, body=body,
                                               marker=marker)
        raise KeyboardInterrupt(reply.comment_id)


class KilledAfterReplyOnGitHub(GitHubForge):
    def reply_to_review_thread(self, repository: str, number: int, thread_id: str, *,
                               body: str, marker: str) -> ThreadReply:
        reply = super().reply_to_review_thread(repository, number, thread_id, body=body,
                                               marker=marker)
        raise KeyboardInterrupt(reply.comment_id)


# -- the local forge ------------------------------------------------------------------
@pytest.fixture
def remote(tmp_path: Path) -> Path:
    remote = make_remote(tmp_path, "web", {"app.txt": "v1\n"})
    commit_to(remote, BRANCH, {"app.txt": "v2\n"})
    return remote


def open_local_pr(remote: Path) -> tuple[LocalForge, int]:
    forge = LocalForge()
    ref = forge.find_or_create_pull_request(str(remote), head=BRANCH, base="main",
                                            title="T-4", body="")
    return forge, ref.number


def local_world(tmp_path: Path, replies: dict[str, list[str]],
                forge: LocalForge | None = None) -> World:
    return World(agent=ReplayBackend(replies), clock=FakeClock(),
                 git_cache=tmp_path / "cache", forge=forge)


def test_the_answers_are_posted_in_their_threads_and_the_threads_resolved_on_the_local_forge(
        tmp_path: Path, remote: Path) -> None:
    forge, number = open_local_pr(remote)
    thread = str(forge.comment(str(remote), number, "rename hello", path="app.txt", line=1))
    other = str(forge.comment(str(remote), number, "and add a test"))
    replies = answers(f"web:{thread}")
    replies["fix"] = [replies["fix"][0].replace("as asked.", f"as asked. {TOKEN}")]
    ran = start_run(request(tmp_path, {"web": str(remote)}, written_flow(tmp_path), "local"),
                    local_world(tmp_path, replies))
    assert ran.status == "succeeded", ran.failure_reason
    posted = forge.thread_replies(str(remote), number, thread)
    assert len(posted) == 1 and posted[0].startswith(REPLY)
    assert "only the agent sees this" not in posted[0]  # hidden parts are not posted
    assert TOKEN not in posted[0] and "***" in posted[0]  # nor secrets
    assert forge.thread_replies(str(remote), number, other) == []  # not answered: untouched
    assert _unresolved(remote) == [other]  # only the answered one was resolved


def test_a_reply_naming_people_or_teams_pages_nobody(tmp_path: Path, remote: Path) -> None:
    # a stranger's thread can ask the agent to mention anyone; the reply is posted quiet
    forge, number = open_local_pr(remote)
    thread = str(forge.comment(str(remote), number, "rename hello, and cc @octo/everyone"))
    replies = answers(thread)
    replies["fix"] = [replies["fix"][0].replace("as asked.", "as asked, cc @octo/everyone")]
    ran = start_run(request(tmp_path, {"web": str(remote)}, written_flow(tmp_path), "local"),
                    local_world(tmp_path, replies))
    assert ran.status == "succeeded", ran.failure_reason
    (posted,) = forge.thread_replies(str(remote), number, thread)
    assert "cc @&#8203;octo/everyone" in posted and "@octo" not in posted


def test_a_respond_stage_killed_after_its_reply_resumes_without_posting_twice_locally(
        tmp_path: Path, remote: Path) -> None:
    forge, number = open_local_pr(remote)
    thread = str(forge.comment(str(remote), number, "rename hello"))
    with pytest.raises(KeyboardInterrupt):
        start_run(request(tmp_path, {"web": str(remote)}, written_flow(tmp_path), "local"),
                  local_world(tmp_path, answers(thread), KilledAfterReply()))
    assert len(forge.thread_replies(str(remote), number, thread)) == 1
    resumed = resume_run(tmp_path / "run", local_world(tmp_path, {}))
    assert resumed.status == "succeeded", resumed.failure_reason
    assert len(forge.thread_replies(str(remote), number, thread)) == 1
    assert _unresolved(remote) == []


def test_an_id_that_is_not_an_open_thread_of_the_run_is_skipped_not_posted_to(
        tmp_path: Path, remote: Path) -> None:
    forge, number = open_local_pr(remote)
    commit_to(remote, "someone/else", {"app.txt": "v3\n"})
    theirs = forge.find_or_create_pull_request(str(remote), head="someone/else", base="main",
                                               title="not ours", body="").number
    forge.comment(str(remote), theirs, "their first thread")
    foreign = str(forge.comment(str(remote), theirs, "their second thread"))
    mine = str(forge.comment(str(remote), number, "our thread"))
    # the other PR's thread (its id is no thread of ours), and an id nobody has
    given = answers(mine, **{foreign: {"reply": "x", "resolve": True},
                             "9": {"reply": "x", "resolve": True}})
    ran = start_run(request(tmp_path, {"web": str(remote)}, written_flow(tmp_path), "local"),
                    local_world(tmp_path, given))
    assert ran.status == "succeeded", ran.failure_reason
    assert foreign != mine
    assert forge.thread_replies(str(remote), theirs, foreign) == []
    assert len(forge.thread_replies(str(remote), number, mine)) == 1
    skipped = [e for e in _events(ran) if e["type"] == "thread_skipped"]
    assert sorted(e["thread"] for e in skipped) == sorted([foreign, "9"])


def test_nothing_is_answered_while_the_fix_is_not_pushed(tmp_path: Path, remote: Path) -> None:
    forge, number = open_local_pr(remote)
    thread = str(forge.comment(str(remote), number, "rename hello"))
    ran = start_run(request(tmp_path, {"web": str(remote)}, written_flow(tmp_path, dirty=True),
                            "local"), local_world(tmp_path, answers(thread)))
    assert ran.status == "failed"
    assert "folder 'web': the fix is not pushed yet" in ran.failure_reason
    assert forge.thread_replies(str(remote), number, thread) == []
    assert _unresolved(remote) == [thread]


def test_answers_that_are_not_a_map_of_threads_fail_the_stage_saying_how_to_write_them(
        tmp_path: Path, remote: Path) -> None:
    forge, number = open_local_pr(remote)
    forge.comment(str(remote), number, "rename hello")
    bad = {"fix": [json.dumps({"context_updates": {"answers": [{"reply": "x"}]}})]}
    ran = start_run(request(tmp_path, {"web": str(remote)}, written_flow(tmp_path), "local"),
                    local_world(tmp_path, bad))
    assert ran.status == "failed"
    assert "'answers' is not a map of thread ids to {reply, resolve}" in ran.failure_reason
    assert "Traceback" not in ran.failure_reason


# -- the fake GitHub ------------------------------------------------------------------
def github_world(fake: FakeGitHub, tmp_path: Path, replies: dict[str, list[str]],
                 forge: Callable[[], GitHubForge] | None = None) -> World:
    return World(agent=ReplayBackend(replies), clock=FakeClock(), git_cache=tmp_path / "cache",
                 environ=fake.env(), forge=forge() if forge else None)


def test_on_github_a_killed_and_resumed_respond_stage_replies_once_and_resolves(
        fake: FakeGitHub, tmp_path: Path) -> None:
    fake.create_repo("octo/web", files={"app.txt": "v1\n"})
    fake.push_files("octo/web", BRANCH, {"app.txt": "v2\n"})
    number = fake.open_pull("octo/web", BRANCH)
    thread = fake.add_thread("octo/web", number, path="app.txt", body="rename hello")
    node_id = fake.thread_node_id(thread)
    runs = request(tmp_path, {"web": "octo/web"}, written_flow(tmp_path), "github")
    with pytest.raises(KeyboardInterrupt):
        start_run(runs, github_world(fake, tmp_path, answers(node_id), lambda: (
            KilledAfterReplyOnGitHub.from_environment(fake.env()))))  # type: ignore[arg-type]
    assert len(thread.comments) == 2 and not thread.resolved
    resumed = resume_run(tmp_path / "run", github_world(fake, tmp_path, {}))
    assert resumed.status == "succeeded", resumed.failure_reason
    replies = [c.body for c in thread.comments[1:]]
    assert len(replies) == 1 and replies[0].startswith(REPLY)
    assert thread.resolved
    assert "<!-- delivery:reply thread=" in replies[0]


def _events(ran: RunOutcome) -> list[dict[str, object]]:
    lines = (ran.run_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _unresolved(remote: Path) -> list[str]:
    seen = LocalForge().pull_requests([PrQuery("web", str(remote), head_branch=BRANCH)])
    snapshot = seen["web"]
    assert isinstance(snapshot, PullRequestSnapshot)
    return list(snapshot.thread_ids)
