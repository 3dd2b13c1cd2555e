"""What a probe reads about a folder's pull request, whatever forge it lives on.

A forge (GitHub through one GraphQL request, the local forge from its records) answers
`PullRequestSource.pull_requests` with one `PullRequestSnapshot` per folder — or `None`
when the folder has no PR, or a `ProbeFailure` naming what could not be read — so that
classification, roll-ups and the flat facts (`probes.facts`) are computed by one piece
of code for every forge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from probes.labels import StopMark
from probes.pr_state import PrEvidence, PrState, classify, is_ready


@dataclass(frozen=True)
class PrQuery:
    """Which PR to look at for one folder: by number, else the open (or latest) PR of a head
    branch. `repository` is `owner/name` on GitHub, a path on the local forge."""

    folder: str
    repository: str
    number: int | None = None
    head_branch: str | None = None


@dataclass(frozen=True)
class FailingCheck:
    name: str
    conclusion: str
    details_url: str = ""
    summary: str = ""


@dataclass(frozen=True)
class ReviewNote:
    author: str
    state: str
    body: str
    # the forge's id of the review (GitHub's node id; the local forge's number): a new
    # review is new feedback even when the count of reviews stays the same
    id: str = ""


@dataclass(frozen=True)
class ThreadNote:
    """An unresolved review thread: where it is and what its first comment asks."""

    path: str
    line: int | None
    author: str
    body: str
    # the forge's id of the thread (GitHub's node id, what `respond` replies to and resolves)
    id: str = ""


@dataclass(frozen=True)
class PullRequestSnapshot:
    number: int
    url: str
    head_ref: str
    head_sha: str
    base_ref: str
    evidence: PrEvidence
    unresolved_threads: int = 0
    failing_checks: tuple[FailingCheck, ...] = ()
    reviews: tuple[ReviewNote, ...] = ()
    conflict: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    threads: tuple[ThreadNote, ...] = ()  # unresolved threads (may be fewer than counted)
    # True when not every check could be read (past the probe's page bound, or the head
    # moved between pages): `failing_checks` may then miss some; the state does not.
    checks_truncated: bool = False
    # the ids of every unresolved thread read (`<f>.threads.ids`), quoted or not
    thread_ids: tuple[str, ...] = ()
    # the reviews and threads of authors who do not steer the run (SPEC §14), by login and
    # why, never their text: "review by @x (no write permission)"
    ignored: tuple[str, ...] = ()
    # the label `delivery:stop` on the open PR, and who set it (the stop switch's read)
    stop: StopMark | None = None

    @property
    def state(self) -> PrState:
        return classify(self.evidence)

    @property
    def ready(self) -> bool:
        return is_ready(self.evidence)

    def raw(self) -> dict[str, Any]:
        """The evidence a repair prompt can use (SPEC §7 `pr.raw`)."""
        return {
            "number": self.number,
            "url": self.url,
            "head": self.head_ref,
            "head_sha": self.head_sha,
            "base": self.base_ref,
            "state": self.state.value,
            "mergeable": self.evidence.mergeable,
            "checks": self.evidence.checks,
            "review": self.evidence.review,
            "draft": self.evidence.draft,
            "failing_checks": [
                {"name": c.name, "conclusion": c.conclusion, "details_url": c.details_url,
                 "summary": c.summary}
                for c in self.failing_checks
            ],
            "reviews": [
                {"id": r.id, "author": r.author, "state": r.state, "body": r.body}
                for r in self.reviews
            ],
            "pending_checks": list(self.extra.get("pending_checks") or []),
            "checks_truncated": self.checks_truncated,
            "conflict": self.conflict,
            "unresolved_threads": self.unresolved_threads,
            "threads": [
                {"id": t.id, "path": t.path, "line": t.line, "author": t.author,
                 "body": t.body}
                for t in self.threads
            ],
            **({"ignored": list(self.ignored)} if self.ignored else {}),
        }


@dataclass(frozen=True)
class ProbeFailure:
    """A folder whose PR could not be read (missing repository, permissions, …)."""

    folder: str
    reason: str


PrObservation = PullRequestSnapshot | ProbeFailure | None


class PullRequestSource(Protocol):
    """A forge's read side: one call observes every folder (one request on GitHub)."""

    def pull_requests(self, queries: Sequence[PrQuery]) -> Mapping[str, PrObservation]: ...
