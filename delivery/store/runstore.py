"""The durable run store (SPEC §11): a run directory, its checkpoint and its event log.

    <run>/run.json            what was run (written once, atomically)
    <run>/checkpoint.json     where the run is; atomically replaced after every stage
    <run>/checkpoint.previous.json   the one before (see delivery.store.checkpoint_file)
    <run>/events.jsonl        append-only, hash-chained event log
    <run>/<node>/<attempt>/   prompt.md, response.md, stdout.txt, stderr.txt, status.json
    <run>/artifacts/

`run.json` is written through a uniquely named temporary file in the same directory,
flushed and fsync'ed before `os.replace` puts it in place, then the directory is
fsync'ed; the checkpoint is written over its previous copy and the two names swapped
(`delivery.store.checkpoint_file`). A crash leaves either the old file or the new one, never a
mixture; a stray `*.tmp` file may be left behind and is ignored.

Each event line carries `prev`, the SHA-256 of the previous line's bytes (64 zeros on
the first line), so editing, removing or reordering lines breaks the chain. The
checkpoint records the log's head (`{"events": {"count": n, "head": h, "tail": [...]}}`)
so that cutting lines off the end is detected as well; `tail` holds the lines not yet
synced to the disk, which a power failure may take from the log and a resume writes
back. The chain is not keyed: it detects accidents and naive edits, not someone who
rewrites the log *and* the checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Final

from delivery import _jsontext as jsontext
from delivery.errors import RunStoreError
from delivery.redact import Redactor
from delivery.store.checkpoint_file import CheckpointFile, fdatasync, write_replacing

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


STAGE_FILES: Final = ("prompt.md", "response.md", "stdout.txt", "stderr.txt", "status.json")
ZERO_HASH: Final = "0" * 64
# Bytes of unsynced event lines a checkpoint carries at most before the log is synced.
TAIL_LIMIT: Final = 8192
RESERVED_EVENT_FIELDS: Final = frozenset({"seq", "ts", "type", "prev", "hash"})

_NODE_ID: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Names a stage directory may not take: the run's own entries (case-insensitively, for
# case-insensitive file systems) and the device names Windows reserves.
_RESERVED_NAMES: Final = frozenset(
    {"artifacts", "run", "checkpoint", "events", "con", "prn", "aux", "nul"}
    | {f"{device}{n}" for device in ("com", "lpt") for n in range(1, 10)}
)


def new_run_id() -> str:
    """A sortable, unique run id: UTC time to the second and 6 random hex digits."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _dumps(path: Path, value: Any, indent: int | None = None) -> bytes:
    try:
        if indent is None:  # compact; the JSON kept by jsontext containers is joined in
            return jsontext.encode(value).encode()
        return json.dumps(value, indent=indent).encode()
    except (TypeError, ValueError) as error:
        raise RunStoreError(f"{path}: cannot store {type(value).__name__}: {error}") from error


