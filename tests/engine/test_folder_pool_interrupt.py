"""Ctrl-C (or SIGTERM) during a folder stage: the folders already in flight finish (none is
abandoned mid-push), and no folder that had not started is started after it — a publish
of 200 folders stops within the folders in flight, not after all of them."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest

from delivery.engine.folder_pool import map_folders

GUARD_SECONDS = 30.0


def _until_the_stage_waits() -> None:
    """Until the main thread waits for the folders' results (all of them submitted)."""
    main = threading.main_thread().ident
    deadline = time.monotonic() + GUARD_SECONDS
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(main or 0)
        while frame is not None:
            if frame.f_code.co_name == "as_completed":
                return
            frame = frame.f_back
        time.sleep(0.001)


@pytest.fixture
def interrupt_on_sigint() -> Iterator[threading.Event]:
    """SIGINT raises KeyboardInterrupt in the main thread, as delivery's CLI has it, and
    sets the event the test's workers wait on (they go on only once it was raised)."""
    raised = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        raised.set()
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGINT, stop)
    try:
        yield raised
    finally:
        signal.signal(signal.SIGINT, before)


def test_an_interrupt_starts_no_folder_that_had_not_started(
        interrupt_on_sigint: threading.Event) -> None:
    started: list[int] = []
    lock = threading.Lock()

    def work(item: int) -> int:
        with lock:
            started.append(item)
        if item == 0:  # the first folder is where the person presses Ctrl-C, once every
            _until_the_stage_waits()  # folder is queued and the stage waits for them
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        else:
            interrupt_on_sigint.wait(GUARD_SECONDS)
        return item

    with pytest.raises(KeyboardInterrupt):
        map_folders(work, list(range(20)), 2)
    # the two workers' folders at the interrupt, and at most one more each that a worker
    # took before the rest were called off
    assert len(started) <= 5, started
