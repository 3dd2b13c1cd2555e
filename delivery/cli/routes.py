"""`delivery inspect RUN --routes`: every routing decision of a run — enough to turn a loop
that wasted steps in a real run into a route scenario (`delivery test`)."""

from __future__ import annotations

from typing import Any, TextIO


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
            "suggested_next_ids": "the stage suggested this target (suggested_next_ids)",
            "failure_into_conditional": "the stage failed: unconditional edge into a "
                                        "conditional node, which routes on the failure",
            "retry_target": "the stage failed and no edge matched: retry target",
            "goal_gate": "an unmet goal gate sent the run back",
        }.get(str(route.get("rule")), str(route.get("rule")))
        print(f"  {route['step']:>4}. {route.get('source')} -> {route.get('target')}: {why}",
              file=out)
        facts = route.get("facts") or {}
        if facts:
            shown = ", ".join(f"{key}={'(missing)' if value is None else value}"
                              for key, value in facts.items())
            print(f"        read: {shown}", file=out)
