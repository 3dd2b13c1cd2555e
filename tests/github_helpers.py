"""Shared pieces for tests against the fake GitHub (delivery.testing.github)."""

from __future__ import annotations

from delivery.testing.github import CheckRule, FakeGitHub, ManualClock, Tree
from probes.github import GitHubPullRequestSource, RetryBudget


def no_bug(tree: Tree) -> tuple[bool, str]:
    """The check rule of the sample repositories: fails when app.py says BUG."""
    text = tree.read("app.py") or ""
    return ("BUG" not in text, "app.py:1: BUG found" if "BUG" in text else "all good")


CI = CheckRule("ci", predicate=no_bug)


def probe_for(fake: FakeGitHub, clock: ManualClock, **options: object) -> GitHubPullRequestSource:
    options.setdefault("budget", RetryBudget(attempts=5, wait_seconds=600))
    return GitHubPullRequestSource(fake.token, graphql_url=fake.graphql_url, sleep=clock.sleep,
                                   clock=clock, **options)  # type: ignore[arg-type]


def open_pr(fake: FakeGitHub, repo: str, branch: str = "delivery/T-1",
            files: dict[str, str | None] | None = None) -> int:
    """Push a change on `branch` and open its PR; the PR number."""
    fake.push_files(repo, branch, files or {"app.py": "print('ok')\n"}, "change")
    return fake.open_pull(repo, branch, title=f"T-1 {repo}")
