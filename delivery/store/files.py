"""File operations of the run store: never through a symlink, failures as RunStoreError.

Every file the store writes is opened with `O_NOFOLLOW` (a symlink planted in its place is
refused, never written through) or created under a fresh random name with `O_EXCL` and
renamed into place (a rename replaces a symlink, it does not follow it). Folders the store
creates must be real folders. SPEC §11: "writes stay inside the run directory".

A snapshot file ends with a `"checksum"` member, the SHA-256 of what precedes it, so a torn
or edited file is told apart from a complete one even when it still parses.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, TypeAlias

from delivery.errors import RunStoreError

# Flushes a file's data (and its size, if it changed); macOS has fsync only.
fdatasync: Final = getattr(os, "fdatasync", os.fsync)
NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_BINARY: Final = getattr(os, "O_BINARY", 0)
# The checksum member seal() puts last: the SHA-256 of everything before it, closed.
_SEALED: Final = re.compile(rb',?"checksum":"([0-9a-f]{64})"\}\s*\Z')


# A stage file's text, whole or as the parts it is joined from (see write_stage_text).
StageText: TypeAlias = str | Sequence[str]

# The UTF-8 of the last long non-ASCII text encoded by utf8(): a reply is written into its
# stage's response.md and then into the artifact store, and encoding a text that is not
# ASCII costs about 2 ms a MB each time. (One slot, replaced whole: parallel branches may
# ask at once.)
_ENCODED: list[tuple[str, bytes] | None] = [None]
_REMEMBERED: Final = 64 * 1024  # characters: below, encoding costs less than remembering


def utf8(text: str) -> bytes:
    """`text.encode()` (a lone surrogate raises UnicodeEncodeError), the bytes of the last
    long non-ASCII text asked for reused: identity, not equality, marks it (the slot holds
    the text, so its id cannot be reused)."""
    if len(text) < _REMEMBERED or text.isascii():  # ASCII: a copy, at memory speed
        return text.encode()
    last = _ENCODED[0]
    if last is not None and last[0] is text:
        return last[1]
    data = text.encode()
    _ENCODED[0] = (text, data)
    return data


def stage_bytes(parts: Sequence[str]) -> bytes:
    """The UTF-8 of the parts joined, each encoded by utf8() (UTF-8 of a concatenation is
    the concatenation of the parts' UTF-8); a lone surrogate written as `\\udXXX`."""
    try:
        return b"".join([utf8(part) for part in parts])
    except UnicodeEncodeError:
        return "".join(parts).encode("utf-8", "backslashreplace")


def _symlink_error(path: str | Path, error: OSError) -> RunStoreError:
    return RunStoreError(f"{path}: is a symlink; a run's files are never written or read "
                         f"through one (remove it): {error.strerror}")


def open_file(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """os.open with O_NOFOLLOW; a symlink or any other failure is a RunStoreError."""
    try:
        return os.open(path, flags | NOFOLLOW | _BINARY, mode)
    except OSError as error:
        if error.errno == errno.ELOOP or (error.errno == errno.EMLINK and NOFOLLOW):
            raise _symlink_error(path, error) from None
        raise


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_file(path: str | Path, data: bytes) -> None:
    """Create or overwrite `path` (not durable: for evidence rewritten on a re-run)."""
    try:
        fd = open_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as error:
        raise RunStoreError(f"{path}: cannot write: {error.strerror or error}") from error


def write_replacing(path: Path, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace `path` with `data` through a new temporary file, fsync and `os.replace`.

    `sync_dir=False` skips the directory fsync after the rename: a process crash cannot
    lose the rename, a power failure may bring back the previous file.
    """
    # A random name: a pid and counter could repeat after a crash (containers reuse pids).
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if sync_dir:
            sync_directory(path.parent)
    except OSError as error:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise RunStoreError(f"{path}: cannot write: {error.strerror or error}") from error


def sync_directory(directory: Path) -> None:
    """Make renames in `directory` durable (POSIX; Windows cannot open a directory)."""
    if os.name == "posix":
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_file(path: str | Path, what: str) -> bytes | None:
    """The bytes of `path`, None if it does not exist; a symlink or a failure raises."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise RunStoreError(f"{path}: cannot read {what}: {error.strerror or error}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RunStoreError(f"{path}: {what} is not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as error:
        raise RunStoreError(f"{path}: cannot read {what}: {error.strerror or error}") from None
    finally:
        os.close(fd)


def make_dir(path: str, what: str = "folder") -> None:
    """Create the folder `path`; one that exists must be a real folder, not a symlink."""
    try:
        os.mkdir(path)
    except FileExistsError:
        if os.path.islink(path) or not os.path.isdir(path):
            raise RunStoreError(f"{path}: {what} leads outside the run (a symlink) or is not "
                                "a folder; remove it") from None
    except OSError as error:
        raise RunStoreError(f"{path}: cannot create {what}: {error.strerror or error}") from None


def seal(data: bytes) -> bytes:
    """`data` (a JSON object) with a last member `"checksum":"<sha256 of the rest>"`."""
    body = data.rstrip()
    if not body.endswith(b"}"):
        raise ValueError("a sealed file holds a JSON object")
    digest = hashlib.sha256(body).hexdigest().encode()
    separator = b"" if body[:-1].rstrip() == b"{" else b","
    return body[:-1] + separator + b'"checksum":"' + digest + b'"}\n'


def seal_holds(data: bytes) -> bool:
    """Whether `data` ends with the checksum member seal() wrote, matching what precedes
    it (checked on the bytes: nothing is parsed)."""
    # the member seal() wrote comes last: find it from the end
    start = max(data.rfind(b',"checksum":"'), data.rfind(b'{"checksum":"') + 1)
    sealed = _SEALED.match(data, start) if start > 0 else None
    return sealed is not None and hashlib.sha256(
        data[: sealed.start()] + b"}").hexdigest().encode() == sealed.group(1)


def unseal(data: bytes) -> tuple[dict[str, Any] | None, str]:
    """(the JSON object in `data` without its checksum, or None; why not). An object
    without a checksum member is taken as it is (a hand-edited file)."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as error:
        return None, f"not valid JSON ({_brief(error)})"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, found {type(value).__name__}"
    if "checksum" in value:
        if not seal_holds(data):
            return None, ("its checksum does not match its content (a save torn by a power "
                          "failure, or an edit: delete the \"checksum\" member to keep one)")
        del value["checksum"]
    return value, ""


def _brief(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) <= 120 else text[:117] + "..."
