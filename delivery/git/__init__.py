"""Git for the run's folders (SPEC §7, §7.1): a clone cache outside the workspace,
worktrees on the run's branch, diffs against the merge base, commits and pushes.

Built on GitPython with one `Repo` per operation, always closed and never shared across
threads (GitPython is not thread-safe and leaks `git cat-file` processes otherwise).
Extra HTTP headers (a token) reach git only through the environment of the one git process
that needs them (`GIT_CONFIG_COUNT`/`KEY`/`VALUE`), for the repository's URL only: never a
remote URL, a git config, a file or a command line other users can read. Fetches and pushes
go to the URL delivery knows, never one from the worktree's git configuration, and end by
the stage's deadline (`delivery.git.network`).
"""

from delivery.git.network import GitRemote, header_environment
from delivery.git.worktrees import (
    BOT_EMAIL,
    BOT_NAME,
    RemovalResult,
    WorktreeResult,
    add_worktree,
    cache_root,
    clone_path,
    commit_all,
    diff_against_base,
    ensure_clone,
    fetch,
    push_branch,
    remove_worktree,
    run_worktree_around,
    unpushed_commits,
)

__all__ = [
    "BOT_EMAIL",
    "BOT_NAME",
    "GitRemote",
    "RemovalResult",
    "WorktreeResult",
    "add_worktree",
    "cache_root",
    "clone_path",
    "commit_all",
    "diff_against_base",
    "ensure_clone",
    "fetch",
    "header_environment",
    "push_branch",
    "remove_worktree",
    "run_worktree_around",
    "unpushed_commits",
]
