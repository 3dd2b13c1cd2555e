"""The `publish` stage (SPEC §7.1), on the `Forge` protocol (the `merge` stage: `merging`).

It is idempotent, so a stage killed half-way runs again safely: a publish commits only
what is uncommitted, pushes (a no-op when the branch is up to date), finds the folder's PR
by head branch before creating one, and rewrites its own marked block in each PR body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.engine.handlers.change_set import (
    change_set_enabled,
    dashboard_link,
    observe_set,
    sync_change_set,
)
from delivery.engine.handlers.drafts import opened_drafts
from delivery.engine.handlers.folders import (
    StageProblem,
    base_branch,
    folder_repository,
    need_forge,
    on_each_folder,
    problems,
    stage_folders,
)
from delivery.errors import BranchConflict, DeliveryError, GitError, GitStalled
from delivery.forges.base import Forge, PullRequestRef
from delivery.forges.pacing import before_first_push
from delivery.git import diff_against_base, unpushed_commits
from delivery.git.change_check import EMPTY_TREE, scan_change, untracked_repositories
from delivery.git.sync import (
    fetch_remote,
    mark_published,
    published_head,
    push_backup,
    push_synced,
    remote_head,
    sync_with_branch,
)
from delivery.lang.model import Node
from delivery.lang.outcomes import StageOutcome
from probes.worktree import worktree_state

BLOCK_END = "<!-- delivery:end -->"
TITLE_CHARS = 72


def block_begin(run_id: str) -> str:
    return f"<!-- delivery:begin run={run_id} -->"


def sibling_block(run_id: str, ticket: str, prs: Mapping[str, PullRequestRef],
                  dashboard: str = "") -> str:
    """The marked block every PR of the run carries: the ticket and every sibling PR — or,
    for a set past 10 folders, the dashboard that lists them (`dashboard`), so that the
    bodies do not grow with the square of the set and no body changes with the others."""
    lines = [block_begin(run_id)]
    if ticket:
        lines.append(f"Ticket: {ticket}")
    if dashboard:
        lines.append(f"Pull requests of this delivery: listed in its dashboard, {dashboard}")
        return "\n".join([*lines, BLOCK_END])
    lines.append("Pull requests of this delivery:")
    lines += [f"- {folder}: {ref.url}" for folder, ref in prs.items()]
    lines.append(BLOCK_END)
    return "\n".join(lines)


def with_block(body: str, block: str) -> str:
    """`body` with its delivery block replaced by `block` (appended when it has none)."""
    start = body.find("<!-- delivery:begin")
    end = body.find(BLOCK_END, start + 1) if start >= 0 else -1
    if start >= 0 and end >= 0:
        return body[:start] + block + body[end + len(BLOCK_END):]
    return f"{body.rstrip()}\n\n{block}" if body.strip() else block


def _title(node: Node, context: Context) -> str:
    """The PR title and commit subject: the node's title=, else what this run works on —
    the scoped work when it says it in words, else the plan's first line — and only then
    the goal, which is often the graph's generic one ("Deliver the ticket")."""
    for text in (node.attr("title"), _work_words(context.get("current_work")),
                 str(context.get("plan") or ""), str(context.get("goal") or "")):
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        if first:
            return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1] + "…"
    return "delivery"


def _work_words(scope: Any) -> str:
    """The words of a work scope (SPEC §5): a goal's text or a candidate's description; a
    leaf or hierarchy names only tickets, which the body links."""
    if isinstance(scope, Mapping):
        if scope.get("type") == "goal":
            return str(scope.get("goal") or "")
        if scope.get("type") == "candidate":
            return str(scope.get("description") or "")
    return ""


