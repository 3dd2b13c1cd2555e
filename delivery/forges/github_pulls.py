"""PyGithub's pull requests as the GitHub forge's values (`delivery.forges.github`), and
the GraphQL mutations it sends for what REST cannot do: a PR's revert (GitHub's Revert
button) and a draft marked ready for review."""

from __future__ import annotations

from typing import Literal

from github.PullRequest import PullRequest

from delivery.errors import ForgeError
from delivery.forges.base import MergeResult, PullRequestRef

REVERT_MUTATION = """
mutation Revert($pr: ID!, $title: String, $body: String) {
  revertPullRequest(input: {pullRequestId: $pr, title: $title, body: $body}) {
    revertPullRequest { number url headRefName }
  }
}
"""
READY_MUTATION = """
mutation Ready($pr: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $pr}) {
    pullRequest { number isDraft }
  }
}
"""


def loaded(pr: PullRequest) -> PullRequest:
    """The PR with its fields fetched: a lazy handle would send its GET when a field is
    first read, outside the retried call, where a 502 or a rate limit is not retried."""
    pr.merged  # noqa: B018 - reading a field completes the object
    return pr


def split(repository: str) -> tuple[str, str]:
    owner, slash, name = repository.strip().partition("/")
    if not slash or not owner or not name or "/" in name:
        raise ForgeError("github", repository, "name the repository",
                         "a GitHub repository is owner/name", "write it as owner/name")
    return owner, name.removesuffix(".git")


def pull_ref(repository: str, pr: PullRequest, *, created: bool) -> PullRequestRef:
    # `merged_at`, not `merged`: GitHub's PR list has no `merged`, and reading it would
    # send a GET of its own outside the retries
    state: Literal["open", "closed", "merged"] = (
        "merged" if pr.merged_at is not None else
        "closed" if pr.state == "closed" else "open")
    return PullRequestRef(repository=repository, number=pr.number, url=pr.html_url,
                          head_ref=pr.head.ref, created=created, body=pr.body or "",
                          state=state, draft=bool(pr.draft))


def merge_verdict(repository: str, pr: PullRequest, expected: str) -> MergeResult | None:
    """The result without trying, when the PR's state already decides it."""
    if pr.merged:
        return MergeResult(repository, pr.number, "already_merged",
                           merge_sha=pr.merge_commit_sha or "")
    if pr.state == "closed":
        return MergeResult(repository, pr.number, "refused",
                           reason=f"PR #{pr.number} was closed without being merged")
    if pr.draft:
        return MergeResult(repository, pr.number, "refused",
                           reason=f"PR #{pr.number} is a draft; mark it ready for review first")
    if expected and pr.head.sha != expected:
        return MergeResult(repository, pr.number, "refused",
                           reason=f"the head of PR #{pr.number} moved: expected "
                                  f"{expected[:12]}, found {pr.head.sha[:12]}")
    return None
