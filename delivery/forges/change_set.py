"""The change set (SPEC §7.1): every PR of one run, across repositories, as one unit.

Each open PR's head carries the commit status `delivery/change-set`: `pending` while any
PR of the set is not ready, `success` when every PR is ready (or merged), `failure` once
one was closed without being merged. Branch protection that requires the status stops
anyone merging one PR alone.

Writes grow with the set, not with its square: a head's status is written when it carries
none yet (the head changed) or the set's state flipped, and its description does not name
what changes with the other PRs ("waiting for the rest of the change set"); what blocks the
set is said in the sticky comment or the dashboard, one object. The verdict is computed from
one probe's observations; what a head already carries comes from the same observation (the
probe reads the roll-up that holds the status), so deciding that nothing changed costs no
request at all.
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


WAITING = "waiting for the rest of the change set"
READY = "every pull request of the change set is ready"


def verdict(observed: Mapping[str, PrObservation], order: Sequence[str]) -> SetVerdict | None:
    """The status every PR of the set should carry (a description that stays the same
    while the state does); None when no folder has a PR."""
    summary = set_summary(observed, order)
    if summary is None or summary.state == "failure":
        return summary
    return SetVerdict(summary.state, WAITING if summary.state == "pending" else READY)


def set_summary(observed: Mapping[str, PrObservation], order: Sequence[str]
                ) -> SetVerdict | None:
    """The set's state and what a reader should know of it: the first blocking folder and
    why (the tables say it); None when no folder has a PR. `order` is the folders in the
    order a reader should meet the first blocker."""
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
    """The statuses to write: on each open PR's head that carries none (a new head) or
    another state than the verdict's. A description alone never causes a write."""
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
        carried = _carried(pr)
        if carried is not None and carried[0] == wanted.state:
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


# -- the sticky comments and the dashboard -----------------------------------------------
SMALL_SET = 10  # up to this many folders, every PR's sticky comment holds the set's table
TABLE_CHARS = 60_000  # GitHub refuses a comment or an issue body over 65,536 characters


@runtime_checkable
class CommentingForge(Protocol):
    """A forge that keeps one comment per PR by marker (GitHub)."""

    def upsert_comment(self, repository: str, number: int, marker: str, body: str) -> int: ...


@runtime_checkable
class DashboardForge(Protocol):
    """A forge that can keep the dashboard in an issue it opens (GitHub)."""

    server_url: str

    def upsert_tracking_issue(self, repository: str, marker: str, title: str, body: str,
                              *, known: int = 0) -> int: ...


def _key(branch: str) -> str:
    """A digest of the run's branch: a branch name may hold `-->`."""
    return hashlib.sha256(branch.encode()).hexdigest()[:16]


def comment_marker(branch: str) -> str:
    """Keyed by the run's branch (a PR is its head branch), so one PR has one comment
    whichever run or job writes it."""
    return f"<!-- delivery:change-set branch={_key(branch)} -->"


def dashboard_marker(branch: str) -> str:
    """The dashboard's (on the ticket or in the tracking issue), keyed as the comments."""
    return f"<!-- delivery:change-set dashboard branch={_key(branch)} -->"


def _cell(text: str) -> str:
    """A table cell: no pipe or line break of the text can break the table."""
    return " ".join(text.replace("|", "\\|").split())


HEADER = ("| folder | pull request | state | checks | unresolved threads |",
          "|---|---|---|---|---|")


def _row(folder: str, pr: PullRequestSnapshot, budget: str | None = None) -> str:
    """A folder's row: what only that PR's changes change (`budget`: a last column)."""
    row = (f"| {_cell(folder)} | [#{pr.number}]({_cell(pr.url)}) | {pr.state.value} | "
           f"{pr.evidence.checks} | {pr.unresolved_threads} |")
    return row if budget is None else row + f" {_cell(budget) or '—'} |"


