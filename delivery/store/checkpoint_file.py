"""`checkpoint.json`, atomically replaced after every stage — without a new file each time.

Replacing a file through a new temporary file and a rename creates and frees an inode
per stage, and its fsync must commit the file system's journal; on Linux those were most
of the cost of a stage. Where the kernel can swap two names atomically
(`renameat2(RENAME_EXCHANGE)`), the run keeps two files instead:

    checkpoint.json            the last complete checkpoint
    checkpoint.previous.json   the one before; the next checkpoint is written over it

A save writes the new checkpoint over `checkpoint.previous.json` in place (padded with
spaces to a multiple of 4 KiB, so its size rarely changes and `fdatasync` flushes only
data), then swaps the two names in one step. A process killed at any moment leaves
`checkpoint.json` complete: it is never written to while it has that name. After a power
failure the swap may be undone while the in-place write survived in part; then
`checkpoint.json` may be torn, and loading takes `checkpoint.previous.json` — complete,
since it was flushed before the swap — and `recover()` swaps the names back. A torn file
can still parse (new blocks before old ones), so every checkpoint ends with a
`"checksum"` member, the SHA-256 of what precedes it; a file whose checksum does not
match counts as torn.

Elsewhere (no `renameat2`, or a file system that refuses the swap) saving falls back to
a temporary file, fsync and `os.replace`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import secrets
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from delivery.errors import RunStoreError

PREVIOUS_NAME: Final = "checkpoint.previous.json"
# The checksum member seal() puts last: the SHA-256 of everything before it, closed.
_SEALED: Final = re.compile(rb',?"checksum":"([0-9a-f]{64})"\}\s*\Z')
_BLOCK: Final = 4096
_AT_FDCWD: Final = -100
_RENAME_EXCHANGE: Final = 2
# What a kernel or file system without the swap answers: use the fallback from then on.
_NO_EXCHANGE: Final = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV})
# Flushes a file's data (and the size, if it changed); macOS has fsync only.
fdatasync: Final = getattr(os, "fdatasync", os.fsync)


def _load_exchange() -> Callable[[Path, Path], None] | None:
    """`exchange(a, b)` swapping two paths atomically, or None where there is no such call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without it (glibc < 2.28, musl < 1.2)
        return None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    renameat2.restype = ctypes.c_int

    def exchange(a: Path, b: Path) -> None:
        if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b),
                     _RENAME_EXCHANGE) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number), str(a), None, str(b))

    return exchange


_exchange = _load_exchange()


