"""Stage handlers that play a scenario's script instead of touching the world.

Scripts give an exit code and facts (the command is not run); probes give per-folder facts,
with neutral values for what they leave out and roll-ups computed by `probes.facts` — the
same code a real probe uses; publish, merge, respond, wait and worktree stages succeed without
effect unless scripted. A node visited more often than its script allows fails its stage,
and the scenario reports the node as having run out of scripted visits. A foreach script
(SPEC §8.1) plays each folder's own visits (`checks@api`) when the scenario gives them, else
the node's, with a count per folder: every folder's first run plays the first visit.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from delivery.engine.context import Context
from delivery.engine.foreach import stage_key
from delivery.engine.handlers.base import Handler, StageEnv, StageResult
from delivery.lang.model import Node, NodeType
from delivery.lang.outcomes import StageOutcome, standard_outcome
from delivery.scenarios.model import Scenario, ScriptVisit, StageVisit
from probes.facts import neutral_pr_facts, roll_up_facts

V = TypeVar("V")


@dataclass
class Exhausted:
    node_id: str  # `<node>@<folder>` for one folder's run of a foreach node
    visit: int  # 1-based number of the visit that had no script


@dataclass
class ScenarioPlayer:
    """Hands out each node's scripted visits in order and notes when one runs out."""

    scenario: Scenario
    visits: dict[str, int] = field(default_factory=dict)
    exhausted: list[Exhausted] = field(default_factory=list)
    # a foreach stage's folders run on worker threads
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_visit(self, node_id: str, script: Mapping[str, Sequence[V]],
                   folder: str = "") -> V | None:
        """The next scripted visit of `node_id` (of its run for `folder`: the folder's own
        script if the scenario has one, else the node's, counted per folder)."""
        key = stage_key(node_id, folder) if folder else node_id
        with self.lock:
            count = self.visits.get(key, 0) + 1
            self.visits[key] = count
            given = script.get(key) if key in script else script.get(node_id)
            if given is None or count > len(given):
                self.exhausted.append(Exhausted(key, count))
                return None
        return given[count - 1]

    def handlers(self) -> dict[NodeType, Handler]:
        table: dict[NodeType, Handler] = {
            NodeType.SCRIPT: self.run_script,
            NodeType.PROBE: self.run_probe,
        }
        for kind in (NodeType.PUBLISH, NodeType.MERGE, NodeType.RESPOND, NodeType.WAIT,
                     NodeType.WORKTREE_ADD, NodeType.WORKTREE_REMOVE):
            table[kind] = self.run_effect
        return table

    def _ran_out(self, node: Node, key: str = "") -> StageResult:
        key = key or node.id
        return StageResult.fail(f"scenario: node '{key}' ran out of scripted visits "
                                f"(visit {self.visits[key]})")

    def run_script(self, node: Node, attempt: int, context: Context,
                   env: StageEnv) -> StageResult:
        folder = env.folder if node.foreach else ""
        visit: ScriptVisit | None = self.next_visit(node.id, self.scenario.scripts, folder)
        if visit is None:
            return self._ran_out(node, stage_key(node.id, folder) if folder else node.id)
        updates: dict[str, Any] = {name: _fact_text(value) for name, value in visit.facts.items()}
        updates[f"{node.id}.failed"] = visit.exit != 0
        if visit.exit != 0:
            return StageResult.fail(f"script exited with status {visit.exit} (scripted)",
                                    updates)
        return StageResult(StageOutcome.SUCCEEDED, updates=updates)

    def run_probe(self, node: Node, attempt: int, context: Context,
                  env: StageEnv) -> StageResult:
        observed: dict[str, Any] | None = self.next_visit(node.id, self.scenario.probes)
        if observed is None:
            return self._ran_out(node)
        folders = list(self.scenario.folders)
        if node.folder:
            folders = [node.folder]
        facts: dict[str, Any] = {}
        for folder in folders:
            facts.update(neutral_pr_facts(folder))
        facts.update(observed)
        facts.update(roll_up_facts(facts, folders))
        return StageResult(StageOutcome.SUCCEEDED, updates=facts)

    def run_effect(self, node: Node, attempt: int, context: Context,
                   env: StageEnv) -> StageResult:
        if node.id not in self.scenario.stages:
            self.visits[node.id] = self.visits.get(node.id, 0) + 1
            return StageResult(StageOutcome.SUCCEEDED)
        visit: StageVisit | None = self.next_visit(node.id, self.scenario.stages)
        if visit is None:
            return self._ran_out(node)
        if standard_outcome(visit.outcome) is StageOutcome.FAILED:  # (`fail` too)
            return StageResult.fail(visit.failure_reason or "failed (scripted)",
                                    dict(visit.updates))
        return StageResult(StageOutcome.SUCCEEDED, updates=dict(visit.updates))


def _fact_text(value: object) -> str:
    """Facts are stored as the text a script writes (`true`, `3`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
