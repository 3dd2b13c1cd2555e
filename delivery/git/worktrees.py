"""The clone cache, the run's worktrees, commits and pushes."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from git import InvalidGitRepositoryError, NoSuchPathError, Repo

from delivery.errors import GitError
from delivery.git import inuse, restore
from delivery.git.network import REMOTE, GitRemote, fetch_into, fetch_lock, locked, push_to
from delivery.git.problems import describe
from probes.local_git import run_git
from probes.worktree import DiffStats, diff_stats, worktree_state

BOT_NAME = "delivery[bot]"
BOT_EMAIL = "delivery-bot@users.noreply.github.com"
log = logging.getLogger("delivery")


def cache_root(environ: Mapping[str, str], override: Path | None = None) -> Path:
    """`--cache DIR`, else `$XDG_CACHE_HOME/delivery`, else `~/.cache/delivery`."""
    if override is not None:
        return override.absolute()
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME") or Path.home())
                                                / ".cache")
    # absolute: run.json records it, and a resume may start in another directory
    return (Path(base) / "delivery").absolute()


def _problem(stderr: str, status: int) -> tuple[str, str]:
    """git's own words (stderr) as one line, and a fix when they call for one; never the
    command line."""
    problem, fix = describe(stderr.strip(), ())
    return (problem if problem != "git failed" else f"git exited with status {status}"), fix


def git(path: Path, operation: str, *args: str, env: Mapping[str, str] | None = None,
        fix: str = "") -> str:
    """Run a local `git <args>` in `path`; GitError (stderr only) on failure. No hook,
    driver or secret of the repository's (an agent's) runs or reaches it
    (`probes.local_git`). Network calls go through `delivery.git.network`, never here."""
    done = run_git(path, *args, env=env)
    if done.returncode != 0:
        problem, better_fix = _problem(done.stderr.decode(errors="replace"), done.returncode)
        raise GitError(operation, str(path), problem, better_fix or fix)
    return done.stdout.decode(errors="replace").removesuffix("\n")


def _succeeds(path: Path, *args: str) -> bool:
    return run_git(path, *args).returncode == 0


def _cache_name(url: str) -> str:
    tail = re.sub(r"[^A-Za-z0-9._-]+", "-", url.rstrip("/").rsplit("/", 1)[-1])
    tail = tail.removesuffix(".git") or "repo"
    return f"{tail}-{hashlib.sha256(url.encode()).hexdigest()[:12]}.git"


def clone_path(url: str, cache: Path) -> Path:
    """Where the cache keeps its clone of `url` (whether or not it exists yet)."""
    return cache / "repos" / _cache_name(url)


def ensure_clone(remote: GitRemote, cache: Path) -> Path:
    """The cache's bare clone of `remote.url` (made once, fetched each time): remote-tracking
    refs under `refs/remotes/origin/`, so worktrees branch from `origin/<base>`. Its
    `origin` is set for people working in the worktrees; delivery's own fetches and pushes
    never read it (`delivery.git.network`).

    A self-hosted runner's cache outlives killed jobs: a clone is made aside and moved into
    place whole, so a job killed mid-clone leaves no half-made one; a clone without its
    `origin` gets it back, and a directory in the clone's place that is no repository at all
    (left by an older version, or damaged) is moved aside, never deleted, and made anew."""
    url = remote.url
    clone = clone_path(url, cache.absolute())
    with locked(clone.with_suffix(".lock")):
        if clone.exists() and not _is_repository(clone):
            aside = clone.with_name(f"{clone.name}.broken-{time.time_ns()}")
            clone.rename(aside)
            log.warning("the clone cache's %s was no git repository (a job killed while "
                        "making it?): moved to %s and cloned again", clone, aside)
        if not clone.exists():
            _make_clone(clone, url)
        else:
            known = _remote_url(clone)
            if known != url:
                verb = "set-url" if known else "add"  # none: a job killed before it was set
                git(clone, f"remote {verb}", "remote", verb, REMOTE, url)
        fetch(clone, remote)
    return clone


def _is_repository(path: Path) -> bool:
    try:
        Repo(path).close()
    except (InvalidGitRepositoryError, NoSuchPathError):
        return False
    return True


def _make_clone(clone: Path, url: str) -> None:
    """An empty bare clone of `url` at `clone`, made beside it and renamed into place."""
    clone.parent.mkdir(parents=True, exist_ok=True)
    spare = Path(tempfile.mkdtemp(prefix=f".{clone.name}.", dir=clone.parent))
    try:
        Repo.init(spare, bare=True).close()
        git(spare, "remote add", "remote", "add", REMOTE, url)
        spare.rename(clone)
    finally:
        shutil.rmtree(spare, ignore_errors=True)


def _remote_url(clone: Path) -> str:
    """The clone's `origin` URL; "" when it has none (GitError when git cannot tell)."""
    done = run_git(clone, "remote", "get-url", REMOTE)
    if done.returncode == 0:
        return done.stdout.decode(errors="replace").strip()
    stderr = done.stderr.decode(errors="replace")
    if "no such remote" in stderr.lower():
        return ""
    problem, fix = _problem(stderr, done.returncode)
    raise GitError("remote get-url", str(clone), problem, fix)


