"""Agent and prompt stages (SPEC §5): render, append the contract, ask, check, correct.

The reply's last `{"context_updates": ...}` object is checked against the node's declared
outputs. A malformed reply gets up to two correction turns in the same session; the
context changes only when a reply is accepted, never partially. The backend, the session
(a `full` thread continues one), the model settings and the preamble come from the run's
AgentRuntime; the prompt sent and every reply pass through the run's redactor.
"""

from __future__ import annotations

from typing import Any

from delivery.agents.base import AgentError, AgentSession, SessionRequest, TurnSink, Usage
from delivery.engine.agent_runtime import StagePlan
from delivery.engine.context import Context
from delivery.engine.contracts import (
    MAX_CORRECTIONS,
    ContractViolation,
    choice_literals,
    contract_text,
    correction_prompt,
    parse_reply,
)
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.engine.templating import TemplateRenderError
from delivery.lang.model import Node
from delivery.lang.outcomes import StageOutcome

LAST_RESPONSE_CHARS = 200


def _transcript(turns: list[tuple[str, str]]) -> list[str]:
    """response.md as the parts it is joined from: the store encodes a long reply once for
    it and the reply's artifact (see LocalRunStore.write_stage_text)."""
    parts: list[str] = []
    for number, (role, text) in enumerate(turns, start=1):
        parts += ("\n" if parts else "", f"## turn {number}: {role}\n\n", text, "\n")
    return parts


def _plan(node: Node, context: Context, env: StageEnv) -> StagePlan | None:
    runtime = env.agent_runtime
    return runtime.plan(node, context) if runtime is not None else None


def run_agent(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    try:
        body = env.renderer.render(node.prompt or node.label, context, folders=list(env.folders),
                                   plain=node.template == "plain")
    except TemplateRenderError as err:
        return StageResult.fail(f"prompt template: {err}")
    choices = choice_literals(env.workflow, node)
    contract = contract_text(node.outputs, choices)
    plan = _plan(node, context, env)
    runtime = env.agent_runtime
    redact = runtime.redact if runtime is not None else (lambda text: text)
    preamble = plan.preamble if plan is not None else env.fidelity_preamble(node)
    message = redact("\n\n".join(part for part in (preamble, body, contract) if part))
    env.write_stage_file(node.id, attempt, "prompt.md", message)
    turns: list[tuple[str, str]] = []
    spent = [Usage()]

    def add_usage(usage: Usage) -> None:
        spent[0] = spent[0] + usage

    # a foreach stage's run for one folder has a session of its own (SPEC §8.1)
    key = f"{node.id}@{env.folder}" if env.folder else node.id
    sink = TurnSink(file=lambda name, text: env.write_stage_file(node.id, attempt, name, text),
                    usage=add_usage, node_id=key,
                    request=plan.request if plan is not None else None)
    session: AgentSession | None = None
    try:
        if plan is not None:
            session = plan.session or plan.backend.open_session(
                key, workspace=env.workspace, request=plan.request)
        else:
            session = env.agent.open_session(key, workspace=env.workspace,
                                             request=SessionRequest(key, env.workspace))
        for turn in range(MAX_CORRECTIONS + 1):
            turns.append(("prompt" if turn == 0 else "correction", message))
            reply = redact(session.send(message, sink))
            turns.append(("reply", reply))
            try:
                accepted = parse_reply(reply, node.outputs, choices, env.workflow.folders)
            except ContractViolation as violation:
                if turn == MAX_CORRECTIONS:
                    return _with_usage(StageResult.fail(
                        f"the reply broke the output contract {MAX_CORRECTIONS + 1} times; "
                        f"last problems: {'; '.join(violation.problems)}"
                    ), spent[0])
                message = redact(correction_prompt(violation, contract))
                continue
            break
    except AgentError as err:
        return _with_usage(StageResult.fail(redact(str(err))), spent[0])
    finally:
        env.write_stage_file(node.id, attempt, "response.md", _transcript(turns))
        if plan is not None and runtime is not None and session is not None:
            runtime.finished(node, plan, session)
            if spent[0].total_tokens or spent[0].cost_usd:
                runtime.record_usage(node, plan, spent[0])
    if accepted.outcome == StageOutcome.FAILED:
        return _with_usage(StageResult.fail(accepted.failure_reason or f"the agent reported "
                                            f"that '{node.id}' failed"), spent[0])
    if accepted.outcome == StageOutcome.RETRY:
        return _with_usage(StageResult(StageOutcome.RETRY, accepted.failure_reason), spent[0])
    updates: dict[str, Any] = dict(accepted.updates)
    if accepted.work is not None:
        updates["current_work"] = accepted.work.model_dump()
    updates[f"response.{node.id}"] = reply
    updates["last_response"] = reply[:LAST_RESPONSE_CHARS]
    result = StageResult(accepted.outcome or StageOutcome.SUCCEEDED, updates=updates,
                         preferred_label=accepted.preferred_label,
                         suggested_next_ids=accepted.suggested_next_ids)
    return _with_usage(result, spent[0])


def _with_usage(result: StageResult, usage: Usage) -> StageResult:
    if usage.total_tokens:
        result.usage = usage.to_json()
    if usage.cost_usd:
        result.cost_usd = round(usage.cost_usd, 9)
    return result