def _read_json_object(path: Path, what: str) -> dict[str, Any] | None:
    """The JSON object in `path`, None if there is no such file; anything else raises."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise RunStoreError(f"{path}: cannot read {what}: {error}") from error
    try:
        value = json.loads(data)
    except ValueError as error:
        raise RunStoreError(f"{path}: corrupt {what}: not valid JSON ({error})") from error
    if not isinstance(value, dict):
        raise RunStoreError(f"{path}: corrupt {what}: expected a JSON object")
    return value


class RunDirectory:
    """One run's directory. `create` starts a new one, `open` an existing one."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.run_json = self.path / "run.json"
        self.checkpoint_path = self.path / "checkpoint.json"
        self._checkpoint = CheckpointFile(self.checkpoint_path)
        self.events_path = self.path / "events.jsonl"
        self.artifacts_dir = self.path / "artifacts"
        self._root = str(self.path)
        self._made: dict[tuple[str, int], str] = {}  # stage folders checked and created

    @classmethod
    def create(cls, path: Path) -> RunDirectory:
        run = cls(path)
        if run.run_json.exists():
            raise RunStoreError(f"{run.path}: already holds a run (run.json exists)")
        try:
            run.artifacts_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise RunStoreError(f"{run.path}: cannot create run directory: {error}") from error
        return run

    @classmethod
    def open(cls, path: Path) -> RunDirectory:
        run = cls(path)
        if not run.run_json.is_file():
            raise RunStoreError(f"not a run directory: {run.path} (no run.json)")
        return run

    def write_run_info(self, info: Mapping[str, Any]) -> None:
        write_replacing(self.run_json, _dumps(self.run_json, info, indent=2) + b"\n")

    def read_run_info(self) -> dict[str, Any]:
        info = _read_json_object(self.run_json, "run.json")
        if info is None:
            raise RunStoreError(f"not a run directory: {self.path} (no run.json)")
        return info

    def save_checkpoint(self, data: Mapping[str, Any]) -> None:
        """Atomically replace the checkpoint (compact JSON; see `delivery.store.checkpoint_file`).

        The rename is not made durable with a directory fsync: a power failure may bring
        back the previous checkpoint, and resuming re-runs one more stage — which every
        stage must tolerate anyway (SPEC §11). A process crash never loses it.
        """
        self._checkpoint.save(_dumps(self.checkpoint_path, data) + b"\n")

    def load_checkpoint(self, *, fallback: bool = True) -> dict[str, Any] | None:
        """The last saved checkpoint, None if none was saved; a corrupt one raises.
        `fallback=False`: checkpoint.json only, not the previous copy (CheckpointFile.load).
        """
        return self._checkpoint.load(fallback=fallback)

    def recover_checkpoint(self) -> str:
        """Before a resumed run writes: undo what a power failure may have left (see
        CheckpointFile.recover); says what was wrong, "" if nothing."""
        return self._checkpoint.recover()

    def stage_dir(self, node_id: str, attempt: int) -> Path:
        """`<run>/<node_id>/<attempt>/`, created; a name that could escape is refused."""
        return Path(self._made_stage_dir(node_id, attempt))

    def _made_stage_dir(self, node_id: str, attempt: int) -> str:
        # Plain strings and os calls: this runs for every stage file, and pathlib's
        # objects cost more than the writes themselves on a fast disk.
        known = self._made.get((node_id, attempt))
        if known is not None:
            return known
        self._check_stage_names(node_id, attempt)
        node_dir = os.path.join(self._root, node_id)
        attempt_dir = os.path.join(node_dir, str(attempt))
        try:
            for level in (node_dir, attempt_dir):
                try:
                    os.mkdir(level)
                except FileExistsError:
                    # only something that was already there can be a planted symlink
                    if os.path.islink(level) or not os.path.isdir(level):
                        raise RunStoreError(f"{level}: stage directory leads outside the "
                                            "run (a symlink) or is not a directory") from None
        except OSError as error:
            raise RunStoreError(f"{attempt_dir}: cannot create stage directory: "
                                f"{error}") from error
        self._made[(node_id, attempt)] = attempt_dir
        return attempt_dir

    def _check_stage_names(self, node_id: str, attempt: int) -> None:
        if (
            not isinstance(node_id, str)
            or not _NODE_ID.fullmatch(node_id)
            or node_id.lower() in _RESERVED_NAMES
        ):
            raise RunStoreError(
                f"{self.path}: node id {node_id!r} cannot name a stage directory: expected "
                "[A-Za-z_][A-Za-z0-9_]*, not a name the run uses itself such as 'artifacts'"
            )
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise RunStoreError(
                f"{self.path}: attempt {attempt!r} for node {node_id!r}: expected an integer >= 1"
            )

    def _stage_path(self, node_id: str, attempt: int) -> Path:
        self._check_stage_names(node_id, attempt)
        path = self.path / node_id / str(attempt)
        # The names hold no separator and no '..', so only a symlink planted at either level
        # could lead outside the run (two lstat calls; resolve() cost ten times more).
        if path.parent.is_symlink() or path.is_symlink():
            raise RunStoreError(f"{path}: stage directory leads outside the run (a symlink)")
        return path

    def write_stage_file(
        self,
        node_id: str,
        attempt: int,
        name: str,
        text: str,
        *,
        redactor: Redactor | None = None,
    ) -> Path:
        path = os.path.join(self._made_stage_dir(node_id, attempt), self._stage_file_name(name))
        if redactor is not None:
            text = redactor.text(text)
        # Stage files are evidence that is rewritten whole when an interrupted stage runs
        # again, so a plain write will do: no temporary file, no fsync (those dominated
        # the cost of a stage).
        try:
            # os-level calls: a Python file object costs an fstat, an isatty ioctl and an
            # lseek per open, on every stage
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(text.encode("utf-8", "backslashreplace"))
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except OSError as error:
            raise RunStoreError(f"{path}: cannot write: {error}") from error
        return Path(path)

    def read_stage_file(self, node_id: str, attempt: int, name: str) -> str | None:
        path = self._stage_path(node_id, attempt) / self._stage_file_name(name)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as error:
            raise RunStoreError(f"{path}: cannot read: {error}") from error

    def _stage_file_name(self, name: str) -> str:
        if name not in STAGE_FILES:
            expected = ", ".join(STAGE_FILES)
            raise RunStoreError(f"{self.path}: {name!r} is not a stage file; expected {expected}")
        return name


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_LINE_ENCODER: Final = json.JSONEncoder(separators=(",", ":"))


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
    """The append-only, hash-chained event log of one run.

    Opening takes an exclusive lock on the file (released on close, or when the process
    dies), so two processes cannot interleave their chains; a second opener gets a
    RunStoreError. A torn last line left by a crash is cut off (and lines a checkpoint
    carries that the log lost are written back), then a `log_repaired` event recording
    the dropped bytes is appended before anything else.
    """

    def __init__(self, path: Path, *, redactor: Redactor | None = None,
                 sync_each: bool = True, restore: Mapping[str, Any] | None = None) -> None:
        """`sync_each=False`: appends are written at once but reach the disk only with
        `sync()` — or with the checkpoint, which carries the lines written since the last
        sync (`record()`). `restore` is such a record: lines of it that a power failure
        took from the end of the log are written back (before anything else)."""
        self.path = Path(path)
        self._redactor = redactor
        self._sync_each = sync_each
        self._count = 0
        self._head = ZERO_HASH
        self._unsynced: list[bytes] = []  # lines appended since the last sync
        self._unsynced_bytes = 0
        try:
            self._file: BinaryIO | None = open(self.path, "a+b", buffering=0)  # noqa: SIM115
        except OSError as error:
            raise RunStoreError(f"{self.path}: cannot open event log: {error}") from error
        try:
            self._lock()
            dropped = self._scan_and_repair()
            if restore is not None:
                self._restore(restore)
        except BaseException:
            self.close()
            raise
        if dropped:
            self.append("log_repaired", dropped_bytes=dropped)

    def _lock(self) -> None:
        if fcntl is None or self._file is None:  # pragma: no cover - not POSIX
            return
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            raise RunStoreError(
                f"{self.path}: another process is writing this event log (is the run still going?)"
            ) from error

    def _scan_and_repair(self) -> int:
        """Count the complete lines, hash the last one, cut a torn tail; bytes dropped."""
        assert self._file is not None
        self._file.seek(0)
        data = self._file.read()
        complete = data.rfind(b"\n") + 1
        lines = data[:complete].split(b"\n")[:-1]
        self._count = len(lines)
        self._head = _sha256(lines[-1]) if lines else ZERO_HASH
        dropped = len(data) - complete
        if dropped:
            self._file.truncate(complete)
            os.fsync(self._file.fileno())
        return dropped

    def _restore(self, recorded: Mapping[str, Any]) -> None:
        """Append the lines of a checkpoint's record that the log lacks (see __init__)."""
        count, head, tail = _record_fields(recorded)
        missing = count - self._count
        if missing <= 0:
            return
        lost = _lost_lines(self._count, self._head, count, head, tail)
        if isinstance(lost, str):
            raise RunStoreError(f"{self.path}: {lost}")
        assert self._file is not None
        for line in lost:
            view = memoryview(line + b"\n")
            while view:
                view = view[self._file.write(view) or 0 :]
            self._count += 1
            self._head = _sha256(line)
        os.fsync(self._file.fileno())

    def record(self, tail_limit: int = TAIL_LIMIT) -> dict[str, Any]:
        """What a checkpoint stores about the log: `count` and `head` (so that cutting lines
        off is detected) and `tail`, the lines not yet synced — the checkpoint is then all
        that must reach the disk per stage. Past `tail_limit` bytes the log is synced
        instead, which keeps checkpoints small."""
        if self._unsynced_bytes > tail_limit:
            self.sync()
        return {"count": self._count, "head": self._head,
                "tail": [line.decode("ascii") for line in self._unsynced]}

    @property
    def head(self) -> tuple[int, str]:
        """(number of lines, SHA-256 of the last line); (0, 64 zeros) when empty."""
        return self._count, self._head

    def append(self, event_type: str, **fields: Any) -> dict[str, Any]:
        """Write one event line (flushed and fsync'ed) and return it, with its `hash`."""
        if self._file is None:
            raise RunStoreError(f"{self.path}: event log is closed")
        clash = RESERVED_EVENT_FIELDS.intersection(fields)
        if clash:
            raise RunStoreError(
                f"{self.path}: event {event_type!r}: field(s) {', '.join(sorted(clash))} "
                "are set by the log itself"
            )
        body = fields if all(type(v) in _SCALARS for v in fields.values()) else _jsonable(fields)
        ts = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        event: dict[str, Any] = {"seq": self._count + 1, "ts": ts, "type": event_type,
                                 **body, "prev": self._head}
        text = _LINE_ENCODER.encode(event)
        # Every key and string of the event is in its line: a line that cannot hold a
        # secret needs no walk through the values (most cannot).
        if self._redactor is not None and self._redactor.may_change_json(text):
            event = {"seq": self._count + 1, "ts": ts, "type": event_type,
                     **self._redactor.value(body), "prev": self._head}
            text = _LINE_ENCODER.encode(event)
        line = text.encode()
        try:
            view = memoryview(line + b"\n")
            while view:
                view = view[self._file.write(view) or 0 :]
            if self._sync_each:
                os.fsync(self._file.fileno())
        except OSError as error:
            self.close()  # a partial line may be on disk: reopening the log repairs it
            raise RunStoreError(f"{self.path}: cannot append event: {error}") from error
        self._count += 1
        self._head = _sha256(line)
        if not self._sync_each:
            self._unsynced.append(line)
            self._unsynced_bytes += len(line) + 1
        return {**event, "hash": self._head}

    def sync(self) -> None:
        """Make every appended event durable (fdatasync)."""
        if self._file is not None:
            try:
                fdatasync(self._file.fileno())
            except OSError as error:
                raise RunStoreError(f"{self.path}: cannot sync event log: {error}") from error
            self._unsynced.clear()
            self._unsynced_bytes = 0

    def close(self) -> None:
        if self._file is not None:
            if not self._sync_each:
                self.sync()
            self._file.close()  # also releases the lock
            self._file = None

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _record_fields(recorded: Mapping[str, Any]) -> tuple[int, str, list[str]]:
    """(count, head, tail) of a checkpoint's `events` record; malformed ones raise."""
    count, head, tail = recorded.get("count"), recorded.get("head"), recorded.get("tail", [])
    if (isinstance(count, bool) or not isinstance(count, int) or not isinstance(head, str)
            or not isinstance(tail, list) or not all(isinstance(t, str) for t in tail)):
        raise RunStoreError(f"the checkpoint's 'events' should be {{'count': n, 'head': "
                            f"sha256, 'tail': [lines]}}, found {dict(recorded)!r:.200}")
    return count, head, tail


