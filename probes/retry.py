"""Bounded retries for GitHub calls, shared by the probe (GraphQL reads) and the forge's
REST writes: a budget of attempts and of total waiting time, exponential backoff, and the
wait GitHub asks for (`Retry-After`, `x-ratelimit-reset`, a secondary rate limit's minute)
honoured as long as it fits the budget. Sleep and clock are injected, so tests cost no time.

What is retried is the caller's business: it raises `Transient` for an answer worth another
attempt (5xx, rate limit, dropped connection); anything else ends the call at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type

T = TypeVar("T")


@dataclass(frozen=True)
class RetryBudget:
    attempts: int = 6
    wait_seconds: float = 300.0  # total time spent waiting between attempts
    backoff_first: float = 1.0
    backoff_max: float = 30.0
    secondary_default: float = 60.0  # GitHub: wait at least a minute without Retry-After


class Transient(Exception):
    """An answer worth another attempt; `wait` is what GitHub asked for (None: back off
    exponentially)."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


def call_with_retries(call: Callable[[], T], budget: RetryBudget,
                      sleep: Callable[[float], None]) -> T:
    """`call()`, again after each `Transient` while the budget allows: at most
    `budget.attempts` attempts, and never a wait that would take the total waited past
    `budget.wait_seconds`. The last `Transient` is raised when the budget is spent."""
    waited = [0.0]

    def wait_for(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, Transient) and error.wait is not None:
            return max(error.wait, 0.0)
        return float(min(budget.backoff_first * 2 ** (state.attempt_number - 1),
                         budget.backoff_max))

    def stop(state: RetryCallState) -> bool:
        return (state.attempt_number >= budget.attempts
                or waited[0] + wait_for(state) > budget.wait_seconds)

    def counted_sleep(seconds: float) -> None:
        waited[0] += seconds
        sleep(seconds)

    retrying = Retrying(retry=retry_if_exception_type(Transient), stop=stop, wait=wait_for,
                        sleep=counted_sleep, reraise=True)
    result: T = retrying(call)
    return result


def rate_limit_wait(headers: Mapping[str, str], message: str, *, now: float,
                    budget: RetryBudget) -> float | None:
    """How long a 403/429 answer asks to wait, or None when it is no rate limit:
    `Retry-After`, else the primary limit's reset (`x-ratelimit-remaining: 0`), else a
    secondary limit's message (GitHub: wait at least a minute)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    retry_after = lowered.get("retry-after", "").strip()
    if retry_after.isdigit():
        return float(retry_after)
    if lowered.get("x-ratelimit-remaining", "").strip() == "0":
        reset = lowered.get("x-ratelimit-reset", "").strip()
        if reset.isdigit():
            return max(float(reset) - now, 0.0) + 1.0
        return budget.secondary_default
    if "rate limit" in message.lower():
        return budget.secondary_default
    return None
