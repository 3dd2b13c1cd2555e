"""A worktree saved with the run's state and re-created on another machine
(delivery.git.restore, SPEC §13): the files come back byte for byte — local commits,
staged, unstaged, untracked and binary files — and nothing reaches the remote."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_helpers import IDENTITY, git, make_remote

from delivery.git import GitRemote, add_worktree, ensure_clone
from delivery.git.restore import SavedWorktree, restore_worktree, snapshot


def files(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file() and ".git" not in path.parts}


def test_a_worktree_comes_back_exactly_on_another_machine_and_nothing_is_pushed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = make_remote(tmp_path, "app", {"app.py": "v1\n", "old.txt": "old\n"})
    clone = ensure_clone(GitRemote(str(remote)), tmp_path / "cache-a")
    here = tmp_path / "a" / "app"
    add_worktree(clone, here, "delivery/t-1", "main")
    (here / "app.py").write_text("v2\n")
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    git(here, "commit", "-qam", "a local commit, never pushed")
    (here / "app.py").write_text("v3\n")  # unstaged on top of it
    (here / "staged.txt").write_text("staged\n")
    git(here, "add", "staged.txt")
    (here / "old.txt").unlink()
    (here / "blob.bin").write_bytes(bytes(range(256)) * 4)  # untracked, binary
    before = files(here)

    saved = snapshot(here)
    assert saved is not None and saved.patch
    again = SavedWorktree.parse(saved.meta(), saved.patch)  # as read back from the ref
    assert again == saved

    there = tmp_path / "b" / "app"  # a fresh machine: another cache, another workspace
    restore_worktree(ensure_clone(GitRemote(str(remote)), tmp_path / "cache-b"), there, again)
    assert files(there) == before
    assert git(remote, "for-each-ref", "--format=%(refname)", "refs/heads") == \
        "refs/heads/main"


def test_a_clean_pushed_worktree_is_saved_as_its_commit_alone(tmp_path: Path) -> None:
    remote = make_remote(tmp_path, "app")
    clone = ensure_clone(GitRemote(str(remote)), tmp_path / "cache")
    here = tmp_path / "a" / "app"
    result = add_worktree(clone, here, "delivery/t-2", "main")
    saved = snapshot(here)
    assert saved == SavedWorktree("delivery/t-2", result.head)
