"""`delivery close RUN` as a library call (SPEC §7.1): a run given up on.

    closed = close_run(Path(".delivery/runs/RUN_ID"), World(), delete_branches=True)

Every open PR of the run (found by the run's branch in each folder's repository) is closed,
on GitHub with a comment saying why; merged PRs are left alone. With `delete_branches`,
the run's branch goes too, in each folder whose PR the run published (its marked block
names this run) and that is now closed — never a repository's default branch, never the
branch of a merged PR, never a branch without a PR of the run (it may be a person's).
The run is marked `cancelled` and a resume refuses it.

The run is locked (a running run refuses it) and, kept on a state ref, claimed as a resume
claims it. Idempotent: PRs closed already stay closed and their comment is found by its
marker, a deleted branch is gone already, and a run cancelled already writes nothing
more — a second close does nothing new. A PR that cannot be closed is reported and left
for the next close; the run is cancelled all the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from delivery.engine.run_plan import run_redactor
from delivery.engine.world import World
from delivery.errors import DeliveryError, RunRefused, RunStoreError
from delivery.forges.base import Forge, LifecycleForge
from delivery.forges.select import open_forge, require_settings
from delivery.store.base import RunStore, StoreCapability
from delivery.store.records import ENDED, RunInfo, RunState, RunStatus

DEFAULT_COMMENT = ("Closed by `delivery close`: delivery run {run_id} was cancelled, so "
                   "this pull request will not be merged by it.")


def close_marker(run_id: str) -> str:
    return f"<!-- delivery:closed run={run_id} -->"


@dataclass
class Closed:
    """What a close did, per folder, in the order of the run's folders."""

    run_id: str
    lines: list[str] = field(default_factory=list)  # one per folder and effect
    problems: list[str] = field(default_factory=list)  # PRs or branches left as they were
    closed: list[str] = field(default_factory=list)  # `folder #N` closed now
    deleted: list[str] = field(default_factory=list)  # folders whose branch was deleted now
    cancelled_now: bool = False  # False: the run was cancelled by an earlier close

    @property
    def changed(self) -> bool:
        return bool(self.closed or self.deleted or self.cancelled_now)


def close_run(run_path: Path, world: World | None = None, *, comment: str = "",
              delete_branches: bool = False) -> Closed:
    """Close the run's open PRs and mark it cancelled (see the module's docstring);
    RunRefused when it is not a run, is running, or is held by another job."""
    world = world or World()
    store = world.stores.open(run_path.resolve())
    info = store.read_run_info()
    try:
        store.open_log(run_redactor(world))  # the lock: a running run refuses a second writer
    except RunStoreError as error:
        store.close()
        raise RunRefused(f"run {run_path}", f"cannot be closed now: {error}",
                         "stop the run first (Ctrl-C ends it resumable), then close it"
                         ) from None
    claimed = saved = False
    try:
        state = _loaded_state(store, run_path)
        forge = _forge(info, world)  # refused (no token) before the run is claimed
        try:
            if StoreCapability.CLAIM in store.capabilities and state.status not in ENDED:
                store.claim()  # a live job holding it supersedes this close
                claimed = True
            done = Closed(info.run_id)
            _close_prs(forge, info, done, comment or DEFAULT_COMMENT.format(run_id=info.run_id),
                       delete_branches)
        finally:
            if forge is not world.forge and hasattr(forge, "close"):
                forge.close()
        if state.status is not RunStatus.CANCELLED or done.changed:
            done.cancelled_now = state.status is not RunStatus.CANCELLED
            store.append_event("run_cancelled", by="delivery close", closed=done.closed,
                               deleted_branches=done.deleted, problems=done.problems)
            state.status, state.next_node = RunStatus.CANCELLED, None
            state.failure_reason = "cancelled with delivery close"
            store.save_stage(state.take_record({}, [], None, None), lambda: state)
        saved = True
    finally:
        store.close()
        if claimed and not saved:  # the close stopped half-way: the run is given back
            store.release_unchanged("delivery close stopped before it saved")
    return done


def _loaded_state(store: RunStore, run_path: Path) -> RunState:
    try:
        loaded = store.load()
    except RunStoreError as error:
        raise RunRefused(f"run {run_path}", f"cannot be read: {error}",
                         "a run whose log or checkpoint was edited cannot be closed by "
                         "delivery; close its pull requests by hand") from None
    if loaded is None:
        raise RunRefused(f"run {run_path}", "has no checkpoint (it never started)",
                         "nothing to close")
    return loaded.state


def _forge(info: RunInfo, world: World) -> Forge:
    if world.forge is not None:
        return world.forge
    kind = info.forge or "local"
    require_settings(kind, world.environ)
    return open_forge(kind, environ=world.environ)


def _close_prs(forge: Forge, info: RunInfo, done: Closed, comment: str,
               delete_branches: bool) -> None:
    branch = info.branch
    if not branch:
        return  # a run without a branch published nothing
    if not isinstance(forge, LifecycleForge):
        raise RunRefused(f"the {forge.name} forge", "cannot close pull requests",
                         "close them by hand")
    owned = f"<!-- delivery:begin run={info.run_id} -->"
    for folder, repository in info.repos.items():
        try:
            found = forge.find_pull_request(repository, head=branch)
            if found is None:
                done.lines.append(f"{folder}: no pull request")
                continue
            label = f"{folder} #{found.number}"
            if found.state == "merged":
                done.lines.append(f"{folder}: PR #{found.number} is merged; left alone")
                continue
            if found.state == "open":
                forge.close_pull_request(repository, found.number,
                                         comment=f"{comment}\n\n{close_marker(info.run_id)}",
                                         marker=close_marker(info.run_id))
                done.closed.append(label)
                done.lines.append(f"{folder}: PR #{found.number} closed ({found.url})")
            else:
                done.lines.append(f"{folder}: PR #{found.number} was closed already")
            if delete_branches:
                _delete_branch(forge, folder, repository, branch,
                               owned in found.body, done)
        except DeliveryError as error:
            done.problems.append(f"{folder}: {error}")


def _delete_branch(forge: Forge, folder: str, repository: str, branch: str, owned: bool,
                   done: Closed) -> None:
    if not owned:
        done.lines.append(f"{folder}: branch {branch} kept: its PR was not published by "
                          "this run")
        return
    if branch == forge.default_branch(repository):
        done.lines.append(f"{folder}: branch {branch} kept: it is the default branch")
        return
    assert isinstance(forge, LifecycleForge)
    if forge.delete_branch(repository, branch):
        done.deleted.append(folder)
        done.lines.append(f"{folder}: branch {branch} deleted")
