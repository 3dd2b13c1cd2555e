"""`delivery inspect RUN --routes`: every routing decision of a run, from its event log.

For each step: where the run went, the rule that chose the edge (a condition that held, the
stage's preferred label, the highest weight; a failure's retry target; an unmet goal gate),
the condition and the values the conditions read — enough to turn a loop that wasted steps
in a real run into a route scenario (`delivery test`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

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
                         outcome=event.get("outcome", ""), facts=event.get("facts", {}))
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


def print_routes(routes: list[dict[str, Any]], out: TextIO) -> None:
    if not routes:
        print("  no routing decisions recorded", file=out)
        return
    for route in routes:
        if route["event"] == "loop_restart":
            print(f"  {route['step']:>4}. loop restart: the context was reset", file=out)
            continue
        why = {
            "condition": f"condition {route.get('condition')!r} held",
            "preferred_label": f"preferred label {route.get('label')!r}",
            "weight": "unconditional edge (highest weight, then first target)",
            "retry_target": "the stage failed and no edge matched: retry target",
            "goal_gate": "an unmet goal gate sent the run back",
        }.get(str(route.get("rule")), str(route.get("rule")))
        outcome = f" [outcome {route['outcome']}]" if route.get("outcome") else ""
        print(f"  {route['step']:>4}. {route.get('source')} -> {route.get('target')}"
              f"{outcome}: {why}", file=out)
        facts = route.get("facts") or {}
        if facts:
            shown = ", ".join(f"{key}={'(missing)' if value is None else value}"
                              for key, value in facts.items())
            print(f"        read: {shown}", file=out)
