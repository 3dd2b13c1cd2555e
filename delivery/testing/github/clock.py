"""A clock for tests against the fake GitHub."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime


@dataclass
class ManualClock:
    """Epoch seconds that move only when slept on: rate-limit waits cost no real time.
    Hand `clock` and `clock.sleep` to the fake, the probe and the forge alike."""

    now: float = 1_800_000_000.0
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        """Fast-forward (a test lets time pass without anyone sleeping)."""
        self.now += seconds


@dataclass
class EngineClock:
    """The engine's Clock (`monotonic`, `sleep`, `now`) on a ManualClock: one simulated time
    for the fake, the forge's rate windows and the run's waits."""

    manual: ManualClock

    def monotonic(self) -> float:
        return self.manual()

    def sleep(self, seconds: float) -> None:
        self.manual.sleep(seconds)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.manual(), UTC)