def _run_line(run_id: str, observed: Mapping[str, PrObservation], order: Sequence[str],
              summary: SetVerdict) -> str:
    merged = all(isinstance(pr, PullRequestSnapshot) and pr.state is PrState.MERGED
                 for pr in (observed.get(f) for f in order) if pr is not None)
    status = ("done: every pull request of the set is merged" if merged else
              f"{summary.state}: {summary.description}")
    return f"Run `{_cell(run_id)}` — {_cell(status)}"


def _prs(observed: Mapping[str, PrObservation], order: Sequence[str]
         ) -> list[tuple[str, PullRequestSnapshot]]:
    return [(folder, pr) for folder in order
            if isinstance(pr := observed.get(folder), PullRequestSnapshot)]


def comment_body(run_id: str, branch: str, observed: Mapping[str, PrObservation],
                 order: Sequence[str], *, notes: Sequence[str] = (),
                 budget: str = "") -> str | None:
    """The sticky comment every PR of a small set carries (None when no folder has a
    PR); `budget`: what the run used of its agent budget, the same in every row."""
    summary = set_summary(observed, order)
    if summary is None:
        return None
    rows = [HEADER[0] + " budget used |", HEADER[1] + "---|",
            *(_row(folder, pr, budget) for folder, pr in _prs(observed, order))]
    lines = [comment_marker(branch), "**delivery: the change set of this run**", "",
             *rows, "", _run_line(run_id, observed, order, summary)]
    waits = wait_line(observed, order)
    lines += [waits] if waits else []
    lines += [f"- {_cell(note)}" for note in notes]
    return "\n".join(lines) + "\n"


def own_row_body(branch: str, folder: str, pr: PullRequestSnapshot, dashboard: str) -> str:
    """The sticky comment of one PR of a large set: its own row and the dashboard's link,
    nothing the other PRs change, so it is edited only when its own row changes."""
    return "\n".join([comment_marker(branch), "**delivery: this pull request in its change "
                      "set**", "", *HEADER, _row(folder, pr), "",
                      f"The whole change set: [its dashboard]({dashboard})"]) + "\n"


def dashboard_body(run_id: str, branch: str, observed: Mapping[str, PrObservation],
                   order: Sequence[str], *, notes: Sequence[str] = (), budget: str = "",
                   whole: str = "") -> str | None:
    """The set's one table (None when no folder has a PR): the run's status, the budget
    used and `notes` first, then a row per PR, cut past TABLE_CHARS with a line pointing at
    `whole` (the run's page; else `delivery inspect`)."""
    summary = set_summary(observed, order)
    if summary is None:
        return None
    lines = [dashboard_marker(branch), "**delivery: the change set of this run**", "",
             _run_line(run_id, observed, order, summary)]
    waits = wait_line(observed, order)
    lines += [waits] if waits else []
    if budget:
        lines.append(f"Agent budget used: {_cell(budget)}")
    lines += [f"- {_cell(note)}" for note in notes]
    lines += ["", *HEADER]
    size = sum(len(line) + 1 for line in lines)
    rows = [_row(folder, pr) for folder, pr in _prs(observed, order)]
    room = TABLE_CHARS - size - 300  # the cut's own line
    for shown, row in enumerate(rows):
        room -= len(row) + 1
        if room < 0:
            where = _cell(whole) if whole else f"`delivery inspect {_cell(run_id)}`"
            lines += [*rows[:shown], "", f"… and {len(rows) - shown} more pull requests: "
                      f"the whole table is in {where}"]
            break
    else:
        lines += rows
    return "\n".join(lines) + "\n"


def wait_line(observed: Mapping[str, PrObservation], order: Sequence[str]) -> str:
    """What the set's PRs wait for, one line ("" when none waits; SPEC §7.1 `wait`)."""
    waits = {folder: folder_waits(pr.raw()) for folder in order
             if isinstance(pr := observed.get(folder), PullRequestSnapshot)
             and pr.state is PrState.WAITING and not pr.ready}
    return f"Waiting for: {_cell(waiting_summary(waits))}" if waits else ""
