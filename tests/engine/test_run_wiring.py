"""A run's wiring reads in pipeline order (issue 35 item 1): the command calls the runner's
entry points, which resolve the request into one `RunPlan` (delivery.engine.run_plan) and
run it; the plan's steps use the setup modules below it, and nothing below climbs back up.

Checked on the source's imports (every import that can run, function-level ones included:
tests/test_import_cycles.py reads them), followed to the end, not one level deep."""

from __future__ import annotations

from test_import_cycles import import_graph

# the path a request takes, top to bottom: each module may import only those after it
WIRING = (
    "delivery.cli.commands",
    "delivery.engine.runner",
    "delivery.engine.run_plan",
    "delivery.engine.branch_check",
    "delivery.engine.preflight_gate",
    "delivery.engine.child_runs",
    "delivery.engine.run_loop",
    "delivery.engine.run_setup",
    "delivery.engine.world",
    "delivery.engine.run_request",
)


def reached(graph: dict[str, set[str]], module: str) -> set[str]:
    """Every module that importing `module` imports, at any depth."""
    seen: set[str] = set()
    frontier = [module]
    while frontier:
        for target in graph[frontier.pop()] - seen:
            seen.add(target)
            frontier.append(target)
    return seen


def test_each_wiring_module_imports_only_the_wiring_below_it() -> None:
    graph = import_graph()
    assert set(WIRING) <= set(graph), sorted(set(WIRING) - set(graph))
    upward = {module: sorted(reached(graph, module) & set(WIRING[:place + 1]))
              for place, module in enumerate(WIRING)}
    assert {module: above for module, above in upward.items() if above} == {}


def test_the_runner_runs_what_the_plan_resolved() -> None:
    graph = import_graph()
    assert "delivery.engine.run_plan" in graph["delivery.engine.runner"]
