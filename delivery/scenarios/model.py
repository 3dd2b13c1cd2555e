"""Scenario files (SPEC §12.1): TOML read into typed models, then checked against the
workflow before any scenario runs — an unknown node, folder or fact is an error with its
line, like a workflow error.

TOML parsers do not report positions, so a problem's line is found again in the text: the
line of the scenario's `[[scenario]]` header, then the first line after it that names the
offending key.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from delivery.errors import ScenarioFileError
from delivery.lang.model import NodeType, Workflow
from probes.pr_state import PR_STATES

# Per-folder facts a probe visit may give (SPEC §7); roll-ups are computed, never given.
PER_FOLDER_FACTS = frozenset({
    "pr.state", "pr.ready", "pr.number", "pr.url", "pr.raw", "threads.unresolved",
    "threads.ids",
    "diff.files", "diff.insertions", "diff.deletions", "diff.empty",
    "worktree.exists", "worktree.dirty", "worktree.branch", "worktree.head",
})
EFFECT_TYPES = frozenset({NodeType.PUBLISH, NodeType.MERGE, NodeType.RESPOND, NodeType.WAIT,
                          NodeType.WORKTREE_ADD, NodeType.WORKTREE_REMOVE})
ANY_NODES = "..."

FactScalar = str | StrictBool | StrictInt | float


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptVisit(_Strict):
    exit: StrictInt = 0
    facts: dict[str, FactScalar] = Field(default_factory=dict)


class StageVisit(_Strict):
    outcome: str = "succeeded"
    failure_reason: str = ""
    updates: dict[str, Any] = Field(default_factory=dict)


class StopScript(_Strict):
    """The label `delivery:stop` appears once `after` has run (its first visit), set by
    `by` on `on` (a folder's PR, or the ticket); the stop switch sees it at the next
    boundary it reads at."""

    after: str
    by: str = "a-person"
    on: str = "ticket"


class Expectation(_Strict):
    status: str | None = None
    path: list[str] | None = None
    visits: dict[str, StrictInt] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    failure_reason: str | None = None


class Scenario(_Strict):
    name: str
    goal: str | None = None
    inputs: dict[str, str] = Field(default_factory=dict)
    folders: list[str] = Field(default_factory=list)
    replies: dict[str, list[str]] = Field(default_factory=dict)
    scripts: dict[str, list[ScriptVisit]] = Field(default_factory=dict)
    probes: dict[str, list[dict[str, FactScalar]]] = Field(default_factory=dict)
    stages: dict[str, list[StageVisit]] = Field(default_factory=dict)
    answers: dict[str, list[str]] = Field(default_factory=dict)
    # the agent budget (as `--budget`: tokens, or "$N") and the tokens each reply of an
    # agent node reports, in order (SPEC §7.1 "Budget and stop switch")
    budget: str | None = None
    tokens: dict[str, list[StrictInt]] = Field(default_factory=dict)
    stop: StopScript | None = None
    expect: Expectation = Field(default_factory=Expectation)


class ScenarioFile(_Strict):
    workflow: str
    scenario: list[Scenario] = Field(min_length=1)


@dataclass(frozen=True)
class LoadedScenarios:
    path: Path
    workflow_path: Path
    scenarios: list[Scenario]
    lines: list[int]  # the line of each scenario's [[scenario]] header


class _Locator:
    """Finds the line of a key inside one scenario's block of the TOML text."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers = [i + 1 for i, line in enumerate(self.lines)
                        if re.match(r"\s*\[\[\s*scenario\s*\]\]", line)]

    def header(self, index: int) -> int:
        return self.headers[index] if index < len(self.headers) else 1

    def key(self, index: int, *names: str, value: str = "") -> int:
        """The line of the last of `names`, each looked for after the previous one; with
        `value`, the first such line that also holds that text."""
        start = self.header(index)
        end = self.headers[index + 1] if index + 1 < len(self.headers) else len(self.lines) + 1
        for position, name in enumerate(names):
            pattern = re.compile(r"(?<![\w.])" + re.escape(name) + r"(?![\w])")
            last = position == len(names) - 1
            for number in range(start, end):
                line = self.lines[number - 1]
                if pattern.search(line) and (not last or value in line):
                    start = number  # later names are looked for from here on
                    break
        return start


