"""A run's routing decisions, read back from its event log (`edge_taken`, `failure_jump`,
`goal_gate_unmet`, `loop_restart` events): for each step where the run went, the rule that
chose the edge (a condition that held, the stage's preferred label, the highest weight; a
failure's retry target; an unmet goal gate), the condition and the values it read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROUTING_EVENTS = ("edge_taken", "failure_jump", "goal_gate_unmet", "loop_restart")


def read_routes(events_path: Path) -> list[dict[str, Any]]:
    """The routing decisions in the order they were taken; unreadable lines are skipped
    (`delivery verify` reports them)."""
    if not events_path.is_file():
        return []
    with events_path.open(encoding="utf-8", errors="replace") as log:
        return routes_from_lines(log)


def routes_from_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    routes: list[dict[str, Any]] = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("type") not in ROUTING_EVENTS:
            continue
        kind = event["type"]
        route: dict[str, Any] = {"step": len(routes) + 1, "event": kind}
        if kind == "edge_taken":
            route.update(source=event.get("source"), target=event.get("target"),
                         rule=event.get("rule", "condition" if event.get("condition")
                                        else "weight"),
                         condition=event.get("condition", ""), label=event.get("label", ""),
                         facts=event.get("facts", {}))
        elif kind == "failure_jump":
            route.update(source=event.get("source"), target=event.get("target"),
                         rule="retry_target")
        elif kind == "goal_gate_unmet":
            route.update(source=event.get("node"), target=event.get("target"),
                         rule="goal_gate")
        else:
            route.update(rule="loop_restart")
        routes.append(route)
    return routes


