"""Reading and checking the hash chain of a run's event log (`delivery.store.eventlog`).

A line is checked by its bytes when it is as the log writes it (`seq` first, `prev` last)
and parsed otherwise; `read_after` reads from a head recorded earlier on, `verify_events`
(`delivery verify`) the whole log.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from delivery.errors import RunStoreError
from delivery.store.files import open_file, read_file

ZERO_HASH: Final = "0" * 64
TAIL_CHUNK: Final = 1 << 16  # how much is read at a time from a log's end backwards


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class LogHead:
    """Where a log ends: its number of lines, the hash of the last one, its size in bytes."""

    count: int = 0
    head: str = ZERO_HASH
    offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "head": self.head, "offset": self.offset}


def line_ending_at(fd: int, offset: int) -> bytes | None:
    """The line whose newline is the byte before `offset` (without it), reading backwards
    from there only; None when that byte is not a newline."""
    if offset <= 0 or os.pread(fd, 1, offset - 1) != b"\n":
        return None
    position, line = offset - 1, b""
    while position > 0:
        start = max(0, position - TAIL_CHUNK)
        line = os.pread(fd, position - start, start) + line
        position = start
        cut = line.rfind(b"\n")
        if cut >= 0:
            return line[cut + 1:]
    return line  # the first line of the file


def _read_from(path: Path, offset: int) -> tuple[bytes | None, bytes] | None:
    """(the line ending at `offset` or None, everything after `offset`) of the log at
    `path`, read from that line on only; None when there is no log."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as error:  # a symlink is refused by open_file itself
        raise RunStoreError(f"{path}: cannot read event log: "
                            f"{error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunStoreError(f"{path}: event log is not a regular file")
        line = line_ending_at(fd, offset) if 0 < offset <= info.st_size else None
        chunks, position = [], offset
        while chunk := os.pread(fd, 1 << 24, position):
            chunks.append(chunk)
            position += len(chunk)
        return line, b"".join(chunks)
    finally:
        os.close(fd)


def first_lines(path: Path, count: int) -> list[bytes]:
    """The first `count` complete lines of the log at `path` (fewer when it has fewer),
    without their newlines; read from the start only, whatever the log's length."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    except OSError as error:
        raise RunStoreError(f"{path}: cannot read event log: "
                            f"{error.strerror or error}") from None
    try:
        data, position = b"", 0
        while data.count(b"\n") < count:
            chunk = os.pread(fd, TAIL_CHUNK, position)
            if not chunk:
                break
            data += chunk
            position += len(chunk)
    finally:
        os.close(fd)
    return data.split(b"\n")[:min(count, data.count(b"\n"))]


def read_after(path: Path, since: LogHead,
               event_type: str | None = None) -> Iterator[dict[str, Any]]:
    """The events after `since` (a head recorded earlier), checked against the chain;
    a torn last line is left out. Raises RunStoreError where the chain breaks. With
    `event_type`, only events of that type are given (the rest is still checked)."""
    only_type = event_type
    only = None if event_type is None else b'"type":' + json.dumps(event_type).encode()
    # read from the head's line on: what is before it is not read at all (a resume costs
    # the same early and late in a run)
    found = _read_from(path, since.offset)
    if found is None:
        if since.count:
            raise RunStoreError(f"{path}: the event log is missing; the checkpoint recorded "
                                f"{since.count} lines")
        return
    head_line, data = found
    if since.offset and head_line is None:
        raise RunStoreError(f"{path}: the log is shorter than the checkpoint recorded "
                            f"({since.count} lines, {since.offset} bytes): lines were cut off "
                            "the end")
    if head_line is not None and sha256(head_line) != since.head:
        raise RunStoreError(f"{path}: line {since.count} does not match the head the "
                            "checkpoint recorded: the log was edited")
    prev, seq = since.head, since.count
    position = 0
    while True:
        newline = data.find(b"\n", position)
        if newline < 0:
            return  # a torn tail (or nothing): opening the log for appending cuts it
        line = data[position:newline]
        seq += 1
        # lines as the log writes them are checked by their bytes; only the events asked
        # for are parsed (a resume wants the stage records only)
        if not (line.startswith(b'{"seq":%d,' % seq)
                and line.endswith(b',"prev":"' + prev.encode() + b'"}')
                and (only is None or only not in line[:120])):
            problem = _line_problem(line, seq, prev)
            if isinstance(problem, str):
                raise RunStoreError(f"{path}: line {seq}: {problem}")
            if only is None or problem.get("type") == only_type:
                yield problem
        prev = sha256(line)
        position = newline + 1


def _line_problem(line: bytes, number: int, prev: str) -> dict[str, Any] | str:
    """The event on line `number`, or what is wrong with it."""
    try:
        event = json.loads(line)
    except (ValueError, RecursionError) as error:
        text = str(error) or type(error).__name__
        return f"not valid JSON ({text[:120]})"
    if not isinstance(event, dict):
        return "not a JSON object"
    if event.get("seq") != number:
        return (f"seq is {str(event.get('seq'))[:40]}, expected {number} — a line was removed "
                "or inserted before it, or lines were reordered")
    if event.get("prev") != prev:
        before = f"the hash of line {number - 1}" if number > 1 else "64 zeros"
        return (f"prev does not match {before} — the log was edited, or a line was removed "
                "or reordered")
    return event


def chain_problem(data: bytes, *, prev: str = ZERO_HASH,
                  number: int = 0) -> tuple[int, str] | None:
    """The first line of `data` (complete lines) that breaks the chain, and why; None if
    it holds. `data` starts after line `number` whose hash is `prev` (the start of the log
    by default). Lines as the log writes them are checked by their bytes (`seq` first,
    `prev` last), without parsing; any other line is parsed."""
    return scan(data, prev, number, None, None)


def scan(data: bytes, prev: str, number: int, only: str | None,
          found: list[dict[str, Any]] | None) -> tuple[int, str] | None:
    """chain_problem(); into `found` (when given), the events of type `only`, which are
    parsed (read_after's test: `"type":"<only>"` in the line's first 120 bytes)."""
    marker = None if only is None else b'"type":' + json.dumps(only).encode()
    position, end = 0, len(data)
    while position < end:
        newline = data.find(b"\n", position)
        if newline < 0:
            newline = end
        line = data[position:newline]
        number += 1
        if not (line.startswith(b'{"seq":%d,' % number)
                and line.endswith(b',"prev":"' + prev.encode() + b'"}')
                and (marker is None or marker not in line[:120])):
            problem = _line_problem(line, number, prev)
            if isinstance(problem, str):
                return number, problem
            if found is not None and problem.get("type") == only:
                found.append(problem)
        prev = sha256(line)
        position = newline + 1
    return None


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    lines: int
    problem: str  # "" when ok
    line_number: int | None = None
    records: int = 0  # stage records (`state` events) seen


def verify_events(path: Path, expected: LogHead | None = None,
                  record_type: str = "state") -> VerifyResult:
    """Check the whole chain of `path`; with `expected` (what a snapshot recorded) also that
    nothing before it was cut off the end. `line_number` is the first line where a check
    fails: an edit of line k (other than its `seq` or `prev`) shows at line k + 1."""
    try:
        data = read_file(path, "event log")
    except RunStoreError as error:
        return VerifyResult(False, 0, str(error), None)
    if data is None:
        if expected is not None and expected.count:
            return VerifyResult(False, 0, f"{path}: the event log is missing; the checkpoint "
                                f"recorded {expected.count} lines", None)
        return VerifyResult(True, 0, "", None)
    lines = data.split(b"\n")
    if lines.pop():  # the file does not end with a newline
        return VerifyResult(False, len(lines), f"line {len(lines) + 1}: incomplete (no trailing "
                            "newline) — a write was interrupted; opening the log for appending "
                            "(resuming the run) repairs it", len(lines) + 1)
    prev, records = ZERO_HASH, 0
    for number, line in enumerate(lines, start=1):
        event = _line_problem(line, number, prev)
        if isinstance(event, str):
            return VerifyResult(False, len(lines), f"line {number}: {event}", number, records)
        records += event.get("type") == record_type
        prev = sha256(line)
    if expected is not None and expected.count:
        if len(lines) < expected.count:
            return VerifyResult(False, len(lines), f"line {expected.count}: missing — the "
                                f"checkpoint recorded {expected.count} lines, the log has "
                                f"{len(lines)}; lines were cut off the end", expected.count,
                                records)
        if sha256(lines[expected.count - 1]) != expected.head:
            return VerifyResult(False, len(lines), f"line {expected.count}: its hash does not "
                                "match the head recorded in the checkpoint", expected.count,
                                records)
    return VerifyResult(True, len(lines), "", None, records)
