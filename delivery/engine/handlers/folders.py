"""Stages that look at or shape the run's folders (SPEC §7, §7.1): `probe`, `worktree_add`
and `worktree_remove`.

A probe writes per-folder facts under the folder's name and the roll-ups; the PR side goes
through the forge's one-call read (`PullRequestSource`) and `probes.facts`, so every forge
classifies alike. A folder the forge cannot read fails the stage, naming it and why.

Folder stages work on up to `parallelism(node, workflow, --max-parallel)` folders at once
(`on_each_folder`, SPEC §8.1), in worker threads: what a folder's work touches is its own
worktree and clone, or shared parts that lock (the clone cache's and the fetch's flocks,
the local forge's PR records, the GitHub forge's one connection and its write pacer).
Results come back in folder order, so facts and context keys are those of one folder at a
time; a folder that fails lets the others finish, and the stage fails naming every folder
that failed, in folder order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from delivery.engine.context import Context
from delivery.engine.folder_pool import map_folders, parallelism
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.engine.handlers.change_set import sync_change_set
from delivery.engine.handlers.drafts import ready_drafts
from delivery.errors import DeliveryError
from delivery.errors import StageProblem as StageProblem
from delivery.forges.base import Forge
from delivery.forges.stop_label import PROBED_KEY, LabelledProbe, probed_stop, ticket_issue
from delivery.git import (
    RemovalResult,
    add_worktree,
    clone_path,
    ensure_clone,
    remove_worktree,
)
from delivery.git.sync import conflicting_files
from delivery.hidden_text import strip_hidden
from delivery.lang.declarations import PROBE_KINDS
from delivery.lang.model import Node
from delivery.lang.outcomes import StageOutcome
from probes.evidence import PrObservation, PrQuery
from probes.facts import pr_facts as forge_pr_facts
from probes.facts import roll_up_facts
from probes.worktree import diff_facts, worktree_facts, worktree_state

PR_KEYS = ("pr.state", "pr.ready", "pr.number", "pr.url", "pr.raw")
THREAD_KEYS = ("threads.unresolved", "threads.ids")
T = TypeVar("T")


@dataclass(frozen=True)
class FolderDone(Generic[T]):
    """One folder's share of a stage: what its work returned, or why it failed."""

    folder: str
    value: T | None = None
    problem: str = ""  # "folder 'web': …" when it failed, else empty


def on_each_folder(node: Node, env: StageEnv, folders: Sequence[str],
                   work: Callable[[str], T]) -> list[FolderDone[T]]:
    """`work(folder)` for each folder, up to the stage's parallelism at once, in folder
    order. A StageProblem (which names its folder) or a DeliveryError fails that folder
    only: the others go on (the caller reports every failure, `problems`)."""
    def one(folder: str) -> FolderDone[T]:
        try:
            return FolderDone(folder, work(folder))
        except StageProblem as problem:
            return FolderDone(folder, problem=str(problem))
        except DeliveryError as err:
            return FolderDone(folder, problem=f"folder '{folder}': {err}")

    return map_folders(one, folders, parallelism(node, env.workflow, env.max_parallel))


def problems(done: Sequence[FolderDone[Any]]) -> str:
    """The failed folders' problems in folder order, one sentence each ("" when none)."""
    return "; ".join(each.problem for each in done if each.problem)


def stage_folders(node: Node, env: StageEnv) -> list[str]:
    if not node.folder:
        return list(env.folders)
    if node.folder not in env.folders:
        known = ", ".join(env.folders) or "none (pass --repo NAME=LOCATION)"
        raise StageProblem(f"folder '{node.folder}' is not one of the run's folders: {known}")
    return [node.folder]


def need_forge(env: StageEnv, what: str) -> Forge:
    if env.forge is None:
        raise StageProblem(f"{what} needs a forge, and this run has none "
                            "(pass --repo NAME=LOCATION and --forge)")
    return env.forge


def folder_repository(env: StageEnv, folder: str) -> str:
    repository = env.repos.get(folder)
    if not repository:
        raise StageProblem(f"folder '{folder}' has no repository (pass --repo "
                            f"{folder}=LOCATION)")
    return repository


def _fail_on(problem: Exception) -> StageResult:
    return StageResult.fail(str(problem))


