"""The one retry policy for GitHub calls (the client's, the probe's, the forge's): a budget
of attempts and of total waiting time, exponential backoff, and the wait GitHub asks for
(`Retry-After`, `x-ratelimit-reset`, a secondary rate limit's minute) honoured as long as
it fits the budget. Sleep and clock are injected, so tests cost no time.

What is worth another attempt is `probes.github_errors`' business: a `Transient` answer;
anything else ends the call at once. A read is simply repeated (`call_with_retries`). A
write is never repeated blindly (`write_with_retries`): before each retry the caller's
`find_effect` looks for what an earlier attempt, whose answer was lost, may have done, and
returns it instead of writing again. A write that sets a value (a PATCH, a status) is
idempotent and may be repeated as a read is.

Every wait is told, before it starts, to the listeners of `announcing` (the command line
prints "retrying … attempt n of m, next try in N s"): a minute's wait for a rate limit is
never silent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type

from probes.github_errors import SECONDARY_DEFAULT, Transient

__all__ = ["RetryBudget", "RetryNotice", "Transient", "announce", "announcing", "call_with_retries",
           "write_with_retries"]

T = TypeVar("T")
E = TypeVar("E")


@dataclass(frozen=True)
class RetryBudget:
    attempts: int = 6
    wait_seconds: float = 300.0  # total time spent waiting between attempts
    backoff_first: float = 1.0
    backoff_max: float = 30.0
    secondary_default: float = SECONDARY_DEFAULT


@dataclass(frozen=True)
class RetryNotice:
    """One failed attempt that will be tried again: `what` was asked (empty: a GitHub
    request), why it failed, the attempt that failed, of how many, and the wait before
    the next."""

    what: str
    reason: str
    attempt: int
    attempts: int
    wait: float

    def line(self) -> str:
        subject = self.what or "a GitHub request"
        if not self.attempts:  # a wait for room under GitHub's limits, not a retry
            return f"GitHub: {subject}: {self.reason}; waiting {self.wait:.0f}s"
        return (f"GitHub: {subject}: {self.reason}; retrying (attempt {self.attempt + 1} of "
                f"{self.attempts}), next try in {self.wait:.0f}s")


_listeners: list[Callable[[RetryNotice], None]] = []
_listeners_lock = threading.Lock()


@contextmanager
def announcing(listener: Callable[[RetryNotice], None]) -> Iterator[None]:
    """`listener` is told of every retry's wait, in any thread, while the block runs."""
    with _listeners_lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _listeners_lock:
            _listeners.remove(listener)


def announce(notice: RetryNotice) -> None:
    """Tell the listeners of a wait that is not a retry (`attempts` 0): the write pacer's
    wait for room under GitHub's limits."""
    _announce(notice)


def _announce(notice: RetryNotice) -> None:
    with _listeners_lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(notice)


def call_with_retries(call: Callable[[], T], budget: RetryBudget,
                      sleep: Callable[[float], None], what: str = "") -> T:
    """`call()`, again after each `Transient` while the budget allows: at most
    `budget.attempts` attempts, and never a wait that would take the total waited past
    `budget.wait_seconds`. The last `Transient` is raised when the budget is spent. Each
    wait is announced (`announcing`), naming `what` was asked."""
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

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        _announce(RetryNotice(what, error.reason if isinstance(error, Transient) else "failed",
                              state.attempt_number, budget.attempts,
                              state.upcoming_sleep))

    retrying = Retrying(retry=retry_if_exception_type(Transient), stop=stop, wait=wait_for,
                        sleep=counted_sleep, reraise=True, before_sleep=before_sleep)
    result: T = retrying(call)
    return result


def write_with_retries(write: Callable[[], T], find_effect: Callable[[], E | None],
                       budget: RetryBudget, sleep: Callable[[float], None],
                       what: str = "") -> T | E:
    """`write()` retried as `call_with_retries` does, but before each retry
    `find_effect()` looks for the effect of an attempt whose answer was lost (a PR for the
    head branch, a comment with its marker, a merged PR): found, it is returned and the
    write is not sent again. A `Transient` from the look itself costs an attempt too."""
    sent = [0]

    def attempt() -> T | E:
        if sent[0]:
            found = find_effect()
            if found is not None:
                return found
        sent[0] += 1
        return write()

    return call_with_retries(attempt, budget, sleep, what)
