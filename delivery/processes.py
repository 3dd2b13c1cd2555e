"""The process groups of the stages running now (agent CLIs, scripts: each is started in a
session of its own, so a terminal's Ctrl-C does not reach it), so that Ctrl-C or SIGTERM can
end every one of them — also those that parallel branches started in other threads, which
the interrupt does not reach (the main thread would otherwise wait for them to finish)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_groups: set[int] = set()
_started = 0  # groups ever registered: what a stage started, told by the count moving


def started() -> int:
    """How many process groups stages have started in this process so far: the engine
    checks the run's files after a stage only when this moved while it ran (in-process
    stages cannot write them behind the store's back)."""
    return _started


@contextlib.contextmanager
def running(pgid: int) -> Iterator[None]:
    """While the block runs, `pgid` is ended by `end_all`."""
    global _started
    with _lock:
        _groups.add(pgid)
        _started += 1
    try:
        yield
    finally:
        with _lock:
            _groups.discard(pgid)


_holding = 0  # depth of `holding_signals` blocks on the main thread
_held: list[int] = []  # signals that arrived in one, raised as it ends


@contextlib.contextmanager
def holding_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM arriving in the block (on the main thread, the only one a signal
    interrupts) are held and delivered again as it ends: a stage starts its process group
    and registers it (`register`) in here, so no signal falls between the two and leaves
    a started group that `end_all` cannot see."""
    global _holding
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _holding += 1
    try:
        yield
    finally:
        _holding -= 1
        if not _holding and _held:
            signum = _held[0]
            _held.clear()
            os.kill(os.getpid(), signum)  # the handler runs now, the group registered


def hold(signum: int) -> bool:
    """For the signal handler: whether `signum` is held (a group is being started)."""
    if _holding and threading.current_thread() is threading.main_thread():
        _held.append(signum)
        return True
    return False


def register(pgid: int) -> None:
    """`pgid` is ended by `end_all` from now on (`running` keeps it so while it runs)."""
    with _lock:
        _groups.add(pgid)


def end_all() -> None:
    """SIGKILL every registered group (a group already gone is skipped)."""
    with _lock:
        groups = list(_groups)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
