"""The run store seam: where a run's state, events, stage files and artifacts live.

The engine talks to a `RunStore` only; `delivery.store.runstore.LocalRunStore` (a run
directory, SPEC §11) is the first implementation, a git ref updated with compare-and-swap
(the GitHub Action, SPEC §13) is meant to be the second. The unit of saving is a stage:
`save_stage` gets the stage's changes (a `StageRecord`) and returns once they are durable,
so a crash after it never re-runs that stage; how the store keeps them (a log plus an
occasional snapshot, a commit per stage, ...) is its own business, as long as a stage's cost
does not grow with the number of stages before it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from delivery.redact import Redactor
from delivery.store.artifacts import ArtifactStore
from delivery.store.files import StageText
from delivery.store.records import RunInfo, RunState, RunStatus, StageRecord
from delivery.store.saved_worktree import SavedWorktree


class StoreCapability(StrEnum):
    """What a store can do beyond keeping a run; the engine asks, never tests the store's
    class. SPEC §13's event mode is a store with all four."""

    # `claim()` takes the run for this job before a resume runs it (another live claim
    # refuses it); `release()` gives it back with the run's last save
    CLAIM = "claim"
    # every save leaves this machine: the next job may resume on another one
    SAVE_REMOTELY = "save_remotely"
    # a wait or a gate nobody answers ends the job paused; an event or the schedule resumes
    PAUSE_ON_WAIT = "pause_on_wait"
    # `saved_worktrees()` gives the folders' worktrees as the last save had them, so a
    # fresh machine re-creates them before a stage needs them
    RECREATE_WORKTREES = "recreate_worktrees"


@dataclass(frozen=True)
class RemoteTarget:
    """Where a store that saves remotely pushes: what preflight checks before a run."""

    spec: str  # as given (`git:owner/name`)
    remote: str  # the URL git pushes to
    headers: tuple[str, ...] = ()  # git's extra HTTP headers (the token)


@dataclass
class Loaded:
    """What a store gives back to resume from."""

    state: RunState
    # what was wrong and repaired on the way ("" if nothing), e.g. a torn snapshot
    # rebuilt from the log; resume logs it as `checkpoint_recovered`
    recovered: str = ""


class RunStore(Protocol):
    """One run's store."""

    @property
    def location(self) -> str:
        """Where the run is, for messages and `RunOutcome.run_dir` (a path or a ref)."""
        ...

    @property
    def path(self) -> Path:
        """The local folder holding the run's stage files and artifacts."""
        ...

    @property
    def artifacts(self) -> ArtifactStore: ...

    @property
    def capabilities(self) -> frozenset[StoreCapability]:
        """What this store can do beyond keeping the run (`StoreCapability`)."""
        ...

    # -- what was run ---------------------------------------------------------------------
    def create_run(self, info: RunInfo, workflow_source: bytes) -> None:
        """A new run: its run info and its copy of the workflow; refuses an existing run."""
        ...

    def read_run_info(self) -> RunInfo: ...

    def write_run_info(self, info: RunInfo) -> None: ...

    def read_workflow_copy(self) -> tuple[Path, bytes]:
        """Where the run's copy of its workflow is, and its bytes."""
        ...

    # -- the run's state --------------------------------------------------------------------
    def open_log(self, redactor: Redactor | None = None,
             stamp: Callable[[], str] | None = None) -> None:
        """Take the run for writing (a second writer is refused with RunStoreError) and
        repair what a crash left (a torn last event, logged as `log_repaired`)."""
        ...

    def append_event(self, event_type: str, *, defer: bool = False,
                     **fields: Any) -> dict[str, Any]:
        """One event; with `defer` it may be written only with the next event or flush
        (the events that end a stage, just before its record)."""
        ...

    def save_whole(self, state: RunState) -> None:
        """The whole state, durable when this returns: a new run's start, or a state that
        `load` had to rebuild."""
        ...

    def save_stage(self, record: StageRecord, state: Callable[[], RunState]) -> None:
        """One stage's changes; durable when this returns. `state()` gives the whole state
        when the store wants a snapshot (it is not called otherwise)."""
        ...

    def load(self) -> Loaded | None:
        """The last saved state, None when nothing was saved (the run never started)."""
        ...

    def check_untouched(self, node_id: str) -> None:
        """After stage `node_id`: RunStateChanged naming a file that decides what runs
        next (run.json, the workflow copy, the checkpoint, the log, ...) if the store did
        not leave it as it is — the stage's processes wrote it (SPEC §14)."""
        ...

    def close(self) -> None: ...

    # -- with CLAIM and RECREATE_WORKTREES (a store without them has nothing to claim,
    #    give back or re-create: these do nothing there) ---------------------------------
    def claim(self) -> None:
        """Take the run for this job (CLAIM); refused when another job holds it."""
        ...

    def release(self, status: RunStatus) -> None:
        """Give the run back with its last save (CLAIM)."""
        ...

    def release_unchanged(self, message: str) -> None:
        """Give the run back as it was fetched, saying why (CLAIM)."""
        ...

    def saved_worktrees(self) -> Mapping[str, SavedWorktree]:
        """The folders' worktrees as the last save had them (RECREATE_WORKTREES)."""
        ...

    # -- evidence --------------------------------------------------------------------------
    def stage_dir(self, node_id: str, attempt: int) -> Path: ...

    def write_stage_file(self, node_id: str, attempt: int, name: str, text: StageText, *,
                         redactor: Redactor | None = None) -> Path: ...

    def write_stage_text(self, node_id: str, attempt: int, name: str, text: StageText, *,
                         redactor: Redactor | None = None) -> None:
        """`write_stage_file` without building the path it returns (the engine's calls);
        `text` whole or the parts it is joined from."""
        ...


class RunStores(Protocol):
    """Makes the store of a new run, or opens the store of an existing one."""

    def create(self, location: Path) -> RunStore: ...

    def open(self, location: Path) -> RunStore: ...

    def remote_target(self) -> RemoteTarget | None:
        """Where runs are pushed when they are kept off this machine (None: they are not)."""
        ...
