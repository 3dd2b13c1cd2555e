"""The `merge` stage (SPEC §7.1), on the `Forge` protocol.

The folders' PRs are read once, then merged one by one in `order=`; each folder ends as a
`FolderMerge`, and the first that is not merged (waiting for a person, or refused) ends the
stage: the rest are left open, and the PRs merged before it stay merged or, with
`rollback=revert`, are reverted (`merge_checks`). With `policy=each` (campaigns: PRs that
do not depend on each other) every ready PR is merged, the others are skipped for a later
probe, and only a ready PR that cannot be merged fails the stage. Idempotent: a merge
passes the head SHA it saw and counts an already merged PR as done, so a resumed stage
merges nothing twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.engine.handlers.change_set import (
    merges_each,
    observe_set,
    sync_change_set,
    sync_comments,
)
from delivery.engine.handlers.folders import (
    StageProblem,
    folder_repository,
    need_forge,
    stage_folders,
)
from delivery.engine.handlers.merge_checks import recheck, rollback
from delivery.errors import DeliveryError
from delivery.forges.base import Forge
from delivery.lang.model import Node
from delivery.lang.outcomes import StageOutcome
from probes.evidence import ProbeFailure, PrQuery, PullRequestSnapshot

# merged: by this stage; already_merged: before it (a person, or the stage before a
# resume); skipped: the folder has no PR (no changes); waiting: the PR is not ready, a
# person must act first; refused: it could not be read or merged, or changed under us
MergeStatus = Literal["merged", "already_merged", "skipped", "waiting", "refused"]
DONE: Final = frozenset({"merged", "already_merged"})


@dataclass(frozen=True)
class FolderMerge:
    """How one folder's PR came out of the merge stage."""

    folder: str
    repository: str
    status: MergeStatus
    number: int = 0
    reason: str = ""  # why it was not merged (waiting, refused): the stage's failure_reason

    @property
    def done(self) -> bool:
        return self.status in DONE

    @property
    def stops(self) -> bool:
        """The stage ends at this folder: the rest are left open."""
        return self.status in ("waiting", "refused")


def merge_order(node: Node, folders: list[str]) -> list[str]:
    """`order=` first, then the folders it does not name, in folder order."""
    named = [name.strip() for name in node.attr("order").split(",") if name.strip()]
    return [f for f in named if f in folders] + [f for f in folders if f not in named]