def run_publish(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    """The folders at once (`on_each_folder`); then, once every PR exists, each PR's body is
    given the block linking all of them. A folder that fails lets the others publish: the
    stage fails naming it, and keeps the PRs the others got (`<f>.pr.number`, linked)."""
    run_id = str(context.get("internal.run_id") or "")
    ticket = str(context.get("ticket") or "")
    title = _title(node, context)
    message = f"{title}\n\nTicket: {ticket}\n" if ticket else f"{title}\n"
    draft = node.attr("draft").strip() == "true"  # new PRs open as drafts (drafts.py)
    try:
        forge = need_forge(env, "publishing")
        if not env.branch:
            raise StageProblem("the run has no branch to publish")
        folders = stage_folders(node, env)
    except StageProblem as problem:
        return StageResult.fail(str(problem))
    # a new PR's block links no sibling yet: the siblings are known once all have run
    first_block = sibling_block(run_id, ticket, {})

    def publish(folder: str) -> PullRequestRef | None:
        path = env.folders[folder]
        repository = folder_repository(env, folder)
        if not worktree_state(path).exists:
            raise StageProblem(f"folder '{folder}': no worktree at {path} (add a "
                               "worktree_add stage before publish)")
        try:
            return _publish_folder(forge, repository, path, env.branch,
                                   base_branch(env, folder), title, message, first_block,
                                   timeout=node.timeout, holds_secret=env.holds_secret,
                                   had_pr=bool(context.get(f"{folder}.pr.number")),
                                   draft=draft)
        except DeliveryError as err:
            raise StageProblem(f"folder '{folder}': {err}") from None

    done = on_each_folder(node, env, folders, publish)
    published = {each.folder: each.value for each in done
                 if not each.problem and each.value is not None}
    unchanged = [each.folder for each in done if not each.problem and each.value is None]
    # the new heads carry no change-set status yet: observe the set once and set it; first,
    # since the bodies of a set past 10 folders link the dashboard this writes
    events: list[tuple[str, dict[str, Any]]] = []
    side: dict[str, Any] = {}
    unsynced = ""
    try:
        if published and change_set_enabled(env):
            events, side = sync_change_set(env, context, observe_set(env))
    except StageProblem as problem:
        unsynced = str(problem)
    except DeliveryError as err:
        unsynced = f"reading the pull requests after publishing: {err}"
    block = sibling_block(run_id, ticket, published, dashboard_link(env, context, side))

    def link(folder: str) -> None:
        ref = published[folder]
        body = with_block(ref.body, block)
        if body != ref.body:
            try:
                forge.update_pull_request_body(folder_repository(env, folder), ref.number,
                                               body)
            except DeliveryError as err:
                raise StageProblem(f"folder '{folder}': {err}") from None

    linked = on_each_folder(node, env, list(published), link)
    updates: dict[str, Any] = opened_drafts(published, {
        folder: bool(context.get(f"{folder}.pr.number")) for folder in published}) \
        if draft else {}
    for folder, ref in published.items():
        updates[f"{folder}.pr.number"] = ref.number
        updates[f"{folder}.pr.url"] = ref.url
    # A folder without a PR reads as a probe shows it (empty), so that what the validator
    # counts as written after publish is (SPEC §10); a PR found earlier is kept.
    for folder in unchanged:
        for fact in ("pr.number", "pr.url"):
            if context.get(f"{folder}.{fact}") is None:
                updates[f"{folder}.{fact}"] = ""
    failed = problems([*done, *linked]) or unsynced
    if failed:
        result = StageResult.fail(failed, updates | side)
        result.events = events
        return result
    return StageResult(StageOutcome.SUCCEEDED, updates=updates | side, events=events)


PUSH_ROUNDS = 3  # a person pushing during our push: fetch, replay and push again


def _publish_folder(forge: Forge, repository: str, path: Path, branch: str, base: str,
                    title: str, message: str, body: str, *,
                    timeout: float | None, holds_secret: Callable[[str], bool],
                    had_pr: bool = False, draft: bool = False) -> PullRequestRef | None:
    """One folder of a publish, against its PR branch as people left it (SPEC §7.1): the
    folder's PR, or None when the branch never differed from the base (no PR). Its git
    fetches and pushes end within the stage's `timeout`. `had_pr`: the run found or opened
    the folder's PR before (its branch was pushed). `draft`: a new PR opens as a draft."""
    remote = forge.git_remote(repository).within(timeout)
    known = remote_head(path, branch)  # what the run knew of the branch before this fetch
    fetch_remote(path, remote)
    pushed = bool(remote_head(path, branch))
    if not pushed and (had_pr or known or published_head(path, branch)):
        _refuse_deleted_branch(forge, repository, branch)
    untracked_repos = untracked_repositories(path)  # the diff below cannot stage them
    if not untracked_repos and not pushed and diff_against_base(path, base).empty \
            and not unpushed_commits(path):
        return None
    _refuse_unpublishable(path, remote_head(path, branch) or remote_head(path, base),
                          holds_secret)
    # a branch never pushed has no open PR (a closed one is caught after the push, by the
    # find-or-create): no look-up request for a first publish
    found = forge.find_pull_request(repository, head=branch) if pushed else None
    if found is not None and found.state == "closed":
        raise StageProblem(_closed(found))
    for round_ in range(PUSH_ROUNDS):
        try:
            synced = sync_with_branch(path, branch, message, known_remote=known)
        except BranchConflict as conflict:
            # the run's work outlives a CI machine's clone only on the remote
            kept = " (pushed to the remote too)" if push_backup(path, branch, remote) else ""
            raise StageProblem(f"{conflict}{kept}") from None
        if not synced.to_push:
            mark_published(path, branch, synced.tip)
            break
        if found is not None and found.state == "merged":
            raise StageProblem(f"PR #{found.number} ({found.url}) is already merged; the "
                               f"run's new work on {branch} was not pushed (deliver it "
                               "with a new run on another branch)")
        try:
            if not pushed and round_ == 0:
                before_first_push(forge)  # a large set's CI is started spread out
            # the forge hands out the remote again right before the push (a kill point
            # of the acceptance tests: after the commit, before the push)
            push_synced(path, branch, synced,
                        forge.git_remote(repository).bounded_like(remote))
            break
        except GitError as err:
            # refused: a person pushed meanwhile (the lease) or the branch is protected;
            # fetch and try again, and the last refusal stands (a stall is not retried:
            # the stage's time is up)
            if round_ == PUSH_ROUNDS - 1 or isinstance(err, GitStalled):
                raise
            known = synced.remote
            fetch_remote(path, remote)
    if found is not None and found.state == "open":
        return found
    ref = forge.find_or_create_pull_request(repository, head=branch, base=base,
                                            title=title, body=body,
                                            # asked only for drafts: a forge of its own
                                            # (an embedder's) may not know the argument
                                            **({"draft": True} if draft else {}))
    if ref.state == "closed":  # closed between the look-up and the push
        raise StageProblem(_closed(ref))
    return ref


def _refuse_deleted_branch(forge: Forge, repository: str, branch: str) -> None:
    """The run pushed `branch` before and it is gone: when its PR was closed, a person took
    the branch down (often to take a leaked file off it), and pushing it again would bring
    the file back (SPEC §14)."""
    found = forge.find_pull_request(repository, head=branch)
    if found is not None and found.state == "closed":
        raise StageProblem(f"the branch {branch} was deleted and its PR #{found.number} "
                           f"({found.url}) closed; the run does not push it again — "
                           "restore the branch and reopen the PR to go on, or leave the "
                           "delivery closed")


def _refuse_unpublishable(path: Path, since: str, holds_secret: Callable[[str], bool]
                          ) -> None:
    """StageProblem when the folder's change holds a nested git repository or a secret
    (SPEC §14), naming the paths (never a secret's value); nothing is committed or pushed
    then, and the worktree is left as it is for a person."""
    found = scan_change(path, since or EMPTY_TREE, holds_secret)
    if found.nested:
        raise StageProblem(f"{_listed(found.nested)}: a nested git repository inside the "
                           "worktree (an agent's git init or clone), which would be "
                           "published as an empty gitlink without its files; not published "
                           "— delete its .git folder to keep its files in the change, or "
                           "move it out of the worktree, then resume")
    if found.secret_files:
        raise StageProblem(f"{_listed(found.secret_files)}: holds a secret (a known secret "
                           "value or a token-shaped string); not published — take it out "
                           "of the file (read it from the environment at run time), then "
                           "resume")


def _listed(paths: tuple[str, ...], shown: int = 5) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def _closed(ref: PullRequestRef) -> str:
    return (f"PR #{ref.number} ({ref.url}) was closed without being merged; the run "
            "neither reopens nor replaces it — reopen it and resume the run, or leave the "
            "delivery closed")
