"""The local run store (SPEC §11): one run directory.

    <run>/run.json          what was run (RunInfo; written through a temporary file)
    <run>/workflow.dot      the run's copy of its workflow (resume checks its SHA-256)
    <run>/workflow.model.json  its validated model, for resumes (delivery.store.model_cache)
    <run>/events.jsonl      the hash-chained event log; it holds the stage records
    <run>/checkpoint.json   a snapshot of the state, with the log position it covers
    <run>/<node>/<attempt>/ prompt.md, response.md, stdout.txt, stderr.txt, status.json
    <run>/artifacts/        large context values

**One flush per stage, whatever came before.** After every stage the engine hands over the
stage's changes (a `StageRecord`: the context keys it set, the path it added, ...). They are
appended to the event log as a `state` event and the log is flushed (`fdatasync`): that one
write is what makes the stage durable. The events the engine appended with `defer` just
before (those that end the stage) go out in the same write. The whole state is written
to `checkpoint.json` only now and then — when the records logged since the last one reach
SNAPSHOT_BYTES and SNAPSHOT_RATIO times its size, and when the run ends or pauses — so
snapshots cost a bounded share of each stage however long the run gets. A snapshot is
written to a new file, flushed and renamed over the old one, and ends with a checksum.

**Resume** = the snapshot + the `state` events after the log position it recorded (the
chain from there is checked on the way; only that part of the log is read, see
`delivery.store.eventlog` for what this leaves to `delivery verify`). The log alone is
enough: the first `state` event holds the starting context whole, so a missing or torn
`checkpoint.json` is rebuilt from the log (and logged as `checkpoint_recovered`).

**Out of the stages' reach** (SPEC §14). The directory is inside the workspace, where a
stage's processes can write: from `open_log` on, the store knows how it left the files
that decide what runs next (`WATCHED`, the log and its tail; `delivery.store.guard`), and
`check_untouched`, called by the engine after every stage that started a process, names
any that changed. Across
processes, the first event (`run_started`) holds the SHA-256 of the workflow copy and of
the model cache, which a resume checks (`started_with`).

What a crash leaves: a SIGKILL anywhere loses at most the stage that was running (its
record was not written, so it runs again — SPEC §11); a torn last line is cut when the log
is next opened; a power failure may also take unsynced events after the last record (the
same stage runs again).
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from delivery.errors import RunStateChanged, RunStoreError
from delivery.redact import Redactor
from delivery.store.artifacts import ArtifactStore
from delivery.store.base import Loaded, RemoteTarget, StoreCapability
from delivery.store.eventchain import (
    ZERO_HASH,
    LogHead,
    VerifyResult,
    first_lines,
    read_after,
    sha256,
    verify_events,
)
from delivery.store.eventlog import EventLog, utc_stamp
from delivery.store.files import (
    StageText,
    make_dir,
    read_file,
    seal,
    stage_bytes,
    unseal,
    write_file,
    write_replacing,
)
from delivery.store.guard import FileWatch
from delivery.store.records import RECORD_EVENT, RunInfo, RunState, RunStatus, StageRecord
from delivery.store.saved_worktree import SavedWorktree

STAGE_FILES: Final = ("prompt.md", "response.md", "stdout.txt", "stderr.txt", "status.json")
WORKFLOW_COPY: Final = "workflow.dot"
MODEL_CACHE: Final = "workflow.model.json"  # delivery.store.model_cache
# The files besides the log that decide what a run (or its resume) does next: no stage's
# process may write them (SPEC §14, `check_untouched`).
WATCHED: Final = ("run.json", WORKFLOW_COPY, MODEL_CACHE, "checkpoint.json")
# A snapshot is written once the records logged since the last one reach this much, and
# the last snapshot's size (times the ratio). A resume reads the snapshot and parses the
# records after it, so it reads at most (1 + ratio) times the snapshot's size, or the
# floor: with 1 MiB and 2 a resume of a 5,000-stage run parsed ~1,000 records, 60% of its
# start-up (benchmarks/run_growth.py). The cost moves to the run: a snapshot's bytes per
# record byte logged, at most 1 / ratio, each encoded once (a few ms per snapshot of a
# 5,000-stage run, one every ~250 stages).
SNAPSHOT_BYTES: Final = 1 << 18
SNAPSHOT_RATIO: Final = 1

# a node, or a foreach stage's run for one folder (`implement@web`, SPEC §8.1)
_NODE_ID: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(@[A-Za-z_][A-Za-z0-9_]*)?")
# Names a stage directory may not take: the run's own entries (case-insensitively, for
# case-insensitive file systems) and the device names Windows reserves.
_RESERVED_NAMES: Final = frozenset(
    {"artifacts", "run", "checkpoint", "events", "workflow", "con", "prn", "aux", "nul"}
    | {f"{device}{n}" for device in ("com", "lpt") for n in range(1, 10)}
)
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"))


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id: UTC time (`now`, default the system's) to the second and
    6 random hex digits."""
    return f"{now or datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


