"""What a publish would push from a folder, shown before it is pushed (`run --dry-run`,
SPEC §12): the worktree as it is — committed, staged, unstaged and untracked files alike,
as a publish commits everything — against what its PR branch holds (the branch as last
fetched; the base branch when it was never pushed), as numbers and a unified diff.

Untracked files are diffed through a throw-away index, so the folder's own index is never
touched (as `probes.worktree.diff_stats` counts them).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from delivery.errors import GitError
from delivery.git.network import REMOTE
from delivery.git.worktrees import git

# a diff past this is cut (the numbers still count all of it): --json prints it whole in
# one object, and a generated file of 50 MB is no review
PREVIEW_LIMIT = 1_000_000


@dataclass(frozen=True)
class Preview:
    files: int
    insertions: int
    deletions: int
    diff: str  # unified diff text, cut past PREVIEW_LIMIT characters with a note saying so

    def summary(self) -> str:
        """`1 file changed, 3 insertions(+), 1 deletion(-)`, as git says it."""
        def counted(count: int, word: str, sign: str) -> str:
            return f"{count} {word}{'' if count == 1 else 's'}({sign})"

        files = f"{self.files} file{'' if self.files == 1 else 's'} changed"
        return (f"{files}, {counted(self.insertions, 'insertion', '+')}, "
                f"{counted(self.deletions, 'deletion', '-')}")


def preview(worktree: Path, branch: str, base: str) -> Preview:
    """The folder's changes against the merge base of HEAD and its PR `branch` as fetched,
    else `base` (a person's commits on the branch are not the run's changes). GitError
    when `worktree` has neither."""
    against = ""
    for ref in (f"refs/remotes/{REMOTE}/{branch}", f"refs/remotes/{REMOTE}/{base}"):
        if _exists(worktree, ref):
            against = git(worktree, "diff", "merge-base", "HEAD", ref)
            break
    if not against:
        raise GitError("diff", str(worktree), f"neither {branch} nor {base} is known here",
                       "fetch the folder's repository")
    index_dir = tempfile.mkdtemp(prefix="delivery-preview-")
    try:
        index = Path(index_dir) / "index"
        own = Path(git(worktree, "diff", "rev-parse", "--git-path", "index"))
        own = own if own.is_absolute() else worktree / own
        if own.is_file():
            shutil.copyfile(own, index)
        env = {"GIT_INDEX_FILE": str(index)}
        git(worktree, "diff", "add", "-A", env=env)
        common = ("diff", "--cached", "--no-renames", "--no-textconv", "--no-ext-diff",
                  "--no-color")
        numstat = git(worktree, "diff", *common, "--numstat", against, env=env)
        text = git(worktree, "diff", *common, against, env=env)
    finally:
        shutil.rmtree(index_dir, ignore_errors=True)
    files = insertions = deletions = 0
    for line in numstat.splitlines():
        added, removed, _ = line.split("\t", 2)
        files += 1
        insertions += int(added) if added.isdigit() else 0  # "-": a binary file
        deletions += int(removed) if removed.isdigit() else 0
    if len(text) > PREVIEW_LIMIT:
        left = len(text) - PREVIEW_LIMIT
        text = (text[:PREVIEW_LIMIT] + f"\n... (cut: {left} more characters; `git diff "
                f"{against}` in {worktree} shows all of it)\n")
    elif text:
        text += "\n"
    return Preview(files, insertions, deletions, text)


def _exists(worktree: Path, ref: str) -> bool:
    try:
        git(worktree, "diff", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except GitError:
        return False
    return True
