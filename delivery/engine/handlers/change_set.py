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
it, so a PR never gets a second one. Up to 10 folders each comment holds the set's table;
past 10 the table lives in one dashboard (`internal.change_set.dashboard.*`) and each
comment holds its own row and the dashboard's link, so one PR's change edits its own
comment and the dashboard, not every PR's (SPEC §7.1: writes grow with the set, not with
its square).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv
from delivery.errors import DeliveryError, StageProblem
from delivery.forges.change_set import (
    CHANGE_SET_CONTEXT,
    SMALL_SET,
    ChangeSetForge,
    CommentingForge,
    DashboardForge,
    comment_body,
    comment_marker,
    dashboard_body,
    dashboard_marker,
    own_row_body,
    status_writes,
)
from delivery.forges.stop_label import ticket_issue
from delivery.lang.model import Node, NodeType
from delivery.store.base import RemoteTarget
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
DASHBOARD = "internal.change_set.dashboard."  # its url, issue number, place and digest


def state_repository(target: RemoteTarget | None) -> str:
    """`owner/name` of `--state git:owner/name`; "" for a state kept elsewhere."""
    spec = target.spec if target is not None else ""
    return spec.removeprefix("git:") if spec.startswith("git:") else ""


def actions_run_page(environ: Mapping[str, str]) -> str:
    """The page of the Actions run the job is part of ("" outside Actions)."""
    run, repository = environ.get("GITHUB_RUN_ID", ""), environ.get("GITHUB_REPOSITORY", "")
    server = (environ.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/")
    return f"{server}/{repository}/actions/runs/{run}" if run and repository else ""


def sync_comments(env: StageEnv, context: Context, observed: Mapping[str, PrObservation],
                  *, notes: tuple[str, ...] = ()) -> dict[str, Any]:
    """Write the sticky comments (and, past SMALL_SET folders, the dashboard) where their
    text changed (`notes`: lines for the set's table, such as the revert PRs); the context
    updates that remember what was written."""
    forge = env.forge
    if not change_set_enabled(env) or not isinstance(forge, CommentingForge):
        return {}
    run_id = str(context.get("internal.run_id") or "")
    budget, warned = env.budget_used()
    if warned:
        notes = (f"Warning: the run has used 80% or more of its budget ({budget}); at "
                 "100% it pauses before its next agent stage", *notes)
    order = list(env.folders)
    if len(order) <= SMALL_SET:
        body = comment_body(run_id, env.branch, observed, order, notes=notes, budget=budget)
        return {} if body is None else _write_comments(env, context, observed,
                                                       lambda folder, pr: body)
    table = dashboard_body(run_id, env.branch, observed, order, notes=notes, budget=budget,
                           whole=env.run_page)
    if table is None:
        return {}
    updates = _write_dashboard(env, context, table)
    link = dashboard_link(env, context, updates)
    return updates | _write_comments(
        env, context, observed, lambda folder, pr: own_row_body(env.branch, folder, pr, link))


def dashboard_link(env: StageEnv, context: Context, updates: Mapping[str, Any]) -> str:
    """The dashboard's address for a set past SMALL_SET folders ("" otherwise, or before
    one was written)."""
    if len(env.folders) <= SMALL_SET:
        return ""
    return str(updates.get(DASHBOARD + "url") or context.get(DASHBOARD + "url") or "")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _write_comments(env: StageEnv, context: Context, observed: Mapping[str, PrObservation],
                    body_of: Callable[[str, PullRequestSnapshot], str]) -> dict[str, Any]:
    """Each PR's sticky comment, where its text differs from the one last written."""
    assert isinstance(env.forge, CommentingForge)
    updates: dict[str, Any] = {}
    for folder in env.folders:
        pr = observed.get(folder)
        if not isinstance(pr, PullRequestSnapshot):
            continue
        body = body_of(folder, pr)
        seen = f"{pr.number}:{_digest(body)}"
        if context.get(COMMENT_DIGEST + folder) == seen:
            continue
        try:
            env.forge.upsert_comment(env.repos[folder], pr.number,
                                     comment_marker(env.branch), body)
        except DeliveryError as error:
            raise StageProblem(f"folder '{folder}': the change set's comment could not be "
                               f"written: {error}") from None
        updates[COMMENT_DIGEST + folder] = seen
    return updates


def _write_dashboard(env: StageEnv, context: Context, body: str) -> dict[str, Any]:
    """The set's table in its one dashboard, when it changed: a sticky comment on the
    ticket when it is an issue on the forge's server the token can write to, else the
    tracking issue (find-or-create) in the state repository or the first folder's."""
    forge = env.forge
    assert isinstance(forge, CommentingForge)
    digest = _digest(body)
    if context.get(DASHBOARD + "url") and context.get(DASHBOARD + "digest") == digest:
        return {}
    server = str(getattr(forge, "server_url", "") or "").rstrip("/")
    marker = dashboard_marker(env.branch)
    ticket = ticket_issue(str(context.get("ticket") or ""), server)
    if ticket is not None and context.get(DASHBOARD + "place") != "issue":
        try:
            found = forge.upsert_comment(ticket[0], ticket[1], marker, body)
            return {DASHBOARD + "url": f"{server}/{ticket[0]}/issues/{ticket[1]}"
                                       f"#issuecomment-{found}",
                    DASHBOARD + "place": "ticket", DASHBOARD + "digest": digest}
        except DeliveryError:
            pass  # the ticket is not the token's to comment on: a tracking issue instead
    if not isinstance(forge, DashboardForge):
        return {}
    home = env.state_repository or next(
        (env.repos[folder] for folder in env.folders if env.repos.get(folder)), "")
    try:
        number = forge.upsert_tracking_issue(
            home, marker, f"delivery: the change set of {env.branch}", body,
            known=int(context.get(DASHBOARD + "number") or 0))
    except DeliveryError as error:
        raise StageProblem(f"the change set's tracking issue in {home} could not be "
                           f"written: {error}") from None
    return {DASHBOARD + "url": f"{server}/{home}/issues/{number}",
            DASHBOARD + "number": number, DASHBOARD + "place": "issue",
            DASHBOARD + "digest": digest}


def sync_change_set(env: StageEnv, context: Context, observed: Mapping[str, PrObservation]
                    ) -> tuple[list[Event], dict[str, Any]]:
    """The status, then the comments: the events and the context updates."""
    events = sync_status(env, observed)
    return events, sync_comments(env, context, observed)
