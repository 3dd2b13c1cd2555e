"""The run's branch against the PR branch as people left it (SPEC §7.1, "People on the
branch win").

A publish first fetches the PR branch and commits the run's work locally. Then:

- the remote branch is behind (or equal to) HEAD: HEAD is pushed as it is;
- a person added commits: the run's unpublished commits are replayed on top of theirs;
- a person rewrote the branch (force-push): the remote no longer holds what the run last
  pushed. The run's old history is dropped, never merged or pushed again, and only the
  run's unpublished commits are replayed on the rewritten branch — what the person removed
  stays removed.

"What the run last pushed" is the ref `refs/delivery/published/<branch>` of the clone,
set after each push; without one (another machine), the remote-tracking ref as it was
before this fetch. The replay cherry-picks along the first-parent chain, so a repair's
merge of the base branch keeps its second parent and its resolution. A replay that
conflicts is undone: the worktree is back on the run's branch (all of its work
committed), that work is also on `refs/delivery/backup/<branch>` (locally and, when the
remote accepts it, on the remote), and the error names the files.

Every push names the remote head it was computed against (`--force-with-lease`): a person
who pushes meanwhile makes it fail instead of being overwritten; the caller syncs again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from delivery.errors import BranchConflict, GitError
from delivery.git.network import REMOTE, GitRemote, fetch_into, push_to
from delivery.git.worktrees import _identity, _succeeds, commit_all, common_dir, git
from probes.local_git import run_git

PUBLISHED = "refs/delivery/published/"
BACKUP = "refs/delivery/backup/"


def published_ref(branch: str) -> str:
    return PUBLISHED + branch


def backup_ref(branch: str) -> str:
    return BACKUP + branch


@dataclass(frozen=True)
class Synced:
    """The run's branch after `sync_with_branch`: `tip` is what should be on the remote,
    `remote` what is there now (empty: no such branch yet)."""

    tip: str
    remote: str
    people_commits: int = 0  # commits on the remote the run did not have
    rewritten: bool = False  # the remote no longer holds what the run last pushed
    replayed: int = 0  # run commits replayed on top of the remote

    @property
    def to_push(self) -> bool:
        return self.tip != self.remote


def _rev(path: Path, ref: str) -> str:
    if not _succeeds(path, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"):
        return ""
    return git(path, "rev-parse", "rev-parse", f"{ref}^{{commit}}").strip()


def _is_ancestor(path: Path, ancestor: str, descendant: str) -> bool:
    return _succeeds(path, "merge-base", "--is-ancestor", ancestor, descendant)


def fetch_remote(worktree: Path, remote: GitRemote) -> None:
    """Every branch of `remote`, forced updates included (a rewritten PR branch), as
    `origin/*` of the worktree's clone."""
    fetch_into(common_dir(worktree), remote, location=str(worktree))


def published_head(worktree: Path, branch: str) -> str:
    """What the run last pushed to `branch` from this clone; empty when nothing."""
    return _rev(worktree, published_ref(branch))


def remote_head(worktree: Path, branch: str) -> str:
    """The PR branch as last fetched; empty when the remote has no such branch."""
    return _rev(worktree, f"refs/remotes/{REMOTE}/{branch}")


def commit_work(worktree: Path, message: str) -> str | None:
    """Commit everything; a merge in progress (a repair that merged the base branch) is
    concluded as a merge commit, also when its resolution changed nothing; one with files
    still unmerged is refused, naming them."""
    if not _succeeds(worktree, "rev-parse", "--verify", "--quiet", "MERGE_HEAD"):
        return commit_all(worktree, message)
    unmerged = git(worktree, "diff", "diff", "--name-only", "--diff-filter=U").split()
    if unmerged:
        raise GitError("commit", str(worktree), f"a merge is in progress with unresolved "
                       f"conflicts in {', '.join(unmerged)}",
                       "resolve the conflict markers (or git merge --abort), then resume")
    git(worktree, "add", "add", "-A")
    git(worktree, "commit", "commit", "--quiet", "--no-verify", "-m", message,
        env=_identity(worktree))
    return _rev(worktree, "HEAD")


def sync_with_branch(worktree: Path, branch: str, message: str, *,
                     known_remote: str) -> Synced:
    """Commit the run's work and put it on top of the PR branch as fetched (call
    `fetch_remote` first; `known_remote` is the remote-tracking head before that fetch).
    Raises BranchConflict when the run's work does not replay (see the module doc)."""
    commit_work(worktree, message)
    head = _rev(worktree, "HEAD")
    remote = remote_head(worktree, branch)
    if not remote or remote == head or _is_ancestor(worktree, remote, head):
        return Synced(head, remote)
    people = int(git(worktree, "rev-list", "rev-list", "--count", remote, "--not",
                     head).strip() or 0)
    since = ""
    for candidate in (_rev(worktree, published_ref(branch)), known_remote):
        if candidate and _is_ancestor(worktree, candidate, head):
            since = candidate
            break
    if not since:
        since = git(worktree, "merge-base", "merge-base", head, remote).strip()
    rewritten = bool(since) and not _is_ancestor(worktree, since, remote)
    listed = git(worktree, "rev-list", "rev-list", "--reverse", "--first-parent",
                 f"{since}..{head}" if since else head).split()
    if not listed:  # the run has nothing the remote lacks: take the branch as it is
        git(worktree, "reset", "reset", "--quiet", "--keep", remote)
        return Synced(remote, remote, people, rewritten)
    tip = _replay(worktree, branch, remote, listed, rewritten=rewritten)
    return Synced(tip, remote, people, rewritten, len(listed))


