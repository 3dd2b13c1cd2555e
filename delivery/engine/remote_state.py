"""Runs whose state lives in a git ref (`--state git:<owner>/<name>` or a bare repository
path), SPEC §13: event mode.

    state = RemoteState.open("git:o/state", cache, environ)
    session = state.session(run_id, job="actions-123")
    session.claim(run_dir)            # fetch the ref, write the run directory, claim it
    ...                               # every checkpoint: session.save(run_dir, ...)
    session.release(run_dir, status)  # paused or finished: the claim is dropped

Every save is a commit whose parent is the previous one; the ref moves by compare-and-swap
only, so a job whose save or claim loses raises `Superseded` having changed nothing. A claim
is a commit holding `claim.json` (job id, time); a claim younger than `stale_after` seconds
belongs to a live job and supersedes a newcomer, unless it takes over (`--take-over`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delivery.errors import RunRefused, Superseded
from delivery.git.runref import RunRef

CLAIM_FILE = "claim.json"
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


@dataclass(frozen=True)
class Claim:
    job: str
    at: float

    def to_bytes(self) -> bytes:
        return json.dumps({"job": self.job, "at": self.at}).encode()


@dataclass
class RunSummary:
    run_id: str
    status: str
    next_node: str
    sha: str
    claimed_by: str = ""
    ticket: str = ""


@dataclass
class RemoteState:
    ref: RunRef
    spec: str
    # wall-clock seconds (claims are compared across machines)
    now: Callable[[], float] = time.time

    @classmethod
    def open(cls, spec: str, cache: Path, environ: Mapping[str, str],
             now: Callable[[], float] = time.time) -> RemoteState:
        remote, headers = state_remote(spec, environ)
        digest = hashlib.sha256(remote.encode()).hexdigest()[:12]
        scratch = cache / "state" / f"{digest}.git"
        return cls(RunRef(remote, scratch, headers, environ), spec, now)

    def session(self, run_id: str, job: str) -> StateSession:
        return StateSession(self, run_id, job)

    def runs(self) -> list[RunSummary]:
        """Every run on the state remote with the status of its last save."""
        heads = self.ref.fetch_all()
        listed = []
        for run_id, sha in sorted(heads.items()):
            checkpoint = _json(self.ref.read_file(sha, "checkpoint.json"))
            claim = _json(self.ref.read_file(sha, CLAIM_FILE))
            context = checkpoint.get("context")
            ticket = context.get("ticket") if isinstance(context, dict) else ""
            listed.append(RunSummary(run_id, str(checkpoint.get("status") or "unknown"),
                                     str(checkpoint.get("next_node") or ""), sha,
                                     str(claim.get("job") or ""),
                                     ticket if isinstance(ticket, str) else ""))
        return listed


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _json(data: bytes | None) -> dict[str, Any]:
    if not data:
        return {}
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class StateSession:
    """One job's hold on one run's ref."""

    state: RemoteState
    run_id: str
    job: str
    head: str | None = None
    claim_at: float = 0.0
    saves: int = field(default=0)
    claimed: bool = False

    @property
    def ref(self) -> RunRef:
        return self.state.ref

    def _claim_file(self) -> dict[str, bytes]:
        return {CLAIM_FILE: Claim(self.job, self.claim_at).to_bytes()}

    def create(self, run_dir: Path) -> None:
        """A new run: its first save, claimed by this job; the ref must not exist yet."""
        self.claim_at = self.state.now()
        sha = self.ref.commit(run_dir, None, f"run {self.run_id} started by {self.job}",
                              self._claim_file(), skip=(CLAIM_FILE,))
        if not self.ref.push(self.run_id, sha, None):
            raise Superseded(self.run_id, "a run with this id exists on the state ref")
        self.head = sha
        self.claimed = True

    def claim(self, run_dir: Path, *, stale_after: Callable[[Path], float],
              take_over: bool = False) -> None:
        """Fetch the run, write its saved directory to `run_dir`, and claim it by
        compare-and-swap; Superseded when a live job holds it or another claim won."""
        heads = self.ref.fetch([self.run_id])
        head = heads.get(self.run_id)
        if head is None:
            raise RunRefused(f"run {self.run_id}", f"is not on the state repository "
                             f"{self.state.spec}", "check the run id with delivery runs --state")
        self.ref.extract(head, run_dir)
        held = _json(_read(run_dir / CLAIM_FILE))
        (run_dir / CLAIM_FILE).unlink(missing_ok=True)
        self.head = head
        saved = _json(_read(run_dir / "checkpoint.json"))
        if saved.get("status") in ("succeeded", "failed"):
            return  # an ended run is reported as it is; nothing to claim or run
        if held and not take_over:
            age = self.state.now() - float(held.get("at") or 0)
            if age < stale_after(run_dir):
                raise Superseded(self.run_id, f"job {held.get('job')} claimed it "
                                 f"{age:.0f}s ago and is still within the longest stage "
                                 "timeout (pass --take-over if that job is dead)")
        self.claim_at = self.state.now()
        taken = f" (taking over from {held.get('job')})" if held else ""
        sha = self.ref.commit(run_dir, head, f"claimed by {self.job}{taken}",
                              self._claim_file(), skip=(CLAIM_FILE,))
        if not self.ref.push(self.run_id, sha, head):
            raise Superseded(self.run_id, "another job claimed it first")
        self.head = sha
        self.claimed = True

    def save(self, run_dir: Path, message: str) -> None:
        """One stage's state, on top of this job's last save; Superseded when another job
        moved the ref (it took the run over)."""
        self._push(run_dir, message, self._claim_file())

    def release(self, run_dir: Path, message: str) -> None:
        """The last save of this job (the run paused or ended): the claim is dropped."""
        self._push(run_dir, message, {})
        self.claimed = False

    def _push(self, run_dir: Path, message: str, extra: Mapping[str, bytes]) -> None:
        sha = self.ref.commit(run_dir, self.head, message, extra, skip=(CLAIM_FILE,))
        if not self.ref.push(self.run_id, sha, self.head):
            raise Superseded(self.run_id, "another job took the run over")
        self.head = sha
        self.saves += 1


def job_id(environ: Mapping[str, str]) -> str:
    """This job's name in claims: the Actions run and attempt, else host and pid."""
    if environ.get("GITHUB_RUN_ID"):
        return (f"actions:{environ.get('GITHUB_REPOSITORY', '')}/{environ['GITHUB_RUN_ID']}"
                f"/{environ.get('GITHUB_RUN_ATTEMPT', '1')}")
    return f"{os.uname().nodename}:{os.getpid()}"
