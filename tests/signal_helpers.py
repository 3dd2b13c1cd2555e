"""A real `delivery` process to send signals to, and /proc read for what it left running."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

STARTS_WITHIN = 60.0  # seconds: start-up of a `delivery` process on a loaded machine


def start_delivery(*argv: str | Path, cwd: Path) -> subprocess.Popen[str]:
    """`delivery ARGV` through the console script's own entry point, in its own process."""
    entry = "from delivery.cli.main import entry; entry()"
    return subprocess.Popen([sys.executable, "-c", entry, *map(str, argv)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)


def poll(condition: Callable[[], bool], seconds: float, every: float = 0.05) -> bool:
    """Whether `condition()` came true within `seconds` of real time, asked every `every`
    seconds: for what another process does, which no injected clock can speed up."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True


def wait_until(ready: Callable[[], bool], process: subprocess.Popen[str], what: str) -> None:
    """Wait for `ready()`; fail (and end the process) if the process ends first or time
    runs out."""
    if not poll(lambda: ready() or process.poll() is not None, STARTS_WITHIN):
        process.kill()
        process.communicate()
        pytest.fail(f"{what} did not happen in time")
    if not ready():
        out, err = process.communicate()
        pytest.fail(f"delivery ended before {what}: {out}{err}")


def group_members(pgid: int) -> list[int]:
    """Processes still in process group `pgid`, read from /proc (zombies are dead)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.append(int(entry.name))
    return members
