"""The append-only, hash-chained event log of a run (`events.jsonl`, SPEC §11).

Each line is one JSON event carrying `seq` (from 1) and `prev`, the SHA-256 of the previous
line's bytes (64 zeros on the first line): editing, removing or reordering lines breaks the
chain, and a snapshot records the log's head (`count`, `head`, byte `offset`) so that
cutting lines off before it is caught too. The chain is not keyed: it detects accidents and
naive edits, not someone who rewrites the log *and* the snapshot.

The stage records (the `state` events, see `delivery.store.records`) live in this log, so
the log is the run's durable record: `sync()` after a stage's record is the one flush a
stage needs. Opening the log for appending locks it (released on close, or when the process
dies) and cuts a torn last line left by a crash, logging `log_repaired`; it reads only the
end of the file, so opening costs the same for a long run as for a short one.

Opening also checks the chain, so that nothing is appended to a broken log. Given the head
a snapshot recorded (`verified`: a resume), it checks the line the head names — the log
must still hold it at the recorded offset, with the recorded hash and `seq` — and the
chain from there to the end, not the lines before: those were checked when the snapshot
was written, and re-reading them would make every resume cost more the longer the run.
What that leaves undetected on a resume: an edit *before* the snapshot's head that keeps
every byte offset (an edit that changes the length moves the head line, and the whole log
is then checked). `delivery verify` (`verify_events`) always checks the whole chain.
Reading and checking the chain without appending is `delivery.store.eventchain`.

A resume needs the stage records after the snapshot's head, the lines the opening check has
just read and hashed: opened with `collect`, the log keeps the events of that type the
check parsed (`take_collected`), so that they are not read and hashed a second time.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from delivery.errors import RunStoreError
from delivery.redact import Redactor
from delivery.store.eventchain import (
    TAIL_CHUNK,
    ZERO_HASH,
    LogHead,
    line_ending_at,
    scan,
    sha256,
)
from delivery.store.files import fdatasync, open_file, write_all
from delivery.store.guard import MISSING, Signature, difference, signature, signature_of
from delivery.store.tail import Tail, mirrored

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

RESERVED_EVENT_FIELDS: Final = frozenset({"seq", "ts", "type", "prev", "hash"})
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_LINE_ENCODER: Final = json.JSONEncoder(separators=(",", ":"))


# (the second and its text, replaced together: parallel branches stamp at once)
_SECOND: tuple[int, str] = (-1, "")


def utc_stamp() -> str:
    """The time now, UTC, to the microsecond: `2026-12-03T10:42:45.468777Z`, what
    `datetime.now(UTC).isoformat(timespec="microseconds")` gives with `Z` for `+00:00`.
    Every event is stamped (four a stage): the text of the second is made once a second,
    a third of the cost of building and formatting a datetime each time."""
    return stamp_of(time.time_ns())


def stamp_of(nanoseconds: int) -> str:
    """utc_stamp() of the instant `nanoseconds` after the epoch (microseconds cut off)."""
    global _SECOND
    second, micros = divmod(nanoseconds // 1000, 1_000_000)
    known = _SECOND
    if known[0] != second:
        known = _SECOND = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{known[1]}.{micros:06d}Z"


def _jsonable(value: Any) -> Any:
    """`value` with anything JSON cannot hold (paths, enums, ...) turned into its str()."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


