"""Which delivery process works in a worktree right now (issue 40: a careless user's second
`delivery run` of a ticket while the first still runs).

Two runs of one ticket share its branch: in one workspace the second would work in the
first one's worktree at the same time, in another it would detach the first one's worktree
to take the branch. So the process that adds or re-creates a worktree writes its pid (and
its start time, against a reused pid) into the worktree's administrative directory in the
clone (`<clone>/worktrees/<id>/`, out of the worktree's files), and another process leaves
that worktree alone while that process lives. A process that ended (killed, or finished)
holds nothing: its pid is gone or has another start time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

OWNER_FILE = "delivery-owner.json"


def _machine() -> str:
    # as claims name machines (delivery.state.claims.machine): the simulated Actions world
    # gives each hosted runner its own name on one real machine
    return os.environ.get("DELIVERY_HOST") or os.uname().nodename


def admin_dir(worktree: Path) -> Path | None:
    """The worktree's administrative directory in its repository, read from its `.git`
    file without running git; None when `worktree` is no linked worktree."""
    dot = worktree / ".git"
    try:
        text = dot.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None
    if not text.startswith("gitdir:"):
        return None
    return (worktree / text.removeprefix("gitdir:").strip()).resolve()


def _started(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, from /proc); "" when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def mark(worktree: Path) -> None:
    """Record this process as the one working in `worktree`."""
    admin = admin_dir(worktree)
    if admin is None or not admin.is_dir():
        return
    pid = os.getpid()
    data = json.dumps({"pid": pid, "started": _started(pid), "host": _machine()})
    spare = admin / f"{OWNER_FILE}.{pid}"
    spare.write_text(data, encoding="utf-8")
    os.replace(spare, admin / OWNER_FILE)


def busy(worktree: Path) -> int | None:
    """The pid of another live process of this machine that works in `worktree`; None
    when there is none (or the record is unreadable: it only ever protects)."""
    admin = admin_dir(worktree)
    if admin is None:
        return None
    try:
        owner = json.loads((admin / OWNER_FILE).read_text(encoding="utf-8"))
        pid, started, host = int(owner["pid"]), str(owner["started"]), str(owner["host"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if host != _machine() or pid == os.getpid() or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except (PermissionError, OverflowError):
        pass  # another user's process: alive
    now = _started(pid)
    return pid if not started or not now or now == started else None