class LocalRunStore:
    """One run's directory (see the module docstring). `RunDirectory` is the same class."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)
        self.run_json = self._path / "run.json"
        self.checkpoint_path = self._path / "checkpoint.json"
        self.events_path = self._path / "events.jsonl"
        self.tail_path = self._path / "events.tail"
        self.artifacts_dir = self._path / "artifacts"
        self._artifacts = ArtifactStore(self.artifacts_dir)
        self._root = str(self._path)
        self._made: dict[tuple[str, int], str] = {}  # stage folders checked and created
        self._log: EventLog | None = None
        self._watch: FileWatch | None = None  # from open_log on: see check_untouched
        self._since_snapshot = 0  # log bytes written since the last snapshot
        self._snapshot_size = 0
        # the snapshot open_log read (or why it could not), for load(): parsed once
        self._opened_snapshot: tuple[RunState, LogHead] | RunStoreError | None = None

    # -- the directory -----------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._path

    @property
    def location(self) -> str:
        return str(self._path)

    @property
    def artifacts(self) -> ArtifactStore:
        return self._artifacts

    @property
    def capabilities(self) -> frozenset[StoreCapability]:
        return frozenset()  # a run directory on this machine: nothing beyond keeping it

    # nothing to claim, give back or re-create on one machine (the RunStore protocol)
    def claim(self) -> None:
        pass

    def release(self, status: RunStatus) -> None:
        pass

    def release_unchanged(self, message: str) -> None:
        pass

    def saved_worktrees(self) -> Mapping[str, SavedWorktree]:
        return {}

    @classmethod
    def create_dir(cls, path: Path) -> LocalRunStore:
        """A new, empty run directory (its parents made as needed)."""
        run = cls(path)
        if os.path.lexists(run.run_json):
            raise RunStoreError(f"{run.path}: already holds a run (run.json exists)")
        try:
            run.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise RunStoreError(f"{run.path}: cannot create run directory: "
                                f"{error.strerror or error}") from None
        make_dir(run._root, "run directory")
        return run

    @classmethod
    def open_dir(cls, path: Path) -> LocalRunStore:
        run = cls(path)
        if os.path.islink(run._root) or not run.run_json.is_file():
            raise RunStoreError(f"not a run directory: {run.path} (no run.json)")
        return run

    create = create_dir  # shorter names for callers that know they hold a directory
    open = open_dir

    # -- what was run -------------------------------------------------------------------------
    def write_run_info(self, info: RunInfo) -> None:
        data = json.dumps(info.to_json(), indent=2).encode() + b"\n"
        write_replacing(self.run_json, data)
        if self._watch is not None:
            self._watch.wrote(self.run_json.name)

    def read_run_info(self) -> RunInfo:
        data = read_file(self.run_json, "run.json")
        if data is None:
            raise RunStoreError(f"not a run directory: {self.path} (no run.json)")
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as error:
            raise RunStoreError(f"{self.run_json}: corrupt run.json: not valid JSON "
                                f"({str(error)[:120]})") from None
        return RunInfo.from_json(value, str(self.run_json))

    def write_workflow_copy(self, source: bytes) -> None:
        # before run.json: a directory without run.json holds no run, and may be reused
        write_file(self._path / WORKFLOW_COPY, source)

    def create_run(self, info: RunInfo, workflow_source: bytes) -> None:
        self.write_workflow_copy(workflow_source)
        self.write_run_info(info)

    def read_workflow_copy(self) -> tuple[Path, bytes]:
        path = self._path / WORKFLOW_COPY
        data = read_file(path, "workflow copy")
        if data is None:
            raise RunStoreError(f"{path}: the run's workflow copy is missing")
        return path, data

    # -- the state ---------------------------------------------------------------------------
    def open_log(self, redactor: Redactor | None = None,
                 stamp: Callable[[], str] | None = None) -> None:
        if self._log is None:
            # The log's chain is checked from the snapshot's head on (the lines before it
            # were checked when it was written): opening costs the same late in a run.
            try:
                snapshot = self.read_snapshot()
            except RunStoreError as error:
                self._opened_snapshot, snapshot = error, None
            else:
                self._opened_snapshot = snapshot
            self._log = EventLog(self.events_path, redactor=redactor, stamp=stamp or utc_stamp,
                                 tail=self.tail_path,
                                 verified=snapshot[1] if snapshot is not None else None,
                                 collect=RECORD_EVENT)
            # what was there when the run was opened is what the store answers for
            self._watch = FileWatch(self._root, WATCHED)

    def check_untouched(self, node_id: str) -> None:
        """RunStateChanged naming the files that decide what runs next (run.json, the
        workflow copy, its model cache, the checkpoint, the event log and its tail) and
        that are no longer as this store last wrote them: something else — a process of the
        stage `node_id` — wrote it (SPEC §14). A few `lstat` calls, whatever the run's
        length (`delivery.store.guard`)."""
        changed = self._watch.changed() if self._watch is not None else []
        if self._log is not None:
            changed += self._log.changed_on_disk()
        if changed:
            raise RunStateChanged(node_id, changed)

    def _events(self) -> EventLog:
        if self._log is None:
            raise RunStoreError(f"{self.path}: the run is not open for writing")
        return self._log

    def append_event(self, event_type: str, *, defer: bool = False,
                     **fields: Any) -> dict[str, Any]:
        """One event; `defer`: written with the next one or the next flush (see
        `EventLog.append_json`) — for the events that end a stage, right before its record."""
        return self._events().append(event_type, defer=defer, **fields)

    def save_whole(self, state: RunState) -> None:
        state.mark_recorded()
        record = StageRecord(
            next_node=state.next_node, steps=state.steps, status=state.status,
            failure_reason=state.failure_reason, path_from=0, path_add=list(state.path),
            outcomes=dict(state.outcomes), attempts=dict(state.attempts),
            answers_used=dict(state.answers_used), context_set=dict(state.context),
            context_deleted=[], agent_state=dict(state.agent_state))
        self._append_record(record)
        self._snapshot(state)

    def save_stage(self, record: StageRecord, state: Callable[[], RunState]) -> None:
        self._append_record(record)
        if record.status.value != "running" or self._since_snapshot >= max(
                SNAPSHOT_BYTES, SNAPSHOT_RATIO * self._snapshot_size):
            self._snapshot(state())

    def _append_record(self, record: StageRecord) -> None:
        log = self._events()
        before = log.head.offset
        # written in one go with the events deferred before it, then flushed
        log.append_json(RECORD_EVENT, record.to_fields(), defer=True)
        log.sync()
        self._since_snapshot += log.head.offset - before

    def _snapshot(self, state: RunState) -> None:
        # the log must hold, durably, everything the snapshot says it covers
        self._events().flush_log()
        head = self._events().head
        body = _ENCODER.encode({**state.to_json(), "events": head.to_json()}).encode()
        data = seal(body)
        # Not made durable with a directory fsync: a power failure may bring back the
        # previous snapshot, and the records after it in the (synced) log still apply.
        write_replacing(self.checkpoint_path, data, sync_dir=False)
        if self._watch is not None:
            self._watch.wrote(self.checkpoint_path.name)
        self._since_snapshot, self._snapshot_size = 0, len(data)
        self._opened_snapshot = None  # load() reads the new one

    def read_snapshot(self) -> tuple[RunState, LogHead] | None:
        """checkpoint.json: the state and the log position it covers; None if there is no
        such file; RunStoreError if it is torn or malformed."""
        data = read_file(self.checkpoint_path, "checkpoint")
        if data is None:
            return None
        value, problem = unseal(data)
        if value is None:
            raise RunStoreError(f"{self.checkpoint_path}: corrupt checkpoint: {problem}")
        what = f"{self.checkpoint_path}: corrupt checkpoint"
        state = RunState.from_json(value, what)
        events = value.get("events")
        if not isinstance(events, dict):
            raise RunStoreError(f"{what}: 'events' should be {{count, head, offset}}, found "
                                f"{str(events)[:80]}")
        count, head, offset = events.get("count"), events.get("head"), events.get("offset")
        if (type(count) is not int or type(offset) is not int or not isinstance(head, str)
                or count < 0 or offset < 0):
            raise RunStoreError(f"{what}: 'events' should be {{count, head, offset}}, found "
                                f"{str(events)[:80]}")
        return state, LogHead(count, head, offset)

    def load(self) -> Loaded | None:
        recovered = ""
        opened, self._opened_snapshot = self._opened_snapshot, None
        try:
            if isinstance(opened, RunStoreError):
                raise opened
            snapshot = opened if opened is not None else self.read_snapshot()
        except RunStoreError as error:
            snapshot, recovered = None, f"{error}; rebuilt from the event log"
        if snapshot is None:
            rebuilt = self._rebuild_from_log()
            if rebuilt is None:
                if recovered:
                    raise RunStoreError(recovered.replace("; rebuilt from the event log",
                                                          "; the event log holds no state"))
                return None
            if not recovered:
                recovered = f"{self.checkpoint_path.name} is missing; rebuilt from the event log"
            return Loaded(rebuilt, recovered)
        state, head = snapshot
        for event in self._records_after(head):
            if event.get("type") == RECORD_EVENT:
                state.apply(StageRecord.from_fields(event, f"{self.events_path} line "
                                                           f"{event['seq']}"))
        return Loaded(state, recovered)

    def _records_after(self, since: LogHead) -> Iterator[dict[str, Any]]:
        """read_after(since) of the stage records: those the opening check of the log has
        parsed already (its lines are not read and hashed again), then any after it."""
        taken = self._log.take_collected(since) if self._log is not None else None
        if taken is None:
            yield from read_after(self.events_path, since, RECORD_EVENT)
            return
        events, end = taken
        yield from events
        yield from read_after(self.events_path, end, RECORD_EVENT)

    def _rebuild_from_log(self) -> RunState | None:
        state: RunState | None = None
        for event in self._records_after(LogHead()):
            if event.get("type") != RECORD_EVENT:
                continue
            record = StageRecord.from_fields(event, f"{self.events_path} line {event['seq']}")
            if state is None:
                info = self.read_run_info()
                state = RunState(run_id=info.run_id, next_node=None, context={},
                                 initial=dict(record.context_set))
            state.apply(record)
        return state

    def close(self) -> None:
        self._watch = None
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- stage folders and files --------------------------------------------------------------
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
        make_dir(node_dir, "stage directory")
        make_dir(attempt_dir, "stage directory")
        self._made[(node_id, attempt)] = attempt_dir
        return attempt_dir

    def _check_stage_names(self, node_id: str, attempt: int) -> None:
        if (not isinstance(node_id, str) or not _NODE_ID.fullmatch(node_id)
                or node_id.lower() in _RESERVED_NAMES):
            raise RunStoreError(
                f"{self.path}: node id {node_id!r} cannot name a stage directory: expected "
                "[A-Za-z_][A-Za-z0-9_]*, not a name the run uses itself such as 'artifacts'")
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise RunStoreError(
                f"{self.path}: attempt {attempt!r} for node {node_id!r}: expected an integer >= 1")

    def write_stage_file(self, node_id: str, attempt: int, name: str, text: StageText, *,
                         redactor: Redactor | None = None) -> Path:
        self.write_stage_text(node_id, attempt, name, text, redactor=redactor)
        return Path(self._made[(node_id, attempt)], name)

    def write_stage_text(self, node_id: str, attempt: int, name: str, text: StageText, *,
                         redactor: Redactor | None = None) -> None:
        """`write_stage_file` without the Path it returns: the engine writes three files a
        stage, and building a Path costs about as much as the write on a fast disk.

        `text` may be the parts the file is joined from (a transcript: headers, prompt,
        reply): masked as the whole text is, and, when masking changed nothing, written
        from each part's UTF-8 (`utf8`: a long reply is encoded once for this file and its
        artifact)."""
        path = os.path.join(self._made_stage_dir(node_id, attempt), self._stage_file_name(name))
        parts = (text,) if isinstance(text, str) else text
        if redactor is not None:
            joined = parts[0] if len(parts) == 1 else "".join(parts)
            masked = redactor.text(joined)
            if masked is not joined:
                parts = (masked,)
        # Evidence rewritten whole when an interrupted stage runs again: a plain write (no
        # temporary file, no fsync), never through a symlink.
        write_file(path, stage_bytes(parts))

    def read_stage_file(self, node_id: str, attempt: int, name: str) -> str | None:
        self._check_stage_names(node_id, attempt)
        folder = self.path / node_id / str(attempt)
        if folder.parent.is_symlink() or folder.is_symlink():
            raise RunStoreError(f"{folder}: stage directory leads outside the run (a symlink)")
        path = folder / self._stage_file_name(name)
        try:
            data = read_file(path, "stage file")
        except RunStoreError:
            if not folder.is_dir():
                return None
            raise
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise RunStoreError(f"{path}: cannot read: {error}") from None

    def _stage_file_name(self, name: str) -> str:
        if name not in STAGE_FILES:
            expected = ", ".join(STAGE_FILES)
            raise RunStoreError(f"{self.path}: {name!r} is not a stage file; expected {expected}")
        return name


RunDirectory = LocalRunStore


class LocalRunStores:
    """Run directories on the local disk (`World.stores`)."""

    def create(self, location: Path) -> LocalRunStore:
        return LocalRunStore.create_dir(location)

    def open(self, location: Path) -> LocalRunStore:
        return LocalRunStore.open_dir(location)

    def remote_target(self) -> RemoteTarget | None:
        return None  # kept on this machine only


@dataclass(frozen=True)
class Started:
    """What a run's `run_started` event (line 1 of its log) recorded of the files it
    started with: the SHA-256 of the workflow copy and of the model cache ("": none was
    written)."""

    workflow_sha256: str
    model_sha256: str


def started_with(run_dir: Path) -> Started | None:
    """The digests the run's first event recorded, for a resume to check the copy and the
    cache against (SPEC §14: run.json is no proof, a stage's process can rewrite it with
    the copy); None for a run whose log does not hold them (an older run). The first line
    is checked against the `prev` of the second: rewriting it means rewriting the whole
    chain and the checkpoint's head after it. RunStoreError when it was edited."""
    path = run_dir / "events.jsonl"
    lines = first_lines(path, 2)
    if len(lines) == 2 and not lines[1].endswith(b',"prev":"' + sha256(lines[0]).encode()
                                                + b'"}'):
        raise RunStoreError(f"{path}: line 1 (the run's start) does not match the hash line 2 "
                            "holds: the log was edited")
    try:
        first = json.loads(lines[0]) if lines else None
    except (ValueError, RecursionError):
        first = None
    if not isinstance(first, dict) or first.get("type") != "run_started":
        return None
    workflow, model = first.get("workflow_sha256"), first.get("model_sha256", "")
    if not isinstance(workflow, str) or not isinstance(model, str):
        return None
    return Started(workflow, model)