def _lost_lines(have: int, have_head: str, count: int, head: str,
                tail: list[str]) -> list[bytes] | str:
    """The lines that take a log of `have` lines (last hash `have_head`) to the recorded
    `count`/`head`, taken from the recorded `tail`; or why that is impossible."""
    missing = count - have
    if missing > len(tail):
        return (f"the checkpoint recorded {count} lines, the log has {have} and the "
                f"checkpoint carries only the last {len(tail)}; lines were cut off the end")
    lines = [t.encode("ascii", "replace") for t in tail[len(tail) - missing:]]
    prev = have_head
    for line in lines:
        try:
            linked = json.loads(line).get("prev") == prev
        except (ValueError, AttributeError):
            linked = False
        if not linked:
            return ("the lines the checkpoint carries do not continue the log's chain; "
                    "the log or the checkpoint was edited")
        prev = _sha256(line)
    if prev != head:
        return "the lines the checkpoint carries do not end at its recorded head"
    return lines


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    lines: int
    problem: str  # "" when ok
    line_number: int | None = None


def _first_problem(
    lines: list[bytes], expected_head: tuple[int, str] | None, tail: list[str]
) -> tuple[int, str] | None:
    prev = ZERO_HASH
    for number, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
        except ValueError as error:
            return number, f"not valid JSON ({error})"
        if not isinstance(event, dict):
            return number, "not a JSON object"
        if event.get("seq") != number:
            return number, (
                f"seq is {event.get('seq')!r}, expected {number} — a line was removed or "
                "inserted before it, or lines were reordered"
            )
        if event.get("prev") != prev:
            before = f"the hash of line {number - 1}" if number > 1 else "64 zeros"
            return number, (
                f"prev does not match {before} — the log was edited, or a line was removed "
                "or reordered"
            )
        prev = _sha256(line)
    if expected_head is not None:
        count, head = expected_head
        if len(lines) < count:
            last = _sha256(lines[-1]) if lines else ZERO_HASH
            if isinstance(_lost_lines(len(lines), last, count, head, tail), list):
                return count, (
                    f"missing — the checkpoint recorded {count} lines, the log has "
                    f"{len(lines)}; the checkpoint carries the lost lines (a power failure "
                    "takes events that had not reached the disk): resuming the run writes "
                    "them back"
                )
            return count, (
                f"missing — the checkpoint recorded {count} lines, the log has {len(lines)}; "
                "lines were cut off the end"
            )
        if count > 0 and _sha256(lines[count - 1]) != head:
            return count, "its hash does not match the head recorded in the checkpoint"
    return None


