"""What a folder's remote says about a branch name, read before a run writes anything (SPEC
§14 "Branches are the run's own"): its default branch and whether the branch exists, in one
`git ls-remote` (the token only in that process's environment, as every git call here)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from delivery.errors import GitError
from delivery.git.worktrees import header_environment, mask_headers

# seconds a read of the remote's branch list may take before the run is refused
LS_REMOTE_TIMEOUT = 60.0


@dataclass(frozen=True)
class RemoteBranch:
    default: str  # the remote's default branch ("" when it has none, an empty repository)
    exists: bool  # the branch asked about is on the remote


def valid_branch_name(branch: str) -> bool:
    """Whether git accepts `branch` as a branch name (`git check-ref-format --branch`)."""
    done = subprocess.run(["git", "check-ref-format", "--branch", branch],
                          capture_output=True, check=False)
    return done.returncode == 0 and not branch.startswith("-")


def remote_branch(url: str, branch: str, headers: Sequence[str] = (),
                  timeout: float = LS_REMOTE_TIMEOUT) -> RemoteBranch:
    """The remote at `url`'s default branch, and whether `branch` is one of its branches.
    GitError (the token masked) when the remote cannot be read."""
    try:
        done = subprocess.run(["git", "ls-remote", "--symref", url, "HEAD",
                               f"refs/heads/{branch}"], capture_output=True, check=False,
                              env={**header_environment(headers), "GIT_TERMINAL_PROMPT": "0"},
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise GitError("ls-remote", url, f"no answer within {timeout:g} seconds",
                       "check that the repository's host is reachable") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.decode(errors="replace").splitlines()
                if line.strip()]
        raise GitError("ls-remote", url, mask_headers(" / ".join(said[-2:]) or "git failed",
                                                      headers),
                       "check that the repository exists and the token can read it")
    default, exists = "", False
    for line in done.stdout.decode(errors="replace").splitlines():
        target, _, name = line.partition("\t")
        if name == "HEAD" and target.startswith("ref: refs/heads/"):
            default = target.removeprefix("ref: refs/heads/")
        elif name == f"refs/heads/{branch}":
            exists = True
    return RemoteBranch(default, exists)
