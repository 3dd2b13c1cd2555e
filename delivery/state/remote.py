"""Runs whose state lives in a git ref (`--state git:<owner>/<name>` or a bare repository
path), SPEC §13: event mode.

    state = RemoteState.open("git:o/state", cache, environ)
    session = state.session(run_id, job="actions-123")
    world = World(stores=StateRunStores(session))   # start_run / resume_run as usual

`StateRunStores` is the run store seam's second implementation (`delivery.store.base`): a
`StateRunStore` wraps the local run directory, delegates everything to it, and after each
durable save (`save_whole`, `save_stage`) commits the directory and pushes it by
compare-and-swap — a paused or ended run's save drops the claim. Opening a run for a resume
first fetches it from its ref into the local directory and claims it there.

Every save is a commit whose parent is the previous one; the ref moves by compare-and-swap
only, so a job whose save or claim loses raises `Superseded` having changed nothing. A claim
is a commit holding `claim.json` (job id, time); a claim younger than `stale_after` seconds
belongs to a live job and supersedes a newcomer, unless it takes over (`--take-over`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delivery.errors import (
    GitError,
    RunRefused,
    StateSaveFailed,
    Superseded,
    WorkflowInvalid,
    WorkflowSyntaxError,
)
from delivery.git.restore import WORKTREES_DIR, SavedWorktree, saved_worktrees, snapshot_files
from delivery.git.runref import LARGE_ARTIFACT, RunRef
from delivery.lang.model import NodeType, parse_duration
from delivery.redact import Redactor
from delivery.state.claims import (
    SMALL_FILE_LIMIT,
    ActionsRuns,
    Claim,
    Oversized,
    parse_claim,
    parse_status,
)
from delivery.state.claims import ended as claim_ended
from delivery.state.status_note import RunSummary, StatusNote, listed, summary_status
from delivery.store.artifacts import ArtifactStore
from delivery.store.base import Loaded, RemoteTarget, StoreCapability
from delivery.store.files import StageText
from delivery.store.records import ENDED, RunInfo, RunState, RunStatus, StageRecord
from delivery.store.runstore import WORKFLOW_COPY, LocalRunStore
from delivery.validation.loader import load_workflow

CLAIM_FILE = "claim.json"
# the run's status at each save, beside the run directory on the ref: `delivery runs`
# reads it without replaying the run's log
STATUS_FILE = "status.json"
# events.tail is this machine's flush mirror of the log's end (1 MiB, rewritten in place
# at every stage): the log itself is whole on disk when a save reads it, and a fetch
# makes a new mirror; saving it cost a 1 MiB blob hashed and pushed per stage
_NOT_SAVED = (CLAIM_FILE, STATUS_FILE, WORKTREES_DIR + "/", "events.tail")
DEFAULT_SERVER = "https://github.com"
_OWNER_NAME = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def state_remote(spec: str, environ: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """`git:<owner>/<name>` -> (its HTTPS URL, the token header); a path -> (path, ())."""
    if spec.startswith("git:"):
        name = spec[4:]
        if not _OWNER_NAME.fullmatch(name):
            raise RunRefused(f"--state {spec}", "does not name a repository",
                             "write --state git:OWNER/NAME or a path to a bare repository")
        server = (environ.get("GITHUB_SERVER_URL") or DEFAULT_SERVER).rstrip("/")
        token = environ.get("GITHUB_TOKEN", "")
        if not token:
            raise RunRefused(f"--state {spec}", "needs a token to read and push the state ref",
                             "set GITHUB_TOKEN (in the Action: the github-token input)")
        pair = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        return f"{server}/{name}.git", (f"Authorization: Basic {pair}",)
    path = Path(spec).expanduser()
    if not (path / "HEAD").is_file() and not (path / ".git").exists():
        raise RunRefused(f"--state {spec}", "is neither git:OWNER/NAME nor a git repository",
                         "create a bare repository (git init --bare) or name one on GitHub")
    return str(path.resolve()), ()


@dataclass
class RemoteState:
    ref: RunRef
    spec: str
    # wall-clock seconds (claims are compared across machines)
    now: Callable[[], float] = time.time
    # GitHub, asked whether the Actions run of a live-looking claim has ended
    actions_runs: ActionsRuns | None = None

    @classmethod
    def open(cls, spec: str, cache: Path, environ: Mapping[str, str],
             now: Callable[[], float] = time.time) -> RemoteState:
        remote, headers = state_remote(spec, environ)
        digest = hashlib.sha256(remote.encode()).hexdigest()[:12]
        scratch = cache / "state" / f"{digest}.git"
        actions_runs = None
        if spec.startswith("git:") and environ.get("GITHUB_TOKEN"):
            api = environ.get("GITHUB_API_URL") or "https://api.github.com"
            actions_runs = ActionsRuns(api, environ["GITHUB_TOKEN"])
        return cls(RunRef(remote, scratch, headers, environ), spec, now, actions_runs)

    def session(self, run_id: str, job: str) -> StateSession:
        return StateSession(self, run_id, job)

    def runs(self) -> list[RunSummary]:
        """Every run on the state remote with the status of its last save."""
        heads = self.ref.fetch_all()
        found = []
        for run_id, sha in sorted(heads.items()):
            checkpoint = (parse_status(self._small(sha, STATUS_FILE))
                          or parse_status(self._small(sha, "checkpoint.json"),
                                          limit=LARGE_ARTIFACT))
            claim = parse_status(self._small(sha, CLAIM_FILE))
            context = checkpoint.get("context")
            ticket = context.get("ticket") if isinstance(context, dict) else ""
            found.append(RunSummary(run_id, summary_status(checkpoint.get("status")),
                                    _text(checkpoint.get("next_node")), sha,
                                    _text(claim.get("job")),
                                    ticket if isinstance(ticket, str) else "",
                                    **listed(checkpoint)))
        return found

    def _small(self, sha: str, name: str) -> bytes | None:
        """A small file of a saved run, or None when it is missing or too large: one
        tampered run is listed as `unknown`, it does not stop the listing."""
        try:
            return self.ref.read_file(sha, name, limit=LARGE_ARTIFACT)
        except GitError:
            return None


def _text(value: Any, limit: int = 200) -> str:
    """A label read from the ref: a short string, else nothing."""
    return value[:limit] if isinstance(value, str) else ""


@dataclass
class StateSession:
    """One job's hold on one run's ref: `fetch` writes the saved run directory locally
    (claiming nothing), `take` claims it once every check that could refuse the resume
    has passed (SPEC §13: a refused resume leaves no claim)."""

    state: RemoteState
    run_id: str
    job: str
    head: str | None = None
    claim_at: float = 0.0
    saves: int = field(default=0)
    claimed: bool = False
    status: dict[str, Any] = field(default_factory=dict)  # written as STATUS_FILE
    # the folders' worktrees as the ref last saved them, and as this job saves them now
    saved_files: dict[str, bytes] = field(default_factory=dict)
    worktree_files: dict[str, bytes] = field(default_factory=dict)
    _held: Claim | None = None
    _fetched: Path | None = None

    @property
    def ref(self) -> RunRef:
        return self.state.ref

    def _claim_file(self) -> dict[str, bytes]:
        return {CLAIM_FILE: Claim.here(self.job, self.claim_at).to_bytes(),
                **self._status_file()}

    def _status_file(self) -> dict[str, bytes]:
        status = {STATUS_FILE: json.dumps(self.status).encode()} if self.status else {}
        # a folder snapshotted now replaces its saved snapshot whole: a patch it no longer
        # has (its change was published since) must not stay beside the new base
        taken = {name.rpartition(".")[0] for name in self.worktree_files}
        kept = {name: data for name, data in self.saved_files.items()
                if name.rpartition(".")[0] not in taken}
        return {**kept, **self.worktree_files, **status}

    def create(self, run_dir: Path) -> None:
        """A new run: its first save, claimed by this job; the ref must not exist yet."""
        self.claim_at = self.state.now()
        sha = self.ref.commit(run_dir, None, f"run {self.run_id} started by {self.job}",
                              self._claim_file(), skip=_NOT_SAVED)
        if not self.ref.push(self.run_id, sha, None):
            raise Superseded(self.run_id, "a run with this id exists on the state ref")
        self.head = sha
        self.claimed = True

    def claim(self, run_dir: Path, *, stale_after: Callable[[Path], float],
              take_over: bool = False) -> None:
        """`fetch` then `take`: the run written to `run_dir` and claimed."""
        self.fetch(run_dir, take_over=take_over)
        self.take(stale_after=stale_after, take_over=take_over)

    def fetch(self, run_dir: Path, *, take_over: bool = False) -> None:
        """Fetch the run and write its saved directory to `run_dir`; RunRefused when it is
        not on the ref or its files are not what a job writes. Nothing is claimed."""
        heads = self.ref.fetch([self.run_id])
        head = heads.get(self.run_id)
        if head is None:
            raise RunRefused(f"run {self.run_id}", f"is not on the state repository "
                             f"{self.state.spec}", "check the run id with delivery runs --state")
        self.ref.extract(head, run_dir)
        held = _read_small(run_dir / CLAIM_FILE)
        saved = parse_status(_read_small(run_dir / STATUS_FILE)) or parse_status(
            _read_small(run_dir / "checkpoint.json", limit=LARGE_ARTIFACT),
            limit=LARGE_ARTIFACT)
        self.saved_files = _take_worktree_files(run_dir)
        for name in (CLAIM_FILE, STATUS_FILE):
            (run_dir / name).unlink(missing_ok=True)
        self.head = head
        self._fetched = run_dir
        context = saved.get("context")
        ticket = context.get("ticket") if isinstance(context, dict) else ""
        steps = saved.get("steps")
        self.status = {"status": _text(saved.get("status")),
                       "next_node": _text(saved.get("next_node")),
                       "steps": steps if isinstance(steps, int) else 0,
                       "context": {"ticket": _text(ticket)}, **listed(saved)}
        # a claim that is not a claim is refused, unless this job takes the run over
        self._held = None if take_over else parse_claim(held, run_id=self.run_id,
                                                        now=self.state.now())

    @property
    def ended(self) -> bool:
        """The fetched run had succeeded or failed: nothing to claim or run."""
        return self.status.get("status") in ENDED

    def take(self, *, stale_after: Callable[[Path], float], take_over: bool = False) -> None:
        """Claim the fetched run by compare-and-swap; Superseded when a live job holds it
        or another claim won. An ended run is left as it is."""
        run_dir, head = self._fetched, self.head
        if run_dir is None or head is None:
            raise RuntimeError("take() before fetch()")
        if self.ended:
            return  # an ended run is reported as it is; nothing to claim or run
        held = self._held
        if held is not None and not take_over:
            age = self.state.now() - held.at
            # the API only when the age does not settle it already
            if age < stale_after(run_dir) and not claim_ended(held, self.job,
                                                             self.state.actions_runs):
                raise Superseded(self.run_id, f"job {held.job} claimed it "
                                 f"{max(age, 0):.0f}s ago and is still within the longest "
                                 "stage timeout (pass --take-over if that job is dead)")
        self.claim_at = self.state.now()
        taken = f" (taking over from {held.job})" if held else ""
        sha = self.ref.commit(run_dir, head, f"claimed by {self.job}{taken}",
                              self._claim_file(), skip=_NOT_SAVED)
        if not self.ref.push(self.run_id, sha, head):
            raise Superseded(self.run_id, "another job claimed it first")
        self.head = sha
        self.claimed = True

    def save(self, run_dir: Path, message: str, settle: Iterable[str] = ()) -> None:
        """One stage's state, on top of this job's last save; Superseded when another job
        moved the ref (it took the run over). `settle`: the folders of stages that are
        over (never listed again by later saves)."""
        self._push(run_dir, message, self._claim_file(), settle)

    def release(self, run_dir: Path, message: str, settle: Iterable[str] = ()) -> None:
        """The last save of this job (the run paused or ended): the claim is dropped."""
        self._push(run_dir, message, self._status_file(), settle)
        self.claimed = False

    def _push(self, run_dir: Path, message: str, extra: Mapping[str, bytes],
              settle: Iterable[str] = ()) -> None:
        sha = self.ref.commit(run_dir, self.head, message, extra, skip=_NOT_SAVED,
                              settle=settle)
        if not self.ref.push(self.run_id, sha, self.head):
            raise Superseded(self.run_id, "another job took the run over")
        self.head = sha
        self.saves += 1


def _read_small(path: Path, limit: int = SMALL_FILE_LIMIT) -> bytes | Oversized | None:
    """A file of the fetched ref, or None; a file larger than `limit` is never loaded: it
    reads as `Oversized` (a claim refuses it, a status ignores it)."""
    try:
        size = path.stat().st_size
        if size > limit:
            return Oversized(size, limit)
        return path.read_bytes()
    except OSError:
        return None


def _take_worktree_files(run_dir: Path) -> dict[str, bytes]:
    """The `.worktrees/` snapshots of the fetched ref, moved out of the run directory
    (they live beside it on the ref, like the claim)."""
    folder = run_dir / WORKTREES_DIR
    files: dict[str, bytes] = {}
    if folder.is_dir() and not folder.is_symlink():
        for path in sorted(folder.iterdir()):
            if path.is_file() and not path.is_symlink():
                files[f"{WORKTREES_DIR}/{path.name}"] = path.read_bytes()
        shutil.rmtree(folder)
    return files


def _earlier_stage_dirs(run_dir: Path) -> set[str]:
    """`<node>/<attempt>` folders of a fetched run directory: stages of earlier jobs,
    which nothing writes again (a save settles them: they are not listed again)."""
    found: set[str] = set()
    for node in run_dir.iterdir():
        if node.name in ("artifacts", WORKTREES_DIR) or node.is_symlink() \
                or not node.is_dir():
            continue
        found.update(f"{node.name}/{attempt.name}" for attempt in node.iterdir()
                     if attempt.name.isdigit() and attempt.is_dir()
                     and not attempt.is_symlink())
    return found


def job_id(environ: Mapping[str, str]) -> str:
    """This job's name in claims: the Actions run and attempt, else host and pid."""
    if environ.get("GITHUB_RUN_ID"):
        return (f"actions:{environ.get('GITHUB_REPOSITORY', '')}/{environ['GITHUB_RUN_ID']}"
                f"/{environ.get('GITHUB_RUN_ATTEMPT', '1')}")
    return f"{os.uname().nodename}:{os.getpid()}"


