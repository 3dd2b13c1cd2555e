"""Acceptance (SPEC §7 `threads.ids`, §7.1 `respond`): the bundled deliver.dot, two
repositories, a reviewer who opens a thread once the PRs are up and — between two probes —
resolves it and opens another. The second thread is seen (by id: the count did not
change), repaired with its text in the prompt, answered in the thread and resolved; the
PRs merge only once no thread is unresolved; no reply is ever posted twice. On the fake
GitHub and on the local forge."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from threads_helpers import (
    FIRST_REPLY,
    FIRST_THREAD,
    SECOND_REPLY,
    SECOND_THREAD,
    AnsweringAgent,
    ThreadPerson,
)

from delivery.cli.demo import make_samples
from delivery.engine.runner import RunOutcome, World, start_run
from delivery.forges.local import LocalForge
from delivery.testing.github import FakeGitHub
from delivery.testing.two_repos import BRANCH, create_repos, deliver, request
from probes.evidence import PrQuery, PullRequestSnapshot


def assert_threads_answered(outcome: RunOutcome, agent: AnsweringAgent,
                            person: ThreadPerson) -> None:
    assert outcome.status == "succeeded", outcome.failure_reason
    assert outcome.path.count("repair") == 2 and outcome.path.count("land") == 1
    first, second = agent.repair_prompts()
    assert FIRST_THREAD in first and SECOND_THREAD not in first
    assert SECOND_THREAD in second  # the thread opened while the count stayed at one
    assert person.unresolved_at_merge == [[]]  # never merged with a thread open


def test_a_thread_opened_as_another_is_resolved_is_repaired_answered_then_merged_on_github(
        tmp_path: Path) -> None:
    with FakeGitHub() as github:
        repos = create_repos(github)

        def web_pr() -> int:
            pulls = github.repository(repos["web"]).pulls
            return next(n for n, pr in pulls.items() if pr.head == BRANCH)

        def open_thread(text: str) -> str:
            thread = github.add_thread(repos["web"], web_pr(), path="page.py", body=text)
            return github.thread_node_id(thread)

        def threads() -> list[tuple[str, object]]:
            return [(github.thread_node_id(t), t)
                    for t in github.pull(repos["web"], web_pr()).threads]

        def resolve(node_id: str) -> None:
            dict(threads())[node_id].resolved = True  # type: ignore[attr-defined]

        person = ThreadPerson(open_thread, resolve,
                              lambda: [i for i, t in threads()
                                       if not t.resolved],  # type: ignore[attr-defined]
                              key=lambda node_id: node_id)
        agent = AnsweringAgent(person.answers)
        outcome = deliver(github, repos, tmp_path, progress=person, agent=agent)
        assert_threads_answered(outcome, agent, person)
        one, two = (t for _, t in threads())
        bot = [[c.body for c in t.comments if c.author == github.login]  # type: ignore[attr-defined]
               for t in (one, two)]
        assert [len(b) for b in bot] == [1, 1]
        assert bot[0][0].startswith(FIRST_REPLY) and bot[1][0].startswith(SECOND_REPLY)
        assert two.resolved  # type: ignore[attr-defined]
        assert github.pull(repos["web"], web_pr()).merged
        assert github.pull(repos["api"], 1).merged


def test_a_thread_opened_as_another_is_resolved_is_repaired_answered_then_merged_locally(
        tmp_path: Path) -> None:
    remotes = make_samples(tmp_path / "samples")
    web = str(remotes["web"])
    forge = LocalForge()

    def web_pr() -> int:
        seen = forge.pull_requests([PrQuery("web", web, head_branch=BRANCH)])["web"]
        assert isinstance(seen, PullRequestSnapshot)
        return seen.number

    def unresolved() -> list[str]:
        seen = forge.pull_requests([PrQuery("web", web, head_branch=BRANCH)])["web"]
        return list(seen.thread_ids) if isinstance(seen, PullRequestSnapshot) else []

    person = ThreadPerson(
        lambda text: str(forge.comment(web, web_pr(), text, path="page.py", line=1)),
        lambda thread: forge.resolve_review_thread(web, web_pr(), thread), unresolved,
        key=lambda thread: f"web:{thread}")
    agent = AnsweringAgent(person.answers)
    python = shlex.quote(sys.executable)
    checks = {folder: f"{python} -m unittest -q" for folder in remotes}
    runs = request(tmp_path, {k: str(v) for k, v in remotes.items()}, forge="local",
                   checks=checks)
    outcome = start_run(runs, World(agent=agent, git_cache=tmp_path / "cache"),
                        observer=person)
    assert_threads_answered(outcome, agent, person)
    first, second = person.threads
    replies = [forge.thread_replies(web, web_pr(), thread) for thread in (first, second)]
    assert [len(r) for r in replies] == [1, 1]
    assert replies[0][0].startswith(FIRST_REPLY) and replies[1][0].startswith(SECOND_REPLY)
    assert unresolved() == []
