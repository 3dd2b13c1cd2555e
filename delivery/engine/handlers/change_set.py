"""The change set's commit status and sticky comments after each publish and probe
(SPEC §7.1).

A probe hands its observations over; a publish observes once more (one GraphQL request on
GitHub) after its pushes, because the new heads carry no status yet. Only heads whose
status differs from the verdict are written, so a round where nothing changed writes
nothing. A forge without commit statuses (the local forge) is left alone, and so is a
workflow whose merge uses `policy=each`: its PRs merge one by one, so a status holding
them together would guard nothing (the sticky comments are still written).

The sticky comment (one per PR, found by its marker, edited in place) is written when its
text differs from the one the run last wrote, remembered as a digest in the context
(`internal.change_set.comment.<folder>`): an unchanged round sends nothing, and a stage
killed after writing but before its record finds the comment by marker again and edits
it, so a PR never gets a second one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv
from delivery.errors import DeliveryError, StageProblem
from delivery.forges.change_set import (
    CHANGE_SET_CONTEXT,
    ChangeSetForge,
    CommentingForge,
    comment_body,
    comment_marker,
    status_writes,
)
from delivery.lang.model import Node, NodeType
from probes.evidence import PrObservation, PrQuery, PullRequestSnapshot

Event = tuple[str, dict[str, Any]]


def change_set_enabled(env: StageEnv) -> bool:
    """On unless the graph says `change_set=false`, and only where statuses exist."""
    setting = env.workflow.attr("change_set", "true").strip().lower()
    return setting not in ("false", "0", "no", "off") and isinstance(env.forge, ChangeSetForge)


def merges_each(node: Node) -> bool:
    """A merge node with `policy=each`: its PRs merge one by one, not as a set."""
    return node.type is NodeType.MERGE and node.attr("policy").strip() == "each"


def status_enabled(env: StageEnv) -> bool:
    """The `delivery/change-set` status is written (and required before a merge) unless a
    merge of the workflow uses `policy=each` (SPEC §7.1: it would guard nothing)."""
    return change_set_enabled(env) and not any(
        merges_each(node) for node in env.workflow.nodes_of(NodeType.MERGE))


def observe_set(env: StageEnv) -> Mapping[str, PrObservation]:
    """Every folder's PR by the run's head branch, in one read."""
    assert env.forge is not None
    return env.forge.pull_requests([PrQuery(folder, env.repos[folder], head_branch=env.branch)
                                    for folder in env.folders if env.repos.get(folder)])


def sync_status(env: StageEnv, observed: Mapping[str, PrObservation]) -> list[Event]:
    """Write the change-set status where it changed; the events say what was written.
    `observed` must cover every folder of the run (a one-folder probe does not)."""
    if not status_enabled(env) or not env.branch:
        return []
    forge = env.forge
    assert isinstance(forge, ChangeSetForge)
    repositories = {folder: env.repos.get(folder, "") for folder in env.folders}
    events: list[Event] = []
    for write in status_writes(observed, repositories, list(env.folders)):
        try:
            forge.set_commit_status(write.repository, write.sha, context=CHANGE_SET_CONTEXT,
                                    state=write.verdict.state,
                                    description=write.verdict.description)
        except DeliveryError as error:
            raise StageProblem(f"folder '{write.folder}': the {CHANGE_SET_CONTEXT} status "
                               f"could not be written: {error}") from None
        events.append(("change_set_status", {
            "folder": write.folder, "number": write.number, "sha": write.sha,
            "state": write.verdict.state, "description": write.verdict.description}))
    return events


COMMENT_DIGEST = "internal.change_set.comment."


def sync_comments(env: StageEnv, context: Context, observed: Mapping[str, PrObservation],
                  *, notes: tuple[str, ...] = ()) -> dict[str, Any]:
    """Write each PR's sticky comment where its table changed (`notes`: lines below it,
    such as the revert PRs); the context updates that remember what was written."""
    forge = env.forge
    if not change_set_enabled(env) or not isinstance(forge, CommentingForge):
        return {}
    run_id = str(context.get("internal.run_id") or "")
    budget, warned = env.budget_used()
    if warned:
        notes = (f"Warning: the run has used 80% or more of its budget ({budget}); at "
                 "100% it pauses before its next agent stage", *notes)
    body = comment_body(run_id, env.branch, observed, list(env.folders), notes=notes,
                        budget=budget)
    if body is None:
        return {}
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    updates: dict[str, Any] = {}
    for folder in env.folders:
        pr = observed.get(folder)
        if not isinstance(pr, PullRequestSnapshot) or \
                context.get(COMMENT_DIGEST + folder) == f"{pr.number}:{digest}":
            continue
        try:
            forge.upsert_comment(env.repos[folder], pr.number, comment_marker(env.branch), body)
        except DeliveryError as error:
            raise StageProblem(f"folder '{folder}': the change set's comment could not be "
                               f"written: {error}") from None
        updates[COMMENT_DIGEST + folder] = f"{pr.number}:{digest}"
    return updates


def sync_change_set(env: StageEnv, context: Context, observed: Mapping[str, PrObservation]
                    ) -> tuple[list[Event], dict[str, Any]]:
    """The status, then the comments: the events and the context updates."""
    events = sync_status(env, observed)
    return events, sync_comments(env, context, observed)
