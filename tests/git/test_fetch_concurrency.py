"""Runs on one machine share the clone cache (SPEC §7): their fetches into one clone — two
resumes racing, a publish beside a worktree_add — never fail on each other's ref updates
(`cannot lock ref … is at X but expected Y`) and leave the remote-tracking refs as the
remote has them."""

from __future__ import annotations

import threading
from pathlib import Path

from git_helpers import commit_to, git, make_remote

from delivery.errors import GitError
from delivery.git import GitRemote, add_worktree, ensure_clone, fetch
from delivery.git.sync import fetch_remote

BRANCHES = [f"feature/b{i}" for i in range(6)]
ROUNDS = 5


def test_concurrent_fetches_into_one_clone_all_succeed_while_the_remote_moves(
        tmp_path: Path) -> None:
    remote_path = make_remote(tmp_path, "web")
    for branch in BRANCHES:
        commit_to(remote_path, branch, {"a.txt": branch})
    remote = GitRemote(str(remote_path))
    clone = ensure_clone(remote, tmp_path / "cache")
    worktrees = [tmp_path / "ws" / f"w{i}" for i in range(2)]
    for number, path in enumerate(worktrees):
        add_worktree(clone, path, f"delivery/t-{number}", "main")
    errors: list[str] = []
    moving = threading.Event()

    def move() -> None:  # people push to every branch while the runs fetch
        moving.set()
        for round_ in range(ROUNDS):
            for branch in ["main", *BRANCHES]:
                commit_to(remote_path, branch, {"a.txt": f"{branch} {round_}"})

    def fetch_often(step: object) -> None:
        moving.wait()
        for _ in range(ROUNDS):
            try:
                if isinstance(step, Path):
                    fetch_remote(step, remote)
                else:
                    fetch(clone, remote)
            except GitError as err:
                errors.append(str(err))

    threads = [threading.Thread(target=move)]
    threads += [threading.Thread(target=fetch_often, args=(step,))
                for step in [*worktrees, clone, clone]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    fetch(clone, remote)
    assert git(clone, "for-each-ref", "--format=%(refname:lstrip=3) %(objectname)",
               "refs/remotes/origin/") == \
        git(remote_path, "for-each-ref", "--format=%(refname:lstrip=2) %(objectname)",
            "refs/heads/")