# -- probe -----------------------------------------------------------------------------
def run_probe(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    kinds = node.probe_kinds or PROBE_KINDS
    try:
        folders = stage_folders(node, env)
        facts: dict[str, Any] = {}
        events: list[tuple[str, dict[str, Any]]] = []
        if "pr" in kinds or "threads" in kinds:
            facts.update(_pr_facts(env, folders, kinds, context, events))
            _add_conflicting_files(node, env, folders, facts)

        def local_facts(folder: str) -> dict[str, Any]:
            path = env.folders[folder]
            found: dict[str, Any] = {}
            if "worktree" in kinds:
                found.update(worktree_facts(folder, path))
            if "diff" in kinds:
                found.update(_diff_facts(env, folder, path))
            return found

        done = on_each_folder(node, env, folders, local_facts)
        if problems(done):
            raise StageProblem(problems(done))
        for each in done:
            facts.update(each.value or {})
    except (StageProblem, DeliveryError) as problem:
        return _fail_on(problem)
    return StageResult(StageOutcome.SUCCEEDED, updates=facts, events=events)


def _pr_facts(env: StageEnv, folders: list[str], kinds: tuple[str, ...],
              context: Context, events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    wanted = (PR_KEYS if "pr" in kinds else ()) + (THREAD_KEYS if "threads" in kinds else ())
    if not folders:  # a run without folders observes no PR: the roll-ups say NONE
        return {key: value for key, value in roll_up_facts({}, []).items() if key in wanted}
    forge = need_forge(env, "probing pull requests")
    queries = [PrQuery(folder, folder_repository(env, folder), head_branch=env.branch or None)
               for folder in folders]
    seen, probed = _observe(forge, queries, context, whole=len(folders) == len(env.folders))
    # the run's drafts whose checks pass are marked ready first, and observed so
    answers, marked, side = ready_drafts(env, context, seen)
    if probed is not None:  # the stop switch's read, taken by the next boundary
        side = {**side, PROBED_KEY: probed}
    events += marked
    observed = forge_pr_facts(answers, folders)
    if observed.failures:
        raise StageProblem("; ".join(f"folder '{failure.folder}': {failure.reason}"
                                      for failure in observed.failures))
    if len(folders) == len(env.folders):  # the set's status needs every PR's state
        written, comments = sync_change_set(env, context, answers)
        events += written
        side |= comments
    facts: dict[str, Any] = {key: _visible(value) if key.endswith("pr.raw") else value
                             for key, value in observed.facts.items()}
    if len(folders) < len(env.folders):
        # `folder=` probed one folder: the roll-ups still cover every folder, the others
        # as they were last observed.
        everyone = {key: context.get(key) for other in env.folders if other not in folders
                    for key in (f"{other}.pr.state", f"{other}.pr.ready",
                                f"{other}.threads.unresolved")
                    if context.get(key) not in (None, "")}
        facts.update(roll_up_facts({**everyone, **facts}, list(env.folders)))
    return {key: value for key, value in facts.items()
            if key in wanted or key.split(".", 1)[1] in wanted} | side


def _observe(forge: Forge, queries: list[PrQuery], context: Context, *, whole: bool
             ) -> tuple[Mapping[str, PrObservation], dict[str, str] | None]:
    """The PRs, and — where the forge's probe reads labels and every PR of the run is
    read — what its read says to the stop switch (`stop_label.probed_stop`)."""
    if not whole or not isinstance(forge, LabelledProbe):
        return forge.pull_requests(queries), None
    ticket = ticket_issue(str(context.get("ticket") or ""), str(forge.server_url or ""))
    seen, read = forge.observe(queries, ticket)
    return seen, probed_stop(seen, ticket, read)


def _add_conflicting_files(node: Node, env: StageEnv, folders: list[str],
                           facts: dict[str, Any]) -> None:
    """`conflicting_files` in the `pr.raw` of a PR in CONFLICTS: GitHub says only that it
    conflicts, and a repair needs the files. Computed as a merge would find them, from the
    folder's worktree (fetched), so every forge reports alike; the folders at once."""
    conflicting: dict[str, tuple[Path, dict[str, Any]]] = {}
    for folder in folders:
        raw = facts.get(f"{folder}.pr.raw")
        path = env.folders.get(folder)
        if facts.get(f"{folder}.pr.state") != "CONFLICTS" or not isinstance(raw, str) \
                or path is None or not worktree_state(path).exists or not env.branch:
            continue
        try:
            evidence = json.loads(raw)
        except ValueError:
            continue
        if isinstance(evidence, dict):
            conflicting[folder] = (path, evidence)
    if not conflicting:
        return
    forge = need_forge(env, "probing pull requests")

    def files_of(folder: str) -> list[str]:
        remote = forge.git_remote(folder_repository(env, folder)).within(node.timeout)
        try:
            return conflicting_files(conflicting[folder][0], base_branch(env, folder),
                                     env.branch, remote)
        except DeliveryError as err:
            raise StageProblem(f"folder '{folder}': {err}") from None

    done = on_each_folder(node, env, list(conflicting), files_of)
    if problems(done):
        raise StageProblem(problems(done))
    for each in done:
        evidence = conflicting[each.folder][1]
        evidence["conflicting_files"] = each.value
        facts[f"{each.folder}.pr.raw"] = json.dumps(evidence, sort_keys=True,
                                                    ensure_ascii=False)


def _visible(raw: Any) -> Any:
    """The PR evidence (thread and review text) an agent may read, stripped of what a
    reader of the page does not see (SPEC §14: hidden instructions)."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.dumps(_strip_all(json.loads(raw)), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return strip_hidden(raw)


def _strip_all(value: Any) -> Any:
    if isinstance(value, str):
        return strip_hidden(value)
    if isinstance(value, list):
        return [_strip_all(item) for item in value]
    if isinstance(value, dict):
        return {key: _strip_all(item) for key, item in value.items()}
    return value


def base_branch(env: StageEnv, folder: str) -> str:
    """The folder's base (its repository's default branch), asked once per run (each
    folder's worker sets its own key only)."""
    if folder not in env.base_branches:
        forge = need_forge(env, "the base branch")
        env.base_branches[folder] = forge.default_branch(folder_repository(env, folder))
    return env.base_branches[folder]


def _diff_facts(env: StageEnv, folder: str, path: Path) -> dict[str, Any]:
    if not worktree_state(path).exists:
        return diff_facts(folder, path, "")  # no worktree: an empty diff, no forge asked
    base = base_branch(env, folder)
    try:
        # the full name: a tag or branch the agent called `origin/<base>` comes first in
        # git's lookup of the short one
        return diff_facts(folder, path, f"refs/remotes/origin/{base}")
    except ValueError:
        try:  # a folder given as an existing path, without our `origin`
            return diff_facts(folder, path, base)
        except ValueError as err:
            raise StageProblem(f"folder '{folder}': {err}") from None


# -- worktrees -------------------------------------------------------------------------
def _cache(env: StageEnv) -> Path:
    if env.git_cache is None:
        raise StageProblem("worktrees need a git cache directory (--cache)")
    return env.git_cache


def run_worktree_add(node: Node, attempt: int, context: Context,
                     env: StageEnv) -> StageResult:
    """A worktree per folder, the folders at once; the facts of the folders whose worktree
    is there are kept even when another folder failed (the worktrees exist)."""
    try:
        forge = need_forge(env, "creating worktrees")
        if not env.branch:
            raise StageProblem("the run has no branch to put the worktrees on")
        folders = stage_folders(node, env)
    except StageProblem as problem:
        return _fail_on(problem)

    def add(folder: str) -> dict[str, Any]:
        repository = folder_repository(env, folder)
        try:
            remote = forge.git_remote(repository).within(node.timeout)
            clone = ensure_clone(remote, _cache(env))
            add_worktree(clone, env.folders[folder], env.branch, base_branch(env, folder))
        except DeliveryError as err:
            raise StageProblem(f"folder '{folder}': {err}") from None
        return worktree_facts(folder, env.folders[folder])

    done = on_each_folder(node, env, folders, add)
    facts: dict[str, Any] = {}
    for each in done:
        facts.update(each.value or {})
    if problems(done):
        return StageResult.fail(problems(done), facts)
    return StageResult(StageOutcome.SUCCEEDED, updates=facts)


def run_worktree_remove(node: Node, attempt: int, context: Context,
                        env: StageEnv) -> StageResult:
    """Removes only clean, pushed worktrees without git-ignored files, never through a
    symlink; the others are kept and named in `worktree.status`. `worktree.clean` is
    true when every worktree is gone. The folders at once."""
    try:
        forge = need_forge(env, "removing worktrees")
        folders = stage_folders(node, env)
    except StageProblem as problem:
        return _fail_on(problem)

    def remove(folder: str) -> RemovalResult:
        try:
            remote = forge.git_remote(folder_repository(env, folder)).within(node.timeout)
            return remove_worktree(clone_path(remote.url, _cache(env)), env.folders[folder],
                                   env.branch, remote, workspace=env.workspace)
        except DeliveryError as err:
            raise StageProblem(f"folder '{folder}': {err}") from None

    done = on_each_folder(node, env, folders, remove)
    if problems(done):
        return StageResult.fail(problems(done))
    removed = [each.value for each in done if each.value is not None]
    outcomes = {each.folder: (result.reason if result.removed else f"kept: {result.reason}")
                for each, result in zip(done, removed, strict=True)}
    return StageResult(StageOutcome.SUCCEEDED, updates={
        "worktree.clean": all(result.removed for result in removed),
        "worktree.status": _status_text(outcomes)})


def _status_text(outcomes: Mapping[str, str]) -> str:
    """`web: removed; api: kept: uncommitted changes` — one entry per folder."""
    return "; ".join(f"{folder}: {what}" for folder, what in outcomes.items()) or "no folders"
