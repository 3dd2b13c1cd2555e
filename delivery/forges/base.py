"""The forge protocol: the read side is `probes.evidence.PullRequestSource` (one call
observes every folder); the write side opens, updates and merges pull requests.

Every write is idempotent by construction: a PR is found by its head branch before one is
created, a merge names the head SHA it expects and treats an already merged PR as done, a
reply in a review thread is found by its marker before one is posted, and resolving a
resolved thread changes nothing — so a stage killed half-way and run again never duplicates
an effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

# how git reaches a repository: defined beside the git calls that use it
from delivery.git.network import GitRemote as GitRemote
from probes.evidence import PullRequestSource


@dataclass(frozen=True)
class PullRequestRef:
    repository: str
    number: int
    url: str
    head_ref: str
    created: bool  # False when an existing PR for the head branch was found
    # The PR's body as it is now, so that a publish rewrites only its own marked block
    # (empty when the forge does not say).
    body: str = ""
    # open, closed (by a person, not merged) or merged: a publish never reopens or
    # replaces a PR that is not open (SPEC §7.1)
    state: Literal["open", "closed", "merged"] = "open"
    draft: bool = False  # opened as a draft and not marked ready for review since


@dataclass(frozen=True)
class MergeResult:
    repository: str
    number: int
    outcome: Literal["merged", "already_merged", "refused"]
    reason: str = ""  # why a merge was refused (head moved, conflicts, closed, …)
    merge_sha: str = ""


@dataclass(frozen=True)
class ThreadReply:
    thread_id: str
    comment_id: str
    created: bool  # False when a reply holding the marker was already in the thread


class Forge(PullRequestSource, Protocol):
    name: str

    def git_remote(self, repository: str) -> GitRemote: ...

    def default_branch(self, repository: str) -> str: ...

    def find_pull_request(self, repository: str, *, head: str) -> PullRequestRef | None:
        """The PR of head branch `head`: the open one, else the latest closed or merged
        one, else None."""
        ...

    def find_or_create_pull_request(self, repository: str, *, head: str, base: str,
                                    title: str, body: str,
                                    draft: bool = False) -> PullRequestRef:
        """`find_pull_request`, or a new PR (a draft with `draft`) when the branch never
        had one: a closed or merged PR is returned as it is, never reopened or replaced."""
        ...

    def update_pull_request_body(self, repository: str, number: int, body: str) -> None: ...

    def merge_pull_request(self, repository: str, number: int, *,
                           expected_head_sha: str, method: str = "merge") -> MergeResult:
        """`method`: merge, squash or rebase (the merge node's `method=`); merge when none
        is named, on every forge, as GitHub's REST API does."""
        ...

    def reply_to_review_thread(self, repository: str, number: int, thread_id: str, *,
                               body: str, marker: str) -> ThreadReply:
        """A reply `body` (holding `marker`) in the thread of PR `number`, unless a reply
        holding `marker` is already there."""
        ...

    def resolve_review_thread(self, repository: str, number: int, thread_id: str) -> None:
        """Resolve the thread of PR `number` (resolved already: nothing changes)."""
        ...


@runtime_checkable
class LifecycleForge(Protocol):
    """The writes around a PR's life that only some stages and commands need: a draft
    marked ready for review (`publish draft=true`), a PR closed and its branch deleted
    (`delivery close`)."""

    def mark_ready_for_review(self, repository: str, number: int) -> None:
        """A draft PR becomes ready for review (ready already: nothing changes)."""
        ...

    def close_pull_request(self, repository: str, number: int, *, comment: str = "",
                           marker: str = "") -> None:
        """Close an open PR, saying why in `comment` (holding `marker`, so that a close
        run again finds its comment instead of posting another); a closed or merged PR
        is left as it is."""
        ...

    def delete_branch(self, repository: str, branch: str) -> bool:
        """True when the branch was deleted, False when it was already gone."""
        ...
