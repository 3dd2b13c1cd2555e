"""Choosing the next edge after a stage (SPEC §1.3), as Attractor does.

1. edges whose condition holds — highest weight, then lexically first target;
2. an unconditional edge whose label (or, unlabeled, target) matches the preferred label;
3. an unconditional edge to one of the reply's `suggested_next_ids`, in their order;
4. the highest-weight unconditional edge, lexical tiebreak.
After a failed stage only conditions that test `outcome` (and hold) are eligible, plus an
unconditional edge into a conditional node (it keeps the outcome and routes on it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from delivery.lang.model import Edge
from delivery.lang.paths import MISSING, string_form

_ACCELERATOR = re.compile(r"^\s*(?:\[[^\]]{1,3}\]\s*|[A-Za-z0-9]\)\s*|[A-Za-z0-9]\s+-\s+)")


def normalize_label(label: str) -> str:
    """Lower-cased, whitespace-collapsed, without an accelerator prefix (`[Y] `, `Y) `)."""
    return " ".join(_ACCELERATOR.sub("", label).split()).lower()


def accelerator(label: str) -> str:
    """The accelerator key of a label (`[A] Approve` → `A`), or the label's first character."""
    m = re.match(r"^\s*\[([^\]]{1,3})\]|^\s*([A-Za-z0-9])\)", label)
    if m:
        return (m.group(1) or m.group(2)).strip()
    stripped = label.strip()
    return stripped[:1].upper()


def _best(edges: Sequence[Edge]) -> Edge:
    return min(edges, key=lambda e: (-e.weight, e.target, e.index))


def select_edge(
    edges: Sequence[Edge],
    lookup: Callable[[str], Any],
    *,
    failed: bool,
    preferred_label: str = "",
    suggested_next_ids: Sequence[str] = (),
    into_conditional: Callable[[Edge], bool] = lambda edge: False,
) -> Edge | None:
    holding = [
        edge for edge in edges
        if edge.condition is not None
        and (not failed or edge.condition.tests_outcome())
        and edge.condition.evaluate(lookup)
    ]
    if holding:
        return _best(holding)
    unconditional = [edge for edge in edges if edge.condition is None]
    if failed:
        # SPEC §1.3: a failure flows on only into a conditional node, which routes on it
        unconditional = [edge for edge in unconditional if into_conditional(edge)]
    if not unconditional:
        return None
    if preferred_label:
        wanted = normalize_label(preferred_label)
        # an unlabeled edge is named by its target (as a human gate offers it)
        matching = [edge for edge in unconditional
                    if normalize_label(edge.label or edge.target) == wanted]
        if matching:
            return _best(matching)
    for suggested in suggested_next_ids:
        matching = [edge for edge in unconditional if edge.target == suggested]
        if matching:
            return _best(matching)
    return _best(unconditional)


def route_rule(edge: Edge, *, preferred_label: str = "", failed: bool = False,
               suggested_next_ids: Sequence[str] = ()) -> str:
    """Which step of the routing order chose `edge` (recorded for `inspect --routes`)."""
    if edge.condition is not None:
        return "condition"
    if failed:
        return "failure_into_conditional"
    if preferred_label and normalize_label(edge.label or edge.target) == normalize_label(
            preferred_label):
        return "preferred_label"
    if edge.target in suggested_next_ids:
        return "suggested_next_ids"
    return "weight"


FACT_CHARS = 200  # a routed-on value longer than this is cut in the event


def facts_read(edges: Sequence[Edge], lookup: Callable[[str], Any]) -> dict[str, Any]:
    """The context values the conditions of `edges` read, by key (missing keys as None)."""
    keys = sorted({key for edge in edges if edge.condition is not None
                   for key in edge.condition.keys()})  # noqa: SIM118 (not a dict)
    values: dict[str, Any] = {}
    for key in keys:
        value = lookup(key)
        if value is MISSING:
            values[key] = None
        else:
            text = string_form(value)
            values[key] = (text if len(text) <= FACT_CHARS
                           else f"{text[:FACT_CHARS]}... ({len(text)} characters)")
    return values