def _replay(worktree: Path, branch: str, onto: str, commits: Sequence[str], *,
            rewritten: bool) -> str:
    """Cherry-pick `commits` (oldest first) on `onto` in the worktree; the branch is moved
    to the result. On a conflict everything is undone and BranchConflict raised."""
    head = _rev(worktree, "HEAD")
    identity = _identity(worktree)
    git(worktree, "checkout", "checkout", "--quiet", "--detach", onto)
    try:
        for commit in commits:
            parents = git(worktree, "rev-parse", "rev-parse", f"{commit}^@").split()
            if not _succeeds(worktree, "cherry-pick", "--no-commit", "-m", "1", commit):
                files = git(worktree, "diff", "diff", "--name-only",
                            "--diff-filter=U").split()
                raise _Conflict(files)
            tree = git(worktree, "write-tree", "write-tree").strip()
            current = _rev(worktree, "HEAD")
            extra = parents[1:]  # a merge keeps what it merged (the base branch)
            if not extra and tree == git(worktree, "rev-parse", "rev-parse",
                                         "HEAD^{tree}").strip():
                continue  # already on the branch (a person made the same change)
            author = git(worktree, "log", "log", "-1", "--format=%an%n%ae%n%aI",
                         commit).splitlines()
            body = git(worktree, "log", "log", "-1", "--format=%B", commit)
            env = {**identity, "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1],
                   "GIT_AUTHOR_DATE": author[2]}
            args = ["commit-tree", tree, "-p", current]
            for parent in extra:
                args += ["-p", parent]
            made = git(worktree, "commit-tree", *args, "-m", body or "delivery", env=env)
            git(worktree, "reset", "reset", "--quiet", "--soft", made.strip())
    except _Conflict as conflict:
        _succeeds(worktree, "cherry-pick", "--quit")
        git(worktree, "reset", "reset", "--quiet", "--hard")  # only the replay's own state
        git(worktree, "checkout", "checkout", "--quiet", branch)
        backup = _keep_backup(worktree, branch, head)
        raise BranchConflict(str(worktree), branch, conflict.files, rewritten=rewritten,
                             backup=backup) from None
    except GitError:
        _succeeds(worktree, "cherry-pick", "--quit")
        _succeeds(worktree, "reset", "--quiet", "--hard")
        _succeeds(worktree, "checkout", "--quiet", branch)
        raise
    git(worktree, "checkout", "checkout", "--quiet", "-B", branch)
    return _rev(worktree, "HEAD")


class _Conflict(Exception):
    def __init__(self, files: Sequence[str]) -> None:
        super().__init__(", ".join(files))
        self.files = tuple(files)


def _keep_backup(worktree: Path, branch: str, head: str) -> str:
    ref = backup_ref(branch)
    git(worktree, "update-ref", "update-ref", "-m", "delivery: backup before a conflict",
        ref, head)
    return ref


def push_backup(worktree: Path, branch: str, remote: GitRemote) -> bool:
    """The backup ref on the remote too (a CI machine's clone does not outlive the job);
    False when the remote refuses it (the local ref stays)."""
    ref = backup_ref(branch)
    sha = _rev(worktree, ref)
    if not sha:
        return False
    try:
        push_to(common_dir(worktree), remote, f"{sha}:{ref}", force=True,
                location=str(worktree))
    except GitError:
        return False
    return True


def push_synced(worktree: Path, branch: str, synced: Synced, remote: GitRemote) -> str:
    """Push `synced.tip` only if the remote still holds `synced.remote` (a person who
    pushed meanwhile makes this fail: sync again); records it as what the run pushed."""
    push_to(common_dir(worktree), remote, f"{synced.tip}:refs/heads/{branch}",
            lease=f"refs/heads/{branch}:{synced.remote}", location=str(worktree),
            fix="a rejected push (protected branch, or a person pushed meanwhile) needs the "
            "branch brought up to date or permission to push")
    mark_published(worktree, branch, synced.tip)
    return synced.tip


def mark_published(worktree: Path, branch: str, sha: str) -> None:
    git(worktree, "update-ref", "update-ref", published_ref(branch), sha)


def conflicting_files(worktree: Path, base: str, branch: str,
                      remote: GitRemote) -> list[str]:
    """The files in which the PR branch conflicts with the base, as a merge would find
    them (fetched first; empty when they merge cleanly or the branch is not pushed)."""
    fetch_remote(worktree, remote)
    ours, theirs = remote_head(worktree, branch), _rev(worktree, f"refs/remotes/{REMOTE}/{base}")
    if not ours or not theirs:
        return []
    return _merge_tree(worktree, theirs, ours)


def _merge_tree(worktree: Path, base_sha: str, head_sha: str) -> list[str]:
    done = run_git(worktree, "merge-tree", "--write-tree", "--name-only", "--no-messages",
                   base_sha, head_sha)
    if done.returncode not in (0, 1):
        raise GitError("merge-tree", str(worktree), done.stderr.decode(errors="replace").strip(),
                       "needs git 2.38 or later")
    if done.returncode == 0:
        return []
    lines = [line.strip() for line in done.stdout.decode(errors="replace").splitlines()[1:]]
    return list(dict.fromkeys(line for line in lines if line))
