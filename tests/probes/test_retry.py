"""probes.retry: the one retry budget of the probe and the forge."""

from __future__ import annotations

import pytest

from probes.github_errors import rate_limit_wait
from probes.retry import RetryBudget, Transient, call_with_retries


class Flaky:
    def __init__(self, failures: list[Transient]) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "done"


def test_transient_failures_are_retried_with_exponential_backoff() -> None:
    slept: list[float] = []
    call = Flaky([Transient("502"), Transient("502"), Transient("502")])
    assert call_with_retries(call, RetryBudget(attempts=5), slept.append) == "done"
    assert (call.calls, slept) == (4, [1.0, 2.0, 4.0])


def test_the_wait_github_asks_for_is_honoured() -> None:
    slept: list[float] = []
    call = Flaky([Transient("rate limited", wait=17.0)])
    call_with_retries(call, RetryBudget(), slept.append)
    assert slept == [17.0]


def test_attempts_are_bounded_and_the_last_failure_is_raised() -> None:
    call = Flaky([Transient(f"try {i}") for i in range(10)])
    with pytest.raises(Transient, match="try 2"):
        call_with_retries(call, RetryBudget(attempts=3), lambda _: None)
    assert call.calls == 3


def test_a_wait_past_the_wait_budget_is_not_taken() -> None:
    slept: list[float] = []
    call = Flaky([Transient("a", wait=40.0), Transient("b", wait=40.0)])
    with pytest.raises(Transient, match="b"):
        call_with_retries(call, RetryBudget(wait_seconds=60.0), slept.append)
    assert slept == [40.0]  # a second 40 s would exceed the 60 s budget


def test_rate_limit_waits_come_from_retry_after_reset_or_the_secondary_default() -> None:
    assert rate_limit_wait({"Retry-After": "7"}, "", now=0, secondary_default=60.0) == 7.0
    assert rate_limit_wait({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "130"}, "",
                           now=100, secondary_default=60.0) == 31.0
    assert rate_limit_wait({}, "You have exceeded a secondary rate limit", now=0,
                           secondary_default=60.0) == 60.0
    assert rate_limit_wait({}, "Resource not accessible by integration", now=0,
                           secondary_default=60.0) is None