def write_replacing(path: Path, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace `path` with `data` through a temporary file, fsync and `os.replace`.

    `sync_dir=False` skips the directory fsync after the rename: a process crash cannot
    lose the rename, a power failure may bring back the previous file.
    """
    # A random name: a pid and counter could repeat after a crash (containers reuse pids).
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if sync_dir:
            sync_directory(path.parent)
    except OSError as error:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise RunStoreError(f"{path}: cannot write: {error}") from error


def sync_directory(directory: Path) -> None:
    """Make renames in `directory` durable (POSIX; Windows cannot open a directory)."""
    if os.name == "posix":
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_all(fd: int, data: bytes, offset: int | None = None) -> None:
    view = memoryview(data)
    position = 0
    while position < len(view):
        chunk = view[position:]
        position += os.write(fd, chunk) if offset is None else os.pwrite(fd, chunk,
                                                                          offset + position)


class CheckpointFile:
    """The checkpoint of one run directory (see the module docstring)."""

    def __init__(self, path: Path, *, swap: bool = True) -> None:
        """`swap=False` always replaces through a temporary file, as where there is no
        swap call."""
        self.path = path
        self.previous_path = path.with_name(PREVIOUS_NAME)
        self._swap = swap and _exchange is not None

    # -- writing -----------------------------------------------------------------------
    def save(self, data: bytes) -> None:
        """Save `data`, the checkpoint's JSON object (sealed with its checksum here)."""
        data = seal(data)
        if self._swap:
            try:
                self._save_swapping(data)
                return
            except OSError as error:
                if error.errno not in _NO_EXCHANGE:
                    raise RunStoreError(f"{self.path}: cannot write: {error}") from error
                self._swap = False  # this file system cannot swap: replace from now on
        write_replacing(self.path, data, sync_dir=False)

    def _save_swapping(self, data: bytes) -> None:
        assert _exchange is not None
        body = data.rstrip(b"\n")
        spare = os.open(self.previous_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # Spaces (valid JSON white space) up to a whole block, and up to the size the
            # file has, unless that is far more: the size then seldom changes, and an
            # fdatasync that changes no size flushes data only (no journal commit).
            size = os.fstat(spare).st_size
            needed = len(body) + 1 + (-(len(body) + 1) % _BLOCK)
            target = size if needed <= size <= 2 * needed else needed
            _write_all(spare, body + b" " * (target - len(body) - 1) + b"\n", offset=0)
            if size > target:
                os.ftruncate(spare, target)
            fdatasync(spare)
        finally:
            os.close(spare)
        try:
            _exchange(self.previous_path, self.path)
        except FileNotFoundError:  # the first save: there is nothing to swap with yet
            os.rename(self.previous_path, self.path)

    # -- reading -----------------------------------------------------------------------
    def load(self, *, fallback: bool = True) -> dict[str, Any] | None:
        """The last complete checkpoint, None if none was saved; a corrupt one raises.

        `checkpoint.json`, unless it is torn or missing while the previous one is complete
        (only a power failure that undid a swap leaves that). A complete checkpoint.json
        always wins: at worst it is one save old, and resuming re-runs one more stage.
        `fallback=False` reads `checkpoint.json` only (what `verify` checks).
        """
        current, problem = read_sealed(self.path)
        previous, _ = read_sealed(self.previous_path) if current is None else (None, "")
        if fallback and current is None and previous is not None:
            return previous
        if current is None and problem:
            hint = (f" ({self.previous_path.name} is complete: resuming the run restores "
                    "it; a power failure during a save can leave this)"
                    if previous is not None else "")
            raise RunStoreError(f"{self.path}: corrupt checkpoint: {problem}{hint}")
        return current

    def recover(self) -> str:
        """Before writing again: if `load` would take the previous file, swap the names
        back (durably), so that `checkpoint.json` is again the complete one and the torn
        file is the one written over next. Returns what was wrong ("" if nothing)."""
        current, problem = read_sealed(self.path)
        if current is not None:
            return ""
        previous, _ = read_sealed(self.previous_path)
        if previous is None:
            return ""
        try:
            if _exchange is not None and self.path.exists():
                _exchange(self.previous_path, self.path)
            else:
                os.replace(self.previous_path, self.path)
            sync_directory(self.path.parent)
        except OSError as error:
            raise RunStoreError(f"{self.path}: cannot restore the previous checkpoint: "
                                f"{error}") from error
        return (f"{self.path.name}: {problem or 'missing'}; continued from "
                f"{self.previous_path.name}")


def seal(data: bytes) -> bytes:
    """`data` (a JSON object) with a last member `"checksum":"<sha256 of the rest>"`."""
    body = data.rstrip()
    if not body.endswith(b"}"):
        raise ValueError("a checkpoint is a JSON object")
    digest = hashlib.sha256(body).hexdigest().encode()
    separator = b"" if body[:-1].rstrip() == b"{" else b","
    return body[:-1] + separator + b'"checksum":"' + digest + b'"}\n'


def read_sealed(path: Path) -> tuple[dict[str, Any] | None, str]:
    """(the checkpoint in `path` without its checksum, or None; why not: "" when the file
    does not exist). A checkpoint without a checksum member is taken as it is."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, ""
    except OSError as error:
        raise RunStoreError(f"{path}: cannot read checkpoint: {error}") from error
    try:
        value = json.loads(data)
    except ValueError as error:
        return None, f"not valid JSON ({error})"
    if not isinstance(value, dict):
        return None, "expected a JSON object"
    if "checksum" in value:
        # the member seal() wrote comes last: find it from the end
        start = max(data.rfind(b',"checksum":"'), data.rfind(b'{"checksum":"') + 1)
        sealed = _SEALED.match(data, start) if start > 0 else None
        if sealed is None or hashlib.sha256(
                data[: sealed.start()] + b"}").hexdigest().encode() != sealed.group(1):
            return None, ("its checksum does not match its content (a save torn by a power "
                          "failure, or an edit: delete the \"checksum\" member to keep one)")
        del value["checksum"]
    return value, ""