class EventLog:
    """The log of one run, opened for appending (see the module docstring)."""

    def __init__(self, path: Path, *, redactor: Redactor | None = None,
                 stamp: Callable[[], str] = utc_stamp, check: bool = True,
                 tail: Path | None = None, verified: LogHead | None = None,
                 collect: str | None = None) -> None:
        """`check`: refuse a log whose chain is broken (appending to it would bury the
        damage under lines that verify): the whole log, or, with `verified` (the head a
        snapshot recorded) and a log that still holds that head, the lines after it.
        `tail`: the side file the unflushed end of the log is mirrored to
        (`delivery.store.tail`); lines it holds that a power failure took from the log are
        written back first. `collect`: keep the events of this type the check parses, for
        `take_collected`."""
        self.path = Path(path)
        self._path_text = str(self.path)
        self._collect = collect
        # (where the check started, the `collect` events after it, where it ended)
        self._collected: tuple[LogHead, list[dict[str, Any]], LogHead] | None = None
        self._tail: Tail | None = None
        self._tail_full = False
        self._redactor = redactor
        self._stamp = stamp
        self._count = 0
        self._head = ZERO_HASH
        self._offset = 0
        self._fd: int | None = None
        # lines appended with `defer` and not yet written (`_write_pending`)
        self._pending: list[bytes] = []
        # the file as this log last wrote it, and the length of its last line
        # (`changed_on_disk`)
        self._seen: Signature = MISSING
        self._last_length = 0
        try:
            self._fd = open_file(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        except OSError as error:
            raise RunStoreError(f"{self.path}: cannot open event log: "
                                f"{error.strerror or error}") from None
        try:
            self._lock()
            dropped = self._find_end_and_repair()
            restored = self._restore(tail) if tail is not None else 0
            if check and self._offset:
                problem = self._chain_problem(verified)
                if problem is not None:
                    raise RunStoreError(f"{self.path}: has a broken event log: line "
                                        f"{problem[0]}: {problem[1]}")
            if tail is not None:
                self._tail = Tail(tail)
                self.flush_log()
            last = _last_line(self._fd, self._offset)[1]
            self._wrote(len(last) + 1 if last is not None else 0)
        except BaseException:
            self._close_fd()
            raise
        if dropped or restored:
            self.append("log_repaired", dropped_bytes=dropped, restored_lines=restored)

    def _chain_problem(self, verified: LogHead | None) -> tuple[int, str] | None:
        """eventchain.chain_problem() of the log, from `verified` on when the log holds it."""
        assert self._fd is not None
        start, prev, number = 0, ZERO_HASH, 0
        if verified is not None and verified.count and verified.offset <= self._offset:
            line = line_ending_at(self._fd, verified.offset)
            if (line is not None and sha256(line) == verified.head
                    and line.startswith(b'{"seq":%d,' % verified.count)):
                start, prev, number = verified.offset, verified.head, verified.count
        data = os.pread(self._fd, self._offset - start, start)
        found: list[dict[str, Any]] | None = [] if self._collect is not None else None
        problem = scan(data, prev, number, self._collect, found)
        if found is not None and problem is None:
            self._collected = (LogHead(number, prev, start), found, self.head)
        return problem

    def take_collected(self, since: LogHead) -> tuple[list[dict[str, Any]], LogHead] | None:
        """The events of the `collect` type that opening the log checked after `since`, in
        order, and the head the check ended at (what was appended later is not in them);
        None when the check started elsewhere, collected nothing, or was taken already."""
        collected, self._collected = self._collected, None
        if collected is None or collected[0] != since:
            return None
        return collected[1], collected[2]

    def _restore(self, tail: Path) -> int:
        """Write back the lines the tail file holds beyond the log's end (what a power
        failure took); returns how many."""
        assert self._fd is not None
        found = mirrored(tail)
        if found is None:
            return 0
        count, _, _, lines = found
        if count + len(lines) <= self._count:
            return 0
        if self._count < count:
            raise RunStoreError(f"{self.path}: the log has {self._count} lines but was "
                                f"flushed up to line {count}: lines were cut off the end")
        added = 0
        for line in lines[self._count - count:]:
            if not line.endswith(b',"prev":"' + self._head.encode() + b'"}'):
                break  # a line torn by the power failure, or one of an older mirror
            try:
                write_all(self._fd, line + b"\n")
            except OSError as error:
                raise RunStoreError(f"{self.path}: cannot write back lost lines: "
                                    f"{error.strerror or error}") from None
            self._count += 1
            self._head = sha256(line)
            self._offset += len(line) + 1
            added += 1
        return added

    def _lock(self) -> None:
        if fcntl is None or self._fd is None:  # pragma: no cover - not POSIX
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunStoreError(f"{self.path}: another process is writing this event log "
                                "(is the run still going?)") from None

    def _find_end_and_repair(self) -> int:
        """Find the last complete line from the end of the file; cut a torn tail after it.
        Returns the bytes dropped."""
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        end, last = _last_line(self._fd, size)
        if last is not None:
            count = _seq_of(last)
            if count is None:  # the last line is damaged: count the lines the slow way
                count = _count_lines(self._fd, end)
            self._count, self._head = count, sha256(last)
        self._offset = end
        if size > end:
            try:
                os.ftruncate(self._fd, end)
                os.fsync(self._fd)
            except OSError as error:
                raise RunStoreError(f"{self.path}: cannot cut the torn last line: "
                                    f"{error.strerror}") from None
        return size - end

    @property
    def head(self) -> LogHead:
        return LogHead(self._count, self._head, self._offset)

    def append(self, event_type: str, *, defer: bool = False,
               **fields: Any) -> dict[str, Any]:
        """Write one event line (not yet synced, see `sync`) and return it, with `hash`.
        Values JSON cannot hold (paths, enums, ...) are written as their str().
        `defer`: see `append_json`."""
        for value in fields.values():
            if type(value) not in _SCALARS:
                return self.append_json(event_type, _jsonable(fields), defer=defer)
        return self.append_json(event_type, fields, defer=defer)

    def append_json(self, event_type: str, body: dict[str, Any], *,
                    defer: bool = False) -> dict[str, Any]:
        """`append` for fields that are plain JSON already (a stage record): not walked.

        `defer`: the line is written with the next line appended without it, or by the
        next `sync`/`flush_log`/`close` — one write for the lines a stage ends with, which
        nothing waits between (the chain and `head` count it at once). A process killed
        before that loses it, as it loses the unsynced stage record it comes before."""
        if self._fd is None:
            raise RunStoreError(f"{self.path}: event log is closed")
        if RESERVED_EVENT_FIELDS.intersection(body):
            clash = RESERVED_EVENT_FIELDS.intersection(body)
            raise RunStoreError(f"{self.path}: event {event_type!r}: field(s) "
                                f"{', '.join(sorted(clash))} are set by the log itself")
        ts = self._stamp()
        seq = self._count + 1
        event: dict[str, Any] = {"seq": seq, "ts": ts, "type": event_type, **body,
                                 "prev": self._head}
        text = _LINE_ENCODER.encode(event)
        # Every key and string of the event is in its line: a line that cannot hold a
        # secret needs no walk through the values (most cannot).
        if self._redactor is not None and self._redactor.may_change_json(text):
            event = {"seq": seq, "ts": ts, "type": event_type,
                     **self._redactor.value(body), "prev": self._head}
            text = _LINE_ENCODER.encode(event)
        line = text.encode() + b"\n"
        self._pending.append(line)
        self._count = seq
        self._head = head = sha256(line[:-1])
        self._offset += len(line)
        if not defer:
            self._write_pending()
        event["hash"] = head
        return event

    def _write_pending(self) -> None:
        """Write the lines appended and not yet written, in one write."""
        assert self._fd is not None  # callers check that the log is open
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        last = len(self._pending[-1])
        self._pending.clear()
        try:
            write_all(self._fd, data)
            self._wrote(last)
            if self._tail is not None and not self._tail_full:
                self._tail_full = not self._tail.add(data)
        except (OSError, RunStoreError) as error:
            self.close(sync=False)  # a partial line may be on disk: reopening repairs it
            problem = error.strerror if isinstance(error, OSError) else error
            raise RunStoreError(f"{self.path}: cannot append event: {problem}") from None

    def _wrote(self, last_length: int) -> None:
        """The log's file now ends at `_offset` with a line of `last_length` bytes (its
        newline included) hashing to `_head`: remember how the file looks."""
        assert self._fd is not None
        self._seen = signature(os.fstat(self._fd))
        self._last_length = last_length

    def changed_on_disk(self) -> list[tuple[str, str]]:
        """The log's file and its tail file, those that differ from what this log last
        wrote to them, and how: replaced, removed, grown, cut or written
        (`delivery.store.guard`). The log's last written line is also read back and hashed
        (a few hundred bytes), so that an edit of the same size made within the file
        system's timestamp granularity of the log's last write still shows."""
        if self._fd is None:
            return []
        how = difference(self._seen, signature_of(self._path_text))
        if not how and self._last_length:
            written = self._offset - sum(len(line) for line in self._pending)
            line = os.pread(self._fd, self._last_length, written - self._last_length)
            if not line.endswith(b"\n") or sha256(line[:-1]) != self._written_head():
                how = "its last line was rewritten"
        found = [(self.path.name, how)] if how else []
        tail = self._tail.changed_on_disk() if self._tail is not None else ""
        if tail and self._tail is not None:
            found.append((self._tail.path.name, tail))
        return found

    def _written_head(self) -> str:
        """The hash of the last line written to the file (before the deferred ones)."""
        if not self._pending:
            return self._head
        # the first deferred line carries it as its `prev`
        first = self._pending[0]
        return first[first.rindex(b'"prev":"') + 8:-3].decode()

    def sync(self) -> None:
        """Make every appended event durable: the tail file is flushed (data only), or,
        without one or when it is full, the log itself."""
        if self._fd is None:
            raise RunStoreError(f"{self.path}: event log is closed")
        if self._pending:
            self._write_pending()
        if self._tail is not None and not self._tail_full:
            try:
                self._tail.flush()
            except RunStoreError:
                self.close(sync=False)
                raise
            return
        self.flush_log()

    def flush_log(self) -> None:
        """Flush the log file itself (a journal commit) and start the tail file again."""
        if self._fd is None:
            raise RunStoreError(f"{self.path}: event log is closed")
        if self._pending:
            self._write_pending()
        try:
            fdatasync(self._fd)
            if self._tail is not None:
                self._tail.restart(self._count, self._head, self._offset)
                self._tail_full = False
        except (OSError, RunStoreError) as error:
            self.close(sync=False)
            problem = error.strerror if isinstance(error, OSError) else error
            raise RunStoreError(f"{self.path}: cannot sync event log: {problem}") from None

    def close(self, *, sync: bool = True) -> None:
        if self._fd is not None and sync and self._pending:
            with contextlib.suppress(RunStoreError):
                self._write_pending()  # closes the log when it fails
        if self._fd is not None:
            self._pending.clear()
            if sync:
                # closing after a failure: what is on disk is what resume sees
                with contextlib.suppress(OSError):
                    fdatasync(self._fd)
            self._close_fd()

    def _close_fd(self) -> None:
        if self._tail is not None:
            self._tail.close()
            self._tail = None
        if self._fd is not None:
            os.close(self._fd)  # also releases the lock
            self._fd = None

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _last_line(fd: int, size: int) -> tuple[int, bytes | None]:
    """(where the complete lines end, the last complete line or None), reading backwards."""
    position, tail = size, b""
    end: int | None = None
    while position > 0:
        start = max(0, position - TAIL_CHUNK)
        tail = os.pread(fd, position - start, start) + tail
        position = start
        if end is None:
            cut = tail.rfind(b"\n")
            if cut < 0:
                continue
            end = position + cut + 1
            tail = tail[: cut + 1]
        before = tail.rfind(b"\n", 0, len(tail) - 1)
        if before >= 0 or position == 0:
            return end, tail[before + 1: -1]
    return (0, None) if end is None else (end, tail[:-1])


def _seq_of(line: bytes) -> int | None:
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return None
    seq = event.get("seq") if isinstance(event, dict) else None
    return seq if type(seq) is int and seq > 0 else None


def _count_lines(fd: int, end: int) -> int:
    count, position = 0, 0
    while position < end:
        chunk = os.pread(fd, min(1 << 20, end - position), position)
        count += chunk.count(b"\n")
        position += len(chunk)
    return count
