"""Shared by the budget and stop-switch tests: a chain of agent stages whose scripted agent
reports what each turn cost, as a real backend reports its counts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from delivery.agents.base import Usage
from delivery.agents.scripted import ScriptedAgent, ScriptedTurn
from delivery.testing.runs import reply, write_flow

STAGES = ("plan", "build", "test", "polish")


def chain_flow(folder: Path, graph_attrs: str = "", stages: Sequence[str] = STAGES) -> Path:
    """start -> each stage (an agent) -> exit."""
    nodes = "\n".join(f'  {s} [shape=box, prompt="do {s}"]' for s in stages)
    return write_flow(folder, f"""
    digraph budget {{
      graph [goal="ship" {graph_attrs}]
      start [shape=Mdiamond]; exit [shape=Msquare]
    {nodes}
      start -> {" -> ".join(stages)} -> exit
    }}
    """)


def costly_agent(tokens: int, stages: Sequence[str] = STAGES, cost_usd: float = 0.0,
                 visits: int = 1) -> ScriptedAgent:
    """Every turn of every stage costs `tokens` (half in, half out) and `cost_usd`."""
    usage = Usage(tokens // 2, tokens - tokens // 2, cost_usd)
    return ScriptedAgent({stage: [ScriptedTurn(reply({}), usage=usage)] * visits
                          for stage in stages})


def events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    found = [json.loads(line) for line in lines]
    return [event for event in found if event.get("type") == kind]
