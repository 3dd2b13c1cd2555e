"""What the run store last wrote of the files that decide what runs next, to notice a
stage's process writing them (SPEC §14: an agent changes the run only through its outputs
and its worktree).

The run directory sits in the workspace, where an agent's process can write. So the
store remembers, for each such file, how it looked after its own last write — an `os.stat`
signature: device, inode, size, modification and change time — and after every stage that
started a process the engine asks whether any differs (`LocalRunStore.check_untouched`).
A write, a rename over the file, a removal or a `touch` all show: the change time is set
by the kernel on every change and no unprivileged process can set it back. Comparing
signatures costs one `lstat` a file, whatever the file's size (the checkpoint and the log
grow with the run; hashing them after every stage would make a stage's cost grow too).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Final

# (device, inode, size, mtime_ns, ctime_ns); None: no such file
Signature = tuple[int, int, int, int, int] | None

MISSING: Final = None


def signature(info: os.stat_result) -> Signature:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def signature_of(path: str) -> Signature:
    """The file at `path` as it is now (a symlink planted there is itself, not followed);
    a file that cannot be looked at reads as missing."""
    try:
        return signature(os.lstat(path))
    except OSError:
        return MISSING


def difference(before: Signature, now: Signature) -> str:
    """How a file went from `before` to `now`, in a few words ("" when it did not)."""
    if before == now:
        return ""
    if before is None:
        return "it was created"
    if now is None:
        return "it was removed"
    if before[:2] != now[:2]:
        return "it was replaced"
    if before[2] != now[2]:
        return f"its size went from {before[2]} to {now[2]} bytes"
    return "it was written"


class FileWatch:
    """Files of one directory as the store last wrote them (or found them, when watching
    started)."""

    def __init__(self, root: str, names: Iterable[str]) -> None:
        self._paths = {name: os.path.join(root, name) for name in names}
        self._seen: dict[str, Signature] = {
            name: signature_of(path) for name, path in self._paths.items()}

    def wrote(self, name: str) -> None:
        """The store has just written `name` itself: this is how it looks now."""
        if name in self._paths:
            self._seen[name] = signature_of(self._paths[name])

    def changed(self) -> list[tuple[str, str]]:
        """The files that are not as the store left them, and how."""
        found = []
        for name, path in self._paths.items():
            before = self._seen[name]
            if signature_of(path) != before:
                found.append((name, difference(before, signature_of(path))))
        return found