def fetch(clone: Path, remote: GitRemote) -> None:
    fetch_into(clone, remote)


def _has_ref(path: Path, ref: str) -> bool:
    return _succeeds(path, "rev-parse", "--verify", "--quiet", ref)


def run_worktree_around(path: Path) -> Path | None:
    """The worktree of a clone-cache clone (a delivery run's folder) that `path` lies in or
    is, found by its `.git` file and the clone's fetch lock, without running git; None when
    the nearest repository around `path` is not one (or there is none)."""
    for folder in (path, *path.parents):
        dot = folder / ".git"
        if dot.is_dir():
            return None
        if not dot.is_file():
            continue
        admin = inuse.admin_dir(folder)
        try:
            common = admin / (admin / "commondir").read_text(encoding="utf-8").strip() \
                if admin is not None else None
        except OSError:
            return None
        return folder if common is not None and fetch_lock(common.resolve()).is_file() \
            else None
    return None


def common_dir(worktree: Path) -> Path:
    """The repository a worktree belongs to (the clone cache's clone)."""
    with Repo(worktree) as repo:
        return Path(repo.common_dir).resolve()


@dataclass(frozen=True)
class WorktreeResult:
    path: Path
    branch: str
    head: str
    reused: bool


def add_worktree(clone: Path, path: Path, branch: str, base: str) -> WorktreeResult:
    """`path` as a worktree of `clone` on `branch`: reused when it already is one; else the
    branch as it was pushed (a resume elsewhere) or, new, from `origin/<base>`."""
    state = worktree_state(path)
    if state.exists:
        if common_dir(path) == clone.resolve() and state.branch != branch:
            # Another run's worktree (another ticket) in the same workspace: say how to
            # free it without losing what may be uncommitted in it.
            raise GitError("worktree add", str(path),
                           f"the folder is another run's worktree (on "
                           f"{state.branch or 'a detached HEAD'}), not this run's on {branch}",
                           f"when that run is finished, check nothing is left uncommitted "
                           f"(git -C {path} status) and free the folder with git -C {path} "
                           f"worktree remove {path}; or run this ticket in its own "
                           "--workspace")
        if common_dir(path) != clone.resolve() or state.branch != branch:
            raise GitError("worktree add", str(path),
                           f"the folder is already a git working tree (on "
                           f"{state.branch or 'a detached HEAD'}), not this run's worktree "
                           f"on {branch}",
                           "move it away or choose another --workspace")
        with locked(clone.with_suffix(".lock")):
            _refuse_busy(path, branch)
            inuse.mark(path)
        return WorktreeResult(path, branch, state.head, reused=True)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise GitError("worktree add", str(path), "the folder exists and is not empty",
                       "move it away or choose another --workspace")
    with locked(clone.with_suffix(".lock")):
        git(clone, "worktree prune", "worktree", "prune")  # forget worktrees deleted by hand
        if _has_ref(clone, f"refs/heads/{branch}"):
            args = [str(path), branch]
        elif _has_ref(clone, f"refs/remotes/{REMOTE}/{branch}"):
            # full names: an `origin/<x>` tag or branch would come first in git's lookup
            args = ["--no-track", "-b", branch, str(path), f"refs/remotes/{REMOTE}/{branch}"]
        elif _has_ref(clone, f"refs/remotes/{REMOTE}/{base}"):
            args = ["--no-track", "-b", branch, str(path), f"refs/remotes/{REMOTE}/{base}"]
        else:
            raise GitError("worktree add", str(clone), f"the base branch {base!r} does not "
                           "exist in the remote repository",
                           "push the base branch or name the repository's default branch")
        path.parent.mkdir(parents=True, exist_ok=True)
        # another job's worktree may still hold the branch (a self-hosted runner's cache)
        restore.free_branch(clone, branch, path)
        git(clone, "worktree add", "worktree", "add", "--quiet", *args)
        inuse.mark(path)
    return WorktreeResult(path, branch, worktree_state(path).head, reused=False)


def _refuse_busy(path: Path, branch: str) -> None:
    pid = inuse.busy(path)
    if pid is not None:
        raise GitError("worktree add", str(path), f"the folder is the worktree of another "
                       f"delivery process running now (pid {pid}) on the same branch "
                       f"{branch}: two runs of one ticket at once", restore.BUSY_FIX)


def unpushed_commits(worktree: Path) -> int:
    """Commits of HEAD on no remote-tracking branch (fetch first to know the remote)."""
    out = git(worktree, "rev-list", "rev-list", "--count", "HEAD", "--not",
              f"--remotes={REMOTE}")
    return int(out.strip() or 0)


@dataclass(frozen=True)
class RemovalResult:
    path: Path
    removed: bool
    reason: str  # why it was kept, or "removed" / "absent"