def verify_events(path: Path, expected_head: tuple[int, str] | None = None,
                  tail: list[str] | None = None) -> VerifyResult:
    """Check the chain of `path`; with `expected_head` also that nothing was cut off the end
    (`tail`, the unsynced lines a checkpoint carries, only changes what the report says).

    `line_number` is the first line where a check fails: an edit of line k (other than its
    `seq` or `prev`) shows at line k + 1, whose `prev` no longer matches.
    """
    try:
        lines = Path(path).read_bytes().split(b"\n")
    except OSError as error:
        return VerifyResult(False, 0, f"{path}: cannot read event log: {error}", None)
    if lines.pop():  # the file does not end with a newline
        return VerifyResult(
            False,
            len(lines),
            f"line {len(lines) + 1}: incomplete (no trailing newline) — a write was "
            "interrupted; opening the log for appending (resuming the run) repairs it",
            len(lines) + 1,
        )
    found = _first_problem(lines, expected_head, tail or [])
    if found is None:
        return VerifyResult(True, len(lines), "", None)
    return VerifyResult(False, len(lines), f"line {found[0]}: {found[1]}", found[0])


def verify_run(run_dir: Path) -> VerifyResult:
    """verify_events on the run's log, against the head its checkpoint recorded (if any)."""
    run = RunDirectory.open(run_dir)
    try:
        recorded = (run.load_checkpoint(fallback=False) or {}).get("events")
    except RunStoreError as error:
        return VerifyResult(False, 0, str(error), None)
    expected: tuple[int, str] | None = None
    tail: list[str] = []
    if recorded is not None:
        try:
            if not isinstance(recorded, dict):
                raise RunStoreError(f"the checkpoint's 'events' should be an object, found "
                                    f"{recorded!r:.200}")
            count, head, tail = _record_fields(recorded)
        except RunStoreError as error:
            return VerifyResult(False, 0, f"{run.checkpoint_path}: {error}", None)
        expected = (count, head)
    if not run.events_path.exists() and expected in (None, (0, ZERO_HASH)):
        return VerifyResult(True, 0, "", None)
    return verify_events(run.events_path, expected, tail)
