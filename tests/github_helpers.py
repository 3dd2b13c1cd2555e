"""Shared pieces for tests against the fake GitHub (delivery.testing.github)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from delivery.testing.github import CheckRule, FakeGitHub, Tree
from probes.github import GitHubPullRequestSource, RetryBudget


@dataclass
class ManualClock:
    """Epoch seconds that move only when slept on: rate-limit waits cost no real time."""

    now: float = 1_800_000_000.0
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def no_bug(tree: Tree) -> tuple[bool, str]:
    """The check rule of the sample repositories: fails when app.py says BUG."""
    text = tree.read("app.py") or ""
    return ("BUG" not in text, "app.py:1: BUG found" if "BUG" in text else "all good")


CI = CheckRule("ci", predicate=no_bug)


def started(clock: ManualClock) -> Iterator[FakeGitHub]:
    """For a module's `fake` fixture: a started fake GitHub sharing the test's clock."""
    with FakeGitHub(clock=clock) as server:
        yield server


def probe_for(fake: FakeGitHub, clock: ManualClock, **options: object) -> GitHubPullRequestSource:
    options.setdefault("budget", RetryBudget(attempts=5, wait_seconds=600))
    return GitHubPullRequestSource(fake.token, graphql_url=fake.graphql_url, sleep=clock.sleep,
                                   clock=clock, **options)  # type: ignore[arg-type]


def open_pr(fake: FakeGitHub, repo: str, branch: str = "delivery/T-1",
            files: dict[str, str | None] | None = None) -> int:
    """Push a change on `branch` and open its PR; the PR number."""
    fake.push_files(repo, branch, files or {"app.py": "print('ok')\n"}, "change")
    return fake.open_pull(repo, branch, title=f"T-1 {repo}")