# how many ignored files a kept worktree's reason names before counting the rest
_NAMED_FILES = 5


def ignored_files(worktree: Path) -> list[str]:
    """The git-ignored files of `worktree` (a wholly ignored folder as one `name/`)."""
    out = git(worktree, "ls-files", "ls-files", "-z", "--others", "--ignored",
              "--exclude-standard", "--directory")
    return sorted(name for name in out.split("\0") if name)


def _named(files: Sequence[str]) -> str:
    shown = ", ".join(files[:_NAMED_FILES])
    rest = len(files) - _NAMED_FILES
    return f"{shown} and {rest} more" if rest > 0 else shown


def _not_followed(path: Path, workspace: Path | None) -> str:
    """Why `path` is left alone without looking inside: a symlink (whatever it points
    at: `git worktree remove` would delete its target), or a path that leads out of the
    workspace through a symlinked folder. Empty when neither."""
    if path.is_symlink():
        return f"a symlink to {os.readlink(path)}; not followed, left as it is"
    if workspace is not None and not path.resolve().is_relative_to(workspace.resolve()):
        return (f"leads outside the workspace (to {path.resolve()}) through a symlink; "
                "not followed, left as it is")
    return ""


def remove_worktree(clone: Path, path: Path, branch: str, remote: GitRemote, *,
                    workspace: Path | None = None) -> RemovalResult:
    """Remove `path` only when it holds nothing that would be lost: no uncommitted change,
    no git-ignored file (a `.env`, a build cache a person keeps: `git worktree remove`
    deletes those), no commit missing from the remote. Otherwise keep it and say why.
    A symlink, or a path leading out of `workspace`, is never followed (SPEC §7)."""
    not_followed = _not_followed(path, workspace)
    if not_followed:
        return RemovalResult(path, False, not_followed)
    state = worktree_state(path)
    if not state.exists:
        if path.exists():
            return RemovalResult(path, False, "not a git worktree; left as it is")
        return RemovalResult(path, True, "absent")
    if common_dir(path) != clone.resolve() or state.branch != branch:
        return RemovalResult(path, False, f"not this run's worktree (on "
                             f"{state.branch or 'a detached HEAD'}); left as it is")
    if state.dirty:
        return RemovalResult(path, False, "uncommitted changes")
    ignored = ignored_files(path)
    if ignored:
        return RemovalResult(path, False, f"git-ignored files: {_named(ignored)}")
    fetch(clone, remote)
    ahead = unpushed_commits(path)
    if ahead:
        return RemovalResult(path, False, f"{ahead} unpushed commit(s)")
    with locked(clone.with_suffix(".lock")):
        git(clone, "worktree remove", "worktree", "remove", str(path))
        # every commit of the branch is on the remote: the local branch can go
        git(clone, "branch -D", "branch", "-D", branch)
    return RemovalResult(path, True, "removed")


def diff_against_base(worktree: Path, base: str) -> DiffStats:
    """The worktree (everything, untracked included) against its merge base with the base."""
    try:
        return diff_stats(worktree, f"refs/remotes/{REMOTE}/{base}")
    except ValueError as err:
        raise GitError("diff", str(worktree), str(err)) from None


def _identity(worktree: Path) -> dict[str, str]:
    """git's configured identity when there is one, else the bot's (CI machines have none)."""
    name = _config(worktree, "user.name")  # git's own lookup: repo, global, system, env
    email = _config(worktree, "user.email")
    environ = os.environ
    name = environ.get("GIT_AUTHOR_NAME", name)
    email = environ.get("GIT_AUTHOR_EMAIL", email)
    if not name or not email:
        name, email = BOT_NAME, BOT_EMAIL
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": environ.get("GIT_COMMITTER_NAME", name),
            "GIT_COMMITTER_EMAIL": environ.get("GIT_COMMITTER_EMAIL", email)}


def _config(path: Path, key: str) -> str:
    done = run_git(path, "config", "--get", key)
    return done.stdout.decode(errors="replace").strip() if done.returncode == 0 else ""


def commit_all(worktree: Path, message: str) -> str | None:
    """Commit everything (untracked included); the new commit, or None when nothing changed."""
    git(worktree, "add", "add", "-A")
    if _succeeds(worktree, "diff", "--cached", "--quiet"):
        return None
    git(worktree, "commit", "commit", "--quiet", "--no-verify", "-m", message,
        env=_identity(worktree))
    return git(worktree, "rev-parse", "rev-parse", "HEAD").strip()


def push_branch(worktree: Path, branch: str, remote: GitRemote) -> str:
    """Push HEAD to the run's branch on `remote`; the pushed commit."""
    head = git(worktree, "rev-parse", "rev-parse", "HEAD").strip()
    push_to(common_dir(worktree), remote, f"{head}:refs/heads/{branch}",
            location=str(worktree),
            fix="a rejected push (protected branch, non-fast-forward) needs the branch "
            "brought up to date or permission to push")
    return head