def run_merge(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    events: list[tuple[str, dict[str, Any]]] = []
    side: dict[str, Any] = {}
    try:
        forge = need_forge(env, "merging")
        folders = stage_folders(node, env)
        unknown = [name.strip() for name in node.attr("order").split(",")
                   if name.strip() and name.strip() not in env.folders]
        if unknown:
            raise StageProblem(f"order= names '{unknown[0]}', not a folder of the run")
        repositories = {folder: folder_repository(env, folder)
                        for folder in merge_order(node, folders)}
        # one read of every PR (one request on GitHub); each merge names the head SHA seen
        observed = forge.pull_requests([PrQuery(folder, repository, head_branch=env.branch)
                                        for folder, repository in repositories.items()])
        if len(folders) == len(env.folders):  # the set as the stage found it
            events, side = sync_change_set(env, context, observed)
    except DeliveryError as problem:  # nothing merged yet: nothing to roll back
        failed = StageResult.fail(str(problem), side)
        failed.events = events
        return failed
    each = merges_each(node)
    merges: list[FolderMerge] = []
    for folder, repository in repositories.items():
        merges.append(_merge_folder(forge, node, env, folder, repository,
                                    observed.get(folder), each=each))
        if merges[-1].stops and not each:
            return _stopped(node, context, env, merges, events + _merged(merges), side)
    if each:
        return _each_ended(merges, events, side)
    return StageResult(StageOutcome.SUCCEEDED, updates=side, events=events + _merged(merges))


def _merged(merges: list[FolderMerge]) -> list[tuple[str, dict[str, Any]]]:
    """The events of the PRs this stage merged (a resume's already merged ones are not)."""
    return [("pr_merged", {"folder": m.folder, "number": m.number})
            for m in merges if m.status == "merged"]


def _each_ended(merges: list[FolderMerge], events: list[tuple[str, dict[str, Any]]],
                side: Mapping[str, Any]) -> StageResult:
    """`policy=each`: a PR not ready now is skipped (the next probe sees it again); the
    stage fails only for the ready PRs that could not be merged, naming each."""
    said = events + _merged(merges) + [
        ("merge_skipped", {"folder": m.folder, "number": m.number, "reason": m.reason})
        for m in merges if m.status == "waiting"]
    refused = [m for m in merges if m.status == "refused"]
    if not refused:
        return StageResult(StageOutcome.SUCCEEDED, updates=dict(side), events=said)
    merged = [m.folder for m in merges if m.status == "merged"]
    also = f" (merged: {', '.join(merged)})" if merged else ""
    failed = StageResult.fail("; ".join(m.reason for m in refused) + also, dict(side))
    failed.events = said
    return failed


def _merge_folder(forge: Forge, node: Node, env: StageEnv, folder: str, repository: str,
                  seen: PullRequestSnapshot | ProbeFailure | None, *,
                  each: bool = False) -> FolderMerge:
    """Merge one folder's PR as the stage read it, if nothing stops it. `each`: a PR that
    changed since the stage read it waits for the next probe instead of refusing."""

    def result(status: MergeStatus, reason: str = "") -> FolderMerge:
        number = 0 if seen is None or isinstance(seen, ProbeFailure) else seen.number
        return FolderMerge(folder, repository, status, number, reason)

    if isinstance(seen, ProbeFailure):
        return result("refused", f"folder '{folder}': {seen.reason}")
    if seen is None:
        return result("skipped")  # no PR (a folder without changes): nothing to merge
    if seen.state.value == "MERGED":
        return result("already_merged")
    if seen.evidence.draft:  # classified WAITING, but waiting does not help
        return result("waiting", f"folder '{folder}': PR #{seen.number} is a draft; mark it "
                      "ready for review, then run the merge again; left open with the rest")
    if not seen.ready:
        return result("waiting", f"folder '{folder}': PR #{seen.number} is not ready to "
                      f"merge ({seen.state.value}); left open with the rest")
    if seen.unresolved_threads:
        # a reviewer's open question blocks the merge whatever the workflow routed
        # (as GitHub's "require conversation resolution" would)
        return result("waiting", f"folder '{folder}': PR #{seen.number} has "
                      f"{seen.unresolved_threads} unresolved review thread(s); not merged "
                      "while a thread is open, left open with the rest")
    try:
        # right before the merge: read it again, and merge only what did not change
        again = recheck(env, folder, repository, seen)
    except DeliveryError as err:
        return result("refused", str(err))
    if again.changed:
        return result("waiting" if each else "refused", f"folder '{folder}': PR "
                      f"#{seen.number} was not merged: {again.changed}; left open"
                      + ("" if each else " with the rest"))
    if again.fresh is not None and again.fresh.state.value == "MERGED":
        return result("already_merged")
    try:
        # `method=` only when the node names one: forges without it merge commits
        how = node.attr("method").strip()
        merged = forge.merge_pull_request(repository, seen.number,
                                          expected_head_sha=seen.head_sha,
                                          **({"method": how} if how else {}))
    except DeliveryError as err:
        return result("refused", f"folder '{folder}': {err}")
    if merged.outcome == "refused":
        return result("refused", f"folder '{folder}': PR #{seen.number} was not merged: "
                      f"{merged.reason}")
    return result("merged")


def _stopped(node: Node, context: Context, env: StageEnv, merges: list[FolderMerge],
             events: list[tuple[str, dict[str, Any]]],
             side: Mapping[str, Any]) -> StageResult:
    """The failed stage when the last of `merges` stopped it: why, what was merged before
    it, and (rollback=revert) the revert PRs opened for those."""
    stopped, before = merges[-1], [m for m in merges[:-1] if m.done]
    said, reverts = rollback(env, [(m.folder, m.repository, m.number) for m in before],
                             stopped.folder, revert=node.attr("rollback").strip() == "revert")
    updates = dict(side)
    if before:
        said = f" (merged before it: {', '.join(m.folder for m in before)}){said}"
    if reverts:  # the sticky comments link the revert PRs
        notes = tuple(f"{fields['folder']} #{fields['number']} is reverted by "
                      f"{fields['url']}" for _, fields in reverts)
        try:
            updates |= sync_comments(env, context, observe_set(env), notes=notes)
        except DeliveryError as err:
            said += f" (the comments could not link the reverts: {err})"
    failed = StageResult.fail(f"{stopped.reason}{said}", updates)
    failed.events = events + reverts
    return failed
