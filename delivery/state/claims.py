"""Claims on a run's state ref (SPEC §13) and the ref's small files, read as untrusted input.

Anyone who can push to the state repository can write `claim.json` or `status.json`, so
both are parsed into models (pydantic) and a file that is not what a job writes is a
one-line refusal naming the file, the field and the fix — never a traceback, and never a
claim that stays live forever (`"at": 1e999`, a time in the future).

A claim is live while it is younger than the longest stage timeout, unless its job is known
to have ended: a job of this machine whose process is gone, an earlier attempt of the
same Actions workflow run (a re-run starts only once the earlier attempt ended), or a job
of another Actions run that GitHub reports `completed` (`GET /repos/{owner}/{repo}/actions/
runs/{run_id}`, through the one GitHub client: a 5xx or a dropped connection is asked
again once, a rate limit is not waited out; a job killed on a hosted runner leaves no
process to look for). Without `actions: read` or on any API error the claim is judged by
its age alone, logged once.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from delivery.errors import RunRefused
from delivery.store.liveness import machine as machine  # this machine's name in claims
from probes.github_client import GitHubClient
from probes.github_errors import Forbidden, GitHubError, NotFound
from probes.retry import RetryBudget

# a clock on another machine may be a little ahead; more than this is not a real claim
CLOCK_SKEW = 300.0
SMALL_FILE_LIMIT = 64 << 10  # claim.json / status.json: a job writes a few hundred bytes
log = logging.getLogger("delivery")


class Claim(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    job: str = Field(min_length=1, max_length=500)
    at: float
    # where the claiming process runs: on this machine, a claim whose process is gone
    # belongs to a job that ended (killed), whatever its age
    host: str = Field(default="", max_length=300)
    pid: int = Field(default=0, ge=0, le=1 << 31)
    # the Actions run the job belongs to (empty outside Actions): asked about on a resume
    repository: str = Field(default="", max_length=200, pattern=r"^([\w.-]+/[\w.-]+)?$")
    run_id: int = Field(default=0, ge=0, le=1 << 62)
    attempt: int = Field(default=0, ge=0, le=1 << 20)

    @field_validator("at", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("is not a number of seconds since the epoch")
        if not math.isfinite(value) or value < 0:
            raise ValueError("is not a finite time")
        return value

    def to_bytes(self) -> bytes:
        return json.dumps({"job": self.job, "at": self.at, "host": self.host,
                           "pid": self.pid, "repository": self.repository,
                           "run_id": self.run_id, "attempt": self.attempt}).encode()

    @classmethod
    def here(cls, job: str, at: float) -> Claim:
        run = _actions_run(job)
        repository, _, run_id = run[0].removeprefix("actions:").rpartition("/") \
            if run else ("", "", "0")
        return cls(job=job, at=at, host=machine(), pid=os.getpid(),
                   repository=repository, run_id=int(run_id) if run_id.isdigit() else 0,
                   attempt=run[1] if run else 0)


def _first_problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the file"
    message = str(first.get("msg", "is malformed")).removeprefix("Value error, ")
    return f"{where} {message}" if where != "the file" else message


@dataclass(frozen=True)
class Oversized:
    """A file of the fetched ref that was larger than its reader's limit: its size only
    (never loaded), so that each parser refuses or ignores it on purpose."""

    size: int
    limit: int


def parse_claim(data: bytes | Oversized | None, *, run_id: str, now: float) -> Claim | None:
    """The claim on the ref, None when there is none; RunRefused when it is malformed."""
    if data is None:
        return None
    fix = "resume with --take-over (the claim is ignored and replaced)"
    if isinstance(data, bytes) and len(data) > SMALL_FILE_LIMIT:
        data = Oversized(len(data), SMALL_FILE_LIMIT)
    if isinstance(data, Oversized):
        raise RunRefused(f"run {run_id}: claim.json on the state ref",
                         f"is {data.size} bytes, over the limit of {data.limit} (not a "
                         "claim)", fix)
    try:
        claim = Claim.model_validate_json(data)
    except ValidationError as error:
        raise RunRefused(f"run {run_id}: claim.json on the state ref",
                         f"is not a claim: {_first_problem(error)}", fix) from None
    if claim.at > now + CLOCK_SKEW:
        raise RunRefused(f"run {run_id}: claim.json on the state ref",
                         f"claims a time {claim.at - now:.0f}s in the future", fix)
    return claim


def parse_status(data: bytes | Oversized | None,
                 limit: int = SMALL_FILE_LIMIT) -> dict[str, Any]:
    """`status.json` (or a checkpoint read for its status): a JSON object of bounded size,
    else empty — it only labels `delivery runs`; the checkpoint itself is checked when
    the run is loaded."""
    if not isinstance(data, bytes) or not data or len(data) > limit:
        return {}
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def ended(claim: Claim, this_job: str, runs: ActionsRuns | None = None) -> bool:
    """Whether the job that made `claim` is known to have ended (`runs`: GitHub, asked
    about a claim of another Actions run)."""
    if claim.job == this_job:
        return False  # our own claim, held right now
    if claim.host == machine() and claim.pid and claim.pid != os.getpid():
        try:
            os.kill(claim.pid, 0)
        except ProcessLookupError:
            return True  # that process is gone: the job was killed or exited
        except (PermissionError, OverflowError):
            return False
    mine = _actions_run(this_job)
    theirs = _actions_run(claim.job)
    if mine is not None and theirs is not None and mine[0] == theirs[0]:
        return theirs[1] < mine[1]  # an earlier attempt of this workflow run
    if runs is not None and claim.repository and claim.run_id:
        return runs.completed(claim.repository, claim.run_id) is True
    return False


@dataclass
class ActionsRuns:
    """GitHub's word on whether an Actions run has ended. Any failure (a token without
    `actions: read`, a network error, an answer not in GitHub's shape) is logged once and
    answers None: the claim is then judged by its age, as without this."""

    api_url: str
    token: str
    timeout: float = 10.0
    _failed: bool = field(default=False, repr=False)

    def completed(self, repository: str, run_id: int) -> bool | None:
        if self._failed:
            return None
        if not self.token:
            self._fail("no token was given")
            return None
        # a resume waits on this answer: a brief second try, never a rate limit's minute
        budget = RetryBudget(attempts=2, wait_seconds=5.0)
        try:
            with GitHubClient(self.token, api_url=self.api_url, budget=budget,
                              timeout=self.timeout) as client:
                data = client.rest("GET", f"/repos/{repository}/actions/runs/{run_id}")
        except (NotFound, Forbidden) as error:
            self._fail(f"{error.reason} (the token needs actions: read)")
            return None
        except GitHubError as error:
            self._fail(error.reason)
            return None
        if not isinstance(data, dict) or not isinstance(data.get("status"), str):
            self._fail("the answer is not a workflow run")
            return None
        return bool(data["status"] == "completed")

    def _fail(self, why: str) -> None:
        self._failed = True
        log.warning("cannot ask GitHub whether the Actions run of a claim has ended: %s; "
                    "a claim is live until it is older than the longest stage timeout "
                    "(grant the token actions: read, or resume with --take-over)", why)


def _actions_run(job: str) -> tuple[str, int] | None:
    """`actions:<repo>/<run id>/<attempt>` -> (`<repo>/<run id>`, attempt)."""
    if not job.startswith("actions:"):
        return None
    head, _, attempt = job.rpartition("/")
    return (head, int(attempt)) if attempt.isdigit() and len(attempt) < 10 else None
