"""GitHub's limits as a budget, not an error (SPEC §7.1; issue 37 item 2).

GitHub documents secondary limits on content-creating requests (POST, PATCH, PUT, DELETE,
GraphQL mutations): 80 a minute and 500 an hour per token, past which it answers 403/429
with `Retry-After`; and a primary limit per token and hour, whose `x-ratelimit-remaining`
and `x-ratelimit-reset` every answer carries. `WriteBudget` counts one run's writes per
token in sliding windows and, before each write, says how long to wait for the next one
to fit. The pacer waits when that is within the stage's patience (the forge's retry
budget, 300 s) and otherwise raises `RateLimitPause`: the run pauses (status `paused`,
reason `rate_limit`) saying in UTC when it may go on, instead of failing or sending a write
GitHub would refuse. A `Retry-After` (or a reset) longer than the patience pauses the same
way (the forge's `_attempts`).

The count travels with the run (`to_json`/`restore`, saved in the context under
`internal.github_writes` after each stage): a resume in another process, or another
Actions job, goes on with the same windows. Times are kept per minute on disk (at most 61
entries a token, so a save does not grow with the run) and read back as if each write were
made at the end of its minute: a restored window is never lighter than the real one.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from delivery.errors import PauseReason, PauseRequested

CONTEXT_KEY: Final = "internal.github_writes"  # where the windows travel with the run
PER_MINUTE: Final = 80
PER_HOUR: Final = 500
MINUTE: Final = 60.0
HOUR: Final = 3600.0


def utc_text(moment: float) -> str:
    """To the second, rounded up: a resume at the time said is never a second early."""
    return datetime.fromtimestamp(math.ceil(moment), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RateLimitPause(PauseRequested):
    """GitHub's limits leave no room for the next request within the stage's patience:
    the run pauses before the stage (which runs again on resume, its writes found or
    created, never sent twice) until `until` (epoch seconds)."""

    reason = PauseReason.RATE_LIMIT

    def __init__(self, until: float, why: str) -> None:
        self.until = until
        when = utc_text(until)
        # the node is the stage running; the engine knows it (PauseRequested.node_id)
        super().__init__("", message=(
            f"GitHub's rate limit: {why}; the run paused and may go on at {when} — resume "
            "it then (delivery resume RUN; in event mode the schedule resumes it)"),
            event_fields={"until": when, "why": why})


@dataclass
class _Window:
    """One token's writes of the last hour, oldest first."""

    times: deque[float] = field(default_factory=deque)

    def prune(self, now: float) -> None:
        while self.times and self.times[0] <= now - HOUR:
            self.times.popleft()

    def wait(self, now: float, per_minute: int, per_hour: int) -> tuple[float, str]:
        """Seconds until one more write fits both windows (0: now), and why."""
        self.prune(now)
        waits = [(0.0, "")]
        if per_hour and len(self.times) >= per_hour:
            oldest = self.times[len(self.times) - per_hour]
            waits.append((oldest + HOUR - now,
                          f"{len(self.times)} content-creating requests in the last hour "
                          f"on one token (GitHub allows {per_hour})"))
        in_minute = [t for t in self.times if t > now - MINUTE]
        if per_minute and len(in_minute) >= per_minute:
            oldest = in_minute[len(in_minute) - per_minute]
            waits.append((oldest + MINUTE - now,
                          f"{len(in_minute)} content-creating requests in the last minute "
                          f"on one token (GitHub allows {per_minute})"))
        return max(waits)

    def to_json(self) -> list[list[int]]:
        minutes: dict[int, int] = {}
        for moment in self.times:
            start = int(moment // MINUTE * MINUTE)
            minutes[start] = minutes.get(start, 0) + 1
        return [[start, count] for start, count in sorted(minutes.items())]

    @classmethod
    def from_json(cls, value: Any) -> _Window:
        times: list[float] = []
        for entry in value if isinstance(value, list) else []:
            if isinstance(entry, list) and len(entry) == 2 and all(
                    isinstance(n, int) and n >= 0 for n in entry):
                # at the end of its minute: a restored window is never lighter than it was
                times += [entry[0] + MINUTE - 0.001] * min(entry[1], PER_HOUR * 2)
        return cls(deque(sorted(times)))


@dataclass
class WriteBudget:
    """Per token key: the writes of the last hour, and the primary limit's reset when
    GitHub said nothing is left. Not thread-safe: the pacer holds its lock around it."""

    per_minute: int = PER_MINUTE
    per_hour: int = PER_HOUR
    windows: dict[str, _Window] = field(default_factory=dict)
    exhausted_until: dict[str, float] = field(default_factory=dict)  # primary resets
    changed: bool = False

    def wait(self, key: str, now: float) -> tuple[float, str]:
        """Seconds until the next write on `key`'s token may go (0: now), and why."""
        wait, why = self.windows.setdefault(key, _Window()).wait(
            now, self.per_minute, self.per_hour)
        reset = self.exhausted_until.get(key)
        if reset is not None and reset <= now:
            del self.exhausted_until[key]
            self.changed = True
        elif reset is not None and reset - now > wait:
            wait, why = reset - now, ("the token's primary rate limit is spent "
                                      "(x-ratelimit-remaining: 0) until its reset")
        return max(wait, 0.0), why

    def spend(self, key: str, now: float) -> None:
        self.windows.setdefault(key, _Window()).times.append(now)
        self.changed = True

    def note_primary(self, key: str, headers: Mapping[str, str]) -> None:
        """An answer's primary-limit headers (REST's `core` pool; GraphQL's own pool
        answers RATE_LIMITED when spent, which pauses through the retry)."""
        lowered = {k.lower(): str(v) for k, v in headers.items()}
        if lowered.get("x-ratelimit-resource", "core") != "core":
            return
        remaining = lowered.get("x-ratelimit-remaining", "").strip()
        reset = lowered.get("x-ratelimit-reset", "").strip()
        if remaining == "0" and reset.isdigit():
            if self.exhausted_until.get(key) != float(reset):
                self.exhausted_until[key] = float(reset)
                self.changed = True
        elif remaining.isdigit() and key in self.exhausted_until:
            del self.exhausted_until[key]
            self.changed = True

    def to_json(self, now: float) -> dict[str, Any]:
        for window in self.windows.values():
            window.prune(now)
        return {"windows": {key: w.to_json() for key, w in self.windows.items() if w.times},
                "primary_reset": {key: math.ceil(reset)
                                  for key, reset in self.exhausted_until.items()}}

    def restore(self, value: Any) -> None:
        """What `to_json` saved (a resume's context); anything else leaves it empty."""
        if not isinstance(value, Mapping):
            return
        windows = value.get("windows")
        if isinstance(windows, Mapping):
            self.windows = {str(key): _Window.from_json(saved)
                            for key, saved in windows.items()}
        resets = value.get("primary_reset")
        if isinstance(resets, Mapping):
            self.exhausted_until = {str(key): float(reset) for key, reset in resets.items()
                                    if isinstance(reset, int)}
        self.changed = False
