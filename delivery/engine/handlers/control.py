"""Stages that do no outside work: start, exit, conditional, wait, fan-in bookkeeping."""

from __future__ import annotations

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.lang.model import Node, parse_duration


def run_noop(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    return StageResult("succeeded")


def run_conditional(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    # Pure routing: the previous stage's outcome stands so that edges route on it.
    return StageResult("succeeded", keep_outcome=True)


def run_wait(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    seconds = parse_duration(node.attr("interval", "0")) or 0.0
    env.clock.sleep(seconds)
    return StageResult("succeeded")
