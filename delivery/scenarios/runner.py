"""Running route scenarios (`delivery test`, SPEC §12.1): each scenario is a real run of the
workflow through the engine, in-process, with a fake clock, the replay agent for agent
stages, scripted answers for gates, and scripted handlers for scripts, probes and effects.

A scenario fails on the first of: a node that ran out of scripted visits, a path that
diverges (reported with the step, the expected node, the node taken and the condition or
rule that chose it, from the run's `edge_taken` events), then any other expectation.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from delivery.agents.base import AgentError, SessionRequest, TurnSink, Usage
from delivery.agents.replay import ReplayBackend, ReplaySession
from delivery.engine.foreach import stage_key
from delivery.engine.handlers.base import StageResult
from delivery.engine.interviewer import ScriptedInterviewer
from delivery.engine.route_log import read_routes
from delivery.engine.run_loop import EngineOptions, Progress
from delivery.engine.runner import RunRequest, World, start_run
from delivery.errors import RunError
from delivery.forges.stop_label import Stop, StopTarget
from delivery.lang.model import Node, Workflow
from delivery.scenarios.expect import Mismatch, PathDivergence, check_expectation
from delivery.scenarios.model import (
    LoadedScenarios,
    Scenario,
    StopScript,
    check_scenarios,
    load_scenarios,
)
from delivery.scenarios.stages import Exhausted, ScenarioPlayer
from delivery.validation.loader import load_workflow

DEFAULT_GOAL = "Scenario goal"
# A scenario that loops for ever stops long before the engine's own limit.
SCENARIO_MAX_STEPS = 1000


class ScenarioClock:
    """Time stands still except when a stage sleeps (wait stages, retry backoff)."""

    def __init__(self) -> None:
        self.elapsed = 0.0

    def monotonic(self) -> float:
        return self.elapsed

    def sleep(self, seconds: float) -> None:
        self.elapsed += max(seconds, 0.0)

    def now(self) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self.elapsed)


class _CostlySession(ReplaySession):
    """A replay session whose replies report the scenario's `tokens` as their usage."""

    def send(self, message: str, sink: TurnSink | None = None) -> str:
        text = super().send(message, sink)
        speaker = sink.node_id if sink is not None and sink.node_id else self.node_id
        assert isinstance(self.backend, _ScenarioAgent)
        tokens = self.backend.tokens_of(speaker)
        if tokens and sink is not None:
            sink.usage(Usage(0, tokens))
        return text


class _ScenarioAgent(ReplayBackend):
    """The replay agent, noting the nodes whose scripted replies ran out, and reporting
    the scenario's `tokens` for each reply."""

    def __init__(self, replies: Mapping[str, Sequence[str]],
                 tokens: Mapping[str, Sequence[int]] | None = None) -> None:
        super().__init__(replies, source="the scenario's replies")
        self.exhausted: list[Exhausted] = []
        self.tokens = {node: list(counts) for node, counts in (tokens or {}).items()}
        self._spent: dict[str, int] = {}

    def open_session(self, node_id: str, *, workspace: Path,
                     request: SessionRequest | None = None) -> ReplaySession:
        return _CostlySession(self, node_id, workspace)

    def tokens_of(self, node_id: str) -> int:
        """The tokens the node's next reply reports (0 past the end of its list); a foreach
        stage's session for one folder (`implement@web`) plays its own list if the
        scenario has one, else the node's, from the start, as its replies do."""
        index = self._spent.get(node_id, 0)
        self._spent[node_id] = index + 1
        counts = self.tokens.get(node_id, self.tokens.get(node_id.split("@", 1)[0], []))
        return counts[index] if index < len(counts) else 0

    def next_reply(self, node_id: str, message: str) -> str:
        try:
            return super().next_reply(node_id, message)
        except AgentError:
            used = sum(1 for node, _ in self.prompts if node == node_id)
            self.exhausted.append(Exhausted(node_id, used))
            raise


class _ScriptedStopLabel(Progress):
    """The stop label as a scenario scripts it: set once its `after` node has run."""

    def __init__(self, stop: StopScript) -> None:
        self.stop = stop
        self.set = False

    def stage_finished(self, node: Node, result: StageResult, seconds: float) -> None:
        self.set = self.set or node.id == self.stop.after

    def stop_label(self, targets: Sequence[StopTarget]) -> Stop | None:
        if not self.set:
            return None
        return Stop(self.stop.on, self.stop.by, "", "")


@dataclass
class ScenarioResult:
    name: str
    line: int
    passed: bool
    status: str = ""
    path: list[str] = field(default_factory=list)
    failure_reason: str = ""
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "line": self.line, "passed": self.passed,
                "status": self.status, "path": self.path,
                "failure_reason": self.failure_reason, "problems": self.problems}


