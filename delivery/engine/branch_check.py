"""`--branch` checked before a run writes anything (SPEC §14 "Branches are the run's own"):
the run pushes to its branch without asking, so that branch is never a repository's default
branch (`--branch main` would put the agent's work on main with no PR, review or CI) nor a
branch a person made.

"A person's branch" is an existing remote branch outside `delivery/`: every branch delivery
names itself is `delivery/<ticket slug or run id>`, so an existing `delivery/…` branch is an
earlier run's on the same ticket, which a second run goes on from (SPEC §7.1). A name that
does not exist yet on any folder's remote is the run's own.
"""

from __future__ import annotations

from collections.abc import Mapping

from delivery.engine.run_setup import FolderSetup
from delivery.errors import GitError, RunRefused
from delivery.forges.base import Forge
from delivery.forges.select import open_forge
from delivery.git.remote_branch import remote_branch, valid_branch_name
from delivery.lang.model import NodeType, Workflow

RUN_BRANCHES = "delivery/"
_FIX = ("leave --branch out (the run names its own branch, delivery/<ticket>) or give a "
        "name no branch has yet, such as delivery/<name>")


def needs_check(branch: str, workflow: Workflow, setup: FolderSetup,
                handlers: Mapping[NodeType, object] | None) -> bool:
    """A branch the caller chose, in a run that pushes (a publish stage with the real
    handler) to folders' repositories."""
    return bool(branch) and bool(setup.repos) and NodeType.PUBLISH not in (
        handlers or {}) and bool(workflow.nodes_of(NodeType.PUBLISH))


def refuse_invalid_branch(branch: str, option: str = "--branch") -> None:
    """RunRefused when git would refuse `branch` as a branch name: the run's worktrees are
    on it, whether or not the run publishes."""
    if branch and not valid_branch_name(branch):
        raise RunRefused(f"{option} {branch}", "is not a valid git branch name", _FIX)


def refuse_foreign_branch(branch: str, setup: FolderSetup, forge: Forge | None,
                          environ: Mapping[str, str], option: str = "--branch") -> None:
    """RunRefused when `branch` is no valid name, or in some folder's repository is the
    default branch or an existing branch outside `delivery/`."""
    subject = f"{option} {branch}"
    if not valid_branch_name(branch):
        raise RunRefused(subject, "is not a valid git branch name", _FIX)
    repos = setup.repos
    opened = forge or open_forge(setup.forge or "local", checks=setup.checks,
                                 environ=environ)
    try:
        for folder, repository in repos.items():
            remote = opened.git_remote(repository)
            try:
                found = remote_branch(remote, branch)
            except GitError as err:
                raise RunRefused(subject, f"could not be checked against {repository} "
                                 f"(folder '{folder}'): {err}",
                                 "check that the repository can be read, then run again"
                                 ) from None
            if branch == found.default:
                raise RunRefused(subject, f"is the default branch of {repository} (folder "
                                 f"'{folder}'): the run would push straight onto it, with "
                                 "no pull request, review or CI", _FIX)
            if found.exists and not branch.startswith(RUN_BRANCHES):
                raise RunRefused(subject, f"already exists in {repository} (folder "
                                 f"'{folder}') and was not made by a delivery run: it is a "
                                 "person's branch, which the run never pushes to", _FIX)
    finally:
        if forge is None and hasattr(opened, "close"):
            opened.close()