def load_scenarios(path: Path) -> LoadedScenarios:
    """The scenarios of a file, or ScenarioFileError naming `file:line` and the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioFileError(str(path), 0, f"cannot be read: {err}",
                                "check the path and that the file is UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        line = getattr(err, "lineno", 0) or _toml_error_line(str(err))
        raise ScenarioFileError(str(path), line, f"is not valid TOML: {err}",
                                "fix the TOML syntax") from None
    locator = _Locator(text)
    try:
        parsed = ScenarioFile.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = [str(part) for part in first["loc"]]
        line = 1
        if len(where) >= 2 and where[0] == "scenario" and where[1].isdigit():
            line = locator.key(int(where[1]), *where[2:3])
        field = ".".join(where) or "the file"
        raise ScenarioFileError(str(path), line, f"{field}: {first['msg']}",
                                "see docs/testing-workflows.md for the scenario format") from None
    workflow_path = (path.parent / parsed.workflow).resolve()
    return LoadedScenarios(path, workflow_path, parsed.scenario,
                           [locator.header(i) for i in range(len(parsed.scenario))])


def _toml_error_line(message: str) -> int:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else 0


def check_scenarios(loaded: LoadedScenarios, workflow: Workflow, text: str) -> None:
    """Every node, folder and fact a scenario names exists; raises on the first that does not."""
    locator = _Locator(text)
    names = [scenario.name for scenario in loaded.scenarios]
    for index, scenario in enumerate(loaded.scenarios):
        def fail(problem: str, fix: str, *keys: str, index: int = index,
                 value: str = "") -> None:
            raise ScenarioFileError(str(loaded.path), locator.key(index, *keys, value=value),
                                    f"scenario {names[index]!r}: {problem}", fix)

        def node_of(node_id: str, section: str, kinds: frozenset[NodeType] | None,
                    what: str) -> None:
            node = workflow.nodes.get(node_id)
            if node is None:
                fail(f"{section} names node '{node_id}', which the workflow does not have",
                     f"use one of: {', '.join(sorted(workflow.nodes))}", section, node_id)
            elif kinds is not None and node.type not in kinds:
                kind = node.type.value if node.type else "unknown"
                fail(f"{section} names node '{node_id}', a {kind} node, not {what}",
                     f"script {section} only for {what}", section, node_id)

        def target(key: str, section: str, kinds: frozenset[NodeType] | None,
                   what: str, scenario: Scenario = scenario) -> str:
            """The node a key names: `node`, or `node@folder` for one folder's runs of a
            foreach node (SPEC §8.1)."""
            node_id, at, folder = key.partition("@")
            node_of(node_id, section, kinds, what)
            if not at:
                return node_id
            if not workflow.nodes[node_id].foreach:
                fail(f"{section} names '{key}', but node '{node_id}' does not run per folder "
                     "(no foreach=\"folders\")", f"name the node alone: '{node_id}'",
                     section, key)
            if folder not in scenario.folders:
                fail(f"{section} names folder '{folder}' ({key}), which is not in the "
                     "scenario's folders", "add it to folders = [...]", section, key)
            return node_id

        agent_types = frozenset({NodeType.AGENT, NodeType.PROMPT, NodeType.HUMAN})
        for key in scenario.replies:
            target(key, "replies", agent_types, "an agent, prompt or human node")
        for key, visits in scenario.scripts.items():
            node_id = target(key, "scripts", frozenset({NodeType.SCRIPT}), "a script node")
            declared = {fact.name for fact in workflow.nodes[node_id].facts}
            for visit in visits:
                for fact in visit.facts:
                    if fact not in declared:
                        fail(f"scripts.{node_id} writes fact '{fact}', which the node does "
                             "not declare", f"declared facts: {', '.join(sorted(declared))}",
                             "scripts", fact)
        for node_id, probe_visits in scenario.probes.items():
            node_of(node_id, "probes", frozenset({NodeType.PROBE}), "a probe node")
            for observed in probe_visits:
                for key, value in observed.items():
                    folder, _, fact = key.partition(".")
                    if folder not in scenario.folders:
                        fail(f"probes.{node_id} names folder '{folder}' ({key}), which is not "
                             "in the scenario's folders", "add it to folders = [...]",
                             "probes", key)
                    if fact not in PER_FOLDER_FACTS:
                        fail(f"probes.{node_id} names fact '{fact}' ({key}), which a probe "
                             "does not write", "per-folder facts: "
                             + ", ".join(sorted(PER_FOLDER_FACTS)), "probes", key)
                    if fact == "pr.state" and value not in PR_STATES:
                        fail(f"probes.{node_id}: {key} = {value!r} is not a PR state",
                             f"use one of {', '.join(PR_STATES)}", "probes", key,
                             value=str(value))
        for node_id in scenario.stages:
            node_of(node_id, "stages", EFFECT_TYPES,
                    "a publish, merge, respond, wait or worktree node")
        for node_id in scenario.answers:
            node_of(node_id, "answers", frozenset({NodeType.HUMAN}), "a human gate")
        for key in scenario.tokens:
            target(key, "tokens", frozenset({NodeType.AGENT, NodeType.PROMPT}),
                   "an agent or prompt node")
        if scenario.stop is not None:
            node_of(scenario.stop.after, "stop", None, "")
            if scenario.stop.on != "ticket" and scenario.stop.on not in scenario.folders:
                fail(f"stop.on names '{scenario.stop.on}', neither 'ticket' nor one of the "
                     "scenario's folders", "write on = \"ticket\" or a folder's name",
                     "stop", scenario.stop.on)
        for key in scenario.expect.visits:
            target(key, "expect.visits", None, "")
        for node_id in scenario.expect.path or []:
            if node_id != ANY_NODES:
                node_of(node_id, "expect.path", None, "")