def run_file(path: Path) -> list[ScenarioResult]:
    """Load, check and run every scenario of a file (ScenarioFileError / WorkflowError when
    the file or its workflow is wrong)."""
    loaded = load_scenarios(path)
    workflow = load_workflow(loaded.workflow_path)
    check_scenarios(loaded, workflow, path.read_text(encoding="utf-8"))
    # throwaway runs: in memory where the system offers it (a flush there costs nothing)
    memory = Path("/dev/shm")
    scratch_root = str(memory) if memory.is_dir() and os.access(memory, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="delivery-test-", dir=scratch_root) as scratch:
        return [run_scenario(loaded, index, Path(scratch) / str(index), workflow)
                for index in range(len(loaded.scenarios))]


def run_scenario(loaded: LoadedScenarios, index: int, folder: Path,
                 workflow: Workflow | None = None) -> ScenarioResult:
    scenario = loaded.scenarios[index]
    folder.mkdir(parents=True)
    # the folders' stand-in location, beside the run directory (never holding it: a run
    # directory inside a folder is refused, its files would be published)
    repository = folder / "repository"
    repository.mkdir()
    player = ScenarioPlayer(scenario)
    agent = _ScenarioAgent(scenario.replies, scenario.tokens)
    answers: dict[str, list[str]] = {node: list(given) for node, given in scenario.answers.items()}
    interviewer = ScriptedInterviewer(answers)
    stop = _ScriptedStopLabel(scenario.stop) if scenario.stop is not None else None
    world = World(agent=agent, interviewer=interviewer, clock=ScenarioClock(),
                  environ={}, handlers=player.handlers(), stop_labels=stop)
    request = RunRequest(workflow=loaded.workflow_path, goal=scenario.goal or DEFAULT_GOAL,
                         inputs=scenario.inputs, workspace=folder, run_dir=folder / "run",
                         repos={name: str(repository) for name in scenario.folders},
                         model=workflow, budget=scenario.budget or "")
    result = ScenarioResult(scenario.name, loaded.lines[index], passed=False)
    try:
        outcome = start_run(request, world, observer=stop,
                            options=EngineOptions(max_steps=SCENARIO_MAX_STEPS))
    except RunError as err:
        result.problems.append(f"the run was refused: {err}")
        return result
    result.status, result.path = outcome.status, list(outcome.path)
    result.failure_reason = outcome.failure_reason
    ran_out = player.exhausted + agent.exhausted + _gates_out_of_answers(
        scenario, interviewer, outcome.path)
    for gone in ran_out:
        result.problems.append(f"node '{gone.node_id}' ran out of scripted visits "
                               f"(visit {gone.visit} had none; add one to the scenario)")
    if not ran_out:
        mismatches = check_expectation(scenario.expect, status=outcome.status,
                                       path=outcome.path, context=outcome.context,
                                       failure_reason=outcome.failure_reason,
                                       folder_runs=_folder_runs(outcome.run_dir))
        result.problems += [_explain(m, outcome.run_dir) for m in mismatches]
    result.passed = not result.problems
    return result


def _gates_out_of_answers(scenario: Scenario, interviewer: ScriptedInterviewer,
                          path: Sequence[str]) -> list[Exhausted]:
    """A gate the scenario answers, visited more often than it has answers."""
    gone = []
    for node_id, given in scenario.answers.items():
        visits = sum(1 for step in path if step == node_id)
        if visits > len(given):
            gone.append(Exhausted(node_id, len(given) + 1))
    return gone


def _folder_runs(run_dir: Path) -> Counter[str]:
    """How often each folder's run of a foreach node started (`implement@web`), from the
    run's `folder_started` events."""
    runs: Counter[str] = Counter()
    events = run_dir / "events.jsonl"
    if not events.is_file():
        return runs
    with events.open(encoding="utf-8", errors="replace") as log:
        for line in log:
            if '"folder_started"' not in line:
                continue
            event = json.loads(line)
            if event.get("type") == "folder_started":
                runs[stage_key(str(event.get("node")), str(event.get("folder")))] += 1
    return runs


def _explain(mismatch: Mismatch, run_dir: Path) -> str:
    if mismatch.divergence is None or mismatch.divergence.taken is None:
        return mismatch.message
    return f"{mismatch.message} ({_why(mismatch.divergence, run_dir)})"


def _why(divergence: PathDivergence, run_dir: Path) -> str:
    """The rule that sent the run to the node it took at the divergence."""
    routes = read_routes(run_dir / "events.jsonl")
    # routing decision i moved the run from path[i] to path[i + 1]
    step = divergence.step - 1
    if not 0 <= step < len(routes):
        return "the run started there"
    route = routes[step]
    rule = route.get("rule")
    if rule == "condition":
        read = ", ".join(f"{k}={'(missing)' if v is None else v}"
                         for k, v in (route.get("facts") or {}).items())
        return f"chosen by condition {route.get('condition')!r} on {read}"
    if rule == "preferred_label":
        return f"chosen by the preferred label {route.get('label')!r}"
    if rule == "retry_target":
        return f"'{route.get('source')}' failed and no edge matched: its retry target"
    if rule == "goal_gate":
        return "an unmet goal gate sent the run back"
    return "the unconditional edge with the highest weight"
