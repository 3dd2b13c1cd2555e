"""Worktree and diff probes (SPEC §7): what a folder's working tree holds, as flat facts.

    worktree_facts("web", path)          -> web.worktree.exists|dirty|branch|head
    diff_facts("web", path, "origin/main") -> web.diff.files|insertions|deletions|empty

The diff is taken between the merge base of HEAD and the base ref and the working tree as
it is — committed, staged, unstaged and untracked (not ignored) files alike — because a
publish commits everything. Untracked files are counted through a throw-away index, so the
folder's own index is never touched.

GitPython is not thread-safe and leaves `git cat-file` processes behind when a `Repo` is
not closed: every function opens its own `Repo` and closes it before returning.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from git import GitCommandError, InvalidGitRepositoryError, NoSuchPathError, Repo

from probes.facts import FactValue
from probes.local_git import run_git


@dataclass(frozen=True)
class WorktreeState:
    exists: bool
    dirty: bool = False
    branch: str = ""  # empty on a detached HEAD
    head: str = ""


@dataclass(frozen=True)
class DiffStats:
    files: int
    insertions: int
    deletions: int

    @property
    def empty(self) -> bool:
        return self.files == 0


def _open(path: Path) -> Repo | None:
    """The repository whose working tree is exactly `path`, or None."""
    if not path.is_dir():
        return None
    try:
        repo = Repo(path)
    except (InvalidGitRepositoryError, NoSuchPathError):
        return None
    if repo.bare or Path(repo.working_tree_dir or "").resolve() != path.resolve():
        repo.close()  # `path` is inside some other repository, not a worktree of its own
        return None
    return repo


def _git(path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """A git call that changes or reads the files the agent wrote, as `probes.local_git`
    makes it (no hook, driver or secret of the repository's)."""
    done = run_git(path, *args, env=env)
    if done.returncode != 0:
        raise GitCommandError(["git", *args], done.returncode, done.stderr)
    return done.stdout.decode(errors="replace").removesuffix("\n")


def worktree_state(path: Path) -> WorktreeState:
    repo = _open(path)
    if repo is None:
        return WorktreeState(exists=False)
    with repo:
        head = repo.git.rev_parse("--verify", "-q", "HEAD") if repo.head.is_valid() else ""
        branch = "" if repo.head.is_detached else repo.active_branch.name
        # status runs the repository's fsmonitor and filters: made inert (probes.local_git)
        dirty = bool(_git(path, "status", "--porcelain", "--untracked-files=normal"))
        return WorktreeState(exists=True, dirty=dirty, branch=branch, head=head)


def diff_stats(path: Path, base_ref: str) -> DiffStats:
    """Files, insertions and deletions between the merge base of HEAD and `base_ref` and the
    working tree (untracked files included). Binary files count as changed files only.

    Raises ValueError when `path` is not a worktree or `base_ref` is unknown there."""
    repo = _open(path)
    if repo is None:
        raise ValueError(f"{path} is not a git worktree")
    with repo:
        try:
            merge_base = repo.git.merge_base("HEAD", base_ref)
        except GitCommandError:
            raise ValueError(f"{path}: no merge base between HEAD and {base_ref!r}") from None
        index_dir = tempfile.mkdtemp(prefix="delivery-index-")
        try:
            # A copy of the index plus every untracked file: the folder's index stays as is.
            index = Path(index_dir) / "index"
            own_index = Path(repo.git.rev_parse("--git-path", "index"))
            if not own_index.is_absolute():
                own_index = path / own_index
            if own_index.is_file():
                shutil.copyfile(own_index, index)
            env = {"GIT_INDEX_FILE": str(index)}
            _git(path, "add", "-A", env=env)
            numstat = _git(path, "diff", "--cached", "--numstat", "--no-renames",
                           "--no-textconv", "--no-ext-diff", merge_base, env=env)
        finally:
            shutil.rmtree(index_dir, ignore_errors=True)
    files = insertions = deletions = 0
    for line in numstat.splitlines():
        added, removed, _ = line.split("\t", 2)
        files += 1
        insertions += int(added) if added.isdigit() else 0
        deletions += int(removed) if removed.isdigit() else 0
    return DiffStats(files, insertions, deletions)


def worktree_facts(folder: str, path: Path) -> dict[str, FactValue]:
    state = worktree_state(path)
    return {
        f"{folder}.worktree.exists": state.exists,
        f"{folder}.worktree.dirty": state.dirty,
        f"{folder}.worktree.branch": state.branch,
        f"{folder}.worktree.head": state.head,
    }


def diff_facts(folder: str, path: Path, base_ref: str) -> dict[str, FactValue]:
    """Diff facts; a folder without a worktree reads as an empty diff. Raises ValueError
    when the worktree exists but has no merge base with `base_ref`."""
    stats = diff_stats(path, base_ref) if worktree_state(path).exists else DiffStats(0, 0, 0)
    return {
        f"{folder}.diff.files": stats.files,
        f"{folder}.diff.insertions": stats.insertions,
        f"{folder}.diff.deletions": stats.deletions,
        f"{folder}.diff.empty": stats.empty,
    }
