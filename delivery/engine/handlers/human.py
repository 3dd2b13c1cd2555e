"""Human gates: the choices are the outgoing edge labels; the answer routes by label."""

from __future__ import annotations

from delivery.engine.context import Context
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.engine.routing import accelerator
from delivery.lang.model import Node


def gate_choices(node: Node, env: StageEnv) -> list[str]:
    """The labels (or, unlabeled, the targets) of the edges an answer can route to.

    An answer routes by preferred label, which only unconditional edges take, so a
    conditional edge (`outcome=failed` for a denied gate) is not offered as a choice —
    unless the gate has no unconditional edge at all (Attractor offers every edge).
    """
    edges = env.workflow.outgoing[node.id]
    choosable = [edge for edge in edges if edge.condition is None] or list(edges)
    return [edge.label or edge.target for edge in choosable]


def run_human(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    choices = gate_choices(node, env)
    answer = env.interviewer.ask(node.id, node.label, choices)
    if answer is None:
        return StageResult.fail(
            f"human gate '{node.id}' got no answer and was denied "
            f"(answer with --answer {node.id}=LABEL; choices: {', '.join(choices)})"
        )
    result = StageResult.ok()
    result.updates = {
        "human.gate.selected": accelerator(answer.label),
        "human.gate.label": answer.label,
        "human.gate.text": answer.text,
    }
    result.preferred_label = answer.label
    return result