def stage_timeout_limit(run_dir: Path) -> float:
    """The longest `timeout` of the run's stages other than waits (default an hour): a
    claim older than that belongs to a job that was killed."""
    try:
        workflow = load_workflow(run_dir / WORKFLOW_COPY)
    except (WorkflowSyntaxError, WorkflowInvalid, OSError):
        return 3600.0
    limits = [parse_duration(node.attr("timeout")) or 0.0 for node in workflow.nodes.values()
              if node.type is not NodeType.WAIT and node.attr("timeout")]
    return max(limits, default=3600.0)


def rebased(info: RunInfo, workspace: Path) -> RunInfo:
    """run.json's paths moved from the workspace the run was saved in to this one (a
    resume in another job): the folders under it, and the workspace itself."""
    old = Path(info.workspace or workspace)
    folders = {}
    for name, where in info.folders.items():
        path = Path(where)
        folders[name] = str(workspace / path.relative_to(old)) if path.is_relative_to(old) \
            else str(path)
    return dataclasses.replace(info, workspace=str(workspace), folders=folders,
                               git_cache="")  # this machine's cache


# seconds between two pushes of a stage still running (a foreach stage's folders)
MID_STAGE_PUSH_SPACING = 30.0


class StateRunStore:
    """A run directory whose every durable save also lands on the run's state ref (a
    `RunStore`): it delegates to the local store, then commits and pushes the directory
    by compare-and-swap. A save that loses the race raises Superseded; one that cannot
    reach the remote raises StateSaveFailed (the run fails and stays resumable)."""

    def __init__(self, local: LocalRunStore, session: StateSession,
                 take_over: bool = False) -> None:
        self.local = local
        self.session = session
        self.take_over = take_over
        self._folders: dict[str, Path] | None = None
        # the stages' folders handed out since the last save: those stages are over at
        # the next save (saves happen between stages of the main line, after any join)
        self._stage_dirs: set[str] = set()
        if session.head is not None:  # a fetched run: the stages of earlier jobs are over
            self._stage_dirs = _earlier_stage_dirs(local.path)
        # the ticket, for `delivery runs` (a resume finds it in the status it fetched)
        saved = session.status.get("context")
        ticket = saved.get("ticket") if isinstance(saved, dict) else ""
        self._ticket = ticket if isinstance(ticket, str) else ""
        # masks secrets in the unpublished work saved on the ref (SPEC §14); the run's own
        # redactor once it opens the log
        self._redactor = Redactor.from_environment(os.environ)
        # (next node, monotonic time) of the last save pushed to the ref
        self._last_push: tuple[str | None, float] = (None, 0.0)
        # why it paused and what it waits for, for `delivery runs` (status_note)
        self._note = StatusNote()
        self._note_folders: list[str] | None = None

    # -- delegated ----------------------------------------------------------------------
    @property
    def location(self) -> str:
        return self.local.location

    @property
    def path(self) -> Path:
        return self.local.path

    @property
    def artifacts(self) -> ArtifactStore:
        return self.local.artifacts

    def create_run(self, info: RunInfo, workflow_source: bytes) -> None:
        self.local.create_run(info, workflow_source)

    def read_run_info(self) -> RunInfo:
        return self.local.read_run_info()

    def write_run_info(self, info: RunInfo) -> None:
        self.local.write_run_info(info)

    def read_workflow_copy(self) -> tuple[Path, bytes]:
        return self.local.read_workflow_copy()

    def open_log(self, redactor: Redactor | None = None,
                 stamp: Callable[[], str] | None = None) -> None:
        self._redactor = redactor or self._redactor
        self.local.open_log(redactor, stamp)

    def append_event(self, event_type: str, *, defer: bool = False,
                     **fields: Any) -> dict[str, Any]:
        return self.local.append_event(event_type, defer=defer, **fields)

    def load(self) -> Loaded | None:
        loaded = self.local.load()
        if loaded is not None:
            self._note.seed(loaded.state.context)
        return loaded

    def check_untouched(self, node_id: str) -> None:
        self.local.check_untouched(node_id)

    def close(self) -> None:
        self.local.close()

    def stage_dir(self, node_id: str, attempt: int) -> Path:
        self._stage_dirs.add(f"{node_id}/{attempt}")
        return self.local.stage_dir(node_id, attempt)

    def write_stage_file(self, node_id: str, attempt: int, name: str, text: StageText, *,
                         redactor: Redactor | None = None) -> Path:
        self._stage_dirs.add(f"{node_id}/{attempt}")
        return self.local.write_stage_file(node_id, attempt, name, text, redactor=redactor)

    def write_stage_text(self, node_id: str, attempt: int, name: str, text: StageText, *,
                         redactor: Redactor | None = None) -> None:
        self._stage_dirs.add(f"{node_id}/{attempt}")
        self.local.write_stage_text(node_id, attempt, name, text, redactor=redactor)

    def _settled(self) -> list[str]:
        settled, self._stage_dirs = sorted(self._stage_dirs), set()
        return settled

    # -- saves: local first, then the ref ------------------------------------------------
    def save_whole(self, state: RunState) -> None:
        self.local.save_whole(state)
        self._note.seed(state.context)
        ticket = state.context.get("ticket")
        self._ticket = ticket if isinstance(ticket, str) else self._ticket
        if self.session.head is None:  # a new run: its first save creates the ref
            self.session.run_id = state.run_id
            self._remember(state.status, state.next_node, state.steps)
            self._guarded(state.run_id, self._snapshot_worktrees)
            self._guarded(state.run_id, lambda: self.session.create(self.path))
            return
        self._push(state.run_id, state.status, state.next_node, state.steps,
                   state.failure_reason)

    def save_stage(self, record: StageRecord, state: Callable[[], RunState]) -> None:
        self.local.save_stage(record, state)
        self._note.update(record.context_set, record.context_deleted)
        now = time.monotonic()
        pushed_next, pushed_at = self._last_push
        if record.status is RunStatus.RUNNING and record.next_node == pushed_next:
            # a foreach stage saving a folder that ended (SPEC §8.1): durable here at once,
            # on the ref at most every MID_STAGE_PUSH_SPACING s — a push a folder would
            # snapshot every worktree 200 times a stage; a job lost between two pushes runs
            # those folders again. Running folders still write their stage files: settled
            # at the stage's own save.
            if now - pushed_at < MID_STAGE_PUSH_SPACING:
                return
            self._push(self.session.run_id, record.status, record.next_node, record.steps,
                       record.failure_reason, settle_now=False)
        else:
            self._push(self.session.run_id, record.status, record.next_node, record.steps,
                       record.failure_reason)
        self._last_push = (record.next_node, now)

    @property
    def capabilities(self) -> frozenset[StoreCapability]:
        return frozenset(StoreCapability)  # SPEC §13's event mode: every capability

    def claim(self) -> None:
        """Claim the fetched run (after every check that could refuse the resume)."""
        self.session.take(stale_after=stage_timeout_limit, take_over=self.take_over)

    def saved_worktrees(self) -> dict[str, SavedWorktree]:
        """The folders' worktrees as the ref saved them (to re-create them here)."""
        return saved_worktrees(self.session.saved_files, list(self.folders()))

    def release_unchanged(self, message: str) -> None:
        """Give the claim back without running anything (the resume stopped early)."""
        if self.session.claimed:
            self._guarded(self.session.run_id,
                          lambda: self.session.release(self.path, message))

    def folders(self) -> dict[str, Path]:
        """The folders the run works in inside its workspace (where `worktree_add` puts
        them); a folder given as a local path elsewhere is a person's, never saved."""
        if self._folders is None:
            info = self.local.read_run_info()
            workspace = Path(info.workspace).resolve() if info.workspace else None
            self._folders = {name: Path(where) for name, where in info.folders.items()
                             if workspace is not None
                             and Path(where).resolve().is_relative_to(workspace)}
        return self._folders

    def _snapshot_worktrees(self) -> None:
        """What the folders' worktrees hold that the remote does not (SPEC §13: saved with
        the run's state, never pushed to the PR branch). Only linked worktrees (a `.git`
        file, as `worktree_add` makes them) are saved: never a person's own clone."""
        self.session.worktree_files = snapshot_files(
            {name: path for name, path in self.folders().items()
             if (path / ".git").is_file()}, self._redactor)



    def release(self, status: RunStatus) -> None:
        """The job lets go of a run it claimed but did not run (it had ended)."""
        if self.session.claimed:
            self.local.close()  # the log whole on disk before it is committed
            self._guarded(self.session.run_id,
                          lambda: self.session.release(self.path, f"{status.value}: released"))

    def _remember(self, status: RunStatus, next_node: str | None, steps: int) -> None:
        if self._note_folders is None:
            self._note_folders = list(self.local.read_run_info().folders)
        folders = self._note_folders
        self.session.status = {"status": status.value, "next_node": next_node or "",
                               "steps": steps, "context": {"ticket": self._ticket},
                               **self._note.fields(status.value, folders)}

    def _push(self, run_id: str, status: RunStatus, next_node: str | None, steps: int,
              failure_reason: str, *, settle_now: bool = True) -> None:
        self._remember(status, next_node, steps)
        self._guarded(run_id, self._snapshot_worktrees)
        settle = self._settled() if settle_now else []
        if status is RunStatus.RUNNING:
            self._guarded(run_id, lambda: self.session.save(
                self.path, f"step {steps}: next {next_node}", settle))
        else:  # paused or ended: this job lets go of the run
            message = f"{status.value} at step {steps}" + (
                f": {failure_reason}" if failure_reason else "")
            self._guarded(run_id, lambda: self.session.release(self.path, message, settle))

    @staticmethod
    def _guarded(run_id: str, push: Callable[[], None]) -> None:
        try:
            push()
        except GitError as err:  # a fault during the run, not a refusal (SPEC §12)
            raise StateSaveFailed(run_id, str(err)) from None


@dataclass
class StateRunStores:
    """`RunStores` for `--state`: runs kept in a local directory and on their state ref.
    `open` fetches the run and moves its paths to `workspace`, this machine's workspace;
    the resume claims it later (`take_over`: even from a live-looking claim)."""

    session: StateSession
    take_over: bool = False
    workspace: Path | None = None

    def create(self, location: Path) -> StateRunStore:
        return StateRunStore(LocalRunStore.create_dir(location), self.session)

    def remote_target(self) -> RemoteTarget | None:
        state = self.session.state
        return RemoteTarget(state.spec, state.ref.remote, tuple(state.ref.headers))

    def open(self, location: Path) -> StateRunStore:
        """The run fetched into `location`, not claimed yet: `resume_run` claims it
        (`StateRunStore.claim`) once it has checked everything that can refuse it."""
        self.session.fetch(location, take_over=self.take_over)
        local = LocalRunStore.open_dir(location)
        if self.workspace is not None:
            local.write_run_info(rebased(local.read_run_info(), self.workspace.resolve()))
        return StateRunStore(local, self.session, self.take_over)


