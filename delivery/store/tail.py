"""`events.tail`: the end of the event log that is not yet flushed, kept where flushing it
is cheap.

Flushing an append (`fdatasync` of a file that grew) commits the file system's journal,
and with it the metadata of every file created since — on ext4 that made the one flush a
stage needs cost several times a data write. So the log is appended without a flush, and
the same bytes are written into this side file, whose blocks were written once when it was
made: it is rewritten in place, never grows, and flushing it flushes data only. The bytes
are written there by the flush, in one write (a stage appends its lines in two batches),
since only what a flush wrote is there after a power failure anyway.

    <header line, padded>  {"tail":1,"count":n,"head":"<sha256>","offset":o}  — where the
                           mirrored part of the log starts (it was flushed up to there)
    <lines>                the log's lines after that point, byte for byte

When the log itself is flushed (a snapshot, or the mirror is full) the header is rewritten
and the mirror starts again; older bytes after the new lines are left, but they never
continue the hash chain, so reading stops where the current lines end. After a power
failure the log may lack lines the mirror holds: opening the log writes them back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from delivery.errors import RunStoreError
from delivery.store.files import fdatasync, open_file, read_file, write_all
from delivery.store.guard import difference, signature, signature_of

# room for the lines between two flushes of the log: a snapshot flushes it (every 256 KiB
# of stage records, see runstore.SNAPSHOT_BYTES), and a full mirror does. Every run writes
# it whole once (and fsyncs it): at 1 MiB that was a millisecond or more of each run's
# start, most of the start of a route scenario.
SIZE: Final = 256 << 10
HEADER: Final = 256  # bytes, padded with spaces; the lines start after it


class Tail:
    """The mirror of one log (see the module docstring)."""

    def __init__(self, path: Path, size: int | None = None) -> None:
        self.path = path
        self._path_text = str(path)
        self.size = size = size or SIZE
        self._position = HEADER
        # lines added since the last flush, written with it: one write a stage, not one
        # per batch of lines (a line only a flush has written counts after a power failure)
        self._pending: list[bytes] = []
        self._pending_at = HEADER
        try:
            self._fd = open_file(path, os.O_RDWR | os.O_CREAT)
            if os.fstat(self._fd).st_size < size:
                # written, not just allocated: overwriting written blocks changes no metadata
                os.lseek(self._fd, 0, os.SEEK_SET)
                write_all(self._fd, b"\0" * size)
                os.fsync(self._fd)
            self._seen = signature(os.fstat(self._fd))  # as this mirror last wrote it
        except OSError as error:
            raise RunStoreError(f"{path}: cannot prepare the log's tail file: "
                                f"{error.strerror or error}") from None

    def restart(self, count: int, head: str, offset: int) -> None:
        """The log is flushed up to `offset` (`count` lines, the last hashing to `head`):
        mirror what comes after it."""
        header = json.dumps({"tail": 1, "count": count, "head": head, "offset": offset},
                            separators=(",", ":")).encode()
        try:
            os.pwrite(self._fd, header + b" " * (HEADER - 1 - len(header)) + b"\n", 0)
            fdatasync(self._fd)
            self._seen = signature(os.fstat(self._fd))
        except OSError as error:
            raise RunStoreError(f"{self.path}: cannot write: {error.strerror or error}") from None
        self._pending.clear()  # in the log, which is flushed
        self._position = self._pending_at = HEADER

    def add(self, data: bytes) -> bool:
        """Mirror `data` (written and flushed by the next `flush`); False when there is no
        room left."""
        if self._position + len(data) > self.size:
            return False
        self._pending.append(data)
        self._position += len(data)
        return True

    def flush(self) -> None:
        """Write what was added since the last flush and flush it (data only)."""
        try:
            if self._pending:
                pending = self._pending
                data = pending[0] if len(pending) == 1 else b"".join(pending)
                os.pwrite(self._fd, data, self._pending_at)
                pending.clear()
                self._pending_at = self._position
                self._seen = signature(os.fstat(self._fd))
            fdatasync(self._fd)
        except OSError as error:
            raise RunStoreError(f"{self.path}: cannot flush: {error.strerror or error}") from None

    def changed_on_disk(self) -> str:
        """How the file differs from what this mirror last wrote ("" if it does not): lines
        planted after the mirrored ones would be written back into the log by the next
        resume, as if a power failure had taken them."""
        return difference(self._seen, signature_of(self._path_text)) if self._fd >= 0 else ""

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def mirrored(path: Path) -> tuple[int, str, int, list[bytes]] | None:
    """(count, head, offset, the lines after offset — complete ones, until they stop
    continuing each other's seq) of a tail file; None when there is none or no header.
    The caller checks the hash chain."""
    data = read_file(path, "tail file")
    if data is None:
        return None
    try:
        header = json.loads(data[:HEADER])
        count, head, offset = header["count"], header["head"], header["offset"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    if type(count) is not int or type(offset) is not int or not isinstance(head, str):
        return None
    return count, head, offset, list(_lines(data, HEADER, count))


def _lines(data: bytes, start: int, count: int) -> Iterator[bytes]:
    position, seq = start, count
    while True:
        newline = data.find(b"\n", position)
        if newline < 0:
            return
        line = data[position:newline]
        seq += 1
        if not line.startswith(b'{"seq":%d,' % seq):
            return
        yield line
        position = newline + 1
