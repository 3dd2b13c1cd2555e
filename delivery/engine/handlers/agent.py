"""Agent and prompt stages (SPEC §5): render, append the contract, ask, check, correct.

The reply's last `{"context_updates": ...}` object is checked against the node's declared
outputs. A malformed reply gets up to two correction turns in the same session; the
context changes only when a reply is accepted, never partially.
"""

from __future__ import annotations

from typing import Any

from delivery.agents.base import AgentError
from delivery.engine.context import Context
from delivery.engine.contracts import (
    MAX_CORRECTIONS,
    ContractViolation,
    choice_literals,
    contract_text,
    correction_prompt,
    parse_reply,
)
from delivery.engine.handlers.base import FAILED, RETRY, SUCCEEDED, StageEnv, StageResult
from delivery.engine.templating import TemplateRenderError
from delivery.lang.model import Node

LAST_RESPONSE_CHARS = 200


def _transcript(turns: list[tuple[str, str]]) -> str:
    parts = []
    for number, (role, text) in enumerate(turns, start=1):
        parts.append(f"## turn {number}: {role}\n\n{text}\n")
    return "\n".join(parts)


def run_agent(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    try:
        body = env.renderer.render(node.prompt or node.label, context, folders=list(env.folders),
                                   plain=node.template == "plain")
    except TemplateRenderError as err:
        return StageResult.fail(f"prompt template: {err}")
    choices = choice_literals(env.workflow, node)
    contract = contract_text(node.outputs, choices)
    preamble = env.fidelity_preamble(node)
    message = "\n\n".join(part for part in (preamble, body, contract) if part)
    env.write_stage_file(node.id, attempt, "prompt.md", message)
    turns: list[tuple[str, str]] = []
    try:
        session = env.agent.open_session(node.id, workspace=env.workspace)
        for turn in range(MAX_CORRECTIONS + 1):
            turns.append(("prompt" if turn == 0 else "correction", message))
            reply = session.send(message)
            turns.append(("reply", reply))
            try:
                accepted = parse_reply(reply, node.outputs, choices, env.workflow.folders)
            except ContractViolation as violation:
                if turn == MAX_CORRECTIONS:
                    return StageResult.fail(
                        f"the reply broke the output contract {MAX_CORRECTIONS + 1} times; "
                        f"last problems: {'; '.join(violation.problems)}"
                    )
                message = correction_prompt(violation, contract)
                continue
            break
    except AgentError as err:
        return StageResult.fail(str(err))
    finally:
        env.write_stage_file(node.id, attempt, "response.md", _transcript(turns))
    if accepted.outcome == FAILED:
        return StageResult.fail(accepted.failure_reason or f"the agent reported that "
                                f"'{node.id}' failed")
    if accepted.outcome == RETRY:
        return StageResult(RETRY, accepted.failure_reason)
    updates: dict[str, Any] = dict(accepted.updates)
    if accepted.work is not None:
        updates["current_work"] = accepted.work.model_dump()
    updates[f"response.{node.id}"] = reply
    updates["last_response"] = reply[:LAST_RESPONSE_CHARS]
    return StageResult(accepted.outcome or SUCCEEDED, updates=updates,
                       preferred_label=accepted.preferred_label,
                       suggested_next_ids=accepted.suggested_next_ids)
