"""Stages that do no outside work: start, exit, conditional, wait, fan-in bookkeeping."""

from __future__ import annotations

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.lang.model import Node, NodeType
from delivery.lang.outcomes import StageOutcome
from probes.waiting import waiting_for, waiting_summary


def run_noop(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    return StageResult(StageOutcome.SUCCEEDED)


def run_conditional(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    # Pure routing: the previous stage's outcome stands so that edges route on it.
    return StageResult(StageOutcome.SUCCEEDED, keep_outcome=True)


OBSERVING = frozenset({NodeType.PROBE, NodeType.CONDITIONAL})


def run_wait(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    """Sleep `interval` before the next observation (SPEC §7.1).

    Consecutive visits — the wait reached again through only probes, conditionals and
    itself — multiply the interval by `backoff` (up to `max_interval`); once `timeout` has
    passed since the first of them, the stage fails instead of sleeping again. The first
    stage after a resume does not sleep: the run was stopped in (or before) this wait, and
    a resume means "go on" — to the probe at once, the timeout's clock kept.
    """
    interval, backoff, ceiling, timeout = (node.interval, node.backoff, node.max_interval,
                                           node.timeout)
    earlier = _consecutive_visits(node, env)
    since_key = f"internal.wait.{node.id}.since"
    # a wall clock (a resume is another process, whose monotonic clock starts elsewhere)
    now = env.wall_clock() if env.event_mode else env.clock.now().timestamp()
    started = context.get(since_key) if earlier else None
    since = float(started) if isinstance(started, (int, float)) else now
    waited = now - since
    if timeout is not None and waited >= timeout:
        return StageResult.fail(
            f"wait '{node.id}' timed out: {waited:.0f}s since its first visit "
            f"(timeout {node.attr('timeout')}); what it waited for did not happen",
            {since_key: since})
    seconds = interval * backoff ** earlier
    if ceiling is not None:
        seconds = min(seconds, ceiling)
    if timeout is not None:
        seconds = min(seconds, max(timeout - waited, 0.0))
    waits = waiting_summary(waiting_for(context, list(env.folders)))
    awaited = f"waiting for {waits}" if waits else "waiting"
    if not env.event_mode and len(env.path()) == env.resumed_at + 1:
        env.announce(node, "resumed in the wait: went on without sleeping again")
        return StageResult(StageOutcome.SUCCEEDED, updates={since_key: since},
                           events=[("wait_skipped", {"seconds": seconds,
                                                     "why": "resumed"})])
    if env.event_mode:
        # No runner waits (SPEC §13): the run saves and pauses; an event resumes it
        env.announce(node, f"{awaited}; the run pauses until an event resumes it")
        return StageResult(StageOutcome.SUCCEEDED, updates={since_key: since}, pause_after=True,
                           pause_seconds=seconds)
    env.announce(node, f"{awaited}; next look in {_duration(seconds)}")
    env.clock.sleep(seconds)
    return StageResult(StageOutcome.SUCCEEDED, updates={since_key: since})


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h".replace(".0h", "h")
    if seconds >= 60:
        return f"{seconds / 60:.1f}m".replace(".0m", "m")
    return f"{seconds:.0f}s"


def _consecutive_visits(node: Node, env: StageEnv) -> int:
    """How many times the run came back to `node` through probes and conditionals alone
    since a stage of another kind ran."""
    path = env.path()
    types = {node_id: n.type for node_id, n in env.workflow.nodes.items()}
    visits = 0
    # the path ends with this visit: walk back over what came before it
    for step in reversed(path[:-1]):
        if step == node.id:
            visits += 1
        elif types.get(step) not in OBSERVING:
            break
    return visits

