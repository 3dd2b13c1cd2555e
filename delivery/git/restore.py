"""A folder's worktree saved with the run's state and re-created on another machine
(SPEC §13: a resume on a fresh machine finds its worktrees exactly as they were).

    saved = snapshot(worktree)             # at each save: what only this machine holds
    restore_worktree(clone, path, branch, base, saved)   # on the next machine

A snapshot is the newest commit of HEAD that the remote already has (`base`) and one binary
patch from it to the working tree as it is, local commits, staged, unstaged and untracked
files included (ignored files are not work). Restoring checks the branch out at `base` and
applies the patch as uncommitted changes: the files come back byte for byte, and nothing is
ever pushed — local commits come back folded into the working tree, and the next `publish`
commits and pushes them as it would have.

A self-hosted runner's clone cache may still register the branch in another job's worktree
(`'delivery/t-7' is already checked out at …`): a registration whose directory is gone is
pruned; one whose directory still exists is detached (HEAD on the same commit, every file
and change left as it is, since it may hold a person's work) so the branch is free — unless
a delivery process still running works in it (`delivery.git.inuse`): then the add fails.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from delivery.errors import GitError
from delivery.git import inuse
from delivery.git.change_check import mask_in_index, secret_files
from delivery.git.problems import describe
from delivery.store.saved_worktree import SavedWorktree as SavedWorktree
from probes.local_git import git_environment
from probes.worktree import worktree_state


class SecretMask(Protocol):
    """What finds and masks secrets in a file's text (delivery.redact.Redactor)."""

    def holds_listed_secret(self, value: str) -> bool: ...

    def mask_listed(self, value: str) -> str: ...


REMOTE = "origin"
BUSY_FIX = ("let that run finish (or stop it), then run again: it goes on from the branch "
            "and worktrees that run left")
# a patch larger than this is refused rather than saved: the state ref stays bounded (and
# under the per-file limit a fetch accepts, runref.FILE_LIMIT)
PATCH_LIMIT = 8 << 20
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def _git(cwd: Path, operation: str, *args: str, env: Mapping[str, str] | None = None,
         stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True,
                          env={**git_environment(cwd), "GIT_TERMINAL_PROMPT": "0",
                               **(env or {})}, check=False)
    if check and done.returncode != 0:
        problem, fix = describe(done.stderr.decode(errors="replace"), ())
        raise GitError(operation, str(cwd), problem, fix)
    return done


def _out(cwd: Path, operation: str, *args: str, env: Mapping[str, str] | None = None) -> str:
    return _git(cwd, operation, *args, env=env).stdout.decode(errors="replace").strip()


