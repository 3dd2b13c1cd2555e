"""The git plumbing the fake GitHub runs on its bare repositories (subprocess `git`).

Everything the fake reports about content — head SHAs, mergeability, merge commits, the
tree a check runs on — is read from these repositories, never from flags."""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

_IDENTITY = {
    "GIT_AUTHOR_NAME": "GitHub",
    "GIT_AUTHOR_EMAIL": "noreply@github.com",
    "GIT_COMMITTER_NAME": "GitHub",
    "GIT_COMMITTER_EMAIL": "noreply@github.com",
}


class GitError(RuntimeError):
    pass


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_IDENTITY)
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["HOME"] = env.get("HOME", "/nonexistent")
    return env


def git(repo: Path, *args: str, check: bool = True, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(repo), *args], input=stdin, capture_output=True,
        env=_env(), check=False,
    )
    if check and done.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode(errors="replace").strip()


def init_bare(path: Path, default_branch: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "init", "--bare", "-q", "-b", default_branch, str(path)],
        check=True, capture_output=True, env=_env(),
    )
    git(path, "config", "http.receivepack", "true")
    git(path, "config", "uploadpack.allowAnySHA1InWant", "true")


def seed(path: Path, branch: str, files: dict[str, str], message: str) -> str:
    """Commit `files` as the first commit of `branch` (no working tree needed)."""
    with tempfile.TemporaryDirectory(prefix="fake-gh-seed-") as tmp:
        index = os.path.join(tmp, "index")
        env = _env() | {"GIT_INDEX_FILE": index}
        for name, text in files.items():
            blob = subprocess.run(
                ["git", "--git-dir", str(path), "hash-object", "-w", "--stdin"],
                input=text.encode(), capture_output=True, env=env, check=True,
            ).stdout.decode().strip()
            subprocess.run(
                ["git", "--git-dir", str(path), "update-index", "--add", "--cacheinfo",
                 f"100644,{blob},{name}"], env=env, check=True, capture_output=True,
            )
        tree = subprocess.run(
            ["git", "--git-dir", str(path), "write-tree"], env=env, check=True,
            capture_output=True,
        ).stdout.decode().strip()
    sha = git(path, "commit-tree", tree, "-m", message)
    git(path, "update-ref", f"refs/heads/{branch}", sha)
    return sha


def ref_sha(repo: Path, branch: str) -> str | None:
    out = git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
              check=False)
    return out or None


def pull_head_sha(repo: Path, number: int) -> str | None:
    """The head of PR `number` from a fork: GitHub keeps it as `refs/pull/<n>/head`."""
    out = git(repo, "rev-parse", "--verify", "--quiet", f"refs/pull/{number}/head^{{commit}}",
              check=False)
    return out or None


def merge_tree(repo: Path, base: str, head: str) -> tuple[str | None, list[str]]:
    """(tree, []) when `head` merges cleanly into `base`, (None, conflicted paths) otherwise."""
    done = subprocess.run(
        ["git", "--git-dir", str(repo), "merge-tree", "--write-tree", "--name-only",
         "--no-messages", base, head],
        capture_output=True, env=_env(), check=False,
    )
    lines = done.stdout.decode(errors="replace").splitlines()
    if done.returncode == 0:
        return lines[0].strip(), []
    if done.returncode == 1:
        return None, [line for line in lines[1:] if line.strip()]
    raise GitError(f"git merge-tree {base} {head}: {done.stderr.decode(errors='replace')}")


def merge_commit(repo: Path, base_branch: str, base: str, head: str, message: str) -> str:
    """Merge `head` into `base_branch` (whose tip must still be `base`); the merge SHA."""
    tree, conflicts = merge_tree(repo, base, head)
    if tree is None:
        raise GitError(f"conflicts in {', '.join(conflicts)}")
    sha = git(repo, "commit-tree", tree, "-p", base, "-p", head, "-m", message)
    git(repo, "update-ref", f"refs/heads/{base_branch}", sha, base)
    return sha


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    done = subprocess.run(
        ["git", "--git-dir", str(repo), "merge-base", "--is-ancestor", ancestor, descendant],
        capture_output=True, env=_env(), check=False,
    )
    return done.returncode == 0


