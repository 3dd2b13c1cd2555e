"""Whether a run saved as `running` still has a process running it (SPEC §12: a run whose
process is gone is shown `interrupted`, not `running`).

run.json records the process that runs the run — its pid, its machine and, where /proc
tells it, the process's start time (a pid used again by another process is not taken for
the run's) — written when the run starts and again by every resume. On this machine the
process is looked for. Of a run on another machine (a workspace on a shared disk) only the
heartbeat can be read: the event log's last write, made as every stage starts and ends and
at every save, so no thread is needed to keep it fresh. It is stale once older than the
longest stage timeout (an hour by default), as a claim on the state ref is (SPEC §13).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def machine() -> str:
    """This machine's name. `DELIVERY_HOST` overrides it: the simulated Actions world runs
    each hosted runner's job on one real machine, as if on its own."""
    return os.environ.get("DELIVERY_HOST") or os.uname().nodename


def process_start(pid: int) -> int:
    """When process `pid` started, in clock ticks since boot (/proc/PID/stat); 0 when it
    cannot be read (no /proc, or no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


@dataclass(frozen=True)
class Runner:
    """The process that runs a run (run.json's `pid`, `host`, `pid_started`)."""

    pid: int = 0
    host: str = ""
    started: int = 0  # process_start(pid) when it was recorded; 0: unknown

    @classmethod
    def this_process(cls) -> Runner:
        pid = os.getpid()
        return cls(pid, machine(), process_start(pid))


def interrupted(runner: Runner, heartbeat: float | None, *, now: float,
                stale_after: float) -> str:
    """Why a run saved as running is not running any more, or "" when it may be: its
    process is gone (this machine), or its heartbeat (the time of the event log's last
    write) is older than `stale_after` seconds (another machine). A run whose run.json
    names no process (written by an older delivery) is taken as running."""
    if not runner.pid:
        return ""
    if runner.host == machine():
        if _alive(runner):
            return ""
        return (f"its process {runner.pid} on this machine ({runner.host}) is gone (killed, "
                "or the machine restarted)")
    if heartbeat is None or now - heartbeat <= stale_after:
        return ""
    return (f"its process {runner.pid} runs on {runner.host or 'another machine'}, and its "
            f"heartbeat (the event log's last write) is {_age(now - heartbeat)} old, over "
            f"the longest stage timeout of {_age(stale_after)}")


def heartbeat(run_dir: Path) -> float | None:
    """When the run's event log was last written (seconds since the epoch), or None."""
    try:
        return (run_dir / "events.jsonl").stat().st_mtime
    except OSError:
        return None


def _alive(runner: Runner) -> bool:
    try:
        os.kill(runner.pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process: there, whoever it is
    # the same pid may be another process now: its start time tells
    return not runner.started or process_start(runner.pid) in (0, runner.started)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
