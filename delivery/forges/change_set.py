"""The change set (SPEC §7.1): every PR of one run, across repositories, as one unit.

Each open PR's head carries the commit status `delivery/change-set`: `pending` while any
PR of the set is not ready (the description names the first blocking folder and why),
`success` when every PR is ready (or merged), `failure` once one was closed without being
merged. Branch protection that requires the status stops anyone merging one PR alone.

The verdict is computed from one probe's observations; what a head already carries comes
from the same observation (the probe reads the roll-up that holds the status), so deciding
that nothing changed costs no request at all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from probes.evidence import PrObservation, PullRequestSnapshot
from probes.github_query import CHANGE_SET_CONTEXT as CHANGE_SET_CONTEXT
from probes.pr_state import PrState
from probes.waiting import folder_waits, waiting_summary

StatusState = Literal["pending", "success", "failure"]
DESCRIPTION_CHARS = 140  # GitHub's limit for a commit status description


@dataclass(frozen=True)
class SetVerdict:
    state: StatusState
    description: str


@dataclass(frozen=True)
class StatusWrite:
    folder: str
    repository: str
    number: int
    sha: str
    verdict: SetVerdict


@runtime_checkable
class ChangeSetForge(Protocol):
    """A forge that can put a commit status on a PR head (GitHub; the local forge has no
    statuses, so its runs skip the change-set status)."""

    def set_commit_status(self, repository: str, sha: str, *, context: str, state: str,
                          description: str, target_url: str = "") -> None: ...


def _why(folder: str, pr: PullRequestSnapshot) -> str:
    """Why `pr` is not ready, in a few words a person reading the status understands."""
    state = pr.state
    if state is PrState.CONFLICTS:
        return f"{folder} #{pr.number} conflicts with {pr.base_ref or 'its base'}"
    if state is PrState.CI_FAILED:
        names = ", ".join(c.name for c in pr.failing_checks[:3]) or "checks"
        return f"{folder} #{pr.number}: {names} failed"
    if state is PrState.CHANGES_REQUIRED:
        return f"{folder} #{pr.number}: changes requested"
    evidence = pr.evidence
    if evidence.draft:
        return f"{folder} #{pr.number} is a draft"
    if evidence.checks == "PENDING":
        return f"{folder} #{pr.number}: checks pending"
    if evidence.review == "REVIEW_REQUIRED":
        return f"{folder} #{pr.number}: review required"
    if evidence.mergeable != "MERGEABLE":
        return f"{folder} #{pr.number}: mergeability not known yet"
    return f"{folder} #{pr.number}: not ready"


def verdict(observed: Mapping[str, PrObservation], order: Sequence[str]) -> SetVerdict | None:
    """The status every PR of the set should carry; None when no folder has a PR.
    `order` is the folders in the order a reader should meet the first blocker."""
    prs = [(folder, pr) for folder in order
           if isinstance(pr := observed.get(folder), PullRequestSnapshot)]
    if not prs:
        return None
    for folder, pr in prs:
        if pr.state is PrState.CLOSED:
            return SetVerdict("failure", _clip(
                f"{folder} #{pr.number} was closed without being merged"))
    for folder, pr in prs:
        if pr.state is not PrState.MERGED and not pr.ready:
            return SetVerdict("pending", _clip(f"waiting for {_why(folder, pr)}"))
    return SetVerdict("success", _clip(f"all {len(prs)} pull requests of the set are ready"))


def status_writes(observed: Mapping[str, PrObservation], repositories: Mapping[str, str],
                  order: Sequence[str]) -> list[StatusWrite]:
    """The statuses to write: on each open PR's head whose status differs from the
    verdict (written only when it changes)."""
    wanted = verdict(observed, order)
    if wanted is None:
        return []
    writes: list[StatusWrite] = []
    for folder in order:
        pr = observed.get(folder)
        if not isinstance(pr, PullRequestSnapshot) or not pr.head_sha:
            continue
        if pr.state in (PrState.MERGED, PrState.CLOSED):
            continue  # a merged or closed PR's head no longer gates anything
        if _carried(pr) == (wanted.state, wanted.description):
            continue
        writes.append(StatusWrite(folder, repositories[folder], pr.number, pr.head_sha,
                                  wanted))
    return writes


def _carried(pr: PullRequestSnapshot) -> tuple[str, str] | None:
    own = pr.extra.get("change_set_status")
    if not isinstance(own, Mapping):
        return None
    return str(own.get("state", "")).lower(), str(own.get("description", ""))


def _clip(text: str) -> str:
    return text if len(text) <= DESCRIPTION_CHARS else text[: DESCRIPTION_CHARS - 1] + "…"


# -- the sticky comment: one per PR, the set's table, edited in place ---------------------
@runtime_checkable
class CommentingForge(Protocol):
    """A forge that keeps one comment per PR by marker (GitHub)."""

    def upsert_comment(self, repository: str, number: int, marker: str, body: str) -> int: ...


def comment_marker(branch: str) -> str:
    """Keyed by the run's branch (a PR is its head branch), so one PR has one comment
    whichever run or job writes it; a digest, since a branch name may hold `-->`."""
    key = hashlib.sha256(branch.encode()).hexdigest()[:16]
    return f"<!-- delivery:change-set branch={key} -->"


def _cell(text: str) -> str:
    """A table cell: no pipe or line break of the text can break the table."""
    return " ".join(text.replace("|", "\\|").split())


def comment_body(run_id: str, branch: str, observed: Mapping[str, PrObservation],
                 order: Sequence[str], *, notes: Sequence[str] = (),
                 budget: str = "") -> str | None:
    """The sticky comment every PR of the set carries (None when no folder has a PR);
    `budget`: what the run used of its agent budget, the same in every row."""
    wanted = verdict(observed, order)
    if wanted is None:
        return None
    rows = ["| folder | pull request | state | checks | unresolved threads | budget used |",
            "|---|---|---|---|---|---|"]
    for folder in order:
        pr = observed.get(folder)
        if not isinstance(pr, PullRequestSnapshot):
            continue
        rows.append(f"| {_cell(folder)} | [#{pr.number}]({_cell(pr.url)}) | "
                    f"{pr.state.value} | {pr.evidence.checks} | {pr.unresolved_threads} | "
                    f"{_cell(budget) or '—'} |")
    merged = all(isinstance(pr, PullRequestSnapshot) and pr.state is PrState.MERGED
                 for pr in (observed.get(f) for f in order) if pr is not None)
    run_status = ("done: every pull request of the set is merged" if merged else
                  f"{wanted.state}: {wanted.description}")
    lines = [comment_marker(branch), "**delivery: the change set of this run**", "",
             *rows, "", f"Run `{_cell(run_id)}` — {_cell(run_status)}"]
    waits = wait_line(observed, order)
    lines += [waits] if waits else []
    lines += [f"- {_cell(note)}" for note in notes]
    return "\n".join(lines) + "\n"


def wait_line(observed: Mapping[str, PrObservation], order: Sequence[str]) -> str:
    """What the set's PRs wait for, one line ("" when none waits; SPEC §7.1 `wait`)."""
    waits = {folder: folder_waits(pr.raw()) for folder in order
             if isinstance(pr := observed.get(folder), PullRequestSnapshot)
             and pr.state is PrState.WAITING and not pr.ready}
    return f"Waiting for: {_cell(waiting_summary(waits))}" if waits else ""
