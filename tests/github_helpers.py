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


# A two-repository delivery without an agent (the soak and chaos suites): worktrees, a
# change in both folders, publish, probe, merge api before web, probe, remove.
TWO_REPOS = {"web": "octo/web", "api": "octo/api"}
TWO_REPO_FLOW = """
digraph D {
  graph [goal="Say hello", inputs="ticket", folders="web,api"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  add [type=worktree_add]
  change [shape=parallelogram,
          script="printf 'print(1)\\\\n' > web/app.py; printf 'print(2)\\\\n' > api/app.py"]
  ship [type=publish]
  look [type=probe, probe="pr,threads"]
  land [type=merge, order="api,web"]
  after [type=probe, probe="pr"]
  remove [type=worktree_remove]
  start -> add -> change -> ship -> look -> land -> after -> remove -> exit
}
"""
TWO_REPO_PATH = ["start", "add", "change", "ship", "look", "land", "after", "remove", "exit"]
