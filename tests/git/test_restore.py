"""A worktree saved with the run's state and re-created on another machine
(delivery.git.restore, SPEC §13): the files come back byte for byte — local commits,
staged, unstaged, untracked and binary files — and nothing reaches the remote."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_helpers import IDENTITY, git, make_remote

from delivery.git import GitRemote, add_worktree, ensure_clone
from delivery.git.restore import SavedWorktree, restore_worktree, snapshot
from delivery.redact import Redactor


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


def test_unpublished_work_holding_a_secret_is_saved_masked_and_comes_back_masked(
        tmp_path: Path) -> None:
    secret = "s3cr3t-value-from-the-environment"
    remote = make_remote(tmp_path, "app", {"app.py": "v1\n"})
    here = tmp_path / "a" / "app"
    clone = ensure_clone(GitRemote(str(remote)), tmp_path / "cache-a")
    add_worktree(clone, here, "delivery/t-3", "main")
    (here / "config.py").write_text(f"key = {secret}\nname = 'app'\n")
    (here / "app.py").write_text("v2\n")

    saved = snapshot(here, secrets=Redactor([secret]))
    assert saved is not None and secret.encode() not in saved.patch + saved.meta()
    assert saved.masked == ("config.py",)
    again = SavedWorktree.parse(saved.meta(), saved.patch)
    assert again == saved

    there = tmp_path / "b" / "app"
    restore_worktree(ensure_clone(GitRemote(str(remote)), tmp_path / "cache-b"), there, again)
    assert (there / "config.py").read_text() == "key = ***\nname = 'app'\n"
    assert (there / "app.py").read_text() == "v2\n"  # the rest of the work as it was
    assert (here / "config.py").read_text().startswith(f"key = {secret}")  # not touched
