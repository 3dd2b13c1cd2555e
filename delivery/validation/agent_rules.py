"""Checks of the attributes that choose an agent's model (Attractor §8).

Rule ids: `stylesheet_syntax` (the graph's `model_stylesheet` parses; the diagnostic points
at the character where it stops making sense) and `reasoning_effort_valid` (a node's or the
graph's `reasoning_effort` is `low`, `medium` or `high`).
"""

from __future__ import annotations

from delivery.lang.attr_values import value_position
from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import Attribute, Workflow
from delivery.lang.stylesheet import REASONING_EFFORTS, StylesheetError, parse_stylesheet


def check_model_attributes(workflow: Workflow) -> list[Diagnostic]:
    found: list[Diagnostic] = []

    def add(rule: str, attr: Attribute, offset: int, message: str, fix: str,
            node: str | None = None) -> None:
        line, column = value_position(attr.value, offset)
        found.append(Diagnostic(rule, "error", message, workflow.file, line, column, node,
                                None, fix))

    sheet = workflow.attrs.get("model_stylesheet")
    if sheet is not None and sheet.text.strip():
        try:
            parse_stylesheet(sheet.text)
        except StylesheetError as err:
            add("stylesheet_syntax", sheet, err.offset, f"model_stylesheet: {err.problem}",
                err.fix)
    owners: list[tuple[str | None, dict[str, Attribute]]] = [(None, workflow.attrs)]
    owners += [(node.id, node.attrs) for node in workflow.nodes.values()]
    for owner, attrs in owners:
        effort = attrs.get("reasoning_effort")
        if effort is not None and effort.text not in REASONING_EFFORTS:
            add("reasoning_effort_valid", effort, 0,
                f"reasoning_effort '{effort.text}' is not one of "
                f"{', '.join(REASONING_EFFORTS)}", 'write reasoning_effort="high"', owner)
    return found
