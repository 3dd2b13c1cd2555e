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


def _write(root: Path, files: Mapping[str, str | None]) -> None:
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def make_remote(root: Path, name: str, files: Mapping[str, str] | None = None) -> Path:
    """A bare repository `root/<name>.git` whose `main` holds `files` (one commit)."""
    remote = root / f"{name}.git"
    git(root, "init", "--quiet", "--bare", "-b", "main", str(remote))
    commit_to(remote, "main", files or {"README.md": f"# {name}\n"}, message="initial")
    return remote


def commit_to(remote: Path, branch: str, files: Mapping[str, str | None], *,
              base: str = "main", message: str = "change") -> str:
    """Commit `files` (None deletes) on `branch` of `remote` (from `base` when new); the SHA."""
    with tempfile.TemporaryDirectory(prefix="seed-") as scratch:
        work = Path(scratch)
        git(work, "init", "--quiet", "-b", branch)
        git(work, "remote", "add", "origin", str(remote))
        heads = git(work, "ls-remote", "--heads", "origin")
        if f"refs/heads/{branch}" in heads:
            git(work, "fetch", "--quiet", "origin", branch)
            git(work, "reset", "--quiet", "--hard", "FETCH_HEAD")
        elif f"refs/heads/{base}" in heads:
            git(work, "fetch", "--quiet", "origin", base)
            git(work, "reset", "--quiet", "--hard", "FETCH_HEAD")
        _write(work, files)
        git(work, "add", "-A")
        git(work, "commit", "--quiet", "--allow-empty", "-m", message)
        git(work, "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}")
        return git(work, "rev-parse", "HEAD")
