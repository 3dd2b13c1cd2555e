"""Classifying one pull request and rolling states up across folders (SPEC §7).

Per PR, first match wins: MERGED, CLOSED, CONFLICTS, CI_FAILED, CHANGES_REQUIRED, then
WAITING (checks pending, review required, mergeability still being computed, a draft, or
ready and waiting to be merged). Across folders the worst state wins, in the order CLOSED,
CONFLICTS, CI_FAILED, CHANGES_REQUIRED, WAITING, MERGED; MERGED only when every observed
PR merged; NONE when no folder has a PR.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class PrState(StrEnum):
    MERGED = "MERGED"
    CLOSED = "CLOSED"
    CONFLICTS = "CONFLICTS"
    CI_FAILED = "CI_FAILED"
    CHANGES_REQUIRED = "CHANGES_REQUIRED"
    WAITING = "WAITING"
    NONE = "NONE"


PR_STATES: tuple[str, ...] = tuple(state.value for state in PrState)
ROLLUP_WORST_FIRST = (
    PrState.CLOSED,
    PrState.CONFLICTS,
    PrState.CI_FAILED,
    PrState.CHANGES_REQUIRED,
    PrState.WAITING,
    PrState.MERGED,
)

Mergeable = Literal["MERGEABLE", "CONFLICTING", "UNKNOWN"]
Checks = Literal["SUCCESS", "FAILURE", "PENDING", "NONE"]
Review = Literal["APPROVED", "CHANGES_REQUESTED", "REVIEW_REQUIRED", "NONE"]


@dataclass(frozen=True)
class PrEvidence:
    """What a probe read about one PR, in GitHub's vocabulary."""

    merged: bool
    closed: bool
    mergeable: Mergeable
    checks: Checks
    review: Review
    draft: bool = False  # a draft PR waits (it is never ready to merge)


def classify(pr: PrEvidence) -> PrState:
    if pr.merged:
        return PrState.MERGED
    if pr.closed:
        return PrState.CLOSED
    if pr.mergeable == "CONFLICTING":
        return PrState.CONFLICTS
    if pr.checks == "FAILURE":
        return PrState.CI_FAILED
    if pr.review == "CHANGES_REQUESTED":
        return PrState.CHANGES_REQUIRED
    return PrState.WAITING


def is_ready(pr: PrEvidence) -> bool:
    """Checks passed (or none), review not blocking, mergeable, not a draft."""
    return (
        not pr.merged and not pr.closed and not pr.draft and pr.mergeable == "MERGEABLE"
        and pr.checks in ("SUCCESS", "NONE") and pr.review in ("APPROVED", "NONE")
    )


def roll_up(states: Iterable[PrState]) -> PrState:
    """The worst state over folders that have a PR (NONE entries are ignored)."""
    observed = {state for state in states if state is not PrState.NONE}
    if not observed:
        return PrState.NONE
    for state in ROLLUP_WORST_FIRST:
        if state in observed:
            return state
    return PrState.NONE
