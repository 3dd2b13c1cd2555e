"""Real git repositories in temp dirs for forge, worktree and probe tests."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

IDENTITY = {"GIT_AUTHOR_NAME": "Tess Ter", "GIT_AUTHOR_EMAIL": "tess@example.com",
            "GIT_COMMITTER_NAME": "Tess Ter", "GIT_COMMITTER_EMAIL": "tess@example.com"}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, env={**os.environ, **IDENTITY})
    return done.stdout.strip()


def make_remote(root: Path, name: str, files: Mapping[str, str] | None = None) -> Path:
    """A bare repository `root/<name>.git` whose `main` holds `files` (one commit)."""
    remote = root / f"{name}.git"
    git(root, "init", "--quiet", "--bare", "-b", "main", str(remote))
    commit_to(remote, "main", files or {"README.md": f"# {name}\n"}, message="initial")
    return remote


def commit_to(remote: Path, branch: str, files: Mapping[str, str | None], *,
              base: str = "main", message: str = "change") -> str:
    """Commit `files` (None deletes) on `branch` of `remote` (from `base` when new); the SHA.
    Plumbing straight into the bare repository: no clone, a handful of git calls."""
    env = {**os.environ, **IDENTITY}

    def run(*args: str, stdin: str | None = None, check: bool = True) -> str:
        done = subprocess.run(["git", *args], cwd=remote, input=stdin, capture_output=True,
                              text=True, env=env, check=check)
        return done.stdout.strip()

    parent = (run("rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False)
              or run("rev-parse", "--verify", "-q", f"refs/heads/{base}", check=False))
    with tempfile.TemporaryDirectory(prefix="seed-index-") as scratch:
        env["GIT_INDEX_FILE"] = str(Path(scratch) / "index")
        if parent:
            run("read-tree", parent)
        for name, text in files.items():
            if text is None:
                run("rm", "--cached", "--quiet", name)
            else:
                blob = run("hash-object", "-w", "--stdin", stdin=text)
                run("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
        tree = run("write-tree")
    commit = run("commit-tree", tree, *(["-p", parent] if parent else []), "-m", message)
    run("update-ref", f"refs/heads/{branch}", commit)
    return commit
