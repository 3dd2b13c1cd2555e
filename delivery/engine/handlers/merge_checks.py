"""What a `merge` stage checks right before each merge, and what it does when a later PR
of the set cannot be merged (SPEC §7.1 `merge`, `rollback=revert`).

Right before merging a PR the stage reads it once more, by number: a PR whose head moved,
whose checks, review or mergeability turned, that gained an unresolved review thread, or
whose `delivery/change-set` status is not `success` (where the forge has statuses) is not
merged, and the stage says what changed. With `rollback=revert`, a refused PR makes the
stage open a revert PR (find-or-create, so a resumed stage opens none twice) for each PR of
the set merged before it; without it the stage names the PRs that stay merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from delivery.engine.handlers.base import StageEnv
from delivery.engine.handlers.change_set import status_enabled
from delivery.errors import DeliveryError
from delivery.forges.base import PullRequestRef
from delivery.forges.change_set import CHANGE_SET_CONTEXT
from probes.evidence import ProbeFailure, PrQuery, PullRequestSnapshot
from probes.pr_state import PrState


@runtime_checkable
class RevertingForge(Protocol):
    """A forge that can open a PR reverting a merged one (GitHub)."""

    def revert_pull_request(self, repository: str, number: int, *, title: str,
                            body: str) -> PullRequestRef: ...


@dataclass(frozen=True)
class Recheck:
    fresh: PullRequestSnapshot | None
    changed: str  # empty: merge it


def blocker(pr: PullRequestSnapshot, env: StageEnv) -> str:
    """Why `pr`, as just read, must not be merged (empty: nothing stops it)."""
    if not pr.ready:
        return f"it is not ready ({pr.state.value})"
    if pr.unresolved_threads:
        return f"it has {pr.unresolved_threads} unresolved review thread(s)"
    if status_enabled(env):
        own = pr.extra.get("change_set_status")
        state = str(own.get("state", "")).upper() if isinstance(own, dict) else ""
        if state != "SUCCESS":
            said = f"{state.lower()}: {own.get('description', '')}" if isinstance(
                own, dict) else "missing"
            return f"its {CHANGE_SET_CONTEXT} status is {said}"
    return ""


def recheck(env: StageEnv, folder: str, repository: str, seen: PullRequestSnapshot) -> Recheck:
    """`seen` read again by number; `changed` says what differs from what the stage saw."""
    assert env.forge is not None
    fresh = env.forge.pull_requests([PrQuery(folder, repository, number=seen.number)]).get(
        folder)
    if isinstance(fresh, ProbeFailure):
        return Recheck(None, f"it could not be read again: {fresh.reason}")
    if fresh is None:
        return Recheck(None, "it could not be read again")
    if fresh.state is PrState.MERGED:
        return Recheck(fresh, "")  # merged meanwhile (by a person): done
    if fresh.head_sha != seen.head_sha:
        return Recheck(fresh, f"its head moved from {seen.head_sha[:12]} to "
                              f"{fresh.head_sha[:12]} since the stage read it")
    if fresh.state is not seen.state:
        return Recheck(fresh, f"it turned from {seen.state.value} to {fresh.state.value}")
    return Recheck(fresh, blocker(fresh, env))


def rollback(env: StageEnv, merged: Sequence[tuple[str, str, int]], refused: str,
             *, revert: bool) -> tuple[str, list[tuple[str, dict[str, object]]]]:
    """The sentence the failed stage adds about the PRs `merged` (folder, repository,
    number) before `refused`, and the events of the revert PRs it opened."""
    if not merged:
        return "", []
    names = ", ".join(f"{folder} #{number}" for folder, _, number in merged)
    if not revert:
        return (f"; {names} stay merged (rollback=revert on the merge node would open "
                "revert PRs)"), []
    forge = env.forge
    if not isinstance(forge, RevertingForge):
        return f"; {names} stay merged (this forge cannot open revert PRs)", []
    opened: list[str] = []
    events: list[tuple[str, dict[str, object]]] = []
    for folder, repository, number in merged:
        try:
            ref = forge.revert_pull_request(
                repository, number, title=f"Revert #{number}: {refused} could not be merged",
                body=(f"The change set could not be completed: {refused} could not be "
                      f"merged, so this reverts #{number}."))
        except DeliveryError as error:
            opened.append(f"{folder} #{number} not reverted ({error})")
            continue
        opened.append(f"{folder} #{number} reverted by {ref.url}")
        events.append(("revert_opened", {"folder": folder, "number": number,
                                         "revert_number": ref.number, "url": ref.url,
                                         "created": ref.created}))
    return "; rollback: " + ", ".join(opened), events