def verify_run(run_dir: Path) -> VerifyResult:
    """Check the run's whole event chain, and that nothing before the position its snapshot
    recorded was cut off. Without a snapshot, a log that holds stage records cannot show a
    cut-off end: that is reported as "cannot tell", not as intact."""
    run = LocalRunStore.open_dir(run_dir)
    try:
        snapshot = run.read_snapshot()
    except RunStoreError as error:
        return VerifyResult(False, 0, str(error), None)
    expected = snapshot[1] if snapshot is not None else None
    result = verify_events(run.events_path, expected)
    if result.ok:
        result = _verify_copy(run, result)
    if result.ok and snapshot is None and result.records:
        return VerifyResult(False, result.lines, (
            f"cannot tell: the chain of {result.lines} events is intact, but "
            f"{run.checkpoint_path.name} is missing, so lines cut off the end would not "
            "show; resuming the run rebuilds it from the log"), None, result.records)
    return result


def _verify_copy(run: LocalRunStore, result: VerifyResult) -> VerifyResult:
    """`result`, or a failure when the workflow copy is not the one the run started with
    (the digest its first event recorded)."""
    started = started_with(run.path)
    if started is None:
        return result
    try:
        path, source = run.read_workflow_copy()
    except RunStoreError as error:
        return VerifyResult(False, result.lines, str(error), None, result.records)
    if sha256(source) != started.workflow_sha256:
        return VerifyResult(False, result.lines, (
            f"{path}: not the workflow the run started with (its SHA-256 differs from the "
            "one line 1 of the log recorded): it was changed after the run started"),
            1, result.records)
    return result


__all__ = ["STAGE_FILES", "ZERO_HASH", "EventLog", "LocalRunStore", "LocalRunStores",
           "RunDirectory", "RunStoreError", "Started", "VerifyResult", "new_run_id",
           "started_with", "verify_events", "verify_run"]
