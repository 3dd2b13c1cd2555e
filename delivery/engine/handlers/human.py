"""Human gates (SPEC §9.1): the choices are the outgoing edge labels; the answer routes by
label.

Who answers, in this order: a scripted `--answer`; a person on the console (on a
terminal); in managed mode (`--gates managed`) the node's agent — only when the gate says
`delegatable=true`, its choice checked against the labels like a `choice` output, with
correction turns; otherwise the run pauses (`--gates pause`) or the gate is denied. A gate
that is not delegatable is never answered by an agent. Who answered goes into the context
(`human.gate.answered_by`) and the event log (`gate_answered`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from delivery.agents.base import AgentError
from delivery.engine.context import Context
from delivery.engine.contracts import (
    MAX_CORRECTIONS,
    ContractViolation,
    contract_text,
    correction_prompt,
    parse_reply,
)
from delivery.engine.handlers.base import StageEnv, StageResult
from delivery.engine.interviewer import Answer, PauseRequested, match_choice
from delivery.engine.routing import accelerator
from delivery.engine.templating import TemplateRenderError
from delivery.errors import RunRefused
from delivery.lang.declarations import OutputDecl, OutputKind
from delivery.lang.model import Node, NodeType, Workflow
from delivery.store.records import GateMode

CHOICE = OutputDecl("choice", OutputKind.CHOICE, 0)


def gate_choices(node: Node, env: StageEnv) -> list[str]:
    return choices_of(env.workflow, node.id)


def choices_of(workflow: Workflow, node_id: str) -> list[str]:
    """The labels (or, unlabeled, the targets) of the edges an answer can route to.

    An answer routes by preferred label, which only unconditional edges take, so a
    conditional edge (`outcome=failed` for a denied gate) is not offered as a choice —
    unless the gate has no unconditional edge at all (Attractor offers every edge).
    """
    edges = workflow.outgoing[node_id]
    choosable = [edge for edge in edges if edge.condition is None] or list(edges)
    return [edge.label or edge.target for edge in choosable]


def refuse_unknown_answers(workflow: Workflow, answers: Mapping[str, Sequence[str]],
                           option: str = "--answer") -> None:
    """RunRefused, before the run, for an answer no visit of its gate could take: a label
    that is none of the gate's choices (it would be denied, or pause the run, only when
    the gate is reached), or a gate the workflow does not have. A workflow with manager
    loops may pass answers on to its children's gates: there only the labels of its own
    gates are checked."""
    gates = [node.id for node in workflow.nodes_of(NodeType.HUMAN)]
    children = bool(workflow.nodes_of(NodeType.MANAGER_LOOP))
    for gate, given in answers.items():
        if gate not in gates:
            if children:
                continue
            raise RunRefused(f"{option} {gate}={given[0] if given else ''}",
                             "names no human gate of the workflow",
                             f"the human gates are: {', '.join(gates) or 'none'}")
        choices = choices_of(workflow, gate)
        for label in given:
            if match_choice(label, choices) is None:
                raise RunRefused(f"{option} {gate}={label}", "is not one of the choices of "
                                 f"human gate '{gate}'", "answer with one of: "
                                 f"{', '.join(choices)} (a label, or its key)")


def run_human(node: Node, attempt: int, context: Context, env: StageEnv) -> StageResult:
    choices = gate_choices(node, env)
    answer = env.interviewer.ask(node.id, node.label, choices)
    if answer is None and env.gates is GateMode.MANAGED and node.delegatable:
        answer, problem = _delegate(node, attempt, context, env, choices)
        if answer is None:
            return StageResult.fail(problem)
    if answer is None:
        if env.gates is GateMode.PAUSE:
            raise PauseRequested(node.id, choices)
        why = (": it is not delegatable, so its agent may not answer it"
               if env.gates is GateMode.MANAGED else "")
        return StageResult.fail(
            f"human gate '{node.id}' got no answer and was denied{why} (answer with --answer "
            f"{node.id}=LABEL, or --gates pause to wait; choices: {', '.join(choices)})"
        )
    result = StageResult.ok()
    result.updates = {
        "human.gate.selected": accelerator(answer.label),
        "human.gate.label": answer.label,
        "human.gate.text": answer.text,
        "human.gate.answered_by": answer.by,
    }
    result.preferred_label = answer.label
    result.events.append(("gate_answered", {"node": node.id, "label": answer.label,
                                            "by": answer.by}))
    return result


def _delegate(node: Node, attempt: int, context: Context, env: StageEnv,
              choices: list[str]) -> tuple[Answer | None, str]:
    """The node's agent answers the gate on a person's behalf; (None, why) when it fails."""
    try:
        question = env.renderer.render(node.prompt or node.label, context,
                                       folders=list(env.folders))
    except TemplateRenderError as err:
        return None, f"gate question template: {err}"
    allowed = {CHOICE.name: choices}
    contract = contract_text([CHOICE], allowed)
    listed = "\n".join(f"- {choice}" for choice in choices)
    body = (f"You answer the human gate '{node.id}' on a person's behalf (it is delegatable)."
            f"\n\nQuestion: {question}\n\nChoices:\n{listed}")
    message = "\n\n".join(part for part in (env.fidelity_preamble(node), body, contract) if part)
    env.write_stage_file(node.id, attempt, "prompt.md", message)
    transcript: list[str] = []
    try:
        runtime = env.agent_runtime  # the gate's own agent= profile, else the default
        agent = runtime.agents.for_profile(node.attr("agent")) if runtime else env.agent
        session = agent.open_session(node.id, workspace=env.workspace)
        for turn in range(MAX_CORRECTIONS + 1):
            transcript.append(f"## {'prompt' if turn == 0 else 'correction'}\n\n{message}\n")
            reply = session.send(message)
            transcript.append(f"## reply\n\n{reply}\n")
            try:
                accepted = parse_reply(reply, [CHOICE], allowed)
            except ContractViolation as violation:
                message = correction_prompt(violation, contract)
                continue
            return Answer(str(accepted.updates[CHOICE.name]), by="agent"), ""
    except AgentError as err:
        return None, f"human gate '{node.id}': its agent could not answer: {err}"
    finally:
        env.write_stage_file(node.id, attempt, "response.md", "\n".join(transcript))
    return None, (f"human gate '{node.id}': its agent's answer was not one of the choices "
                  f"({', '.join(choices)}) after {MAX_CORRECTIONS + 1} replies")
