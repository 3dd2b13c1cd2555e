"""Stages that do no outside work: start, exit, conditional, wait, fan-in bookkeeping."""

from __future__ import annotations

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.lang.model import Node


def run_noop(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    return StageResult("succeeded")


def run_conditional(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    # Pure routing: the previous stage's outcome stands so that edges route on it.
    return StageResult("succeeded", keep_outcome=True)


def run_wait(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    env.clock.sleep(node.interval)
    return StageResult("succeeded")
