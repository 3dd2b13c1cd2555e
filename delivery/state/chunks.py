"""The chunks of a fanned-out foreach stage on the state remote (SPEC §13 "Fan-out across
runners"): one ref per chunk, `refs/delivery/chunks/<run_id>/<fan_out>/<K>` — beside the
run's ref, never under it (a ref cannot also be a directory of refs) — so that K workers
claim and save at once without contending on one ref. `<fan_out>` names the fan-out
(`<n>-<node>`, the run's n-th): a run that fans out twice (two foreach stages in a row, or
one stage visited again) never reads the results of an earlier fan-out as its own.

A chunk's ref holds its claim (`claim.json`, the rules of a run's claim: `delivery.state.
claims`) and, as its folders end, each folder's result: `results/<folder>.json` (the keys
the folder's run wrote, `<f>.outcome` included) and the folder's worktree snapshot
(`.worktrees/<folder>.json|.patch`, as a run's save keeps them). Every update is a commit
on the previous one, pushed by compare-and-swap: a worker that loses it raises
`Superseded` having changed nothing.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delivery.errors import Superseded
from delivery.git.restore import PATCH_LIMIT, WORKTREES_DIR, SavedWorktree, saved_worktrees
from delivery.git.runref import LARGE_ARTIFACT
from delivery.state.claims import Claim, ended, parse_claim
from delivery.state.remote import CLAIM_FILE, RemoteState

CHUNKS_PREFIX = "refs/delivery/chunks/"
RESULTS_DIR = "results"


def chunk_ref(run_id: str, fan_out: str, number: int) -> str:
    return f"{CHUNKS_PREFIX}{run_id}/{fan_out}/{number}"


@dataclass
class ChunkSession:
    """One job's view of one chunk's ref: `fetch` reads it, `claim` takes it, `record`
    adds a folder's result."""

    state: RemoteState
    run_id: str
    fan_out: str  # which of the run's fan-outs (`<n>-<node>`)
    number: int
    job: str
    head: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)  # results and worktrees
    held: Claim | None = None
    claimed: bool = False
    _claim_at: float = 0.0

    @property
    def ref(self) -> str:
        return chunk_ref(self.run_id, self.fan_out, self.number)

    def fetch(self) -> ChunkSession:
        remote = self.state.ref
        self.head = remote.fetch_ref(self.ref)
        self.files, self.held = {}, None
        if self.head is None:
            return self
        for name in remote.file_names(self.head):
            limit = PATCH_LIMIT if name.endswith(".patch") else LARGE_ARTIFACT
            data = remote.read_file(self.head, name, limit=limit)
            if data is None:
                continue
            if name == CLAIM_FILE:
                self.held = parse_claim(data, run_id=self.run_id, now=self.state.now())
            elif name.startswith((f"{RESULTS_DIR}/", f"{WORKTREES_DIR}/")):
                self.files[name] = data
        return self

    def results(self) -> dict[str, dict[str, Any]]:
        """folder -> the keys its run wrote, for the folders whose result is saved."""
        found: dict[str, dict[str, Any]] = {}
        for name, data in self.files.items():
            if name.startswith(f"{RESULTS_DIR}/") and name.endswith(".json"):
                try:
                    keys = json.loads(data)
                except ValueError:
                    continue  # not what a worker writes: the folder runs again
                if isinstance(keys, dict):
                    found[name[len(RESULTS_DIR) + 1:-len(".json")]] = keys
        return found

    def worktrees(self, folders: list[str]) -> dict[str, SavedWorktree]:
        return saved_worktrees(self.files, folders)

    def held_by_another(self, stale_after: float) -> bool:
        """Another job holds the chunk and may still be running it: its claim is younger
        than `stale_after` and GitHub does not say its Actions run has ended."""
        held = self.held
        if held is None or held.job == self.job:
            return False
        return self.state.now() - held.at < stale_after and \
            not ended(held, self.job, self.state.actions_runs)

    def claim(self, *, stale_after: float, take_over: bool = False) -> None:
        """Take the chunk by compare-and-swap; Superseded when a live job holds it (the
        rules of a run's claim) or another job claimed it first."""
        held = self.held
        if held is not None and not take_over and self.held_by_another(stale_after):
            age = self.state.now() - held.at
            raise Superseded(self.run_id, f"chunk {self.number} was claimed by job "
                             f"{held.job} {max(age, 0):.0f}s ago and is still within "
                             "the longest stage timeout (pass --take-over if that job "
                             "is dead)")
        self._claim_at = self.state.now()
        taken = f" (taking over from {held.job})" if held and held.job != self.job else ""
        self._push(f"chunk {self.number} claimed by {self.job}{taken}",
                   lost=f"another job claimed chunk {self.number} first")
        self.claimed = True

    def record(self, folder: str, keys: Mapping[str, Any],
               worktree: Mapping[str, bytes]) -> None:
        """A folder's result on the chunk's ref (this job holds the chunk)."""
        self.files[f"{RESULTS_DIR}/{folder}.json"] = json.dumps(dict(keys)).encode()
        self.files.update(worktree)
        self._push(f"chunk {self.number}: {folder} done",
                   lost=f"another job took chunk {self.number} over")

    def _push(self, message: str, *, lost: str) -> None:
        remote = self.state.ref
        files = {CLAIM_FILE: Claim.here(self.job, self._claim_at).to_bytes(), **self.files}
        with tempfile.TemporaryDirectory(prefix="delivery-chunk-") as empty:
            sha = remote.commit(Path(empty), self.head, message, files)
        if not remote.push_ref(self.ref, sha, self.head):
            raise Superseded(self.run_id, lost)
        self.head = sha


def chunk_sessions(state: RemoteState, run_id: str, job: str
                   ) -> Callable[[str, int], ChunkSession]:
    """Opens the session of chunk K of one of the run's fan-outs."""
    return lambda fan_out, number: ChunkSession(state, run_id, fan_out, number, job)
