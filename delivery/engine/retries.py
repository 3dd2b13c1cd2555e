"""A stage's retries: a stage that failed or asked to be retried runs again up to
`max_retries` times with exponential backoff; a `retry` still asked for when they are spent
is partial success with `allow_partial=true`, otherwise a failure (Attractor §3.5)."""

from __future__ import annotations

from collections.abc import Callable

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
)

from delivery.engine.handlers.base import StageResult
from delivery.lang.model import Node
from delivery.lang.outcomes import RETRIED, StageOutcome

# (the attempt that asked for a retry, the seconds before the next, its result)
OnRetry = Callable[[int, float, StageResult], None]


def with_retries(node: Node, retries: int, attempt: Callable[[], StageResult], *,
                 backoff_initial: float, backoff_max: float, sleep: Callable[[float], None],
                 on_retry: OnRetry) -> StageResult:
    """The result of running `attempt` (one attempt of `node`) until it needs no retry or
    `retries` re-runs are spent; `on_retry` is told before each wait of `sleep`."""
    if retries == 0:  # the common case; tenacity's machinery costs a tenth of a stage
        return _retries_spent(node, 0, attempt())

    def before_sleep(retry_state: RetryCallState) -> None:
        on_retry(retry_state.attempt_number, retry_state.upcoming_sleep,
                 _last_result(retry_state))

    retrying = Retrying(
        stop=stop_after_attempt(retries + 1),
        wait=wait_exponential(multiplier=backoff_initial, max=backoff_max),
        retry=retry_if_result(lambda result: result.outcome in RETRIED),
        retry_error_callback=_last_result,
        before_sleep=before_sleep,
        sleep=sleep,
    )
    result: StageResult = retrying(attempt)
    return _retries_spent(node, retries, result)


def _retries_spent(node: Node, retries: int, result: StageResult) -> StageResult:
    """A stage still asking to be retried when its retries are spent (Attractor §3.5):
    partial success with `allow_partial=true`, otherwise a failure."""
    if result.outcome != StageOutcome.RETRY:
        return result
    if node.allow_partial:
        result.outcome, result.failure_reason = StageOutcome.PARTIAL_SUCCESS, ""
        return result
    reason = result.failure_reason or "the stage asked to be retried"
    return StageResult.fail(f"{reason}; max retries ({retries}) exceeded")


def _last_result(retry_state: RetryCallState) -> StageResult:
    """The StageResult of the attempt tenacity just finished (attempts never raise)."""
    assert retry_state.outcome is not None
    result: StageResult = retry_state.outcome.result()
    return result
