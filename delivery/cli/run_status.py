"""The status `delivery runs` and `inspect` show for a local run: its saved status, except
that a run saved as `running` whose process is gone is `interrupted`, with the reason
(delivery.store.liveness; SPEC §12)."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from delivery.state.remote import stage_timeout_limit
from delivery.store.liveness import Runner, heartbeat, interrupted, machine
from delivery.store.records import RunInfo

INTERRUPTED = "interrupted"


def shown_status(run_dir: Path, info: RunInfo, status: str) -> tuple[str, str]:
    """(status, reason): `interrupted` and why, or the saved status and ""."""
    if status != "running":
        return status, ""
    runner = Runner(info.pid, info.host, info.pid_started)
    # the workflow is read only for a run of another machine (its longest stage timeout)
    stale_after = stage_timeout_limit(run_dir) if runner.pid and runner.host != machine() \
        else 0.0
    why = interrupted(runner, heartbeat(run_dir), now=time.time(), stale_after=stale_after)
    if not why:
        return status, ""
    return INTERRUPTED, f"{why}; delivery resume {shlex.quote(str(run_dir))} continues it"