def snapshot(worktree: Path, limit: int = PATCH_LIMIT,
             secrets: SecretMask | None = None) -> SavedWorktree | None:
    """The worktree as the next machine must see it; None when it is not a worktree.
    GitError when its unpublished changes are larger than `limit` bytes. With `secrets`,
    a file whose unpublished lines hold a secret is saved with its secrets masked."""
    state = worktree_state(worktree)
    if not state.exists or not state.head:
        return None
    unpushed = _out(worktree, "rev-list", "rev-list", "--boundary", "HEAD", "--not",
                    f"--remotes={REMOTE}").split()
    if not unpushed and not state.dirty and not _untracked(worktree):
        return SavedWorktree(state.branch, state.head)  # the remote has it all
    boundary = [line[1:] for line in unpushed if line.startswith("-")]
    base = boundary[0] if boundary else (state.head if not unpushed else "")
    masked: tuple[str, ...] = ()
    with tempfile.TemporaryDirectory(prefix="delivery-snapshot-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(worktree, "read-tree", "read-tree", "HEAD", env=env)
        _git(worktree, "add", "add", "-A", env=env)  # a copy of the index: ours is untouched
        if secrets is not None:
            masked = secret_files(worktree, base or _EMPTY_TREE, env,
                                  secrets.holds_listed_secret)
            mask_in_index(worktree, masked, env, secrets.mask_listed)
        tree = _out(worktree, "write-tree", "write-tree", env=env)
        patch_path = Path(scratch) / "patch"
        with patch_path.open("wb") as handle:
            # as stored: no external diff or textconv of the agent's makes the patch
            done = subprocess.run(["git", "diff", "--binary", "--full-index", "--no-color",
                                   "--no-renames", "--no-ext-diff", "--no-textconv",
                                   base or _EMPTY_TREE, tree], cwd=worktree,
                                  env=git_environment(worktree), stdout=handle,
                                  stderr=subprocess.PIPE, check=False)
        if done.returncode != 0:
            raise GitError("diff", str(worktree), done.stderr.decode(errors="replace").strip())
        size = patch_path.stat().st_size
        if size > limit:
            raise GitError("save worktree", str(worktree), f"its unpublished changes are "
                           f"{size} bytes, over the state ref's limit of {limit}",
                           "publish them (or drop large generated files) so the run's "
                           "state stays small")
        patch = patch_path.read_bytes()
    if not base:
        raise GitError("save worktree", str(worktree), "no commit of its branch is on the "
                       "remote, so its changes have nothing to be saved against",
                       "push the base branch of the repository")
    return SavedWorktree(state.branch, base, patch, masked)


def _untracked(worktree: Path) -> bool:
    return bool(_out(worktree, "ls-files", "ls-files", "--others", "--exclude-standard"))


def registered_elsewhere(clone: Path, branch: str, path: Path) -> Path | None:
    """The directory of another worktree of `clone` that has `branch` checked out (after
    pruning registrations whose directory is gone); None when there is none."""
    _git(clone, "worktree prune", "worktree", "prune")
    listing = _out(clone, "worktree list", "worktree", "list", "--porcelain")
    current: Path | None = None
    for line in listing.splitlines():
        if line.startswith("worktree "):
            current = Path(line[len("worktree "):])
        elif line == f"branch refs/heads/{branch}" and current is not None \
                and current.resolve() != path.resolve():
            return current
    return None


def free_branch(clone: Path, branch: str, path: Path) -> Path | None:
    """Let `branch` be checked out at `path`: another job's worktree that still has it
    checked out is detached (its HEAD stays on the same commit; its files, index and
    changes are not touched); that worktree, or None."""
    other = registered_elsewhere(clone, branch, path)
    if other is not None:
        pid = inuse.busy(other)
        if pid is not None:
            raise GitError("worktree add", str(path), f"the branch {branch} is checked out "
                           f"in {other} by another delivery process running now (pid "
                           f"{pid}): two runs of one ticket at once", BUSY_FIX)
        _git(other, "checkout --detach", "checkout", "--quiet", "--detach")
    return other


def restore_worktree(clone: Path, path: Path, saved: SavedWorktree) -> None:
    """`path` re-created as `saved` describes: the branch at `saved.base`, the patch
    applied to the files. GitError, with nothing deleted, when that cannot be done."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise GitError("restore worktree", str(path), "the folder exists and is not empty",
                       "move it away or resume in another workspace")
    if _git(clone, "cat-file", "cat-file", "-e", f"{saved.base}^{{commit}}",
            check=False).returncode != 0:
        raise GitError("restore worktree", str(path), f"the commit {saved.base[:12]} the "
                       "saved worktree was based on is not on the remote any more",
                       "push it back, or restart the run")
    free_branch(clone, saved.branch, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # -B: a branch left in this cache by another job is moved to the saved commit (its
    # commits stay reachable from that job's worktree and the reflog)
    _git(clone, "worktree add", "worktree", "add", "--quiet", "-B", saved.branch,
         str(path), saved.base)
    if saved.patch:
        _git(path, "apply", "apply", "--binary", "--whitespace=nowarn", "-", stdin=saved.patch)
    inuse.mark(path)


def meta_name(folder: str) -> str:
    return f"{WORKTREES_DIR}/{folder}.json"


def patch_name(folder: str) -> str:
    return f"{WORKTREES_DIR}/{folder}.patch"


# beside the run directory on the state ref (a name no node id can take)
WORKTREES_DIR = ".worktrees"


def snapshot_files(folders: Mapping[str, Path], secrets: SecretMask | None = None
                   ) -> dict[str, bytes]:
    """The state ref's files for every folder that is a worktree now (secrets masked)."""
    files: dict[str, bytes] = {}
    for folder, path in folders.items():
        saved = snapshot(path, secrets=secrets)
        if saved is None:
            continue
        files[meta_name(folder)] = saved.meta()
        if saved.patch:
            files[patch_name(folder)] = saved.patch
    return files


def saved_worktrees(read: Mapping[str, bytes], folders: Sequence[str]
                    ) -> dict[str, SavedWorktree]:
    """The snapshots among the state ref's files `read` (path -> bytes)."""
    found = {}
    for folder in folders:
        saved = SavedWorktree.parse(read.get(meta_name(folder)), read.get(patch_name(folder)))
        if saved is not None:
            found[folder] = saved
    return found
