"""A clock for tests: sleeps are recorded and return at once; time moves only by them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class FakeClock:
    """Implements the engine's Clock: `monotonic`, `sleep`, `now`.

    `sleeps` lists every sleep asked for; `advance` moves time without one.
    """

    start: float = 1000.0
    sleeps: list[float] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def now_monotonic(self) -> float:
        return self.start + self.elapsed

    def monotonic(self) -> float:
        return self.now_monotonic

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.elapsed += seconds

    def advance(self, seconds: float) -> None:
        self.elapsed += seconds

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.elapsed)
