"""Seeing how many folders a folder stage works on at once, without timing anything: the
local forge (real repositories, real PR records) with one of its calls turned into a
meeting point for the stage's folder workers."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from git_helpers import make_remote

from delivery.forges.base import GitRemote, PullRequestRef
from delivery.forges.local import LocalForge

# How long a worker waits for its companions before the meeting is called off (the call
# then raises and the stage fails): only a stage that is broken ever waits this long.
GUARD_SECONDS = 30.0
Met = Literal["git_remote", "default_branch", "find_or_create_pull_request"]


class FoldersAtOnce(LocalForge):
    """Each call of `method` from a thread other than the run's own (the one that built
    this forge) waits until `together` such calls are waiting, then all go on: a stage
    passes only if it has `together` folders in flight at once. A call from the run's own
    thread (a stage working on one folder at a time) is not held; `held` counts the held
    calls and `threads` the workers they came from."""

    def __init__(self, method: Met, together: int, **options: Any) -> None:
        super().__init__(**options)
        self.method = method
        self.held = 0
        self.threads: set[str] = set()
        self._run_thread = threading.current_thread()
        self._meeting = threading.Barrier(together, timeout=GUARD_SECONDS)
        self._lock = threading.Lock()

    def _meet(self, method: Met) -> None:
        if method != self.method or threading.current_thread() is self._run_thread:
            return
        with self._lock:
            self.held += 1
            self.threads.add(threading.current_thread().name)
        self._meeting.wait()

    def git_remote(self, repository: str) -> GitRemote:
        self._meet("git_remote")
        return super().git_remote(repository)

    def default_branch(self, repository: str) -> str:
        self._meet("default_branch")
        return super().default_branch(repository)

    def find_or_create_pull_request(self, repository: str, *, head: str, base: str,
                                    title: str, body: str) -> PullRequestRef:
        self._meet("find_or_create_pull_request")
        return super().find_or_create_pull_request(repository, head=head, base=base,
                                                   title=title, body=body)


def many_remotes(root: Path, count: int) -> dict[str, Path]:
    """`count` bare repositories f01, f02, … each with its own app.txt."""
    root.mkdir(parents=True, exist_ok=True)
    return {f"f{index:02}": make_remote(root, f"f{index:02}", {"app.txt": f"f{index:02}\n"})
            for index in range(1, count + 1)}


def repos_of(remotes: Mapping[str, Path]) -> dict[str, str]:
    return {folder: str(path) for folder, path in remotes.items()}
