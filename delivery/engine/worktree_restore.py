"""A resume on a fresh machine re-creates the run's worktrees before any stage (SPEC §13):
from the snapshot saved with the run's state (`delivery.git.restore`: unpublished edits
included) or, for a run saved before snapshots, from the pushed branch. When that fails the
resume stops there with the reason; nothing runs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from delivery.engine.folder_pool import map_folders
from delivery.engine.handlers.base import StageEnv
from delivery.engine.handlers.folders import base_branch, folder_repository, need_forge
from delivery.errors import DeliveryError, StageProblem
from delivery.git import add_worktree, cache_root, ensure_clone
from delivery.git.restore import SavedWorktree, restore_worktree
from delivery.lang.model import NodeType, Workflow
from delivery.store.records import RunState, RunStatus


def folders_to_recreate(workflow: Workflow, state: RunState,
                        folders: Mapping[str, Path]) -> list[str]:
    """The folders whose worktree the run made (a `worktree_add` ran and no
    `worktree_remove` since) and that this machine lacks."""
    adds = {n.id for n in workflow.nodes_of(NodeType.WORKTREE_ADD)}
    removes = {n.id for n in workflow.nodes_of(NodeType.WORKTREE_REMOVE)}
    last_add = max((i for i, n in enumerate(state.path) if n in adds), default=-1)
    last_remove = max((i for i, n in enumerate(state.path) if n in removes), default=-1)
    if last_add < 0 or last_remove > last_add or state.status not in (RunStatus.RUNNING,
                                                                      RunStatus.PAUSED):
        return []
    return [name for name, path in folders.items() if not path.exists()]


def recreate(env: StageEnv, missing: list[str],
             saved: Mapping[str, SavedWorktree]) -> tuple[dict[str, str], str]:
    """Re-create `missing` worktrees, up to the run's `max_parallel` at once (a fresh
    runner's 200 clones are not made one after another): (folder -> how, "") or (those
    made, the reason the first in folder order that could not be made failed)."""

    def one(folder: str) -> tuple[str, str]:  # (how, "") or ("", why not)
        try:
            forge = need_forge(env, "re-creating worktrees")
            remote = forge.git_remote(folder_repository(env, folder))
            clone = ensure_clone(remote, env.git_cache or cache_root({}))
            snapshot = saved.get(folder)
            if snapshot is None:
                add_worktree(clone, env.folders[folder], env.branch, base_branch(env, folder))
                return "pushed branch", ""
            restore_worktree(clone, env.folders[folder], snapshot)
            return ("saved worktree with unpublished changes" if snapshot.patch
                    else "saved worktree") + (
                f" (secrets masked as *** in {', '.join(snapshot.masked)})"
                if snapshot.masked else ""), ""
        except (DeliveryError, StageProblem) as err:
            return "", f"folder '{folder}': {err}"

    made = map_folders(one, missing, max(1, env.max_parallel), name="recreate")
    done = {folder: how for folder, (how, _) in zip(missing, made, strict=True) if how}
    problem = next((why for _, why in made if why), "")
    return done, problem
