"""Pacing of one token's writes (SPEC §7.1 "The change set"; issue 21 item 7).

GitHub's "Best practices for using the REST API" asks integrations to make requests
serially, not concurrently, and to wait at least one second between content-creating
requests (POST, PATCH, PUT, DELETE, GraphQL mutations); its secondary rate limits (80
content-generating requests a minute, 500 an hour) turn bursts away with 403 and
`Retry-After`. `Pacer.write()` holds one lock per token around each content-creating
request (parallel branches of a run share the forge: their writes queue) and starts a write
no sooner than `write_spacing` seconds after the previous one ended. Reads are not paced.

First pushes (a folder's branch pushed for the first time, which starts its CI and is
followed by a PR, which starts more) are spread out so fifty repositories' CI does not
start in the same second on the organisation's shared runners. The rule: the first
`push_burst` first pushes of a run go out as they come; each later one waits until
`push_spacing` seconds after the previous first push. Defaults: 5, then one every 2 s — a
set of 50 starts its CI over about 90 s. Later pushes (repairs) are not spread: they come
one stage at a time anyway.

An answer naming a rate limit doubles the spacing for the rest of the run (up to 16 s):
GitHub asks clients that hit a secondary limit to slow down, not only to wait once.

Beyond the spacing, each write is counted per token in GitHub's windows (80 a minute, 500
an hour; `write_budget.WriteBudget`, on the wall clock `wall`, saved with the run): a write
that would pass them waits for room when that is within the caller's `patience`, else the
run pauses (`RateLimitPause`) until the time the write fits.

Clock and sleep are injected (`ManualClock` in tests): nothing here waits in real time
unless the real clock is given. `DELIVERY_WRITE_SPACING` sets the spacing (0: off).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from delivery.errors import RunRefused
from delivery.forges.write_budget import RateLimitPause, WriteBudget
from probes.retry import RetryNotice, announce

WRITE_SPACING = 1.0  # GitHub: at least one second between content-creating requests
PUSH_BURST = 5
PUSH_SPACING = 2.0
SPACING_VARIABLE = "DELIVERY_WRITE_SPACING"
MAX_WRITE_SPACING = 16.0  # after secondary-limit answers: at most this between writes


@dataclass
class Pacer:
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    write_spacing: float = WRITE_SPACING
    push_burst: int = PUSH_BURST
    push_spacing: float = PUSH_SPACING
    writes: int = 0  # content-creating requests sent (tests and benchmarks count them)
    first_pushes: int = 0
    waited: float = 0.0  # seconds slept by the pacer in all
    # GitHub's windows per token, on the wall clock (epoch seconds: saved with the run)
    budget: WriteBudget = field(default_factory=WriteBudget)
    wall: Callable[[], float] | None = None  # None: `clock` is the wall clock
    _last_write_end: float | None = None
    _last_first_push: float | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock)

    @contextmanager
    def write(self, key: str = "", *, patience: float = math.inf) -> Iterator[None]:
        """Around one content-creating request on token `key`: one at a time, spaced,
        within GitHub's windows — waiting for room up to `patience` seconds, else
        RateLimitPause (nothing is sent)."""
        with self._lock:
            if self._last_write_end is not None:
                self._wait_until(self._last_write_end + self.write_spacing)
            wait, why = self.budget.wait(key, self.now())
            if wait > patience:
                raise RateLimitPause(self.now() + wait, why)
            if wait > 0:
                self.waited += wait
                # never a silent wait (SPEC §12): the progress says what it waits for
                announce(RetryNotice("the next write", why, 0, 0, wait))
                self.sleep(wait)
            self.budget.spend(key, self.now())  # counted when sent, as GitHub counts
            try:
                yield
            finally:
                self.writes += 1
                self._last_write_end = self.clock()

    def now(self) -> float:
        """Wall-clock epoch seconds (the windows' and the pause's time)."""
        return (self.wall or self.clock)()

    def pause_for(self, wait: float | None, why: str) -> RateLimitPause:
        """The pause for a rate-limit answer the caller will not wait out in-process."""
        return RateLimitPause(self.now() + (wait if wait is not None else 60.0), why)

    def note_answer(self, key: str, headers: Mapping[str, str]) -> None:
        """An answer's primary-limit headers: a spent limit holds the next writes."""
        with self._lock:
            self.budget.note_primary(key, headers)

    def saved(self) -> dict[str, object] | None:
        """The windows to save with the run when they changed since the last call."""
        with self._lock:
            if not self.budget.changed:
                return None
            self.budget.changed = False
            return self.budget.to_json(self.now())

    def restore(self, value: object) -> None:
        """The windows a resumed run saved (`saved`)."""
        with self._lock:
            self.budget.restore(value)

    def first_push(self) -> None:
        """Before a folder's first push: wait for its turn under the spreading rule."""
        with self._lock:
            if self.first_pushes >= self.push_burst and self._last_first_push is not None:
                self._wait_until(self._last_first_push + self.push_spacing)
            self.first_pushes += 1
            self._last_first_push = self.clock()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], *,
                         clock: Callable[[], float] = time.time,
                         sleep: Callable[[float], None] = time.sleep,
                         wall: Callable[[], float] | None = None) -> Pacer:
        """`DELIVERY_WRITE_SPACING` (seconds, default 1) sets the spacing of writes and,
        doubled, of first pushes; 0 turns pacing off (a GitHub Enterprise Server without
        secondary limits; the test suite, whose fake answers in milliseconds)."""
        text = environ.get(SPACING_VARIABLE, "").strip()
        try:
            spacing = float(text) if text else WRITE_SPACING
        except ValueError:
            raise RunRefused(SPACING_VARIABLE, f"is {text!r}, not a number of seconds",
                             f"set it to 0 (no pacing) or a number like {WRITE_SPACING}"
                             ) from None
        if not 0 <= spacing <= 60:  # a minute apart is already a crawl
            raise RunRefused(SPACING_VARIABLE, f"is {spacing}, outside 0 to 60 seconds",
                             f"set it to 0 (no pacing) or a number like {WRITE_SPACING}")
        return cls(clock=clock, sleep=sleep, write_spacing=spacing,
                   push_spacing=spacing * PUSH_SPACING / WRITE_SPACING, wall=wall)

    def slow_down(self) -> None:
        """A rate-limit answer came: double the spacing of the writes that follow (the
        answer's own `Retry-After` is honoured by the retry, this keeps the rest slower)."""
        with self._lock:
            if self.write_spacing > 0:  # pacing turned off stays off
                self.write_spacing = min(self.write_spacing * 2, MAX_WRITE_SPACING)

    def _wait_until(self, moment: float) -> None:
        wait = moment - self.clock()
        if wait > 0:
            self.waited += wait
            self.sleep(wait)


@runtime_checkable
class PacedForge(Protocol):
    """A forge whose token is paced (GitHub); the local forge has no pacer."""

    pacer: Pacer


def before_first_push(forge: object) -> None:
    """The publish stage's hook: spread first pushes when the forge is paced."""
    if isinstance(forge, PacedForge):
        forge.pacer.first_push()


def carry_writes(forge: object, saved: object) -> Callable[[], dict[str, object] | None] | None:
    """A paced forge's windows restored from what the run saved (`write_budget.CONTEXT_KEY`);
    the callable the engine asks at each save for the windows that changed. None: the
    forge is not paced (the local forge)."""
    if not isinstance(forge, PacedForge):
        return None
    if saved is not None:
        forge.pacer.restore(saved)
    return forge.pacer.saved
