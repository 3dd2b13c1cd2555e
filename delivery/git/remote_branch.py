"""What a folder's remote says about a branch name, read before a run writes anything (SPEC
§14 "Branches are the run's own"): its default branch and whether the branch exists, in one
`git ls-remote` (the token only in that process's environment, as every git call here)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from delivery.git.network import GitRemote, run_network, scratch_git_dir

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


def remote_branch(remote: GitRemote, branch: str,
                  timeout: float = LS_REMOTE_TIMEOUT) -> RemoteBranch:
    """The remote's default branch, and whether `branch` is one of its branches. Read as
    every network call of delivery's (`git.network`: no configuration file, the token for
    that URL only, bounded). GitError (the token masked) when the remote cannot be read."""
    with scratch_git_dir() as git_dir:
        done = run_network(remote.within(timeout), "ls-remote",
                           ["ls-remote", "--symref", remote.url, "HEAD",
                            f"refs/heads/{branch}"],
                           git_dir=git_dir, location=remote.url,
                           what=f"git ls-remote of {remote.url}",
                           fix="check that the repository exists and the token can read it")
    default, exists = "", False
    for line in done.stdout.decode(errors="replace").splitlines():
        target, _, name = line.partition("\t")
        if name == "HEAD" and target.startswith("ref: refs/heads/"):
            default = target.removeprefix("ref: refs/heads/")
        elif name == f"refs/heads/{branch}":
            exists = True
    return RemoteBranch(default, exists)