def list_files(repo: Path, sha: str) -> list[str]:
    out = git(repo, "ls-tree", "-r", "--name-only", sha)
    return [line for line in out.splitlines() if line]


def read_file(repo: Path, sha: str, path: str) -> str | None:
    done = subprocess.run(
        ["git", "--git-dir", str(repo), "show", f"{sha}:{path}"],
        capture_output=True, env=_env(), check=False,
    )
    return done.stdout.decode(errors="replace") if done.returncode == 0 else None


def extract(repo: Path, sha: str, into: Path) -> None:
    """Write the tree of `sha` into the directory `into` (a checkout without .git)."""
    done = subprocess.run(
        ["git", "--git-dir", str(repo), "archive", "--format=tar", sha],
        capture_output=True, env=_env(), check=True,
    )
    with tempfile.TemporaryFile() as tar_file:
        tar_file.write(done.stdout)
        tar_file.seek(0)
        with tarfile.open(fileobj=tar_file) as tar:
            tar.extractall(into, filter="data")


def commit_files(repo: Path, branch: str, files: dict[str, str | None], message: str,
                 *, start: str | None = None) -> str:
    """Commit `files` (None deletes a path) on top of `branch`'s tip, or of `start` (a
    branch or SHA) when given or when `branch` does not exist yet; the new SHA."""
    parent = ref_sha(repo, branch) if start is None else (
        ref_sha(repo, start) or git(repo, "rev-parse", "--verify", f"{start}^{{commit}}"))
    if parent is None:
        raise GitError(f"no branch {branch!r} to commit on")
    with tempfile.TemporaryDirectory(prefix="fake-gh-commit-") as tmp:
        env = _env() | {"GIT_INDEX_FILE": os.path.join(tmp, "index")}

        def run(*args: str, data: bytes | None = None) -> str:
            return subprocess.run(["git", "--git-dir", str(repo), *args], input=data,
                                  capture_output=True, env=env, check=True).stdout.decode().strip()

        run("read-tree", parent)
        for name, text in files.items():
            if text is None:
                run("update-index", "--force-remove", name)
                continue
            blob = run("hash-object", "-w", "--stdin", data=text.encode())
            run("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
        tree = run("write-tree")
    sha = git(repo, "commit-tree", tree, "-p", parent, "-m", message)
    git(repo, "update-ref", f"refs/heads/{branch}", sha)
    return sha


def revert_commit(repo: Path, branch: str, start: str, merge_sha: str, message: str) -> str:
    """A commit on new `branch` (from `start`) undoing what merge `merge_sha` brought in
    (its diff to the first parent applied in reverse), as GitHub's revert button does; the
    new SHA."""
    parent = ref_sha(repo, start) or start
    with tempfile.TemporaryDirectory(prefix="fake-gh-revert-") as tmp:
        env = _env() | {"GIT_INDEX_FILE": os.path.join(tmp, "index")}

        def run(*args: str, data: bytes | None = None) -> bytes:
            return subprocess.run(["git", "--git-dir", str(repo), *args], input=data,
                                  capture_output=True, env=env, check=True).stdout

        run("read-tree", parent)
        patch = run("diff", "--binary", merge_sha, f"{merge_sha}^1")
        if patch.strip():
            try:
                run("apply", "--cached", data=patch)
            except subprocess.CalledProcessError as error:
                raise GitError(f"the revert of {merge_sha[:12]} does not apply") from error
        tree = run("write-tree").decode().strip()
    sha = git(repo, "commit-tree", tree, "-p", parent, "-m", message)
    git(repo, "update-ref", f"refs/heads/{branch}", sha, "0" * 40)
    return sha
